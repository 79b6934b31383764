"""Abort a DR procedure that stopped midway, or record a rejected one.

A failover or failback that stops between its fence and its switch (a failed
step, a person who gives up) leaves production standing still: the
applications fenced, the flow it stopped stopped. `abort` undoes exactly what
that run did, from what the state store holds about it, so it needs neither the
configuration nor a cluster:

- each application of the run that is still fenced is unfenced, so its clients
  run again where they ran before; only if the run's fence step started, and
  only at the epoch that fence set (a later fence belongs to someone else);
- each flow the run stopped (desired state "stopped" by this procedure id) is
  set running again, so `replicator run` resumes it within about a second;
- the run is recorded in the history as "aborted", or "rejected" (a person
  answered no to the approval, or nobody answered in time), with its duration
  and the applications' downtime, its leases are released, and no step of it
  runs again (`ProcedureEnded`).

An abort never races a running step: it takes the run's own lease
(`steps.running_lease`) that a running step holds, and is refused, naming the
step, while one runs (a fence still waiting for its clients: undoing the fence
under it would let the step go on, and its end would record "failed" over
"aborted"); a step that starts meanwhile is refused in turn, and once the run is
aborted none starts again. The record of what the abort undid is kept: a second
abort, or the end of a step, never overwrites it.

A run that switched the applications is not undone: moving them back is a
failback, with its own fence, drain and offset translation, so `abort` refuses
and says so. Flows the run started (a failback's reverse flow, or its forward
flow for the reconciled records) stay running: they copy what the applications
wrote. A full drill's halves run under their own ids (`<drill id>.failover`,
`<drill id>.failback`): abort the half that stopped; the leases the drill holds
for its halves are released with it, since that drill cannot go on.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, Literal, cast

from replicator.errors import ReplicatorError
from replicator.procedures.flows import start_flow
from replicator.procedures.renewal import Hold
from replicator.procedures.steps import (
    ENDED_OUTCOMES,
    FENCE_STEP,
    RUNNING_LEASE_TTL_S,
    SWITCH_STEP,
    fence_started_at,
    history_run,
    running_lease,
    saved_steps,
    seconds_between,
)
from replicator.statestore import LeaseHeld, RunRecord, StateStore, fencing
from replicator.statestore.flow_states import STOPPED, FlowStateStore
from replicator.statestore.leases import LeaseStore
from replicator.statestore.runs import RunStore

log = logging.getLogger(__name__)

Ending = Literal["aborted", "rejected"]


@dataclass(frozen=True)
class AbortReport:
    """What an abort (or a rejection) undid; `unfenced` maps each application to
    its epoch now."""

    procedure_id: str
    kind: str
    outcome: str
    reason: str
    unfenced: dict[str, int]
    restarted_flows: list[str]
    duration_seconds: float
    downtime_seconds: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def abort(
    store: StateStore, procedure_id: str, *, outcome: Ending = "aborted", reason: str = ""
) -> AbortReport:
    """Undo what run `procedure_id` did before its switch, and end it as `outcome`.

    Raises ReplicatorError when there is no such run, when a step of it is running
    (wait for it to end, or stop its task), when it succeeded, or when it switched
    the applications already (fail back instead). Aborting again is harmless: it
    finds nothing left to undo, and keeps the first abort's record."""
    if history_run(store.runs, procedure_id) is None:
        raise ReplicatorError(
            f"no procedure {procedure_id!r} in the state store {store}: no step of it ever "
            "ran; `replicator history` lists the runs and their procedure ids"
        )
    owner = f"abort of {procedure_id}"
    hold = _hold_runs(store.leases, procedure_id, owner)
    try:
        # Its undoing is made under the run's lease too: an abort cut off past it
        # changes nothing behind a step or abort that took the run since.
        with fencing.guarded(hold.guards()):
            return _abort(store, procedure_id, outcome, reason)
    finally:
        store.leases.release(owner)


def _hold_runs(leases: LeaseStore, procedure_id: str, owner: str) -> Hold:
    """Take the lease a running step holds on the run (and, for a half of a full
    drill, on the drill), so no step runs while the abort does; refuse, naming the
    step, while one runs. Taking it gives it a new fencing token: a step paused past
    its lease that comes back changes nothing (`replicator.statestore.fencing`)."""
    resources = [running_lease(run) for run in _lease_owners(procedure_id)]
    try:
        return Hold.take(leases, resources, owner, RUNNING_LEASE_TTL_S)
    except LeaseHeld as exc:
        holder = exc.holder
        raise ReplicatorError(
            f"cannot abort {procedure_id} now: {holder.owner} is running (it holds "
            f"{holder.resource!r} until {holder.expires_at:%Y-%m-%d %H:%M:%S} UTC, renewed "
            "while it runs). Undoing the run under a running step would let that step go on "
            "acting and overwrite the abort's record when it ends. Wait for the step to end "
            "(it fails or completes within the procedure's timeout), or stop its task, then "
            "abort again"
        ) from None


