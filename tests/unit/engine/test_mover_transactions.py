"""Exactly-once flows on the compiled path (`replicator.engine.mover_transactions`)
over fake transactional Movers (`helpers.engine_fakes.FakeMover`), the real
`Partitions` over `MoverFetch`: one Mover per partition with the engine's
per-partition transactional id, initialised before the tail is read; a round's
transaction begun, records moved and handed-back ones released inside it, then
committed, its progress then fed to the partitions and the offset syncs; an idle
transaction kept open; each outcome of a transaction as `TransactionalWriters` maps
it (fenced: dropped; refused: stopped naming the grant; rejected records: stopped;
anything else: a new Mover of the same id, resumed from the tail); a consume error
after the commit. The Movers on real clusters: tests/integration/engine/
test_compiled_exactly_once.py."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from replicator.engine.headers import OFFSET_HEADER, SOURCE_HEADER, TOPIC_HEADER, encode_offset
from replicator.engine.mover_transactions import TransactionalMoverWriter
from replicator.engine.mover_writer import MoverFetch
from replicator.engine.partition import PartitionTracker
from replicator.engine.partitions import Partitions
from replicator.engine.transactional_movers import TransactionalMovers, TransactionsUnavailable
from replicator.engine.transactions import TransactionsRefused
from replicator.errors import ReplicatorError

from helpers.engine_fakes import (
    FakeConsumer,
    FakeDataplane,
    FakeMover,
    FakeMoverError,
    FakeProducer,
    FakeReporter,
    FakeSyncs,
    FakeTopics,
    FakeTransactionError,
    flow,
    tracker,
)

KEY = ("orders", 0)
ID = "replicator-primary-dr-orders-0"


class _Path:
    """A TransactionalMoverWriter over fakes, and what it did to them."""

    def __init__(self, **properties: str) -> None:
        self.flow = flow(**{"exactly.once": "true", **properties})
        self.module = FakeDataplane()
        self.consumer = FakeConsumer()
        self.fetch = MoverFetch(self.consumer)  # type: ignore[arg-type]
        self.syncs = FakeSyncs()
        self.reporter = FakeReporter()
        self.partitions = Partitions(
            self.flow.name,
            self.fetch,
            self.syncs,
            self.reporter,
            transactional=True,  # type: ignore[arg-type]
        )
        self.failures: list[tuple[str, bool]] = []
        self.out_of_range: list[tuple[str, int, int]] = []
        self.writer = TransactionalMoverWriter(
            self.flow,
            self.partitions,
            self.syncs,
            self.reporter,
            module=self.module,
            topics=FakeTopics(),
            fail=lambda message, access=False: self.failures.append((message, access)),
            out_of_range=self._out_of_range,
            stopping=threading.Event(),
            make_producer=FakeProducer,
        )
        self.fetch.bind(self.writer)
        self.writer.start({})

    def _out_of_range(self, topic: str, partition: int, _why: str) -> None:
        # The position the task's handler sees: after what committed.
        made = self.partitions.get((topic, partition))
        self.out_of_range.append((topic, partition, made.next_offset if made else -1))

    def replicating(self, partition: int = 0, next_offset: int = 0) -> PartitionTracker:
        """A partition resumed at `next_offset` and fetched from there, as Rebalance does."""
        made = tracker(partition, next_offset=next_offset, resuming=True)
        self.partitions.add(made)
        self.writer.for_partition(made)
        made.acked_next = next_offset
        self.partitions.resumed(made)
        self.partitions.restart_fetch(made)
        return made


def _mover(key: tuple[str, int] = KEY) -> FakeMover:
    """The newest Mover made for `key`'s partition."""
    wanted = f"replicator-primary-dr-{key[0]}-{key[1]}"
    return [m for m in FakeMover.made if m.options.get("transactional_id") == wanted][-1]


def _names(mover: FakeMover) -> list[str]:
    return [name for name, _ in mover.calls]


@pytest.fixture
def p() -> _Path:
    return _Path()


def test_each_partition_has_a_mover_of_its_own_id_initialised_before_it_reads(p: _Path) -> None:
    p.replicating(0, next_offset=5)
    p.replicating(1, next_offset=7)
    first, second = _mover(KEY), _mover(("orders", 1))
    assert first.options["transactional_id"] == ID
    assert second.options["transactional_id"] == "replicator-primary-dr-orders-1"
    assert "offsets_group" not in first.options  # the target tail is the one record
    assert _names(first)[:2] == ["init_transactions", "assign"]
    # Its producer learnt the remote topic (maybe just grown to this partition) first.
    assert first.known == [["primary.orders"]]
    assert first.calls[1] == ("assign", [("orders", 0, 5, "primary.orders")])
    # The Python loop's transactional producer settings: librdkafka times records out
    # within the transaction's timeout, not never.
    assert "message.timeout.ms" not in first.target and "transactional.id" not in first.target
    assert first.target["enable.idempotence"] == "true"
    assert first.source["isolation.level"] == "read_committed"


