"""The processes a verification run starts (the Spark job, the suites): their
environment, how an exit code is read, and `Ahead`, a process started before its run
is planned."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from replicator.errors import ReplicatorError

#: How much of a failed process's log its error shows.
OUTPUT_TAIL = 4000


class Ahead:
    """A process started before its run is planned, so that what it does before it
    needs the run (imports, a session with a server) overlaps the planning: `ask`
    hands it its arguments (a JSON list, one line on its input) and waits for it;
    `close` ends one never asked (the run failed, or needs no job)."""

    def __init__(self, command: list[str], env: Mapping[str, str] | None = None) -> None:
        self._output = tempfile.TemporaryFile()  # noqa: SIM115 (closed by `close`)
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=self._output,
            stderr=subprocess.STDOUT,
            env={**environment(), **(env or {})},
        )

    @property
    def alive(self) -> bool:
        """Whether it still waits to be asked (not ended by a signal or an error)."""
        return self._process.poll() is None

    def ask(self, arguments: list[str], log: Path) -> int:
        """Its exit code once it ran with `arguments`; its output goes to `log`."""
        self._process.communicate(f"{json.dumps(arguments)}\n".encode())
        self._output.seek(0)
        log.write_bytes(self._output.read())
        self._output.close()
        return self._process.returncode

    def close(self) -> int | None:
        """Its exit code, once it ended: one never asked is stopped (SIGTERM) rather than
        waited for, since it may still be importing (a run with nothing new would wait
        for a Spark client it does not need)."""
        if self._process.poll() is None:
            self._process.terminate()
            self._process.communicate()
        self._output.close()
        return self._process.returncode


def run_process(
    command: list[str],
    what: str,
    log: Path,
    failing_ok: bool = False,
    env: Mapping[str, str] | None = None,
) -> None:
    """Run `command` in the run's folder (the log's), with `env` added to the
    environment; its output goes to `log`."""
    with log.open("wb") as out:
        code = subprocess.run(
            command,
            check=False,
            cwd=log.parent,
            env={**environment(), **(env or {})},
            stdout=out,
            stderr=subprocess.STDOUT,
        ).returncode
    check_exit(code, what, log, failing_ok)


def environment() -> dict[str, str]:
    """The subprocesses' environment: this Python for Spark's driver, and for its
    workers unless a cluster's own is set (they need only PySpark, see
    `job.py_files`)."""
    return {"PYSPARK_PYTHON": sys.executable, **os.environ, "PYSPARK_DRIVER_PYTHON": sys.executable}


def check_exit(code: int | None, what: str, log: Path, failing_ok: bool) -> None:
    """Exit code 1 is the suites' "failed"; any other but 0 an error, with the log's tail."""
    if code == 0 or (failing_ok and code == 1):
        return
    tail = log.read_text(errors="replace")[-OUTPUT_TAIL:]
    raise ReplicatorError(f"{what} exited with {code}; its log is {log}:\n{tail}")
