"""Where an assigned (or rewound) partition continues: after its last replica on the
target, after MirrorMaker 2's last copy when MM2 filled the target before us
(`takeover`), or where an operator's offset reset says, and where the source log is now.

The task reads the target tail and the pending resets only through this module: one
read of the tail gives both the resume point and the reset decision. Fencing the
partition's earlier owners in exactly-once mode comes first, and is the caller's:
only then is the tail read here final.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from confluent_kafka import TopicPartition

from replicator.config.model import FlowConfig
from replicator.engine.mm2_liveness import TakeoverGate
from replicator.engine.resets import PendingResets
from replicator.engine.tail import (
    NOT_NEAR_END,
    TAIL_OFFSETS,
    TailPosition,
    TailReader,
    tail_replicas,
)
from replicator.engine.takeover import TakeoverPlanner, decide
from replicator.kafka.bounds import partition_bounds
from replicator.kafka.clients import admin_for
from replicator.kafka.range_reads import range_reader
from replicator.kafka.watermarks import WatermarkSource, watermarks

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ResumePoint:
    """Where one source partition continues."""

    offset: int
    #: Source records an operator's reset skips (0 without a reset, or one that rewinds).
    skipped: int
    #: The source partition's log start and high watermark when read.
    low: int
    high: int
    #: The target partition's high watermark when read: its next replica lands there
    #: or later (records of others, or transaction markers, may come first).
    target_end: int
    #: The target holds a replica of the partition or a reset applies: `offset` was
    #: not read from the source log, so it may lie outside it (retention, recreation).
    outside_possible: bool


class ResumePoints:
    """Reads resume points: the target tail with one reusable reader, the resets
    topic once per round of partitions, both clusters' offsets with an admin client
    of each (clients made once: partitions waiting for a target that creates them
    are read every half second)."""

    def __init__(self, flow: FlowConfig) -> None:
        self.flow = flow
        self._tail = TailReader(flow.target.consumer, flow.source.alias)
        self._target_admin = admin_for(flow.target)
        self._source_admin = admin_for(flow.source)
        self._resets_reader = range_reader(flow.target.consumer, "resets", flow.target.alias)
        self._takeover: TakeoverPlanner | None = None
        #: MM2 must be gone before a partition is taken over from it.
        self._gate = TakeoverGate(flow)
        #: (source topic, partition) -> its target tail and source (low, high), read
        #: for many partitions at once by `prefetch`, taken by the next `point`.
        self._prefetched: dict[tuple[str, int], tuple[TailPosition, tuple[int, int]]] = {}

    def prefetch(self, partitions: list[tuple[str, int, str]]) -> set[tuple[str, int]]:
        """Read what `point` needs of many (topic, partition, remote topic) at once:
        the target's tails and both clusters' offsets, in a few requests per broker,
        instead of a few round trips per partition (a worker given 10,000 partitions
        waited minutes for its first record). Returns the (topic, partition)s read: one
        not answered here (a remote partition created a moment ago, its leader not
        elected yet) is read on its own by `point`; `forget_prefetched` drops what was
        not used."""
        target = partition_bounds(
            self.flow.target, [(r, p) for _, p, r in partitions], self._target_admin
        )
        # The source only where the target answered: the others are read again later
        # (thousands wait while a target creates their partitions).
        source = partition_bounds(
            self.flow.source,
            [(t, p) for t, p, r in partitions if (r, p) in target],
            self._source_admin,
        )
        tails = tail_replicas(self.flow.target, self.flow.source.alias, target)
        for topic, partition, remote in partitions:
            bounds = target.get((remote, partition))
            if bounds is None or (topic, partition) not in source:
                continue
            last = tails[remote, partition]
            if last is NOT_NEAR_END:
                last = self._tail.last(remote, partition, bounds[0], bounds[1] - TAIL_OFFSETS)
            tail = TailPosition(last, bounds[1])  # type: ignore[arg-type]
            self._prefetched[topic, partition] = (tail, source[topic, partition])
        return set(self._prefetched)

    def forget_prefetched(self) -> None:
        self._prefetched.clear()

    def close(self) -> None:
        self._tail.close()
        self._resets_reader.close()
        if self._takeover is not None:
            self._takeover.close()

    def resets(self, partitions: Iterable[TopicPartition]) -> PendingResets:
        """The pending resets of `partitions` (one read of the resets topic)."""
        return PendingResets.read(self.flow, partitions, self._resets_reader)

    def point(
        self,
        resets: PendingResets,
        source: WatermarkSource,
        topic: str,
        partition: int,
        remote: str,
    ) -> ResumePoint:
        """Where `topic[partition]` (replicated to `remote`) continues; `source` reads
        the source watermarks."""
        prefetched = self._prefetched.pop((topic, partition), None)
        if prefetched is not None:
            tail, (low, high) = prefetched
        else:
            tail = self._tail.position(remote, partition)
            low, high = watermarks(source, topic, partition)
        taken_over = self._taken_over(tail, topic, partition, remote)
        if taken_over is not None:
            resume = taken_over
        elif tail.next_source_offset is not None:
            resume = tail.next_source_offset
        else:
            resume = low
        # An operator's offset reset applies while nothing was replicated since it (this
        # read of the tail tells: no second one).
        reset = resets.honoured(topic, partition, tail, resume)
        if reset is None:
            outside_possible = tail.next_source_offset is not None or taken_over is not None
            return ResumePoint(resume, 0, low, high, tail.target_end, outside_possible)
        skipped = max(0, reset.offset - resume)
        return ResumePoint(reset.offset, skipped, low, high, tail.target_end, True)

    def _taken_over(
        self, tail: TailPosition, topic: str, partition: int, remote: str
    ) -> int | None:
        """Where the partition starts after MirrorMaker 2's copy (see `takeover`), when
        MM2 left its state and the target holds records but no replica of ours, or
        records after our last replica that MM2 copied once the flow was handed back
        to it; None otherwise. The plan is logged, once per partition taken over."""
        last = tail.last
        if tail.target_end == 0 or (last is not None and tail.target_end <= last.target_offset + 1):
            return None  # empty, or nothing after our last replica
        if self._takeover is None:
            self._takeover = TakeoverPlanner(self.flow)
        if last is None:
            point = self._takeover.point(topic, partition, remote)
        else:
            point = self._takeover.point_after(topic, partition, remote, last)
        if point is None:
            return None if last is not None else self._after_own_sync(tail, topic, partition)
        # MM2 must be gone (MirrorMakerRunning: the partitions wait and are asked again).
        self._gate.check(self._takeover.end_moved(remote, partition, tail.target_end))
        log.info("taking over from MirrorMaker 2: %s", point.describe())
        return decide(self.flow, point)

    def _after_own_sync(self, tail: TailPosition, topic: str, partition: int) -> int | None:
        """Where a partition whose target holds records but no replica (ours expired by
        retention on an idle partition) continues when our own newest offset sync names
        the target's last record: right after its source offset. None otherwise."""
        assert self._takeover is not None
        own = self._takeover.state.own_sync(topic, partition)
        if own is None or own[1] + 1 != tail.target_end:
            return None
        upstream, downstream = own
        log.info(
            "%s[%d]: no replica left on the target (retention); our own offset sync "
            "%d->%d names its last record (end %d): continuing at source offset %d",
            topic, partition, upstream, downstream, tail.target_end, upstream + 1,
        )  # fmt: skip
        return upstream + 1
