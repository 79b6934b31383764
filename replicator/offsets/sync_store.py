"""Where the flow wrote what: the exact (source, target) pairs it knows, per partition.

MM2's `OffsetSyncStore` keeps 64 offset syncs per partition and translates from the
nearest one, approximately. This store keeps the same kind of pairs, as anchors for
an exact translation (`replicator.offsets.batch_translation`): each pair says
"source offset s was written at target offset t", so the record a committed source
position `c >= s` continues at lies after `t`, usually `c - s` records on; a short
read forward from `t` finds it exactly, instead of a bisection of the whole target
partition.

The pairs come from two places:

- the flow's offset-syncs topic, which every worker of the flow (any process, the
  Python loop or the compiled data plane) writes from its acknowledged runs: at every
  place the mapping stops being a plain shift, every `offset.lag.max` records and on
  a timer (`replicator.engine.offset_syncs`). It is read once to its end when the
  store starts, then only what was added since, each round;
- the translations themselves: a record found at target `t` with source offset `s` is
  a pair too (`learn`).

A pair is only a hint: the translation checks the record at `t` before trusting it
(a topic recreated or truncated on the target, or MM2's syncs of records without our
header, fail that check and fall back to the bisection). A partition keeps at most
`MAX_PAIRS`, the oldest thinned out first: recent positions find a close anchor, old
ones a farther one.
"""

from __future__ import annotations

import bisect
import logging
import time
from typing import cast

from confluent_kafka import KafkaError, TopicPartition

from replicator.config.model import FlowConfig
from replicator.engine.formats import OffsetSync
from replicator.errors import ReplicatorError
from replicator.kafka.clients import Consumer
from replicator.kafka.range_reads import range_reader
from replicator.kafka.watermarks import watermarks

log = logging.getLogger(__name__)

#: Pairs kept per partition; past it, every other pair of the older half goes.
MAX_PAIRS = 512
_POLL_S = 0.05
_TIMEOUT_S = 30.0

Key = tuple[str, int]  # (source topic, partition)


class PartitionPairs:
    """One partition's known pairs, ascending on both sides."""

    def __init__(self) -> None:
        self.sources: list[int] = []
        self.targets: list[int] = []

    def add(self, source: int, target: int) -> None:
        """Add an exact pair. One that contradicts the order of those known (the
        partition was rewound, reset or recreated) replaces them all."""
        at = bisect.bisect_left(self.sources, source)
        if at < len(self.sources) and self.sources[at] == source:
            if self.targets[at] == target:
                return
            self.sources, self.targets = [source], [target]
            return
        below_ok = at == 0 or self.targets[at - 1] < target
        above_ok = at == len(self.sources) or self.targets[at] > target
        if not (below_ok and above_ok):
            self.sources, self.targets = [source], [target]
            return
        self.sources.insert(at, source)
        self.targets.insert(at, target)
        if len(self.sources) > MAX_PAIRS:
            self._thin()

    def at_or_before(self, source: int) -> tuple[int, int] | None:
        """The newest pair whose source offset is `<= source`."""
        at = bisect.bisect_right(self.sources, source)
        return None if at == 0 else (self.sources[at - 1], self.targets[at - 1])

    def after(self, source: int) -> tuple[int, int] | None:
        """The oldest pair whose source offset is `> source`."""
        at = bisect.bisect_right(self.sources, source)
        return None if at == len(self.sources) else (self.sources[at], self.targets[at])

    def forget(self) -> None:
        self.sources, self.targets = [], []

    def _thin(self) -> None:
        half = len(self.sources) // 2
        keep = list(range(0, half, 2)) + list(range(half, len(self.sources)))
        self.sources = [self.sources[i] for i in keep]
        self.targets = [self.targets[i] for i in keep]


class OffsetSyncStore:
    """The pairs of one flow, read from its offset-syncs topic as it grows."""

    def __init__(self, flow: FlowConfig) -> None:
        self.flow = flow
        self.cluster = flow.offset_syncs_cluster
        self.topic = flow.offset_syncs_topic
        self._pairs: dict[Key, PartitionPairs] = {}
        self._consumer: Consumer | None = None
        #: The next offset of the offset-syncs topic to read.
        self._position = 0
        #: Syncs read in all (a metric of the round's report).
        self.read = 0

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def anchor(self, topic: str, partition: int, source: int) -> tuple[int, int] | None:
        """The newest known pair of `topic[partition]` at or before `source`."""
        pairs = self._pairs.get((topic, partition))
        return None if pairs is None else pairs.at_or_before(source)

    def after(self, topic: str, partition: int, source: int) -> tuple[int, int] | None:
        """The oldest known pair of `topic[partition]` after `source`."""
        pairs = self._pairs.get((topic, partition))
        return None if pairs is None else pairs.after(source)

    def learn(self, topic: str, partition: int, source: int, target: int) -> None:
        """A pair found on the target (a record there with its source offset)."""
        self._pairs.setdefault((topic, partition), PartitionPairs()).add(source, target)

    def forget(self, topic: str, partition: int) -> None:
        """The partition's pairs proved wrong (its target was recreated or truncated)."""
        pairs = self._pairs.get((topic, partition))
        if pairs is not None:
            pairs.forget()

    def refresh(self) -> int:
        """Read the syncs written since the last refresh (all of them the first time);
        how many. Nothing when the topic does not exist yet (no flow wrote one)."""
        consumer = self._open()
        if consumer is None:
            return 0
        _, high = watermarks(consumer, self.topic, 0, _TIMEOUT_S)
        if high < self._position:  # the topic was recreated: start over
            self._pairs.clear()
            self._position = 0
            consumer.assign([TopicPartition(self.topic, 0, 0)])
        count = 0
        deadline = time.monotonic() + _TIMEOUT_S
        while self._position < high:
            messages = consumer.consume(10_000, _POLL_S)
            if not messages and time.monotonic() > deadline:
                raise ReplicatorError(
                    f"reading {self.topic} on {self.cluster.alias!r} from offset "
                    f"{self._position} received nothing for {_TIMEOUT_S:.0f}s; is "
                    f"{self.cluster.alias!r} reachable?"
                )
            for message in messages:
                error = message.error()
                offset = cast(int, message.offset())  # a consumed record's, or its EOF's
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        self._position = max(self._position, offset)
                        continue
                    raise ReplicatorError(
                        f"reading {self.topic} on {self.cluster.alias!r}: {error.str()}"
                    )
                self._position = offset + 1
                deadline = time.monotonic() + _TIMEOUT_S
                key, value = message.key(), message.value()
                if key is None or value is None:
                    continue
                sync = OffsetSync.decode(key, value)
                self.learn(sync.topic, sync.partition, sync.upstream, sync.downstream)
                count += 1
            if not messages:
                position = consumer.position([TopicPartition(self.topic, 0)])[0].offset
                self._position = max(self._position, position)
        self.read += count
        return count

    def _open(self) -> Consumer | None:
        if self._consumer is None:
            consumer = range_reader(
                self.cluster.consumer,
                "offset-syncs",
                self.cluster.alias,
                **{"auto.offset.reset": "earliest"},  # compaction may have removed offset 0
            )
            metadata = consumer.list_topics(self.topic, timeout=_TIMEOUT_S).topics.get(self.topic)
            if metadata is None or metadata.error is not None:
                consumer.close()
                return None
            consumer.assign([TopicPartition(self.topic, 0, 0)])
            self._consumer = consumer
        return self._consumer
