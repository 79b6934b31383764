"""The partitions a replication task holds: one `PartitionTracker` per assigned source
partition, and the partitions among them that wait to be resumed from the target.

This part is the one owner of that registry. It tracks a partition when the group
assigns it, rewinds it (paused until it resumes from the target tail), halts or
stops it (a failure policy fired: it waits for an operator), drops it (fenced: no
longer ours) and forgets it (revoked). Each of those keeps the partition's source
fetch (paused, or fetched again from its position) and its offset-sync state in
step. What it needs comes in by constructor: the source consumer (pause, resume,
reassign), the offset-sync writer and the status reporter.
"""

from __future__ import annotations

import logging
from collections.abc import ValuesView
from typing import Protocol

from confluent_kafka import TopicPartition

from replicator.engine.partition import Counters, PartitionTracker
from replicator.engine.size_limits import SizeHold

log = logging.getLogger(__name__)

Key = tuple[str, int]


class Fetcher(Protocol):
    """What this part asks of the source consumer."""

    def pause(self, partitions: list[TopicPartition]) -> None: ...
    def resume(self, partitions: list[TopicPartition]) -> None: ...
    def incremental_assign(self, partitions: list[TopicPartition]) -> None: ...
    def incremental_unassign(self, partitions: list[TopicPartition]) -> None: ...


class SyncState(Protocol):
    """What this part tells the offset-sync writer about a partition's state."""

    def track(self, key: Key) -> None: ...
    def forget(self, key: Key) -> None: ...
    def restart(self, key: Key) -> None: ...
    def rolled_back(self, key: Key) -> None: ...


class Reporter(Protocol):
    """What this part publishes: a partition's status, and the metrics."""

    def lag(self, tracker: PartitionTracker) -> int | None: ...
    def partition(self, tracker: PartitionTracker, lag: int | None) -> None: ...
    def publish_metrics(self, trackers: ValuesView[PartitionTracker]) -> None: ...


