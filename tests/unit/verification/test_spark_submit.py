"""The spark-submit command is built deterministically, without Spark, and a local
job's JVM is tuned to the records its plan reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from replicator.verification.driver_jvm import (
    DEFAULT_JAVA_OPTIONS,
    DRIVER_MEMORY,
    HOT_DRIVER_MEMORY_MIB,
    HOT_JIT_OPTIONS,
    QUICK_JIT_OPTIONS,
    QUICK_JIT_RECORDS,
    available_memory_mib,
    class_archive,
    driver_conf,
    spark_default,
)
from replicator.verification.plan import PartitionWindow, VerificationPlan
from replicator.verification.run import VerificationRun, spark_job
from replicator.verification.submit import SparkSubmit


@pytest.fixture(autouse=True)
def _no_class_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A JVM folder without the driver's class archive (`make setup` writes one here)."""
    monkeypatch.setenv("REPLICATOR_JVM_DIR", str(tmp_path / "no-archive"))


def test_command_has_master_jars_conf_in_a_stable_order() -> None:
    submit = SparkSubmit(
        Path("spark/verify.py"),
        ["--plan", "plan.json", "--out", "out"],
        master="spark://spark-master:7077",
        jars=[Path("a.jar"), Path("b.jar")],
        conf={"spark.ui.enabled": "false", "spark.executor.memory": "2g"},
        name="verify primary->dr",
    )
    assert submit.command("/opt/spark/bin/spark-submit") == [
        "/opt/spark/bin/spark-submit",
        "--master", "spark://spark-master:7077",
        "--name", "verify primary->dr",
        "--jars", "a.jar,b.jar",
        "--conf", "spark.executor.memory=2g",
        "--conf", "spark.ui.enabled=false",
        "spark/verify.py", "--plan", "plan.json", "--out", "out",
    ]  # fmt: skip


def test_local_defaults() -> None:
    assert SparkSubmit(Path("job.py")).command() == [
        "spark-submit", "--master", "local[2]", "job.py"
    ]  # fmt: skip


def test_shipped_truststore_and_keystore_go_to_files_after_py_files() -> None:
    submit = SparkSubmit(
        Path("verify.py"),
        ["--plan", "plan.json"],
        master="spark://spark-master:7077",
        py_files=[Path("/run/verification-packages.zip")],
        files=[Path("/secrets/ca.pem"), Path("/secrets/replicator.keystore.pem")],
    )
    assert submit.command() == [
        "spark-submit",
        "--master", "spark://spark-master:7077",
        "--py-files", "/run/verification-packages.zip",
        "--files", "/secrets/ca.pem,/secrets/replicator.keystore.pem",
        "verify.py", "--plan", "plan.json",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("master", "records", "options"),
    [
        ("local[2]", QUICK_JIT_RECORDS - 1, QUICK_JIT_OPTIONS),
        ("local[2]", QUICK_JIT_RECORDS, HOT_JIT_OPTIONS),
        ("spark://cluster:7077", QUICK_JIT_RECORDS * 10, None),
    ],
    ids=["small local: C1 only", "large local: C2 for the hot loops", "cluster: as deployed"],
)
def test_a_local_jobs_jvm_compiles_for_its_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, master: str, records: int, options: str | None
) -> None:
    # Records read on both sides: a window of `records` source offsets and no copy.
    window = PartitionWindow("orders", 0, "primary.orders", 0, records, 0, 0, 0)
    VerificationPlan("primary->dr", "primary", "a:9092", "b:9092", [window]).write(
        tmp_path / "plan.json"
    )
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    job = spark_job(VerificationRun("run-1", tmp_path, "primary->dr", 0), master)
    assert job.conf.get(DEFAULT_JAVA_OPTIONS) == options
    # The operator's own driver options are Spark's to apply, after ours: never replaced.
    assert "spark.driver.extraJavaOptions" not in job.conf


