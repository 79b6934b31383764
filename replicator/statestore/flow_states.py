"""The desired state of a flow, as the state store holds it.

A procedure writes it (`StateStore.set_flow_state`) and `replicator run` reads it
about once a second: "stopped" stops the flow's tasks (they flush first), anything
else, or no row at all, runs them. The names live here, next to the store both
sides read, so the engine's runner and the procedures agree on them without
importing each other.
"""

from __future__ import annotations

#: The one desired state that stops a flow; anything else (or no row) runs it.
STOPPED = "stopped"
RUNNING = "running"
