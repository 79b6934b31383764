"""Partitions coming and going: the consumer group's rebalance callbacks, and where
each partition assigned to this worker (or rewound) continues.

`Rebalance` tracks an assigned partition (in `Partitions`) and decides when it is
replicated again: after its last committed replica on the target (or where an
operator's reset says), every earlier owner fenced first in exactly-once mode. A
target that does not answer keeps partitions waiting (paused, tried again with
backoff) instead of stopping the flow: a rebalance or a rewind during a target
outage must not need an operator. Partitions given up (revoked, lost) leave nothing
in flight that could land after their next owner read the tail. It owns the backoff
of those attempts; everything else it changes belongs to the part it calls.
"""

from __future__ import annotations

import logging
import time
from typing import Protocol

from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

from replicator import metrics
from replicator.backoff import Backoff
from replicator.config.model import FlowConfig
from replicator.engine.kafka_errors import reason
from replicator.engine.mm2_liveness import MirrorMakerRunning
from replicator.engine.offset_syncs import OffsetSyncWriter
from replicator.engine.partition import PartitionTracker
from replicator.engine.partitions import Fetcher, Partitions
from replicator.engine.replica_writer import ReplicaWriter
from replicator.engine.replicated_topics import ReplicatedTopics
from replicator.engine.reporting import TaskReporter
from replicator.engine.resets import PendingResets
from replicator.engine.resume import ResumePoints
from replicator.engine.retention import outside_log
from replicator.engine.source_commits import Committer, SourceCommits
from replicator.engine.takeover import TakeoverRefused
from replicator.engine.transactions import TransactionsRefused
from replicator.errors import ConfigError, ReplicatorError
from replicator.kafka.watermarks import WatermarkSource
from replicator.listing import partitions_text

log = logging.getLogger(__name__)

#: How long one attempt to reach the target waits for its answer.
_PROBE_TIMEOUT_S = 10.0
#: Partitions waiting for the target try it again after this long at first, then
#: twice as long each time, up to the maximum, for as long as it stays away.
_RESUME_FIRST_S = 0.5
_RESUME_MAX_S = 10.0
#: Partitions of remote topics created a moment ago answer once their leaders settle,
#: seconds after each other (a fresh target given 5,000 partitions created their logs
#: over 16 to 60 s): they wait (paused) and are read again together, after 0.5 s while
#: each read finds some of them ready, and twice as long each time a read finds none,
#: up to 4 s (each read asks the cluster about every waiting partition while its
#: brokers are busy creating them), while the others replicate, until `_SETTLE_S` pass
#: with none found ready. After that each is read on its own, which waits for its
#: leader and names the partition that does not answer.
_SETTLE_FIRST_S = 0.5
_SETTLE_MAX_S = 4.0
_SETTLE_S = 30.0


class SourceFetch(Fetcher, Committer, WatermarkSource, Protocol):
    """The source consumer as the rebalance sees it: the consumer itself on the
    Python loop, `MoverFetch` on the compiled path."""


