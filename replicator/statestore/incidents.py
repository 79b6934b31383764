"""The incidents table group: what people were told about each problem, and when.

`replicator.operations.incidents` decides when a problem opens an incident, when
it is worth a reminder and when it is resolved; this module only keeps the rows,
so that decision is shared by every scheduler and survives their restarts. The
decision runs inside one write transaction that keeps other writers of the table
out (`update_incidents`), so two schedulers never both claim the same notice; a
notice that could not be delivered is handed back (`release_notice`) and comes
again on the next run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import datetime
from typing import TypeVar

from sqlalchemy import Connection, RowMapping, select, text, update

from replicator.statestore import schema
from replicator.statestore.database import Database
from replicator.statestore.records import Incident

T = TypeVar("T")
#: A decision over the incidents of one source and scope: the rows to write, and
#: what the caller gets back (the notices it claimed).
Decide = Callable[[list[Incident]], tuple[Sequence[Incident], T]]


class IncidentStore:
    """Read and change incidents. A part of `StateStore`."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def update(self, source: str, scope: str | None, decide: Decide[T]) -> T:
        """Run `decide` over the incidents of `source` (only those of `scope`, if
        given), other writers locked out, and write the incidents it returns, in one
        transaction; `decide`'s other result is returned."""
        table = schema.incidents
        query = select(table).where(table.c.source == source)
        if scope is not None:
            query = query.where(table.c.scope == scope)
        with self._db.write() as conn:
            if conn.dialect.name == "postgresql":
                # Row locks do not cover a row not inserted yet: two runs would both
                # open the same new incident. SQLite's write lock is the whole file.
                conn.execute(text(f"LOCK TABLE {table.name} IN EXCLUSIVE MODE"))
            current = [_incident(row._mapping) for row in conn.execute(query)]
            changed, result = decide(current)
            for incident in changed:
                _write(conn, incident)
            return result

    def release_notice(
        self, key: str, claimed_at: datetime, notified: str | None, notified_at: datetime | None
    ) -> bool:
        """Hand back the notice claimed at `claimed_at` for incident `key`: what was
        delivered before is restored, so the next run claims it again. False when
        another run changed the incident since (its own notice stands)."""
        table = schema.incidents
        with self._db.write() as conn:
            return bool(
                conn.execute(
                    update(table)
                    .where(table.c.key == key, table.c.notified_at == claimed_at)
                    .values(notified=notified, notified_at=notified_at)
                ).rowcount
            )

    def all(self, open_only: bool = False) -> list[Incident]:
        """Every incident (open or the last resolved of its key), newest first."""
        table = schema.incidents
        query = select(table).order_by(table.c.opened_at.desc(), table.c.key)
        if open_only:
            query = query.where(table.c.resolved_at.is_(None))
        with self._db.read() as conn:
            return [_incident(row._mapping) for row in conn.execute(query)]


def _incident(row: RowMapping) -> Incident:
    return Incident(**{**row, "lines": tuple(row["lines"])})


def _write(conn: Connection, incident: Incident) -> None:
    values = {**asdict(incident), "lines": list(incident.lines)}
    key = {"key": values.pop("key")}
    Database.upsert(conn, schema.incidents, key, values)
