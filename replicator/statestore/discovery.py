"""Where a client application connects: the one call client code needs.

A client application asks `where(app, config, store.applications)` on start and then about
every half second. The answer names the active cluster, its bootstrap servers
from the replicator configuration, and whether the application is fenced.
It never carries credentials: each client keeps its own security settings,
so the state store and this answer can be shown to anyone.

The fence protocol a client follows (include/demo/ implements it):

1. Connect to `route.bootstrap_servers`; report "running" at `route.epoch`
   (`store.applications.report_client`) about every 0.5 s.
2. When `route.fenced`: stop producing/consuming, flush and commit what was
   done, close the Kafka clients, then report "fenced" at `route.epoch`;
   that report is the acknowledgement a failover procedure waits for.
3. Keep asking; when no longer fenced, connect to the (possibly new)
   active cluster and go on at step 1.
4. The route lease: a route holds for `ROUTE_LEASE_S` (5 s) after the read
   that the client last reported itself on. A client that cannot reach the
   store (read or report) stops work within that lease and waits for the
   store: a fence may have been set that it cannot see. A failover waits
   out the lease for a client that went silent instead of ignoring it.
"""

from __future__ import annotations

from dataclasses import dataclass

from replicator.config.model import ReplicatorConfig
from replicator.statestore.applications import ApplicationStore
from replicator.statestore.errors import StateStoreError


@dataclass(frozen=True)
class Route:
    """Where `application` must connect now, and whether it may run at all."""

    application: str
    cluster: str
    bootstrap_servers: str
    fenced: bool
    epoch: int


class UnknownClusterError(StateStoreError):
    """The active cluster of an application is not in the client's configuration."""


def where(application: str, config: ReplicatorConfig, store: ApplicationStore) -> Route:
    """The route of `application`: its active cluster as the state store says,
    resolved to bootstrap servers through `config`."""
    app = store.get(application)
    cluster = config.clusters.get(app.active_cluster)
    if cluster is None:
        source = config.source_file or "the configuration"
        known = ", ".join(config.clusters) or "none"
        raise UnknownClusterError(
            f"application {application!r} is active on cluster {app.active_cluster!r}, "
            f"which {source} does not define (clusters: {known}); add "
            f"{app.active_cluster}.bootstrap.servers to it, or switch the application "
            "to a cluster it defines"
        )
    return Route(
        application=application,
        cluster=app.active_cluster,
        bootstrap_servers=cluster.bootstrap_servers,
        fenced=app.fenced,
        epoch=app.epoch,
    )
