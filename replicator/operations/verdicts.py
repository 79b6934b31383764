"""One verdict per flow for the DR status page: healthy, degraded or failing, with
the supervisor's reasons.

The reasons are the supervisor's own `Problem`s (`replicator.operations.health`),
from two places:

- the rules that judge one item from figures (a stopped partition, records lost
  to retention, lag beyond the bound, no live worker, a target that cannot be
  read) are applied to the page's snapshot, so the verdict is as fresh as the
  page (its lag is the lag the workers last published);
- what only the supervisor can judge, because it reads more than the snapshot
  (checkpoints stalled while consumer groups moved on, heartbeats stalled, a flow
  left stopped by a procedure that ended badly), comes from its last run's
  sample in the DR state store, if that run is recent (`SUPERVISOR_FRESH_S`).

The bounds are those of the supervisor's last run (its DAG params), the defaults
when it has not run.

Which problems fail a flow and which degrade it:

- **failing**: nothing replicates, or data is lost: no live worker (`workers`), a
  partition stopped by its failure policy (`stopped`), records deleted by
  retention before they were copied (`retention`), heartbeats stalled
  (`heartbeats`: nothing gets through end to end), a target that cannot be read
  (`unreadable`: nothing can be said), a flow left stopped by a failed procedure
  (`left stopped`: nothing will start it again);
- **degraded**: replication runs but a failover now would cost more than it
  should: lag beyond the bound (`lag`: RPO grows), checkpoints stalled while
  groups moved on (`checkpoints`: consumers would restart further back);
- **healthy**: no problem. A flow the state store stopped on purpose (the
  standby direction, a completed failover) is healthy, with a note saying so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal, cast

from replicator.config.model import FlowConfig, ReplicatorConfig, shell_safe
from replicator.operations.checkpoint_reads import CheckpointTallies
from replicator.operations.dr_status import DrStatus, FlowStatus, dr_status
from replicator.operations.health import (
    Bounds,
    Check,
    Problem,
    lag_problem,
    no_worker_problem,
    partition_problems,
    unreadable_problem,
)
from replicator.statestore import FlowSample, StateStore, StateStoreError
from replicator.statestore.flow_states import HALTED, PAUSED, STOPPED

Verdict = Literal["healthy", "degraded", "failing"]

#: The verdict each kind of problem gives its flow (see the module's docstring).
SEVERITY: Mapping[Check, Verdict] = {
    "workers": "failing",
    "stopped": "failing",
    "retention": "failing",
    "heartbeats": "failing",
    "unreadable": "failing",
    "left stopped": "failing",
    "lag": "degraded",
    "checkpoints": "degraded",
}
#: Checks only the supervisor makes (it reads consumer groups, heartbeats and the
#: procedures' leases); the page takes their problems from its last run.
SUPERVISOR_CHECKS: frozenset[Check] = frozenset({"checkpoints", "heartbeats", "left stopped"})
#: A supervisor run older than this (it runs every minute) is not used for verdicts.
SUPERVISOR_FRESH_S = 300.0
_RANK: Mapping[Verdict, int] = {"healthy": 0, "degraded": 1, "failing": 2}


@dataclass(frozen=True)
class SupervisorRun:
    """What the supervisor's last run found for one flow (from its sample)."""

    at: datetime
    problems: list[Problem]
    bounds: Bounds


@dataclass(frozen=True)
class FlowVerdict:
    flow: str
    verdict: Verdict
    #: Failing problems first, then degrading ones.
    problems: list[Problem] = field(default_factory=list)
    #: What the verdict does not say on its own (stopped on purpose, supervisor silent).
    notes: list[str] = field(default_factory=list)
    #: When the supervisor last ran for the flow (None: never, as far as samples go).
    supervised_at: datetime | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "verdict": self.verdict,
            "problems": [{**asdict(p), "severity": SEVERITY[p.check]} for p in self.problems],
            "notes": list(self.notes),
            "supervised_at": None if self.supervised_at is None else self.supervised_at.isoformat(),
        }


@dataclass(frozen=True)
class Overview:
    """The snapshot, each flow's verdict, and the supervisor's samples of a window
    (per flow, oldest first): everything the DR status page shows."""

    status: DrStatus
    verdicts: list[FlowVerdict]
    samples: dict[str, list[FlowSample]]
    #: Why the samples are missing (the store failed on them; the snapshot may say more).
    samples_error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The snapshot's JSON (`DrStatus.as_dict`) with the verdicts added."""
        data = self.status.as_dict()
        data["verdicts"] = [v.as_dict() for v in self.verdicts]
        data["samples_error"] = self.samples_error
        return data


