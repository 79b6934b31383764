"""A replication task's clients and topics: made when it starts (internal topics,
remote topics, the clients with the settings replication's guarantees rest on),
the target producer made anew when the remote topics' size limits no longer fit it
(and a record too large for its remote topic held for a config sync of the topic,
skipped or stopped at), the topic set refreshed while running, and everything
flushed and closed at the end.

Part of `ReplicationTask` (a base class of it, sharing its state). The user's client
settings of each cluster come first where they may tune (batching, timeouts,
security); what the guarantees rest on comes last, so no setting of theirs undoes it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from replicator import metrics
from replicator.config.model import FlowConfig
from replicator.config.policies import ReplicationPolicy
from replicator.engine.exactly_once import ExactlyOnce
from replicator.engine.heartbeats import HeartbeatWriter
from replicator.engine.internal_topics import ensure_compacted_topic
from replicator.engine.kafka_errors import reason
from replicator.engine.offset_syncs import OffsetSyncWriter, offset_syncs_producer
from replicator.engine.partition import PartitionTracker
from replicator.engine.reporting import TaskReporter
from replicator.engine.resume import ResumePoints
from replicator.engine.size_limits import Oversized, OversizedRecords, SizeLimits
from replicator.engine.source_commits import SourceCommits
from replicator.engine.status import STATUS_TOPIC
from replicator.engine.topic_sync import TopicSync
from replicator.errors import ConfigError, ReplicatorError
from replicator.kafka.clients import Consumer, Producer
from replicator.kafka.errors import is_fatal, kafka_error

log = logging.getLogger(__name__)

#: librdkafka's defaults of the timeouts the delivery bounds come from.
_MESSAGE_TIMEOUT_MS = 300_000
_MAX_POLL_INTERVAL_MS = 300_000
#: The share of max.poll.interval.ms the loop may spend waiting for the target (for
#: room in the producer's queue, or for a flush before partitions are given up):
#: the rest is margin for the batch around it and the rebalance that may follow.
_POLL_SHARE = 0.4
#: A flush before partitions are given up (or the producer is made anew) waits at
#: most this long, however long the poll interval.
_FLUSH_MAX_S = 60.0
#: How long a failed target producer's last delivery reports are served for.
_SPENT_REPORTS_S = 5.0


@dataclass(frozen=True)
class DeliveryBounds:
    """How long the default mode's target producer may hold records, in seconds.

    The producer itself never times a record out (`message.timeout.ms=0`): after a
    timeout librdkafka's idempotent producer bumps its epoch and goes on, leaving a
    gap that the gapless guarantee does not cover, and a run's one delivery report
    would then acknowledge past it. The engine keeps the user's timeout instead."""

    #: The user's `message.timeout.ms` (`delivery.timeout.ms`): a run unacknowledged
    #: for longer rewinds every partition to the target tail. None: 0, no deadline.
    deadline: float | None
    #: The longest wait for the target between two polls of the consumer: below
    #: `max.poll.interval.ms`, so the worker keeps its partitions while it waits.
    wait: float

    @classmethod
    def of(cls, flow: FlowConfig) -> DeliveryBounds:
        producer, consumer = flow.target.producer, flow.source.consumer
        timeout_ms = int(
            producer.get(
                "message.timeout.ms", producer.get("delivery.timeout.ms", _MESSAGE_TIMEOUT_MS)
            )
        )
        poll_ms = int(consumer.get("max.poll.interval.ms", _MAX_POLL_INTERVAL_MS))
        deadline = timeout_ms / 1000 if timeout_ms > 0 else None
        wait = poll_ms / 1000 * _POLL_SHARE
        return cls(deadline, wait if deadline is None else min(deadline, wait))


def group_membership(consumer: Mapping[str, str]) -> tuple[dict[str, object], dict[str, object]]:
    """How the source consumer takes part in the flow's group: settings the user's
    may override, and settings that must hold. Both protocols rebalance
    incrementally, so a worker joining or leaving never stops the others.

    - `classic` (the default, any Kafka since 2.4): the client assigns, with the
      cooperative-sticky assignor, which balances partition counts, not topics.
      A worker that dies hands its partitions over within seconds.
    - `consumer` (KIP-848, Kafka 4.0 and later): the broker assigns, by default
      with `range`, which spreads every topic over the workers, so a busy topic
      is shared even when an idle one has as many partitions. The session timeout
      is the broker's (`group.consumer.session.timeout.ms`, 45 s by default).
    """
    if consumer.get("group.protocol", "classic") == "consumer":
        return {"group.remote.assignor": "range"}, {}
    defaults = {"session.timeout.ms": 10_000, "heartbeat.interval.ms": 1_000}
    return defaults, {"partition.assignment.strategy": "cooperative-sticky"}


