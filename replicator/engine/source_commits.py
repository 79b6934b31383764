"""Source positions committed under the flow's consumer group, so the tools operators
already run (`kafka-consumer-groups.sh --describe`, Burrow, Kafka UIs) show how far
replication is behind each source partition.

Only for them: the engine never reads these offsets back. Where a partition resumes
is the target's tail (see `resume`), so a commit that is late, lost or refused costs
nothing but a stale lag figure. Commits are asynchronous and rate-limited (one
round every `COMMIT_EVERY_S`, only partitions that moved), and a position is never
past a record the target has not acknowledged:

- default mode: with runs of the partition still unacknowledged, the position after
  the last acknowledged run; with none, the partition's next offset (records skipped
  after it, loops for instance, were handled without being produced);
- exactly-once mode: the partition's next offset, as every batch's transactions are
  committed (or rolled back, rewinding the partition) before the task gets here. The
  offsets are not sent in the transactions: those run on the target, the group lives
  on the source, so there is nothing to commit twice.

Partitions that wait to resume or a failure policy stopped keep their last commit.
`replicator.commit.source.offsets = false` turns it off.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable
from typing import Literal, Protocol, cast

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from replicator import metrics
from replicator.config.model import ENGINE_COMMIT_METADATA
from replicator.engine.partition import PartitionTracker

log = logging.getLogger(__name__)

#: Seconds between commit rounds.
COMMIT_EVERY_S = 5.0


class Committer(Protocol):
    """What `SourceCommits` asks of the source consumer (the consumer itself, or the
    compiled path's `MoverFetch`, which hands the call to it)."""

    def commit(
        self, *, offsets: list[TopicPartition], asynchronous: Literal[True] = True
    ) -> None: ...


class SourceCommits:
    """Commits a worker's acknowledged source positions under its consumer group."""

    def __init__(
        self,
        flow: str,
        *,
        enabled: bool,
        transactional: bool,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`clock`: the wall clock rounds are spaced by (tests pass their own: patching
        the `time` module would stop the clock of every thread)."""
        self.flow = flow
        self._clock = clock
        #: The source consumer's group (set when the task makes its consumer).
        self.group = "?"
        self.enabled = enabled
        self.transactional = transactional
        self._committed: dict[tuple[str, int], int] = {}
        self._next_round = 0.0
        #: A failure is logged once until a commit succeeds again (counted each time).
        self._failing = False

    def position(
        self, tracker: PartitionTracker, unacknowledged: Collection[tuple[str, int]]
    ) -> int:
        """The offset to commit for `tracker`'s partition (-1: none yet). `unacknowledged`:
        the partitions with runs in flight (default mode)."""
        if tracker.resuming or tracker.stopped or tracker.next_offset < 0:
            return -1
        if not self.transactional and tracker.key in unacknowledged:
            return tracker.acked_next
        return tracker.next_offset

    def commit_due(
        self,
        consumer: Committer,
        trackers: Iterable[PartitionTracker],
        unacknowledged: Collection[tuple[str, int]],
        *,
        force: bool = False,
    ) -> None:
        """Commit the positions that moved since the last round, if a round is due
        (`force`: now, as partitions are given up)."""
        if not self.enabled:
            return
        now = self._clock()
        if not force and now < self._next_round:
            return
        self._next_round = now + COMMIT_EVERY_S
        offsets = []
        for tracker in trackers:
            position = self.position(tracker, unacknowledged)
            if position >= 0 and position != self._committed.get(tracker.key):
                offsets.append(
                    TopicPartition(
                        tracker.topic, tracker.partition, position, ENGINE_COMMIT_METADATA
                    )
                )
        if not offsets:
            return
        try:
            consumer.commit(offsets=offsets, asynchronous=True)
        except KafkaException as exc:  # raised at once: no group membership, closed
            self._failed(exc.args[0])
            return
        for tp in offsets:
            self._committed[(tp.topic, tp.partition)] = tp.offset

    def forget(self, keys: Iterable[tuple[str, int]]) -> None:
        """The partitions are no longer ours: their next owner commits them."""
        for key in keys:
            self._committed.pop(key, None)

    def on_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """The consumer's `on_commit` callback: count and log the outcome."""
        failed = [tp for tp in partitions if tp.error is not None]
        if error is None and not failed:
            metrics.SOURCE_COMMITS.labels(self.flow, "ok").inc()
            if self._failing:
                log.info(
                    "flow %s: source offsets committed again (group %s)", self.flow, self.group
                )
            self._failing = False
            return
        if error is not None and error.code() == KafkaError._NO_OFFSET:
            return  # nothing to commit: not a failure
        self._failed(cast(KafkaError, error or failed[0].error), failed or partitions)

    def _failed(self, error: KafkaError, partitions: list[TopicPartition] | None = None) -> None:
        metrics.SOURCE_COMMITS.labels(self.flow, "failed").inc()
        # A failed commit leaves the position uncommitted: the next round tries again.
        for tp in partitions or ():
            self._committed.pop((tp.topic, tp.partition), None)
        if self._failing:
            return
        self._failing = True
        which = (
            ", ".join(f"{tp.topic}[{tp.partition}]" for tp in partitions[:5]) if partitions else ""
        )
        log.warning(
            "flow %s: committing source offsets under group %s failed%s: %s; replication "
            "goes on (they only show lag to consumer-group tools) and the next round "
            "retries in %g s; if it persists, grant the principal READ on the group or set "
            "replicator.commit.source.offsets = false",
            self.flow, self.group, f" for {which}" if which else "", error.str(), COMMIT_EVERY_S,
        )  # fmt: skip
