"""Procedures driven one step at a time by an orchestrator (the Airflow DAGs).

A DAG run holds plain parameters (what its trigger form asked); each of its
tasks builds the procedure from them and runs one named step under the DAG
run's procedure id. Everything a step needs from the ones before it is in the
state store, so tasks may run in different processes, and a retried task runs
its step again only if it did not complete (see `replicator.procedures.steps`).

The DAG's shape is fixed when it is parsed, so it lists the steps of every mode
of a procedure; `run_steps` answers nothing for a step the chosen mode does not
have, and the task is skipped.

One task per step, except the cutover: the steps from `fence` to `switch` are
the applications' downtime, and Airflow needs about 1.2 s to end one task and
start the next (measured on `make run`: 0.5 to 1 s of scheduling gap plus 0.5 s
of task start-up), which over seven steps more than doubled the downtime. So
a DAG runs them as one task, `cutover` (`dag_tasks`); each step is still saved
on its own, and a retried `cutover` resumes at the first step not done.

Around the steps: `plan` says what every step would do (a dry run, for the
approval question and dry-run DAG runs), `approval_needed` whether the run must
ask a person (and refuses a `skip_approval` the deployment does not allow),
`answer` records who answered it and how (`replicator.procedures.approval`: the
run's first changing step acts only on a recorded Approve), `reject` ends a run a
person refused before anything was fenced, and `report` reads what a run did,
running nothing.

The approval policy is the deployment's: the orchestrator puts it in the request
(`ProcedureRequest.approval`) from its own settings, never from a run's params.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TypeVar, cast, get_args

from replicator.config import load_config
from replicator.errors import ReplicatorError
from replicator.procedures import approval
from replicator.procedures.abort import AbortReport, abort
from replicator.procedures.approval import ApprovalGate, ApprovalPolicy
from replicator.procedures.drill import Drill
from replicator.procedures.failback import Failback, Reconcile
from replicator.procedures.failover import Failover
from replicator.procedures.failover import Mode as FailoverMode
from replicator.procedures.full_drill import FullDrill
from replicator.procedures.steps import (
    Procedure,
    ProcedureReport,
    StepReport,
    history_run,
    record_decision,
)
from replicator.statestore import ApprovalRecord, StateStore

Kind = Literal["failover", "failback", "drill"]
M = TypeVar("M", bound=str)

#: Every step of every mode, in the order a DAG runs them.
STEPS: dict[str, list[str]] = {
    "failover": [
        "preflight",
        "fence",
        "drain",
        "unreplicated",
        "stop_flow",
        "commit_offsets",
        "grant_write",
        "switch",
        "checkpoint",
        "start_reverse",
        "verify",
    ],
    "failback": [
        "preflight",
        "reconcile",
        "replicate_missing",
        "fence",
        "start_reverse",
        "drain_reverse",
        "stop_reverse",
        "commit_offsets",
        "switch",
        "revoke_write",
        "checkpoint",
        "resume_forward",
        "verify",
    ],
}


@dataclass(frozen=True)
class ProcedureRequest:
    """What a DAG run asks for. `mode`: failover "planned" | "unplanned"; failback
    "replicate" | "report" (what to do with records that never reached the DR
    side); drill "non-disruptive" | "full"."""

    kind: Kind
    config: str
    flow: str
    applications: list[str] = field(default_factory=list)
    mode: str | None = None
    reverse: bool = False
    dry_run: bool = False
    #: May hold the state store's password: never in the repr.
    state_url: str | None = field(default=None, repr=False)
    timeout_s: float = 120.0
    #: Who asked (the Airflow user who triggered the DAG run), for the run's report.
    started_by: str | None = None
    #: Failover: give the applications' producers WRITE on the target before the switch.
    grant_write: bool = False
    #: Failback: remove the WRITE the failover's `grant_write` gave them.
    revoke_write: bool = True
    #: The run asks to go without an approval (refused unless `approval.skip` allows it).
    skip_approval: bool = False
    #: How long the run's approval question waits (at most the procedure's lease).
    approval_timeout_minutes: float | None = None
    #: The deployment's approval policy (from the orchestrator's settings, never from
    #: params); None: nobody is asked (the CLI, run by an operator at the console).
    approval: ApprovalPolicy | None = field(default=None, compare=False)
    #: The secrets `config`'s `${conn:NAME}` references resolve to (the Airflow
    #: connection's); never shown, never taken from params.
    connection: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_params(cls, kind: Kind, params: dict[str, Any]) -> ProcedureRequest:
        """From a DAG run's params (unknown keys are ignored: a DAG may hold others)."""
        known = {
            name
            for name in cls.__dataclass_fields__
            if name not in ("kind", "connection", "approval")
        }
        return cls(kind=kind, **{k: v for k, v in params.items() if k in known})


