"""The replication task: source partitions in, the same partitions of the remote
topics out, every record intact and carrying its provenance and source offset.

One task runs one flow in one process. Its partitions come from Kafka's
consumer-group protocol on the source cluster, so more tasks of the same flow
(on any machine) share the work without a coordinator. It never commits
consumer offsets: the tail of each target partition says where to resume.

This module is the consume-map-produce loop and its partition bookkeeping (which
partitions are replicating, waiting for the target or stopped). The class has two
more parts, each in its own module: `assignment` (rebalances, and where partitions
resume) and `task_setup` (clients, topics and their size limits). What the loop
consults has a module of its own: the record `rewrite`, `exactly_once` commit
handling, the `size_limits` and `retention` policies, `offset_syncs`, `heartbeats`
and the status and metrics `reporting`.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from replicator import metrics
from replicator.acls.principal import missing_acl
from replicator.backoff import Backoff
from replicator.config.model import FlowConfig
from replicator.config.policies import ReplicationPolicy
from replicator.engine.assignment import Assignment
from replicator.engine.exactly_once import ExactlyOnce
from replicator.engine.headers import OFFSET_HEADER, TOPIC_HEADER, Headers, encode_offset
from replicator.engine.heartbeats import HeartbeatWriter
from replicator.engine.kafka_errors import AUTH_ERRORS, REJECTED, AccessDenied, missing_on_source
from replicator.engine.offset_syncs import OffsetSyncWriter
from replicator.engine.partition import PartitionTracker
from replicator.engine.reporting import TaskReporter
from replicator.engine.resume import ResumePoints
from replicator.engine.rewrite import RecordRewrite
from replicator.engine.size_limits import OversizedRecords, SizeLimits
from replicator.engine.source_commits import SourceCommits
from replicator.engine.spans import refuse, span_producer, unusable_error
from replicator.engine.task_setup import DeliveryBounds, TaskSetup
from replicator.engine.topic_sync import TopicSync
from replicator.errors import ReplicatorError
from replicator.kafka.clients import Consumer, Producer
from replicator.kafka.errors import is_fatal, kafka_error
from replicator.kafka.watermarks import watermarks

log = logging.getLogger(__name__)

# confluent-kafka's `Producer.produce` takes, in this order: topic, value, key,
# partition, on_delivery, callback (its alias), timestamp, headers. The hot path
# passes them by position: parsing keywords took 2.3 us per record, positions 1.7.
_CONSUME_BATCH = 10_000
_CONSUME_TIMEOUT_S = 0.2
_HOUSEKEEPING_S = 1.0
_STATUS_EVERY_S = 10.0
#: Partitions waiting for the target try it again after this long at first, then
#: twice as long each time, up to the maximum, for as long as it stays away.
_RESUME_FIRST_S = 0.5
_RESUME_MAX_S = 10.0


class TaskFailed(ReplicatorError):
    """The task stopped because a failure policy said `fail`; status says where."""


class ReplicationTask(TaskSetup, Assignment):
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
        self._reporter = TaskReporter(flow.name, self.worker_id, self.started_ms)
        self.policy: ReplicationPolicy = flow.policy
        self._rewrite = RecordRewrite(flow.source.alias, flow.target.alias, flow.policy)
        #: Produces the plain records of a run in C; None: the loop does it all.
        self._spans = span_producer(flow.source.alias)
        self.topic_sync = TopicSync(flow)
        self._trackers: dict[tuple[str, int], PartitionTracker] = {}
        #: Partitions waiting to be resumed from the target, tried with `_backoff`.
        self._waiting: dict[tuple[str, int], PartitionTracker] = {}
        self._backoff = Backoff(_RESUME_FIRST_S, _RESUME_MAX_S)
        #: Default mode, after records did not reach the target: the producer still
        #: settles what it had in flight, and no tail is final before it is done.
        self._draining = False
        self._size_limits = SizeLimits()
        self._oversized = OversizedRecords(flow)
        self._held: list[PartitionTracker] = []  # an oversized record waits for a sync
        self._producer_limits: tuple[int, int] = (0, 0)
        self._topics: dict[str, int] = {}
        self._fatal: str | None = None
        self._fatal_access = False  # `_fatal` is a refused access (AccessDenied)
        self._producer_spent = False
        # The clients and what writes through them are made by `_prepare`.
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self._source_producer: Producer | None = None
        self._resume_points: ResumePoints | None = None
        self._syncs: OffsetSyncWriter | None = None
        #: Source positions committed for consumer-group tools (never read back).
        self._source_commits = SourceCommits(
            flow.name, enabled=flow.commit_source_offsets, transactional=flow.exactly_once
        )
        self._heartbeats: HeartbeatWriter | None = None
        self._exactly_once: ExactlyOnce | None = None
        #: How long the target may hold records (see DeliveryBounds).
        self._bounds = DeliveryBounds.of(flow)
        #: When the consumer was last polled: the loop polls it again well within
        #: max.poll.interval.ms, or the group would hand its partitions on.
        self._polled_at = time.monotonic()
        #: Default mode: the runs produced and not reported yet, oldest first.
        self._unreported: deque[_RunReport] = deque()
        #: Per partition: the target offset its next replica takes at the earliest
        #: (what a run's report is checked against: `_on_run_delivered`).
        self._target_next: dict[tuple[str, int], int] = {}

    # -- the loop ----------------------------------------------------------------------

    def run(self) -> None:
        """Replicate until stopped. Raises TaskFailed when a `fail` policy fires."""
        flow = self.flow
        self._prepare()
        log.info("flow %s: replicating %d topics", flow.name, len(self._topics))
        self._reporter.running(True)
        timers = _Timers(flow)
        stopped_on_purpose = False
        try:
            while not self.stop_event.is_set() and self._fatal is None:
                try:
                    self._round(timers)
                except KafkaException as exc:
                    # Fatal for the target producer (the gapless guarantee tripped by a
                    # batch the target refused): raised by whichever call of the round
                    # touches it first, replicating or publishing status.
                    if not is_fatal(kafka_error(exc)):
                        raise
                    self._on_producer_fatal(kafka_error(exc))
            stopped_on_purpose = self._fatal is None
        finally:
            # A loop stopped on purpose (its flow stopped, the process shutting down) is
            # not a loop that failed: its series goes rather than reading 0.
            self._reporter.running(False, stopped_on_purpose=stopped_on_purpose)
            if self._producer_spent:
                self._replace_spent_producer()
            self._shutdown()
        if self._fatal is not None:
            raise (AccessDenied if self._fatal_access else TaskFailed)(self._fatal)

    def _round(self, timers: _Timers) -> None:
        """One round of the loop: replicate what the source has now, serve the
        producer's reports, then the periodic work that is due."""
        self._work()
        if self._fatal is not None:
            return  # nothing more is written through a producer a refusal spent
        flow, now = self.flow, time.monotonic()
        if timers.due("housekeeping", now, _HOUSEKEEPING_S):
            self._housekeeping()
        if flow.emit_heartbeats_enabled and timers.due(
            "heartbeat", now, flow.emit_heartbeats_interval_seconds
        ):
            self._heartbeats.emit()
        if timers.due("status", now, _STATUS_EVERY_S):
            self._publish_status("running")
        if flow.refresh_topics_enabled and timers.due(
            "refresh", now, flow.refresh_topics_interval_seconds
        ):
            self._refresh_topics(sync_configs=False)
        # On a timer of its own, as MM2's (not only when topics are refreshed).
        if flow.sync_topic_configs_enabled and timers.due(
            "config_sync", now, flow.sync_topic_configs_interval_seconds
        ):
            self._sync_topic_configs()

    def _work(self) -> None:
        """Replicate what the source has now and serve the producer's reports."""
        messages = self._next_batch()
        if messages:
            self._replicate(messages)
        if self._held:
            self._resync_held()
        if self._waiting:
            self._resume_waiting()
        self._producer.poll(0)

    def _next_batch(self) -> list[Message]:
        """What the consumer has now, up to a full batch; when it has nothing, wait for
        the first record only. (`consume(n, timeout)` waits the whole timeout for `n`
        records, which at moderate rates adds the timeout to every record's latency.)"""
        consume = self._consumer.consume
        self._polled_at = time.monotonic()
        messages = consume(_CONSUME_BATCH, 0)
        if not messages:
            messages = consume(1, _CONSUME_TIMEOUT_S)
            if messages:
                messages += consume(_CONSUME_BATCH - 1, 0)
        return messages

    # -- partition bookkeeping -------------------------------------------------------------

    def rewind(self, tracker: PartitionTracker) -> None:
        """Pause the partition until it resumes from the target tail; what it has
        in flight no longer counts (its delivery reports are stale)."""
        tracker.resuming = True
        tracker.epoch += 1
        self._syncs.rolled_back(tracker.key)
        if self._exactly_once is not None:
            tracker.producer = None
        self._waiting[tracker.key] = tracker
        self._consumer.pause([TopicPartition(tracker.topic, tracker.partition)])

    def _rewind_all(self, why: str, *, in_flight: bool = False) -> None:
        """Default mode: records did not reach the target (it is away). Records queued
        behind them must not land after that gap, so the producer's queue is dropped
        and every partition rewinds: it resumes from the target tail once the producer
        has settled what it still had in flight and the target answers. `in_flight`:
        records in flight are dropped too (partitions are given up: none of theirs
        may land later)."""
        if not self._draining:
            metrics.ERRORS.labels(self.flow.name, "target_unavailable").inc()
            log.warning(
                "flow %s: %s; every partition resumes from the target tail once %r answers",
                self.flow.name, why, self.flow.target.alias,
            )  # fmt: skip
        self._draining = True
        self._producer.purge(in_queue=True, in_flight=in_flight)
        self._unreported.clear()
        for tracker in self._trackers.values():
            if not tracker.stopped:
                self.rewind(tracker)

    def halt(self, tracker: PartitionTracker, message: str) -> None:
        """Stop the partition where it is, paused, and publish its status at once."""
        self._consumer.pause([TopicPartition(tracker.topic, tracker.partition)])
        self._stop_partition(tracker, message)
        self._reporter.partition(tracker, self._reporter.lag(tracker))

    def drop(self, tracker: PartitionTracker) -> None:
        """The partition is no longer ours (fenced): forget it, and pause it until the
        group takes it from us."""
        key = tracker.key
        self._trackers.pop(key, None)
        self._waiting.pop(key, None)
        self._syncs.forget(key)
        self._consumer.pause([TopicPartition(*key)])

    def _stop_partition(self, tracker: PartitionTracker, message: str) -> None:
        tracker.stopped = message
        self._reporter.publish_metrics(self._trackers.values())  # counted in its gauge now
        log.error("flow %s: %s", self.flow.name, message)

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

    # -- the hot path --------------------------------------------------------------------

    def _replicate(self, messages: list[Message]) -> None:
        """Replicate a batch run by run: a run is consecutive records of one partition,
        and runs are long, as librdkafka hands records over partition by partition."""
        start, count = 0, len(messages)
        while start < count:
            first = messages[start]
            error = first.error()
            if error is not None:
                self._on_consume_error(first, error)
                start += 1
                continue
            key = (first.topic(), first.partition())
            tracker = self._enter(key)
            if tracker is None:
                start = _run_end(messages, start + 1, key)
            else:
                start = self._replicate_run(tracker, messages, start)
        if self._exactly_once is not None:
            self._exactly_once.commit(self._trackers)

    def _enter(self, key: tuple[str, int]) -> PartitionTracker | None:
        """The tracker of the partition the next records belong to; in exactly-once
        mode its transaction is open from here on. None for records to drop: the
        partition is not ours, waits to resume, or a policy stopped it or holds it at an
        oversized record (they were fetched before it paused)."""
        tracker = self._trackers.get(key)
        if tracker is None or tracker.resuming or tracker.stopped or tracker.size.held:
            return None
        if self._exactly_once is not None and not self._exactly_once.begin(tracker):
            return None
        return tracker

    def _replicate_run(self, tracker: PartitionTracker, messages: list[Message], start: int) -> int:
        """Rewrite and produce the run of `tracker`'s records that starts at
        `messages[start]`, up to a record a policy holds or stops the partition at;
        returns the index of the next run's first record.

        Only the run's last replica carries a delivery report: the producer is
        idempotent with the gapless guarantee, so its success means every earlier
        record of the run was written, in order, and any failure fails the rest of the
        run too. So each replica is produced when the next one is made (or the run
        ends), once it is known whether it is the last.

        With one task the loop is what limits the rate (bench/hot_loop.py measures
        it). So the C span producer (see `spans`) takes the run's plain records first:
        no headers of their own, not too large. It leaves the last of them, and any
        record after it, to the Python loop, which handles every case."""
        if self._spans is None:
            return self._replicate_records(tracker, messages, _Span(start, 0, 0, -1, -1))
        span = self._produce_span(tracker, messages, start)
        if span is None:
            return _run_end(messages, start, tracker.key)
        return self._replicate_records(tracker, messages, span)

    def _produce_span(
        self, tracker: PartitionTracker, messages: list[Message], index: int
    ) -> _Span | None:
        """Produce the plain records from `messages[index]` on in C, all but the last
        (see native_spans.c); while the producer's queue is full, serve delivery
        reports until it takes them. None if the partition rewound meanwhile
        (records did not reach the target) or the task stops."""
        produced = size_total = 0
        first_offset = last_offset = -1
        epoch = tracker.epoch
        while True:
            try:
                index, n, size, first, last, refused = self._spans.produce(
                    tracker.producer, tracker.remote, messages, index, tracker.size.limit
                )
            except unusable_error() as exc:
                if produced:  # it checks before it produces: the same producer passed
                    raise
                # The handle read from the producer is not its own: the C part must
                # not touch it. The loop goes on in Python (said once, see spans).
                refuse("handle", f"flow {self.flow.name}: {exc}")
                self._spans = None
                return _Span(index, 0, 0, -1, -1)
            produced += n
            size_total += size
            first_offset = first if first_offset < 0 else first_offset
            last_offset = max(last_offset, last)
            if refused != KafkaError._QUEUE_FULL:
                return _Span(index, produced, size_total, first_offset, last_offset)
            if not self._await_room(tracker, epoch):
                return None

    def _replicate_records(
        self, tracker: PartitionTracker, messages: list[Message], span: _Span
    ) -> int:
        """The Python loop of `_replicate_run`, from `span.index` on, after the span
        the C producer produced. One pass, with the partition's state in locals and a
        record without headers rewritten here, not by a call: without the C producer
        it runs for every record."""
        topic, partition = key = tracker.key
        rewrite_headers, source_entry = self._rewrite.headers, self._rewrite.source_entry
        topic_entry = (TOPIC_HEADER, topic.encode())
        produce, remote, limit = tracker.producer.produce, tracker.remote, tracker.size.limit
        # The replica made, not yet produced (none while p_headers is None).
        p_key = p_value = p_headers = p_timestamp = None
        index, produced, size_total, first_offset, last_offset = span
        next_offset = last_offset + 1 if produced else tracker.next_offset
        count = len(messages)
        while index < count:
            message = messages[index]
            if (
                message.partition() != partition
                or message.topic() != topic
                or message.error() is not None
            ):
                break  # a consume error starts a run of its own, in `_replicate`
            index += 1
            offset, own = message.offset(), message.headers()
            if own is None:  # the common case
                headers = [source_entry, (OFFSET_HEADER, encode_offset(offset)), topic_entry]
                size = 0
            else:
                headers, size = rewrite_headers(own, offset, topic)
            value, record_key = message.value(), message.key()
            size += (len(value) if value else 0) + (len(record_key) if record_key else 0)
            if headers is None or size > limit:
                tracker.next_offset = next_offset
                if not self._not_replicated(tracker, message, headers, size):
                    index = _run_end(messages, index, key)  # the rest waits, or is dropped
                    break
                next_offset = tracker.next_offset
                continue
            if p_headers is not None:
                try:
                    # By position (see the order at the top): keywords cost 0.6 us more.
                    produce(remote, p_value, p_key, partition, None, None, p_timestamp, p_headers)
                except BufferError:
                    if not self._produce(tracker, p_key, p_value, p_timestamp, p_headers):
                        return _run_end(messages, index, key)
                except KafkaException as exc:
                    self._on_produce_refused(tracker, last_offset, exc)
                    return _run_end(messages, index, key)
            p_key, p_value, p_headers = record_key, value, headers
            p_timestamp = message.timestamp()[1]
            if first_offset < 0:
                first_offset = offset
            last_offset, next_offset = offset, offset + 1
            produced += 1
            size_total += size
        tracker.next_offset = next_offset
        if p_headers is not None:
            report = _RunReport(self, tracker, first_offset, last_offset, produced)
            self._produce_last(tracker, (p_key, p_value, p_timestamp, p_headers), report)
            tracker.counters.replicated_bytes += size_total if report.sent else 0
        return index

    def _produce_last(
        self,
        tracker: PartitionTracker,
        record: tuple[bytes | None, bytes | None, int, Headers],
        report: _RunReport,
    ) -> None:
        """Produce the last record of a run, with the run's delivery report; the
        report waits in `_unreported` once it is produced (`report.sent`)."""
        try:
            report.sent = self._produce(tracker, *record, on_delivery=report)
        except KafkaException as exc:
            self._on_produce_refused(tracker, report.last_source, exc)
            return
        if report.sent:
            self._unreported.append(report)

    def _not_replicated(
        self,
        tracker: PartitionTracker,
        message: Message,
        headers: Headers | None,
        size: int,
    ) -> bool:
        """A record of the run that is not produced: a loop (no headers: our copy of a
        record that came from the target, see `rewrite`) or one too large for the remote
        topic. Its handler reads and moves the partition's position. False when a policy
        holds the partition here or stopped it: the rest of the run waits, or is
        dropped."""
        if headers is None:
            tracker.counters.skipped += 1
            tracker.next_offset = message.offset() + 1
            self._reporter.skipped(tracker, message.offset(), self._rewrite.skip)
        else:
            self._on_oversized(tracker, message.offset(), size)
        return not (tracker.stopped or tracker.size.held)

    def _produce(
        self,
        tracker: PartitionTracker,
        record_key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Headers,
        *,
        on_delivery: _RunReport | None = None,
    ) -> bool:
        """Produce a replica to the partition of `tracker`'s remote topic; while the
        producer's queue is full, serve delivery reports until it takes it. False if
        the partition rewound meanwhile (records did not reach the target) or the task
        stops: the rest of the run is not produced."""
        epoch = tracker.epoch
        while True:
            try:
                tracker.producer.produce(
                    tracker.remote, value, record_key, tracker.partition, on_delivery, None,
                    timestamp, headers,
                )  # fmt: skip
                return True
            except BufferError:
                if not self._await_room(tracker, epoch):
                    return False

    def _await_room(self, tracker: PartitionTracker, epoch: int) -> bool:
        """Serve delivery reports for a while: the producer's queue is full. False if
        the partition rewound meanwhile (records did not reach the target) or the task
        stops: the rest of the run is not produced.

        The wait is bounded (`DeliveryBounds.wait`, below max.poll.interval.ms since
        the consumer was last polled): past it the partitions rewind (every one in
        the default mode), so the loop polls the consumer again in time and the
        worker keeps its partitions; records it produced then could not land after
        the next owner resumed from the target tail."""
        tracker.producer.poll(0.05)
        if tracker.epoch != epoch or self.stop_event.is_set():
            return False
        waited = time.monotonic() - self._polled_at
        if waited < self._bounds.wait:
            return True
        why = (
            f"{self.flow.target.alias!r} took no record of {tracker.topic}[{tracker.partition}] "
            f"from offset {tracker.next_offset} for {waited:.0f} s (the producer's queue is full)"
        )
        if self._exactly_once is None:
            self._rewind_all(why)
        else:
            log.warning(
                "flow %s: %s; the partition resumes from the target tail", self.flow.name, why
            )
            self.rewind(tracker)
        return False

    def _on_run_delivered(
        self, run: _RunReport, error: KafkaError | None, message: Message
    ) -> None:
        run.reported = True
        tracker = run.tracker
        stale = run.epoch != tracker.epoch
        if stale or self._trackers.get(tracker.key) is not tracker:
            return  # revoked, fenced or rewound while in flight: the target tail tells
        if error is not None:
            self._on_delivery_error(run, error)
            return
        # The run's replicas take `count` offsets at least, up to its last one's
        # (records of others and transaction markers may take more): fewer means
        # some did not land, and the report must not acknowledge past them.
        key, target_offset = tracker.key, message.offset()
        expected = self._target_next.get(key)
        if expected is not None and target_offset + 1 - expected < run.count:
            self._on_gap(run, expected, target_offset)
            return
        self._target_next[key] = target_offset + 1
        tracker.acked_next = run.last_source + 1
        counters = tracker.counters
        counters.replicated += run.count
        counters.acked_timestamp_ms = message.timestamp()[1]
        self._syncs.acknowledged(
            tracker.key,
            first_source=run.first_source,
            last_source=run.last_source,
            count=run.count,
            target_offset=target_offset,
            timestamp_ms=counters.acked_timestamp_ms,
        )

    def _resumed_at_target(self, tracker: PartitionTracker, target_end: int) -> None:
        """The partition resumes, its remote partition's high watermark `target_end`:
        its next replica lands there or later."""
        self._target_next[tracker.key] = target_end

    def _on_gap(self, run: _RunReport, expected: int, target_offset: int) -> None:
        """A run's last replica landed at `target_offset`, closer to the previous
        acknowledged one than the run has records: some of them are not on the
        target. Never acknowledged: the partition stops, naming what to copy again.
        (Its status goes out with the next round: `halt` would poll the producer
        whose report this is, inside its own poll.)"""
        tracker = run.tracker
        metrics.ERRORS.labels(tracker.flow, "delivery_gap").inc()
        self._consumer.pause([TopicPartition(tracker.topic, tracker.partition)])
        self._stop_partition(
            tracker,
            f"{tracker.topic}[{tracker.partition}] offsets {run.first_source}..{run.last_source}: "
            f"{run.count} replicas sent, but the last landed at offset {target_offset} of "
            f"{tracker.remote}[{tracker.partition}] with the run starting at offset "
            f"{expected} or later: {run.count - (target_offset + 1 - expected)} or more did "
            "not land. The partition is stopped and the run not acknowledged; reset the "
            f"flow's offset of the partition to {run.first_source} (or verify the copy) "
            "and restart",
        )

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
        rejected = error.code() in REJECTED
        if not rejected and self._exactly_once is not None:
            # The transaction cannot commit now: its outcome rewinds the partition (a
            # zombie woken mid-transaction learns here first that it was fenced).
            log.debug("%s: not delivered, the transaction settles it: %s", records, error.str())
            return
        if not rejected and not is_fatal(error):
            self._rewind_all(f"{records} did not reach {target!r} ({error.str()})")
            return
        metrics.ERRORS.labels(tracker.flow, "delivery").inc()
        problem = f"{records}: the target {target!r} rejected records for {tracker.remote}: "
        denied = error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        if denied:
            problem += missing_acl(self.flow.target, "WRITE", f"TOPIC {tracker.remote}") + ": "
        if self._exactly_once is not None:
            self.halt(
                tracker,
                f"{problem}{error.str()}. The partition is stopped; fix the cause and "
                "restart, it resumes after the last committed record",
            )
            return
        self._producer_spent = True
        self._fail(
            f"{problem}{error.str()}. Replication of the flow is stopped; fix the cause "
            "and restart, it resumes after the last record written",
            access=denied,
        )

    # -- errors --------------------------------------------------------------------------

    def _on_produce_refused(
        self, tracker: PartitionTracker, offset: int, exc: KafkaException
    ) -> None:
        """The produce call of source offset `offset` refused at once: librdkafka
        already knows the remote topic refuses it (no WRITE ACL, no such topic, too
        large), so it is handled as a rejected delivery. A fatal error or any other
        goes on to the loop."""
        error = kafka_error(exc)
        if is_fatal(error) or error.code() not in REJECTED:
            raise exc
        self._on_delivery_error(_RunReport(self, tracker, offset, offset, 1), error)

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
        if code in AUTH_ERRORS:
            metrics.ERRORS.labels(self.flow.name, "authorization").inc()
            self._fail(
                f"flow {self.flow.name}: not allowed on {self.flow.source.alias!r}"
                f"{f' for topic {topic}' if topic else ''}: {error.str()}; "
                + missing_on_source(self.flow.source, self.flow.target.alias, code, topic),
                access=True,
            )
            return
        if error.fatal() or not error.retriable():
            metrics.ERRORS.labels(self.flow.name, "consume").inc()
            self._fail(f"flow {self.flow.name}: consuming {topic}[{partition}]: {error.str()}")
            return
        log.warning("flow %s: transient consume error: %s", self.flow.name, error.str())

    def _fail(self, message: str, *, access: bool = False) -> None:
        """Stop the task on `message`. `access`: a cluster refused the principal
        (AccessDenied), which the runner logs once, saying what follows; any
        other failure is logged here."""
        if self._fatal is None:
            if not access:
                log.error(message)
            self._fatal = message
            self._fatal_access = access

    # -- periodic work -------------------------------------------------------------------

    def _housekeeping(self) -> None:
        self._check_deadline()
        self._syncs.emit_due(force=False)
        self._reporter.publish_metrics(self._trackers.values())
        self._source_commits.commit_due(self._consumer, self._trackers.values(), self._in_flight())

    def _in_flight(self) -> set[tuple[str, int]]:
        """The partitions with runs the target has not acknowledged yet (default mode)."""
        return {run.tracker.key for run in self._unreported if not run.reported}

    def _check_deadline(self) -> None:
        """Default mode: a run the target has not acknowledged within the user's
        message timeout (the engine's deadline, as the producer never times a record
        out: see DeliveryBounds) rewinds every partition, as a timed-out record did."""
        runs = self._unreported
        if self._exactly_once is not None:
            runs.clear()  # transactions time out (and rewind) on their own
            return
        while runs and runs[0].reported:
            runs.popleft()
        deadline = self._bounds.deadline
        if not runs or deadline is None:
            return
        age = time.monotonic() - runs[0].produced_at
        if age >= deadline:
            oldest = runs[0]
            self._rewind_all(
                f"{oldest.tracker.topic}[{oldest.tracker.partition}] offsets "
                f"{oldest.first_source}..{oldest.last_source} unacknowledged by "
                f"{self.flow.target.alias!r} after {age:.0f} s (message.timeout.ms)"
            )

    def _publish_status(self, state: str) -> None:
        self._reporter.worker(state, self._trackers.values(), self._topics, self._fatal)


