"""Fencing tokens: a write made under a lease happens only while that lease is
still the writer's, checked in the write's own transaction.

A lease's token grows each time it is taken: by a new owner, or by the same owner
after it lapsed or was released (`LeaseStore.acquire`); renewing a live
lease keeps it. A DR step knows the tokens of the leases it took (its `Guard`s)
and runs under them (`guarded`). Each write of the store that a procedure makes
(fence, switch, unfence, a flow's desired state) first calls `check` in its own
transaction: every guard's lease row is locked (in resource order, as the lease
store locks them, so no deadlock) and must still have the guard's owner and token
and not have lapsed by the database's clock. A step paused past its lease (a long
GC, a stopped VM, a slow database) that comes back after an abort took its run
finds a larger token and changes nothing: `LeaseTaken` says which lease, whose
it is now, and that nothing was written.

Writes outside a step (an operator's `flows pause`, `replicator run`, a client's
report) run under no guard and are not checked. A Kafka write (a group move) cannot
join the store's transaction: it is preceded by `verify` (the same check, in a
transaction of its own) and is idempotent (the same translated positions).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from sqlalchemy import Connection, select

from replicator.statestore import clock, schema
from replicator.statestore.errors import LeaseTaken


@dataclass(frozen=True)
class Guard:
    """`owner` holds the lease on `resource` taken with fencing token `token`."""

    resource: str
    owner: str
    token: int


_GUARDS: ContextVar[tuple[Guard, ...]] = ContextVar("replicator_fencing_guards", default=())


@contextmanager
def guarded(guards: Iterable[Guard]) -> Iterator[None]:
    """Run the body with `guards` added to those its store writes are checked
    against (nested steps: an enclosing step's guards stay)."""
    reset = _GUARDS.set((*_GUARDS.get(), *guards))
    try:
        yield
    finally:
        _GUARDS.reset(reset)


def current() -> tuple[Guard, ...]:
    """The guards of the step running in this thread (none outside a step)."""
    return _GUARDS.get()


def check(conn: Connection, what: str, guards: Iterable[Guard] | None = None) -> None:
    """In the caller's transaction: raise LeaseTaken unless every guard (default: the
    running step's) still holds its lease with its token, unlapsed. `what` names the
    write, for the error."""
    wanted = sorted(current() if guards is None else guards, key=lambda g: g.resource)
    if not wanted:
        return
    now = clock.server_time(conn)
    leases = schema.leases
    lost: list[tuple[int, Guard, str]] = []  # (rank: taken, released, lapsed), guard, why
    for guard in wanted:
        query = select(leases).where(leases.c.resource == guard.resource).with_for_update()
        row = conn.execute(query).first()
        if row is None:
            lost.append((1, guard, "was released (an abort, or the run ended)"))
        elif (row.owner, row.token) != (guard.owner, guard.token):
            lost.append((0, guard, f"is now held by {row.owner} (fencing token {row.token})"))
        elif row.expires_at <= now:
            lost.append((2, guard, f"lapsed at {row.expires_at:%Y-%m-%d %H:%M:%S} UTC"))
    if lost:  # the one that says most: a lease someone else holds now
        _, guard, why = min(lost, key=lambda found: found[0])
        raise LeaseTaken(
            f"{what} refused, nothing was written: the lease on {guard.resource!r} that "
            f"{guard.owner} (fencing token {guard.token}) took {why}. The step was paused "
            "or cut off past its lease, and another procedure (or an abort) may have acted "
            "since; check `replicator history` before running anything again"
        )
