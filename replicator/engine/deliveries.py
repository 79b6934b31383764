"""The runs a task produced and the target has not acknowledged yet, and what each
run's one delivery report means.

Only a run's last replica carries a delivery report: the target producer is
idempotent with the gapless guarantee, so its success means every earlier record of
the run was written, in order. This part checks each report against where the
partition's previous run landed (fewer target offsets than records: some did not
land, and the run is never acknowledged), tells the offset-sync writer what was
acknowledged, keeps the user's message timeout as the engine's deadline for a run,
and decides what a failed delivery does: the partitions resume from the target tail
(the target was away), the partition stops (exactly-once, refused) or the flow stops
(default mode, refused: its one idempotent producer cannot go on past a gap).

It owns the runs in flight and, per partition, the target offset its next replica
takes at the earliest. What it does to partitions and to the producer goes through
the `Partitions` part and two callbacks of the target writer.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, cast

from confluent_kafka import KafkaError, KafkaException, Message

from replicator import metrics
from replicator.acls.principal import missing_acl
from replicator.config.model import FlowConfig
from replicator.engine.kafka_errors import REJECTED
from replicator.engine.partition import PartitionTracker
from replicator.engine.partitions import Partitions
from replicator.kafka.errors import is_fatal, kafka_error

log = logging.getLogger(__name__)

Key = tuple[str, int]


class Acknowledgements(Protocol):
    """What the offset-sync writer is told of an acknowledged run."""

    def acknowledged(
        self,
        key: Key,
        *,
        first_source: int,
        last_source: int,
        count: int,
        target_offset: int,
        timestamp_ms: int,
    ) -> None: ...


@dataclass(slots=True)
class RunReport:
    """The delivery report of a run of records of one partition: the producer calls
    it with the outcome of the run's last replica."""

    deliveries: Deliveries
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
        self.deliveries.delivered(self, error, message)


class Deliveries:
    """The runs in flight of one task, and their delivery reports."""

    def __init__(
        self,
        flow: FlowConfig,
        partitions: Partitions,
        syncs: Acknowledgements,
        *,
        rewind_all: Callable[[str], None],
        refused: Callable[[str, bool], None],
    ) -> None:
        self.flow = flow
        self._partitions = partitions
        self._syncs = syncs
        #: Default mode, records did not reach the target: every partition rewinds.
        self._rewind_all = rewind_all
        #: Default mode, the target rejected records: the producer is spent and the
        #: flow stops with the message (True: a refused access).
        self._refused = refused
        self._transactional = flow.exactly_once
        #: Default mode: the runs produced and not reported yet, oldest first.
        self._unreported: deque[RunReport] = deque()
        #: Per partition: the target offset its next replica takes at the earliest
        #: (what a run's report is checked against: `delivered`).
        self._target_next: dict[Key, int] = {}

    def run(self, tracker: PartitionTracker, first: int, last: int, count: int) -> RunReport:
        """The report of a run of `count` replicas of source offsets `first..last`."""
        return RunReport(self, tracker, first, last, count)

    def sent(self, report: RunReport) -> None:
        """The run's last replica was produced: its report waits until it comes."""
        self._unreported.append(report)

    def clear(self) -> None:
        """What is in flight no longer counts (the partitions rewound)."""
        self._unreported.clear()

    def resumed_at(self, tracker: PartitionTracker, target_end: int) -> None:
        """The partition resumes, its remote partition's high watermark `target_end`:
        its next replica lands there or later."""
        self._target_next[tracker.key] = target_end

    def forget(self, key: Key) -> None:
        self._target_next.pop(key, None)

    def in_flight(self) -> set[Key]:
        """The partitions with runs the target has not acknowledged yet (default mode)."""
        return {run.tracker.key for run in self._unreported if not run.reported}

    def check_deadline(self, deadline: float | None) -> None:
        """Default mode: a run the target has not acknowledged within `deadline`
        seconds, the user's message timeout (the engine's deadline, as the producer
        never times a record out: see DeliveryBounds; None: none) rewinds every
        partition, as a timed-out record did."""
        runs = self._unreported
        if self._transactional:
            runs.clear()  # transactions time out (and rewind) on their own
            return
        while runs and runs[0].reported:
            runs.popleft()
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

    def delivered(self, run: RunReport, error: KafkaError | None, message: Message) -> None:
        """The delivery report of `run`'s last replica."""
        run.reported = True
        tracker = run.tracker
        stale = run.epoch != tracker.epoch
        if stale or not self._partitions.is_current(tracker):
            return  # revoked, fenced or rewound while in flight: the target tail tells
        if error is not None:
            self.failed(run, error)
            return
        # The run's replicas take `count` offsets at least, up to its last one's
        # (records of others and transaction markers may take more): fewer means
        # some did not land, and the report must not acknowledge past them.
        key, target_offset = tracker.key, cast(int, message.offset())
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

    def produce_refused(self, tracker: PartitionTracker, offset: int, exc: KafkaException) -> None:
        """The produce call of source offset `offset` refused at once: librdkafka
        already knows the remote topic refuses it (no WRITE ACL, no such topic, too
        large), so it is handled as a rejected delivery. A fatal error or any other
        goes on to the loop."""
        error = kafka_error(exc)
        if is_fatal(error) or error.code() not in REJECTED:
            raise exc
        self.failed(RunReport(self, tracker, offset, offset, 1), error)

    def failed(self, run: RunReport, error: KafkaError) -> None:
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
        if not rejected and self._transactional:
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
        if self._transactional:
            self._partitions.halt(
                tracker,
                f"{problem}{error.str()}. The partition is stopped; fix the cause and "
                "restart, it resumes after the last committed record",
            )
            return
        self._refused(
            f"{problem}{error.str()}. Replication of the flow is stopped; fix the cause "
            "and restart, it resumes after the last record written",
            denied,
        )

    def _on_gap(self, run: RunReport, expected: int, target_offset: int) -> None:
        """A run's last replica landed at `target_offset`, closer to the previous
        acknowledged one than the run has records: some of them are not on the
        target. Never acknowledged: the partition stops, naming what to copy again.
        (Its status goes out with the next round: `halt` would poll the producer
        whose report this is, inside its own poll.)"""
        tracker = run.tracker
        metrics.ERRORS.labels(tracker.flow, "delivery_gap").inc()
        self._partitions.pause(tracker)
        self._partitions.stop(
            tracker,
            f"{tracker.topic}[{tracker.partition}] offsets {run.first_source}..{run.last_source}: "
            f"{run.count} replicas sent, but the last landed at offset {target_offset} of "
            f"{tracker.remote}[{tracker.partition}] with the run starting at offset "
            f"{expected} or later: {run.count - (target_offset + 1 - expected)} or more did "
            "not land. The partition is stopped and the run not acknowledged; reset the "
            f"flow's offset of the partition to {run.first_source} (or verify the copy) "
            "and restart",
        )
