"""The suites' process imports GX without what the suites never use, and what it
defers still works when used (a process of its own: the launcher changes imports)."""

from __future__ import annotations

import subprocess
import sys

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
