"""What a replication task tells operators: each partition's and the worker's status
on the target's status topic (every few seconds, and at once when a failure policy
fires, so a stopped partition shows without waiting), and per-second metrics."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable

from confluent_kafka import TopicPartition

from replicator import metrics
from replicator.engine.partition import PartitionTracker
from replicator.engine.status import StatusWriter, WorkerStatus
from replicator.kafka.clients import Consumer, Producer


class TaskReporter:
    """Publishes the status and metrics of one worker of a flow."""

    def __init__(self, flow: str, worker_id: str, started_ms: int) -> None:
        self.flow = flow
        self.worker_id = worker_id
        self.started_ms = started_ms
        self._producer: Producer | None = None
        self._status: StatusWriter | None = None
        self._consumer: Consumer | None = None

    @property
    def ready(self) -> bool:
        return self._status is not None

    def write_with(self, producer: Producer) -> None:
        """Publish status with `producer` (the target producer, made anew when the
        remote topics' limits change)."""
        self._producer = producer
        self._status = StatusWriter(producer)

    def read_lag_with(self, consumer: Consumer) -> None:
        """`consumer`'s cached high watermarks give each partition's lag."""
        self._consumer = consumer

    def lag(self, tracker: PartitionTracker) -> int | None:
        _, high = self._consumer.get_watermark_offsets(
            TopicPartition(tracker.topic, tracker.partition), cached=True
        )
        if high is None or high < 0 or tracker.next_offset < 0:
            return None
        return max(0, high - tracker.next_offset)

    def partition(self, tracker: PartitionTracker, lag: int | None) -> None:
        """Publish one partition's status now (a policy fired: operators see it at once)."""
        self._status.publish(tracker.status(lag))
        self._producer.poll(0)

    def revoked(self, tracker: PartitionTracker) -> None:
        """The partition was taken from this worker: its last status says so (unless
        it is stopped, which still needs an operator), and its next owner reports on
        it from now on, so its state metric goes (a stale 1 would alert forever)."""
        status = tracker.status(lag=None)
        if not tracker.stopped:
            status.state = "revoked"
        self._status.publish(status)
        metrics.PARTITION_STATE.remove(*tracker.labels)

    def publish_metrics(self, trackers: Iterable[PartitionTracker]) -> None:
        """Per-second metrics: what was replicated since the last call, and the lag."""
        now_ms = time.time() * 1000
        for tracker in trackers:
            tracker.counters.publish(tracker.labels, now_ms)
            metrics.LAG.labels(*tracker.labels).set(self.lag(tracker) or 0)

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
        for tracker in trackers:
            self._status.publish(tracker.status(self.lag(tracker)))
            count += 1
        self._status.publish(
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
            )
        )
        self._producer.poll(0)
