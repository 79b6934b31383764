"""What a replication task tells operators: each partition's and the worker's status
on the target's status topic (every few seconds, and at once when a failure policy
fires, so a stopped partition shows without waiting), and per-second metrics."""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Iterable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, Protocol, cast

from confluent_kafka import TopicPartition

from replicator import metrics
from replicator.engine.partition import PartitionTracker
from replicator.engine.rewrite import LOOP, LOOP_LEGACY
from replicator.engine.status import PartitionStatus, StatusWriter, WorkerStatus
from replicator.kafka.clients import Producer

log = logging.getLogger(__name__)

#: What a skipped record is, by reason, for the log line that names the first one.
_SKIP_WHY = {
    LOOP: "it is our copy of a record that came from the target, on this topic "
    "(its __dr_src/__dr_topic headers): replicating it back would loop",
    LOOP_LEGACY: "its headers, written by a replicator older than __dr_topic, say it "
    "came from the target, and under this replication policy the topic's name cannot "
    "tell whether it is our copy or an application's record that forwarded them; it is "
    "treated as a loop, as before. If an application wrote it, produce it again (the "
    "replicator now writes __dr_topic, and such records are copied)",
}


_PARTITION_GAUGES = (metrics.LAG, metrics.STOPPED, metrics.RECORD_AGE, metrics.ACKED_TIMESTAMP)


class Watermarks(Protocol):
    """What gives partitions' lag: a consumer's cached watermarks."""

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float = ..., cached: bool = ...
    ) -> tuple[int, int] | None: ...
    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]: ...


@dataclass
class _Gauges:
    """One series' figures, summed or maxed over the partitions it covers."""

    lag: int = 0
    stopped: int = 0
    acked_ms: int = 0
    age: float | None = None  # None: nothing new acknowledged since the last publish
    records: int = 0  # replicated since the last publish
    bytes: int = 0


