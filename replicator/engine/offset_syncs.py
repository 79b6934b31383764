"""Offset syncs: which target offset a source offset was written at, published on
MM2's offset-syncs topic for MM2's tools and the verification: on the source, or on
the target with `offset-syncs.topic.location = target` (`offset_syncs_producer`),
and not at all with `emit.offset-syncs.enabled = false`.

One sync per delivered run would flood the topic; none at all would leave the
translation unable to map. As MM2's `OffsetSyncWriter` does, a pair is published
when the mapping stops being a plain shift (the source skipped offsets: transaction
markers, compaction, skipped records; or something else wrote to the target
partition), every `offset.lag.max` records, and on a timer for the newest position.
In exactly-once mode a pair may only point at a committed record: it is held until
its transaction commits and dropped if it does not, and the timer publishes the newest
committed pair, never one of an open transaction (were it rolled back, the sync would
point at an aborted record and translation would come out low).

The writer also tells every acknowledged run to the flow's `WrittenRuns` (this
process's memory of where each record went, which the checkpoint rounds translate
from), under the same rule: in exactly-once mode only once its transaction commits.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

from replicator import metrics
from replicator.config.model import FlowConfig
from replicator.engine.formats import OWN_SYNC_HEADER, OffsetSync
from replicator.engine.written_runs import WrittenRuns
from replicator.kafka.clients import Producer

Key = tuple[str, int]  # (source topic, partition)


class SourceProducer(Protocol):
    """The producer to the source cluster (a `confluent_kafka.Producer`)."""

    def produce(
        self,
        topic: str,
        *,
        key: bytes,
        value: bytes,
        headers: list[tuple[str, str | bytes | None]] | None = None,
    ) -> None: ...
    def poll(self, timeout: float) -> int: ...
    def flush(self, timeout: float) -> int: ...


def offset_syncs_producer(flow: FlowConfig, source_producer: SourceProducer) -> SourceProducer:
    """The producer the flow's offset syncs go through: the task's producer to the source
    (heartbeats go through it too) when the syncs live there, else one of their own to
    the cluster `offset-syncs.topic.location` names. The writer flushes it whenever it
    flushes the syncs (`emit_due(force=True)`, before partitions are given up)."""
    if flow.offset_syncs_cluster is flow.source:
        return source_producer
    return Producer(flow.offset_syncs_cluster.idempotent_producer(linger_ms=50))


@dataclass
class _Partition:
    """One partition's newest acknowledged pair and what was synced of it."""

    last_source: int = -1
    last_target: int = -1
    #: The newest pair the timer may publish: acknowledged, and in exactly-once mode
    #: committed too.
    settled_source: int = -1
    settled_target: int = -1
    #: Source offset of the last pair published (or held for its transaction).
    synced_source: int = -1
    #: Timestamp of the last acknowledged record: a sync's age is the flow's latency.
    acked_timestamp_ms: int = 0
    #: Exactly-once mode: pairs held until their transaction commits.
    uncommitted: list[tuple[int, int]] = field(default_factory=list)


class OffsetSyncWriter:
    """Decides which acknowledged pairs become offset syncs, and publishes them."""

    def __init__(
        self,
        producer: SourceProducer,
        topic: str,
        flow: str,
        offset_lag_max: int,
        *,
        transactional: bool,
        enabled: bool = True,
        partition_labels: bool = False,
        runs: WrittenRuns | None = None,
    ) -> None:
        self._producer = producer
        #: Where the acknowledged runs are remembered (a new memory: the flow's is
        #: `written_runs(flow)`, shared with its checkpoint rounds).
        self.runs = runs if runs is not None else WrittenRuns()
        self.partition_labels = partition_labels  # metrics.partition.labels
        self.topic = topic
        self.flow = flow
        self.offset_lag_max = offset_lag_max
        #: `emit.offset-syncs.enabled`: false publishes nothing (pairs are still tracked).
        self.enabled = enabled
        self.transactional = transactional
        self._partitions: dict[Key, _Partition] = {}

    def track(self, key: Key) -> None:
        """A partition newly assigned: nothing acknowledged or synced yet."""
        self._partitions[key] = _Partition()
        self.runs.track(key)

    def forget(self, key: Key) -> None:
        """The partition is no longer ours: its next owner syncs it."""
        self._partitions.pop(key, None)
        self.runs.release(key)

    def restart(self, key: Key) -> None:
        """The partition resumes from the target tail: what the next run continues
        is not known, so its first delivery publishes a sync."""
        state = self._partitions[key]
        state.last_source = state.last_target = -1
        self.runs.restart(key)

    def acknowledged(
        self,
        key: Key,
        *,
        first_source: int,
        last_source: int,
        count: int,
        target_offset: int,
        timestamp_ms: int,
    ) -> None:
        """The target acknowledged a run of `count` records, source offsets
        `first_source..last_source`, the last at `target_offset`. The last record's
        pair is exact; it is synced unless the run continues the previous one on
        both sides and the last sync is less than `offset.lag.max` records behind."""
        state = self._partitions[key]
        source_contiguous = (
            first_source == state.last_source + 1 and last_source - first_source + 1 == count
        )
        target_contiguous = target_offset - count == state.last_target
        state.acked_timestamp_ms = timestamp_ms
        self.runs.acknowledged(
            key, first_source, last_source, count, target_offset, committed=not self.transactional
        )
        if (
            not source_contiguous
            or not target_contiguous
            or last_source - state.synced_source >= self.offset_lag_max
        ):
            if self.transactional:  # only a committed record may be pointed at
                state.uncommitted.append((last_source, target_offset))
                state.synced_source = last_source
            else:
                self._emit(key, state, last_source, target_offset)
        state.last_source = last_source
        state.last_target = target_offset
        if not self.transactional:
            state.settled_source, state.settled_target = last_source, target_offset

    def committed(self, key: Key) -> None:
        """The partition's transaction committed: publish the pairs it held; its
        newest pair is now the timer's to publish."""
        state = self._partitions[key]
        for source, target in state.uncommitted:
            self._emit(key, state, source, target)
        state.uncommitted.clear()
        state.settled_source, state.settled_target = state.last_source, state.last_target
        self.runs.committed(key)

    def rolled_back(self, key: Key) -> None:
        """The partition's records in flight (its open transaction) will not be
        committed: drop the pairs that point at them."""
        state = self._partitions.get(key)
        if state is not None:
            state.uncommitted.clear()
        self.runs.rolled_back(key)

    def emit_due(self, force: bool) -> None:
        """On a timer (and, forced, before partitions are given up: flushed), sync the
        newest settled pair of every partition that moved since its last sync."""
        for key, state in self._partitions.items():
            if state.settled_source > state.synced_source:
                self._emit(key, state, state.settled_source, state.settled_target)
        self._producer.poll(0)
        if force:
            self._producer.flush(30)

    def _emit(self, key: Key, state: _Partition, source: int, target: int) -> None:
        state.synced_source = source
        if not self.enabled:
            return
        sync = OffsetSync(key[0], key[1], source, target)
        self._producer.produce(
            self.topic, key=sync.key(), value=sync.value(), headers=[OWN_SYNC_HEADER]
        )
        label = metrics.partition_label(key[1], self.partition_labels)
        metrics.OFFSET_SYNC_TIMESTAMP.labels(self.flow, key[0], label).set(time.time())
        if state.acked_timestamp_ms:
            metrics.LATENCY.labels(self.flow).observe(
                max(0.0, time.time() - state.acked_timestamp_ms / 1000)
            )
