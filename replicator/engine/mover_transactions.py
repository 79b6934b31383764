"""Exactly-once flows on the compiled data path: one transactional Mover
(`replicator._dataplane`, docs/dataplane.md) per source partition, behind the same
parts as the default mode's `MoverWriter`. The Movers and their transactions are
`transactional_movers.TransactionalMovers`'; this module decides what each outcome
does to its partition.

The guarantees are the Python exactly-once loop's (`exactly_once`, `transactions`):

- Each source partition is read and written by a Mover of its own whose
  transactional id is the engine's per-partition id
  (`replicator-<source>-<target>-<topic>-<partition>`), so fencing after a
  rebalance is what it is on the Python loop: the next owner's `init_transactions`
  (in `for_partition`, before the target tail is read) aborts the previous owner's
  open transaction and fences it.
- Where a partition continues is the target's committed tail (`resume`), as on the
  Python loop. The Movers commit no source offsets (`offsets_group` is not given):
  the tail stays the one record of the position.
- Transactions follow the Python loop's cadence, one per partition and round (the
  loop's consume batch): opened before the round's `move_records` (a Mover moves
  only inside one), the records it handed back settled inside it (`RecordRewrite`:
  released with the replica's headers, skipped as a loop; oversized ones held,
  skipped or stopped at), then committed. A transaction that took nothing stays
  open, empty, for the next round (nothing reaches the target for it).
- What committed goes to the partitions and the offset syncs (`progress()` of a
  transactional Mover reports committed records only) and the syncs then publish it.
- A transaction that did not commit (or begin) is settled as `TransactionalWriters`
  settles it (`transactions.failed` on the `TransactionError`'s code): fenced → the
  partition belongs to another worker (dropped); authorization → stopped, naming the
  grant; records the target rejects (too large, no topic, ...) → stopped, as the
  Python loop's `Deliveries` does; anything else → its Mover is dropped, and the
  partition resumes from the committed tail with a new Mover of the same id (whose
  `init_transactions` settles the transaction). Once a commit timed out (the target
  away), the round's other transactions are settled so without waiting as long.
- A `MoverError` from `move_records`: a consume error commits what the transaction
  took first (so the position the failure policies see is the committed one), then
  goes where it goes in the default mode (an offset out of range to the task's
  handler, anything else stops the task); a delivery or client failure is settled
  by the commit it makes fail (a zombie learns there that it was fenced), and the
  Mover, which keeps raising it, is made anew.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, cast

from confluent_kafka import KafkaError

from replicator import metrics
from replicator.engine.exactly_once import ExactlyOnce
from replicator.engine.headers import OFFSET_HEADER, OURS, TOPIC_HEADER
from replicator.engine.kafka_errors import REJECTED, reason
from replicator.engine.mover_writer import (
    _CONSUMING,
    MOVE_BATCH,
    MoverWriter,
    mover_settings,
    mover_source_config,
)
from replicator.engine.partition import PartitionTracker
from replicator.engine.transactional_movers import TransactionalMovers
from replicator.engine.transactions import Outcome, Settled, is_away
from replicator.errors import ReplicatorError
from replicator.kafka.clients import Producer
from replicator.listing import partitions_text

log = logging.getLogger(__name__)

Key = tuple[str, int]

#: How long a new Mover's producer may take to learn its partition's remote topic.
_KNOW_TIMEOUT_S = 10.0


def _no_producers(transactional_id: str) -> dict[str, object]:
    raise RuntimeError(
        f"{transactional_id}: on the compiled path the transactional Movers write, "
        "not confluent-kafka producers"
    )


class TransactionalMoverWriter(MoverWriter):
    """The `ReplicaWriter` of exactly-once flows on the compiled path (see the
    module's description). Reuses `MoverWriter`'s settling of handed-back records,
    its accounting of `progress()` and its routing of errors and client events."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: What the outcomes of transactions mean (shared with the Python loop).
        self._outcomes = ExactlyOnce(self.flow, _no_producers, self._syncs, self._partitions)
        self.movers = TransactionalMovers(
            self._module,
            self._transactional_mover,
            self._outcomes.writers.transactional_id,
            self._events,
        )

    @property
    def exactly_once(self) -> ExactlyOnce:
        return self._outcomes

    # -- the Movers ---------------------------------------------------------------------

    def start(self, limits: dict[str, int], producer: Producer | None = None) -> None:
        """The status producer; the Movers are made per partition (`for_partition`)."""
        if producer is not None:
            raise ValueError(
                "the compiled path makes its own clients; the Python loop takes a producer"
            )
        self._limits.update(limits)
        self._limits.made()
        self._producer = self._new_producer(self._limits.producer_config())
        self._reporter.write_with(self._producer)

    def _transactional_mover(self, transactional_id: str) -> Any:
        # The Python loop's transactional producers' settings (librdkafka times their
        # records out within transaction.timeout.ms; the transaction settles them).
        target = self._limits.producer_config()
        return self._module.Mover(
            mover_source_config(self.flow),
            mover_settings({k: v for k, v in target.items() if not callable(v)}),
            [("__dr_src", self.flow.source.alias.encode())],
            offset_header=OFFSET_HEADER,
            topic_header=TOPIC_HEADER,
            reserved_headers=sorted(OURS),
            transactional_id=transactional_id,
        )

    def _mover_of(self, key: Key) -> Any:
        return self.movers.get(key)

    def _movers(self) -> list[Any]:
        return self.movers.movers()

    def for_partition(self, tracker: PartitionTracker) -> Producer:
        """Fence the partition's earlier owners with a new Mover of its transactional
        id (before its tail is read). Raises TransactionsUnavailable (it waits) or
        TransactionsRefused (it stops)."""
        self._assigned.discard(tracker.key)
        self._pairs.pop(tracker.key, None)
        mover = self.movers.open(tracker.topic, tracker.partition)
        try:  # its remote partition, maybe just created, known before its first record
            self._know(mover, [tracker.remote], _KNOW_TIMEOUT_S)
        except ReplicatorError:
            self.movers.discard(tracker.key)  # the partition waits; the next try opens anew
            raise
        tracker.producer = self.producer  # the status producer: the Mover writes replicas
        return tracker.producer

    def know(self, remotes: Iterable[str], timeout: float) -> None:
        """Ask the target for the `remotes` topics through the status producer: raises
        KafkaException when it does not answer within `timeout` seconds, so partitions
        that wait for it stay waiting at once, instead of each new Mover's
        init_transactions waiting its 30 s (a rebalance with the target away outlived
        the group's patience). A partition's Mover learns its own remote topic when it
        is made (`for_partition`)."""
        for remote in remotes:
            self.producer.list_topics(remote, timeout=timeout)

    def assign(self, partitions: list[tuple[str, int, int]]) -> None:
        """Have each partition's Mover read it from offset (MoverFetch)."""
        for topic, partition, offset in partitions:
            key = (topic, partition)
            tracker = self._partitions.get(key)
            if tracker is None:
                continue
            mover = self.movers.get(key)
            if mover is None:  # its Mover was dropped: it resumes from the target tail
                self._partitions.rewind(tracker)
                continue
            if key in self._assigned:  # fetched again from a new position
                mover.unassign([key])
            mover.limits({tracker.remote: tracker.size.limit})
            mover.assign([(topic, partition, offset, tracker.remote)])
            self._assigned.add(key)
            self._pairs.pop(key, None)

    def unassign(self, keys: list[Key]) -> None:
        """Stop the partitions' Movers reading them (MoverFetch)."""
        for key in keys:
            if key not in self._assigned:
                continue
            self._assigned.discard(key)
            mover = self.movers.get(key)
            if mover is not None:
                mover.unassign([key])

    # -- the round ----------------------------------------------------------------------

    def move(self, timeout: float) -> int:
        """The round's data step: each partition's transaction opened, its records
        moved (waiting up to `timeout` in all for the first record), those handed
        back settled, then every transaction that took records committed."""
        live = [key for key in sorted(self._assigned) if self._replicating(key)]
        if not live:
            self._stopping.wait(timeout)
            return 0
        errors: dict[Key, Exception] = {}
        moved = sum(self._move_one(key, 0.0, errors) for key in live)
        if not moved and not any(self.movers.taking(key) for key in live) and not errors:
            wait = timeout / len(live)
            moved = sum(self._move_one(key, wait, errors) for key in live if self._replicating(key))
        self._commit(errors)
        return moved

    def _replicating(self, key: Key) -> bool:
        return self._partitions.replicating(key) is not None and self.movers.get(key) is not None

    def _move_one(self, key: Key, wait: float, errors: dict[Key, Exception]) -> int:
        tracker = self._partitions.get(key)
        if tracker is None or key in errors:
            return 0
        settled = self.movers.begin(key)
        if settled.outcome is not Outcome.OPEN:
            log.warning(
                "flow %s: %s[%d]: cannot begin a transaction (%s)",
                self.flow.name, key[0], key[1], reason(settled.error),
            )  # fmt: skip
            self._settle_outcome(tracker, settled)
            return 0
        mover = cast(Any, self.movers.get(key))  # begun above: it has a Mover
        try:
            moved, handed = mover.move_records(MOVE_BATCH, wait)
        except self._module.MoverError as exc:
            self.movers.took(key)  # it may have produced records before the error
            errors[key] = exc
            return 0
        if moved or handed:
            self.movers.took(key)
        for record in handed:
            self._settle(record)
        return cast(int, moved)

    def _commit(self, errors: dict[Key, Exception]) -> None:
        """Commit every transaction that took records, and settle how each ended."""
        away: KafkaError | None = None
        retried: list[Key] = []
        for key in self.movers.partitions():
            tracker = self._partitions.get(key)
            if tracker is None or tracker.resuming or not self._partitions.is_current(tracker):
                if self.movers.taking(key):  # given up meanwhile: never committed
                    self.movers.discard(key)
                continue
            error = errors.get(key)
            if away is not None and self.movers.taking(key):
                self.movers.discard(key)
                settled: Settled | None = Settled(Outcome.RETRY, away)
            else:
                mover = self.movers.get(key)
                settled = self.movers.commit(key)
                if settled is not None and settled.outcome is Outcome.COMMITTED:
                    self._committed(key, mover)
            consuming = None if error is None else _CONSUMING.match(str(error))
            if consuming is not None and (
                settled is None
                or settled.outcome is Outcome.COMMITTED
                or consuming["code"] != "_AUTO_OFFSET_RESET"
            ):
                # After the commit: the position the failure policies see is final. (A
                # transaction that did not commit resumes from the tail, checked there.)
                self._on_mover_error(cast(Exception, error))
            elif error is not None:
                self._delivery_failed(tracker, error, settled)
                continue
            if settled is None or settled.outcome is Outcome.COMMITTED:
                continue
            if settled.error is not None and is_away(settled.error):
                away = settled.error
            if settled.outcome is Outcome.RETRY:
                retried.append(key)
            self._settle_outcome(tracker, settled)
        if retried:
            log.warning(
                "flow %s: the transactions of %s did not commit (%s); they resume from "
                "the committed tail on %r",
                self.flow.name, partitions_text(retried), reason(away), self.flow.target.alias,
            )  # fmt: skip

    def _committed(self, key: Key, mover: Any) -> None:
        """A transaction committed: its records to the partition and the offset syncs."""
        try:
            progress = mover.progress()
        except self._module.MoverError as exc:
            self._on_mover_error(exc)
            return
        self._account({k: v for k, v in progress.items() if k == key})
        self._syncs.committed(key)

    def _delivery_failed(
        self, tracker: PartitionTracker, error: Exception, settled: Settled | None
    ) -> None:
        """`move_records` raised for a delivery or a client failure: the commit it made
        fail says what it means; a Mover that committed anyway is spent (it raises
        the failure again), so the partition resumes from the committed tail."""
        if settled is not None and settled.outcome is not Outcome.COMMITTED:
            if settled.outcome is Outcome.RETRY:  # fenced and refused say so themselves
                log.warning(
                    "flow %s: %s[%d]: the data plane failed (%s) and the transaction did "
                    "not commit (%s); the partition resumes from the committed tail",
                    self.flow.name, tracker.topic, tracker.partition, error,
                    reason(settled.error),
                )  # fmt: skip
            self._settle_outcome(tracker, settled)
            return
        log.warning(
            "flow %s: %s[%d]: the data plane failed (%s); the partition resumes from the "
            "committed tail",
            self.flow.name, tracker.topic, tracker.partition, error,
        )  # fmt: skip
        self.movers.discard(tracker.key)
        if not tracker.stopped:
            self._partitions.rewind(tracker)

    def _settle_outcome(self, tracker: PartitionTracker, settled: Settled) -> None:
        """A transaction that did not commit or begin (its Mover already dropped)."""
        error = settled.error
        if settled.outcome is Outcome.RETRY and error is not None and error.code() in REJECTED:
            # The target rejects the records: trying again cannot help (as `Deliveries`).
            self._syncs.rolled_back(tracker.key)
            metrics.ERRORS.labels(tracker.flow, "delivery").inc()
            self._partitions.halt(
                tracker,
                f"{tracker.topic}[{tracker.partition}]: the target {self.flow.target.alias!r} "
                f"rejected records for {tracker.remote}: {error.str()}. The partition is "
                "stopped; fix the cause and restart, it resumes after the last committed record",
            )
            return
        self._outcomes.settle(tracker, settled)

    # -- ReplicaWriter ------------------------------------------------------------------

    def serve(self) -> None:
        """The Movers' client events to the log (what committed was accounted at
        the commit)."""
        for mover in self.movers.movers():
            self._serve_skips(mover)
            self._events(mover)
        self.producer.poll(0)

    def update_size_limits(self, limits: dict[str, int]) -> None:
        """New max.message.bytes of remote topics: the partitions' limits follow; when
        the producers' no longer fit, every partition's Mover is dropped and the
        partition resumes (with a Mover made for the new limits), as on the Python loop."""
        outgrown = self._limits.update(limits)
        for tracker in self._partitions.values():
            mover = self.movers.get(tracker.key)
            if mover is not None:
                mover.limits({tracker.remote: tracker.size.limit})
        if not outgrown:
            return
        self._limits.made()
        for tracker in list(self._partitions.values()):
            if not tracker.resuming:
                self.movers.close(tracker.key)
                self._partitions.rewind(tracker)
        log.info(
            "flow %s: the data plane's transactional Movers made anew for the remote "
            "topics' limits (message.max.bytes=%d, batch.size=%d)",
            self.flow.name, *self._limits.made_for,
        )  # fmt: skip

    def rewind_all(self, why: str) -> None:
        metrics.ERRORS.labels(self.flow.name, "target_unavailable").inc()
        log.warning(
            "flow %s: %s; every partition resumes from the committed tail once %r answers",
            self.flow.name, why, self.flow.target.alias,
        )  # fmt: skip
        self._partitions.rewind_all()
        self.movers.discard_all()

    def release(self, lost: bool) -> None:
        """Nothing: every round's transactions are committed (or settled) before the
        group's callbacks run, and the next owner fences ours."""

    def forget(self, key: Key) -> None:
        self._pairs.pop(key, None)
        self._in_flight.pop(key, None)
        self.unassign([key])
        self.movers.close(key)

    def in_flight(self) -> set[Key]:
        return set()  # committed, or settled, at the end of every round

    def check_deadline(self) -> None:
        """Nothing: a transaction times out on its own (transaction.timeout.ms)."""

    def close_transactions(self) -> None:
        self.movers.close_all()

    def close(self) -> None:
        self.movers.close_all()
