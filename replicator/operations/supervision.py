"""One look at replication's health, with dead workers restarted: the supervisor.

Airflow's `replicator_supervisor` DAG runs `supervise` every minute. It first
restarts dead workers (through a `Launcher`, only those running a flow the DR
state store wants running: a failover stops flows on purpose), then checks
every flow the store wants running and reports all problems at once, each
naming the flow, the topic and partition, and the fix:

- a flow with no live worker;
- a partition stopped by a failure policy (the worker's own error says why);
- lag beyond a bound, in records, measured from the data (`replicator.operations.lag`);
- records deleted by retention before they were replicated (a retention gap);
- stalled checkpoints: consumer groups moved on over replicated records, but
  the newest checkpoint is older than a bound, so an unplanned failover would
  restart them further back than needed;
- stalled heartbeats: the newest heartbeat on the target is older than a
  bound, so nothing gets through end to end.

Staleness bounds (missing workers, checkpoints, heartbeats) count from when the
flow last started: the later of its start in the state store and the start of
its longest-running live worker (`started_ms` in the worker's status). A flow
that started a minute ago (the reverse flow of a failover, a restarted worker)
has had no time to write a checkpoint, and is not paged for it.

A flow the store wants stopped is not checked, with one exception: a flow left
stopped by a procedure that is no longer running (it holds no lease on the flow)
and did not succeed (it failed, was rejected or aborted, or was abandoned: its
lease lapsed). Nothing replicates the flow and nothing will start it again, so
the supervisor names the procedure and how to undo what it did.

Bounds have defaults that suit the local stack; the DAG's params override them.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from confluent_kafka import KafkaException

from replicator.config import load_config
from replicator.config.model import FlowConfig, ReplicatorConfig
from replicator.engine.status import STALE_AFTER_S, WorkerStatus, live_workers, status_values
from replicator.errors import ReplicatorError
from replicator.kafka.errors import error_text
from replicator.operations.dr_status import checkpoint_age_s
from replicator.operations.health import (
    Bounds,
    Problem,
    checkpoint_problems,
    heartbeat_age_s,
    heartbeat_problems,
    lag_problems,
    no_worker_problem,
    status_problems,
    unreadable_problem,
)
from replicator.operations.incident_messages import problem_findings
from replicator.operations.incidents import IncidentPolicy, Notice, track
from replicator.operations.lag import measure_lag
from replicator.operations.launchers import Launcher, LaunchResult, Worker
from replicator.operations.samples import DEFAULT_RETENTION, record_samples
from replicator.procedures.steps import SWITCH_STEP, history_run
from replicator.statestore import FlowState, StateStore
from replicator.statestore.flow_states import STOPPED, FlowStateStore, runs
from replicator.statestore.leases import LeaseStore


@dataclass(frozen=True)
class FlowHealth:
    flow: str
    #: False when the state store has stopped the flow: then only whether a
    #: procedure left it stopped is checked.
    wanted_running: bool
    live_workers: int = 0
    partitions: int = 0
    max_lag: int = 0
    total_lag: int = 0
    #: Seconds since the newest checkpoint and heartbeat reached the target (None: not
    #: emitted by the flow, none yet, or not measured).
    checkpoint_age_s: float | None = None
    heartbeat_age_s: float | None = None
    #: False when the flow's clusters could not be read (its figures are not measured).
    readable: bool = True


@dataclass
class SupervisionReport:
    restarted: list[LaunchResult] = field(default_factory=list)
    flows: list[FlowHealth] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    #: With an incident policy: what to tell people now (claimed; see `incidents`).
    notices: list[Notice] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "restarted": [r.as_dict() for r in self.restarted],
            "flows": [asdict(f) for f in self.flows],
            "problems": [str(p) for p in self.problems],
        }


class SupervisionError(ReplicatorError):
    """Replication is unhealthy; the message lists every problem (the report is attached)."""

    def __init__(self, report: SupervisionReport) -> None:
        restarted = (
            f" (restarted this run: {', '.join(r.name for r in report.restarted)})"
            if report.restarted
            else ""
        )
        lines = "\n".join(f"- {problem}" for problem in report.problems)
        super().__init__(f"{len(report.problems)} replication problem(s){restarted}:\n{lines}")
        self.report = report


def supervise(
    config: ReplicatorConfig,
    store: StateStore,
    launcher: Launcher | None = None,
    bounds: Bounds | None = None,
    incidents: IncidentPolicy | None = None,
    *,
    sample_retention: timedelta = DEFAULT_RETENTION,
) -> SupervisionReport:
    """Restart dead workers (with a `launcher`), check every flow the store wants
    running; SupervisionError listing every problem, else the report. With an
    `incidents` policy, the problems open, keep and resolve incidents, and the
    report's `notices` say what to tell people now (once per incident)."""
    report = check(config, store, launcher, bounds or Bounds(), sample_retention)
    if incidents is not None:
        findings = problem_findings(report.problems)
        report.notices = track(store.incidents, "supervisor", None, findings, policy=incidents)
    if report.problems:
        raise SupervisionError(report)
    return report


