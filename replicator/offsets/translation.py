"""Exact offset translation: where a source position is on the target.

A consumer that committed offset `c` on the source has processed every record
before `c`; on the target it must continue at the first replicated record whose
source offset is `>= c`. Every replicated record carries its source offset in a
header and, within one partition, the target keeps the source's order, so that
record is found by bisecting the target partition on the header: a few short
reads, no scan of the partition, exact under any replication policy and across
transaction-marker gaps, and without the source cluster (which holds the
offset syncs, and may be the one that failed).

The opposite direction (a position on the target, back to the source) reads
the one record at that position: its header is the answer.

A partition taken over from MirrorMaker 2 (`replicator.engine.takeover`) starts
with MM2's copies, which carry no header: before our first replica, every
committed source record was copied in order (the takeover proved the copy's end
by content), so a position there lies as many records before our first replica
as there are committed source records between the two. The record found there is
compared with the source record by content; a mismatch holds the position back
(`Translation.exact` is False) instead of guessing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from confluent_kafka import Message

from replicator.config.model import ClusterConfig
from replicator.engine.alignment import Content
from replicator.engine.tail import Replica, replica_of
from replicator.kafka.range_reads import RangeReader

#: Bisection probes read one record each: keep fetches small.
_PROBE_FETCH_BYTES = 65_536


@dataclass(frozen=True)
class Translation:
    """Where the source position `source_offset` of `topic[partition]` is on the target.

    `target_offset` is the offset a consumer on the target continues from: the first
    replicated record with source offset >= `source_offset`, or, when that record is
    not replicated yet, the position after the last replicated record (where the
    next one will land). `replicated_until` is the next source offset not yet on the
    target; `missing` counts the source offsets from `source_offset` that are not
    replicated: committed records, not offsets (transaction markers are not missing),
    None when the source cannot be read (e.g. it is the cluster that failed).
    """

    topic: str
    partition: int
    source_offset: int
    remote_topic: str
    target_offset: int
    replicated_until: int | None
    missing: int | None
    #: Committed source records before `source_offset` that are not on the target (a
    #: group that read them on the source and moves to the target loses them).
    unreplicated_before: int | None = None
    #: The position lies in MirrorMaker 2's copies before our first replica, and the
    #: record at `target_offset` is not the copy of the source record there: held back.
    unproven: str | None = None

    @property
    def exact(self) -> bool:
        """True when every committed source record before `source_offset` is on the
        target, so a consumer at `target_offset` neither skips nor re-reads anything
        (past the last replicated record, the next one lands at `target_offset`)."""
        if self.unproven is not None:
            return False
        if self.unreplicated_before is not None:
            return self.unreplicated_before == 0
        return self.replicated_until is not None and self.source_offset <= self.replicated_until


class PartitionReader(RangeReader):
    """Reads committed records of one cluster's partitions, a range at a time
    (read_committed: aborted records and transaction markers are skipped, as
    consumers skip them), with the small fetches of bisection probes."""

    def __init__(self, cluster: ClusterConfig) -> None:
        super().__init__(
            cluster.consumer,
            "translate",
            repr(cluster.alias),
            **{
                "isolation.level": "read_committed",
                "max.partition.fetch.bytes": _PROBE_FETCH_BYTES,
            },
        )

    def count(self, topic: str, partition: int, start: int, end: int) -> int:
        """Committed records at offsets [start, end): offsets less markers and aborts."""
        return sum(1 for _ in self.messages(topic, partition, start, end))


class TargetIndex:
    """Finds one flow's replicated records on the target by their source offsets."""

    def __init__(self, target: ClusterConfig, source_alias: str) -> None:
        self.target = target
        self.source_alias = source_alias
        self._alias = source_alias.encode()
        self._reader = PartitionReader(target)
        self._present: set[tuple[str, int]] = set()

    def close(self) -> None:
        self._reader.close()

    def __enter__(self) -> TargetIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def bounds(self, topic: str, partition: int) -> tuple[int, int]:
        """(log start, end) of a target partition; one that does not exist yet is
        empty (a flow creates its remote topics when it first runs)."""
        if (topic, partition) not in self._present:
            if not self._reader.exists(topic, partition):
                return 0, 0
            self._present.add((topic, partition))
        return self._reader.bounds(topic, partition)

    def first_replica(self, topic: str, partition: int, start: int, end: int) -> Replica | None:
        """The first of our replicated records at target offsets [start, end)."""
        for replica in self._replicas(topic, partition, start, end):
            return replica
        return None

    def last_replica(self, topic: str, partition: int, end: int | None = None) -> Replica | None:
        """The last of our replicated records in the partition before target offset
        `end` (default: its end now), read back like the task's resume point
        (`replicator.engine.tail`). A caller that looked at the partition up to some
        end passes it, so a record replicated meanwhile does not mix in."""
        low, now = self.bounds(topic, partition)
        end = now if end is None else min(end, now)
        return self._reader.last(topic, partition, low, end, self._replica)

    def replica_at(self, topic: str, partition: int, offset: int) -> Replica | None:
        """Our record at or after target `offset` (a committed position may point at a
        transaction marker or a record written by others)."""
        _, end = self.bounds(topic, partition)
        return self.first_replica(topic, partition, offset, end)

    def find(
        self, topic: str, partition: int, source_offset: int, lo: int, hi: int
    ) -> Replica | None:
        """The first replicated record in target offsets [lo, hi) whose source offset is
        `>= source_offset`, by bisection: the source offsets of our records grow with
        their target offsets."""
        answer = None
        while lo < hi:
            mid = (lo + hi) // 2
            found = self.first_replica(topic, partition, mid, hi)
            if found is None:
                hi = mid
            elif found.source_offset >= source_offset:
                answer, hi = found, mid
            else:
                lo = found.target_offset + 1
        return answer

    def record_at(self, topic: str, partition: int, offset: int) -> Message | None:
        """The committed record at target `offset`, None if none is there."""
        message = self._reader.first(topic, partition, offset, offset + 1)
        return message if message is not None and message.offset() == offset else None

    def before(self, topic: str, partition: int, low: int, offset: int) -> Message | None:
        """The last committed record before target `offset`."""
        return self._reader.last(topic, partition, low, offset, lambda message: message)

    def _replicas(self, topic: str, partition: int, start: int, end: int) -> Iterator[Replica]:
        for message in self._reader.messages(topic, partition, start, end):
            replica = self._replica(message)
            if replica is not None:
                yield replica

    def _replica(self, message: Message) -> Replica | None:
        return replica_of(message, self._alias)

    def is_replica(self, message: Message) -> bool:
        """Whether `message` is a replica of this flow (carries our source header)."""
        return self._replica(message) is not None


