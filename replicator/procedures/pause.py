"""An operator's pause and resume of a flow (`replicator flows pause|resume`).

Both go through the state store, like a procedure's stop and start, so the workers,
the DR status page and the DAGs agree: `replicator run` stops a paused flow's tasks
(they flush first) within about a second, the page shows "paused", and the
supervisor raises no alarm for it. What differs from a procedure's stop:

- only a person undoes it: a procedure that stops and restarts the flow (an offset
  reset, a failover then a failback) leaves it paused (`flows.start_flow`);
- it is refused while a procedure holds the flow (its lease), and a flow a
  procedure stopped cannot be paused or resumed: that is the procedure's to undo;
- who paused it, when and why stay in the flow's state until it is resumed.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from replicator.config.model import FlowConfig
from replicator.errors import ReplicatorError
from replicator.procedures.flows import await_stopped
from replicator.procedures.renewal import Hold
from replicator.statestore import StateStore, fencing
from replicator.statestore.flow_states import PAUSED, RUNNING, STOPPED
from replicator.statestore.records import FlowState

#: How long the pause holds the flow's lease: the time to read and write its state.
_LEASE_TTL_S = 60.0


def pause_flow(
    store: StateStore, flow: FlowConfig, by: str, reason: str, timeout_s: float
) -> dict[str, Any]:
    """Pause `flow` and wait until none of its workers runs. Pausing a paused flow
    changes nothing and says who paused it."""
    if not reason.strip():
        raise ReplicatorError(
            f"say why flow {flow.name} is paused (--reason): the next operator reads it"
        )
    with _holding(store, flow.name, by) as state:
        if state is not None and state.state == PAUSED:
            return _described(flow.name, state, already=True)
        if state is not None and state.state == STOPPED:
            raise ReplicatorError(
                f"flow {flow.name} is stopped {_by(state)}, so there is nothing to pause: "
                "the procedure that stopped it (or a failback, for the standby direction) "
                "starts it again"
            )
        detail = {"by": by, "reason": reason, "at": datetime.now(UTC).isoformat()}
        store.flows.set(flow.name, PAUSED, detail)
    still_running = await_stopped(flow, PAUSED, timeout_s, required=True)
    return {"flow": flow.name, "state": PAUSED, **detail, "still_running": still_running}


def resume_flow(store: StateStore, flow: FlowConfig, by: str) -> dict[str, Any]:
    """Resume a paused flow: `replicator run` starts its tasks within about a second,
    from where they stopped."""
    with _holding(store, flow.name, by) as state:
        if state is None or state.state == RUNNING:
            raise ReplicatorError(f"flow {flow.name} is not paused: it runs")
        if state.state != PAUSED:
            raise ReplicatorError(
                f"flow {flow.name} is {state.state} {_by(state)}, not paused: resume undoes "
                "only a pause; the procedure that stopped it (or a failback, for the standby "
                "direction) starts it again"
            )
        store.flows.set(flow.name, RUNNING, {"by": by, "resumed": state.detail})
    return {"flow": flow.name, "state": RUNNING, "by": by, "paused": state.detail}


def _described(flow: str, state: FlowState, *, already: bool) -> dict[str, Any]:
    return {
        "flow": flow,
        "state": state.state,
        "by": state.detail.get("by"),
        "reason": state.detail.get("reason"),
        "at": state.detail.get("at"),
        "already": already,
        "still_running": "",
    }


def _by(state: FlowState) -> str:
    by = state.detail.get("by")
    return f"by {by}" if by else "(no one recorded)"


@contextmanager
def _holding(store: StateStore, flow: str, by: str) -> Iterator[FlowState | None]:
    """The flow's lease for the time of the change, so that a procedure that holds it
    (a failover stopping the flow) and an operator never interleave: LeaseHeld names
    the holder. Yields the flow's state, read under the lease."""
    owner = f"{by} ({socket.gethostname()} pid {os.getpid()}, {uuid.uuid4().hex[:8]})"
    hold = Hold.take(store.leases, [f"flow {flow}"], owner, _LEASE_TTL_S)
    try:
        with fencing.guarded(hold.guards()):  # the change is made only under the lease
            yield store.flows.get(flow)
    finally:
        store.leases.release(owner)
