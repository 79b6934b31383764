"""The cutover's phases: where the applications' downtime goes, on every run.

A planned failover or a failback stops the applications' clients at its fence and
lets them resume at its switch; in between the procedure drains replication,
stops the flow and moves the groups. Each step's start and end are saved already
(`steps.step_times`); this names the moments an operator asks about (`PHASES`: the
fence issued, every client fenced, replication drained, the flow stopped, the groups
translated and committed, the switch written, the first client resumed on the other
side at the switch's epoch), each as seconds after the fence was issued: the start of
the applications' downtime.

A phase the run does not have (an unplanned failover has no fence and counts from
its start) or that has not happened yet is None. The figures go into the run's
history when it ends (`Procedure._finish`), so its report, the DR status page and
`replicator history` show them; `first_client_resumed` comes from the clients'
reports (`ClientState.since`), which move on with the next cutover, hence kept then.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Protocol

from replicator.statestore import ROUTE_LEASE_S
from replicator.statestore.applications import ApplicationStore

#: How often `cutover_phases` looks for the first client resumed while it waits.
_RESUME_POLL_S = 0.1

#: Each phase, and what it means (the report and the status page say it).
PHASES: dict[str, str] = {
    "fence_issued": "fence issued: the applications' clients told to stop",
    "clients_fenced": "every client fenced: stopped, its work durable",
    "drained": "replication drained: every record the clients wrote copied",
    "flow_stopped": "the flow that copied them stopped",
    "groups_translated": "groups translated and committed on the other cluster",
    "switch_written": "switch written: clients may resume on the other cluster",
    "first_client_resumed": "first client running on the other cluster",
}


class StepTime(Protocol):
    """A step's times, as `steps.step_times` gives them (read-only: a frozen dataclass)."""

    @property
    def name(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def last_started_at(self) -> datetime | None: ...
    @property
    def ended_at(self) -> datetime | None: ...


#: The step whose end each phase is (a failback drains and stops its reverse flow).
_ENDS: dict[str, tuple[str, ...]] = {
    "clients_fenced": ("fence",),
    "drained": ("drain", "drain_reverse"),
    "flow_stopped": ("stop_flow", "stop_reverse"),
    "groups_translated": ("commit_offsets",),
    "switch_written": ("switch",),
}


def cutover_phases(
    applications_store: ApplicationStore,
    steps: Iterable[StepTime],
    started: datetime,
    applications: Iterable[str],
    to_cluster: str,
    *,
    wait_s: float = 0.0,
) -> dict[str, float | None]:
    """Seconds after the fence was issued (or after `started`, the run's start, when
    the run has no fence) of each phase in `PHASES`; None where it has not happened.
    `wait_s`: when no client has resumed on `to_cluster` yet but some were seen within
    their route lease, wait up to this long for the first (a run that ends right after
    its switch ends before its clients look at the store again)."""
    names = list(applications)
    resumed = _first_resumed(applications_store, names, to_cluster)
    deadline = time.monotonic() + wait_s
    while (
        resumed is None and time.monotonic() < deadline and _clients_live(applications_store, names)
    ):
        time.sleep(_RESUME_POLL_S)
        resumed = _first_resumed(applications_store, names, to_cluster)
    by_name = {step.name: step for step in steps}
    fence = by_name.get("fence")
    zero = fence.last_started_at if fence is not None and fence.last_started_at else started
    moments: dict[str, datetime | None] = {"fence_issued": zero if fence is not None else None}
    for phase, ends in _ENDS.items():
        ended = next((by_name[n] for n in ends if n in by_name), None)
        done = ended is not None and ended.state == "done"
        moments[phase] = ended.ended_at if done and ended is not None else None
    moments["first_client_resumed"] = resumed
    return {
        phase: None if (at := moments.get(phase)) is None else round((at - zero).total_seconds(), 3)
        for phase in PHASES
    }


def _clients_live(store: ApplicationStore, applications: list[str]) -> bool:
    """Whether any client of the applications reported within its route lease."""
    return any(store.clients(name, seen_within_s=ROUTE_LEASE_S) for name in applications)


def _first_resumed(
    store: ApplicationStore, applications: Iterable[str], to_cluster: str
) -> datetime | None:
    """When the first client of the applications reported running on `to_cluster` at
    its application's epoch now (the switch's, unless something moved it since)."""
    firsts = []
    for name in applications:
        epoch = store.get(name).epoch
        firsts += [
            c.since
            for c in store.clients(name)
            if c.since is not None
            and (c.cluster, c.epoch, c.state) == (to_cluster, epoch, "running")
        ]
    return min(firsts, default=None)


def describe(phases: dict[str, Any]) -> list[tuple[str, float | None, str]]:
    """(phase, seconds, what it means) for each phase a run recorded, in order."""
    return [(name, phases.get(name), meaning) for name, meaning in PHASES.items() if name in phases]


def phases_line(phases: dict[str, Any]) -> str:
    """The recorded phases on one line: `fence_issued 0.0, clients_fenced 0.6, ...`."""
    return ", ".join(
        f"{name} {'-' if seconds is None else f'{seconds:.1f}'}"
        for name, seconds, _ in describe(phases)
    )
