"""Rebalancing alone (`replicator.engine.rebalance`): partitions assigned and resumed
where the target says, kept waiting while it does not answer, revoked (flushed,
committed and forgotten) or lost (dropped, never flushed), and a position outside
the source log handed to the failure policies. The group consumer, target producer,
resume points and offset-sync writer are fakes that record what they are asked;
the partitions and the target writer are the real parts over them."""

from __future__ import annotations

import logging
import threading
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

from replicator.engine.partitions import Partitions
from replicator.engine.rebalance import Rebalance
from replicator.engine.target_writer import TargetWriter

from helpers.engine_fakes import (
    FakeConsumer,
    FakeProducer,
    FakeReporter,
    FakeResumePoints,
    FakeSourceCommits,
    FakeSyncs,
    FakeTopics,
    flow,
    record,
)


class _Group:
    """A rebalance over fakes, and what it did to them."""

    def __init__(self, **properties: str) -> None:
        self.flow = flow(**properties)
        self.consumer = FakeConsumer(high=100)
        self.syncs = FakeSyncs()
        self.reporter = FakeReporter()
        self.topics = FakeTopics()
        self.points = FakeResumePoints()
        self.commits = FakeSourceCommits()
        self.partitions = Partitions(self.flow.name, self.consumer, self.syncs, self.reporter)  # type: ignore[arg-type]
        self.producer = FakeProducer()
        self.writer = TargetWriter(
            self.flow,
            self.partitions,
            self.syncs,  # type: ignore[arg-type]
            self.reporter,  # type: ignore[arg-type]
            topics=self.topics,
            fail=lambda message, access=False: None,
            stopping=threading.Event(),
            last_poll=time.monotonic,
            make_producer=lambda config: self.producer,  # type: ignore[arg-type,return-value]
        )
        self.writer.start({})
        self.rebalance = Rebalance(
            self.flow,
            consumer=self.consumer,  # type: ignore[arg-type]
            partitions=self.partitions,
            writer=self.writer,
            topics=self.topics,  # type: ignore[arg-type]
            resume_points=self.points,  # type: ignore[arg-type]
            syncs=self.syncs,  # type: ignore[arg-type]
            source_commits=self.commits,  # type: ignore[arg-type]
            reporter=self.reporter,  # type: ignore[arg-type]
        )

    def assign(self, *partitions: int) -> None:
        tps = [TopicPartition("orders", p) for p in partitions]
        self.rebalance.on_assign(self.consumer, tps)  # type: ignore[arg-type]


