"""The leases table group: which DR procedure holds which flow or application.

A DR procedure holds a lease on its flow and on each application it moves
(`acquire`), so two procedures never interleave their steps on the same
thing; a lease lapses unless renewed, so an orchestrator that died does not lock
a flow forever.

Leases are stamped and compared with the database server's clock
(`replicator.statestore.clock`), read in the transaction that takes them: two
orchestrators on hosts whose clocks disagree still agree on when a lease lapses.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta

from sqlalchemy import Connection, delete, select, update

from replicator.statestore import clock, fencing, schema
from replicator.statestore.database import Database
from replicator.statestore.errors import LeaseHeld
from replicator.statestore.fencing import Guard
from replicator.statestore.records import Lease

log = logging.getLogger(__name__)

#: How long a procedure's lease lasts unless renewed (each step of it renews it).
DEFAULT_LEASE_TTL_S = 3600.0


class LeaseStore:
    """Acquire, renew, release and list procedure leases. A part of `StateStore`."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def acquire(
        self, resources: Iterable[str], owner: str, ttl_s: float = DEFAULT_LEASE_TTL_S
    ) -> list[Lease]:
        """Lease every one of `resources` to `owner` for `ttl_s` seconds, all or none,
        in one transaction: a free resource is leased, an expired lease is taken
        over, `owner`'s own lease is renewed. Raises LeaseHeld naming the holder and
        its expiry when another owner holds one of them."""
        wanted = sorted(set(resources))  # one lock order for everyone: no deadlock
        with self._db.write() as conn:
            now = clock.server_time(conn)
            expires = now + timedelta(seconds=ttl_s)
            for resource in wanted:
                held = self._lease(conn, resource)
                if held is None:
                    new = {
                        "resource": resource,
                        "owner": owner,
                        "acquired_at": now,
                        "expires_at": expires,
                        "token": _next_token(conn, resource),
                    }
                    if self._db.insert_new(conn, schema.leases, new):
                        continue
                    held = self._lease(conn, resource)  # leased concurrently: see by whom
                    assert held is not None  # the row that made the insert fail
                if held.owner != owner and held.expires_at > now:
                    raise _lease_held(held, owner, now)
                if held.owner != owner:
                    log.warning(
                        "the lease of %s by %s expired at %s; %s takes it over",
                        resource,
                        held.owner,
                        f"{held.expires_at:%Y-%m-%d %H:%M:%S} UTC",
                        owner,
                    )
                renewed = held.owner == owner and held.expires_at > now
                conn.execute(
                    update(schema.leases)
                    .where(schema.leases.c.resource == resource)
                    .values(
                        owner=owner,
                        acquired_at=held.acquired_at if held.owner == owner else now,
                        expires_at=expires,
                        token=held.token if renewed else _next_token(conn, resource),
                    )
                )
            return [lease for r in wanted if (lease := self._lease(conn, r)) is not None]

    def renew(self, guards: Iterable[Guard], ttl_s: float) -> None:
        """Extend the leases `guards` name by `ttl_s` seconds, each only while it is still
        the guard's (owner and fencing token, unlapsed): LeaseTaken otherwise, and
        nothing is renewed. Unlike `acquire`, never takes a lease anew: a step
        whose lease was released or taken must not get it back behind the taker."""
        wanted = list(guards)
        with self._db.write() as conn:
            fencing.check(conn, "renewing the leases", wanted)
            expires = clock.server_time(conn) + timedelta(seconds=ttl_s)
            for guard in wanted:
                conn.execute(
                    update(schema.leases)
                    .where(schema.leases.c.resource == guard.resource)
                    .values(expires_at=expires)
                )

    def check_guards(self, what: str) -> None:
        """LeaseTaken unless the running step's leases are still its own (`fencing`):
        before a write the store cannot make conditional itself (a Kafka commit)."""
        if fencing.current():
            with self._db.write() as conn:
                fencing.check(conn, what)

    def release(self, owner: str) -> int:
        """Release every lease `owner` holds; returns how many it held."""
        with self._db.write() as conn:
            return conn.execute(
                delete(schema.leases).where(schema.leases.c.owner == owner)
            ).rowcount

    def all(self) -> list[Lease]:
        """Every lease, expired ones included (until someone takes them over)."""
        with self._db.read() as conn:
            rows = conn.execute(select(schema.leases).order_by(schema.leases.c.resource))
            return [Lease(**row._mapping) for row in rows]

    @staticmethod
    def _lease(conn: Connection, resource: str) -> Lease | None:
        """The lease of `resource`, its row locked until the transaction ends."""
        query = select(schema.leases).where(schema.leases.c.resource == resource).with_for_update()
        row = conn.execute(query).first()
        return None if row is None else Lease(**row._mapping)


def _next_token(conn: Connection, resource: str) -> int:
    """The next fencing token of `resource`: one more than any given before, kept in
    `dr_lease_tokens` past the lease's release. The caller holds the lease row (or
    is inserting it), so no other transaction takes a token of `resource` meanwhile."""
    tokens = schema.lease_tokens
    last = conn.execute(
        select(tokens.c.token).where(tokens.c.resource == resource).with_for_update()
    ).scalar()
    if last is None:
        if Database.insert_new(conn, tokens, {"resource": resource, "token": 1}):
            return 1
        # Inserted by a concurrent first taking (its lease insert then fails): after it.
        last = conn.execute(
            select(tokens.c.token).where(tokens.c.resource == resource).with_for_update()
        ).scalar_one()
    conn.execute(update(tokens).where(tokens.c.resource == resource).values(token=last + 1))
    return int(last) + 1


def _lease_held(held: Lease, wanted_by: str, now: datetime) -> LeaseHeld:
    left = (held.expires_at - now).total_seconds()
    return LeaseHeld(
        f"{held.resource} is leased to {held.owner} until "
        f"{held.expires_at:%Y-%m-%d %H:%M:%S} UTC ({left:.0f}s from now), so "
        f"{wanted_by} may not change it: two procedures on the same flow or "
        f"application would undo each other's steps. Wait until {held.owner} "
        "finishes (`replicator history`); if its orchestrator died, the lease "
        "lapses at that time",
        held,
    )