def build(request: ProcedureRequest, store: StateStore | None = None) -> Procedure:
    """The procedure a request describes, bound to the state store it names. With
    the deployment's approval policy, its changing steps check the run's recorded
    answer first (a run that may not skip the question is refused here)."""
    approval_needed(request)
    gate = None
    if request.approval is not None:
        change = approval.change_of(request.kind, request.mode)
        gate = ApprovalGate(request.approval, change, request.skip_approval)
    procedure = _build(request, store, gate)
    procedure.started_by = request.started_by
    return procedure


def approval_needed(request: ProcedureRequest) -> bool:
    """Whether the run must ask a person before it changes anything (never without
    the deployment's policy, i.e. from the CLI). Raises ApprovalRefused when it asks
    to skip the question where the deployment does not allow that, or would wait
    for the answer longer than the procedure's lease."""
    if request.approval is None:
        return False
    return approval.check_request(
        request.approval,
        request.kind,
        request.mode,
        dry_run=request.dry_run,
        skip_requested=request.skip_approval,
        timeout_minutes=request.approval_timeout_minutes,
    )


def _build(
    request: ProcedureRequest, store: StateStore | None, gate: ApprovalGate | None
) -> Procedure:
    """The procedure; `gate` goes to those whose steps change production (a drill
    that is not `full` only reads)."""
    config = load_config(Path(request.config), connection=request.connection)
    state = store or StateStore(request.state_url)
    common: dict[str, Any] = {"dry_run": request.dry_run, "timeout_s": request.timeout_s}
    if request.kind == "failover":
        return Failover(
            config, request.flow, request.applications, state,
            mode=_mode(request, FailoverMode, "planned"), reverse=request.reverse,
            grant_write=request.grant_write, approval_gate=gate, **common,
        )  # fmt: skip
    if request.kind == "failback":
        return Failback(
            config, request.flow, request.applications, state,
            reconcile=_mode(request, Reconcile, "replicate"), revoke_write=request.revoke_write,
            approval_gate=gate, **common,
        )  # fmt: skip
    if request.mode == "full":
        return FullDrill(
            config, request.flow, request.applications, state, approval_gate=gate, **common
        )
    return Drill(config, request.flow, request.applications, state, **common)


def _mode(request: ProcedureRequest, modes: Any, default: M) -> M:
    """The request's mode for `request.kind`, one of the Literal `modes` (`default`
    when none is given); ReplicatorError naming the choices otherwise."""
    mode = request.mode or default
    if mode not in get_args(modes):
        raise ReplicatorError(
            f"{request.kind}: mode {mode!r} is none of {', '.join(get_args(modes))}; "
            "set the DAG's `mode` param (or the CLI's option) to one of them"
        )
    return cast(M, mode)


#: The first and last step of each procedure's cutover (see the module's docstring).
CUTOVER: dict[str, tuple[str, str]] = {
    "failover": ("fence", "switch"),
    "failback": ("fence", "switch"),
}


def dag_tasks(kind: Kind) -> list[tuple[str, list[str]]]:
    """The tasks of procedure `kind`'s DAG, in order, with the steps each runs:
    one step per task, named after it, except the cutover, task `cutover`."""
    steps = STEPS[kind]
    if kind not in CUTOVER:
        return [(step, [step]) for step in steps]
    first, last = (steps.index(step) for step in CUTOVER[kind])
    return [
        *((step, [step]) for step in steps[:first]),
        ("cutover", steps[first : last + 1]),
        *((step, [step]) for step in steps[last + 1 :]),
    ]


