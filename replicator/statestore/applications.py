"""The applications table group: each client application's active cluster and
fence, and what its client processes report.

Epochs: an application's epoch grows by one on every change of its active
cluster or fence state, never otherwise. A client that reports state "fenced"
at epoch E has therefore acknowledged exactly the fence that E stands for.

Route lease: a client acts on its route for at most `ROUTE_LEASE_S` after it
last confirmed it (read it here and reported itself), so a client cut off from
the store stops on its own; a fence waits that long for a client gone silent
instead of taking silence for obedience.

Clocks: a client's `last_seen` is stamped by the database server's clock when its
report is written, and a fence compares it with the server's clock read in the
same query (`replicator.statestore.clock`), never with a process's own: a client
host whose clock is behind would otherwise look silent for longer than it is, and
be counted as stopped while it still acts on its route.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Row, and_, case, delete, func, select, update

from replicator.statestore import clock, database, fencing, schema
from replicator.statestore.database import Database
from replicator.statestore.errors import FenceNotAcknowledged, NotFoundError, StateStoreError
from replicator.statestore.records import Application, ClientState, ClientStatus

#: How long a client application may act on its route after it last confirmed it
#: (read it and reported itself to the store); see include/demo/fenced_client.py.
#: A fence waits this long for a client that went silent.
ROUTE_LEASE_S = 5.0
#: Added to the route lease when waiting out a silent client: the time between the
#: client's confirmation of its route and the store's stamp of its report, and the
#: client's last unit of work.
ROUTE_LEASE_GRACE_S = 1.0

_CLIENT_STATES = ("running", "fenced")
_WAIT_POLL_S = 0.2


class ApplicationStore:
    """Register, fence, switch and unfence applications; record and wait for their
    clients. A part of `StateStore`."""

    def __init__(self, db: Database) -> None:
        self._db = db

    # --- applications -------------------------------------------------------------

    def register(self, name: str, cluster: str) -> Application:
        """Register `name` as active on `cluster`; if it is registered already it
        keeps its active cluster (a re-run must never move a live application)."""
        with self._db.write() as conn:
            if self._application_row(conn, name) is None:
                # Registered concurrently (the insert returns False): keep that one.
                self._db.insert_new(
                    conn,
                    schema.applications,
                    {
                        "name": name,
                        "active_cluster": cluster,
                        "fenced": False,
                        "epoch": 0,
                        "updated_at": database.now(),
                    },
                )
        return self.get(name)

    def get(self, name: str) -> Application:
        with self._db.read() as conn:
            return self._application(conn, name)

    def all(self) -> list[Application]:
        with self._db.read() as conn:
            rows = conn.execute(select(schema.applications).order_by(schema.applications.c.name))
            return [Application(**row._mapping) for row in rows]

    def fence(self, name: str) -> int:
        """Fence `name` (its clients must stop); returns the epoch to wait for.

        Fencing a fenced application changes nothing and returns its epoch, so a
        retried procedure waits for the same acknowledgements.
        """
        with self._db.write() as conn:
            fencing.check(conn, f"fencing application {name!r}")
            app = self._application(conn, name, for_update=True)
            if app.fenced:
                return app.epoch
            self._set_application(conn, name, fenced=True, epoch=app.epoch + 1)
            return app.epoch + 1

    def switch(self, name: str, cluster: str) -> Application:
        """Make `cluster` the active cluster of `name` and lift any fence."""
        with self._db.write() as conn:
            fencing.check(conn, f"switching application {name!r} to {cluster!r}")
            app = self._application(conn, name, for_update=True)
            if app.active_cluster != cluster or app.fenced:
                self._set_application(
                    conn, name, active_cluster=cluster, fenced=False, epoch=app.epoch + 1
                )
        return self.get(name)

    def unfence(self, name: str) -> Application:
        """Let the clients of `name` run again on the cluster they were fenced on."""
        with self._db.write() as conn:
            fencing.check(conn, f"unfencing application {name!r}")
            app = self._application(conn, name, for_update=True)
            if app.fenced:
                self._set_application(conn, name, fenced=False, epoch=app.epoch + 1)
        return self.get(name)

    # --- clients ------------------------------------------------------------------

    def report_client(  # noqa: PLR0917 - procedures and clients call it positionally
        self,
        application: str,
        client_id: str,
        role: str,
        cluster: str,
        epoch: int,
        state: ClientStatus,
    ) -> None:
        """Record what a client process is doing; "fenced" at epoch E acknowledges
        the fence of epoch E (the client has stopped and flushed/committed)."""
        if state not in _CLIENT_STATES:
            raise StateStoreError(
                f"client {client_id!r} of {application!r} reported state {state!r}; "
                f"a client state is one of {', '.join(_CLIENT_STATES)}"
            )
        clients = schema.clients
        key = {"application": application, "client_id": client_id}
        # The server's clock, not this process's: see the module docstring.
        values: dict[str, Any] = {
            "role": role,
            "cluster": cluster,
            "epoch": epoch,
            "state": state,
            "last_seen": clock.server_now(),
        }
        same = and_(
            clients.c.cluster == cluster, clients.c.epoch == epoch, clients.c.state == state
        )
        # Kept while the client reports the same cluster, epoch and state (SET sees the
        # row as it was).
        since = case(
            (same, func.coalesce(clients.c.since, clock.server_now())), else_=clock.server_now()
        )
        with self._db.write() as conn:
            self._application(conn, application)
            match = [clients.c.application == application, clients.c.client_id == client_id]
            if conn.execute(update(clients).where(*match).values(**values, since=since)).rowcount:
                return
            first = {**key, **values, "since": clock.server_now()}
            if not self._db.insert_new(conn, clients, first):  # inserted concurrently
                conn.execute(update(clients).where(*match).values(**values, since=since))

    def remove_client(self, application: str, client_id: str) -> None:
        """Forget a client that stopped cleanly, so no procedure waits for it."""
        clients = schema.clients
        with self._db.write() as conn:
            conn.execute(
                delete(clients).where(
                    clients.c.application == application, clients.c.client_id == client_id
                )
            )

    def clients(self, application: str, seen_within_s: float | None = None) -> list[ClientState]:
        """The clients of `application`, only those seen in the last `seen_within_s` if
        given (by the server's clock, which stamped them)."""
        return self.clients_at(application, seen_within_s)[0]

    def clients_at(
        self, application: str, seen_within_s: float | None = None
    ) -> tuple[list[ClientState], datetime]:
        """The clients of `application` (those seen in the last `seen_within_s` if given)
        and the server's time they were read at, to compare their `last_seen` with."""
        clients = schema.clients
        with self._db.read() as conn:
            self._application(conn, application)
            now = clock.server_time(conn)
            query = select(clients).where(clients.c.application == application)
            if seen_within_s is not None:
                query = query.where(clients.c.last_seen >= now - timedelta(seconds=seen_within_s))
            rows = conn.execute(query.order_by(clients.c.role, clients.c.client_id))
            return [ClientState(**row._mapping) for row in rows], now

    def wait_fenced(
        self,
        application: str,
        epoch: int,
        timeout_s: float,
        lease_s: float = ROUTE_LEASE_S,
        check: Callable[[], None] | None = None,
    ) -> list[ClientState]:
        """Wait until every client of `application` reports "fenced" at `epoch`, or has
        been silent for its route lease `lease_s` (plus ROUTE_LEASE_GRACE_S): a client
        that cannot confirm its route stops on its own within the lease, so silence
        counts as fenced only once the lease has passed since it was last seen.

        Every time is the server's (`clients_at`). `check` is called before every
        look (a step's lease check: it raises to stop the wait).

        Returns the clients that were within their lease when the wait began: those
        that acknowledged, and those waited out (still not "fenced" at `epoch`). Raises
        FenceNotAcknowledged naming the clients still pending at the deadline, and
        StateStoreError if the application left that fence meanwhile."""
        deadline = time.monotonic() + timeout_s
        lease = timedelta(seconds=lease_s + ROUTE_LEASE_GRACE_S)
        began: datetime | None = None
        while True:
            if check is not None:
                check()
            app = self.get(application)
            if not app.fenced or app.epoch != epoch:
                raise StateStoreError(
                    f"application {application!r} is no longer fenced at epoch {epoch} "
                    f"(now epoch {app.epoch}, {'fenced' if app.fenced else 'not fenced'}, "
                    f"active on {app.active_cluster!r}): another procedure changed it; "
                    "check `replicator history` before fencing again"
                )
            seen, now = self.clients_at(application)
            began = began or now
            # A client silent for a lease before the wait began had stopped already.
            current = [c for c in seen if c.last_seen + lease > began]
            pending = [
                c
                for c in current
                if (c.state != "fenced" or c.epoch != epoch) and c.last_seen + lease > now
            ]
            if not pending:
                return current
            if time.monotonic() >= deadline:
                listed = "; ".join(
                    f"{c.client_id} ({c.role} on {c.cluster}: {c.state} at epoch {c.epoch}, "
                    f"seen {(now - c.last_seen).total_seconds():.1f}s ago)"
                    for c in pending
                )
                raise FenceNotAcknowledged(
                    f"{len(pending)} client(s) of {application!r} did not acknowledge the "
                    f"fence at epoch {epoch} within {timeout_s:g}s: {listed}; make sure they "
                    "follow the fence protocol of replicator.statestore.discovery, or stop them",
                    pending,
                )
            time.sleep(min(_WAIT_POLL_S, max(0.0, deadline - time.monotonic())))

    # --- plumbing -----------------------------------------------------------------

    @staticmethod
    def _application_row(conn: Connection, name: str, for_update: bool = False) -> Row | None:
        query = select(schema.applications).where(schema.applications.c.name == name)
        if for_update:
            query = query.with_for_update()
        return conn.execute(query).first()

    def _application(self, conn: Connection, name: str, for_update: bool = False) -> Application:
        row = self._application_row(conn, name, for_update)
        if row is None:
            known = conn.execute(
                select(schema.applications.c.name).order_by(schema.applications.c.name)
            )
            names = ", ".join(known.scalars()) or "none"
            raise NotFoundError(
                f"application {name!r} is not registered in the state store {self} "
                f"(registered: {names}); register it with "
                f"`replicator clients register {name} --cluster ALIAS`"
            )
        return Application(**row._mapping)

    @staticmethod
    def _set_application(conn: Connection, name: str, **values: Any) -> None:
        conn.execute(
            update(schema.applications)
            .where(schema.applications.c.name == name)
            .values(**values, updated_at=database.now())
        )