def translate(
    index: TargetIndex,
    topic: str,
    partition: int,
    remote_topic: str,
    source_offset: int,
    *,
    source: tuple[PartitionReader, int] | None = None,
) -> Translation:
    """Translate one committed source offset; see `Translation`. `source` (a reader
    of the source cluster and the partition's high watermark there, when the source
    is reachable) lets it count the records that are missing."""
    # One look at the partition: while the flow runs, a record replicated between
    # `find` and `last_replica` would otherwise make the position after it the answer
    # (the group would skip that record on the target).
    low, end = index.bounds(remote_topic, partition)
    found = index.find(remote_topic, partition, source_offset, low, end)
    last = index.last_replica(remote_topic, partition, end)
    replicated_until = None if last is None else last.source_offset + 1
    unproven = None
    if found is not None and found.source_offset > source_offset:
        reader = None if source is None else source[0]
        earlier = _in_taken_over_copies(
            index,
            reader,
            (topic, remote_topic, partition),
            low=low,
            first=found,
            source_offset=source_offset,
        )
        if earlier is not None:
            target_offset, unproven = earlier
        else:
            target_offset = found.target_offset
    elif found is not None:
        target_offset = found.target_offset
    else:
        target_offset = end if last is None else last.target_offset + 1
    missing = unreplicated_before = None
    if source is not None:
        reader, source_end = source
        first_unreplicated = (
            reader.bounds(topic, partition)[0] if replicated_until is None else replicated_until
        )
        missing = reader.count(topic, partition, max(source_offset, first_unreplicated), source_end)
        unreplicated_before = reader.count(topic, partition, first_unreplicated, source_offset)
    return Translation(
        topic=topic,
        partition=partition,
        source_offset=source_offset,
        remote_topic=remote_topic,
        target_offset=target_offset,
        replicated_until=replicated_until,
        missing=missing,
        unreplicated_before=unreplicated_before,
        unproven=unproven,
    )


