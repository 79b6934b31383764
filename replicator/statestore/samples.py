"""The flow samples table group: per flow, what each supervisor run measured (lag,
checkpoint and heartbeat age, live workers) and found (its problems, its bounds).

The DR status page draws its lag and age charts from these rows and takes the
supervisor's verdict on what only the supervisor can judge from the newest one.
Rows are kept for a retention the recorder gives (`record` prunes older
ones in the same transaction), so the table stays a few hours of minutes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime, timedelta

from sqlalchemy import RowMapping, delete, insert, select

from replicator.statestore import database, schema
from replicator.statestore.database import Database
from replicator.statestore.records import FlowSample


class SampleStore:
    """Record and read flow samples. A part of `StateStore`."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def record(self, samples: Sequence[FlowSample], keep: timedelta) -> int:
        """Add `samples` and delete those older than `keep`; how many were deleted."""
        table = schema.flow_samples
        with self._db.write() as conn:
            if samples:
                conn.execute(
                    insert(table),
                    [{**asdict(s), "problems": list(s.problems)} for s in samples],
                )
            pruned = conn.execute(delete(table).where(table.c.sampled_at < database.now() - keep))
            return int(pruned.rowcount)

    def since(self, since: datetime, flow: str | None = None) -> list[FlowSample]:
        """The samples taken since `since` (of `flow` only, if given), oldest first."""
        table = schema.flow_samples
        query = select(table).where(table.c.sampled_at >= since)
        if flow is not None:
            query = query.where(table.c.flow == flow)
        with self._db.read() as conn:
            rows = conn.execute(query.order_by(table.c.sampled_at, table.c.seq))
            return [_sample(row._mapping) for row in rows]


def _sample(row: RowMapping) -> FlowSample:
    values = {k: v for k, v in row.items() if k != "seq"}
    return FlowSample(**{**values, "problems": tuple(row["problems"])})