def test_a_round_moves_inside_a_transaction_and_feeds_what_committed(p: _Path) -> None:
    made = p.replicating(next_offset=10)
    mover = _mover()
    mover.moved = 10
    mover.reports = {KEY: (19, 108, 0, 10, 1_000, [(10, 100)], 1_700_000_000_000, 19)}
    assert p.writer.move(0.1) == 10
    assert _names(mover)[-2:] == ["begin_transaction", "commit_transaction"]
    assert (made.acked_next, made.next_offset, made.counters.replicated) == (20, 20, 10)
    runs = [
        (r["first_source"], r["last_source"], r["target_offset"]) for r in p.syncs.acknowledged_runs
    ]
    assert runs == [(10, 10, 100), (11, 19, 108)]
    assert p.syncs.calls[-1] == ("committed", KEY)  # the held syncs are published
    # Idle rounds: the next transaction is begun once and stays open, empty.
    mover.moved = 0
    p.writer.move(0.0)
    p.writer.move(0.0)
    assert mover.named("begin_transaction") == 2 and mover.named("commit_transaction") == 1
    assert p.writer.in_flight() == set()


def test_records_handed_back_are_settled_inside_the_transaction(p: _Path) -> None:
    p.replicating(next_offset=3)
    mover = _mover()
    own = [("app", b"1"), (SOURCE_HEADER, b"east"), (TOPIC_HEADER, b"orders")]
    mover.handed = [("orders", 0, 3, b"k", b"v", 0, 1, own, "reserved_header")]
    p.writer.move(0.1)
    begin, release, commit = (
        _names(mover).index("begin_transaction"),
        _names(mover).index("release"),
        _names(mover).index("commit_transaction"),
    )
    assert begin < release < commit
    headers = mover.calls[release][1][2]
    assert (SOURCE_HEADER, b"primary") in headers and (OFFSET_HEADER, encode_offset(3)) in headers


def test_a_fenced_commit_gives_the_partition_up(p: _Path, caplog: Any) -> None:
    p.replicating()
    mover = _mover()
    mover.moved = 4
    mover.txn_raises["commit_transaction"] = FakeTransactionError("_FENCED", fatal=True)
    with caplog.at_level(logging.WARNING):
        p.writer.move(0.1)
    assert p.partitions.get(KEY) is None and mover.closed
    assert "producer fenced" in caplog.text
    assert ("pause", [("orders", 0, -1001)]) in p.consumer.calls


def test_a_refused_commit_stops_the_partition_naming_the_grant(p: _Path) -> None:
    made = p.replicating()
    mover = _mover()
    mover.moved = 1
    mover.txn_raises["commit_transaction"] = FakeTransactionError(
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    )
    p.writer.move(0.1)
    assert made.stopped and f"WRITE on the transactional id {ID!r}" in made.stopped


def test_a_commit_that_timed_out_resumes_from_the_tail_with_a_new_mover(p: _Path) -> None:
    first, second = p.replicating(0), p.replicating(1)
    for key in (KEY, ("orders", 1)):
        _mover(key).moved = 2
    old = _mover(KEY)
    old.txn_raises["commit_transaction"] = FakeTransactionError("_TIMED_OUT", retriable=True)
    p.writer.move(0.1)
    assert first.resuming and old.closed
    # The target is away: the other transaction is settled without waiting as long.
    assert second.resuming and _mover(("orders", 1)).named("commit_transaction") == 0
    assert ("rolled_back", KEY) in p.syncs.calls
    p.writer.for_partition(first)  # Rebalance resumes it: a new Mover, the same id
    assert _mover(KEY) is not old and _names(_mover(KEY)) == ["init_transactions"]


def test_rejected_records_stop_the_partition_a_lost_delivery_resumes_it(
    p: _Path, caplog: Any
) -> None:
    made = p.replicating()
    mover = _mover()
    mover.raises = FakeMoverError(
        "delivering orders partition 0 offset 9 (to primary.orders): Broker: Message size too large"
    )
    mover.txn_raises["commit_transaction"] = FakeTransactionError(
        "MSG_SIZE_TOO_LARGE", txn_requires_abort=True
    )
    p.writer.move(0.1)
    assert made.stopped and "rejected records for primary.orders" in made.stopped
    assert not p.failures  # the partition stops, not the flow

    q = _Path()
    other = q.replicating()
    mover = _mover()
    mover.raises = FakeMoverError(
        "delivering orders partition 0 offset 9: Local: Broker transport failure"
    )
    mover.txn_raises["commit_transaction"] = FakeTransactionError(
        "_TRANSPORT", txn_requires_abort=True
    )
    with caplog.at_level(logging.WARNING, logger="replicator.engine"):
        q.writer.move(0.1)
    assert other.resuming and not other.stopped and mover.closed and not q.failures
    # Said: a partition that rewinds silently looked, from outside, like one never fenced.
    assert "Broker transport failure) and the transaction did not commit (_TRANSPORT" in (
        caplog.text
    )