def check(
    config: ReplicatorConfig,
    store: StateStore,
    launcher: Launcher | None,
    bounds: Bounds,
    sample_retention: timedelta = DEFAULT_RETENTION,
) -> SupervisionReport:
    """`supervise` without raising: the report, problems included; a sample per
    flow recorded for the DR status page (kept for `sample_retention`)."""
    report = SupervisionReport()
    restarted_flows: set[str] = set()
    if launcher is not None:
        report.restarted = _restart_dead(launcher, store.flows, report, restarted_flows)
    for flow in config.flows:
        state = store.flows.get(flow.name)
        if not runs(state):
            # Paused by an operator: on purpose, not a problem (the page shows it).
            report.flows.append(FlowHealth(flow.name, wanted_running=False))
            if state is not None and state.state == STOPPED:
                report.problems += _left_stopped(flow, state, store)
            continue
        try:
            health = _check_flow(flow, state, bounds, flow.name in restarted_flows, report)
            report.flows.append(health)
        except (ReplicatorError, KafkaException) as exc:
            report.problems.append(unreadable_problem(flow, error_text(exc)))
            report.flows.append(FlowHealth(flow.name, wanted_running=True, readable=False))
    record_samples(store.samples, report, bounds, sample_retention)
    return report


def _wanted_running(store: FlowStateStore, flow: str) -> bool:
    """As `replicator run` decides (`runs`)."""
    return runs(store.get(flow))


def _restart_dead(
    launcher: Launcher,
    flow_states: FlowStateStore,
    report: SupervisionReport,
    restarted_flows: set[str],
) -> list[LaunchResult]:
    """Restart dead workers with at least one flow the store wants running."""
    flows_of: dict[str, list[str]] = {}

    def wanted(worker: Worker) -> bool:
        try:
            flows = [flow.name for flow in load_config(worker.config).flows]
        except ReplicatorError as exc:
            report.problems.append(
                Problem(
                    "-",
                    "workers",
                    f"worker {worker.name} ({worker.where})",
                    f"dead, and its configuration {worker.config} is unusable: {exc}",
                    "restore the file, or stop managing the worker (launcher stop)",
                )
            )
            return False
        flows_of[worker.name] = flows
        return any(_wanted_running(flow_states, flow) for flow in flows)

    restarted = launcher.restart_dead(wanted)
    for result in restarted:
        restarted_flows.update(flows_of.get(result.name, []))
    return restarted


