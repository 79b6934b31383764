"""Procedures as named, resumable steps.

A DR procedure (failover, failback, drill) is a fixed sequence of named
steps. Each step's report is saved in the state store when it completes
(`store.runs.save_step(procedure_id, name, "done", report)`), so running the
procedure again with the same id skips what is done and returns the saved
reports: an orchestrator retry, or an operator resuming after a failure,
never applies a step twice. `run_step` runs one step alone, for an Airflow
task per step; the steps of one id may run in different processes, because
everything a later step needs from an earlier one is in the store.

Dry run executes the read-only steps (checks) and asks each mutating step
what it would do, without doing it and without writing to the store.

The run is recorded in the store's history (`store.runs.start` on the first step,
`store.runs.finish` when the last step completes or a step fails) with RPO (records
not replicated) and RTO (seconds from the start of the run to the end of the
step that moved the applications), and in its details two figures: the
procedure's `duration_seconds` (start to end) and the applications'
`downtime_seconds` (from the start of the `fence` step, when their clients stop,
to the end of the `switch`; see `Procedure.downtime`).

A run that ended "rejected" or "aborted" (`replicator.procedures.abort`) runs no
further step: a cleared task or a rerun with its id raises `ProcedureEnded`.

Leases: every step that runs first takes (or renews) a lease in the store on
the procedure's flow and applications (`leases`), and the run releases them
when it finishes, whatever its outcome; so a second procedure on the same flow
or application is refused, naming the holder, instead of interleaving its steps.
A lease lapses after `lease_ttl_s` without a step, so a dead orchestrator does
not hold it forever. While a step runs, a renewer (`replicator.procedures.renewal`)
keeps its leases, so a step may run longer than a lease lasts; a step that lost
one anyway stops acting (`LeaseLost`) and is not saved as done. A step's waits
are bounded by the procedure's `timeout_s`, which must be below `lease_ttl_s`
(`check_timeouts`).

A running step also holds its run's own lease (`running_lease`, a short one,
renewed the same way, released when the step ends), which is how an abort
(`replicator.procedures.abort`) and a second task of the same run see that a step
is running: the abort is refused instead of undoing a fence under a step that
goes on. A step checks that its run has not ended once it holds that lease, and
`store.runs.finish` never overwrites an aborted or rejected run.

For the run's report (`replicator.reports`): each step's start is saved too, as
a bookkeeping entry once its leases are held (`started_entry`; the step's own
entry is saved when it ends), who started the run goes with its params
(`started_by`), and an orchestrator that asked a person records the answer
(`record_decision`).
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, Literal, cast

from replicator.errors import ReplicatorError
from replicator.procedures import phases
from replicator.procedures.renewal import Hold, LeaseRenewer, renewing
from replicator.statestore import DEFAULT_LEASE_TTL_S, LeaseHeld, RunRecord, StateStore
from replicator.statestore.runs import FINAL_OUTCOMES, RunEnded, RunStore

if TYPE_CHECKING:
    from replicator.procedures.approval import ApprovalGate

log = logging.getLogger(__name__)

StepReport = dict[str, Any]
#: The bookkeeping entry that ties a procedure id to its run in the history.
_RUN_ENTRY = "_run"
#: The bookkeeping entry that records who approved or rejected the run (or that
#: nobody answered), when an orchestrator asked a person before the fence.
_DECISION_ENTRY = "_decision"
#: The step that stops the applications' clients, and the one that lets them run
#: again on the other cluster.
FENCE_STEP, SWITCH_STEP = "fence", "switch"
#: Outcomes after which a procedure id runs no further step.
ENDED_OUTCOMES = FINAL_OUTCOMES
#: How long the lease of a running step on its run lasts unless renewed (it is,
#: while the step runs): an abort of a run whose orchestrator died mid-step waits
#: at most this long.
RUNNING_LEASE_TTL_S = 60.0
#: How long a run that switched its applications waits at its end for their first
#: client to resume on the other side, for the cutover's last phase (at most a route
#: lease: a client that looked at the store before the switch looks again by then).
RESUME_WAIT_S = 6.0
Outcome = Literal["succeeded", "failed", "planned", "incomplete", "rejected", "aborted"]


class StepFailed(ReplicatorError):
    """A step raised; its error is saved with the step, and a retry with the same
    procedure id runs it again (and skips the steps before it)."""


class ProcedureEnded(ReplicatorError):
    """The run was rejected or aborted: none of its steps runs again (a rejected
    failover must never fence or switch when a task of it is cleared)."""


class StepRunning(ReplicatorError):
    """A step of the run is running elsewhere (another task, or an abort holds the
    run): this one does nothing and records nothing."""


def running_lease(procedure_id: str) -> str:
    """The lease a running step of `procedure_id` (or an abort of it) holds on the run."""
    return f"run {procedure_id}"


def history_run(store: RunStore, procedure_id: str) -> RunRecord | None:
    """The history run of `procedure_id` (None: no step of it has run)."""
    entry = store.step(procedure_id, _RUN_ENTRY)
    return None if entry is None else store.get(str(entry.result["run_id"]))


_STARTED_SUFFIX = "_started"


def started_entry(step: str) -> str:
    """The bookkeeping entry saved when `step` starts, once its leases are held: its
    first save is the step's first start, its last the last attempt's (the fence's
    start is when the applications' clients stop, and tells an abort to unfence them)."""
    return f"_{step}{_STARTED_SUFFIX}"


@dataclass(frozen=True)
class StepTime:
    """When one step of a run started and ended, and how it ended: `state` "done",
    "failed", or "running" (started, not ended). `started_at` is the first attempt's
    start (None: the step ran before starts were saved), `last_started_at` the last
    attempt's (later than `started_at`: the step was retried)."""

    name: str
    state: str
    started_at: datetime | None
    last_started_at: datetime | None
    ended_at: datetime | None
    report: StepReport

    @property
    def seconds(self) -> float | None:
        """From the first start to the end (None while unknown)."""
        if self.started_at is None or self.ended_at is None:
            return None
        return seconds_between(self.started_at, self.ended_at)


def step_times(store: RunStore, procedure_id: str) -> list[StepTime]:
    """Every step of `procedure_id` that started or ended, in the order they started."""
    saved = store.steps(procedure_id)
    starts = {s.name: s for s in saved if s.name.startswith("_")}
    ends = {s.name: s for s in saved if not s.name.startswith("_")}
    running = [
        entry[1 : -len(_STARTED_SUFFIX)]
        for entry in starts
        if entry.endswith(_STARTED_SUFFIX) and entry[1 : -len(_STARTED_SUFFIX)] not in ends
    ]
    times = []
    for name in [*ends, *running]:
        start, end = starts.get(started_entry(name)), ends.get(name)
        times.append(
            StepTime(
                name=name,
                state=end.state if end else "running",
                started_at=start.first_saved_at if start else None,
                last_started_at=start.updated_at if start else None,
                ended_at=end.updated_at if end else None,
                report=end.result if end else {},
            )
        )
    return sorted(
        times, key=lambda t: t.started_at or t.ended_at or datetime.max.replace(tzinfo=UTC)
    )


def fence_started_at(store: RunStore, procedure_id: str) -> datetime | None:
    """When the fence step of `procedure_id` first started (None: it never did)."""
    entry = store.step(procedure_id, started_entry(FENCE_STEP))
    return None if entry is None else entry.first_saved_at


def record_decision(
    store: RunStore, procedure_id: str, decision: str, by: str | None, at: datetime
) -> None:
    """Record the answer to the approval question of `procedure_id` ("approved",
    "rejected", "no answer"), who gave it and when, for the run's report."""
    answer = {"decision": decision, "by": by, "at": at.isoformat()}
    store.save_step(procedure_id, _DECISION_ENTRY, "done", answer)


def decision_of(store: RunStore, procedure_id: str) -> dict[str, Any] | None:
    """The recorded answer to the approval question (None: nobody was asked)."""
    entry = store.step(procedure_id, _DECISION_ENTRY)
    return None if entry is None else entry.result


def saved_steps(store: RunStore, procedure_id: str) -> dict[str, StepReport]:
    """The saved report of every step of `procedure_id` (bookkeeping left out)."""
    return {s.name: s.result for s in store.steps(procedure_id) if not s.name.startswith("_")}


def seconds_between(start: datetime, end: datetime) -> float:
    return round((end - start).total_seconds(), 3)


@dataclass(frozen=True)
class Step:
    """One step: `action` does it and returns its report; `preview` says what it
    would do, for a dry run. A step without a preview is read-only and runs in a
    dry run as it is."""

    name: str
    action: Callable[[], StepReport]
    preview: Callable[[], StepReport] | None = None


@dataclass(frozen=True)
class StepOutcome:
    """`status`: "done" now, "skipped" (done before: `report` is the saved one),
    "planned" (dry run: what it would do), or "failed"."""

    name: str
    status: Literal["done", "skipped", "planned", "failed"]
    report: StepReport


@dataclass
class ProcedureReport:
    """What one run (or resumption) of a procedure did."""

    procedure_id: str
    kind: str
    dry_run: bool
    steps: list[StepOutcome] = field(default_factory=list)
    outcome: Outcome = "incomplete"
    rpo_records: int | None = None
    rto_seconds: float | None = None
    duration_seconds: float | None = None
    downtime_seconds: float | None = None
    #: The cutover's phases, seconds after the fence (`replicator.procedures.phases`).
    phases: dict[str, float | None] = field(default_factory=dict)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.outcome in ("succeeded", "planned")

    def report_of(self, step: str) -> StepReport:
        for outcome in self.steps:
            if outcome.name == step:
                return outcome.report
        raise KeyError(f"no step {step!r} in procedure {self.procedure_id}")


class Procedure(ABC):
    """A named sequence of steps bound to its parameters (flow, applications, ...).

    Subclasses list their steps, the parameters recorded with the run, the step
    that ends the RTO, and how RPO follows from the step reports.
    """

    kind: ClassVar[str]
    #: The step after which the applications run again (RTO ends when it completes).
    recovery_step: ClassVar[str]

    def __init__(
        self,
        store: StateStore,
        *,
        dry_run: bool = False,
        approval_gate: ApprovalGate | None = None,
    ) -> None:
        self.store = store
        self.dry_run = dry_run
        #: The person's answer that each step changing something checks first, where
        #: it runs (`approval.guarded`); None: nobody is asked (the CLI's operator).
        self.approval_gate = approval_gate
        self.procedure_id = ""
        self._planned: dict[str, StepReport] = {}
        #: The client applications this procedure moves (leased with its flow).
        self.applications: list[str] = []
        #: Set by an enclosing procedure (a full drill's halves): the leases are held
        #: under its id, and it releases them.
        self.lease_owner: str | None = None
        self.lease_ttl_s = DEFAULT_LEASE_TTL_S
        #: The bound of each wait of a step (subclasses set it); below `lease_ttl_s`.
        self.timeout_s: float | None = None
        #: Who started the run (an Airflow user, a CLI user), recorded with its params.
        self.started_by: str | None = None

    @abstractmethod
    def steps(self) -> list[Step]: ...

    @abstractmethod
    def params(self) -> dict[str, Any]:
        """What the run was asked to do, as recorded in the history (no secrets)."""

    @abstractmethod
    def flow_name(self) -> str | None: ...

    @abstractmethod
    def mode(self) -> str | None: ...

    @abstractmethod
    def rpo(self) -> int | None:
        """Records not replicated, from the reports of the steps done (see `report`)."""

    # -- running -------------------------------------------------------------------

    def run(self, procedure_id: str | None = None) -> ProcedureReport:
        """Run every step not done yet under `procedure_id` (a new id by default);
        stops at the first failing step and returns the report either way."""
        self.procedure_id = procedure_id or self._new_id()
        report = ProcedureReport(self.procedure_id, self.kind, self.dry_run)
        for step in self.steps():
            try:
                report.steps.append(self._run(step))
            except StepFailed as exc:
                report.steps.append(StepOutcome(step.name, "failed", {"error": str(exc)}))
                report.outcome, report.error = "failed", str(exc)
                return self._figures(report)
        report.outcome = "planned" if self.dry_run else "succeeded"
        return self._figures(report)

    def run_step(self, procedure_id: str, name: str) -> StepOutcome:
        """Run the one step `name` of `procedure_id` (skipped if it is done), for an
        orchestrator that runs each step as its own task. Raises StepFailed."""
        self.procedure_id = procedure_id
        steps = {step.name: step for step in self.steps()}
        if name not in steps:
            raise ReplicatorError(
                f"{self.kind} has no step {name!r}; its steps are {', '.join(steps)}"
            )
        return self._run(steps[name])

    def report(self, step: str) -> StepReport:
        """The report of an earlier step of this procedure id (saved, or planned in
        this dry run); ReplicatorError if that step has not run."""
        if step in self._planned:
            return self._planned[step]
        saved = self.store.runs.step(self.procedure_id, step)
        if saved is None or saved.state != "done":
            raise ReplicatorError(
                f"step {step!r} of {self.kind} {self.procedure_id} has not completed; "
                f"run it first (`run_step({self.procedure_id!r}, {step!r})`)"
            )
        return saved.result

    def saved_report(self, procedure_id: str) -> ProcedureReport:
        """What the run `procedure_id` did, read from the state store: each step it
        saved, in the procedure's order, and the run's outcome and figures from the
        history. Runs nothing (an orchestrator's report task)."""
        self.procedure_id = procedure_id
        report = ProcedureReport(procedure_id, self.kind, dry_run=False)
        for step in self.steps():
            saved = self.store.runs.step(procedure_id, step.name)
            if saved is not None:
                status = cast(Literal["done", "failed"], saved.state)
                report.steps.append(StepOutcome(step.name, status, saved.result))
        run = history_run(self.store.runs, procedure_id)
        if run is not None and run.outcome is not None:
            report.outcome = cast(Outcome, run.outcome)
            report.error = run.details.get("error") or run.details.get("reason")
            report.rpo_records, report.rto_seconds = run.rpo_records, run.rto_seconds
            report.duration_seconds = run.duration_seconds
            report.downtime_seconds = run.downtime_seconds
        return report

    def reported(self, step: str) -> StepReport | None:
        """The report of an earlier step, or None if it has not completed."""
        return self.report(step) if self.done(step) else None

    def done(self, step: str) -> bool:
        if self.dry_run:
            return step in self._planned
        saved = self.store.runs.step(self.procedure_id, step)
        return saved is not None and saved.state == "done"

    def check_timeouts(self) -> None:
        """Refuse a step timeout at or above the lease: a step waits up to `timeout_s`
        between two looks at its lease, so with a longer one a step whose lease
        lapsed (the store unreachable, no renewal getting through) could go on
        acting after another procedure took the lease over."""
        if self.timeout_s is not None and self.timeout_s >= self.lease_ttl_s:
            raise ReplicatorError(
                f"{self.kind}: the steps' timeout ({self.timeout_s:g}s, timeout_s) must be "
                f"below the procedure's lease ({self.lease_ttl_s:g}s, lease_ttl_s): a step "
                "waits that long between two looks at its lease, and must notice a lost "
                "lease before another procedure could take it over; lower timeout_s (or "
                "raise lease_ttl_s)"
            )

    def _run(self, step: Step) -> StepOutcome:
        self.check_timeouts()
        if self.dry_run:
            action = step.preview or step.action
            self._planned[step.name] = self._attempt(step, action)
            return StepOutcome(step.name, "planned", self._planned[step.name])
        saved = self.store.runs.step(self.procedure_id, step.name)
        if saved is not None and saved.state == "done":
            log.info("%s %s: step %s done before; skipped", self.kind, self.procedure_id, step.name)
            return StepOutcome(step.name, "skipped", saved.result)
        run_id = self.history_run_id()
        running = self._hold_run(step)
        try:
            ended = self.store.runs.get(run_id).outcome  # read while no abort can end it
            if ended in ENDED_OUTCOMES:
                raise ProcedureEnded(
                    f"{self.kind} {self.procedure_id} was {ended}, so its step {step.name!r} "
                    "does not run; start a new run (a new id) to try again"
                )
            saved = self.store.runs.step(self.procedure_id, step.name)
            if saved is not None and saved.state == "done":  # by a task that held the run
                return StepOutcome(step.name, "skipped", saved.result)
            try:
                result = self._attempt(step, step.action, running)
            except StepFailed as exc:
                self.store.runs.save_step(
                    self.procedure_id, step.name, "failed", {"error": str(exc)}
                )
                self._finish(run_id, "failed", {"failed_step": step.name, "error": str(exc)})
                raise
            self.store.runs.save_step(self.procedure_id, step.name, "done", result)
            log.info("%s %s: step %s done: %s", self.kind, self.procedure_id, step.name, result)
            if all(self.done(s.name) for s in self.steps()):
                self._finish(run_id, "succeeded", {})
        finally:
            self.store.leases.release(running.owner)
        return StepOutcome(step.name, "done", result)

    def switches_to(self) -> str | None:
        """The cluster the procedure moves its applications to (None: it moves none);
        its run records the cutover's phases (`replicator.procedures.phases`)."""
        return None

    def leases(self) -> list[str]:
        """What the procedure holds while it runs, so no other procedure changes it
        meanwhile: its flow and each application it moves."""
        flow = self.flow_name()
        applications = [f"application {a}" for a in self.applications]
        return [f"flow {flow}", *applications] if flow else applications

    def _hold_run(self, step: Step) -> Hold:
        """Take the run's lease for `step` (`running_lease`), under an owner of this
        attempt's own; StepRunning if a step of the run (or an abort) holds it."""
        owner = (
            f"{self.procedure_id} step {step.name} "
            f"({socket.gethostname()} pid {os.getpid()}, {uuid.uuid4().hex[:8]})"
        )
        ttl = min(RUNNING_LEASE_TTL_S, self.lease_ttl_s)
        resource = running_lease(self.procedure_id)
        try:
            return Hold.take(self.store.leases, [resource], owner, ttl)
        except LeaseHeld as exc:
            raise StepRunning(
                f"{self.kind} {self.procedure_id}: step {step.name!r} does not run now, "
                f"because {exc.holder.owner} holds the run (lease {resource!r} until "
                f"{exc.holder.expires_at:%Y-%m-%d %H:%M:%S} UTC): a step of it is running "
                "elsewhere, or it is being aborted. Wait for that to end, then run the step "
                "again with the same id"
            ) from exc

    def _attempt(
        self, step: Step, action: Callable[[], StepReport], running: Hold | None = None
    ) -> StepReport:
        try:
            if self.dry_run or running is None:
                return action()
            # Take the leases, or renew them; the renewer keeps them while the step runs.
            owner = self.lease_owner or self.procedure_id
            leases = Hold.take(self.store.leases, self.leases(), owner, self.lease_ttl_s)
            self.store.runs.save_step(self.procedure_id, started_entry(step.name), "done", {})
            what = f"{self.kind} {self.procedure_id}, step {step.name!r},"
            with renewing(LeaseRenewer(self.store, [running, leases], what)) as renewer:
                result = action()
                renewer.check()  # a step that lost its lease is not done: nothing acts on it
            return result
        except Exception as exc:  # any failure of a step is saved and reported the same way
            raise StepFailed(
                f"{self.kind} {self.procedure_id}, step {step.name!r}: {exc}; after fixing "
                f"the cause, run it again with the same id ({self.procedure_id}) to resume "
                "at this step"
            ) from exc

    # -- history -------------------------------------------------------------------

    def _new_id(self) -> str:
        return f"{self.kind}-{uuid.uuid4().hex[:12]}"

    def history_run_id(self) -> str:
        """The history run of this procedure id, started by its first step."""
        entry = self.store.runs.step(self.procedure_id, _RUN_ENTRY)
        if entry is not None:
            return str(entry.result["run_id"])
        params = {**self.params(), "procedure_id": self.procedure_id}
        if self.started_by:
            params["started_by"] = self.started_by
        run_id = self.store.runs.start(self.kind, self.flow_name(), self.mode(), params)
        self.store.runs.save_step(self.procedure_id, _RUN_ENTRY, "done", {"run_id": run_id})
        return run_id

    def _finish(self, run_id: str, outcome: str, extra: dict[str, Any]) -> None:
        started = self.store.runs.get(run_id).started_at
        details = {
            "procedure_id": self.procedure_id,
            "steps": saved_steps(self.store.runs, self.procedure_id),
            "duration_seconds": seconds_between(started, datetime.now(UTC)),
            "downtime_seconds": self.downtime(),
            **extra,
        }
        to_cluster = self.switches_to()
        if to_cluster is not None:
            details["phases"] = phases.cutover_phases(
                self.store.applications,
                step_times(self.store.runs, self.procedure_id),
                started,
                self.applications,
                to_cluster,
                # Only a run that switched has clients to resume on the other side: a
                # failed one ends at once.
                wait_s=RESUME_WAIT_S if self.done(SWITCH_STEP) else 0.0,
            )
        try:
            self.store.runs.finish(run_id, outcome, self.rpo(), self.rto(), details)
        except RunEnded as exc:  # its record (what an abort undid) is kept as it is
            raise ProcedureEnded(
                f"{self.kind} {self.procedure_id} ended while its step ran, so it is not "
                f"recorded as {outcome}: {exc}"
            ) from exc
        if self.lease_owner is None:  # a finished run, whatever its outcome, holds nothing
            self.store.leases.release(self.procedure_id)

    def rto(self) -> float | None:
        """Seconds from the start of the run to the completion of the recovery step."""
        if self.dry_run or not self.done(self.recovery_step):
            return None
        run = history_run(self.store.runs, self.procedure_id)
        recovered = self.store.runs.step(self.procedure_id, self.recovery_step)
        if run is None or recovered is None:
            return None
        return seconds_between(run.started_at, recovered.updated_at)

    def downtime(self) -> float | None:
        """Seconds the applications' clients were stopped: from the first start of
        the fence step to the end of the switch. Without a fence step (an unplanned
        failover: the source is gone) they count from the start of the run; without
        a switch step the procedure stops no application (0). None until switched."""
        names = {step.name for step in self.steps()}
        if SWITCH_STEP not in names:
            return 0.0
        switched = self.store.runs.step(self.procedure_id, SWITCH_STEP)
        run = history_run(self.store.runs, self.procedure_id)
        if self.dry_run or switched is None or switched.state != "done" or run is None:
            return None
        stopped = (
            fence_started_at(self.store.runs, self.procedure_id) if FENCE_STEP in names else None
        )
        return seconds_between(stopped or run.started_at, switched.updated_at)

    def _figures(self, report: ProcedureReport) -> ProcedureReport:
        if not self.dry_run:  # a dry run measures nothing
            report.rpo_records = self.rpo()
            report.rto_seconds = self.rto()
            run = history_run(self.store.runs, self.procedure_id)
            if run is not None:
                report.duration_seconds = run.duration_seconds
                report.downtime_seconds = run.downtime_seconds
                report.phases = dict(run.details.get("phases") or {})
        return report