def test_an_operators_own_default_java_options_are_kept_after_ours(tmp_path: Path) -> None:
    (tmp_path / "spark-defaults.conf").write_text(
        "# the administrator's\n"
        "spark.driver.extraJavaOptions  -Dfrom=extra\n"
        "spark.driver.defaultJavaOptions=-Xss4m -Dsite=a:b\n",
        encoding="utf-8",
    )
    environ = {"SPARK_CONF_DIR": str(tmp_path)}
    assert spark_default("spark.driver.extraJavaOptions", environ) == "-Dfrom=extra"
    conf = driver_conf("local[2]", QUICK_JIT_RECORDS, environ, memory_mib=1024)
    assert conf == {DEFAULT_JAVA_OPTIONS: f"{HOT_JIT_OPTIONS} -Xss4m -Dsite=a:b"}
    # $SPARK_HOME/conf when $SPARK_CONF_DIR is not set, as spark-submit reads it.
    (tmp_path / "conf").mkdir()
    (tmp_path / "spark-defaults.conf").rename(tmp_path / "conf" / "spark-defaults.conf")
    home = {"SPARK_HOME": str(tmp_path)}
    assert driver_conf("local[2]", 1, home) == {
        DEFAULT_JAVA_OPTIONS: f"{QUICK_JIT_OPTIONS} -Xss4m -Dsite=a:b"
    }
    assert driver_conf("local[2]", 1, {}) == {DEFAULT_JAVA_OPTIONS: QUICK_JIT_OPTIONS}


@pytest.mark.parametrize(
    ("records", "memory_mib", "heap"),
    [
        (QUICK_JIT_RECORDS, 24 * 1024, f"{HOT_DRIVER_MEMORY_MIB}m"),
        (QUICK_JIT_RECORDS, 8 * 1024, "2048m"),
        (QUICK_JIT_RECORDS, 4 * 1024, None),
        (QUICK_JIT_RECORDS - 1, 24 * 1024, None),
    ],
    ids=["large run: 4 GiB", "a quarter of a smaller machine", "not under 1g", "small run"],
)
def test_a_large_local_run_gets_a_heap_that_spares_the_collector(
    records: int, memory_mib: int, heap: str | None
) -> None:
    conf = driver_conf("local[2]", records, {}, memory_mib=memory_mib)
    assert conf.get(DRIVER_MEMORY) == heap
    assert DRIVER_MEMORY not in driver_conf("spark://cluster:7077", records, {}, memory_mib)


def test_an_operators_own_driver_memory_is_left_to_spark(tmp_path: Path) -> None:
    (tmp_path / "spark-defaults.conf").write_text("spark.driver.memory 2g\n", encoding="utf-8")
    environ = {"SPARK_CONF_DIR": str(tmp_path)}
    conf = driver_conf("local[2]", QUICK_JIT_RECORDS, environ, memory_mib=64 * 1024)
    assert DRIVER_MEMORY not in conf


def test_the_memory_available_is_the_containers_limit_when_lower(tmp_path: Path) -> None:
    limit = tmp_path / "memory.max"
    limit.write_text(f"{3 * (1 << 30)}\n", encoding="ascii")
    assert available_memory_mib(limit) == min(3 * 1024, available_memory_mib(tmp_path / "none"))
    limit.write_text("max\n", encoding="ascii")
    assert available_memory_mib(limit) == available_memory_mib(tmp_path / "none") > 0


def test_a_local_driver_maps_the_class_archive_when_make_setup_wrote_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPLICATOR_JVM_DIR", str(tmp_path / "jvm dir"))
    archive = class_archive()
    assert archive == tmp_path / "jvm dir" / "spark-verify.jsa"
    assert "SharedArchiveFile" not in driver_conf("local[2]", 1, {})[DEFAULT_JAVA_OPTIONS]
    archive.parent.mkdir()
    archive.touch()
    quick, hot = (driver_conf("local[2]", n, {}, 1024) for n in (1, QUICK_JIT_RECORDS))
    # One word of the options, quoted: Spark splits them as a shell does.
    mapped = f'-XX:SharedArchiveFile="{archive}"'
    assert quick[DEFAULT_JAVA_OPTIONS] == f"{QUICK_JIT_OPTIONS} {mapped}"
    assert hot[DEFAULT_JAVA_OPTIONS] == f"{HOT_JIT_OPTIONS} {mapped}"
    assert driver_conf("spark://cluster:7077", 1, {}) == {}
