"""Stopping and starting a flow from a procedure, through the state store.

`replicator run` polls the store about once a second and stops a flow's
tasks (they flush first) when its desired state is "stopped"; each task then
publishes "stopped" in the status topic on the target. A procedure that
stops a flow waits for exactly that, so the target tail holds everything the
flow replicated before the next step reads it.
"""

from __future__ import annotations

import time
from typing import Any

from replicator.config.model import FlowConfig
from replicator.engine.status import NoStatus, live_workers, read_status
from replicator.errors import ReplicatorError
from replicator.statestore.flow_states import PAUSED, RUNNING, STOPPED, FlowStateStore

#: How often a stop looks at the flow's workers: the wait is part of a cutover's
#: downtime (`flow_stopped`), each look one read of the status topic.
_POLL_S = 0.2


def stop_flow(
    flow_states: FlowStateStore,
    flow: FlowConfig,
    by: str,
    timeout_s: float,
    *,
    required: bool = True,
) -> dict[str, Any]:
    """Set `flow` to "stopped" and wait until none of its workers runs (none
    running at all is fine). With `required` False (the source is gone, workers
    may hang), workers still running after `timeout_s` are reported, not fatal.

    A flow with no status on its target cannot be confirmed stopped. One started
    moments ago (a drill's reverse flow) gets one within seconds, so that is awaited
    first, up to `timeout_s`; if none comes (no replicator has run for the flow
    there), refused with nothing changed, or with `required` False set to stopped
    and reported "unconfirmed"."""
    unconfirmed = _await_status(flow, time.monotonic() + timeout_s)
    if unconfirmed and required:
        raise ReplicatorError(
            f"cannot confirm that flow {flow.name} stops, so it was not changed: after "
            f"{timeout_s:g}s, {unconfirmed}"
        )
    flow_states.set(flow.name, STOPPED, _stopped_detail(flow_states, flow.name, by))
    if unconfirmed:
        return {
            "flow": flow.name,
            "state": STOPPED,
            "still_running": "",
            "unconfirmed": unconfirmed,
        }
    still_running = await_stopped(flow, STOPPED, timeout_s, required=required)
    return {"flow": flow.name, "state": STOPPED, "still_running": still_running}


def await_stopped(flow: FlowConfig, state: str, timeout_s: float, *, required: bool) -> str:
    """Wait until none of `flow`'s workers runs, its desired state being `state`;
    after `timeout_s`, the workers still running ("" when none), or with `required`
    an error naming them."""
    deadline = time.monotonic() + timeout_s
    while running := live_workers(flow):
        if time.monotonic() >= deadline:
            names = ", ".join(f"{w.worker} (pid {w.pid} on {w.host})" for w in running)
            if not required:
                return names
            raise ReplicatorError(
                f"flow {flow.name} is set to {state}, but workers still report running after "
                f"{timeout_s:g}s: {names}; check that they are `replicator run` processes of "
                "this version reading the same state store ($REPLICATOR_STATE_URL), or stop them"
            )
        time.sleep(_POLL_S)
    return ""


def _stopped_detail(store: FlowStateStore, flow: str, by: str) -> dict[str, Any]:
    """The detail of a procedure's stop; an operator's pause in force is kept in it,
    so that the procedure's `start_flow` leaves the flow paused."""
    state = store.get(flow)
    paused = None
    if state is not None and state.state == PAUSED:
        paused = state.detail
    elif state is not None and state.state == STOPPED:
        paused = state.detail.get("paused")  # stopped again: still paused underneath
    return {"by": by} if paused is None else {"by": by, "paused": paused}


def _await_status(flow: FlowConfig, deadline: float) -> str:
    """Empty once `flow` has a status on its target; at `deadline`, why it has none."""
    while True:
        try:
            read_status(flow.target, flow.name, required=True)
        except NoStatus as exc:
            if time.monotonic() >= deadline:
                return str(exc)
            time.sleep(_POLL_S)
        else:
            return ""


def preview_stop_flow(flow: FlowConfig) -> dict[str, Any]:
    return {
        "flow": flow.name,
        "would_set": STOPPED,
        "running_workers": [w.worker for w in live_workers(flow)],
    }


def start_flow(store: FlowStateStore, flow: str, by: str) -> dict[str, Any]:
    """Let `replicator run` start `flow` again (within about a second); a flow an
    operator paused before the procedure stopped it stays paused."""
    state = store.get(flow)
    paused = state.detail.get("paused") if state is not None else None
    if state is not None and state.state == STOPPED and isinstance(paused, dict):
        store.set(flow, PAUSED, paused)
        return {"flow": flow, "state": PAUSED, "paused_by": paused.get("by")}
    store.set(flow, RUNNING, {"by": by})
    return {"flow": flow, "state": RUNNING}