def overview(
    config: ReplicatorConfig,
    store: StateStore,
    window: timedelta,
    tallies: CheckpointTallies | None = None,
) -> Overview:
    """The snapshot (`dr_status`, with the caller's checkpoint `tallies`), the
    supervisor's samples of the last `window`, and the verdicts they give."""
    status = dr_status(config, store, tallies=tallies)
    samples: dict[str, list[FlowSample]] = {}
    error = None
    try:
        for sample in store.samples.since(status.generated_at - window):
            samples.setdefault(sample.flow, []).append(sample)
    except StateStoreError as exc:
        error = f"supervisor samples unavailable: {exc}"
    runs = {flow: supervisor_run(rows[-1]) for flow, rows in samples.items()}
    return Overview(status, flow_verdicts(config, status, runs), samples, error)


def supervisor_run(sample: FlowSample) -> SupervisorRun:
    """What the supervisor found for a flow in the run that took `sample`."""
    return SupervisorRun(
        sample.sampled_at,
        [Problem(**cast("dict[str, Any]", problem)) for problem in sample.problems],
        Bounds.from_params(sample.bounds),
    )


def flow_verdicts(
    config: ReplicatorConfig, status: DrStatus, supervisor: Mapping[str, SupervisorRun]
) -> list[FlowVerdict]:
    """A verdict for each flow of `status`, in its order; `supervisor` holds the
    supervisor's last run per flow name (those it has not run for are absent)."""
    configs = {flow.name: flow for flow in config.flows}
    return [
        flow_verdict(configs[flow.name], flow, supervisor.get(flow.name), status.generated_at)
        for flow in status.flows
    ]


def flow_verdict(
    config: FlowConfig, flow: FlowStatus, supervisor: SupervisorRun | None, now: datetime
) -> FlowVerdict:
    """The verdict of one flow: its live problems, and the supervisor's own checks
    from its last run if that is fresh."""
    fresh = supervisor is not None and (now - supervisor.at).total_seconds() <= SUPERVISOR_FRESH_S
    bounds = supervisor.bounds if supervisor is not None else Bounds()
    notes = []
    problems = _live_problems(config, flow, bounds)
    if fresh and supervisor is not None:
        problems += [p for p in supervisor.problems if p.check in SUPERVISOR_CHECKS]
    elif flow.desired_state not in HALTED:
        ran = (
            "has not run"
            if supervisor is None
            else f"last ran {(now - supervisor.at).total_seconds() / 60:.0f} min ago"
        )
        notes.append(
            f"checkpoints and heartbeats not judged: the supervisor {ran} (is the "
            "replicator_supervisor DAG unpaused?)"
        )
    if flow.desired_state == STOPPED:
        notes.append(
            "stopped in the DR state store on purpose (the standby direction, or a "
            "failover stopped it): nothing to replicate"
        )
    elif flow.desired_state == PAUSED:
        notes.append(
            "paused by an operator: nothing replicates until "
            f"`replicator flows resume {shell_safe(flow.name)}`"
        )
    problems.sort(key=lambda p: -_RANK[SEVERITY[p.check]])
    verdict: Verdict = max(
        (SEVERITY[p.check] for p in problems), key=_RANK.__getitem__, default="healthy"
    )
    return FlowVerdict(
        flow.name, verdict, problems, notes, None if supervisor is None else supervisor.at
    )


def _live_problems(config: FlowConfig, flow: FlowStatus, bounds: Bounds) -> list[Problem]:
    """The problems the snapshot itself shows, by the supervisor's rules."""
    if flow.error is not None:
        return [unreadable_problem(config, flow.error)]
    if flow.desired_state in HALTED:
        return []  # the supervisor checks only whether a procedure left it stopped
    problems = [] if flow.live_workers else [no_worker_problem(config)]
    for partition in flow.partitions:
        problems += partition_problems(config, partition, bounds)
        if partition.lag is not None and partition.lag > bounds.max_lag_records:
            where = f"{partition.topic}[{partition.partition}]"
            problems.append(
                lag_problem(config, where, partition.lag, "as its worker last reported", bounds)
            )
    return problems
