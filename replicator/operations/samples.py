"""The supervisor's samples: after each run (every minute), one row per flow in the
DR state store with what the run measured (lag, checkpoint and heartbeat age, live
workers) and found (its problems, and the bounds it judged by).

The DR status page draws its charts from them and takes from the newest the
verdicts only the supervisor can give (`replicator.operations.verdicts`). They are
kept for `retention` (the supervisor DAG's `sample_retention_hours`, a few hours
by default): enough to see whether lag grows, small enough to read on every page
load.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from replicator.operations.health import Bounds
from replicator.statestore import FlowSample
from replicator.statestore.samples import SampleStore

if TYPE_CHECKING:  # supervision imports this module
    from replicator.operations.supervision import SupervisionReport

#: How long samples are kept by default: the page's default chart window and more.
DEFAULT_RETENTION = timedelta(hours=6)


def record_samples(
    store: SampleStore, report: SupervisionReport, bounds: Bounds, retention: timedelta
) -> None:
    """One sample per flow of `report`, then those older than `retention` pruned."""
    now = datetime.now(UTC)
    samples = []
    for flow in report.flows:
        problems = tuple(
            {k: str(v) for k, v in asdict(p).items()}
            for p in report.problems
            if p.flow == flow.flow
        )
        measured = flow.wanted_running and flow.readable
        samples.append(
            FlowSample(
                flow.flow,
                now,
                live_workers=flow.live_workers if measured else None,
                total_lag=flow.total_lag if measured else None,
                max_lag=flow.max_lag if measured else None,
                checkpoint_age_s=flow.checkpoint_age_s,
                heartbeat_age_s=flow.heartbeat_age_s,
                problems=problems,
                bounds=asdict(bounds),
            )
        )
    store.record(samples, retention)