class Partitions:
    """The assigned partitions of one task: tracked, waiting, stopped, dropped."""

    def __init__(
        self,
        flow: str,
        consumer: Fetcher,
        syncs: SyncState,
        reporter: Reporter,
        *,
        transactional: bool = False,
        partition_labels: bool = False,
    ) -> None:
        self.flow = flow
        self._consumer = consumer
        self._syncs = syncs
        self._reporter = reporter
        #: Exactly-once mode: each partition has a transactional producer of its own,
        #: made anew when it resumes after a rewind.
        self._transactional = transactional
        self._partition_labels = partition_labels
        self._trackers: dict[Key, PartitionTracker] = {}
        #: Partitions waiting to be resumed from the target (`Rebalance.resume_waiting`).
        self._waiting: dict[Key, PartitionTracker] = {}
        #: What each partition this task ever tracked did: a partition assigned again
        #: (a rebalance hands most partitions back to the worker that had them) goes on
        #: counting, so its status says what this process copied, not what it copied
        #: since the last rebalance.
        self._counters: dict[Key, Counters] = {}

    # -- reading -------------------------------------------------------------------------

    def get(self, key: Key) -> PartitionTracker | None:
        return self._trackers.get(key)

    def __len__(self) -> int:
        return len(self._trackers)

    def values(self) -> ValuesView[PartitionTracker]:
        return self._trackers.values()

    @property
    def trackers(self) -> dict[Key, PartitionTracker]:
        """Every tracked partition by key (read only: change it through this part)."""
        return self._trackers

    def waiting(self) -> list[PartitionTracker]:
        """The partitions waiting to be resumed from the target."""
        return list(self._waiting.values())

    def is_current(self, tracker: PartitionTracker) -> bool:
        """Whether `tracker` is still the one of its partition (not revoked, fenced)."""
        return self._trackers.get(tracker.key) is tracker

    def replicating(self, key: Key) -> PartitionTracker | None:
        """The tracker of the partition the next records belong to; None for records to
        drop: the partition is not ours, waits to resume, or a policy stopped it or
        holds it at an oversized record (they were fetched before it paused)."""
        tracker = self._trackers.get(key)
        if tracker is None or tracker.resuming or tracker.stopped or tracker.size.held:
            return None
        return tracker

    # -- changing ------------------------------------------------------------------------

    def track(self, topic: str, partition: int, remote: str, limit: int) -> PartitionTracker:
        """The tracker of a newly assigned partition, waiting to be resumed; `limit`
        is what a record may have of key, value and headers on `remote`."""
        tracker = PartitionTracker(
            flow=self.flow,
            topic=topic,
            partition=partition,
            remote=remote,
            size=SizeHold(limit),
            partition_labels=self._partition_labels,
        )
        key = tracker.key
        tracker.counters = self._counters.setdefault(key, tracker.counters)
        self._trackers[key] = self._waiting[key] = tracker
        self._syncs.track(key)
        return tracker

    def add(self, tracker: PartitionTracker) -> None:
        """Track a partition made elsewhere, as it is (tests and benchmarks)."""
        self._trackers[tracker.key] = tracker
        if tracker.resuming:
            self._waiting[tracker.key] = tracker

    def resumed(self, tracker: PartitionTracker) -> None:
        """The partition's position is known again: it replicates from there."""
        self._syncs.restart(tracker.key)
        tracker.resuming = False
        self._waiting.pop(tracker.key, None)

    def unwait(self, tracker: PartitionTracker) -> None:
        """The partition no longer waits to resume (a refusal stopped it instead)."""
        self._waiting.pop(tracker.key, None)
        tracker.resuming = False

    def rewind(self, tracker: PartitionTracker) -> None:
        """Pause the partition until it resumes from the target tail; what it has
        in flight no longer counts (its delivery reports are stale)."""
        tracker.resuming = True
        tracker.epoch += 1
        self._syncs.rolled_back(tracker.key)
        if self._transactional:
            tracker.producer = None
        self._waiting[tracker.key] = tracker
        self.pause(tracker)

    def rewind_all(self) -> None:
        """Rewind every partition that is not stopped."""
        for tracker in list(self._trackers.values()):
            if not tracker.stopped:
                self.rewind(tracker)

    def halt(self, tracker: PartitionTracker, message: str) -> None:
        """Stop the partition where it is, paused, and publish its status at once."""
        self.pause(tracker)
        self.stop(tracker, message)
        self._reporter.partition(tracker, self._reporter.lag(tracker))

    def stop(self, tracker: PartitionTracker, message: str) -> None:
        """Mark the partition stopped with `message` (it waits for an operator) and
        log it; the caller pauses it and publishes its status when it may."""
        tracker.stopped = message
        self._reporter.publish_metrics(self._trackers.values())  # counted in its gauge now
        log.error("flow %s: %s", self.flow, message)

    def drop(self, tracker: PartitionTracker) -> None:
        """The partition is no longer ours (fenced): forget it, and pause it until the
        group takes it from us."""
        key = tracker.key
        self._trackers.pop(key, None)
        self._waiting.pop(key, None)
        self._syncs.forget(key)
        self._consumer.pause([TopicPartition(*key)])

    def forget(self, key: Key) -> PartitionTracker | None:
        """The partition was taken from this worker: stop tracking it. Returns its
        tracker (None if it was not tracked)."""
        tracker = self._trackers.pop(key, None)
        self._waiting.pop(key, None)
        self._syncs.forget(key)
        return tracker

    def pause(self, tracker: PartitionTracker) -> None:
        self._consumer.pause([TopicPartition(tracker.topic, tracker.partition)])

    def restart_fetch(self, *trackers: PartitionTracker) -> None:
        """Fetch each partition again from its `tracker.next_offset`, or keep it paused
        when it is stopped or waits to resume. Reassigning, not seeking: librdkafka
        refuses a seek once an offset-reset error has stopped the partition's fetcher.
        All of them in one call of each kind: each call is a round trip to the
        consumer's main thread, and an estate resuming 5,000 partitions a call each
        spent 5 s before its copy began."""
        held = [t for t in trackers if t.stopped or t.resuming]
        going = [t for t in trackers if not (t.stopped or t.resuming)]
        if held:
            self._consumer.pause([TopicPartition(t.topic, t.partition) for t in held])
        if not going:
            return
        partitions = [TopicPartition(t.topic, t.partition) for t in going]
        self._consumer.incremental_unassign(partitions)
        self._consumer.incremental_assign(
            [TopicPartition(t.topic, t.partition, t.next_offset) for t in going]
        )
        self._consumer.resume(partitions)
