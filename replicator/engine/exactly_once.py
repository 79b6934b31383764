"""Exactly-once commit handling: what the task does with each partition's transaction
(`transactions.TransactionalWriters` runs them). One transaction per partition and
consume batch; what committed gets its offset syncs, and a transaction that did not
commit decides the partition's fate: fenced, it belongs to another worker now;
refused, it stops, naming the grant it lacks; anything else, it resumes from the
committed tail once the target answers, however long that takes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Protocol

from confluent_kafka import KafkaError

from replicator import metrics
from replicator.config.model import FlowConfig
from replicator.engine.kafka_errors import reason
from replicator.engine.offset_syncs import Key, OffsetSyncWriter
from replicator.engine.partition import PartitionTracker
from replicator.engine.transactions import Outcome, Settled, TransactionalWriters
from replicator.kafka.clients import Producer
from replicator.listing import partitions_text

log = logging.getLogger(__name__)


class PartitionOwner(Protocol):
    """The task's side: what a transaction's outcome does to its partition."""

    def rewind(self, tracker: PartitionTracker) -> None:
        """Pause the partition until it resumes from the target tail."""

    def halt(self, tracker: PartitionTracker, message: str) -> None:
        """Stop the partition (paused) with `message`, and publish its status."""

    def drop(self, tracker: PartitionTracker) -> None:
        """Stop tracking the partition and pause it: it is no longer ours."""


class ExactlyOnce:
    """The transactions of a flow's partitions, and what their outcomes mean."""

    def __init__(
        self,
        flow: FlowConfig,
        producer_config: Callable[[str], dict[str, object]],
        syncs: OffsetSyncWriter,
        owner: PartitionOwner,
    ) -> None:
        self.flow = flow
        self.writers = TransactionalWriters(flow.name, producer_config)
        self._syncs = syncs
        self._owner = owner

    def open(self, tracker: PartitionTracker) -> Producer:
        """The partition's transactional producer, every earlier owner fenced first
        (settling its open transaction), so the tail read next is final. Raises
        TransactionsRefused when the target does not allow it (see `refuse`)."""
        return self.writers.open(tracker.topic, tracker.partition)

    def begin(self, tracker: PartitionTracker) -> bool:
        """Open the partition's transaction for the next records; False if it cannot
        (the outcome is settled: the records are dropped)."""
        settled = self.writers.begin(tracker.topic, tracker.partition)
        if settled.outcome is Outcome.OPEN:
            return True
        log.warning(
            "flow %s: %s[%d]: cannot begin a transaction (%s)",
            self.flow.name, tracker.topic, tracker.partition, reason(settled.error),
        )  # fmt: skip
        self.settle(tracker, settled)
        return False

    def commit(self, trackers: Mapping[Key, PartitionTracker]) -> None:
        """Commit every partition's open transaction (one per consume batch) and emit
        the offset syncs of what committed; see `settle` for the others."""
        retried: list[Key] = []
        why: KafkaError | None = None
        for key, settled in self.writers.commit_open().items():
            tracker = trackers.get(key)
            if tracker is None:
                continue
            if settled.outcome is Outcome.COMMITTED:
                self._syncs.committed(key)
                continue
            if settled.outcome is Outcome.RETRY:
                retried.append(key)
                why = settled.error
            self.settle(tracker, settled)
        if retried:
            log.warning(
                "flow %s: the transactions of %s did not commit (%s); they resume from "
                "the committed tail on %r",
                self.flow.name, partitions_text(retried), reason(why), self.flow.target.alias,
            )  # fmt: skip

    def settle(self, tracker: PartitionTracker, settled: Settled) -> None:
        """A partition's transaction did not commit (or begin). Fenced: another worker
        owns it now. Refused: stopped, naming the cause. Anything else (the target
        went away, a timeout, an abortable error): it resumes from the committed tail
        once the target answers, however long that takes."""
        self._syncs.rolled_back(tracker.key)
        if settled.outcome is Outcome.FENCED:
            self._let_go(tracker)
        elif settled.outcome is Outcome.REFUSED:
            self.refuse(
                tracker,
                f"{tracker.topic}[{tracker.partition}]: the target {self.flow.target.alias!r} "
                f"refuses the transaction: {reason(settled.error)}; grant the replicator's "
                "principal WRITE on the transactional id "
                f"{self.writers.transactional_id(tracker.topic, tracker.partition)!r} and "
                f"on {tracker.remote}, then restart",
            )
        elif not tracker.stopped:
            self._owner.rewind(tracker)

    def refuse(self, tracker: PartitionTracker, message: str) -> None:
        """The target refuses the partition's transactions: stop it, saying why."""
        metrics.ERRORS.labels(tracker.flow, "authorization").inc()
        self._owner.halt(tracker, f"{message}. The partition is stopped")

    def close(self, key: Key) -> None:
        self.writers.close(*key)

    def close_all(self) -> None:
        self.writers.close_all()

    def _let_go(self, tracker: PartitionTracker) -> None:
        """Fenced: the partition belongs to another worker. Stop writing it at once;
        the group takes it from us at the next rebalance."""
        self._owner.drop(tracker)
        self.writers.close(tracker.topic, tracker.partition)
        metrics.ERRORS.labels(tracker.flow, "fenced").inc()
        log.warning(
            "flow %s: %s[%d] fenced by its next owner; paused until the group takes it",
            tracker.flow,
            tracker.topic,
            tracker.partition,
        )
