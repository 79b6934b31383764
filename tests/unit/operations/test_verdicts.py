"""The DR status page's verdict per flow (no Kafka): the supervisor's rules applied to
a snapshot, its last run's own findings taken while fresh, and which problems make a
flow degraded and which make it failing."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import get_args

import pytest

from replicator.config import load_config
from replicator.config.model import FlowConfig
from replicator.operations.dr_status import FlowStatus, PartitionLag, WorkerInfo
from replicator.operations.health import (
    Bounds,
    Check,
    Problem,
    lag_problem,
    no_worker_problem,
    partition_problems,
)
from replicator.operations.verdicts import (
    SEVERITY,
    SUPERVISOR_FRESH_S,
    FlowVerdict,
    SupervisorRun,
    flow_verdict,
    supervisor_run,
)
from replicator.statestore import FlowSample

from helpers.replication import write_config

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


@pytest.fixture
def flow(tmp_path: Path) -> FlowConfig:
    return load_config(write_config(tmp_path, "127.0.0.1:1", "127.0.0.1:2", "orders")).flow(
        "primary->dr"
    )


def _partition(partition: int, **changes: object) -> PartitionLag:
    row = PartitionLag("orders", partition, "replicating", 0, 10, 10, 0, None, NOW, False)
    return replace(row, **changes)


def _status(*partitions: PartitionLag, live: bool = True, **changes: object) -> FlowStatus:
    worker = WorkerInfo("w1", "running", "host", 1, len(partitions), live, NOW, NOW)
    status = FlowStatus("primary->dr", "primary", "dr", "running", [worker], list(partitions))
    return replace(status, **changes)


def _run(*problems: Problem, age_s: float = 30.0, bounds: Bounds | None = None) -> SupervisorRun:
    return SupervisorRun(NOW - timedelta(seconds=age_s), list(problems), bounds or Bounds())


def _checkpoints_stalled(flow: FlowConfig) -> Problem:
    return Problem(flow.name, "checkpoints", "primary.checkpoints.internal on 'dr'", "x", "y")


def test_every_check_of_the_supervisor_has_a_severity() -> None:
    assert set(SEVERITY) == set(get_args(Check))
    assert {check for check, verdict in SEVERITY.items() if verdict == "degraded"} == {
        "lag",
        "checkpoints",
    }


def test_a_flow_with_nothing_wrong_is_healthy(flow: FlowConfig) -> None:
    verdict = flow_verdict(flow, _status(_partition(0), _partition(1)), _run(), NOW)
    assert (verdict.verdict, verdict.problems, verdict.notes) == ("healthy", [], [])
    assert verdict.supervised_at == NOW - timedelta(seconds=30)


def test_lag_beyond_the_supervisors_bound_degrades_with_its_words(flow: FlowConfig) -> None:
    status = _status(_partition(0, lag=60), _partition(1, lag=40))
    strict = Bounds(max_lag_records=50)
    verdict = flow_verdict(flow, status, _run(bounds=strict), NOW)
    assert verdict.verdict == "degraded"
    assert verdict.problems == [
        lag_problem(flow, "orders[0]", 60, "as its worker last reported", strict)
    ]
    assert "60 records behind" in str(verdict.problems[0])
    # With the default bound (10,000 records) the same lag is fine.
    assert flow_verdict(flow, status, _run(), NOW).verdict == "healthy"


def test_a_stopped_partition_or_lost_records_fail_the_flow(flow: FlowConfig) -> None:
    stopped = _partition(0, state="stopped", error="record too large")
    lost = _partition(1, lost=3)
    verdict = flow_verdict(flow, _status(stopped, lost, _partition(2, lag=20_000)), _run(), NOW)
    assert verdict.verdict == "failing"
    # Failing problems first, each exactly as the supervisor words it.
    expected = partition_problems(flow, stopped, Bounds()) + partition_problems(
        flow, lost, Bounds()
    )
    assert verdict.problems[:2] == expected
    assert [p.check for p in verdict.problems] == ["stopped", "retention", "lag"]
    assert "record too large" in verdict.problems[0].detail


def test_no_live_worker_fails_and_an_unreadable_target_says_only_that(flow: FlowConfig) -> None:
    verdict = flow_verdict(flow, _status(_partition(0), live=False), _run(), NOW)
    assert (verdict.verdict, verdict.problems) == ("failing", [no_worker_problem(flow)])
    unreadable = _status(error="target cluster 'dr' is unreachable", workers=[], partitions=[])
    verdict = flow_verdict(flow, unreadable, _run(_checkpoints_stalled(flow)), NOW)
    assert verdict.verdict == "failing"
    assert [p.check for p in verdict.problems] == ["unreadable", "checkpoints"]
    assert "target cluster 'dr' is unreachable" in verdict.problems[0].detail


def test_the_supervisors_own_checks_count_while_its_run_is_fresh(flow: FlowConfig) -> None:
    status = _status(_partition(0))
    # Its lag finding is not taken: the page judges lag from its own, fresher snapshot.
    old_lag = lag_problem(flow, "orders[0]", 5000, "measured", Bounds())
    fresh = flow_verdict(flow, status, _run(_checkpoints_stalled(flow), old_lag), NOW)
    assert (fresh.verdict, [p.check for p in fresh.problems]) == ("degraded", ["checkpoints"])
    stale = flow_verdict(
        flow, status, _run(_checkpoints_stalled(flow), age_s=SUPERVISOR_FRESH_S + 60), NOW
    )
    assert (stale.verdict, stale.problems) == ("healthy", [])
    assert stale.notes == [
        "checkpoints and heartbeats not judged: the supervisor last ran 6 min ago (is the "
        "replicator_supervisor DAG unpaused?)"
    ]
    never = flow_verdict(flow, status, None, NOW)
    assert "the supervisor has not run" in never.notes[0]


def test_a_flow_stopped_on_purpose_is_healthy_unless_left_stopped(flow: FlowConfig) -> None:
    stopped = _status(desired_state="stopped", workers=[], partitions=[])
    verdict = flow_verdict(flow, stopped, _run(), NOW)
    assert verdict.verdict == "healthy"
    assert verdict.notes[0].startswith("stopped in the DR state store on purpose")
    left = Problem(flow.name, "left stopped", "flow state in the DR state store", "x", "abort")
    assert flow_verdict(flow, stopped, _run(left), NOW).verdict == "failing"


def test_a_sample_gives_back_the_supervisors_problems_and_bounds(flow: FlowConfig) -> None:
    problem = _checkpoints_stalled(flow)
    sample = FlowSample(
        flow.name,
        NOW,
        problems=({k: str(v) for k, v in problem.__dict__.items()},),
        bounds={"max_lag_records": 50, "max_checkpoint_age_s": 90.0},
    )
    run = supervisor_run(sample)
    assert run == SupervisorRun(NOW, [problem], Bounds(max_lag_records=50, max_checkpoint_age_s=90))


def test_the_json_names_each_problems_severity(flow: FlowConfig) -> None:
    verdict = FlowVerdict(flow.name, "failing", [no_worker_problem(flow)], ["a note"], NOW)
    data = verdict.as_dict()
    assert data["problems"][0]["check"] == "workers"
    assert data["problems"][0]["severity"] == "failing"
    assert (data["notes"], data["supervised_at"]) == (["a note"], NOW.isoformat())
