"""The cutover's phases (`replicator.procedures.phases`) on a real SQLite store (no
Kafka): each is the end of its step, in seconds after the fence was issued, and the
first client resumed is the first report of a client running on the other cluster at
the switch's epoch (`ClientState.since`, kept while a client reports the same)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from replicator.procedures.phases import PHASES, cutover_phases, describe, phases_line
from replicator.statestore import StateStore

_T0 = datetime(2026, 12, 4, 10, 0, tzinfo=UTC)


@dataclass(frozen=True)
class _Step:
    name: str
    state: str
    last_started_at: datetime | None
    ended_at: datetime | None


def _step(name: str, start_s: float, end_s: float | None, state: str = "done") -> _Step:
    end = None if end_s is None else _T0 + timedelta(seconds=end_s)
    return _Step(name, state, _T0 + timedelta(seconds=start_s), end)


def test_each_phase_is_its_steps_end_after_the_fence(store: StateStore) -> None:
    store.applications.register("orders", "primary")
    steps = [
        _step("preflight", -3.0, -2.5),
        _step("fence", 0.0, 0.6),
        _step("drain", 0.6, 1.1),
        _step("stop_flow", 1.1, 1.9),
        _step("checkpoint", 1.9, 2.2),
        _step("commit_offsets", 2.2, 2.5),
        _step("switch", 2.5, 2.55),
    ]
    phases = cutover_phases(store.applications, steps, _T0 - timedelta(seconds=5), ["orders"], "dr")
    assert phases == {
        "fence_issued": 0.0,
        "clients_fenced": 0.6,
        "drained": 1.1,
        "flow_stopped": 1.9,
        "groups_translated": 2.5,
        "switch_written": 2.55,
        "first_client_resumed": None,  # no client reported on dr
    }
    assert list(phases) == list(PHASES)
    assert phases_line(phases).startswith("fence_issued 0.0, clients_fenced 0.6, drained 1.1")
    assert [name for name, _, _ in describe(phases)] == list(PHASES)


def test_a_failback_drains_and_stops_its_reverse_flow_and_a_failed_step_is_no_phase(
    store: StateStore,
) -> None:
    store.applications.register("orders", "dr")
    steps = [
        _step("fence", 0.0, 0.4),
        _step("drain_reverse", 0.4, 0.9),
        _step("stop_reverse", 0.9, 1.2),
        _step("commit_offsets", 1.2, 1.5, state="failed"),
    ]
    phases = cutover_phases(store.applications, steps, _T0, ["orders"], "primary")
    assert (phases["drained"], phases["flow_stopped"]) == (0.9, 1.2)
    assert phases["groups_translated"] is None and phases["switch_written"] is None


def test_the_first_client_resumed_is_the_first_running_report_at_the_switchs_epoch(
    store: StateStore,
) -> None:
    store.applications.register("orders", "primary")
    store.applications.report_client("orders", "c1", "consumer", "primary", 0, "running")
    epoch = store.applications.fence("orders")
    store.applications.report_client("orders", "c1", "consumer", "primary", epoch, "fenced")
    fence_at = store.applications.clients("orders")[0].since
    assert fence_at is not None
    switched = store.applications.switch("orders", "dr").epoch
    time.sleep(0.05)
    store.applications.report_client("orders", "c1", "consumer", "dr", switched, "running")
    [resumed] = store.applications.clients("orders")
    assert resumed.since is not None and resumed.since > fence_at
    time.sleep(0.05)
    store.applications.report_client("orders", "c1", "consumer", "dr", switched, "running")
    [again] = store.applications.clients("orders")
    assert again.since == resumed.since, "a report of the same state moved its start"
    assert again.last_seen > resumed.last_seen

    steps = [_Step("fence", "done", fence_at, fence_at)]
    phases = cutover_phases(store.applications, steps, fence_at, ["orders"], "dr")
    first = phases["first_client_resumed"]
    assert first is not None
    assert abs(first - (resumed.since - fence_at).total_seconds()) < 0.002
