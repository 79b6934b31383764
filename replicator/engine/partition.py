"""One assigned source partition as the replication task keeps it: where it stands
(updated per record), what it did (counters, published per second), and its size
limit on the target. The offset syncs' state of a partition is the
`OffsetSyncWriter`'s, its transaction the `TransactionalWriters`'."""

from __future__ import annotations

from dataclasses import dataclass, field

from replicator import metrics
from replicator.engine.size_limits import SizeHold
from replicator.engine.status import PartitionStatus
from replicator.kafka.clients import Producer


@dataclass
class Counters:
    """What the partition did, for its status and the metrics."""

    replicated: int = 0
    replicated_bytes: int = 0
    skipped: int = 0
    lost: int = 0
    #: Timestamp of the last record the target acknowledged (its age is a metric).
    acked_timestamp_ms: int = 0
    #: What the metrics' counters were last given (they only take increments).
    published_records: int = 0
    published_bytes: int = 0

    def take(self) -> tuple[int, int] | None:
        """The records and bytes replicated since the last call, for the metrics'
        counters (which only take increments); None when there were none."""
        if self.replicated <= self.published_records:
            return None
        taken = (
            self.replicated - self.published_records,
            self.replicated_bytes - self.published_bytes,
        )
        self.published_records = self.replicated
        self.published_bytes = self.replicated_bytes
        return taken


@dataclass
class PartitionTracker:
    """Progress of one source partition."""

    flow: str
    topic: str
    partition: int
    remote: str
    size: SizeHold
    #: The source offset replication continues at (-1 until known).
    next_offset: int = -1
    #: Where to continue is not known yet: it is read from the target (its committed
    #: tail) on assignment, and again after records did not reach it. Paused meanwhile.
    resuming: bool = True
    #: Bumped at every rewind: delivery reports of records produced before are stale.
    epoch: int = 0
    #: Why a failure policy stopped the partition (it waits for an operator).
    stopped: str | None = None
    #: The producer writing this partition: shared, or its own in exactly-once mode.
    producer: Producer | None = None
    counters: Counters = field(default_factory=Counters)
    #: The source offset after the last record the target acknowledged (-1: none yet);
    #: what `source_commits` commits while later runs are in flight.
    acked_next: int = -1
    #: Metrics get a series per partition (`metrics.partition.labels`), not per topic.
    partition_labels: bool = False

    @property
    def key(self) -> tuple[str, int]:
        return self.topic, self.partition

    @property
    def labels(self) -> tuple[str, str, str]:
        """The partition's metric labels (see `metrics.partition_label`)."""
        return self.flow, self.topic, metrics.partition_label(self.partition, self.partition_labels)

    def status(self, lag: int | None) -> PartitionStatus:
        counters = self.counters
        return PartitionStatus(
            flow=self.flow,
            topic=self.topic,
            partition=self.partition,
            state="stopped" if self.stopped else "replicating",
            next_offset=self.next_offset if self.next_offset >= 0 else None,
            lag=lag,
            replicated=counters.replicated,
            skipped=counters.skipped,
            lost=counters.lost,
            error=self.stopped,
        )