class Rebalance:
    """Assignment, revocation and resume points of one task's partitions."""

    def __init__(
        self,
        flow: FlowConfig,
        *,
        consumer: SourceFetch,
        partitions: Partitions,
        writer: ReplicaWriter,
        topics: ReplicatedTopics,
        resume_points: ResumePoints,
        syncs: OffsetSyncWriter,
        source_commits: SourceCommits,
        reporter: TaskReporter,
    ) -> None:
        self.flow = flow
        self._consumer = consumer
        self._partitions = partitions
        self._writer = writer
        self._topics = topics
        self._resume_points = resume_points
        self._syncs = syncs
        self._source_commits = source_commits
        self._reporter = reporter
        self._backoff = Backoff(_RESUME_FIRST_S, _RESUME_MAX_S)
        #: The waiting partitions wait for MirrorMaker 2 to be gone (`mm2_liveness`).
        self._mm2_seen = False
        #: Since when some partitions wait for their target leaders to settle, and when
        #: they are read again (`_settled`).
        self._settling_since: float | None = None
        self._settle = Backoff(_SETTLE_FIRST_S, _SETTLE_MAX_S)

    # -- the group's callbacks -----------------------------------------------------------

    def on_assign(self, consumer: SourceFetch, partitions: list[TopicPartition]) -> None:
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
            waiting = self._partitions.waiting()
            note = f" ({len(waiting)} waiting for the target)" if waiting else ""
            log.info("flow %s: assigned %s%s", self.flow.name, _describe(assignment), note)

    def on_lost(self, consumer: SourceFetch, partitions: list[TopicPartition]) -> None:
        # The group moved on without us (a stalled process missed its session): the
        # partitions already have a new owner. In exactly-once mode that owner fenced
        # our transactions; otherwise what we flush now may be copied twice.
        log.warning(
            "flow %s: assignment lost (session timed out): %s",
            self.flow.name,
            _describe(partitions),
        )
        self._give_up(consumer, partitions, lost=True)

    def on_revoke(self, consumer: SourceFetch, partitions: list[TopicPartition]) -> None:
        log.info("flow %s: revoking assignment %s", self.flow.name, _describe(partitions))
        self._give_up(consumer, partitions, lost=False)

    def _give_up(self, consumer: SourceFetch, partitions: list[TopicPartition], lost: bool) -> None:
        """Let `partitions` go. What is in flight is finished (or dropped: see
        `ReplicaWriter.release`) first, so the next owner resumes exactly after it."""
        self._writer.release(lost)
        self._syncs.emit_due(force=True)
        keys = [(tp.topic, tp.partition) for tp in partitions]
        if not lost:  # a lost assignment's partitions are already another worker's
            mine = [t for t in (self._partitions.get(key) for key in keys) if t is not None]
            self._source_commits.commit_due(consumer, mine, self._writer.in_flight(), force=True)
        self._source_commits.forget(keys)
        for key in keys:
            tracker = self._partitions.forget(key)
            self._writer.forget(key)
            if tracker is not None:
                self._reporter.revoked(tracker)
        consumer.incremental_unassign(partitions)

    def _track(self, tp: TopicPartition) -> PartitionTracker:
        """The tracker of a newly assigned partition, waiting to be resumed."""
        remote = self.flow.policy.format_remote_topic(self.flow.source.alias, tp.topic)
        return self._partitions.track(
            tp.topic, tp.partition, remote, self._writer.record_limit(remote)
        )

    # -- resuming ------------------------------------------------------------------------

    def resume_waiting(self) -> None:
        """Resume the partitions that wait for the target, when it answers."""
        waiting = self._partitions.waiting()
        if not waiting or not self._settle.due(time.monotonic()):
            return
        self._partitions.restart_fetch(*self._resume(waiting))

    def _resume(self, trackers: list[PartitionTracker]) -> list[PartitionTracker]:
        """Find where each waiting partition continues: after its last committed
        replica on the target (or where an operator's reset says), every earlier
        owner fenced first in exactly-once mode. Returns the partitions resumed.
        While the target does not answer, the others keep waiting and are tried
        again with backoff, for as long as it stays away."""
        now = time.monotonic()
        if not trackers or not self._backoff.due(now):
            return []
        if not self._writer.settled():  # records still in flight may yet land
            return []
        resumed: list[PartitionTracker] = []
        try:
            self._know_remotes(trackers)
            wanted = [TopicPartition(t.topic, t.partition) for t in trackers]
            resets = self._resume_points.resets(wanted)  # once per attempt
            # All tails and offsets at once; not in exactly-once mode, where each
            # partition's earlier owners are fenced before its tail may be read.
            batched = len(trackers) > 1 or self._settling_since is not None
            if batched and self._writer.exactly_once is None:
                read = self._resume_points.prefetch(
                    [(t.topic, t.partition, t.remote) for t in trackers]
                )
                trackers = self._settled(trackers, read, now)
            for tracker in trackers:
                if self._resume_partition(tracker, resets):
                    resumed.append(tracker)
        except ConfigError:
            raise
        except MirrorMakerRunning as exc:  # they wait, asked again with backoff
            metrics.ERRORS.labels(self.flow.name, "takeover").inc()
            if self._backoff.failed(now):
                log.error("%s; %d partitions wait", exc, len(self._partitions.waiting()))
            self._mm2_seen = True
            return resumed
        except (KafkaException, ReplicatorError) as exc:
            if self._backoff.failed(now):
                log.warning(
                    "flow %s: %d partitions wait for %r to tell where they continue (%s); "
                    "trying again until it answers",
                    self.flow.name, len(self._partitions.waiting()), self.flow.target.alias,
                    reason(exc),
                )  # fmt: skip
            return resumed
        finally:
            self._resume_points.forget_prefetched()
        self._note_resumed()
        return resumed

    def _note_resumed(self) -> None:
        """Say once what the partitions waited for, when an attempt got through."""
        away = self._backoff.succeeded(time.monotonic())
        if away is not None and self._mm2_seen:
            log.info(
                "flow %s: MirrorMaker 2 shows no sign of life after %.0f s; partitions are "
                "taken over from it",
                self.flow.name, away,
            )  # fmt: skip
        elif away is not None:
            log.info(
                "flow %s: %r answers again after %.0f s; partitions resume from its tail",
                self.flow.name, self.flow.target.alias, away,
            )  # fmt: skip
        self._mm2_seen = False

    def _settled(
        self, trackers: list[PartitionTracker], read: set[tuple[str, int]], now: float
    ) -> list[PartitionTracker]:
        """Those of `trackers` to resume now: the ones `prefetch` read, while the
        others' target leaders settle (they stay waiting, read again together with
        backoff); all of them once `_SETTLE_S` passed with none found ready."""
        unread = [t for t in trackers if (t.topic, t.partition) not in read]
        if not unread:
            self._settling_since = None
            self._settle.succeeded(now)
            return trackers
        if self._settling_since is None or read:  # counted from the last progress
            self._settling_since = now
        if now - self._settling_since > _SETTLE_S:
            return trackers
        if read:  # leaders keep settling: the rest are read again soon, not later
            self._settle.succeeded(now)
        self._settle.failed(now)
        return [t for t in trackers if (t.topic, t.partition) in read]

    def _know_remotes(self, trackers: list[PartitionTracker]) -> None:
        """The remote topics of `trackers` have their partitions on the target, and
        the target producer knows them (it must before the first record)."""
        limits = self._topics.add_missing(trackers)
        if limits is not None:
            self._writer.update_size_limits(limits)
        remote = self.flow.policy.format_remote_topic
        topics = {t.topic for t in trackers}
        self._writer.know((remote(self.flow.source.alias, t) for t in topics), _PROBE_TIMEOUT_S)
        if self._writer.draining:  # the limits' new producer found the target away
            raise ReplicatorError(f"{self.flow.target.alias!r} did not take the records in flight")

    def _resume_partition(self, tracker: PartitionTracker, resets: PendingResets) -> bool:
        """Set where `tracker` continues; False if the target refuses it (stopped)."""
        try:
            self._writer.for_partition(tracker)
        except TransactionsRefused as exc:
            self._partitions.unwait(tracker)
            exactly_once = self._writer.exactly_once
            assert exactly_once is not None  # only transactional producers are refused
            exactly_once.refuse(tracker, str(exc))
            return False
        try:
            point = self._resume_points.point(
                resets, self._consumer, tracker.topic, tracker.partition, tracker.remote
            )
        except TakeoverRefused as exc:  # this partition needs an operator; the others go on
            self._partitions.unwait(tracker)
            metrics.ERRORS.labels(tracker.flow, "takeover").inc()
            # Paused where it is assigned (`on_assign`, or still paused while waiting).
            self._partitions.stop(tracker, f"{exc}. The partition is stopped; the others go on")
            self._reporter.partition(tracker, None)
            return False
        tracker.next_offset = tracker.acked_next = point.offset
        tracker.counters.skipped += point.skipped
        self._writer.resumed_at(tracker, point.target_end)
        self._partitions.resumed(tracker)
        if point.outside_possible:
            self.check_position(tracker, point.low, point.high)
        return True

    def check_position(self, tracker: PartitionTracker, low: int, high: int) -> bool:
        """Apply the failure policies when the partition's position is outside the
        source log `low..high`, publishing the partition's status; False when it is
        inside."""
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
            self._partitions.stop(tracker, outside.stop_message)
        self._reporter.partition(tracker, max(0, high - tracker.next_offset))
        return True


#: A rebalance's log line names each partition and its offset up to this many; a
#: larger one names its topics' partitions in runs and counts them (`partitions_text`).
_DESCRIBED_ONE_BY_ONE = 20


def _describe(partitions: list[TopicPartition]) -> str:
    """topic[partition]@offset for the log lines of rebalances, bounded: at 1,000
    partitions the list was a line of 17 KB."""
    if len(partitions) > _DESCRIBED_ONE_BY_ONE:
        return partitions_text((tp.topic, tp.partition) for tp in partitions)
    return ", ".join(
        f"{tp.topic}[{tp.partition}]" + (f"@{tp.offset}" if tp.offset >= 0 else "")
        for tp in partitions
    )