def _in_taken_over_copies(
    index: TargetIndex,
    source: PartitionReader | None,
    where: tuple[str, str, int],
    *,
    low: int,
    first: Replica,
    source_offset: int,
) -> tuple[int, str | None] | None:
    """(target offset, why unproven or None) of `source_offset` when it lies in
    MirrorMaker 2's copies before `first`, our first replica of the partition; None
    when the record before `first` is a replica of ours (then `source_offset` fell in
    a gap of ours: `first` is the answer) or there is none."""
    topic, remote, partition = where
    previous = index.before(remote, partition, low, first.target_offset)
    if previous is None or index.is_replica(previous):
        return None
    # MM2 copied every committed source record in order: no gaps first, checked below.
    guess = first.target_offset - (first.source_offset - source_offset)
    if source is None:  # the source is away: MM2 copies without gaps unless it has markers
        return max(guess, low), None
    source_end = first.source_offset
    original = source.first(topic, partition, source_offset, source_end)
    if original is None:
        return first.target_offset, None  # only markers from `source_offset` on
    if guess >= low and _same(index.record_at(remote, partition, guess), original):
        return guess, None
    counted = first.target_offset - source.count(topic, partition, source_offset, source_end)
    if counted >= low and _same(index.record_at(remote, partition, counted), original):
        return counted, None
    return max(counted, low), (
        f"{remote}[{partition}]@{counted} is not the copy of {topic}[{partition}]"
        f"@{original.offset()}: MirrorMaker 2's copies there are not contiguous"
    )


def source_in_taken_over_copies(
    index: TargetIndex,
    source: PartitionReader,
    where: tuple[str, str, int],
    *,
    first: Replica,
    target_offset: int,
) -> tuple[int | None, str | None]:
    """The reverse of `_in_taken_over_copies`: the source offset of the record at
    `target_offset` when it lies in MirrorMaker 2's copies before `first` (our first
    replica at or after it): (source offset, None) when found and checked by content,
    (None, why) when it cannot be proven, (None, None) when the position is not in
    MM2's copies (the record before `first` is ours: `first` is the answer)."""
    topic, remote, partition = where
    low, _ = index.bounds(remote, partition)
    previous = index.before(remote, partition, low, first.target_offset)
    if previous is None or index.is_replica(previous) or target_offset < low:
        return None, None
    guess = first.source_offset - (first.target_offset - target_offset)
    copy = index.record_at(remote, partition, target_offset)
    original = source.first(topic, partition, guess, first.source_offset) if guess >= 0 else None
    if original is not None and original.offset() == guess and _same(copy, original):
        return guess, None
    return None, (
        f"{remote}[{partition}]@{target_offset} lies in MirrorMaker 2's copies and is not the "
        f"copy of {topic}[{partition}]@{guess}: MM2's copies there are not contiguous"
    )


def _same(copy: Message | None, original: Message) -> bool:
    return copy is not None and Content.of(original).copied_as(Content.of(copy))
