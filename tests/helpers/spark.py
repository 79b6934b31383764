"""A Spark standalone cluster of a test's own: one master and one worker started from
the pyspark wheel (`spark-class`), on loopback and free ports, the worker with a work
folder of its own; stopped after. Its executors are processes of their own, in working
directories of their own (`<work>/<app id>/<executor id>/`), as on a cluster whose
machines do not share the driver's files: what the driver does not ship, they lack."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.error import URLError

from helpers.kafka import free_port_pair
from helpers.replication import wait_until

_START_TIMEOUT_S = 90.0
_STOP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class StandaloneSpark:
    """A running master and worker."""

    master_url: str
    #: The master's web UI, whose `/json/` lists the workers.
    ui: str
    #: Where everything the cluster writes is: `master.log`, `worker.log`, the
    #: worker's `work/` and the executors' scratch space `local/`.
    folder: Path

    @property
    def work(self) -> Path:
        """The worker's work folder: one folder per application, one per executor in it."""
        return self.folder / "work"

    def status(self) -> dict | None:
        """The master's status (its workers among it), or None while it does not answer."""
        try:
            with urllib.request.urlopen(f"{self.ui}/json/", timeout=5) as answer:
                return json.load(answer)
        except (URLError, OSError, ValueError):
            return None

    def executor_dirs(self) -> list[Path]:
        """The working directories of every executor the worker started."""
        return sorted(path for path in self.work.glob("app-*/*") if path.is_dir())

    def files(self) -> list[Path]:
        """Every file the cluster wrote: its logs, the executors' logs and files."""
        return sorted(
            path for path in self.folder.rglob("*") if path.is_file() and not path.is_symlink()
        )


@contextmanager
def standalone_spark(folder: Path) -> Iterator[StandaloneSpark]:
    """A master (RPC and web UI on a free port pair) and one worker (2 cores, 2 GB)
    under `folder`, both bound to 127.0.0.1, until the `with` ends."""
    port = free_port_pair()
    spark = StandaloneSpark(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{port + 1}", folder)
    spark.work.mkdir(parents=True)
    spark_class = str(Path(sys.executable).with_name("spark-class"))
    pyspark = importlib.util.find_spec("pyspark")
    assert pyspark is not None and pyspark.origin is not None, "pyspark is not installed"
    env = {
        **os.environ,
        # The wheel's jars; spark-class would ask the `python3` on PATH, not this one.
        "SPARK_HOME": str(Path(pyspark.origin).parent),
        # Executors inherit the worker's environment: loopback for them too, and
        # their scratch space in the folder (searched with the rest: `files`).
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_DIRS": str(folder / "local"),
    }
    master_command = [spark_class, "org.apache.spark.deploy.master.Master"]
    master_command += ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(port + 1)]
    worker_command = [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1"]
    worker_command += ["--webui-port", "0", "--cores", "2", "--memory", "2g"]
    worker_command += ["--work-dir", str(spark.work), spark.master_url]
    with ExitStack() as stack:
        # Both at once: the worker retries until the master answers.
        master = stack.enter_context(_process(master_command, folder / "master.log", env))
        worker = stack.enter_context(_process(worker_command, folder / "worker.log", env))
        wait_until(
            lambda: (
                master.poll() is not None
                or worker.poll() is not None
                or (spark.status() or {}).get("aliveworkers") == 1
            ),
            _START_TIMEOUT_S,
            "the Spark worker registered with the master",
        )
        for process, log in ((master, "master.log"), (worker, "worker.log")):
            assert process.poll() is None, (folder / log).read_text()[-3000:]
        yield spark


@contextmanager
def _process(command: list[str], log: Path, env: dict[str, str]) -> Iterator[subprocess.Popen]:
    """`command` running (its output in `log`) until the `with` ends; then SIGTERM
    (a worker kills its executors), SIGKILL if it does not stop."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    try:
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
