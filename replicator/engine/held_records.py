"""Records too large for their remote topic, for both writers (the Python loop's
`TargetWriter` and the compiled path's `MoverWriter`): `oversized.record.policy` after
one config sync of the topic, the partitions held for that sync, and the sync itself.
How a writer holds a partition (pausing its fetch, or handing it back from the Mover)
stays the writer's."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from replicator import metrics
from replicator.config.model import FlowConfig
from replicator.engine.partition import PartitionTracker
from replicator.engine.partitions import Partitions
from replicator.engine.reporting import TaskReporter
from replicator.engine.size_limits import Oversized, OversizedRecords, OversizedVerdict

log = logging.getLogger(__name__)


class HeldTopics(Protocol):
    """The replicated topics, as the writer needs them for a held record's resync."""

    def counts(self, trackers: list[PartitionTracker]) -> dict[str, int]:
        """The partition counts of the topics of `trackers`."""

    def sync(self, topics: dict[str, int]) -> dict[str, int]:
        """Sync the remote topics of `topics`; their max.message.bytes."""


class HeldRecords:
    """The partitions stopped at an oversized record until their topic's configs are
    synced (the source topic's limit may have been raised: the record then fits)."""

    def __init__(
        self, flow: FlowConfig, topics: HeldTopics, partitions: Partitions, reporter: TaskReporter
    ) -> None:
        self._oversized = OversizedRecords(flow)
        self._topics = topics
        self._partitions = partitions
        self._reporter = reporter
        self._held: list[PartitionTracker] = []

    def verdict(self, tracker: PartitionTracker, offset: int, size: int) -> OversizedVerdict:
        """What to do with `tracker`'s record at `offset` of `size` bytes: HOLD (the
        partition is noted for the next `resync`: the writer stops reading it), SKIP
        or STOP (counted as an error)."""
        verdict = self._oversized.verdict(
            tracker.topic, tracker.partition, tracker.remote, tracker.size, offset=offset, size=size
        )
        if verdict.action is Oversized.HOLD:
            self._held.append(tracker)
        else:
            metrics.ERRORS.labels(tracker.flow, "record_too_large").inc()
        return verdict

    def skip(self, tracker: PartitionTracker, offset: int, verdict: OversizedVerdict) -> None:
        """oversized.record.policy=skip: the partition goes on after the record."""
        tracker.counters.skipped += 1
        tracker.next_offset = offset + 1
        metrics.SKIPPED.labels(*tracker.labels, "record_too_large").inc()
        log.warning("%s; skipped (oversized.record.policy=skip)", verdict.message)
        self._reporter.partition(tracker, self._reporter.lag(tracker))

    def resync(self, update_size_limits: Callable[[dict[str, int]], None]) -> None:
        """Sync the configs of the held partitions' topics, hand their limits to
        `update_size_limits`, and read those partitions again from the held record: it
        now fits, or its policy applies."""
        if not self._held:
            return
        held, self._held = self._held, []
        topics = self._topics.counts(held)
        self._oversized.resynced(topics)
        update_size_limits(self._topics.sync(topics))
        for tracker in held:
            tracker.size.held = False
        self._partitions.restart_fetch(*(t for t in held if self._partitions.is_current(t)))