class TaskReporter:
    """Publishes the status and metrics of one worker of a flow."""

    def __init__(self, flow: str, worker_id: str, started_ms: int) -> None:
        self.flow = flow
        self.worker_id = worker_id
        self.started_ms = started_ms
        self._producer: Producer | None = None
        self._status: StatusWriter | None = None
        #: Which data path the records take, as `data_path.DataPath.describe` says it.
        self.data_path: str | None = None
        self._consumer: Watermarks | None = None
        #: The partitions with records the target has not acknowledged yet.
        self._in_flight: Callable[[], set[tuple[str, int]]] = set
        #: Skipped records per partition: reason -> [count, first source offset].
        self._skips: dict[tuple[str, int], dict[str, list[int]]] = {}
        #: The label sets of the gauges `publish_metrics` set last.
        self._published: set[tuple[str, str, str]] = set()
        #: Each series' child of each metric family, looked up once (`labels()`
        #: takes a lock and hashes the values every call: at 5,000 partitions its
        #: 15,000 calls were a third of each second's metrics).
        self._children: dict[tuple[object, tuple[str, str, str]], Any] = {}

    @property
    def ready(self) -> bool:
        return self._status is not None

    def write_with(self, producer: Producer) -> None:
        """Publish status with `producer` (the target producer, made anew when the
        remote topics' limits change)."""
        self._producer = producer
        self._status = StatusWriter(producer)

    def read_lag_with(
        self,
        consumer: Watermarks,
        in_flight: Callable[[], set[tuple[str, int]]] = set,
    ) -> None:
        """`consumer`'s cached high watermarks give each partition's lag (on the
        compiled path, `MoverFetch`: the Mover's); `in_flight` names the partitions
        with records the target has not acknowledged yet (the writer's)."""
        self._consumer = consumer
        self._in_flight = in_flight

    def lag(
        self, tracker: PartitionTracker, in_flight: set[tuple[str, int]] | None = None
    ) -> int | None:
        """Source offsets not replicated yet: the partition's high watermark less where
        it stands (`_read_through`). `in_flight`: the writer's partitions with records
        unacknowledged, if the caller asked it already (once for many partitions)."""
        tp = TopicPartition(tracker.topic, tracker.partition)
        # Bound by read_lag_with before any lag is asked; unpacked as it comes.
        consumer = cast(Watermarks, self._consumer)
        _, high = cast("tuple[int, int | None]", consumer.get_watermark_offsets(tp, cached=True))
        if high is None or high < 0 or tracker.next_offset < 0:
            return None
        if in_flight is None:
            in_flight = self._in_flight()
        return max(0, high - self._read_through(tracker, tp, tracker.key in in_flight))

    def _read_through(self, tracker: PartitionTracker, tp: TopicPartition, sending: bool) -> int:
        """Where every record of the partition before is replicated. While records of
        it are in flight (`sending`), after the last one the target acknowledged: a
        record read or sent is not on the target yet (a status said lag 0 and 0
        replicated while a partition's 100 records waited for their acknowledgement,
        and an unplanned failover counts what was lost from the last status). Else its
        next offset, or past it the consumer's position while it replicates (not
        waiting, stopped or held at a record). The offsets between are control records
        (transaction markers) and aborted records, which the consumer never hands out:
        without them, a transactional partition copied to its end showed a lag of one
        (its commit marker), and an unplanned failover, which counts what was lost from
        the last status, counted that marker as a lost record."""
        if sending and tracker.acked_next >= 0:
            return tracker.acked_next
        if tracker.resuming or tracker.stopped or tracker.size.held:
            return tracker.next_offset
        (position,) = cast(Watermarks, self._consumer).position([tp])
        return max(tracker.next_offset, position.offset)

    def skipped(self, tracker: PartitionTracker, offset: int, reason: str, count: int = 1) -> None:
        """`count` records from `offset` of `tracker`'s partition are not replicated, for
        `reason`: counted in the metric and the partition's status, and the first of
        each reason on the partition logged (never silent, never a line per record)."""
        metrics.SKIPPED.labels(*tracker.labels, reason).inc(count)
        skips = self._skips.setdefault(tracker.key, {})
        seen = skips.get(reason)
        if seen is not None:
            seen[0] += count
            return
        skips[reason] = [count, offset]
        log.warning(
            "flow %s: %s[%d] offset %d is not replicated: %s. Further ones on this "
            "partition are counted in replicator_skipped_records_total{reason=%r} and "
            "shown by `replicator status`",
            self.flow, tracker.topic, tracker.partition, offset,
            _SKIP_WHY.get(reason, reason), reason,
        )  # fmt: skip

    def _partition_status(self, tracker: PartitionTracker, lag: int | None) -> PartitionStatus:
        status = tracker.status(lag)
        status.skipped_by = self._skips.get(tracker.key, {})
        return status

    def partition(self, tracker: PartitionTracker, lag: int | None) -> None:
        """Publish one partition's status now (a policy fired: operators see it at once)."""
        cast(StatusWriter, self._status).publish(self._partition_status(tracker, lag))
        cast(Producer, self._producer).poll(0)

    def revoked(self, tracker: PartitionTracker) -> None:
        """The partition was taken from this worker: its last status says so (unless
        it is stopped, which still needs an operator), its counters take what it
        replicated, and its next owner reports on it from now on, so its state metric
        goes (a stale 1 would alert forever)."""
        status = self._partition_status(tracker, lag=None)
        if not tracker.stopped:
            status.state = "revoked"
        cast(StatusWriter, self._status).publish(status)
        # What it replicated since the last per-second publish is counted now: its
        # tracker is forgotten next (a partition revoked within a second of its
        # assignment would otherwise have copied records no counter shows).
        self._count(tracker.labels, tracker.counters.take())
        # Its gauges go with the next `publish_metrics` (its next owner reports on
        # it from now on: a stale "stopped" would alert forever).

    def publish_metrics(self, trackers: Iterable[PartitionTracker]) -> None:
        """Per-second metrics: what was replicated since the last call, and the gauges
        of every series (a topic's, or a partition's with `metrics.partition.labels`):
        lag summed, stopped partitions counted, ages of the newest acknowledged record.
        Each series' metrics are set once, its partitions' figures summed first.
        Series of partitions no longer ours are removed."""
        now_ms = time.time() * 1000
        gauges: dict[tuple[str, str, str], _Gauges] = {}
        in_flight = self._in_flight()
        for tracker in trackers:
            counters = tracker.counters
            series = gauges.setdefault(tracker.labels, _Gauges())
            series.lag += self.lag(tracker, in_flight) or 0
            series.stopped += 1 if tracker.stopped else 0
            series.acked_ms = max(series.acked_ms, counters.acked_timestamp_ms)
            taken = counters.take()
            if taken is not None:
                series.records += taken[0]
                series.bytes += taken[1]
                age = max(0.0, (now_ms - counters.acked_timestamp_ms) / 1000)
                series.age = age if series.age is None else max(series.age, age)
        child = self._child
        for labels, series in gauges.items():
            if series.records:
                self._count(labels, (series.records, series.bytes))
            child(metrics.LAG, labels).set(series.lag)
            child(metrics.STOPPED, labels).set(series.stopped)
            if series.age is not None:
                child(metrics.RECORD_AGE, labels).set(series.age)
            if series.acked_ms:
                child(metrics.ACKED_TIMESTAMP, labels).set(series.acked_ms / 1000)
        for labels in self._published - gauges.keys():
            for family in _PARTITION_GAUGES:
                family.remove(*labels)  # a series never set is no error
                self._children.pop((family, labels), None)
        self._published = set(gauges)

    def _count(self, labels: tuple[str, str, str], taken: tuple[int, int] | None) -> None:
        """Add `taken` (records, bytes replicated) to the series' counters."""
        if taken is not None:
            self._child(metrics.RECORDS, labels).inc(taken[0])
            self._child(metrics.BYTES, labels).inc(taken[1])

    def _child(self, family: Any, labels: tuple[str, str, str]) -> Any:
        """`family.labels(*labels)`, looked up once per series."""
        child = self._children.get((family, labels))
        if child is None:
            child = self._children[(family, labels)] = family.labels(*labels)
        return child

    def running(self, running: bool, stopped_on_purpose: bool = False) -> None:
        """The worker's loop started (True) or ended (False). A loop stopped on purpose
        has no series: 0 means a loop that failed (health checks read it so)."""
        if stopped_on_purpose:
            with suppress(KeyError):
                metrics.WORKER_RUNNING.remove(self.flow, self.worker_id)
            return
        metrics.WORKER_RUNNING.labels(self.flow, self.worker_id).set(int(running))

    def worker(
        self,
        state: str,
        trackers: Iterable[PartitionTracker],
        topics: Iterable[str],
        error: str | None,
    ) -> None:
        """Publish every partition's status and the worker's (`state`: running,
        stopped or failed, with the `error` that failed it)."""
        count = 0
        in_flight = self._in_flight()
        for tracker in trackers:
            cast(StatusWriter, self._status).publish(
                self._partition_status(tracker, self.lag(tracker, in_flight))
            )
            count += 1
        cast(StatusWriter, self._status).publish(
            WorkerStatus(
                flow=self.flow,
                worker=self.worker_id,
                state=state,
                host=socket.gethostname(),
                pid=os.getpid(),
                partitions=count,
                topics=sorted(topics),
                error=error,
                started_ms=self.started_ms,
                data_path=self.data_path,
            )
        )
        cast(Producer, self._producer).poll(0)
