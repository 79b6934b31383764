"""Verification of a flow's copy: what to compare (`plan`, without Spark), how the Spark
job under `spark/` is submitted (`submit`) and a whole run (`run`: the plan, the Spark job
and the Great Expectations suites under `expectations/`, each in a process of its own,
and the summary in the state store). It may import `offsets`, `engine` and everything
below them, never Spark or Great Expectations themselves; `cli` and the Airflow plugins
import it, through the names below.

The names are imported when first used (PEP 562), not with the package: the Spark
job's driver imports `kafka_options` and `plan` from here, and importing `run` with
them would load the state store (SQLAlchemy, Alembic) into every verification's
driver for nothing, seconds of its start on two loaded cores."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from replicator.verification.incremental import SAMPLE_PERIOD
    from replicator.verification.kafka_options import connection_environment
    from replicator.verification.run import (
        Verification,
        VerificationRun,
        finish,
        records_to_read,
        run_on_server,
        run_suites,
        shipped_links,
        spark_job,
        start,
        verify,
    )
    from replicator.verification.server import is_remote

#: Each name, and the module it comes from.
_EXPORTS = {
    "SAMPLE_PERIOD": "replicator.verification.incremental",
    "connection_environment": "replicator.verification.kafka_options",
    "is_remote": "replicator.verification.server",
    "Verification": "replicator.verification.run",
    "VerificationRun": "replicator.verification.run",
    "finish": "replicator.verification.run",
    "records_to_read": "replicator.verification.run",
    "run_on_server": "replicator.verification.run",
    "run_suites": "replicator.verification.run",
    "shipped_links": "replicator.verification.run",
    "spark_job": "replicator.verification.run",
    "start": "replicator.verification.run",
    "verify": "replicator.verification.run",
}

__all__ = [
    "SAMPLE_PERIOD",
    "Verification",
    "VerificationRun",
    "connection_environment",
    "finish",
    "is_remote",
    "records_to_read",
    "run_on_server",
    "run_suites",
    "shipped_links",
    "spark_job",
    "start",
    "verify",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value  # once: later look-ups find it without this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
