"""Fencing and moving client applications through the state store: the steps
failover and failback share (each returns the step's report)."""

from __future__ import annotations

from typing import Any

from replicator.procedures.renewal import ensure_held
from replicator.statestore import ROUTE_LEASE_S
from replicator.statestore.applications import ApplicationStore


def fence(store: ApplicationStore, applications: list[str], timeout_s: float) -> dict[str, Any]:
    """Fence each application and wait until each of its clients acknowledges, or
    was silent for its route lease (a client that cannot confirm its route stops
    on its own by then): `silent` lists those, waited out rather than trusted.
    Every application is fenced before the first wait, so their clients stop together.
    Run as a step, the waits stop as soon as the step lost its lease (`ensure_held`)."""
    epochs = {name: store.fence(name) for name in applications}
    fenced = {}
    for name, epoch in epochs.items():
        clients = store.wait_fenced(name, epoch, timeout_s, check=ensure_held)
        fenced[name] = {
            "epoch": epoch,
            "clients": [c.client_id for c in clients],
            "silent": [c.client_id for c in clients if c.state != "fenced" or c.epoch != epoch],
        }
    return {"fenced": fenced}


def preview_fence(store: ApplicationStore, applications: list[str]) -> dict[str, Any]:
    """The clients a fence would wait for: those within their route lease now."""
    return {
        "would_fence": {
            name: [c.client_id for c in store.clients(name, seen_within_s=ROUTE_LEASE_S)]
            for name in applications
        }
    }


def switch(store: ApplicationStore, applications: list[str], cluster: str) -> dict[str, Any]:
    """Make `cluster` the applications' active cluster (and lift their fence)."""
    switched = {}
    for name in applications:
        app = store.switch(name, cluster)
        switched[name] = {"active_cluster": app.active_cluster, "epoch": app.epoch}
    return {"switched": switched}


def preview_switch(
    store: ApplicationStore, applications: list[str], cluster: str
) -> dict[str, Any]:
    return {
        "would_switch": {
            name: f"{store.get(name).active_cluster} -> {cluster}" for name in applications
        }
    }
