"""The supervisor's samples (no Kafka; a SQLite state store): one row per flow and
run with what it measured and found, nothing claimed for flows it could not read or
does not run, and rows older than the retention pruned as new ones come."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from replicator.operations.health import Bounds, Problem
from replicator.operations.samples import record_samples
from replicator.operations.supervision import FlowHealth, SupervisionReport
from replicator.operations.verdicts import supervisor_run
from replicator.statestore import FlowSample, StateStore


def test_a_run_records_one_sample_per_flow_with_its_problems_and_bounds(tmp_path: Path) -> None:
    store = StateStore(f"sqlite:///{tmp_path / 'state.db'}")
    lag = Problem("a->b", "lag", "orders[0]", "900 records behind", "add workers")
    unreadable = Problem("c->d", "unreadable", "clusters 'c' and 'd'", "down", "start them")
    report = SupervisionReport(
        flows=[
            FlowHealth("a->b", True, 2, 3, 900, 1200, 12.5, 1.5),
            FlowHealth("c->d", True, readable=False),
            FlowHealth("b->a", wanted_running=False),
        ],
        problems=[lag, unreadable],
    )
    bounds = Bounds(max_lag_records=500)
    began = datetime.now(UTC)
    record_samples(store.samples, report, bounds, timedelta(hours=6))

    samples = {s.flow: s for s in store.samples.since(began - timedelta(seconds=1))}
    measured = samples["a->b"]
    assert measured.sampled_at >= began - timedelta(seconds=1)
    assert (measured.live_workers, measured.total_lag, measured.max_lag) == (2, 1200, 900)
    assert (measured.checkpoint_age_s, measured.heartbeat_age_s) == (12.5, 1.5)
    assert measured.bounds["max_lag_records"] == 500
    # The page gets the supervisor's problems back as they were.
    assert supervisor_run(measured).problems == [lag]
    assert supervisor_run(measured).bounds == bounds
    # Unread or not running: no figures claimed (a chart shows a gap, not a zero).
    for flow in ("c->d", "b->a"):
        assert (samples[flow].total_lag, samples[flow].live_workers) == (None, None)
    assert supervisor_run(samples["c->d"]).problems == [unreadable]
    assert samples["b->a"].problems == ()


def test_samples_older_than_the_retention_are_pruned(tmp_path: Path) -> None:
    store = StateStore(f"sqlite:///{tmp_path / 'state.db'}")
    now = datetime.now(UTC)
    old, recent = (FlowSample("a->b", now - timedelta(hours=h), total_lag=h) for h in (7, 1))
    assert store.samples.record([old, recent], keep=timedelta(days=1)) == 0
    report = SupervisionReport(flows=[FlowHealth("a->b", True, 1, 1, 0, 0)])
    record_samples(store.samples, report, Bounds(), timedelta(hours=6))
    kept = store.samples.since(now - timedelta(days=1))
    assert [s.total_lag for s in kept] == [1, 0]  # oldest first; the 7 h old one gone
    assert store.samples.since(now - timedelta(days=1), flow="x->y") == []
