"""The replication task: source partitions in, the same partitions of the remote
topics out, every record intact and carrying its provenance and source offset.

One task runs one flow in one process. Its partitions come from Kafka's
consumer-group protocol on the source cluster, so more tasks of the same flow
(on any machine) share the work without a coordinator. It never commits
consumer offsets: the tail of each target partition says where to resume.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, Message, TopicPartition

from replicator import metrics
from replicator.acls.principal import missing_acl
from replicator.backoff import Backoff
from replicator.config.model import FlowConfig
from replicator.config.policies import ReplicationPolicy
from replicator.engine.formats import Heartbeat, OffsetSync
from replicator.engine.headers import (
    OFFSET_HEADER,
    ORIGIN_HEADER,
    OURS,
    SOURCE_HEADER,
    Headers,
    encode_offset,
)
from replicator.engine.internal_topics import ensure_compacted_topic
from replicator.engine.resets import PendingResets
from replicator.engine.status import STATUS_TOPIC, PartitionStatus, StatusWriter, WorkerStatus
from replicator.engine.tail import TailReader
from replicator.engine.topic_sync import HEADER_HEADROOM_BYTES, TopicSync
from replicator.engine.transactions import (
    Outcome,
    Settled,
    TransactionalWriters,
    TransactionsRefused,
)
from replicator.errors import ConfigError, ReplicatorError
from replicator.kafka.clients import Consumer, Producer
from replicator.kafka.watermarks import watermarks

log = logging.getLogger(__name__)

_CONSUME_BATCH = 10_000
_CONSUME_TIMEOUT_S = 0.2
_HOUSEKEEPING_S = 1.0
_OFFSET_SYNC_TIMER_S = 10.0
_STATUS_EVERY_S = 10.0
#: An oversized record makes its topic's configs sync at once, at most this often.
_RESYNC_EVERY_S = 10.0
#: The brokers' default max.message.bytes, assumed for a remote topic not described yet.
_DEFAULT_LIMIT = 1_048_588
#: Fixed bytes a single record adds to a batch beyond key, value and headers.
_RECORD_OVERHEAD = 61 + 5 * 6
_AUTH_ERRORS = frozenset(
    {
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError._AUTHENTICATION,
    }
)
#: Delivery errors that reject the records themselves: sending them again fails the
#: same way. Any other delivery error means the target did not take them now (it is
#: away, restarting, electing a leader): the partition resumes from the target tail.
_REJECTED = frozenset(
    {
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.RECORD_LIST_TOO_LARGE,
        KafkaError.INVALID_RECORD,
        KafkaError.INVALID_TIMESTAMP,
        KafkaError.POLICY_VIOLATION,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    }
)
#: Partitions waiting for the target try it again after this long at first, then
#: twice as long each time, up to the maximum, for as long as it stays away.
_RESUME_FIRST_S = 0.5
_RESUME_MAX_S = 10.0
#: How long one attempt to reach the target waits for its answer.
_PROBE_TIMEOUT_S = 10.0


class TaskFailed(ReplicatorError):
    """The task stopped because a failure policy said `fail`; status says where."""


@dataclass
class PartitionTracker:
    """Progress of one source partition; updated per record, published per second."""

    flow: str
    topic: str
    partition: int
    remote: str
    next_offset: int
    size_limit: int
    last_source: int = -1
    last_target: int = -1
    last_synced_source: int = -1
    last_synced_target: int = -1
    replicated: int = 0
    replicated_bytes: int = 0
    published_records: int = 0
    published_bytes: int = 0
    skipped: int = 0
    lost: int = 0
    stopped: str | None = None
    #: An oversized record waits for a config sync of its topic (partition paused).
    held: bool = False
    #: Offset of the oversized record a config sync was already tried for.
    resynced_at: int = -1
    last_ack_timestamp_ms: int = 0
    #: The producer writing this partition: shared, or its own in exactly-once mode.
    producer: Producer | None = None
    #: Exactly-once mode: offset syncs held until their transaction commits.
    uncommitted_syncs: list[tuple[int, int]] = field(default_factory=list)
    #: Where to continue is not known yet: it is read from the target (its committed
    #: tail) on assignment, and again after records did not reach it. Paused meanwhile.
    resuming: bool = True
    #: Bumped at every rewind: delivery reports of records produced before are stale.
    epoch: int = 0

    def status(self, lag: int | None) -> PartitionStatus:
        return PartitionStatus(
            flow=self.flow,
            topic=self.topic,
            partition=self.partition,
            state="stopped" if self.stopped else "replicating",
            next_offset=self.next_offset if self.next_offset >= 0 else None,
            lag=lag,
            replicated=self.replicated,
            skipped=self.skipped,
            lost=self.lost,
            error=self.stopped,
        )


class ReplicationTask:
    """Runs one flow until `stop_event` is set or a failure policy stops it."""

    def __init__(
        self,
        flow: FlowConfig,
        stop_event: threading.Event | None = None,
        worker_id: str | None = None,
    ) -> None:
        self.flow = flow
        self.stop_event = stop_event or threading.Event()
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}"
        self.started_ms = int(time.time() * 1000)
        self.policy: ReplicationPolicy = flow.policy
        self._alias = flow.source.alias.encode()
        self._target_alias = flow.target.alias.encode()
        self.topic_sync = TopicSync(flow, self.policy)
        self._trackers: dict[tuple[str, int], PartitionTracker] = {}
        #: Partitions waiting to be resumed from the target, tried with `_backoff`.
        self._waiting: dict[tuple[str, int], PartitionTracker] = {}
        self._backoff = Backoff(_RESUME_FIRST_S, _RESUME_MAX_S)
        #: Default mode, after records did not reach the target: the producer still
        #: settles what it had in flight, and no tail is final before it is done.
        self._draining = False
        self._size_limits: dict[str, int] = {}
        self._held: list[PartitionTracker] = []
        self._resynced: dict[str, float] = {}  # topic -> when an oversized record synced it
        self._producer_limits: tuple[int, int] = (0, 0)
        self._topics: dict[str, int] = {}
        self._fatal: str | None = None
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self._source_producer: Producer | None = None
        self._status: StatusWriter | None = None
        self._tail: TailReader | None = None
        self._writers = (
            TransactionalWriters(flow.name, self._transactional_config)
            if flow.exactly_once
            else None
        )

    # -- lifecycle -----------------------------------------------------------------------

    def run(self) -> None:
        """Replicate until stopped. Raises TaskFailed when a `fail` policy fires."""
        flow = self.flow
        self._prepare()
        log.info("flow %s: replicating %d topics", flow.name, len(self._topics))
        next_housekeeping = next_refresh = next_config_sync = time.monotonic()
        next_heartbeat = next_status = time.monotonic()
        try:
            while not self.stop_event.is_set() and self._fatal is None:
                messages = self._next_batch()
                if messages:
                    self._replicate(messages)
                if self._held:
                    self._resync_held()
                if self._waiting:
                    self._resume_waiting()
                self._producer.poll(0)
                now = time.monotonic()
                if now >= next_housekeeping:
                    self._housekeeping()
                    next_housekeeping = now + _HOUSEKEEPING_S
                if flow.emit_heartbeats_enabled and now >= next_heartbeat:
                    self._emit_heartbeat()
                    next_heartbeat = now + flow.emit_heartbeats_interval_seconds
                if now >= next_status:
                    self._publish_status("running")
                    next_status = now + _STATUS_EVERY_S
                if flow.refresh_topics_enabled and now >= next_refresh:
                    sync_configs = flow.sync_topic_configs_enabled and now >= next_config_sync
                    self._refresh_topics(sync_configs)
                    next_refresh = now + flow.refresh_topics_interval_seconds
                    if sync_configs:
                        next_config_sync = now + flow.sync_topic_configs_interval_seconds
        finally:
            self._shutdown()
        if self._fatal is not None:
            raise TaskFailed(self._fatal)

    def _next_batch(self) -> list[Message]:
        """What the consumer has now, up to a full batch; when it has nothing, wait for
        the first record only. (`consume(n, timeout)` waits the whole timeout for `n`
        records, which at moderate rates adds the timeout to every record's latency.)"""
        consume = self._consumer.consume
        messages = consume(_CONSUME_BATCH, 0)
        if not messages:
            messages = consume(1, _CONSUME_TIMEOUT_S)
            if messages:
                messages += consume(_CONSUME_BATCH - 1, 0)
        return messages

    def _prepare(self) -> None:
        flow = self.flow
        ensure_compacted_topic(
            flow.target,
            STATUS_TOPIC,
            flow.status_topic_replication_factor,
            "status.topic.replication.factor",
        )
        self._ensure_internal_topics()
        self._topics = self.topic_sync.replicated_topics()
        report = self.topic_sync.sync(self._topics)
        self._size_limits.update(report.max_message_bytes)
        self._producer = self._make_target_producer()
        self._source_producer = Producer(
            {**flow.source.producer, "enable.idempotence": True, "linger.ms": 50}
        )
        self._status = StatusWriter(self._producer)
        self._tail = TailReader(flow.target.consumer, flow.source.alias)
        self._consumer = Consumer(
            {
                # A worker that dies hands its partitions over within seconds.
                "session.timeout.ms": 10_000,
                "heartbeat.interval.ms": 1_000,
                **flow.source.consumer,
                "group.id": f"replicator-{flow.source.alias}-{flow.target.alias}",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "isolation.level": "read_committed",
                # Never jump silently: an out-of-range position is a retention gap
                # or a recreated topic, and the failure policies decide.
                "auto.offset.reset": "error",
                "partition.assignment.strategy": "cooperative-sticky",
                "topic.metadata.refresh.interval.ms": 10_000,
            }
        )
        self._subscribe()

    def _wanted_producer_limits(self) -> tuple[int, int]:
        """(message.max.bytes, batch.size) for the target producer: room for a record
        as large as the largest remote topic takes, and batches no remote rejects."""
        largest = max(self._size_limits.values(), default=_DEFAULT_LIMIT)
        smallest = min(self._size_limits.values(), default=_DEFAULT_LIMIT)
        return largest + HEADER_HEADROOM_BYTES, max(16_384, smallest - HEADER_HEADROOM_BYTES)

    def _make_target_producer(self) -> Producer:
        self._producer_limits = self._wanted_producer_limits()
        # A failed batch must stop the partition, never leave a hole behind it.
        return Producer(
            {
                **self._target_producer_config(),
                "enable.gapless.guarantee": True,
                # Transactional producers are left out: being fenced is fatal for them
                # and means "partition moved", which the transaction outcome handles.
                "error_cb": self._on_producer_error,
            }
        )

    def _target_producer_config(self) -> dict[str, object]:
        message_max_bytes, batch_size = self._wanted_producer_limits()
        return {
            "linger.ms": 20,
            "compression.type": "lz4",
            **self.flow.target.producer,
            "enable.idempotence": True,
            "message.max.bytes": message_max_bytes,
            "batch.size": batch_size,
        }

    def _transactional_config(self, transactional_id: str) -> dict[str, object]:
        return {**self._target_producer_config(), "transactional.id": transactional_id}

    def _update_size_limits(self, limits: dict[str, int]) -> None:
        """New max.message.bytes of remote topics: the trackers' limits follow, and so
        does the target producer, recreated when its limits no longer fit (a topic
        with a larger limit appeared, or one with a smaller limit)."""
        self._size_limits.update(limits)
        for tracker in self._trackers.values():
            limit = self._size_limits.get(tracker.remote)
            if limit:
                tracker.size_limit = limit - _RECORD_OVERHEAD
        message_max_bytes, batch_size = self._wanted_producer_limits()
        have_max, have_batch = self._producer_limits
        if self._producer is None or (message_max_bytes <= have_max and batch_size >= have_batch):
            return
        # The new producer must not overtake the old one's records. If the target does
        # not take them, the partitions rewind and the limits apply at the next sync.
        if not self._flush_in_flight():
            return
        self._producer = self._make_target_producer()
        self._status = StatusWriter(self._producer)
        for tracker in self._trackers.values():
            if self._writers is None:
                tracker.producer = self._producer
            elif not tracker.resuming:
                # Its transactional producer is made anew, with the new limits, when it
                # resumes (between batches: no transaction is open).
                self._writers.close(tracker.topic, tracker.partition)
                self._rewind(tracker)
        log.info(
            "flow %s: target producer recreated for the remote topics' limits "
            "(message.max.bytes=%d, batch.size=%d)",
            self.flow.name,
            *self._producer_limits,
        )

    def _ensure_internal_topics(self) -> None:
        """MM2's offset-syncs and heartbeats topics on the source."""
        flow = self.flow
        ensure_compacted_topic(
            flow.source,
            self.policy.offset_syncs_topic(flow.target.alias),
            flow.offset_syncs_topic_replication_factor,
            "offset-syncs.topic.replication.factor",
        )
        ensure_compacted_topic(
            flow.source,
            self.policy.heartbeats_topic(),
            flow.heartbeats_topic_replication_factor,
            "heartbeats.topic.replication.factor",
        )

    def _subscribe(self) -> None:
        self._consumer.subscribe(
            sorted(self._topics),
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )

    def _shutdown(self) -> None:
        # Closing the consumer revokes its partitions (flush, final offset syncs,
        # "revoked" status); only then are the producers flushed for the last time.
        if self._consumer is not None:
            self._consumer.close()
        if self._writers is not None:
            self._writers.close_all()
        if self._status is not None:
            self._publish_status("failed" if self._fatal else "stopped")
        for producer in (self._producer, self._source_producer):
            if producer is not None:
                producer.flush(30)
        if self._tail is not None:
            self._tail.close()

    def _flush_in_flight(self) -> bool:
        """Wait until the target acknowledged every record produced so far. False if
        it did not within a minute (it is away): every partition then rewinds to the
        target tail. In exactly-once mode records travel in transactions and this
        producer carries status only, so there is nothing to wait for."""
        if self._writers is not None:
            return True
        if self._draining:
            return False  # rewinding already: what is in flight no longer counts
        remaining = self._producer.flush(60)
        if remaining:
            target = self.flow.target.alias
            self._rewind_all(f"{remaining} records still unacknowledged by {target!r} after 60 s")
            return False
        return True

    # -- assignment ------------------------------------------------------------------------

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

    def _remote_partition_missing(self, tp: TopicPartition) -> bool:
        return tp.topic not in self._topics or tp.partition >= self._topics[tp.topic]

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # The group moved on without us (a stalled process missed its session): the
        # partitions already have a new owner. In exactly-once mode that owner fenced
        # our transactions; otherwise what we flush now may be copied twice.
        log.warning(
            "flow %s: assignment lost (session timed out): %s",
            self.flow.name,
            _describe(partitions),
        )
        self._on_revoke(consumer, partitions)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        log.info("flow %s: revoking assignment %s", self.flow.name, _describe(partitions))
        # Finish what is in flight so the next owner resumes exactly after it.
        self._flush_in_flight()
        self._emit_due_offset_syncs(force=True)
        for tp in partitions:
            tracker = self._trackers.pop((tp.topic, tp.partition), None)
            self._waiting.pop((tp.topic, tp.partition), None)
            if self._writers is not None:
                self._writers.close(tp.topic, tp.partition)
            if tracker is not None:
                status = tracker.status(lag=None)
                if not tracker.stopped:  # a stopped partition still needs an operator
                    status.state = "revoked"
                self._status.publish(status)
                # Its next owner reports on it now; a stale 1 here would alert forever.
                metrics.PARTITION_STATE.remove(tracker.flow, tracker.topic, tracker.partition)
        consumer.incremental_unassign(partitions)

    def _track(self, tp: TopicPartition) -> PartitionTracker:
        """The tracker of a newly assigned partition, waiting to be resumed."""
        remote = self.policy.format_remote_topic(self.flow.source.alias, tp.topic)
        tracker = PartitionTracker(
            flow=self.flow.name,
            topic=tp.topic,
            partition=tp.partition,
            remote=remote,
            next_offset=-1,
            size_limit=self._size_limits.get(remote, _DEFAULT_LIMIT) - _RECORD_OVERHEAD,
        )
        key = (tp.topic, tp.partition)
        self._trackers[key] = self._waiting[key] = tracker
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
            with PendingResets.read(self.flow, wanted) as resets:  # once per attempt
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
                    self.flow.name, len(self._waiting), self.flow.target.alias, _reason(exc),
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
            if self._remote_partition_missing(TopicPartition(t.topic, t.partition))
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
        topic, partition, remote = tracker.topic, tracker.partition, tracker.remote
        if self._writers is None:
            tracker.producer = self._producer
        else:
            try:
                # Fence every earlier owner first (settling its open transaction),
                # so the tail read next is final.
                tracker.producer = self._writers.open(topic, partition)
            except TransactionsRefused as exc:
                self._waiting.pop((topic, partition), None)
                tracker.resuming = False
                self._refused(tracker, str(exc))
                return False
        tail = self._tail.position(remote, partition)
        low, high = watermarks(self._consumer, topic, partition)
        resume = low if tail.next_source_offset is None else tail.next_source_offset
        # An operator's offset reset applies while nothing was replicated since it.
        reset = resets.honoured(topic, partition, remote, tail, resume)
        tracker.next_offset = resume if reset is None else reset.offset
        if reset is not None:
            tracker.skipped += max(0, reset.offset - resume)
        tracker.last_source = tracker.last_target = -1
        tracker.resuming = False
        self._waiting.pop((topic, partition), None)
        if tail.next_source_offset is not None or reset is not None:
            self._check_position(tracker, low, high)
        if not tracker.stopped:
            metrics.PARTITION_STATE.labels(tracker.flow, topic, partition).set(0)
        return True

    def _rewind(self, tracker: PartitionTracker) -> None:
        """Pause the partition until it resumes from the target tail; what it has
        in flight no longer counts (its delivery reports are stale)."""
        tracker.resuming = True
        tracker.epoch += 1
        tracker.uncommitted_syncs.clear()
        if self._writers is not None:
            tracker.producer = None
        self._waiting[(tracker.topic, tracker.partition)] = tracker
        self._consumer.pause([TopicPartition(tracker.topic, tracker.partition)])

    def _rewind_all(self, why: str) -> None:
        """Default mode: records did not reach the target (it is away). Records queued
        behind them must not land after that gap, so the producer's queue is dropped
        and every partition rewinds: it resumes from the target tail once the producer
        has settled what it still had in flight and the target answers."""
        if not self._draining:
            metrics.ERRORS.labels(self.flow.name, "target_unavailable").inc()
            log.warning(
                "flow %s: %s; every partition resumes from the target tail once %r answers",
                self.flow.name, why, self.flow.target.alias,
            )  # fmt: skip
        self._draining = True
        self._producer.purge(in_queue=True, in_flight=False)
        for tracker in self._trackers.values():
            if not tracker.stopped:
                self._rewind(tracker)

    def _check_position(self, tracker: PartitionTracker, low: int, high: int) -> bool:
        """Apply the failure policies when the resume point is outside the source log;
        False when it is inside (nothing to do)."""
        position = tracker.next_offset
        where = f"{tracker.topic}[{tracker.partition}]"
        source = self.flow.source.alias
        if position < low:
            lost = low - position
            metrics.LOST.labels(tracker.flow, tracker.topic, tracker.partition, "retention").inc(
                lost
            )
            metrics.ERRORS.labels(tracker.flow, "retention_gap").inc()
            tracker.lost += lost
            problem = (
                f"{where}: offsets {position}..{low - 1} ({lost} records) were deleted from "
                f"{source!r} before they were replicated"
            )
            fix = (
                f"To accept the loss, set retention.gap.policy=skip and restart: replication "
                f"continues at offset {low}. Otherwise leave it stopped and find out why "
                f"retention on {source!r} outran the replicator"
            )
            self._apply_policy(
                tracker, "retention.gap.policy", problem, fix, new_position=low, high=high
            )
            return True
        if position > high:
            problem = (
                f"{where}: resume offset {position} is beyond the source log end {high}; "
                "the source topic was deleted and recreated or truncated"
            )
            fix = (
                f"To replicate the source partition from its start (offset {low}) after the "
                f"records already in {tracker.remote}, set topic.reset.policy=skip and restart; "
                f"to start {tracker.remote} afresh instead, delete it on "
                f"{self.flow.target.alias!r} and restart"
            )
            metrics.ERRORS.labels(tracker.flow, "topic_reset").inc()
            self._apply_policy(
                tracker, "topic.reset.policy", problem, fix, new_position=low, high=high
            )
            return True
        return False

    def _apply_policy(
        self,
        tracker: PartitionTracker,
        key: str,
        problem: str,
        fix: str,
        *,
        new_position: int,
        high: int,
    ) -> None:
        """Skip to `new_position` or stop the partition, as the policy `key` says, and
        publish the partition's status at once either way."""
        policy = {
            "retention.gap.policy": self.flow.retention_gap_policy,
            "topic.reset.policy": self.flow.topic_reset_policy,
        }[key]
        if policy == "skip":
            log.warning("%s; skipping to offset %d as %s=skip says", problem, new_position, key)
            tracker.next_offset = new_position
        else:
            self._stop_partition(
                tracker, f"{problem}. The partition is stopped ({key}=fail). {fix}"
            )
        self._publish_partition(tracker, max(0, high - tracker.next_offset))

    def _stop_partition(self, tracker: PartitionTracker, message: str) -> None:
        tracker.stopped = message
        metrics.PARTITION_STATE.labels(tracker.flow, tracker.topic, tracker.partition).set(1)
        log.error("flow %s: %s", self.flow.name, message)

    def _publish_partition(self, tracker: PartitionTracker, lag: int | None) -> None:
        """Publish one partition's status now (a policy fired: operators see it at once)."""
        self._status.publish(tracker.status(lag))
        self._producer.poll(0)

    # -- the hot path --------------------------------------------------------------------

    def _replicate(self, messages: list[Message]) -> None:
        """Split the batch into runs of one partition (librdkafka hands records over
        partition by partition, so runs are long) and replicate each run."""
        start, count = 0, len(messages)
        while start < count:
            first = messages[start]
            error = first.error()
            if error is not None:
                self._on_consume_error(first, error)
                start += 1
                continue
            topic, partition = first.topic(), first.partition()
            end = start + 1
            while end < count:
                message = messages[end]
                if message.partition() != partition or message.topic() != topic:
                    break
                end += 1
            tracker = self._enter((topic, partition))
            if tracker is not None:
                self._replicate_run(tracker, messages[start:end])
            start = end
        if self._writers is not None:
            self._commit_transactions()

    def _replicate_run(self, tracker: PartitionTracker, messages: list[Message]) -> None:
        """Produce a run of one partition's records. Only the run's last record has a
        delivery report: the producer is idempotent with the gapless guarantee, so
        its success means every earlier record of the run was written, in order, and
        any failure fails the rest of the run too."""
        target_alias = self._target_alias
        source_entry = (SOURCE_HEADER, self._alias)
        out: list[tuple[bytes | None, bytes | None, int, Headers]] = []
        first_offset = last_offset = -1
        size_total = 0
        for message in messages:
            if tracker.stopped or tracker.held:
                break
            error = message.error()
            if error is not None:
                self._on_consume_error(message, error)
                continue
            offset = message.offset()
            value = message.value()
            record_key = message.key()
            size = (len(value) if value else 0) + (len(record_key) if record_key else 0)
            headers = message.headers()
            origin = None
            if headers:
                out_headers, origin, header_bytes = _own_headers(headers)
                if origin == target_alias:
                    tracker.skipped += 1  # it came from the target: replicating it would loop
                    tracker.next_offset = offset + 1
                    continue
                size += header_bytes
            else:
                out_headers = []
            if size > tracker.size_limit:
                self._on_oversized(tracker, offset, size)
                continue
            out_headers.append(source_entry)
            out_headers.append((OFFSET_HEADER, encode_offset(offset)))
            if origin is not None:
                out_headers.append((ORIGIN_HEADER, origin))
            out.append((value, record_key, message.timestamp()[1], out_headers))
            if first_offset < 0:
                first_offset = offset
            last_offset = offset
            size_total += size
            tracker.next_offset = offset + 1
        if not out:
            return
        report = _RunReport(self, tracker, first_offset, last_offset, len(out))
        if self._produce_run(tracker, out, report):
            tracker.replicated_bytes += size_total

    def _produce_run(
        self,
        tracker: PartitionTracker,
        out: list[tuple[bytes | None, bytes | None, int, Headers]],
        report: _RunReport,
    ) -> bool:
        """Hand a run's records to the producer, the report on the last; False if it
        stopped short (see `_produce_when_room`)."""
        produce = tracker.producer.produce
        remote, partition, last = tracker.remote, tracker.partition, len(out) - 1
        for index, (value, record_key, timestamp, out_headers) in enumerate(out):
            on_delivery = report if index == last else None
            try:
                produce(
                    remote,
                    value,
                    record_key,
                    partition=partition,
                    timestamp=timestamp,
                    headers=out_headers,
                    on_delivery=on_delivery,
                )
            except BufferError:
                record = (value, record_key, timestamp, out_headers)
                if not self._produce_when_room(tracker, record, on_delivery):
                    return False
        return True

    def _enter(self, key: tuple[str, int]) -> PartitionTracker | None:
        """The tracker of the partition the next records belong to; in exactly-once
        mode its transaction is open from here on. None for records to drop: the
        partition is not ours, or waits to resume (they were fetched before it
        paused)."""
        tracker = self._trackers.get(key)
        if tracker is None or tracker.resuming:
            return None
        if self._writers is not None:
            settled = self._writers.begin(tracker.topic, tracker.partition)
            if settled.outcome is not Outcome.OPEN:
                log.warning(
                    "flow %s: %s[%d]: cannot begin a transaction (%s)",
                    self.flow.name, tracker.topic, tracker.partition, _reason(settled.error),
                )  # fmt: skip
                self._settle(tracker, settled)
                return None
        return tracker

    def _produce_when_room(
        self,
        tracker: PartitionTracker,
        record: tuple[bytes | None, bytes | None, int, Headers],
        on_delivery: _RunReport | None,
    ) -> bool:
        """The producer's queue is full: serve delivery reports until it takes the
        record. False if the partition rewound meanwhile (records did not reach the
        target) or the task stops: the rest of the run is not produced."""
        value, record_key, timestamp, headers = record
        epoch = tracker.epoch
        while True:
            tracker.producer.poll(0.05)
            if tracker.epoch != epoch or self.stop_event.is_set():
                return False
            try:
                tracker.producer.produce(
                    tracker.remote,
                    value,
                    record_key,
                    partition=tracker.partition,
                    timestamp=timestamp,
                    headers=headers,
                    on_delivery=on_delivery,
                )
                return True
            except BufferError:
                continue

    def _on_run_delivered(
        self, run: _RunReport, error: KafkaError | None, message: Message
    ) -> None:
        tracker = run.tracker
        stale = run.epoch != tracker.epoch
        if stale or self._trackers.get((tracker.topic, tracker.partition)) is not tracker:
            return  # revoked, fenced or rewound while in flight: the target tail tells
        if error is not None:
            self._on_delivery_error(run, error)
            return
        # The last record's pair is exact. The run is contiguous on both sides unless
        # the source skipped offsets (transaction markers, compaction, skipped records)
        # or something else wrote to the target partition in between: then, and every
        # offset.lag.max records, the pair is published as an offset sync.
        target_offset = message.offset()
        source_contiguous = (
            run.first_source == tracker.last_source + 1
            and run.last_source - run.first_source + 1 == run.count
        )
        target_contiguous = target_offset - run.count == tracker.last_target
        tracker.replicated += run.count
        tracker.last_ack_timestamp_ms = message.timestamp()[1]
        if (
            not source_contiguous
            or not target_contiguous
            or run.last_source - tracker.last_synced_source >= self.flow.offset_lag_max
        ):
            if self._writers is None:
                self._emit_offset_sync(tracker, run.last_source, target_offset)
            else:  # only a committed record may be pointed at
                tracker.uncommitted_syncs.append((run.last_source, target_offset))
                tracker.last_synced_source = run.last_source
        tracker.last_source = run.last_source
        tracker.last_target = target_offset

    def _on_delivery_error(self, run: _RunReport, error: KafkaError) -> None:
        """Records the target did not take now resume from its tail (every partition
        in the default mode, the transaction's in exactly-once mode); records it
        rejects stop the partition (exactly-once) or the flow (default: its one
        idempotent producer cannot go on past a gap)."""
        tracker = run.tracker
        records = (
            f"{tracker.topic}[{tracker.partition}] offsets {run.first_source}..{run.last_source}"
        )
        target = self.flow.target.alias
        rejected = error.code() in _REJECTED
        if not rejected and self._writers is not None:
            # The transaction cannot commit now: its outcome rewinds the partition (a
            # zombie woken mid-transaction learns here first that it was fenced).
            log.debug("%s: not delivered, the transaction settles it: %s", records, error.str())
            return
        if not rejected and not error.fatal():
            self._rewind_all(f"{records} did not reach {target!r} ({error.str()})")
            return
        metrics.ERRORS.labels(tracker.flow, "delivery").inc()
        problem = f"{records}: the target {target!r} rejected records for {tracker.remote}: "
        if error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            problem += missing_acl(self.flow.target, "WRITE", f"TOPIC {tracker.remote}") + ": "
        if self._writers is not None:
            self._consumer.pause([TopicPartition(tracker.topic, tracker.partition)])
            self._stop_partition(
                tracker,
                f"{problem}{error.str()}. The partition is stopped; fix the cause and "
                "restart, it resumes after the last committed record",
            )
            self._publish_partition(tracker, self._lag(tracker))
            return
        self._fail(
            f"{problem}{error.str()}. Replication of the flow is stopped; fix the cause "
            "and restart, it resumes after the last record written"
        )

    def _on_producer_error(self, error: KafkaError) -> None:
        """A fatal producer error (e.g. the gapless guarantee tripped) stops the flow
        even when no delivery report is pending to say so."""
        if error.fatal():
            metrics.ERRORS.labels(self.flow.name, "delivery").inc()
            self._fail(
                f"flow {self.flow.name}: the producer to {self.flow.target.alias!r} failed "
                f"fatally: {error.str()}. Restart the flow; it resumes from the target tail"
            )
        else:
            log.warning("flow %s: producer: %s", self.flow.name, error.str())

    # -- exactly-once mode -----------------------------------------------------------------

    def _commit_transactions(self) -> None:
        """Commit every partition's open transaction (one per consume batch) and emit
        the offset syncs of what committed; see `_settle` for the others."""
        retried: list[str] = []
        why: KafkaError | None = None
        for (topic, partition), settled in self._writers.commit_open().items():
            tracker = self._trackers.get((topic, partition))
            if tracker is None:
                continue
            if settled.outcome is Outcome.COMMITTED:
                for source, target in tracker.uncommitted_syncs:
                    self._emit_offset_sync(tracker, source, target)
                tracker.uncommitted_syncs.clear()
                continue
            if settled.outcome is Outcome.RETRY:
                retried.append(f"{topic}[{partition}]")
                why = settled.error
            self._settle(tracker, settled)
        if retried:
            log.warning(
                "flow %s: the transactions of %s did not commit (%s); they resume from "
                "the committed tail on %r",
                self.flow.name, ", ".join(retried), _reason(why), self.flow.target.alias,
            )  # fmt: skip

    def _settle(self, tracker: PartitionTracker, settled: Settled) -> None:
        """A partition's transaction did not commit (or begin). Fenced: another worker
        owns it now. Refused: stopped, naming the cause. Anything else (the target
        went away, a timeout, an abortable error): it resumes from the committed tail
        once the target answers, however long that takes."""
        tracker.uncommitted_syncs.clear()
        if settled.outcome is Outcome.FENCED:
            self._let_go(tracker)
        elif settled.outcome is Outcome.REFUSED:
            self._refused(
                tracker,
                f"{tracker.topic}[{tracker.partition}]: the target {self.flow.target.alias!r} "
                f"refuses the transaction: {_reason(settled.error)}; grant the replicator's "
                "principal WRITE on the transactional id "
                f"{self._writers.transactional_id(tracker.topic, tracker.partition)!r} and "
                f"on {tracker.remote}, then restart",
            )
        elif not tracker.stopped:
            self._rewind(tracker)

    def _refused(self, tracker: PartitionTracker, message: str) -> None:
        """The target refuses the partition's transactions: stop it, saying why."""
        metrics.ERRORS.labels(tracker.flow, "authorization").inc()
        self._consumer.pause([TopicPartition(tracker.topic, tracker.partition)])
        self._stop_partition(tracker, f"{message}. The partition is stopped")
        self._publish_partition(tracker, self._lag(tracker))

    def _let_go(self, tracker: PartitionTracker) -> None:
        """Fenced: the partition belongs to another worker. Stop writing it at once;
        the group takes it from us at the next rebalance."""
        key = (tracker.topic, tracker.partition)
        self._trackers.pop(key, None)
        self._waiting.pop(key, None)
        self._writers.close(*key)
        self._consumer.pause([TopicPartition(*key)])
        metrics.ERRORS.labels(tracker.flow, "fenced").inc()
        log.warning(
            "flow %s: %s[%d] fenced by its next owner; paused until the group takes it",
            tracker.flow,
            tracker.topic,
            tracker.partition,
        )

    # -- errors --------------------------------------------------------------------------

    def _on_consume_error(self, message: Message, error: KafkaError) -> None:
        code = error.code()
        topic, partition = message.topic(), message.partition()
        if code == KafkaError._AUTO_OFFSET_RESET:
            # The fetch position left the source log while running (retention outran us,
            # or the topic was truncated); the fetcher stands still until restarted.
            tracker = self._trackers.get((topic, partition))
            if tracker is None:
                return
            if tracker.stopped or tracker.resuming:  # reported, or its position is not known
                self._consumer.pause([TopicPartition(topic, partition)])
                return
            low, high = watermarks(self._consumer, topic, partition)
            if not self._check_position(tracker, low, high):
                log.warning(
                    "flow %s: %s[%d] offset %d reported out of range although the source "
                    "log is %d..%d; fetching it again: %s",
                    self.flow.name, topic, partition, tracker.next_offset, low, high,
                    error.str(),
                )  # fmt: skip
            self._restart_fetch(tracker)
            return
        if code in _AUTH_ERRORS:
            metrics.ERRORS.labels(self.flow.name, "authorization").inc()
            self._fail(
                f"flow {self.flow.name}: not allowed on {self.flow.source.alias!r}"
                f"{f' for topic {topic}' if topic else ''}: {error.str()}; "
                + self._missing_on_source(code, topic)
            )
            return
        if error.fatal() or not error.retriable():
            metrics.ERRORS.labels(self.flow.name, "consume").inc()
            self._fail(f"flow {self.flow.name}: consuming {topic}[{partition}]: {error.str()}")
            return
        log.warning("flow %s: transient consume error: %s", self.flow.name, error.str())

    def _missing_on_source(self, code: int, topic: str | None) -> str:
        """The ACL the consumer lacks on the source, for its error message."""
        if code == KafkaError.GROUP_AUTHORIZATION_FAILED:
            group = f"replicator-{self.flow.source.alias}-{self.flow.target.alias}"
            return missing_acl(self.flow.source, "READ", f"GROUP {group}")
        if code == KafkaError.TOPIC_AUTHORIZATION_FAILED and topic:
            return missing_acl(self.flow.source, "READ", f"TOPIC {topic}")
        return (
            "check the credentials of the source's client settings, and grant the "
            "replicator's principal READ and DESCRIBE on the topics and its group"
        )

    def _restart_fetch(self, tracker: PartitionTracker) -> None:
        """Fetch the partition again from `tracker.next_offset`, or keep it paused when
        it is stopped or waits to resume. Reassigning, not seeking: librdkafka refuses
        a seek once an offset-reset error has stopped the partition's fetcher."""
        tp = TopicPartition(tracker.topic, tracker.partition)
        if tracker.stopped or tracker.resuming:
            self._consumer.pause([tp])
            return
        self._consumer.incremental_unassign([tp])
        self._consumer.incremental_assign(
            [TopicPartition(tracker.topic, tracker.partition, tracker.next_offset)]
        )
        self._consumer.resume([tp])

    def _on_oversized(self, tracker: PartitionTracker, offset: int, size: int) -> None:
        tp = TopicPartition(tracker.topic, tracker.partition)
        if (
            self.flow.sync_topic_configs_enabled
            and tracker.resynced_at != offset
            and time.monotonic() - self._resynced.get(tracker.topic, -_RESYNC_EVERY_S)
            >= _RESYNC_EVERY_S
        ):
            # The source topic's limit may have been raised after the last config sync:
            # sync the topic now (after this batch) and look at the record again.
            tracker.held = True
            tracker.resynced_at = offset
            tracker.next_offset = offset
            self._consumer.pause([tp])
            self._held.append(tracker)
            return
        metrics.ERRORS.labels(tracker.flow, "record_too_large").inc()
        limit = tracker.size_limit + _RECORD_OVERHEAD
        target = self.flow.target.alias
        problem = (
            f"{tracker.topic}[{tracker.partition}] offset {offset}: record of about {size} "
            f"bytes exceeds max.message.bytes={limit} of {tracker.remote} on {target!r}"
        )
        if self.flow.oversized_record_policy == "skip":
            tracker.skipped += 1
            tracker.next_offset = offset + 1
            metrics.SKIPPED.labels(
                tracker.flow, tracker.topic, tracker.partition, "record_too_large"
            ).inc()
            log.warning("%s; skipped (oversized.record.policy=skip)", problem)
            self._publish_partition(tracker, self._lag(tracker))
            return
        wanted = size + _RECORD_OVERHEAD + HEADER_HEADROOM_BYTES
        raise_it = f"raise max.message.bytes of {tracker.remote} on {target!r} to at least {wanted}"
        if self.flow.sync_topic_configs_enabled:
            how = f"{raise_it} (topic sync did not: is max.message.bytes set there by hand?)"
        else:
            how = f"set sync.topic.configs.enabled=true to have topic sync raise it, or {raise_it}"
        tracker.next_offset = offset
        self._consumer.pause([tp])
        self._stop_partition(
            tracker,
            f"{problem}. The partition is stopped at this offset "
            f"(oversized.record.policy=fail). To replicate the record, {how}, and restart; "
            "to skip records too large for the target instead, set "
            "oversized.record.policy=skip and restart",
        )
        self._publish_partition(tracker, self._lag(tracker))

    def _resync_held(self) -> None:
        """Sync the configs of topics with a held oversized record, then fetch those
        partitions again from that record: it now fits, or its policy applies."""
        held, self._held = self._held, []
        topics = {t.topic: self._topics.get(t.topic, t.partition + 1) for t in held}
        now = time.monotonic()
        self._resynced.update(dict.fromkeys(topics, now))
        self._update_size_limits(self.topic_sync.sync(topics).max_message_bytes)
        for tracker in held:
            tracker.held = False
            if self._trackers.get((tracker.topic, tracker.partition)) is tracker:
                self._restart_fetch(tracker)

    def _fail(self, message: str) -> None:
        if self._fatal is None:
            log.error(message)
            self._fatal = message

    # -- periodic work -------------------------------------------------------------------

    def _housekeeping(self) -> None:
        self._emit_due_offset_syncs(force=False)
        now_ms = time.time() * 1000
        for tracker in self._trackers.values():
            labels = (tracker.flow, tracker.topic, tracker.partition)
            if tracker.replicated > tracker.published_records:
                metrics.RECORDS.labels(*labels).inc(tracker.replicated - tracker.published_records)
                metrics.BYTES.labels(*labels).inc(
                    tracker.replicated_bytes - tracker.published_bytes
                )
                tracker.published_records = tracker.replicated
                tracker.published_bytes = tracker.replicated_bytes
                metrics.RECORD_AGE.labels(*labels).set(
                    max(0.0, (now_ms - tracker.last_ack_timestamp_ms) / 1000)
                )
            metrics.LAG.labels(*labels).set(self._lag(tracker) or 0)

    def _lag(self, tracker: PartitionTracker) -> int | None:
        _, high = self._consumer.get_watermark_offsets(
            TopicPartition(tracker.topic, tracker.partition), cached=True
        )
        if high is None or high < 0 or tracker.next_offset < 0:
            return None
        return max(0, high - tracker.next_offset)

    def _emit_offset_sync(self, tracker: PartitionTracker, source: int, target: int) -> None:
        sync = OffsetSync(tracker.topic, tracker.partition, source, target)
        self._source_producer.produce(
            self.policy.offset_syncs_topic(self.flow.target.alias),
            key=sync.key(),
            value=sync.value(),
        )
        tracker.last_synced_source = source
        tracker.last_synced_target = target
        if tracker.last_ack_timestamp_ms:
            metrics.LATENCY.labels(tracker.flow).observe(
                max(0.0, time.time() - tracker.last_ack_timestamp_ms / 1000)
            )

    def _emit_due_offset_syncs(self, force: bool) -> None:
        """On a timer (and before giving partitions up), sync the newest position
        of every partition that moved since its last sync."""
        for tracker in self._trackers.values():
            if tracker.last_source > tracker.last_synced_source:
                self._emit_offset_sync(tracker, tracker.last_source, tracker.last_target)
        self._source_producer.poll(0)
        if force:
            self._source_producer.flush(30)

    def _emit_heartbeat(self) -> None:
        beat = Heartbeat(self.flow.source.alias, self.flow.target.alias, int(time.time() * 1000))
        self._source_producer.produce(
            self.policy.heartbeats_topic(), key=beat.key(), value=beat.value()
        )

    def _publish_status(self, state: str) -> None:
        for tracker in self._trackers.values():
            self._status.publish(tracker.status(self._lag(tracker)))
        self._status.publish(
            WorkerStatus(
                flow=self.flow.name,
                worker=self.worker_id,
                state=state,
                host=socket.gethostname(),
                pid=os.getpid(),
                partitions=len(self._trackers),
                topics=sorted(self._topics),
                error=self._fatal,
                started_ms=self.started_ms,
            )
        )
        self._producer.poll(0)

    def _refresh_topics(self, sync_configs: bool) -> None:
        """Pick up new matching topics and partition increases without a restart. A
        cluster that does not answer only puts that off until the next refresh."""
        try:
            current = self.topic_sync.replicated_topics()
            report = self.topic_sync.sync(current, sync_configs=sync_configs)
        except ConfigError:
            raise
        except (KafkaException, ReplicatorError) as exc:
            log.warning(
                "flow %s: topics not refreshed this time (%s); next try in %d s",
                self.flow.name, _reason(exc), self.flow.refresh_topics_interval_seconds,
            )  # fmt: skip
            return
        changed = {t: n for t, n in current.items() if self._topics.get(t) != n}
        self._update_size_limits(report.max_message_bytes)
        if changed:
            log.info("flow %s: topics changed: %s", self.flow.name, changed)
            self._topics = current
            self._subscribe()


class _RunReport:
    """The delivery report of a run of records of one partition (see _replicate_run)."""

    __slots__ = ("count", "epoch", "first_source", "last_source", "task", "tracker")

    def __init__(
        self,
        task: ReplicationTask,
        tracker: PartitionTracker,
        first_source: int,
        last_source: int,
        count: int,
    ) -> None:
        self.task = task
        self.tracker = tracker
        self.epoch = tracker.epoch
        self.first_source = first_source
        self.last_source = last_source
        self.count = count

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        self.task._on_run_delivered(self, error, message)


def _own_headers(headers: Headers) -> tuple[Headers, bytes | None, int]:
    """The record's own headers (ours dropped), the cluster it originated on if it
    was itself replicated, and the bytes its own headers add to the record."""
    own: Headers = []
    origin = None
    size = 0
    for name, value in headers:
        if name in OURS:
            if name == ORIGIN_HEADER or (name == SOURCE_HEADER and origin is None):
                origin = value
            continue
        own.append((name, value))
        size += len(name) + (len(value) if value else 0) + 10
    return own, origin, size


def _reason(error: BaseException | KafkaError | None) -> str:
    """The one-line cause of a Kafka error or exception, for log lines."""
    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], KafkaError):
        error = error.args[0]
    if isinstance(error, KafkaError):
        return error.str()
    return str(error)


def _describe(partitions: list[TopicPartition]) -> str:
    """topic[partition]@offset for the log lines of rebalances."""
    return ", ".join(
        f"{tp.topic}[{tp.partition}]" + (f"@{tp.offset}" if tp.offset >= 0 else "")
        for tp in partitions
    )
