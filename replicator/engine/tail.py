"""Where a replication task resumes: the record after the last one it wrote.

The target partition's tail is the truth. Reading back from the high
watermark to the last record carrying our source header for this flow gives
the last source offset that was durably replicated, so a crash neither loses
nor duplicates, and no separate offset store can drift from the data. The
scan is `RangeReader.last` (`replicator.kafka.range_reads`), the one every
reader of the target's replicas uses; the offset translation reads its last
replica the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import Message

from replicator.engine.headers import replica_source_offset
from replicator.kafka.range_reads import RangeReader


@dataclass(frozen=True)
class Replica:
    """A replicated record on the target: its target and source offsets."""

    target_offset: int
    source_offset: int


def replica_of(message: Message, source_alias: bytes) -> Replica | None:
    """`message` as a replica of the flow from `source_alias`, or None (a record
    written by others or by another flow)."""
    source = replica_source_offset(message.headers(), source_alias)
    return None if source is None else Replica(message.offset(), source)


@dataclass(frozen=True)
class TailPosition:
    """Resume point of one target partition: its last replica (None: nothing
    replicated yet) and its high watermark when read."""

    last: Replica | None
    target_end: int

    @property
    def next_source_offset(self) -> int | None:
        """The source offset to resume at; None when nothing is replicated yet."""
        return None if self.last is None else self.last.source_offset + 1


class TailReader:
    """Reads resume points from the target cluster with one reusable consumer
    (read_committed: a replica of an aborted transaction is not on the target)."""

    def __init__(self, consumer_config: dict[str, str], source_alias: str) -> None:
        self._alias = source_alias.encode()
        self._reader = RangeReader(
            consumer_config, "tail", "the target cluster", **{"isolation.level": "read_committed"}
        )

    def close(self) -> None:
        self._reader.close()

    def exists(self, topic: str, partition: int) -> bool:
        """Whether the target partition exists (reading its tail would wait for it)."""
        return self._reader.exists(topic, partition)

    def position(self, topic: str, partition: int) -> TailPosition:
        """The last replica of `topic[partition]` (control records and records written
        by others may sit after it), or None when the log holds none."""
        low, high = self._reader.bounds(topic, partition)
        last = self._reader.last(topic, partition, low, high, self._replica)
        return TailPosition(last, high)

    def _replica(self, message: Message) -> Replica | None:
        return replica_of(message, self._alias)
