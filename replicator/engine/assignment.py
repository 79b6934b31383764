"""Partitions coming and going: the consumer group's rebalance callbacks, and where
each partition assigned to this worker (or rewound) continues.

Part of `ReplicationTask` (a base class of it, sharing its state): the loop in
`task` keeps the partitions this part tracks, and this part decides when they are
replicated again. A target that does not answer keeps partitions waiting (paused,
tried again with backoff) instead of stopping the flow: a rebalance or a rewind
during a target outage must not need an operator.
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

from replicator import metrics
from replicator.backoff import Backoff
from replicator.config.model import FlowConfig
from replicator.config.policies import ReplicationPolicy
from replicator.engine.exactly_once import ExactlyOnce
from replicator.engine.kafka_errors import reason
from replicator.engine.offset_syncs import OffsetSyncWriter
from replicator.engine.partition import PartitionTracker
from replicator.engine.reporting import TaskReporter
from replicator.engine.resets import PendingResets
from replicator.engine.resume import ResumePoints
from replicator.engine.retention import outside_log
from replicator.engine.size_limits import SizeHold, SizeLimits
from replicator.engine.source_commits import SourceCommits
from replicator.engine.takeover import TakeoverRefused
from replicator.engine.topic_sync import TopicSync
from replicator.engine.transactions import TransactionsRefused
from replicator.errors import ConfigError, ReplicatorError
from replicator.kafka.clients import Consumer, Producer

log = logging.getLogger(__name__)

#: How long one attempt to reach the target waits for its answer.
_PROBE_TIMEOUT_S = 10.0


class Assignment:
    """Rebalances and resume points of a `ReplicationTask`."""

    # The task's state this part reads and changes (see ReplicationTask).
    flow: FlowConfig
    policy: ReplicationPolicy
    topic_sync: TopicSync
    _topics: dict[str, int]
    _trackers: dict[tuple[str, int], PartitionTracker]
    _waiting: dict[tuple[str, int], PartitionTracker]
    _target_next: dict[tuple[str, int], int]
    _backoff: Backoff
    _draining: bool
    _size_limits: SizeLimits
    _consumer: Consumer
    _producer: Producer
    _resume_points: ResumePoints
    _syncs: OffsetSyncWriter
    _exactly_once: ExactlyOnce | None
    _reporter: TaskReporter
    _source_commits: SourceCommits

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Where each partition continues is read from the target. A target that does
        # not answer only keeps its partitions waiting (paused, tried again with
        # backoff): a rebalance during a target outage must not stop the flow.
        trackers = [self._track(tp) for tp in partitions]
        self._resume(trackers)
        assignment = [
            TopicPartition(t.topic, t.partition, OFFSET_BEGINNING if t.resuming else t.next_offset)
            for t in trackers
        ]
        consumer.incremental_assign(assignment)
        # A partition this worker let go of when fenced may come back to it; its
        # pause must not outlive the assignment.
        consumer.resume(assignment)
        to_pause = [
            TopicPartition(t.topic, t.partition) for t in trackers if t.stopped or t.resuming
        ]
        if to_pause:
            consumer.pause(to_pause)
        if assignment:  # a cooperative rebalance often gives this worker nothing new
            waiting = f" ({len(self._waiting)} waiting for the target)" if self._waiting else ""
            log.info("flow %s: assigned %s%s", self.flow.name, _describe(assignment), waiting)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # The group moved on without us (a stalled process missed its session): the
        # partitions already have a new owner. In exactly-once mode that owner fenced
        # our transactions; otherwise what we flush now may be copied twice.
        log.warning(
            "flow %s: assignment lost (session timed out): %s",
            self.flow.name,
            _describe(partitions),
        )
        self._give_up(consumer, partitions, lost=True)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        log.info("flow %s: revoking assignment %s", self.flow.name, _describe(partitions))
        self._give_up(consumer, partitions, lost=False)

    def _give_up(self, consumer: Consumer, partitions: list[TopicPartition], lost: bool) -> None:
        """Let `partitions` go. What is in flight is finished (or dropped: see
        `_release_records`) first, so the next owner resumes exactly after it."""
        self._release_records(lost)
        self._syncs.emit_due(force=True)
        keys = [(tp.topic, tp.partition) for tp in partitions]
        if not lost:  # a lost assignment's partitions are already another worker's
            mine = [self._trackers[key] for key in keys if key in self._trackers]
            self._source_commits.commit_due(consumer, mine, self._in_flight(), force=True)
        self._source_commits.forget(keys)
        for tp in partitions:
            key = (tp.topic, tp.partition)
            tracker = self._trackers.pop(key, None)
            self._waiting.pop(key, None)
            self._target_next.pop(key, None)
            self._syncs.forget(key)
            if self._exactly_once is not None:
                self._exactly_once.close(key)
            if tracker is not None:
                self._reporter.revoked(tracker)
        consumer.incremental_unassign(partitions)

    def _track(self, tp: TopicPartition) -> PartitionTracker:
        """The tracker of a newly assigned partition, waiting to be resumed."""
        remote = self.policy.format_remote_topic(self.flow.source.alias, tp.topic)
        tracker = PartitionTracker(
            flow=self.flow.name,
            topic=tp.topic,
            partition=tp.partition,
            remote=remote,
            size=SizeHold(self._size_limits.record_limit(remote)),
            partition_labels=self.flow.metrics_partition_labels,
        )
        key = tracker.key
        self._trackers[key] = self._waiting[key] = tracker
        self._syncs.track(key)
        return tracker

    def _resume(self, trackers: list[PartitionTracker]) -> list[PartitionTracker]:
        """Find where each waiting partition continues: after its last committed
        replica on the target (or where an operator's reset says), every earlier
        owner fenced first in exactly-once mode. Returns the partitions resumed.
        While the target does not answer, the others keep waiting and are tried
        again with backoff, for as long as it stays away."""
        now = time.monotonic()
        if not trackers or not self._backoff.due(now):
            return []
        if self._draining:
            if len(self._producer):  # records still in flight may yet land: no tail is final
                return []
            self._draining = False
        resumed: list[PartitionTracker] = []
        try:
            self._know_remotes(trackers)
            wanted = [TopicPartition(t.topic, t.partition) for t in trackers]
            resets = self._resume_points.resets(wanted)  # once per attempt
            for tracker in trackers:
                if self._resume_partition(tracker, resets):
                    resumed.append(tracker)
        except ConfigError:
            raise
        except (KafkaException, ReplicatorError) as exc:
            if self._backoff.failed(now):
                log.warning(
                    "flow %s: %d partitions wait for %r to tell where they continue (%s); "
                    "trying again until it answers",
                    self.flow.name, len(self._waiting), self.flow.target.alias, reason(exc),
                )  # fmt: skip
            return resumed
        away = self._backoff.succeeded(time.monotonic())
        if away is not None:
            log.info(
                "flow %s: %r answers again after %.0f s; partitions resume from its tail",
                self.flow.name, self.flow.target.alias, away,
            )  # fmt: skip
        return resumed

    def _resume_waiting(self) -> None:
        """Resume the partitions that wait for the target, when it answers."""
        for tracker in self._resume(list(self._waiting.values())):
            self._restart_fetch(tracker)

    def _know_remotes(self, trackers: list[PartitionTracker]) -> None:
        """The remote topics of `trackers` have their partitions on the target, and
        the target producer knows them (it must before the first record)."""
        missing = {
            t.topic: self._topics.get(t.topic, t.partition + 1)
            for t in trackers
            if t.topic not in self._topics or t.partition >= self._topics[t.topic]
        }
        if missing:
            limits = self.topic_sync.sync(missing).max_message_bytes
            self._topics.update(missing)
            self._update_size_limits(limits)
        for topic in {t.topic for t in trackers}:
            remote = self.policy.format_remote_topic(self.flow.source.alias, topic)
            self._producer.list_topics(remote, timeout=_PROBE_TIMEOUT_S)
        if self._draining:  # the limits' new producer found the target away
            raise ReplicatorError(f"{self.flow.target.alias!r} did not take the records in flight")

    def _resume_partition(self, tracker: PartitionTracker, resets: PendingResets) -> bool:
        """Set where `tracker` continues; False if the target refuses it (stopped)."""
        key = tracker.key
        if self._exactly_once is None:
            tracker.producer = self._producer
        else:
            try:
                tracker.producer = self._exactly_once.open(tracker)
            except TransactionsRefused as exc:
                self._waiting.pop(key, None)
                tracker.resuming = False
                self._exactly_once.refuse(tracker, str(exc))
                return False
        try:
            point = self._resume_points.point(
                resets, self._consumer, tracker.topic, tracker.partition, tracker.remote
            )
        except TakeoverRefused as exc:  # this partition needs an operator; the others go on
            self._waiting.pop(key, None)
            tracker.resuming = False
            metrics.ERRORS.labels(tracker.flow, "takeover").inc()
            # Paused where it is assigned (`_on_assign`, or still paused while waiting).
            self._stop_partition(tracker, f"{exc}. The partition is stopped; the others go on")
            self._reporter.partition(tracker, None)
            return False
        tracker.next_offset = tracker.acked_next = point.offset
        tracker.counters.skipped += point.skipped
        self._resumed_at_target(tracker, point.target_end)
        self._syncs.restart(key)
        tracker.resuming = False
        self._waiting.pop(key, None)
        if point.outside_possible:
            self._check_position(tracker, point.low, point.high)
        return True

    def _check_position(self, tracker: PartitionTracker, low: int, high: int) -> bool:
        """Apply the failure policies when the resume point is outside the source log
        `low..high`, publishing the partition's status; False when it is inside."""
        outside = outside_log(
            self.flow, tracker.topic, tracker.partition, tracker.remote,
            position=tracker.next_offset, low=low, high=high,
        )  # fmt: skip
        if outside is None:
            return False
        if outside.lost:
            metrics.LOST.labels(*tracker.labels, "retention").inc(outside.lost)
            tracker.counters.lost += outside.lost
        metrics.ERRORS.labels(tracker.flow, outside.error).inc()
        if outside.skip:
            log.warning(
                "%s; skipping to offset %d as %s=skip says",
                outside.problem, outside.new_position, outside.setting,
            )  # fmt: skip
            tracker.next_offset = outside.new_position
        else:
            self._stop_partition(tracker, outside.stop_message)
        self._reporter.partition(tracker, max(0, high - tracker.next_offset))
        return True


def _describe(partitions: list[TopicPartition]) -> str:
    """topic[partition]@offset for the log lines of rebalances."""
    return ", ".join(
        f"{tp.topic}[{tp.partition}]" + (f"@{tp.offset}" if tp.offset >= 0 else "")
        for tp in partitions
    )