def run_steps(
    request: ProcedureRequest, procedure_id: str, steps: list[str]
) -> dict[str, StepReport]:
    """Run `steps` of the requested procedure under `procedure_id`, in order: each
    one's report (the saved one if it completed before), leaving out the steps the
    mode does not have (none left: the task is skipped). Raises StepFailed with the
    failing step's error; the steps before it stay done."""
    procedure = build(request)
    known = {s.name for s in procedure.steps()}
    return {step: procedure.run_step(procedure_id, step).report for step in steps if step in known}


def run_all(request: ProcedureRequest, procedure_id: str) -> ProcedureReport:
    """Every step not done yet (a dry run: every step's plan), in one task (the
    drill). Raises ReplicatorError naming the failed step when it did not succeed."""
    report = build(request).run(procedure_id)
    if not report.ok:
        raise ReplicatorError(report.error or f"{request.kind} {procedure_id} failed")
    return report


def plan(request: ProcedureRequest) -> ProcedureReport:
    """What every step of the requested procedure would do now: a dry run, which
    reads the clusters and the store and changes nothing. Raises ReplicatorError
    when a check fails (the procedure could not run as asked)."""
    report = build(replace(request, dry_run=True)).run()
    if not report.ok:
        raise ReplicatorError(report.error or f"{request.kind}: the plan failed")
    return report


def reject(request: ProcedureRequest, procedure_id: str, reason: str) -> AbortReport:
    """End run `procedure_id` as "rejected" (a person said no, or nobody answered):
    whatever it fenced or stopped runs again, and none of its steps ever runs. A run
    asked before any step of it ran (a full drill) is entered in the history first."""
    store = StateStore(request.state_url)
    if history_run(store.runs, procedure_id) is None:
        procedure = build(request, store)
        procedure.procedure_id = procedure_id
        procedure.history_run_id()  # the history run its first step would start
    return abort(store, procedure_id, outcome="rejected", reason=reason)


def answer(
    request: ProcedureRequest,
    procedure_id: str,
    *,
    chosen: list[str],
    approver: str | None,
    approver_name: str | None,
    approver_roles: list[str],
    triggered_by: str | None,
    answered_at: datetime,
    timed_out: bool,
) -> ApprovalRecord:
    """Record the answer to run `procedure_id`'s approval question, judged by the
    deployment's policy (`replicator.procedures.approval.answer_of`), where the run's
    first changing step reads it, and for the run's report (`decide`). The first
    recorded answer stays."""
    if request.approval is None:
        raise ReplicatorError(
            f"{request.kind} {procedure_id}: an approval answered without the deployment's "
            "approval policy in the request"
        )
    store = StateStore(request.state_url)
    judged = approval.answer_of(
        request.approval,
        procedure_id=procedure_id,
        kind=request.kind,
        chosen=chosen,
        approver=approver,
        approver_name=approver_name,
        approver_roles=approver_roles,
        triggered_by=triggered_by,
        answered_at=answered_at,
        timed_out=timed_out,
    )
    recorded = approval.record(store.approvals, judged)
    by = recorded.approver_name or recorded.approver
    record_decision(store.runs, procedure_id, recorded.decision, by, recorded.answered_at)
    return recorded


def decide(
    request: ProcedureRequest, procedure_id: str, decision: str, by: str | None, at: datetime
) -> None:
    """Record the answer to run `procedure_id`'s approval question (see
    `replicator.procedures.steps.record_decision`)."""
    record_decision(StateStore(request.state_url).runs, procedure_id, decision, by, at)


def report(request: ProcedureRequest, procedure_id: str) -> ProcedureReport:
    """What run `procedure_id` did, from the state store (its saved steps and its
    history run, with RPO, RTO, duration and downtime); runs no step. Raises
    ReplicatorError when the run did not succeed, naming what stopped it."""
    saved = build(request).saved_report(procedure_id)
    if saved.outcome != "succeeded":
        raise ReplicatorError(
            f"{request.kind} {procedure_id} {saved.outcome}"
            + (f": {saved.error}" if saved.error else "")
            + "; the history (`replicator history`) has its steps"
        )
    return saved
