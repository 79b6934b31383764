"""The replication task: source partitions in, the same partitions of the remote
topics out, every record intact and carrying its provenance and source offset.

One task runs one flow in one process. Its partitions come from Kafka's
consumer-group protocol on the source cluster, so more tasks of the same flow
(on any machine) share the work without a coordinator. It never commits
consumer offsets for itself: the tail of each target partition says where to resume.

This module is the loop and the composition of its parts, each the one owner of its
state and testable without Kafka (docs/engine.md, "The engine's parts"):

- `Partitions` (`partitions`): the tracked partitions; track, rewind, halt, stop,
  drop, forget.
- `TargetWriter` (`target_writer`): the target producers, size limits and held
  oversized records, flush and fatal errors, and the hot path that writes a run
  (the Python loop); its runs in flight are `Deliveries` (`deliveries`).
- `Rebalance` (`rebalance`): the group's assign, revoke and lost callbacks, and
  where each partition resumes.
- `ReplicatedTopics` (`replicated_topics`): the topic map, refreshed and synced.
- `MoverWriter` (`mover_writer`): the compiled data path of the default mode, when
  `data_path` chose it: the Mover reads and writes the records, the group consumer
  (behind `MoverFetch`) only keeps the group's assignment; `_round` then moves
  records with `MoverWriter.move` instead of `_next_batch` and `_replicate`.
  Exactly-once flows take `TransactionalMoverWriter` (`mover_transactions`): a
  transactional Mover per source partition, its transaction committed each round.

The task owns the clients they work through (the source consumer, the producer to
the source for offset syncs and heartbeats), why it stopped (`_fatal`), and the
loop: `_round` reads top to bottom, and `_replicate` is the inner loop over a batch.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import cast

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from replicator import metrics
from replicator.config.model import FlowConfig
from replicator.engine import data_path
from replicator.engine.heartbeats import HeartbeatWriter
from replicator.engine.internal_topics import written_by
from replicator.engine.kafka_errors import AUTH_ERRORS, AccessDenied, missing_on_source
from replicator.engine.mover_transactions import TransactionalMoverWriter
from replicator.engine.mover_writer import MoverFetch, MoverWriter
from replicator.engine.offset_syncs import OffsetSyncWriter, offset_syncs_producer
from replicator.engine.partitions import Partitions
from replicator.engine.rebalance import Rebalance
from replicator.engine.replica_writer import ConsumedRecord
from replicator.engine.replicated_topics import ReplicatedTopics
from replicator.engine.reporting import TaskReporter
from replicator.engine.resume import ResumePoints
from replicator.engine.source_commits import SourceCommits
from replicator.engine.source_consumer import source_consumer_config
from replicator.engine.target_writer import TargetWriter, run_end
from replicator.engine.written_runs import written_runs
from replicator.errors import ReplicatorError
from replicator.kafka.clients import Consumer, Producer
from replicator.kafka.errors import is_fatal, kafka_error
from replicator.kafka.watermarks import watermarks

log = logging.getLogger(__name__)

_CONSUME_BATCH = 10_000
_CONSUME_TIMEOUT_S = 0.2
_HOUSEKEEPING_S = 1.0
_STATUS_EVERY_S = 10.0
#: The share of the loop's time the reports of every partition (metrics, status) may
#: take: one that cost more than this share of its interval comes that much later.
#: At 5,000 partitions a round of metrics took 0.2 to 2 s beside a checkpoint round;
#: every second, it left the copy a fraction of the loop (`_Timers.spaced`).
_REPORTS_DUTY = 0.1


class TaskFailed(ReplicatorError):
    """The task stopped because a failure policy said `fail`; status says where."""


@dataclass(frozen=True)
class _Parts:
    """The parts `_compose` makes over the task's clients, for the task's life: the
    loop is handed them, so nothing it touches is unset."""

    consumer: Consumer
    #: The source consumer as the parts see it: `MoverFetch` on the compiled path.
    fetch: Consumer | MoverFetch
    syncs: OffsetSyncWriter
    partitions: Partitions
    writer: TargetWriter | MoverWriter
    #: The compiled path's writer (the same object as `writer`), None on the Python loop.
    mover: MoverWriter | None
    rebalance: Rebalance
    #: None when a test or benchmark composes a task over clients of its own.
    heartbeats: HeartbeatWriter | None


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
        self._reporter = TaskReporter(flow.name, self.worker_id, self.started_ms)
        self._topics = ReplicatedTopics(flow)
        #: Source positions committed for consumer-group tools (never read back).
        self._source_commits = SourceCommits(
            flow.name, enabled=flow.commit_source_offsets, transactional=flow.exactly_once
        )
        #: Why the task stops (a `fail` policy fired), and whether a cluster refused
        #: the principal (AccessDenied).
        self._fatal: str | None = None
        self._fatal_access = False
        #: When the consumer was last polled: the loop polls it again well within
        #: max.poll.interval.ms, or the group would hand its partitions on.
        self._polled_at = time.monotonic()
        # The clients the task owns, made by `_prepare`, and the parts that work
        # through them (`_compose`), kept here for the error callbacks and the shutdown.
        self._source_producer: Producer | None = None
        self._resume_points: ResumePoints | None = None
        self._parts: _Parts | None = None

    # -- the loop ----------------------------------------------------------------------

    def run(self) -> None:
        """Replicate until stopped. Raises TaskFailed when a `fail` policy fires."""
        flow = self.flow
        parts = self._prepare()
        log.info("flow %s: replicating %d topics", flow.name, len(self._topics.topics))
        self._reporter.running(True)
        timers = _Timers(flow)
        stopped_on_purpose = False
        try:
            while not self.stop_event.is_set() and self._fatal is None:
                try:
                    self._round(parts, timers)
                except KafkaException as exc:
                    # Fatal for the target producer (the gapless guarantee tripped by a
                    # batch the target refused): raised by whichever call of the round
                    # touches it first, replicating or publishing status.
                    if not is_fatal(kafka_error(exc)):
                        raise
                    parts.writer.on_fatal(kafka_error(exc))
            stopped_on_purpose = self._fatal is None
        finally:
            # A loop stopped on purpose (its flow stopped, the process shutting down) is
            # not a loop that failed: its series goes rather than reading 0.
            self._reporter.running(False, stopped_on_purpose=stopped_on_purpose)
            if parts.writer.spent:
                parts.writer.replace_spent()
            self._shutdown()
        if self._fatal is not None:
            raise (AccessDenied if self._fatal_access else TaskFailed)(self._fatal)

    def _round(self, parts: _Parts, timers: _Timers) -> None:
        """One round of the loop: replicate what the source has now, fetch again the
        partitions a config sync or the target let go, serve the producer's reports,
        then the periodic work that is due."""
        flow, writer = self.flow, parts.writer
        if parts.mover is not None:
            self._poll_group(parts.consumer)
            parts.mover.move(_CONSUME_TIMEOUT_S)
        else:
            messages = self._next_batch(parts.consumer)
            if messages:
                self._replicate(parts, messages)
        writer.resync_held()  # partitions held at an oversized record
        parts.rebalance.resume_waiting()  # partitions waiting for the target
        writer.serve()
        if self._fatal is not None:
            return  # nothing more is written through a producer a refusal spent
        now = time.monotonic()
        if timers.due("housekeeping", now, _HOUSEKEEPING_S):
            writer.check_deadline()
            parts.syncs.emit_due(force=False)
            trackers = parts.partitions.values()
            self._source_commits.commit_due(parts.consumer, trackers, writer.in_flight())
        self._report_due(parts, timers, now)
        if (
            parts.heartbeats is not None
            and flow.emit_heartbeats_enabled
            and timers.due("heartbeat", now, flow.emit_heartbeats_interval_seconds)
        ):
            parts.heartbeats.emit()
        if flow.refresh_topics_enabled and timers.due(
            "refresh", now, flow.refresh_topics_interval_seconds
        ):
            limits, changed = self._topics.refresh(sync_configs=False)
            if limits is not None:
                writer.update_size_limits(limits)
            if changed:
                self._subscribe(parts.consumer)
        # On a timer of its own, as MM2's (not only when topics are refreshed).
        if flow.sync_topic_configs_enabled and timers.due(
            "config_sync", now, flow.sync_topic_configs_interval_seconds
        ):
            limits = self._topics.sync_configs()
            if limits is not None:
                writer.update_size_limits(limits)

    def _report_due(self, parts: _Parts, timers: _Timers, now: float) -> None:
        """Every partition's metrics (each second) and status (`_STATUS_EVERY_S`),
        each spaced by its own cost (`_Timers.spaced`)."""
        if timers.due("metrics", now, _HOUSEKEEPING_S):
            with timers.spaced("metrics", _HOUSEKEEPING_S):
                self._reporter.publish_metrics(parts.partitions.values())
        if timers.due("status", now, _STATUS_EVERY_S):
            with timers.spaced("status", _STATUS_EVERY_S):
                self._publish_status("running")

    def _next_batch(self, consumer: Consumer) -> list[Message]:
        """What the consumer has now, up to a full batch; when it has nothing, wait for
        the first record only. (`consume(n, timeout)` waits the whole timeout for `n`
        records, which at moderate rates adds the timeout to every record's latency.)"""
        consume = consumer.consume
        self._polled_at = time.monotonic()
        messages = consume(_CONSUME_BATCH, 0)
        if not messages:
            messages = consume(1, _CONSUME_TIMEOUT_S)
            if messages:
                messages += consume(_CONSUME_BATCH - 1, 0)
        return messages

    def _poll_group(self, consumer: Consumer) -> None:
        """The compiled path: poll the group consumer, which serves the group's
        callbacks and errors. It fetches no record (its partitions stay paused: the
        Mover reads them); one it had fetched before a pause is the Mover's to copy."""
        self._polled_at = time.monotonic()
        for message in consumer.consume(_CONSUME_BATCH, 0):
            error = message.error()
            if error is not None:
                self._on_consume_error(message, error)

    def _last_poll(self) -> float:
        return self._polled_at

    def _replicate(self, parts: _Parts, messages: list[Message]) -> None:
        """The inner loop: replicate a batch run by run. A run is consecutive records
        of one partition, and runs are long, as librdkafka hands records over
        partition by partition. Records of a partition that is not ours, waits to
        resume, or that a policy stopped or holds at an oversized record were fetched
        before it paused: they are dropped. In exactly-once mode each partition's
        transaction is open from its first run on, and committed after the batch."""
        partitions, writer = parts.partitions, parts.writer
        exactly_once = writer.exactly_once
        records = cast("list[ConsumedRecord]", messages)  # the same list (see the type)
        start, count = 0, len(messages)
        while start < count:
            first = messages[start]
            error = first.error()
            if error is not None:
                self._on_consume_error(first, error)
                start += 1
                continue
            # A record (not an error) always names its topic and partition.
            key = cast("tuple[str, int]", (first.topic(), first.partition()))
            tracker = partitions.replicating(key)
            if tracker is not None and exactly_once is not None and not exactly_once.begin(tracker):
                tracker = None  # its outcome is settled: the records are dropped
            if tracker is None:
                start = run_end(records, start + 1, key)
            else:
                start = writer.write_run(tracker, records, start)
        if exactly_once is not None:
            exactly_once.commit(partitions.trackers)

    # -- errors --------------------------------------------------------------------------

    def _on_consume_error(self, message: Message, error: KafkaError) -> None:
        code = error.code()
        topic, partition = message.topic(), message.partition()
        if code == KafkaError._AUTO_OFFSET_RESET and topic is not None and partition is not None:
            self._out_of_range(topic, partition, error.str())
            return
        if code == KafkaError._MAX_POLL_EXCEEDED:
            # Not polled for max.poll.interval.ms (a start that waited that long for the
            # target, which it does after joining the group): librdkafka left the
            # group, reports the partitions lost (`on_lost`) and joins again.
            log.warning(
                "flow %s: the source group was not polled for max.poll.interval.ms (%s); "
                "its partitions go back to the group, which this worker joins again",
                self.flow.name, error.str(),
            )  # fmt: skip
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

    def _out_of_range(self, topic: str, partition: int, why: str) -> None:
        """The fetch position left the source log while running (retention outran us,
        or the topic was truncated); the fetcher stands still until restarted."""
        parts = self._started()
        tracker = parts.partitions.get((topic, partition))
        if tracker is None:
            return
        if tracker.stopped or tracker.resuming:  # reported, or its position is not known
            parts.partitions.pause(tracker)
            return
        low, high = watermarks(parts.consumer, topic, partition)
        if not parts.rebalance.check_position(tracker, low, high):
            log.warning(
                "flow %s: %s[%d] offset %d reported out of range although the source "
                "log is %d..%d; fetching it again: %s",
                self.flow.name, topic, partition, tracker.next_offset, low, high, why,
            )  # fmt: skip
        parts.partitions.restart_fetch(tracker)

    def _fail(self, message: str, *, access: bool = False) -> None:
        """Stop the task on `message`. `access`: a cluster refused the principal
        (AccessDenied), which the runner logs once, saying what follows; any
        other failure is logged here."""
        if self._fatal is None:
            if not access:
                log.error(message)
            self._fatal = message
            self._fatal_access = access

    def _started(self) -> _Parts:
        """The parts, for the callbacks the parts themselves call (so after `_compose`)."""
        if self._parts is None:
            raise RuntimeError(f"flow {self.flow.name}: the task's parts are not made yet")
        return self._parts

    def _publish_status(self, state: str) -> None:
        trackers = self._parts.partitions.values() if self._parts is not None else ()
        self._reporter.worker(state, trackers, self._topics.topics, self._fatal)

    # -- start and end -------------------------------------------------------------------

    def _prepare(self) -> _Parts:
        """Make the internal and remote topics, the clients, and the parts. The source
        group is joined before the remote topics are made: its join goes on in
        librdkafka's thread meanwhile (on a group with no member the broker waits
        `group.initial.rebalance.delay.ms`, 3 s by default, for more to join), and the
        loop's first poll serves the assignment, the parts made by then."""
        flow = self.flow
        for topic in written_by(flow, "worker"):  # status, offset syncs, heartbeats
            topic.ensure()
        self._topics.find()
        consumer_config = source_consumer_config(flow)
        self._source_commits.group = str(consumer_config["group.id"])
        consumer_config["on_commit"] = self._source_commits.on_commit
        consumer = Consumer(consumer_config)
        try:
            self._subscribe(consumer)
            parts = self._make_parts(consumer)
        except BaseException:
            consumer.close()  # leaves the group: its share goes to the other workers
            raise
        # The Mover's watermarks, if it reads. Records in flight are not replicated yet,
        # as for the source commits (`SourceCommits.position`; not in exactly-once mode).
        writer = parts.writer
        self._reporter.read_lag_with(
            parts.fetch, writer.in_flight if writer.exactly_once is None else set
        )
        return parts

    def _make_parts(self, consumer: Consumer) -> _Parts:
        """The remote topics made, the producer to the source and the parts over
        `consumer`."""
        flow = self.flow
        limits = self._topics.make_remotes()
        self._source_producer = Producer(flow.source.idempotent_producer(linger_ms=50))
        syncs = OffsetSyncWriter(
            offset_syncs_producer(flow, self._source_producer),
            flow.offset_syncs_topic,
            flow.name,
            flow.offset_lag_max,
            transactional=flow.exactly_once,
            enabled=flow.emit_offset_syncs_enabled,
            partition_labels=flow.metrics_partition_labels,
            runs=written_runs(flow),
        )
        heartbeats = HeartbeatWriter(
            self._source_producer, flow.heartbeats_topic, flow.source.alias,
            flow.target.alias,
        )  # fmt: skip
        self._resume_points = ResumePoints(flow)
        return self._compose(
            consumer, syncs, limits, resume_points=self._resume_points, heartbeats=heartbeats
        )

    def _compose(
        self,
        consumer: Consumer,
        syncs: OffsetSyncWriter,
        limits: dict[str, int],
        producer: Producer | None = None,
        *,
        resume_points: ResumePoints,
        heartbeats: HeartbeatWriter | None = None,
    ) -> _Parts:
        """Make the parts over the clients: the target writer makes its producer for
        the remote topics' `limits` (max.message.bytes), or uses `producer` (tests and
        benchmarks compose a task over clients of their own this way, with no
        heartbeats)."""
        flow = self.flow
        path = data_path.choose(flow, own_producer=producer is not None)
        data_path.announce(flow.name, path)
        self._reporter.data_path = path.describe()
        module = path.module  # set exactly when the path is compiled
        fetch = MoverFetch(consumer) if module is not None else consumer
        partitions = Partitions(
            flow.name,
            fetch,
            syncs,
            self._reporter,
            transactional=flow.exactly_once,
            partition_labels=flow.metrics_partition_labels,
        )
        writer: TargetWriter | MoverWriter
        mover: MoverWriter | None = None
        if module is not None and isinstance(fetch, MoverFetch):
            # Exactly-once: a transactional Mover per source partition.
            writer_class = TransactionalMoverWriter if flow.exactly_once else MoverWriter
            writer = mover = writer_class(
                flow,
                partitions,
                syncs,
                self._reporter,
                module=module,
                topics=self._topics,
                fail=self._fail,
                out_of_range=self._out_of_range,
                stopping=self.stop_event,
            )
            fetch.bind(mover)
        else:
            writer = TargetWriter(
                flow,
                partitions,
                syncs,
                self._reporter,
                topics=self._topics,
                fail=self._fail,
                stopping=self.stop_event,
                last_poll=self._last_poll,
            )
        writer.start(limits, producer)
        rebalance = Rebalance(
            flow,
            consumer=fetch,
            partitions=partitions,
            writer=writer,
            topics=self._topics,
            resume_points=resume_points,
            syncs=syncs,
            source_commits=self._source_commits,
            reporter=self._reporter,
        )
        self._parts = _Parts(
            consumer, fetch, syncs, partitions, writer, mover, rebalance, heartbeats
        )
        return self._parts

    def _subscribe(self, consumer: Consumer) -> None:
        """Subscribe to the replicated topics. The group's callbacks run in the loop's
        polls, once the parts are made: they hand the parts the consumer as they see
        it (`fetch`), which on the compiled path assigns, pauses and gives up through
        MoverFetch. A consumer closed before the parts were made (a start that failed)
        leaves its assignment to librdkafka."""
        consumer.subscribe(
            self._topics.names(),
            on_assign=lambda _consumer, partitions: self._on_group("assign", partitions),
            on_revoke=lambda _consumer, partitions: self._on_group("revoke", partitions),
            on_lost=lambda _consumer, partitions: self._on_group("lost", partitions),
        )

    def _on_group(self, event: str, partitions: list[TopicPartition]) -> None:
        parts = self._parts
        if parts is None:
            return
        rebalance = parts.rebalance
        handler = {
            "assign": rebalance.on_assign,
            "revoke": rebalance.on_revoke,
            "lost": rebalance.on_lost,
        }[event]
        handler(parts.fetch, partitions)

    def _shutdown(self) -> None:
        # Closing the consumer revokes its partitions (flush, final offset syncs,
        # "revoked" status); only then are the producers flushed for the last time.
        parts = self._parts
        if parts is not None:
            parts.consumer.close()
            parts.writer.close_transactions()
        if self._reporter.ready:
            self._publish_status("failed" if self._fatal else "stopped")
        if parts is not None:
            parts.writer.flush(30)
            if parts.mover is not None:
                parts.mover.close()
        if self._source_producer is not None:
            self._source_producer.flush(30)
        if self._resume_points is not None:
            self._resume_points.close()


class _Timers:
    """When each periodic job of the loop is next due (each is due at once, but the
    topic refresh and the config sync: `_prepare` listed the topics and synced their
    remote topics and configs, so they are one interval away; refreshed at once, an
    estate of 1,250 topics described every remote topic's configs again, a second
    before its copy began). `clock`
    and `cpu_clock` are the wall clock and this thread's CPU clock (tests pass their
    own: patching the `time` module would stop the clock of every thread)."""

    def __init__(
        self,
        flow: FlowConfig,
        clock: Callable[[], float] = time.monotonic,
        cpu_clock: Callable[[], float] = time.thread_time,
    ) -> None:
        self._clock = clock
        self._cpu_clock = cpu_clock
        now = clock()
        self._next = {
            "refresh": now + flow.refresh_topics_interval_seconds,
            "config_sync": now + flow.sync_topic_configs_interval_seconds,
        }

    def due(self, job: str, now: float, every_s: float) -> bool:
        """True (and the next one `every_s` from `now`) when `job` is due at `now`."""
        if now < self._next.get(job, now):
            return False
        self._next[job] = now + every_s
        return True

    @contextmanager
    def spaced(self, job: str, every_s: float) -> Iterator[None]:
        """Measure the run of `job` in the block by this thread's CPU time (its own
        cost: a run kept waiting by other threads or processes is not spaced for
        it): one that cost more than `_REPORTS_DUTY` of `every_s` is next due that
        many times its cost after its end, so reports of thousands of partitions
        never take more than that share of the loop from the copy: they come less
        often instead."""
        cost = self._cpu_clock()
        yield
        cost = self._cpu_clock() - cost
        pause = cost / _REPORTS_DUTY
        if pause > every_s:
            self._next[job] = self._clock() + pause
