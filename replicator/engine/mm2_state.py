"""What MirrorMaker 2 leaves on the clusters about where its copy of a flow stands.

- Its Connect offsets topic. MM2 in dedicated mode runs one Connect worker per
  flow `A->B` on the target cluster B, whose offsets topic is
  `mm2-offsets.A.internal` unless `offset.storage.topic` names another. The
  source connector (`MirrorSourceConnector`) stores, per source partition, the
  offset of the last record it copied and committed, as Connect's JSON: key
  `["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"orders"}]`,
  value `{"offset":1234}` (MM2 resumes at 1235); a null value deletes it. The
  topic has several partitions (Connect's default is 25); Connect keeps the
  latest value per key (its bytes) in the order records arrive in a partition,
  and a key always goes to the same partition (murmur2 of the key bytes).
- Its offset syncs, `mm2-offset-syncs.B.internal` (on the source by default):
  pairs (upstream, downstream) written after the target acknowledged the copy,
  every `offset.lag.max` records or so.

`MirrorMakerState` reads both for one flow and, to hand a flow back to MM2,
writes a position to the offsets topic in MM2's own format (`hand_back`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import cast

from confluent_kafka import KafkaError, TopicPartition

from replicator.config.model import FlowConfig
from replicator.engine.formats import OWN_SYNC_HEADER, OffsetSync
from replicator.errors import ReplicatorError
from replicator.kafka.clients import Producer
from replicator.kafka.range_reads import range_reader

#: The name MM2 gives its source connector in dedicated mode (the class's simple name).
SOURCE_CONNECTOR = "MirrorSourceConnector"
_TIMEOUT_S = 30.0
#: A record read back: (partition, key, value, headers).
_Record = tuple[int, bytes, "bytes | None", "list[tuple[str, bytes]] | None"]
_POLL_S = 0.2


def connect_offsets_topic(flow: FlowConfig, configured: str | None = None) -> str:
    """MM2's Connect offsets topic of `flow`, on its target cluster: `configured` (an
    operator's `--offsets-topic`), else the file's `offset.storage.topic`, else MM2's
    default name."""
    return configured or flow.mm2_offsets_topic or f"mm2-offsets.{flow.source.alias}.internal"


@dataclass(frozen=True)
class CommittedOffset:
    """MM2's committed position of one source partition: `offset` is the last record
    it copied and committed; `key` and `partition` locate the entry in the offsets
    topic (a hand-back writes the same key bytes to the same partition)."""

    offset: int
    key: bytes
    partition: int


@dataclass
class MirrorMakerState:
    """MM2's committed offsets and offset syncs of one flow, read once."""

    flow: FlowConfig
    offsets_topic: str
    committed: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)
    #: Whether the offsets topic exists on the target at all.
    offsets_topic_found: bool = False
    #: Per source partition, the newest offset sync this replicator wrote (upstream,
    #: downstream), read with MM2's (`syncs`); never counted as MM2's.
    _own_syncs: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)
    _syncs: dict[tuple[str, int], list[tuple[int, int]]] | None = None

    @classmethod
    def read(cls, flow: FlowConfig, offsets_topic: str | None = None) -> MirrorMakerState:
        """MM2's committed offsets now; its offset syncs when first asked for."""
        state = cls(flow, connect_offsets_topic(flow, offsets_topic))
        state._read_committed()
        return state

    @property
    def syncs(self) -> dict[tuple[str, int], list[tuple[int, int]]]:
        """Per source partition, MM2's syncs (upstream, downstream), oldest first."""
        if self._syncs is None:
            self._syncs = self._read_syncs()
        return self._syncs

    def own_sync(self, topic: str, partition: int) -> tuple[int, int] | None:
        """The newest offset sync (upstream, downstream) this replicator wrote for the
        source partition, if the topic still holds one."""
        _ = self.syncs  # ours are read with MM2's
        return self._own_syncs.get((topic, partition))

    def has_evidence(self, topic: str, partition: int) -> bool:
        """Whether MM2 (not this replicator) left a committed offset or an offset sync."""
        return (topic, partition) in self.committed or bool(self.syncs.get((topic, partition)))

    # -- reading ---------------------------------------------------------------------------

    def _read_committed(self) -> None:
        cluster = self.flow.target
        records = _read_topic(cluster.consumer, cluster.alias, self.offsets_topic)
        if records is None:
            return
        self.offsets_topic_found = True
        alias = self.flow.source.alias
        for partition, key, value, _ in records:
            where = _source_partition(key, self.offsets_topic)
            if where is None or where[0] != alias:
                continue  # another connector's entry (checkpoints, heartbeats)
            _, topic, source_partition = where
            if value is None:
                self.committed.pop((topic, source_partition), None)
                continue
            offset = _offset_value(value, self.offsets_topic, topic, source_partition)
            self.committed[(topic, source_partition)] = CommittedOffset(offset, key, partition)

    def _read_syncs(self) -> dict[tuple[str, int], list[tuple[int, int]]]:
        flow = self.flow
        cluster, topic = flow.offset_syncs_cluster, flow.offset_syncs_topic
        records = _read_topic(cluster.consumer, cluster.alias, topic)
        syncs: dict[tuple[str, int], list[tuple[int, int]]] = {}
        for _, key, value, headers in records or []:
            if value is None:
                continue
            sync = OffsetSync.decode(key, value)
            where = (sync.topic, sync.partition)
            if OWN_SYNC_HEADER in (headers or []):
                # Ours: where our own copy stood, never MM2's state. The topic is
                # compacted per partition key, so the newest of either writer is kept.
                self._own_syncs[where] = (sync.upstream, sync.downstream)
                continue
            syncs.setdefault(where, []).append((sync.upstream, sync.downstream))
        for pairs in syncs.values():
            pairs.sort()
        return syncs

    # -- handing a flow back to MM2 --------------------------------------------------------

    def hand_back(self, positions: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """Write, for each (topic, partition) -> next source offset in `positions`,
        MM2's committed offset (the last copied record: next - 1) to its offsets
        topic, so MM2 started again continues there. An entry MM2 wrote is replaced
        with its own key bytes in its own partition; a partition MM2 never committed
        gets a key in MM2's JSON (Jackson's order for MM2's map) at murmur2's
        partition, as Connect's producer would. Returns what was written."""
        if not self.offsets_topic_found:
            raise ReplicatorError(
                f"flow {self.flow.name}: MirrorMaker 2's offsets topic {self.offsets_topic} is "
                f"not on {self.flow.target.alias!r}; start MirrorMaker 2 once (it creates the "
                "topic) or name the topic with offset.storage.topic, then hand back again"
            )
        cluster = self.flow.target
        producer = Producer(
            {**cluster.idempotent_producer(), "partitioner": "murmur2_random"},
            cluster=cluster.alias,
        )
        failures: list[str] = []

        def delivered(error: object, _message: object) -> None:
            if error is not None:
                failures.append(str(error))

        written: dict[tuple[str, int], int] = {}
        for (topic, partition), next_offset in sorted(positions.items()):
            value = json.dumps({"offset": next_offset - 1}, separators=(",", ":")).encode()
            known = self.committed.get((topic, partition))
            if known is not None:
                producer.produce(
                    self.offsets_topic,
                    key=known.key,
                    value=value,
                    partition=known.partition,
                    on_delivery=delivered,
                )
            else:
                key = mm2_offset_key(self.flow.source.alias, topic, partition)
                producer.produce(self.offsets_topic, key=key, value=value, on_delivery=delivered)
            written[(topic, partition)] = next_offset - 1
        remaining = producer.flush(_TIMEOUT_S)
        if remaining or failures:
            raise ReplicatorError(
                f"flow {self.flow.name}: the hand-back to {self.offsets_topic} on "
                f"{cluster.alias!r} was not acknowledged ({remaining} unacknowledged, "
                f"errors: {failures or 'none'}); MirrorMaker 2 must not be started before "
                "it is: run it again"
            )
        return written


def mm2_offset_key(alias: str, topic: str, partition: int) -> bytes:
    """The key Connect writes for MM2's source partition: Jackson's serialisation of
    `[connector, {cluster, partition, topic}]`, the map being a java.util.HashMap,
    whose order for these three keys is cluster, partition, topic."""
    body = {"cluster": alias, "partition": partition, "topic": topic}
    return json.dumps([SOURCE_CONNECTOR, body], separators=(",", ":"), ensure_ascii=False).encode()


def _source_partition(key: bytes | None, topic: str) -> tuple[str, str, int] | None:
    """(cluster, topic, partition) of an MM2 source connector's entry, else None."""
    if key is None:
        return None
    try:
        connector, where = json.loads(key)
    except (ValueError, TypeError):
        return None  # not Connect's JSON: not MM2's
    if connector != SOURCE_CONNECTOR or not isinstance(where, dict):
        return None
    try:
        return str(where["cluster"]), str(where["topic"]), int(where["partition"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ReplicatorError(
            f"MirrorMaker 2's offsets topic {topic} holds a source connector key {key!r} "
            "without cluster, topic and partition; is it MM2's offsets topic?"
        ) from exc


def _offset_value(value: bytes, offsets_topic: str, topic: str, partition: int) -> int:
    try:
        offset = json.loads(value)["offset"]
        return int(offset)
    except (ValueError, TypeError, KeyError) as exc:
        raise ReplicatorError(
            f"MirrorMaker 2's offsets topic {offsets_topic}: the entry of {topic}[{partition}] "
            f'is {value[:80]!r}, not {{"offset": N}}; is it MM2\'s offsets topic?'
        ) from exc


def _read_topic(base: dict[str, str], alias: str, topic: str) -> list[_Record] | None:
    """Every record (partition, key, value, headers) of every partition of `topic`, in
    order per partition; None when the topic does not exist."""
    consumer = range_reader(base, "mm2-state", alias)
    try:
        metadata = consumer.list_topics(topic, timeout=_TIMEOUT_S).topics.get(topic)
        if metadata is None or metadata.error is not None or not metadata.partitions:
            return None
        ends = {}
        for partition in metadata.partitions:
            _, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=_TIMEOUT_S
            )
            if high > 0:
                ends[partition] = high
        if not ends:
            return []
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        records: list[_Record] = []
        done: set[int] = set()
        deadline = time.monotonic() + _TIMEOUT_S
        while len(done) < len(ends):
            if time.monotonic() > deadline:
                raise ReplicatorError(
                    f"reading {topic} on {alias!r} took over {_TIMEOUT_S:.0f}s; is the "
                    "cluster reachable?"
                )
            for message in consumer.consume(num_messages=10_000, timeout=_POLL_S):
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        continue  # the positions below say when every partition is read
                    raise ReplicatorError(f"reading {topic} on {alias!r}: {error.str()}")
                if message.key() is not None:
                    records.append(
                        cast(
                            "_Record",
                            (
                                message.partition(),
                                message.key(),
                                message.value(),
                                message.headers(),
                            ),
                        )
                    )
            positions = consumer.position([TopicPartition(topic, p) for p in ends])
            done = {tp.partition for tp in positions if tp.offset >= ends[tp.partition]}
        return records
    finally:
        consumer.close()
