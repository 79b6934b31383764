"""A run's one delivery report must never acknowledge past a gap (issue 26, point 2).

Only a run's last replica carries a delivery report (tests/unit/engine/test_runs.py):
the idempotent producer's gapless guarantee makes its success cover the run. That
guarantee leaves out `message.timeout.ms`: after a timeout the producer bumps its
epoch and goes on, so a run whose middle timed out while the target was away could
be acknowledged whole. Here the target is librdkafka's mock cluster, its broker taken
down for longer than the user's message timeout while a run waits for room in a
small producer queue: every record must end up on the target exactly once (rewound
and re-copied from the target tail), and no acknowledgement may cover a record
that is not there. These are the Python loop's runs (`replicator.data.path = python`).
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from confluent_kafka import Consumer, Message, Producer, TopicPartition

from replicator.engine.headers import OFFSET_HEADER, decode_offset
from replicator.engine.partition import PartitionTracker
from replicator.engine.replica_producers import DeliveryBounds
from replicator.engine.size_limits import SizeHold
from replicator.engine.tail import TailReader
from replicator.engine.task import ReplicationTask

from helpers.mock_cluster import MockCluster, mock_cluster
from helpers.replication import flow_config

_REMOTE = "primary.orders"
_RECORDS = 1_000
#: The target is away this long: longer than the message timeout (1 s) the flow sets.
_OUTAGE_S = 2.5


@pytest.fixture
def target() -> Iterator[MockCluster]:
    with mock_cluster() as cluster:
        cluster.create_topic(_REMOTE, 1)
        yield cluster


class _Source:
    """Stands in for the source consumer: the loop pauses a partition that rewinds or
    stops, and a stopped partition's status tells its lag."""

    def __init__(self) -> None:
        self.paused: list[TopicPartition] = []

    def pause(self, partitions: list[TopicPartition]) -> None:
        self.paused += partitions

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float = -1, cached: bool = False
    ) -> tuple[int, int]:
        return 0, _RECORDS


class _Acknowledged:
    """Stands in for the offset-sync writer: the runs acknowledged, as it is told them."""

    def __init__(self) -> None:
        self.runs: list[dict[str, Any]] = []

    def acknowledged(self, key: tuple[str, int], **run: Any) -> None:
        self.runs.append(run)

    def rolled_back(self, key: tuple[str, int]) -> None:
        pass

    def restart(self, key: tuple[str, int]) -> None:
        pass

    def forget(self, key: tuple[str, int]) -> None:
        pass

    def emit_due(self, force: bool) -> None:
        pass


@pytest.fixture
def replication(target: MockCluster) -> Iterator[tuple[ReplicationTask, PartitionTracker]]:
    """A task writing one partition of the target (see `_task`). Its producers are
    gone before the mock cluster: one left connected would reach the next test's
    cluster when that one gets the same port."""
    with _replicating(target) as made:
        yield made


@contextmanager
def _replicating(
    target: MockCluster, producer: Producer | None = None, timeout_ms: int = 1000
) -> Iterator[tuple[ReplicationTask, PartitionTracker]]:
    task, tracker = _task(target, producer, timeout_ms)
    yield task, tracker
    task._parts.writer.producer.flush(10)
    del task, tracker
    gc.collect()


def _task(
    target: MockCluster, producer: Producer | None, timeout_ms: int
) -> tuple[ReplicationTask, PartitionTracker]:
    """A task writing one partition through the producer the engine makes (or
    `producer`), with a user's producer settings: a queue of 100 records, a message
    timeout of `timeout_ms`."""
    flow = flow_config(
        ("primary", "localhost:1"),
        ("dr", target.bootstrap_servers),
        "orders",
        {
            "dr.producer.queue.buffering.max.messages": "100",
            "dr.producer.message.timeout.ms": str(timeout_ms),
            "replicator.data.path": "python",  # these are the Python loop's runs
        },
    )
    task = ReplicationTask(flow)
    task._compose(_Source(), _Acknowledged(), {}, producer, resume_points=None)  # type: ignore[arg-type]
    task._reporter.read_lag_with(task._parts.consumer)  # type: ignore[arg-type]
    tracker = PartitionTracker(
        flow.name, "orders", 0, _REMOTE, SizeHold(limit=1_000_000),
        next_offset=0, resuming=False, producer=task._parts.writer.producer,
    )  # fmt: skip
    task._parts.partitions.add(tracker)
    task._parts.writer.resumed_at(tracker, 0)
    return task, tracker


