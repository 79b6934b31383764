"""The `spark-submit` command of a verification job, built deterministically (as the
Airflow Spark provider's hook does), so it is testable without Spark."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class SparkSubmit:
    """`spark-submit [options] application [args]`: `master` is any Spark master URL
    (`local[2]` here, `spark://...`, `yarn`, `k8s://...` on a cluster); `jars` go to
    `--jars` (the Kafka connector; a cluster may use `--packages` via `conf`); `py_files`
    to `--py-files` (the packages the executors import, `job.py_files`); `files` to
    `--files`, which ships them into every executor's working directory (truststores
    and keystores, for executors that do not share the driver's files)."""

    application: Path
    arguments: list[str] = field(default_factory=list)
    master: str = "local[2]"
    jars: list[Path] = field(default_factory=list)
    conf: dict[str, str] = field(default_factory=dict)
    name: str | None = None
    py_files: list[Path] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)

    def command(self, spark_submit: str = "spark-submit") -> list[str]:
        command = [spark_submit, "--master", self.master]
        if self.name:
            command += ["--name", self.name]
        if self.jars:
            command += ["--jars", ",".join(str(jar) for jar in self.jars)]
        if self.py_files:
            command += ["--py-files", ",".join(str(path) for path in self.py_files)]
        if self.files:
            command += ["--files", ",".join(str(path) for path in self.files)]
        for key, value in sorted(self.conf.items()):
            command += ["--conf", f"{key}={value}"]
        return [*command, str(self.application), *self.arguments]
