"""How the replication loop cuts a consumed batch into runs of one partition and
produces them: every replica once, in order, and a delivery report on the last
replica of each run only (the idempotent producer's success on it covers the run).
The end-to-end behaviour is tests/integration/engine/test_replication.py; here the
batch's shape is chosen: interleaved partitions, a run that ends with a record from
the target, a partition that is not ours.

Each test runs twice: with the C span producer (`native_spans.c`, what the engine
uses when built) and with the Python loop alone. The replicas go through a real
idempotent Producer to librdkafka's in-process mock cluster and are read back from
it, so both paths are checked on what actually landed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from replicator.engine.headers import OFFSET_HEADER, SOURCE_HEADER, decode_offset, encode_offset
from replicator.engine.partition import PartitionTracker
from replicator.engine.size_limits import SizeHold
from replicator.engine.spans import span_producer
from replicator.engine.task import ReplicationTask

from helpers.replication import flow_config

_REMOTE = "primary.orders"


class _RecordingProducer(Producer):
    """An idempotent producer on a mock cluster of its own that notes what the loop
    hands it from Python: (partition, source offset, delivery report or None). The C
    span producer writes to the same handle without passing through here."""

    def __init__(self, **config: Any) -> None:
        super().__init__({"test.mock.num.brokers": 1, "enable.idempotence": True, **config})
        self.produced: list[tuple[int, int, Any]] = []

    def produce(self, topic: str, *args: Any) -> None:
        # By position, as the task passes them (confluent-kafka's order).
        _value, _key, partition, on_delivery, _callback, _timestamp, headers = args
        assert topic == _REMOTE
        offset = decode_offset(dict(headers)[OFFSET_HEADER])
        assert offset is not None
        self.produced.append((partition, offset, on_delivery))
        super().produce(topic, *args)

    def landed(self, partitions: range) -> dict[int, list[tuple[Any, ...]]]:
        """What the mock cluster holds, per partition: (key, value, timestamp,
        headers) of each replica, in order."""
        assert self.flush(10) == 0
        broker = next(iter(self.list_topics(_REMOTE, timeout=10).brokers.values()))
        consumer = Consumer(
            {"bootstrap.servers": f"{broker.host}:{broker.port}", "group.id": "read-back"}
        )
        try:
            return {p: _read_partition(consumer, p) for p in partitions}
        finally:
            consumer.close()


def _read_partition(consumer: Consumer, partition: int) -> list[tuple[Any, ...]]:
    _low, high = consumer.get_watermark_offsets(TopicPartition(_REMOTE, partition), timeout=10)
    consumer.assign([TopicPartition(_REMOTE, partition, 0)])
    replicas: list[tuple[Any, ...]] = []
    while len(replicas) < high:
        messages = consumer.consume(high - len(replicas), 10)
        assert messages, f"partition {partition}: {len(replicas)} of {high} read back"
        for m in messages:
            assert m.error() is None, m.error()
            replicas.append((m.key(), m.value(), m.timestamp()[1], m.headers()))
    return replicas


@pytest.fixture(params=["native", "python"])
def path(request: pytest.FixtureRequest) -> str:
    """Which loop produces plain records: the C span producer, or Python alone."""
    if request.param == "native":
        assert span_producer("primary") is not None, "the C span producer is not built"
    return request.param


@pytest.fixture
def producer() -> Iterator[_RecordingProducer]:
    yield _RecordingProducer()


def _record(
    partition: int,
    offset: int,
    origin: bytes | None = None,
    *,
    key: bytes | None = b"k",
    value: bytes | None = b"v",
    headers: list[tuple[str, bytes | None]] | None = None,
) -> Message:
    if origin:
        headers = [*(headers or []), (SOURCE_HEADER, origin)]
    return Message(
        topic="orders", partition=partition, offset=offset, key=key, value=value,
        headers=headers, timestamp=(1, 1_700_000_000_000 + offset),
    )  # fmt: skip


def _ours(offset: int) -> list[tuple[str, bytes]]:
    return [(SOURCE_HEADER, b"primary"), (OFFSET_HEADER, encode_offset(offset))]


class _Pausing:
    """Stands in for the source consumer: a policy that holds a partition pauses it."""

    def __init__(self) -> None:
        self.paused: list[TopicPartition] = []

    def pause(self, partitions: list[TopicPartition]) -> None:
        self.paused += partitions


class _Acknowledged:
    """Stands in for the offset-sync writer: the delivered runs, as it is told them."""

    def __init__(self) -> None:
        self.runs: list[dict[str, Any]] = []

    def acknowledged(self, key: tuple[str, int], **run: Any) -> None:
        self.runs.append({"partition": key[1], **run})


def _task(producer: Producer, partitions: range, path: str) -> ReplicationTask:
    flow = flow_config(("primary", "localhost:1"), ("dr", "localhost:2"), "orders")
    task = ReplicationTask(flow)
    task._syncs = _Acknowledged()  # type: ignore[assignment]
    task._consumer = _Pausing()  # type: ignore[assignment]
    if path == "python":
        task._spans = None
    for partition in partitions:
        tracker = PartitionTracker(
            flow.name, "orders", partition, _REMOTE, SizeHold(limit=1_000_000),
            next_offset=0, resuming=False, producer=producer,
        )  # fmt: skip
        task._trackers[tracker.key] = tracker
    return task


def _delivered(task: ReplicationTask, producer: _RecordingProducer) -> list[tuple[int, ...]]:
    """Serve the delivery reports: (partition, first source, last source, count,
    target offset) of each run, as the offset syncs learn them, in source order."""
    assert producer.flush(10) == 0
    return sorted(
        (r["partition"], r["first_source"], r["last_source"], r["count"], r["target_offset"])
        for r in task._syncs.runs  # type: ignore[attr-defined]
    )


def test_each_run_is_produced_in_order_with_one_report_on_its_last_replica(
    path: str, producer: _RecordingProducer
) -> None:
    task = _task(producer, range(2), path)
    batch = [
        _record(0, 10), _record(0, 11), _record(0, 12),
        _record(1, 5), _record(1, 6, origin=b"dr"),  # replicating it back would loop
        _record(7, 1),  # not ours: dropped
        _record(0, 13),
    ]  # fmt: skip
    task._replicate(batch)

    assert _delivered(task, producer) == [(0, 10, 12, 3, 2), (0, 13, 13, 1, 3), (1, 5, 5, 1, 0)]
    landed = producer.landed(range(2))
    assert [decode_offset(dict(r[3])[OFFSET_HEADER]) for r in landed[0]] == [10, 11, 12, 13]
    assert [decode_offset(dict(r[3])[OFFSET_HEADER]) for r in landed[1]] == [5]
    # Only a run's last replica carries a report; the C span producer writes the rest.
    reports = [(p, o) for p, o, r in producer.produced if r is not None]
    assert reports == [(0, 12), (1, 5), (0, 13)]
    handed = [(p, o) for p, o, _ in producer.produced]
    assert handed == (reports if path == "native" else [(0, 10), (0, 11), *reports])
    # Where each partition continues: after its last record, replicated or skipped.
    assert task._trackers["orders", 0].next_offset == 14
    assert task._trackers["orders", 1].next_offset == 7
    assert task._trackers["orders", 1].counters.skipped == 1
    assert task._trackers["orders", 0].counters.replicated == 4


def test_a_run_of_records_from_the_target_produces_nothing_and_moves_on(
    path: str, producer: _RecordingProducer
) -> None:
    task = _task(producer, range(1), path)
    task._replicate([_record(0, 3, origin=b"dr"), _record(0, 4, origin=b"dr")])
    assert producer.produced == []
    assert producer.landed(range(1)) == {0: []}
    assert task._trackers["orders", 0].next_offset == 5


def test_a_replica_keeps_key_value_timestamp_partition_and_gets_our_headers(
    path: str, producer: _RecordingProducer
) -> None:
    task = _task(producer, range(4), path)
    task._replicate(
        [
            _record(3, 42),
            _record(3, 43, key=None, value=None),
            _record(3, 44, key=b"", value=b""),
            _record(3, 45, headers=[("trace", b"abc"), ("empty", None)]),
            _record(3, 46, key=b"x" * 300, value=bytes(range(256)) * 40),
        ]
    )
    assert producer.landed(range(3, 4))[3] == [
        (b"k", b"v", 1_700_000_000_042, _ours(42)),
        (None, None, 1_700_000_000_043, _ours(43)),  # null key and value stay null
        (b"", b"", 1_700_000_000_044, _ours(44)),  # empty ones stay empty
        (b"k", b"v", 1_700_000_000_045, [("trace", b"abc"), ("empty", None), *_ours(45)]),
        (b"x" * 300, bytes(range(256)) * 40, 1_700_000_000_046, _ours(46)),
    ]
    # Key, value and the record's own headers are what count against the remote
    # topic's max.message.bytes (ours fit in the headroom topic sync adds).
    own = (5 + 3 + 10) + (5 + 0 + 10)
    counted = task._trackers["orders", 3].counters.replicated_bytes
    assert counted == own + 2 * (len(b"k") + len(b"v")) + 300 + 256 * 40


def test_a_consume_error_ends_the_run_and_is_handled_before_the_rest(
    path: str, producer: _RecordingProducer, caplog: pytest.LogCaptureFixture
) -> None:
    task = _task(producer, range(1), path)
    transient = Message(
        topic="orders", partition=0, error=KafkaError(KafkaError._TRANSPORT, retriable=True)
    )
    task._replicate([_record(0, 10), transient, _record(0, 11)])

    assert [(o, r.count) for _, o, r in producer.produced] == [(10, 1), (11, 1)]
    assert "transient consume error" in caplog.text
    assert task._trackers["orders", 0].next_offset == 12


def test_a_run_longer_than_the_producer_queue_waits_for_room_and_loses_nothing(
    path: str,
) -> None:
    """The queue takes 100 records and the run has 1,000: produce() is refused
    (BufferError in Python, QUEUE_FULL in C) until delivery reports free room."""
    producer = _RecordingProducer(**{"queue.buffering.max.messages": 100})
    task = _task(producer, range(1), path)
    task._replicate([_record(0, offset) for offset in range(1_000)])

    assert _delivered(task, producer) == [(0, 0, 999, 1_000, 999)]
    landed = producer.landed(range(1))[0]
    assert [decode_offset(dict(r[3])[OFFSET_HEADER]) for r in landed] == list(range(1_000))
    assert task._trackers["orders", 0].next_offset == 1_000


def test_a_record_too_large_for_the_remote_topic_splits_the_run(
    path: str, producer: _RecordingProducer
) -> None:
    """The C span stops before it; the size policy holds the partition there until
    the remote topic's config is synced, and what came before it is delivered as a
    run of its own."""
    task = _task(producer, range(1), path)
    task._trackers["orders", 0].size.limit = 50
    task._replicate([_record(0, 0), _record(0, 1), _record(0, 2, value=b"v" * 60), _record(0, 3)])

    assert _delivered(task, producer) == [(0, 0, 1, 2, 1)]
    assert task._trackers["orders", 0].size.held
    assert task._trackers["orders", 0].next_offset == 2
    assert task._consumer.paused == [TopicPartition("orders", 0)]  # type: ignore[attr-defined]