def _source(offsets: range) -> list[Message]:
    return [
        Message(
            topic="orders",
            partition=0,
            offset=offset,
            key=b"k%d" % offset,
            value=b"v",
            timestamp=(1, 1_700_000_000_000 + offset),
        )
        for offset in offsets
    ]


def _landed(target: MockCluster) -> list[tuple[int, int]]:
    """(target offset, source offset) of every replica on the target, in order."""
    consumer = Consumer({"bootstrap.servers": target.bootstrap_servers, "group.id": "read-back"})
    try:
        _low, high = consumer.get_watermark_offsets(TopicPartition(_REMOTE, 0), timeout=10)
        consumer.assign([TopicPartition(_REMOTE, 0, 0)])
        landed: list[tuple[int, int]] = []
        while len(landed) < high:
            messages = consumer.consume(high - len(landed), 10)
            assert messages, f"{len(landed)} of {high} replicas read back"
            for m in messages:
                assert m.error() is None, m.error()
                source = decode_offset(dict(m.headers())[OFFSET_HEADER])
                landed.append((m.offset(), source))
        return landed
    finally:
        consumer.close()


def _replicate_through_outage(
    task: ReplicationTask,
    tracker: PartitionTracker,
    target: MockCluster,
    rest: range | None = None,
) -> None:
    """Replicate the 1,000 records while the target's broker is down for 2.5 s (or,
    given `rest`, with the outage over: those records), then do what the loop does
    for a partition that rewound: once the producer settled what it had in flight,
    resume from the target tail and copy the rest."""
    if rest is None:
        target.broker_down()
        back = threading.Timer(_OUTAGE_S, target.broker_up)
        back.start()
        try:
            task._replicate(task._parts, _source(range(_RECORDS)))
        finally:
            back.join()
    else:
        task._replicate(task._parts, _source(rest))
    end = _RECORDS if rest is None else rest.stop
    tail = TailReader({"bootstrap.servers": target.bootstrap_servers}, "primary")
    try:
        for _ in range(5):
            assert task._parts.writer.producer.flush(30) == 0, "the producer did not settle in 30 s"
            if not tracker.resuming:
                break
            position = tail.position(_REMOTE, 0)
            resume = position.next_source_offset or 0
            task._parts.writer._draining = False
            tracker.resuming = False
            tracker.next_offset = resume
            task._parts.writer.resumed_at(tracker, position.target_end)
            task._polled_at = time.monotonic()  # as the loop's next consume does
            task._replicate(task._parts, _source(range(resume, end)))
        assert not tracker.resuming, "the partition kept rewinding"
    finally:
        tail.close()


def test_a_target_away_longer_than_the_message_timeout_leaves_every_record_once(
    replication: tuple[ReplicationTask, PartitionTracker], target: MockCluster
) -> None:
    """Issue 26's case: 1,000 records, a queue of 100, a 1 s message timeout, the
    broker down 2.5 s. Before the fix the run's report acknowledged 0-999 while
    300 records never landed."""
    task, tracker = replication
    _replicate_through_outage(task, tracker, target)

    landed = _landed(target)
    assert [source for _, source in landed] == list(range(_RECORDS))
    at = {source: offset for offset, source in landed}
    for run in task._parts.syncs.runs:  # type: ignore[attr-defined]
        # An acknowledged run is on the target, whole, its last record where reported.
        covered = range(run["first_source"], run["last_source"] + 1)
        assert all(source in at for source in covered), f"acknowledged past a gap: {run}"
        assert at[run["last_source"]] == run["target_offset"], run
    # Records in flight when the partition rewound landed without being acknowledged
    # (their reports were stale): the tail said where to go on.
    assert max(run["last_source"] for run in task._parts.syncs.runs) == _RECORDS - 1  # type: ignore[attr-defined]
    assert tracker.next_offset == _RECORDS
    assert not tracker.stopped


def test_a_run_whose_report_skips_target_offsets_is_not_acknowledged(target: MockCluster) -> None:
    """The defence behind the fix: should a producer still lose records inside a
    run (here one made outside the engine, whose librdkafka times them out), the
    run's report lands fewer target offsets after the last acknowledged one than
    the run has records. That run is not acknowledged: the partition stops, naming
    the records, instead of moving its position past records not on the target."""
    producer = Producer(
        {
            "bootstrap.servers": target.bootstrap_servers,
            "enable.idempotence": True,
            "enable.gapless.guarantee": True,
            "queue.buffering.max.messages": 100,
            "message.timeout.ms": 1000,
        }
    )
    with _replicating(target, producer) as (task, tracker):
        _lose_records_inside_a_run(task, tracker, target)


