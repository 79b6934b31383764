"""The approvals table group: the answer to each procedure run's approval question.

The approval task writes it once, from the human-in-the-loop response
(`record`; a second write keeps the first answer: a question is answered
once); the run's first step that changes anything reads it (`get`) and acts
only on an Approve by an allowed approver (`replicator.procedures.approval`). A
task marked successful by hand writes nothing here, so its run changes nothing.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from sqlalchemy import RowMapping, select, update

from replicator.statestore import database, schema
from replicator.statestore.database import Database, json_field
from replicator.statestore.records import ApprovalRecord


class ApprovalStore:
    """Record and read approval answers. A part of `StateStore`."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def record(self, answer: ApprovalRecord) -> ApprovalRecord:
        """Record `answer` for its procedure run, unless one is recorded already: the
        recorded one (the first answer) is returned either way."""
        table = schema.approvals
        recorded = replace(answer, recorded_at=database.now())
        with self._db.write() as conn:
            found = conn.execute(
                select(table).where(table.c.procedure_id == answer.procedure_id)
            ).first()
            if found is not None:
                return _approval(found._mapping)
            values = {
                **{c.name: getattr(recorded, c.name) for c in table.c},
                "approver_roles": list(recorded.approver_roles),
                "details": json_field("approval details", recorded.details),
            }
            if not self._db.insert_new(conn, table, values):
                row = conn.execute(
                    select(table).where(table.c.procedure_id == answer.procedure_id)
                ).one()
                return _approval(row._mapping)
        return recorded

    def get(self, procedure_id: str) -> ApprovalRecord | None:
        """The recorded answer of run `procedure_id` (None: nobody answered one)."""
        table = schema.approvals
        with self._db.read() as conn:
            row = conn.execute(select(table).where(table.c.procedure_id == procedure_id)).first()
        return None if row is None else _approval(row._mapping)

    def preflight_rechecked(self, procedure_id: str, at: datetime) -> None:
        """Note that run `procedure_id`'s preflight ran again after a late answer."""
        table = schema.approvals
        with self._db.write() as conn:
            conn.execute(
                update(table)
                .where(table.c.procedure_id == procedure_id)
                .values(preflight_rechecked_at=at)
            )


def _approval(row: RowMapping) -> ApprovalRecord:
    return ApprovalRecord(**{**row, "approver_roles": tuple(row["approver_roles"] or ())})