def _abort(store: StateStore, procedure_id: str, outcome: Ending, reason: str) -> AbortReport:
    run = history_run(store.runs, procedure_id)  # read again, now that no step runs
    assert run is not None  # it existed, and runs are never deleted
    _refuse_switched(store.runs, run, procedure_id)
    # A second abort keeps the first verdict ("rejected" stays rejected) and its record.
    ended_before = run.outcome in ENDED_OUTCOMES
    ending = cast(str, run.outcome) if ended_before else outcome
    fenced_at = fence_started_at(store.runs, procedure_id)
    unfenced = _unfence(store, run, procedure_id) if fenced_at is not None else {}
    restarted = _restart_flows(store.flows, procedure_id)
    now = datetime.now(UTC)
    report = AbortReport(
        procedure_id=procedure_id,
        kind=run.kind,
        outcome=ending,
        reason=reason,
        unfenced=unfenced,
        restarted_flows=restarted,
        duration_seconds=seconds_between(run.started_at, now),
        downtime_seconds=0.0 if fenced_at is None else seconds_between(fenced_at, now),
    )
    details = {
        **run.details,
        "procedure_id": procedure_id,
        "steps": saved_steps(store.runs, procedure_id),
        "reason": reason,
        "undone": {"unfenced": unfenced, "restarted_flows": restarted},
        "duration_seconds": report.duration_seconds,
        "downtime_seconds": report.downtime_seconds,
    }
    if ended_before:
        log.info(
            "%s %s was %s before; its record is kept (undone now: unfenced %s, restarted flows %s)",
            run.kind,
            procedure_id,
            ending,
            unfenced or "none",
            restarted or "none",
        )
    else:
        store.runs.finish(run.run_id, ending, None, None, details)
    for owner in _lease_owners(procedure_id):
        store.leases.release(owner)
    log.info(
        "%s %s %s (%s): unfenced %s, restarted flows %s",
        run.kind,
        procedure_id,
        ending,
        reason or "no reason given",
        unfenced or "none",
        restarted or "none",
    )
    return report


def _lease_owners(procedure_id: str) -> list[str]:
    """The run itself, and for a half of a full drill the drill, which holds the
    leases for both halves (`FullDrill._half`)."""
    drill, dot, half = procedure_id.rpartition(".")
    return [procedure_id, drill] if dot and half in ("failover", "failback") else [procedure_id]


def _refuse_switched(store: RunStore, run: RunRecord, procedure_id: str) -> None:
    if run.outcome == "succeeded":
        raise ReplicatorError(
            f"{run.kind} {procedure_id} succeeded, so there is nothing to abort; to move its "
            "applications back, run a failback"
        )
    switched = store.step(procedure_id, SWITCH_STEP)
    if switched is not None and switched.state == "done":
        raise ReplicatorError(
            f"{run.kind} {procedure_id} already switched the applications "
            f"({switched.result.get('switched', switched.result)}); an abort would leave them "
            "there: resume the run with the same id to finish it, or run a failback to move "
            "them back"
        )


def _unfence(store: StateStore, run: RunRecord, procedure_id: str) -> dict[str, int]:
    """Unfence the run's applications still fenced by it: all or none, so a refusal
    leaves nothing half done."""
    fence = store.runs.step(procedure_id, FENCE_STEP)
    recorded = fence.result.get("fenced", {}) if fence and fence.state == "done" else {}
    epochs = {name: entry["epoch"] for name, entry in recorded.items()}
    fenced = [store.applications.get(name) for name in run.params.get("applications", [])]
    fenced = [app for app in fenced if app.fenced]
    foreign = [app for app in fenced if epochs.get(app.name, app.epoch) != app.epoch]
    if foreign:
        listed = ", ".join(
            f"{app.name} (fenced at epoch {app.epoch}, this run fenced it at {epochs[app.name]})"
            for app in foreign
        )
        raise ReplicatorError(
            f"cannot abort {run.kind} {procedure_id}: another procedure fenced its applications "
            f"since: {listed}; see `replicator history`, and abort or finish that one instead"
        )
    return {app.name: store.applications.unfence(app.name).epoch for app in fenced}


def _restart_flows(flow_states: FlowStateStore, procedure_id: str) -> list[str]:
    """Set running every flow that `procedure_id` stopped (and nobody changed since)."""
    stopped = [
        flow.flow
        for flow in flow_states.all()
        if flow.state == STOPPED and flow.detail.get("by") == procedure_id
    ]
    for flow in stopped:
        start_flow(flow_states, flow, f"abort of {procedure_id}")
    return stopped
