"""The suites' process imports GX without what the suites never use, and what it
defers still works when used (a process of its own: the launcher changes imports); started
ahead of its run, it runs the suites it is handed, or exits when handed nothing."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from replicator_expectations import launch

from replicator.verification.job import SUITES_AHEAD, SUITES_LAUNCHER
from replicator.verification.plan import PartitionWindow, VerificationPlan
from replicator.verification.processes import Ahead
from replicator.verification.suites import SuitesAhead

PROBE = """
import sys
from replicator_expectations import launch
launch.lighten()
import great_expectations, great_expectations.expectations
from replicator_expectations import report
left_out = [name for name in launch.LEFT_OUT if sys.modules.get(name, 0) is not None]
deferred = [type(sys.modules[name]).__name__ for name in launch.DEFERRED]
from scipy import stats
print(left_out, deferred, round(float(stats.norm.cdf(0.0)), 2), len(report.suites(
    {"max_lag_records": 0, "max_lag_seconds": 0, "min_retention_margin_seconds": 0})))
"""


def test_gx_is_imported_without_spark_or_sqlalchemy_and_scipy_loads_when_used() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], check=True, capture_output=True, text=True, timeout=120
    ).stdout.split("\n")[-2]
    assert out == "[] ['_LazyModule', '_LazyModule'] 0.5 6"


def test_replicator_starts_the_launcher_by_its_own_names() -> None:
    assert launch.__name__ == SUITES_LAUNCHER
    assert SUITES_AHEAD == launch.AHEAD


def test_a_process_started_ahead_and_never_asked_is_stopped() -> None:
    with SuitesAhead():
        pass  # the run failed before its suites
    ahead = Ahead([sys.executable, "-m", SUITES_LAUNCHER, SUITES_AHEAD])
    assert ahead.close() == -signal.SIGTERM  # stopped while it imports, not waited for
    assert not ahead.alive


def test_a_process_started_ahead_runs_the_suites_of_the_run_it_is_handed(tmp_path: Path) -> None:
    # A run with nothing to read: no job, the suites take the plan's tables.
    window = PartitionWindow("orders", 0, "primary.orders", 10, 10, 10, 10, in_flight=0)
    VerificationPlan("primary->dr", "primary", "a:9092", "b:9092", [window]).write(
        tmp_path / "plan.json"
    )
    with SuitesAhead() as suites:
        summary = suites.run(tmp_path)
    assert summary["success"], summary
    assert set(summary["suites"]) == {"parity", "faults", "mappings", "digests", "samples", "lag"}
    assert (tmp_path / "suites.log").exists()
    assert Path(summary["data_docs"]).exists()
    # Each validation's result is kept beside the Data Docs (the context is in memory).
    kept = json.loads((tmp_path / "gx" / "validations" / "lag.json").read_text())
    assert [r["success"] for r in kept["results"]] == [True]
    assert {r["expectation_config"]["kwargs"]["column"] for r in kept["results"][0]["results"]} == {
        "lag_records",
        "lag_seconds",
        "retention_margin_seconds",
    }