def test_assigned_partitions_resume_where_the_target_says(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    g = _Group()
    g.points.offsets = {("orders", 0): 42, ("orders", 1): 7}
    g.assign(0, 1)

    zero, one = g.partitions.get(("orders", 0)), g.partitions.get(("orders", 1))
    assert (zero.next_offset, one.next_offset) == (42, 7)
    assert not zero.resuming and g.partitions.waiting() == []
    assert zero.producer is g.producer and zero.size.limit == g.writer.record_limit(
        "primary.orders"
    )
    assert g.consumer.calls == [
        ("assign", [("orders", 0, 42), ("orders", 1, 7)]),
        ("resume", [("orders", 0, 42), ("orders", 1, 7)]),
    ]
    assert ("restart", ("orders", 0)) in g.syncs.calls
    assert g.topics.missing == [[("orders", 0), ("orders", 1)]]  # remote topics made first
    assert "assigned orders[0]@42, orders[1]@7" in caplog.text


def test_a_target_that_does_not_answer_keeps_partitions_waiting_until_it_does(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    g = _Group()
    g.points.error = KafkaException(KafkaError(KafkaError._TRANSPORT, "dr is away"))
    g.assign(0)

    waiting = g.partitions.get(("orders", 0))
    assert waiting.resuming and g.partitions.waiting() == [waiting]
    assert g.consumer.calls == [
        ("assign", [("orders", 0, OFFSET_BEGINNING)]),
        ("resume", [("orders", 0, OFFSET_BEGINNING)]),
        ("pause", [("orders", 0, -1001)]),  # nothing is fetched until it resumes
    ]
    assert "1 partitions wait for 'dr'" in caplog.text

    g.points.error = None
    g.points.offsets = {("orders", 0): 5}
    g.rebalance.resume_waiting()  # the backoff's first delay has not passed
    assert waiting.resuming
    time.sleep(0.6)
    g.rebalance.resume_waiting()
    assert not waiting.resuming and waiting.next_offset == 5
    assert g.consumer.calls[-2:] == [
        ("assign", [("orders", 0, 5)]),
        ("resume", [("orders", 0, -1001)]),
    ]
    assert "'dr' answers again" in caplog.text


def test_partitions_whose_target_leaders_settle_wait_while_the_others_replicate(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # 1,000 remote partitions created a moment ago answer within seconds of each other;
    # a worker that read each of them alone waited for every leader in turn before
    # its first record (10 s at 1,000 partitions in bench/estate_scale.py).
    caplog.set_level(logging.INFO)
    g = _Group()
    g.points.offsets = {("orders", 0): 3, ("orders", 1): 4, ("orders", 2): 5}
    g.points.settling = {("orders", 1), ("orders", 2)}
    g.assign(0, 1, 2)

    zero, one, two = (g.partitions.get(("orders", p)) for p in range(3))
    assert not zero.resuming and zero.next_offset == 3
    assert one.resuming and two.resuming
    assert "assigned orders[0]@3, orders[1], orders[2] (2 waiting" in caplog.text
    assert ("pause", [("orders", 1, -1001), ("orders", 2, -1001)]) in g.consumer.calls

    g.points.settling = {("orders", 2)}
    g.rebalance.resume_waiting()  # asked again only after a pause
    assert one.resuming
    time.sleep(0.6)
    g.rebalance.resume_waiting()  # read together with the other one still settling
    assert not one.resuming and one.next_offset == 4 and two.resuming
    assert g.points.prefetched == [("orders", 1, "primary.orders"), ("orders", 2, "primary.orders")]
    time.sleep(0.6)  # a read that found one ready: the next is as soon as the first
    g.rebalance.resume_waiting()
    assert g.points.prefetched == [("orders", 2, "primary.orders")] and two.resuming
    g.points.settling = set()
    time.sleep(0.6)
    g.rebalance.resume_waiting()  # a read that found none: asked after twice the pause
    assert two.resuming
    time.sleep(0.5)
    g.rebalance.resume_waiting()  # the last one alone is still read in a batch
    assert not two.resuming and two.next_offset == 5
    assert g.points.prefetched == [("orders", 2, "primary.orders")]
    assert g.partitions.waiting() == []


def test_settling_lasts_while_reads_find_partitions_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    """A target creating 5,000 partitions serves them over tens of seconds: the
    partitions wait together for as long as reads keep finding some ready, and are
    read one by one (each waiting for its leader) only after `_SETTLE_S` of none."""
    monkeypatch.setattr("replicator.engine.rebalance._SETTLE_S", 1.0)
    g = _Group()
    g.points.offsets = {("orders", p): p for p in range(4)}
    g.points.settling = {("orders", 1), ("orders", 2), ("orders", 3)}
    g.assign(0, 1, 2, 3)
    for ready in (1, 2):  # one more each time, 0.6 s apart: 1.2 s of settling in all
        time.sleep(0.6)
        g.points.settling.discard(("orders", ready))
        g.rebalance.resume_waiting()
        assert not g.partitions.get(("orders", ready)).resuming
    assert g.partitions.get(("orders", 3)).resuming
    assert g.points.prefetched == [("orders", 2, "primary.orders"), ("orders", 3, "primary.orders")]
    deadline = time.monotonic() + 5
    while g.partitions.waiting() and time.monotonic() < deadline:
        time.sleep(0.1)
        g.rebalance.resume_waiting()  # none ready for 1 s: read on its own
    assert g.partitions.waiting() == []


def test_revoke_flushes_commits_and_forgets() -> None:
    g = _Group()  # committing source positions is the default
    g.assign(0, 1)
    zero = g.partitions.get(("orders", 0))
    g.writer.write_run(zero, [record(0), record(1)], 0)
    assert len(g.producer) == 2

    g.rebalance.on_revoke(g.consumer, [TopicPartition("orders", 0)])  # type: ignore[arg-type]
    assert g.producer.flushes and len(g.producer) == 0  # landed before the next owner reads
    assert g.producer.purges == []
    assert ("emit_due", True) in g.syncs.calls  # its last offset syncs go out now
    assert g.commits.commits == [([("orders", 0)], set(), True)]
    assert g.commits.forgotten == [("orders", 0)]
    assert g.partitions.get(("orders", 0)) is None
    assert g.partitions.get(("orders", 1)) is not None  # the other stays
    assert ("revoked", ("orders", 0)) in g.reporter.published
    assert g.consumer.calls[-1] == ("unassign", [("orders", 0, -1001)])


def test_a_lost_assignment_is_dropped_never_flushed() -> None:
    g = _Group()
    g.assign(0)
    zero = g.partitions.get(("orders", 0))
    g.writer.write_run(zero, [record(0)], 0)

    g.rebalance.on_lost(g.consumer, [TopicPartition("orders", 0)])  # type: ignore[arg-type]
    assert g.producer.flushes == []
    assert g.producer.purges == [(True, True)]
    assert g.commits.commits == []  # its partitions are another worker's already
    assert g.partitions.get(("orders", 0)) is None


def test_a_position_before_the_source_log_start_applies_the_retention_policy() -> None:
    g = _Group()
    g.assign(0, 1)
    zero = g.partitions.get(("orders", 0))
    zero.next_offset = 5
    assert g.rebalance.check_position(zero, low=10, high=20)
    assert zero.stopped is not None and "offsets 5..9 (5 records)" in zero.stopped
    assert zero.counters.lost == 5
    assert g.partitions.get(("orders", 1)).stopped is None

    skip = _Group(**{"retention.gap.policy": "skip"})
    skip.assign(0)
    zero = skip.partitions.get(("orders", 0))
    zero.next_offset = 5
    assert skip.rebalance.check_position(zero, low=10, high=20)
    assert zero.stopped is None and zero.next_offset == 10
    assert not skip.rebalance.check_position(zero, low=10, high=20)  # inside now