def _left_stopped(flow: FlowConfig, state: FlowState, store: StateStore) -> list[Problem]:
    """A problem when the procedure that stopped `flow` (the flow state's `by`) is no
    longer running and did not succeed: nothing will start the flow again. Fine are
    a flow stopped by no procedure (the standby direction `make run` stops), by one
    that succeeded (a failover stops its forward flow for good), and by one that
    runs: it holds a lease (on its own flow and applications, which for a failback
    are not the reverse flow it stops), or a procedure holds this flow."""
    procedure = state.detail.get("by")
    if not procedure or _running(store.leases, str(procedure), flow):
        return []
    run = history_run(store.runs, str(procedure))
    if run is not None and run.outcome == "succeeded":
        return []
    since = f"stopped since {state.updated_at:%Y-%m-%d %H:%M:%S} UTC by procedure {procedure}"
    if run is None:
        detail = f"{since}, which is not in the history"
    elif run.outcome is None:
        detail = f"{since} ({run.kind} run {run.run_id}), which was abandoned: it holds no lease"
    else:
        failed_step = run.details.get("failed_step")
        at = f" at step {failed_step!r}" if failed_step else ""
        ended = {"rejected": "was rejected", "aborted": "was aborted"}.get(run.outcome, run.outcome)
        detail = f"{since} ({run.kind} run {run.run_id}), which {ended}{at}"
    switched = any(s.name == SWITCH_STEP and s.state == "done" for s in store.runs.steps(procedure))
    fix = (
        f"it switched the applications already, so abort does not apply: once the cause is "
        f"fixed, run the {run.kind if run else 'procedure'} again with the same id "
        f"({procedure}) to complete it"
        if switched
        else f"`replicator abort {procedure}` (or the abort_procedure DAG) unfences its "
        "applications and starts the flows it stopped; or, to keep the applications where "
        f"they are, start the flow {flow.name} again"
    )
    return [
        Problem(
            flow.name,
            "left stopped",
            "flow state in the DR state store",
            f"{detail}; nothing replicates from {flow.source.alias!r} to "
            f"{flow.target.alias!r} and nothing will start the flow again",
            fix,
        )
    ]


def _running(store: LeaseStore, procedure: str, flow: FlowConfig) -> bool:
    """Whether `procedure` (or the full drill it is a half of, `<drill id>.failover`)
    holds a lease that has not lapsed, or any procedure holds one on `flow`."""
    now = datetime.now(UTC)
    return any(
        lease.expires_at > now
        and (
            lease.owner == procedure
            or procedure.startswith(f"{lease.owner}.")
            or lease.resource == f"flow {flow.name}"
        )
        for lease in store.all()
    )


def _running_since(state: FlowState | None, workers: list[WorkerStatus]) -> float | None:
    """Epoch seconds since which `flow` has run without a break: the later of its last
    start in the state store and the start of its longest-running live worker (None
    when neither is known: no state row, and workers too old to report their start)."""
    starts = [w.started_ms / 1000 for w in workers if w.started_ms]
    since = [min(starts)] if starts else []
    if state is not None and state.state != STOPPED:
        since.append(state.updated_at.timestamp())
    return max(since, default=None)


def _check_flow(
    flow: FlowConfig,
    state: FlowState | None,
    bounds: Bounds,
    just_restarted: bool,
    report: SupervisionReport,
) -> FlowHealth:
    problems = report.problems
    values = status_values(flow.target)  # the status topic, read once for both looks
    workers = live_workers(flow, values)
    since = _running_since(state, workers)
    running_for = None if since is None else max(0.0, time.time() - since)
    if not workers and not just_restarted and not _younger(running_for, STALE_AFTER_S):
        problems.append(no_worker_problem(flow))
    problems += status_problems(flow, bounds, values)
    lag = measure_lag(flow)
    problems += lag_problems(flow, lag, bounds)
    if flow.emit_checkpoints_enabled and not _younger(running_for, bounds.max_checkpoint_age_s):
        problems += checkpoint_problems(flow, lag, bounds, running_for, values)
    if flow.emit_heartbeats_enabled and not _younger(running_for, bounds.max_heartbeat_age_s):
        problems += heartbeat_problems(flow, bounds, running_for)
    return FlowHealth(
        flow.name,
        True,
        len(workers),
        len(lag.partitions),
        lag.max_behind,
        lag.total_behind,
        checkpoint_age_s(flow, values) if flow.emit_checkpoints_enabled else None,
        heartbeat_age_s(flow) if flow.emit_heartbeats_enabled else None,
    )


def _younger(running_for: float | None, bound_s: float) -> bool:
    """Whether the flow started less than `bound_s` ago: too soon to call it stalled."""
    return running_for is not None and running_for <= bound_s
