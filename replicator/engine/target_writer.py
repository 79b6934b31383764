"""Writing replicas to the target: the target producer's life, and the runs produced
through it.

`TargetWriter` is the one owner of the default mode's target producer (made with the
settings replication's guarantees rest on, `replica_producers`; made anew when the
remote topics' size limits no longer fit it, and when a refused batch spent it), of
the exactly-once mode's transactional producers (`ExactlyOnce`, with those settings),
and of the flow's `RecordLimits` (the remote topics' size limits and the records held
at an oversized record for a config sync). It writes a run of one partition's records
(`write_run`) in the Python loop, the reference, through confluent-kafka's public
`Producer.produce`; the runs' delivery reports are `Deliveries`'. Records that did
not reach the target within `DeliveryBounds` rewind every partition (`rewind_all`); a
fatal producer error replaces the producer and stops the task through the `fail`
callback.

What the loop and rebalancing call is `ReplicaWriter` (`replica_writer.py`), the
interface the compiled Mover sits behind on the compiled path
(`mover_writer.MoverWriter`; docs/dataplane.md, "Proposed interface for the engine
(part 2), as built").
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence

from confluent_kafka import KafkaError, KafkaException

from replicator import metrics
from replicator.config.model import FlowConfig
from replicator.engine.deliveries import Deliveries, RunReport
from replicator.engine.exactly_once import ExactlyOnce
from replicator.engine.headers import OFFSET_HEADER, TOPIC_HEADER, Headers, encode_offset
from replicator.engine.held_records import HeldTopics
from replicator.engine.kafka_errors import reason
from replicator.engine.offset_syncs import OffsetSyncWriter
from replicator.engine.partition import PartitionTracker
from replicator.engine.partitions import Partitions
from replicator.engine.record_limits import RecordLimits
from replicator.engine.replica_producers import DeliveryBounds
from replicator.engine.replica_writer import ConsumedRecord
from replicator.engine.reporting import TaskReporter
from replicator.engine.rewrite import RecordRewrite
from replicator.engine.size_limits import Oversized
from replicator.kafka.clients import Producer
from replicator.kafka.errors import is_fatal, kafka_error

log = logging.getLogger(__name__)

#: How long a failed target producer's last delivery reports are served for.
_SPENT_REPORTS_S = 5.0

# confluent-kafka's `Producer.produce` is called as documented: topic, value, key and
# partition by position (its documented order), the rest by keyword. Its
# implementation's keyword list puts a `callback` alias before `on_delivery`, so passing
# timestamp and headers by position would depend on that undocumented order.


def run_end(messages: Sequence[ConsumedRecord], start: int, key: tuple[str, int]) -> int:
    """The index of the first record at or after `start` that is not of partition `key`."""
    topic, partition = key
    end = len(messages)
    while start < end:
        message = messages[start]
        if message.partition() != partition or message.topic() != topic:
            return start
        start += 1
    return end


def _producer(tracker: PartitionTracker) -> Producer:
    """The producer writing `tracker`'s partition (set when the writer takes it)."""
    producer = tracker.producer
    if producer is None:
        raise RuntimeError(
            f"{tracker.topic}[{tracker.partition}]: written before it has a producer"
        )
    return producer


