"""The verified ranges table group: per flow and source partition, the ranges of
source offsets verification proved copied, with their digests.

A verification run starts each partition after its last verified range
(`replicator.verification.incremental`); a run that proves new ranges writes the
partition's ranges anew here (a partition verified whole again, its target
truncated or recreated, or `--full`, loses its earlier ones).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict

from sqlalchemy import RowMapping, and_, delete, insert, or_, select

from replicator.statestore import schema
from replicator.statestore.database import Database
from replicator.statestore.records import VerifiedRange


class VerifiedRangeStore:
    """Record and read verified ranges. A part of `StateStore`."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def ranges(self, flow: str) -> list[VerifiedRange]:
        """Every verified range of `flow`, by topic, partition and source offset."""
        table = schema.verified_ranges
        query = select(table).where(table.c.flow == flow)
        with self._db.read() as conn:
            rows = conn.execute(
                query.order_by(table.c.topic, table.c.partition, table.c.source_first)
            )
            return [_verified(row._mapping) for row in rows]

    def replace(
        self, flow: str, partitions: Mapping[tuple[str, int], Sequence[VerifiedRange]]
    ) -> None:
        """In one transaction, for each (topic, partition) of `partitions`: forget its
        stored ranges and store the ranges given for it instead."""
        table = schema.verified_ranges
        keys = list(partitions)
        rows = []
        for (topic, partition), ranges in partitions.items():
            for verified in ranges:
                if (verified.flow, verified.topic, verified.partition) != (flow, topic, partition):
                    raise ValueError(
                        f"a range of {verified.flow} {verified.topic}[{verified.partition}] "
                        f"given for {flow} {topic}[{partition}]"
                    )
                rows.append(asdict(verified))
        with self._db.write() as conn:
            for chunk in _chunks(keys, 500):
                conn.execute(
                    delete(table).where(
                        table.c.flow == flow,
                        or_(*(and_(table.c.topic == t, table.c.partition == p) for t, p in chunk)),
                    )
                )
            if rows:
                conn.execute(insert(table), rows)


def _chunks(items: list[tuple[str, int]], size: int) -> Iterable[list[tuple[str, int]]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _verified(row: RowMapping) -> VerifiedRange:
    return VerifiedRange(**row)
