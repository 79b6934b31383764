"""The suites' process on this host: the GX suites and Data Docs over a run's tables
(`replicator_expectations`, run as a process of its own: `replicator` never imports
GX), started ahead of its run (`SuitesAhead`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from replicator.errors import ReplicatorError
from replicator.verification.job import SUITES_AHEAD, SUITES_LAUNCHER
from replicator.verification.processes import Ahead, check_exit

#: What the suites' error messages call them.
SUITES = "the verification suites"


def suites_command() -> list[str]:
    """The suites' launcher started ahead (it imports what of GX the suites use, then
    waits for its arguments: `replicator_expectations.launch`)."""
    return [sys.executable, "-m", SUITES_LAUNCHER, SUITES_AHEAD]


def suites_arguments(directory: Path, thresholds: Path | None) -> list[str]:
    """The suites' arguments for the run in `directory` (Data Docs under its `gx`)."""
    arguments = ["--results", str(directory), "--gx-root", str(directory / "gx")]
    return arguments if thresholds is None else [*arguments, "--thresholds", str(thresholds)]


def read_summary(directory: Path) -> dict[str, Any]:
    """The summary the suites wrote for the run in `directory`."""
    summary_file = directory / "summary.json"
    if not summary_file.exists():
        raise ReplicatorError(f"the verification suites wrote no summary; see {directory}")
    return json.loads(summary_file.read_text())


class SuitesAhead:
    """The suites' process, ahead (`Ahead`): its import of GX (about 1.5 s, most of a
    run with nothing new) overlaps the plan and the Spark job; `run` waits for the
    summary."""

    #: Where the suites run, as the run's summary tells it.
    where = "a process of the run's own"

    def __init__(self, thresholds: Path | None = None) -> None:
        self._process = Ahead(suites_command())
        self._thresholds = thresholds

    def run(self, directory: Path) -> dict[str, Any]:
        log = directory / "suites.log"
        code = self._process.ask(suites_arguments(directory, self._thresholds), log)
        check_exit(code, SUITES, log, failing_ok=True)
        return {**read_summary(directory), "suites_ran": self.where}

    def __enter__(self) -> SuitesAhead:
        return self

    def __exit__(self, *_: object) -> None:
        self._process.close()