class TargetWriter:
    """Writes one flow's replicas to the target (see the module's description); the
    `ReplicaWriter` of the Python loop."""

    def __init__(
        self,
        flow: FlowConfig,
        partitions: Partitions,
        syncs: OffsetSyncWriter,
        reporter: TaskReporter,
        *,
        topics: HeldTopics,
        fail: Callable[..., None],
        stopping: threading.Event,
        last_poll: Callable[[], float],
        bounds: DeliveryBounds | None = None,
        make_producer: Callable[[dict[str, object]], Producer] = Producer,
    ) -> None:
        self.flow = flow
        self._partitions = partitions
        self._reporter = reporter
        self._topics = topics
        self._rewrite = RecordRewrite(flow.source.alias, flow.target.alias, flow.policy)
        #: Stops the task: (message, access=True for a refused access).
        self._fail = fail
        self._stopping = stopping
        #: When the loop last polled the source consumer (time.monotonic).
        self._last_poll = last_poll
        #: How long the target may hold records (see DeliveryBounds).
        self.bounds = bounds or DeliveryBounds.of(flow)
        #: The remote topics' size limits, and the partitions held at an oversized record.
        self._limits = RecordLimits(flow, topics, partitions, reporter)
        #: Makes the default mode's producer from its settings (a client of
        #: `replicator.kafka.clients`; the unit tests give a fake).
        self._new_producer = make_producer
        self._producer: Producer | None = None
        #: A batch the target refused trips the gapless guarantee: the target producer
        #: is failed, or fails as soon as librdkafka raises it (`replace_spent`).
        self._spent = False
        #: Default mode, after records did not reach the target: the producer still
        #: settles what it had in flight, and no tail is final before it is done.
        self._draining = False
        self.deliveries = Deliveries(
            flow, partitions, syncs, rewind_all=self.rewind_all, refused=self._refused
        )
        self._exactly_once: ExactlyOnce | None = None
        if flow.exactly_once:
            self._exactly_once = ExactlyOnce(flow, self.transactional_config, syncs, partitions)

    # -- the producers -------------------------------------------------------------------

    @property
    def producer(self) -> Producer:
        """The default mode's target producer (in exactly-once mode it writes status)."""
        assert self._producer is not None, "TargetWriter.start was not called"
        return self._producer

    @property
    def exactly_once(self) -> ExactlyOnce | None:
        """The partitions' transactions (exactly-once mode), else None."""
        return self._exactly_once

    @property
    def spent(self) -> bool:
        return self._spent

    @property
    def draining(self) -> bool:
        """Records did not reach the target: the producer settles what it had in flight."""
        return self._draining

    def start(self, limits: dict[str, int], producer: Producer | None = None) -> None:
        """Make the target producer for the remote topics' `limits` (max.message.bytes
        by remote topic); `producer`: use that one instead (tests, benchmarks)."""
        self._limits.update(limits)
        # `is None`: a producer with nothing queued is falsy (its `len` is 0).
        self._producer = producer if producer is not None else self._make_producer()
        self._reporter.write_with(self._producer)
        deadline = self.bounds.deadline
        log.info(
            "flow %s: records unacknowledged after message.timeout.ms (%s) rewind the "
            "partitions to the target tail (the engine keeps that timeout: its producer never "
            "times a record out); a wait for the target lasts %.1f s at most, below "
            "max.poll.interval.ms",
            self.flow.name, "0: never" if deadline is None else f"{deadline:g} s",
            self.bounds.wait,
        )  # fmt: skip

    def transactional_config(self, transactional_id: str) -> dict[str, object]:
        return {**self._limits.producer_config(), "transactional.id": transactional_id}

    def _make_producer(self) -> Producer:
        self._limits.made()
        # Transactional producers get no error_cb: being fenced is fatal for them and
        # means "partition moved", which the transaction outcome handles.
        return self._new_producer(
            {**self._limits.gapless_config(), "error_cb": self._on_producer_error}
        )

    def _on_producer_error(self, error: KafkaError) -> None:
        """A producer error that is not fatal (confluent-kafka raises fatal ones from
        the call that serves them instead: `on_fatal`)."""
        log.warning("flow %s: producer: %s", self.flow.name, error.str())

    def on_fatal(self, error: KafkaError) -> None:
        """The target producer failed fatally (e.g. the gapless guarantee tripped by
        a batch the target refused) and takes nothing more: it is replaced, and the
        task stops. The refused batch's delivery reports, served first, say which
        topic and why (a missing WRITE ACL is named there)."""
        self.replace_spent()
        metrics.ERRORS.labels(self.flow.name, "delivery").inc()
        self._fail(
            f"flow {self.flow.name}: the producer to {self.flow.target.alias!r} failed "
            f"fatally: {error.str()}. Replication of the flow is stopped; fix the cause "
            "and restart, it resumes from the target tail"
        )

    def _refused(self, message: str, access: bool) -> None:
        """Default mode: the target rejected a batch; the producer is spent (see
        `replace_spent`) and the task stops with `message`."""
        self._spent = True
        self._fail(message, access=access)

    def replace_spent(self) -> None:
        """A new target producer for the status written while the task stops: the
        old one failed fatally, or will as soon as the refusal of a batch reaches it
        (its reports can be served before its fatal error is raised; a status record
        written through it then raised "_FATAL: Unable to produce message" from the
        shutdown, and the task's own message was lost). The old one's reports are
        served first, for `_SPENT_REPORTS_S` at most: the refused batch's name the
        topic and the cause (a poll raises the fatal error before serving them)."""
        spent = self.producer
        deadline = time.monotonic() + _SPENT_REPORTS_S
        while len(spent) and time.monotonic() < deadline:
            try:
                spent.poll(0.1)
            except KafkaException as exc:  # its fatal error; the next poll serves on
                log.debug("flow %s: the failed producer: %s", self.flow.name, reason(exc))
        self._spent = False
        self._producer = self._make_producer()
        self._reporter.write_with(self._producer)
        if self._exactly_once is None:
            for tracker in self._partitions.values():
                tracker.producer = self._producer

    def for_partition(self, tracker: PartitionTracker) -> Producer:
        """The producer the partition writes with from now on: the shared one, or
        (exactly-once) its transactional one, every earlier owner fenced first.
        Raises TransactionsRefused when the target does not allow it."""
        if self._exactly_once is None:
            tracker.producer = self.producer
        else:
            tracker.producer = self._exactly_once.open(tracker)
        return tracker.producer

    def serve(self) -> None:
        """Serve the target producer's delivery reports that are due."""
        self.producer.poll(0)

    def know(self, remotes: Iterable[str], timeout: float) -> None:
        """Have the target producer learn the `remotes` topics' partitions (it must
        before their first record); raises KafkaException when the target does not
        answer within `timeout` seconds. Several topics are asked in one request for
        every topic of the cluster (a worker given thousands of partitions asks once,
        not once per topic)."""
        topics = sorted(set(remotes))
        if len(topics) == 1:
            self.producer.list_topics(topics[0], timeout=timeout)
        elif topics:
            self.producer.list_topics(timeout=timeout)

    def resumed_at(self, tracker: PartitionTracker, target_end: int) -> None:
        """The partition resumes, its remote partition's high watermark `target_end`:
        its next replica lands there or later (see `Deliveries`)."""
        self.deliveries.resumed_at(tracker, target_end)

    def forget(self, key: tuple[str, int]) -> None:
        """The partition was given up: nothing of it is written any more."""
        self.deliveries.forget(key)
        if self._exactly_once is not None:
            self._exactly_once.close(key)

    # -- size limits ---------------------------------------------------------------------

    def record_limit(self, remote: str) -> int:
        """What key, value and headers of one record may add up to on `remote`."""
        return self._limits.record_limit(remote)

    def update_size_limits(self, limits: dict[str, int]) -> None:
        """New max.message.bytes of remote topics: the partitions' limits follow, and
        so does the target producer, made anew when its limits no longer fit (a topic
        with a larger limit appeared, or one with a smaller limit)."""
        if not self._limits.update(limits) or self._producer is None:
            return
        # The new producer must not overtake the old one's records. If the target does
        # not take them, the partitions rewind and the limits apply at the next sync.
        if not self._flush_in_flight():
            return
        self._producer = self._make_producer()
        self._reporter.write_with(self._producer)
        for tracker in list(self._partitions.values()):
            if self._exactly_once is None:
                tracker.producer = self._producer
            elif not tracker.resuming:
                # Its transactional producer is made anew, with the new limits, when it
                # resumes (between batches: no transaction is open).
                self._exactly_once.close(tracker.key)
                self._partitions.rewind(tracker)
        log.info(
            "flow %s: target producer recreated for the remote topics' limits "
            "(message.max.bytes=%d, batch.size=%d)",
            self.flow.name,
            *self._limits.made_for,
        )

    def _hold_or_refuse(self, tracker: PartitionTracker, offset: int, size: int) -> None:
        """A record too large for its remote topic: hold the partition for a config
        sync of the topic (after this batch), skip the record or stop at it."""
        verdict = self._limits.verdict(tracker, offset, size)
        if verdict.action is Oversized.HOLD:
            tracker.next_offset = offset
            self._partitions.pause(tracker)
        elif verdict.action is Oversized.SKIP:
            self._limits.skip(tracker, offset, verdict)
        else:
            tracker.next_offset = offset
            self._partitions.halt(tracker, verdict.message)

    def resync_held(self) -> None:
        self._limits.resync(self.update_size_limits)

    # -- records in flight ---------------------------------------------------------------

    def rewind_all(self, why: str, *, in_flight: bool = False) -> None:
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
        self.producer.purge(in_queue=True, in_flight=in_flight)
        self.deliveries.clear()
        self._partitions.rewind_all()

    def settled(self) -> bool:
        """Whether a partition may resume from the target tail now: False while the
        producer still has records in flight after a rewind (they may yet land, so no
        tail is final)."""
        if self._draining:
            if len(self.producer):
                return False
            self._draining = False
        return True

    def in_flight(self) -> set[tuple[str, int]]:
        """The partitions with runs the target has not acknowledged yet (default mode)."""
        return self.deliveries.in_flight()

    def check_deadline(self) -> None:
        """Rewind every partition when a run outlived the user's message timeout."""
        self.deliveries.check_deadline(self.bounds.deadline)

    def _flush_in_flight(self) -> bool:
        """Wait until the target acknowledged every record produced so far. False if
        it did not within the flush bound (it is away): every partition then rewinds
        to the target tail. In exactly-once mode records travel in transactions and
        this producer carries status only, so there is nothing to wait for."""
        if self._exactly_once is not None:
            return True
        if self._draining:
            return False  # rewinding already: what is in flight no longer counts
        bound = self.bounds.flush
        remaining = self.flush(bound)
        if remaining:
            target = self.flow.target.alias
            self.rewind_all(
                f"{remaining} records still unacknowledged by {target!r} after {bound:.0f} s"
            )
            return False
        return True

    def release(self, lost: bool) -> None:
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
            bound = self.bounds.flush
            remaining = self.flush(bound)
            if not remaining:
                return
            why = f"{remaining} records still unacknowledged by {target!r} after {bound:.0f} s"
        self.rewind_all(
            f"{why}; dropped, so none lands after the partitions' next owner started",
            in_flight=True,
        )
        self.producer.poll(0)  # serve the purged records' reports

    def flush(self, timeout: float) -> int:
        """`flush` of the target producer (the records it still holds); one that
        failed fatally meanwhile is replaced, and the task stops (`on_fatal`: what it
        held never lands, so the partitions resume from the target tail)."""
        try:
            return self.producer.flush(timeout)
        except KafkaException as exc:
            if not is_fatal(kafka_error(exc)):
                raise
            self.on_fatal(kafka_error(exc))
            return 0

    def close_transactions(self) -> None:
        """Exactly-once mode: close every transactional producer (at shutdown)."""
        if self._exactly_once is not None:
            self._exactly_once.close_all()

    # -- the hot path --------------------------------------------------------------------

    def write_run(
        self, tracker: PartitionTracker, messages: Sequence[ConsumedRecord], start: int
    ) -> int:
        """Rewrite and produce the run of `tracker`'s records that starts at
        `messages[start]`, up to a record a policy holds or stops the partition at;
        returns the index of the next run's first record.

        Only the run's last replica carries a delivery report: the producer is
        idempotent with the gapless guarantee, so its success means every earlier
        record of the run was written, in order, and any failure fails the rest of the
        run too. So each replica is produced when the next one is made (or the run
        ends), once it is known whether it is the last.

        With one task the loop is what limits the rate (bench/hot_loop.py measures
        it), so it is one pass, with the partition's state in locals and a record
        without headers of its own rewritten here, not by a call."""
        topic, partition = key = tracker.key
        rewrite_headers, source_entry = self._rewrite.headers, self._rewrite.source_entry
        topic_entry = (TOPIC_HEADER, topic.encode())
        # confluent-kafka's stubs type a record's headers as a list of a wider pair than
        # ours, which a list (invariant) cannot meet: the bound method is called as is.
        produce: Callable[..., None] = _producer(tracker).produce
        remote, limit = tracker.remote, tracker.size.limit
        # The replica made, not yet produced (none while p_headers is None).
        p_key = p_value = p_headers = None
        index, produced, size_total, first_offset, last_offset = start, 0, 0, -1, -1
        next_offset, count, p_timestamp = tracker.next_offset, len(messages), 0
        while index < count:
            message = messages[index]
            if (
                message.partition() != partition
                or message.topic() != topic
                or message.error() is not None
            ):
                break  # a consume error starts a run of its own, in the task's loop
            index += 1
            offset, own = message.offset(), message.headers()
            if own is None:  # the common case
                headers: Headers | None = [
                    source_entry, (OFFSET_HEADER, encode_offset(offset)), topic_entry
                ]  # fmt: skip
                size = 0
            else:
                headers, size = rewrite_headers(own, offset, topic, partition)
            value, record_key = message.value(), message.key()
            size += (len(value) if value else 0) + (len(record_key) if record_key else 0)
            if headers is None or size > limit:
                tracker.next_offset = next_offset
                if not self._not_replicated(tracker, message, headers, size):
                    index = run_end(messages, index, key)  # the rest waits, or is dropped
                    break
                next_offset = tracker.next_offset
                continue
            if p_headers is not None:
                try:
                    produce(
                        remote, p_value, p_key, partition, timestamp=p_timestamp, headers=p_headers
                    )
                except BufferError:
                    if not self._produce(tracker, p_key, p_value, p_timestamp, p_headers):
                        return run_end(messages, index, key)
                except KafkaException as exc:
                    self.deliveries.produce_refused(tracker, last_offset, exc)
                    return run_end(messages, index, key)
            p_key, p_value, p_headers = record_key, value, headers
            p_timestamp = message.timestamp()[1]
            if first_offset < 0:
                first_offset = offset
            last_offset, next_offset = offset, offset + 1
            produced += 1
            size_total += size
        tracker.next_offset = next_offset
        if p_headers is not None:
            report = self.deliveries.run(tracker, first_offset, last_offset, produced)
            self._produce_last(tracker, (p_key, p_value, p_timestamp, p_headers), report)
            tracker.counters.replicated_bytes += size_total if report.sent else 0
        return index

    def _produce_last(
        self,
        tracker: PartitionTracker,
        record: tuple[bytes | None, bytes | None, int, Headers],
        report: RunReport,
    ) -> None:
        """Produce the last record of a run, with the run's delivery report; the
        report waits among the runs in flight once it is produced (`report.sent`)."""
        try:
            report.sent = self._produce(tracker, *record, on_delivery=report)
        except KafkaException as exc:
            self.deliveries.produce_refused(tracker, report.last_source, exc)
            return
        if report.sent:
            self.deliveries.sent(report)

    def _not_replicated(
        self,
        tracker: PartitionTracker,
        message: ConsumedRecord,
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
            self._hold_or_refuse(tracker, message.offset(), size)
        return not (tracker.stopped or tracker.size.held)

    def _produce(
        self,
        tracker: PartitionTracker,
        record_key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Headers,
        *,
        on_delivery: RunReport | None = None,
    ) -> bool:
        """Produce a replica to the partition of `tracker`'s remote topic; while the
        producer's queue is full, serve delivery reports until it takes it. False if
        the partition rewound meanwhile (records did not reach the target) or the task
        stops: the rest of the run is not produced."""
        epoch = tracker.epoch
        produce: Callable[..., None] = _producer(tracker).produce  # see `write_run`
        while True:
            try:
                produce(
                    tracker.remote, value, record_key, tracker.partition,
                    on_delivery=on_delivery, timestamp=timestamp, headers=headers,
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
        _producer(tracker).poll(0.05)
        if tracker.epoch != epoch or self._stopping.is_set():
            return False
        waited = time.monotonic() - self._last_poll()
        if waited < self.bounds.wait:
            return True
        why = (
            f"{self.flow.target.alias!r} took no record of {tracker.topic}[{tracker.partition}] "
            f"from offset {tracker.next_offset} for {waited:.0f} s (the producer's queue is full)"
        )
        if self._exactly_once is None:
            self.rewind_all(why)
        else:
            log.warning(
                "flow %s: %s; the partition resumes from the target tail", self.flow.name, why
            )
            self._partitions.rewind(tracker)
        return False
