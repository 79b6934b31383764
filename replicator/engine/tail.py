"""Where a replication task resumes: the record after the last one it wrote.

The target partition's tail is the truth. Reading back from the high
watermark to the last record carrying our source header for this flow gives
the last source offset that was durably replicated, so a crash neither loses
nor duplicates, and no separate offset store can drift from the data. The
scan is `RangeReader.last` (`replicator.kafka.range_reads`), the one every
reader of the target's replicas uses; the offset translation reads its last
replica the same way. `tail_replicas` reads the tails of many partitions at once
(a rebalance that hands a worker thousands of partitions, a failover's look at
every partition), with the backward scan left for the few whose last replica lies
further back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from confluent_kafka import Message

from replicator.config.model import ClusterConfig
from replicator.engine.headers import Headers, replica_source_offset
from replicator.kafka.partition_scans import Scan, scan_partitions
from replicator.kafka.range_reads import RangeReader


@dataclass(frozen=True)
class Replica:
    """A replicated record on the target: its target and source offsets."""

    target_offset: int
    source_offset: int


def replica_of(message: Message, source_alias: bytes) -> Replica | None:
    """`message` as a replica of the flow from `source_alias`, or None (a record
    written by others or by another flow)."""
    source = replica_source_offset(cast("Headers | None", message.headers()), source_alias)
    return None if source is None else Replica(cast(int, message.offset()), source)


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
        return TailPosition(self.last(topic, partition, low, high), high)

    def last(self, topic: str, partition: int, low: int, end: int) -> Replica | None:
        """The last replica of `topic[partition]` at offsets [low, end)."""
        return self._reader.last(topic, partition, low, end, self._replica)

    def _replica(self, message: Message) -> Replica | None:
        return replica_of(message, self._alias)


#: The last replica of many partitions is looked for in this many offsets before each
#: partition's end first (`tail_replicas`).
TAIL_OFFSETS = 64


class _NotNearEnd:
    """`tail_replicas`' answer for a partition with no replica in its last offsets."""


#: The partition has no replica of ours in its last `TAIL_OFFSETS` offsets, but offsets
#: before them: read back further (`RangeReader.last`).
NOT_NEAR_END = _NotNearEnd()


class _LastReplica(Scan):
    """The last replica at offsets [start, end): a record written after the partition's
    end was read is not taken (the caller measured the partition up to `end`, and a
    replica past it would point at a record its window leaves out).

    The window's records are kept as read and their headers looked at only once it is
    read, newest first, up to the first replica: that is usually the last record, so
    one record's headers a partition, not the window's (at 5,000 partitions, reading
    the headers of all 64 records of each was most of a supervisor run's 4 to 5 s)."""

    def __init__(self, alias: bytes, start: int, end: int) -> None:
        self._alias = alias
        self._start = start
        self._end = end
        self._window: list[Message] = []
        self.found: Replica | None = None

    def start(self) -> int:
        return self._start

    def record(self, message: Message) -> int | None:
        offset = cast(int, message.offset())
        if offset < self._end:
            self._window.append(message)
        if offset >= self._end - 1:  # the window is read
            self.end()
            self.done = True
        return None

    def end(self) -> None:
        for message in reversed(self._window):
            self.found = replica_of(message, self._alias)
            if self.found is not None:
                break
        self._window = []


def tail_replicas(
    target: ClusterConfig, source_alias: str, bounds: Mapping[tuple[str, int], tuple[int, int]]
) -> dict[tuple[str, int], Replica | _NotNearEnd | None]:
    """The last replica of the flow from `source_alias` in each partition of `bounds`
    ((log start, end) each, as `partition_bounds` gives them) before that end, the last
    `TAIL_OFFSETS` offsets of every partition read at once (read_committed): None when
    the partition holds none, `NOT_NEAR_END` when there are offsets before that window
    to read back."""
    alias = source_alias.encode()
    scans = {
        where: _LastReplica(alias, max(low, high - TAIL_OFFSETS), high)
        for where, (low, high) in bounds.items()
        if high > low
    }
    if scans:
        scan_partitions(
            target.consumer,
            "tail",
            target.alias,
            scans,
            **{"isolation.level": "read_committed"},
        )
    found: dict[tuple[str, int], Replica | _NotNearEnd | None] = {}
    for where, (low, high) in bounds.items():
        scan = scans.get(where)
        if scan is None:
            found[where] = None  # empty
        elif scan.found is None and high - TAIL_OFFSETS > low:
            found[where] = NOT_NEAR_END
        else:
            found[where] = scan.found
    return found