def _lose_records_inside_a_run(
    task: ReplicationTask, tracker: PartitionTracker, target: MockCluster
) -> None:
    # Only librdkafka's timeout applies.
    task._parts.writer.bounds = DeliveryBounds(deadline=None, wait=60)
    target.broker_down()
    back = threading.Timer(_OUTAGE_S, target.broker_up)
    back.start()
    try:
        task._replicate(task._parts, _source(range(_RECORDS)))
    finally:
        back.join()
    assert task._parts.writer.producer.flush(30) == 0

    landed = {source for _, source in _landed(target)}
    assert len(landed) < _RECORDS, "the producer lost nothing: the case did not happen"
    assert task._parts.syncs.runs == []  # type: ignore[attr-defined]
    assert tracker.stopped is not None
    assert "orders[0]" in tracker.stopped and "0..999" in tracker.stopped


def test_a_run_unacknowledged_past_the_message_timeout_rewinds_and_is_copied_once(
    replication: tuple[ReplicationTask, PartitionTracker], target: MockCluster
) -> None:
    """The engine keeps the user's message timeout as its deadline (its producer
    never times a record out): a run the target has not acknowledged after it
    rewinds the partition, which resumes from the target tail once it answers."""
    task, tracker = replication
    target.broker_down()
    try:
        task._replicate(task._parts, _source(range(10)))  # room enough: nothing waits
        assert not tracker.resuming
        time.sleep(1.2)  # past the flow's message.timeout.ms (1 s)
        task._parts.writer.check_deadline()
        assert tracker.resuming, "the run outlived the deadline and the partition went on"
    finally:
        target.broker_up()
    _replicate_through_outage(task, tracker, target, rest=range(10, 20))

    assert [source for _, source in _landed(target)] == list(range(20))


# -- partitions given up (issue 26, point 4) ---------------------------------------------


class _Group(_Source):
    """Stands in for the source consumer in a rebalance callback."""

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        pass


def _given_up_while_the_target_is_away(
    task: ReplicationTask, target: MockCluster, give_up: Callable[[], None]
) -> list[tuple[int, int]]:
    """Produce 50 records with the target away, `give_up` the partition, bring the
    target back: what lands on it after the partition was given up."""
    target.broker_down()
    try:
        task._replicate(task._parts, _source(range(50)))  # the queue takes them: nothing waits
        give_up()
        assert len(task._parts.partitions) == 0
    finally:
        target.broker_up()
    task._parts.writer.producer.flush(10)
    return _landed(target)


def test_a_lost_assignment_is_not_flushed_into_its_next_owners_partitions(
    target: MockCluster,
) -> None:
    """The group moved on without this worker: the next owner may already have read
    the target tail. Records this worker still holds are dropped, never flushed,
    even when the target answers again meanwhile (here 1 s into the callback)."""
    back = threading.Timer(1.0, target.broker_up)
    with _replicating(target, timeout_ms=300_000) as (task, _tracker):

        def lose() -> None:
            back.start()
            task._parts.rebalance.on_lost(_Group(), [TopicPartition("orders", 0)])  # type: ignore[arg-type]

        try:
            assert _given_up_while_the_target_is_away(task, target, lose) == []
        finally:
            back.join()


def test_a_revoke_during_a_rewind_leaves_nothing_in_flight_to_land_later(
    target: MockCluster,
) -> None:
    """Revoked while the partitions rewind (records did not reach the target): the
    flush is not skipped; records that do not land within its bound are dropped
    before the partition goes, so none lands after its next owner read the tail."""
    with _replicating(target, timeout_ms=300_000) as (task, _tracker):
        task._parts.writer.bounds = DeliveryBounds(deadline=None, wait=1.0)  # the flush's bound

        def revoke_while_rewinding() -> None:
            task._parts.writer._draining = True
            task._parts.rebalance.on_revoke(_Group(), [TopicPartition("orders", 0)])  # type: ignore[arg-type]

        assert _given_up_while_the_target_is_away(task, target, revoke_while_rewinding) == []
