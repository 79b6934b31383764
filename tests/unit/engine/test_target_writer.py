"""The target writer alone (`replicator.engine.target_writer`): the producer's life
(settings, replacement after a fatal error, a new one for new size limits), a run
written with one report on its last replica, a record too large for its remote
topic held for a config sync and then fetched again, and a target that takes
nothing rewinding the partitions. Its producer is a fake that records what it is
handed (the Python path; the C span producer reads a real producer's handle and is
tested on real clients in test_runs.py), its partitions the real `Partitions` over
a fake consumer."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from confluent_kafka import KafkaError

from replicator.engine.headers import OFFSET_HEADER, decode_offset
from replicator.engine.partitions import Partitions
from replicator.engine.replica_producers import DeliveryBounds
from replicator.engine.size_limits import RECORD_OVERHEAD
from replicator.engine.target_writer import TargetWriter

from helpers.engine_fakes import (
    FakeConsumer,
    FakeProducer,
    FakeReporter,
    FakeSyncs,
    FakeTopics,
    flow,
    record,
    tracker,
)


class _Writer:
    """A target writer over fakes, and what it did to them."""

    def __init__(self, topics: FakeTopics | None = None, **properties: str) -> None:
        self.flow = flow(**properties)
        self.consumer = FakeConsumer()
        self.syncs = FakeSyncs()
        self.reporter = FakeReporter()
        self.partitions = Partitions(self.flow.name, self.consumer, self.syncs, self.reporter)  # type: ignore[arg-type]
        self.topics = topics or FakeTopics()
        self.producers: list[FakeProducer] = []
        self.failures: list[tuple[str, bool]] = []
        self.polled_at = time.monotonic()
        self.writer = TargetWriter(
            self.flow,
            self.partitions,
            self.syncs,  # type: ignore[arg-type]
            self.reporter,  # type: ignore[arg-type]
            topics=self.topics,
            fail=self.fail,
            stopping=threading.Event(),
            last_poll=lambda: self.polled_at,
            make_producer=self.make,
        )
        self.writer.start({})

    def make(self, config: dict[str, object]) -> Any:
        producer = FakeProducer(config)
        self.producers.append(producer)
        return producer

    def fail(self, message: str, *, access: bool = False) -> None:
        self.failures.append((message, access))

    def replicating(self, partition: int = 0, next_offset: int = 0) -> Any:
        """A partition that replicates with the writer's producer."""
        made = tracker(partition, next_offset=next_offset)
        self.partitions.add(made)
        self.writer.for_partition(made)
        return made


@pytest.fixture
def w() -> _Writer:
    return _Writer()


def _offsets(producer: FakeProducer) -> list[int | None]:
    return [decode_offset(dict(headers)[OFFSET_HEADER]) for *_, headers in producer.produced]


def test_the_producer_is_made_with_what_the_guarantees_rest_on() -> None:
    w = _Writer(**{"dr.producer.delivery.timeout.ms": "5000", "dr.producer.linger.ms": "5"})
    config = w.producers[0].config
    assert config["linger.ms"] == "5"  # the user's tuning is kept
    assert config["enable.idempotence"] is True
    assert config["enable.gapless.guarantee"] is True
    assert config["message.timeout.ms"] == 0  # the engine keeps the user's timeout itself
    assert "delivery.timeout.ms" not in config
    assert callable(config["error_cb"])
    assert w.writer.bounds == DeliveryBounds(deadline=5.0, wait=5.0)
    assert w.reporter.writers == [w.producers[0]]  # status goes through it too


def test_a_producer_handed_in_is_the_one_used_even_with_nothing_queued() -> None:
    w = _Writer()
    given = FakeProducer({})
    assert not given  # nothing queued: falsy, as a real producer is
    w.writer.start({}, producer=given)
    assert w.reporter.writers[-1] is given
    assert len(w.producers) == 1  # the one `_Writer` started with; none made for this


def test_a_run_is_produced_in_order_and_acknowledged_by_the_report_of_its_last_replica(
    w: _Writer,
) -> None:
    one = w.replicating(next_offset=10)
    batch = [record(10), record(11), record(12), record(0, partition=1)]
    assert w.writer.write_run(one, batch, 0) == 3  # the next run starts there
    producer = w.producers[0]
    assert _offsets(producer) == [10, 11, 12]
    reports = [report for report, _ in producer.held]
    assert reports[:2] == [None, None] and reports[2] is not None
    assert one.next_offset == 13
    assert w.writer.in_flight() == {("orders", 0)}

    w.writer.resumed_at(one, 100)
    producer.deliver(first_offset=100)
    assert w.syncs.acknowledged_runs == [
        {
            "key": ("orders", 0),
            "first_source": 10,
            "last_source": 12,
            "count": 3,
            "target_offset": 102,
            "timestamp_ms": 1_700_000_000_000,
        }
    ]
    assert (one.counters.replicated, one.acked_next) == (3, 13)
    assert w.writer.in_flight() == set()


def test_a_fatal_producer_error_replaces_the_producer_and_stops_the_task(w: _Writer) -> None:
    one, other = w.replicating(0), w.replicating(1)
    spent = w.producers[0]
    w.writer.on_fatal(KafkaError(KafkaError._FATAL, "gapless guarantee tripped", fatal=True))

    assert len(w.producers) == 2
    new = w.producers[1]
    assert w.writer.producer is new
    assert one.producer is new and other.producer is new  # nothing more goes to the old
    assert w.reporter.writers[-1] is new  # the task's last status gets out
    assert new is not spent and not w.writer.spent
    [(message, access)] = w.failures
    assert "the producer to 'dr' failed fatally" in message and not access