class TaskSetup:
    """Clients and topics of a `ReplicationTask`."""

    # The task's state this part makes and reads (see ReplicationTask).
    flow: FlowConfig
    policy: ReplicationPolicy
    topic_sync: TopicSync
    _topics: dict[str, int]
    _trackers: dict[tuple[str, int], PartitionTracker]
    _draining: bool
    _fatal: str | None
    _size_limits: SizeLimits
    _oversized: OversizedRecords
    _held: list[PartitionTracker]
    _producer_limits: tuple[int, int]
    _consumer: Consumer | None
    _producer: Producer | None
    #: A batch the target refused trips the gapless guarantee: the target producer
    #: is failed, or fails as soon as librdkafka raises it (`_replace_spent_producer`).
    _producer_spent: bool
    _source_producer: Producer | None
    _reporter: TaskReporter
    _source_commits: SourceCommits
    _resume_points: ResumePoints | None
    _syncs: OffsetSyncWriter | None
    _heartbeats: HeartbeatWriter | None
    _exactly_once: ExactlyOnce | None
    _bounds: DeliveryBounds

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
        deadline = self._bounds.deadline
        log.info(
            "flow %s: records unacknowledged after message.timeout.ms (%s) rewind the "
            "partitions to the target tail (the engine keeps that timeout: its producer never "
            "times a record out); a wait for the target lasts %.1f s at most, below "
            "max.poll.interval.ms",
            flow.name, "0: never" if deadline is None else f"{deadline:g} s", self._bounds.wait,
        )  # fmt: skip
        self._source_producer = Producer(
            {"linger.ms": 50, **flow.source.producer, "enable.idempotence": True}
        )
        self._syncs = OffsetSyncWriter(
            offset_syncs_producer(flow, self._source_producer),
            self.policy.offset_syncs_topic(flow.target.alias),
            flow.name,
            flow.offset_lag_max,
            transactional=flow.exactly_once,
            enabled=flow.emit_offset_syncs_enabled,
            partition_labels=flow.metrics_partition_labels,
        )
        self._heartbeats = HeartbeatWriter(
            self._source_producer, self.policy.heartbeats_topic(), flow.source.alias,
            flow.target.alias,
        )  # fmt: skip
        if flow.exactly_once:
            self._exactly_once = ExactlyOnce(flow, self._transactional_config, self._syncs, self)
        self._reporter.write_with(self._producer)
        self._resume_points = ResumePoints(flow)
        group_defaults, group_fixed = group_membership(flow.source.consumer)
        consumer_config = {
            **group_defaults,
            # librdkafka stops fetching a partition whose prefetch queue is full
            # (queued.min.messages, queued.max.messages.kbytes) and, by default,
            # tries again only 1 s later; the loop drains a full queue in well
            # under that and then waited for fetches half the time (165,000 ->
            # 310,000 records/s at 100 B, 86,000 -> 169,000 at 1 KB; the run is
            # in git history).
            "fetch.queue.backoff.ms": 10,
            "topic.metadata.refresh.interval.ms": 10_000,
            **flow.source.consumer,
            "group.id": flow.engine_group,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_committed",
            # Never jump silently: an out-of-range position is a retention gap
            # or a recreated topic, and the failure policies decide.
            "auto.offset.reset": "error",
            **group_fixed,
        }
        self._source_commits.group = str(consumer_config["group.id"])
        consumer_config["on_commit"] = self._source_commits.on_commit
        self._consumer = Consumer(consumer_config)
        self._reporter.read_lag_with(self._consumer)
        self._subscribe()

    def _make_target_producer(self) -> Producer:
        self._producer_limits = self._size_limits.producer_limits()
        config = self._target_producer_config()
        config.pop("delivery.timeout.ms", None)  # librdkafka's alias of message.timeout.ms
        # A failed batch must stop the partition, never leave a hole behind it; and
        # no record times out, which would leave one (the engine keeps the user's
        # timeout as its own deadline: DeliveryBounds).
        return Producer(
            {
                **config,
                "message.timeout.ms": 0,
                "enable.gapless.guarantee": True,
                # Transactional producers are left out: being fenced is fatal for them
                # and means "partition moved", which the transaction outcome handles.
                "error_cb": self._on_producer_error,
            }
        )

    def _on_producer_fatal(self, error: KafkaError) -> None:
        """The target producer failed fatally (e.g. the gapless guarantee tripped by
        a batch the target refused) and takes nothing more: it is replaced, and the
        task stops. The refused batch's delivery reports, served first, say which
        topic and why (a missing WRITE ACL is named there)."""
        self._replace_spent_producer()
        metrics.ERRORS.labels(self.flow.name, "delivery").inc()
        self._fail(
            f"flow {self.flow.name}: the producer to {self.flow.target.alias!r} failed "
            f"fatally: {error.str()}. Replication of the flow is stopped; fix the cause "
            "and restart, it resumes from the target tail"
        )

    def _replace_spent_producer(self) -> None:
        """A new target producer for the status written while the task stops: the
        old one failed fatally, or will as soon as the refusal of a batch reaches it
        (its reports can be served before its fatal error is raised; a status record
        written through it then raised "_FATAL: Unable to produce message" from the
        shutdown, and the task's own message was lost). The old one's reports are
        served first, for `_SPENT_REPORTS_S` at most: the refused batch's name the
        topic and the cause (a poll raises the fatal error before serving them)."""
        spent = self._producer
        deadline = time.monotonic() + _SPENT_REPORTS_S
        while len(spent) and time.monotonic() < deadline:
            try:
                spent.poll(0.1)
            except KafkaException as exc:  # its fatal error; the next poll serves on
                log.debug("flow %s: the failed producer: %s", self.flow.name, reason(exc))
        self._producer_spent = False
        self._producer = self._make_target_producer()
        self._reporter.write_with(self._producer)
        if self._exactly_once is None:
            for tracker in self._trackers.values():
                tracker.producer = self._producer

    def _on_producer_error(self, error: KafkaError) -> None:
        """A producer error that is not fatal (confluent-kafka raises fatal ones from
        the call that serves them instead: `ReplicationTask._on_producer_fatal`)."""
        log.warning("flow %s: producer: %s", self.flow.name, error.str())

    def _target_producer_config(self) -> dict[str, object]:
        message_max_bytes, batch_size = self._size_limits.producer_limits()
        # The user's batch.size, capped below the smallest remote topic's limit (a larger
        # batch would be refused whole); `batch_size` is that cap.
        wanted = self.flow.target.producer.get("batch.size")
        if wanted is not None:
            batch_size = min(batch_size, int(wanted))
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
            tracker.size.limit = self._size_limits.record_limit(tracker.remote)
        message_max_bytes, batch_size = self._size_limits.producer_limits()
        have_max, have_batch = self._producer_limits
        if self._producer is None or (message_max_bytes <= have_max and batch_size >= have_batch):
            return
        # The new producer must not overtake the old one's records. If the target does
        # not take them, the partitions rewind and the limits apply at the next sync.
        if not self._flush_in_flight():
            return
        self._producer = self._make_target_producer()
        self._reporter.write_with(self._producer)
        for tracker in self._trackers.values():
            if self._exactly_once is None:
                tracker.producer = self._producer
            elif not tracker.resuming:
                # Its transactional producer is made anew, with the new limits, when it
                # resumes (between batches: no transaction is open).
                self._exactly_once.close(tracker.key)
                self.rewind(tracker)
        log.info(
            "flow %s: target producer recreated for the remote topics' limits "
            "(message.max.bytes=%d, batch.size=%d)",
            self.flow.name,
            *self._producer_limits,
        )

    def _on_oversized(self, tracker: PartitionTracker, offset: int, size: int) -> None:
        """A record too large for its remote topic: hold the partition for a config
        sync of the topic (after this batch), skip the record or stop at it."""
        verdict = self._oversized.verdict(
            tracker.topic, tracker.partition, tracker.remote, tracker.size, offset=offset, size=size
        )
        if verdict.action is Oversized.HOLD:
            tracker.next_offset = offset
            self._consumer.pause([TopicPartition(tracker.topic, tracker.partition)])
            self._held.append(tracker)
            return
        metrics.ERRORS.labels(tracker.flow, "record_too_large").inc()
        if verdict.action is Oversized.SKIP:
            tracker.counters.skipped += 1
            tracker.next_offset = offset + 1
            metrics.SKIPPED.labels(*tracker.labels, "record_too_large").inc()
            log.warning("%s; skipped (oversized.record.policy=skip)", verdict.message)
            self._reporter.partition(tracker, self._reporter.lag(tracker))
            return
        tracker.next_offset = offset
        self.halt(tracker, verdict.message)

    def _resync_held(self) -> None:
        """Sync the configs of topics with a held oversized record, then fetch those
        partitions again from that record: it now fits, or its policy applies."""
        held, self._held = self._held, []
        topics = {t.topic: self._topics.get(t.topic, t.partition + 1) for t in held}
        self._oversized.resynced(topics)
        self._update_size_limits(self.topic_sync.sync(topics).max_message_bytes)
        for tracker in held:
            tracker.size.held = False
            if self._trackers.get(tracker.key) is tracker:
                self._restart_fetch(tracker)

    def _flush_in_flight(self) -> bool:
        """Wait until the target acknowledged every record produced so far. False if
        it did not within the flush bound (it is away): every partition then rewinds
        to the target tail. In exactly-once mode records travel in transactions and
        this producer carries status only, so there is nothing to wait for."""
        if self._exactly_once is not None:
            return True
        if self._draining:
            return False  # rewinding already: what is in flight no longer counts
        bound = min(_FLUSH_MAX_S, self._bounds.wait)
        remaining = self._flush_target(bound)
        if remaining:
            target = self.flow.target.alias
            self._rewind_all(
                f"{remaining} records still unacknowledged by {target!r} after {bound:.0f} s"
            )
            return False
        return True

    def _release_records(self, lost: bool) -> None:
        """Before partitions are given up, the target producer holds no record of
        theirs: one landing after the next owner read the tail would be copied twice.
        Revoked: flushed, for at most the flush bound (even while rewinding: records
        in flight may still land), else purged. Lost: the group moved on and the next
        owner may have read the tail already, so nothing is flushed; all is purged.
        A purge drops records in flight too, and every partition rewinds. In
        exactly-once mode the next owner fences our transactions instead."""
        if self._exactly_once is not None or self._producer is None or not len(self._producer):
            return
        target = self.flow.target.alias
        if lost:
            why = f"the assignment was lost with {len(self._producer)} records not acknowledged"
        else:
            bound = min(_FLUSH_MAX_S, self._bounds.wait)
            remaining = self._flush_target(bound)
            if not remaining:
                return
            why = f"{remaining} records still unacknowledged by {target!r} after {bound:.0f} s"
        self._rewind_all(
            f"{why}; dropped, so none lands after the partitions' next owner started",
            in_flight=True,
        )
        self._producer.poll(0)  # serve the purged records' reports

    def _flush_target(self, timeout: float) -> int:
        """`flush` of the target producer (the records it still holds); one that
        failed fatally meanwhile is replaced, and the task stops (`_on_producer_fatal`:
        what it held never lands, so the partitions resume from the target tail)."""
        try:
            return self._producer.flush(timeout)
        except KafkaException as exc:
            if not is_fatal(kafka_error(exc)):
                raise
            self._on_producer_fatal(kafka_error(exc))
            return 0

    def _ensure_internal_topics(self) -> None:
        """MM2's offset-syncs topic (on the cluster offset-syncs.topic.location names) and
        heartbeats topic (on the source)."""
        flow = self.flow
        ensure_compacted_topic(
            flow.offset_syncs_cluster,
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
                self.flow.name, reason(exc), self.flow.refresh_topics_interval_seconds,
            )  # fmt: skip
            return
        changed = {t: n for t, n in current.items() if self._topics.get(t) != n}
        self._update_size_limits(report.max_message_bytes)
        if changed:
            log.info("flow %s: topics changed: %s", self.flow.name, changed)
            self._topics = current
            self._subscribe()

    def _sync_topic_configs(self) -> None:
        """Sync the configs of the replicated topics' remote topics (on
        `sync.topic.configs.interval.seconds`, whatever the topic refresh does). A
        cluster that does not answer only puts that off until the next sync."""
        try:
            report = self.topic_sync.sync_configs(self._topics)
        except ConfigError:
            raise
        except (KafkaException, ReplicatorError) as exc:
            log.warning(
                "flow %s: topic configs not synced this time (%s); next try in %d s",
                self.flow.name, reason(exc), self.flow.sync_topic_configs_interval_seconds,
            )  # fmt: skip
            return
        self._update_size_limits(report.max_message_bytes)

    def _shutdown(self) -> None:
        # Closing the consumer revokes its partitions (flush, final offset syncs,
        # "revoked" status); only then are the producers flushed for the last time.
        if self._consumer is not None:
            self._consumer.close()
        if self._exactly_once is not None:
            self._exactly_once.close_all()
        if self._reporter.ready:
            self._publish_status("failed" if self._fatal else "stopped")
        if self._producer is not None:
            self._flush_target(30)
        if self._source_producer is not None:
            self._source_producer.flush(30)
        if self._resume_points is not None:
            self._resume_points.close()