def test_a_consume_error_is_handled_after_the_commit(p: _Path) -> None:
    made = p.replicating(next_offset=0)
    mover = _mover()
    mover.raises = FakeMoverError(
        "consuming orders partition 0 at offset 5: _AUTO_OFFSET_RESET: Local: No offset stored"
    )
    # What it produced before the error.
    mover.reports = {KEY: (4, 4, 0, 5, 50, [], 1_700_000_000_000, 4)}
    p.writer.move(0.1)
    assert mover.named("commit_transaction") == 1
    assert p.out_of_range == [("orders", 0, 5)] and made.next_offset == 5
    mover.raises = FakeMoverError(
        "consuming orders partition 0 at offset 5: TOPIC_AUTHORIZATION_FAILED: Broker: ..."
    )
    p.writer.move(0.1)
    assert p.failures[-1][1] is True


def test_init_transactions_waits_when_the_target_is_away_and_refuses_when_it_refuses(
    p: _Path,
) -> None:
    made = tracker(resuming=True)
    p.partitions.add(made)
    original = FakeMover.init_transactions

    def failing(code: str, **flags: bool) -> Any:
        def init(self: FakeMover, timeout: float) -> None:
            raise FakeTransactionError(code, **flags)

        return init

    try:
        FakeMover.init_transactions = failing("_TIMED_OUT", retriable=True)  # type: ignore[method-assign]
        with pytest.raises(TransactionsUnavailable, match=ID):
            p.writer.for_partition(made)
        FakeMover.init_transactions = failing("TRANSACTIONAL_ID_AUTHORIZATION_FAILED")  # type: ignore[method-assign]
        with pytest.raises(TransactionsRefused, match="WRITE on the transactional id"):
            p.writer.for_partition(made)
    finally:
        FakeMover.init_transactions = original  # type: ignore[method-assign]
    assert all(m.closed for m in FakeMover.made)
    assert p.writer.exactly_once is not None  # Rebalance refuses the partition through it


def test_a_new_mover_that_cannot_learn_its_remote_topic_is_dropped_and_waits(p: _Path) -> None:
    made = tracker(0, resuming=True)
    p.partitions.add(made)
    original = FakeMover.know

    def away(self: FakeMover, topics: list[str], timeout: float) -> dict[str, int]:
        raise FakeMoverError("learning the partitions of primary.orders on the target: timed out")

    FakeMover.know = away  # type: ignore[method-assign]
    try:
        with pytest.raises(ReplicatorError, match=r"primary\.orders"):
            p.writer.for_partition(made)  # Rebalance: the partition waits, tried again
    finally:
        FakeMover.know = original  # type: ignore[method-assign]
    assert _mover().closed and p.writer.movers.get(KEY) is None
    p.writer.know(["primary.orders"], 10.0)  # nothing: the Movers are per partition
    p.writer.for_partition(made)
    assert not _mover().closed and _mover().known == [["primary.orders"]]


def test_revoked_partitions_close_their_mover_and_shutdown_closes_all(p: _Path) -> None:
    p.replicating(0)
    p.replicating(1)
    p.writer.release(lost=True)  # nothing to flush or purge: the next owner fences
    assert not any(m.closed for m in FakeMover.made)
    p.writer.forget(KEY)
    assert _mover(KEY).closed and not _mover(("orders", 1)).closed
    p.writer.close()
    assert _mover(("orders", 1)).closed


def test_a_revocation_with_the_target_away_does_not_wait_to_abort_each_transaction() -> None:
    """Found by test_broker_faults[exactly_once]: three revoked partitions with open
    transactions waited 30 s each for an abort the absent target could not answer, and
    the rebalance outlived the test's 90 s. After one such timeout the others are
    dropped at once (the partitions' next owners settle them, as on the Python loop)."""
    module = FakeDataplane()
    movers = TransactionalMovers(
        module,
        lambda tid: module.Mover({}, {}, [], transactional_id=tid),
        lambda topic, partition: f"replicator-primary-dr-{topic}-{partition}",
        lambda _mover: None,
    )
    keys = [("orders", p) for p in range(3)]
    for key in keys:
        movers.open(*key)
        movers.begin(key)
        movers.took(key)
    first = movers.get(keys[0])
    first.txn_raises["abort_transaction"] = FakeTransactionError("_TIMED_OUT", retriable=True)
    others = [movers.get(key) for key in keys[1:]]
    for key in keys:
        movers.close(key)
    assert first.named("abort_transaction") == 1
    assert [m.named("abort_transaction") for m in others] == [0, 0]
    assert all(m.closed for m in [first, *others])
    movers.open("orders", 0)  # the target answers again: aborts are waited for again
    movers.begin(keys[0])
    movers.took(keys[0])
    again = movers.get(keys[0])
    movers.close(keys[0])
    assert again.named("abort_transaction") == 1