class _Timers:
    """When each periodic job of the loop is next due (each is due at once, but the
    config sync: `_prepare` synced the configs, so it is one interval away)."""

    def __init__(self, flow: FlowConfig) -> None:
        now = time.monotonic()
        self._next = {"config_sync": now + flow.sync_topic_configs_interval_seconds}

    def due(self, job: str, now: float, every_s: float) -> bool:
        """True (and the next one `every_s` from `now`) when `job` is due at `now`."""
        if now < self._next.get(job, now):
            return False
        self._next[job] = now + every_s
        return True


class _Span(NamedTuple):
    """What the C span producer produced of a run: `messages[:index]` are done."""

    index: int
    produced: int
    size: int
    first_offset: int
    last_offset: int


def _run_end(messages: list[Message], start: int, key: tuple[str, int]) -> int:
    """The index of the first record at or after `start` that is not of partition `key`."""
    topic, partition = key
    end = len(messages)
    while start < end:
        message = messages[start]
        if message.partition() != partition or message.topic() != topic:
            return start
        start += 1
    return end


@dataclass(slots=True)
class _RunReport:
    """The delivery report of a run of records of one partition (see _replicate_run)."""

    task: ReplicationTask
    tracker: PartitionTracker
    first_source: int
    last_source: int
    count: int
    #: The partition's delivery epoch when the run was produced (a rewind moves it on).
    epoch: int = field(init=False)
    #: When the run was produced (time.monotonic), and whether its report came.
    produced_at: float = field(init=False)
    reported: bool = field(init=False, default=False)
    #: Whether its last record was produced (the report then comes).
    sent: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        self.epoch = self.tracker.epoch
        self.produced_at = time.monotonic()

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        self.task._on_run_delivered(self, error, message)
