"""The flow-states table group: the desired state of each flow.

A procedure writes it (`store.flows.set`) and `replicator run` reads it
every quarter second: "stopped" (a procedure, or the standby direction) and "paused"
(an operator: `replicator flows pause`) stop the flow's tasks (they flush first);
anything else, or no row at all, runs them (`runs`). The names live here, next to the
store both sides read, so the engine's runner and the procedures agree on them without
importing each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import select

from replicator.statestore import database, fencing, schema
from replicator.statestore.database import Database, json_field
from replicator.statestore.records import FlowState

#: Stopped by a procedure (a failover, an offset reset) or as the standby direction.
STOPPED = "stopped"
#: Stopped by an operator until they resume it; a procedure that stops and restarts
#: the flow leaves it paused.
PAUSED = "paused"
RUNNING = "running"
#: The desired states that keep a flow's tasks stopped.
HALTED = frozenset({STOPPED, PAUSED})


def runs(state: FlowState | None) -> bool:
    """Whether `replicator run` runs a flow whose desired state is `state` (None: no
    row yet). The one rule every reader of the table applies."""
    return state is None or state.state not in HALTED


class FlowStateStore:
    """Set and read the desired state of flows. A part of `StateStore`."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def set(self, flow: str, state: str, detail: Mapping[str, Any] | None = None) -> FlowState:
        with self._db.write() as conn:
            fencing.check(conn, f"setting flow {flow!r} {state}")
            values = {"state": state, "detail": json_field(f"detail of flow {flow!r}", detail)}
            self._db.upsert(
                conn, schema.flows, {"flow": flow}, {**values, "updated_at": database.now()}
            )
        state_now = self.get(flow)
        assert state_now is not None  # written just above
        return state_now

    def get(self, flow: str) -> FlowState | None:
        with self._db.read() as conn:
            row = conn.execute(select(schema.flows).where(schema.flows.c.flow == flow)).first()
            return None if row is None else FlowState(**row._mapping)

    def all(self) -> list[FlowState]:
        with self._db.read() as conn:
            rows = conn.execute(select(schema.flows).order_by(schema.flows.c.flow))
            return [FlowState(**row._mapping) for row in rows]