def test_a_rejected_batch_spends_the_producer_until_it_is_replaced(w: _Writer) -> None:
    one = w.replicating(0)
    w.writer.write_run(one, [record(0), record(1)], 0)
    w.writer.resumed_at(one, 0)
    w.producers[0].deliver(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "too large"))

    assert w.writer.spent
    [(message, _)] = w.failures
    assert "orders[0] offsets 0..1" in message and "rejected records for primary.orders" in message
    assert w.syncs.acknowledged_runs == []
    w.writer.replace_spent()
    assert not w.writer.spent and len(w.producers) == 2


def test_an_oversized_record_is_held_for_a_config_sync_then_fetched_again(w: _Writer) -> None:
    one = w.replicating(0)
    too_large = record(1, value=b"v" * 2_000)  # the partition's limit is 1,000 bytes
    batch = [record(0), too_large, record(2)]

    assert w.writer.write_run(one, batch, 0) == 3  # the rest of the run waits
    assert _offsets(w.producers[0]) == [0]
    assert one.size.held and one.next_offset == 1
    assert w.consumer.paused() == [("orders", 0)]
    assert w.partitions.replicating(one.key) is None

    # The source topic's limit was raised: the sync brings it to the remote topic.
    w.topics.limits = {"primary.orders": 2_000_000}
    w.writer.resync_held()
    assert w.topics.synced == [{"orders": 1}]
    assert not one.size.held
    assert one.size.limit == 2_000_000 - RECORD_OVERHEAD
    # A producer for the larger records, made once the old one's records landed.
    assert w.producers[0].flushes and len(w.producers) == 2
    assert one.producer is w.producers[1]
    assert w.consumer.calls[-2:] == [
        ("assign", [("orders", 0, 1)]),
        ("resume", [("orders", 0, -1001)]),
    ]

    assert w.writer.write_run(one, [too_large, record(2)], 0) == 2
    assert _offsets(w.producers[1]) == [1, 2]


def test_an_oversized_record_still_too_large_after_the_sync_stops_its_partition(
    w: _Writer,
) -> None:
    one, other = w.replicating(0), w.replicating(1)
    too_large = record(1, value=b"v" * 2_000)
    w.writer.write_run(one, [record(0), too_large], 0)
    w.topics.limits = {"primary.orders": 1_000 + RECORD_OVERHEAD}  # not raised at the source
    w.writer.resync_held()
    assert one.size.limit == 1_000 and not one.size.held

    w.writer.write_run(one, [too_large, record(2)], 0)
    assert one.stopped is not None and "orders[0] offset 1" in one.stopped
    assert "oversized.record.policy" in one.stopped
    assert one.next_offset == 1  # it stops at the record
    assert other.stopped is None
    assert [_offsets(p) for p in w.producers] == [[0], []]


def test_an_oversized_record_is_skipped_when_the_policy_says_so() -> None:
    w = _Writer(**{"oversized.record.policy": "skip", "sync.topic.configs.enabled": "false"})
    one = w.replicating(0)
    w.writer.write_run(one, [record(0), record(1, value=b"v" * 2_000), record(2)], 0)
    assert _offsets(w.producers[0]) == [0, 2]
    assert one.counters.skipped == 1 and one.next_offset == 3


def test_a_target_that_takes_nothing_for_too_long_rewinds_every_partition(w: _Writer) -> None:
    one, other = w.replicating(0), w.replicating(1)
    w.writer.bounds = DeliveryBounds(deadline=None, wait=0.1)
    w.polled_at = time.monotonic() - 1  # the consumer was polled longer ago than that
    w.producers[0].room = 2

    assert w.writer.write_run(one, [record(o) for o in range(5)], 0) == 5
    assert _offsets(w.producers[0]) == [0, 1]
    assert one.resuming and other.resuming
    assert w.producers[0].purges == [(True, False)]  # queued records dropped, none in flight
    assert w.writer.draining and not w.writer.settled()  # the two in flight may yet land
    w.producers[0].deliver()
    assert w.writer.settled() and not w.writer.draining


def test_partitions_given_up_are_flushed_or_their_records_dropped(w: _Writer) -> None:
    one = w.replicating(0)
    w.writer.write_run(one, [record(0)], 0)
    producer = w.producers[0]
    producer.flush_leaves = 1  # the target does not take it within the flush bound
    w.writer.release(lost=False)
    assert producer.flushes and producer.purges == [(True, True)]  # in flight dropped too
    assert one.resuming

    other = w.replicating(1)
    w.writer.write_run(other, [record(0, partition=1)], 0)
    producer.flushes.clear()
    w.writer.release(lost=True)  # the next owner may have read the tail: never flushed
    assert producer.flushes == []
    assert producer.purges[-1] == (True, True)


def test_a_run_unacknowledged_past_the_deadline_rewinds_every_partition(w: _Writer) -> None:
    one = w.replicating(0)
    w.writer.bounds = DeliveryBounds(deadline=0.0, wait=1.0)
    w.writer.write_run(one, [record(0)], 0)
    w.writer.check_deadline()
    assert one.resuming
