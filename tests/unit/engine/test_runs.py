"""How the replication loop cuts a consumed batch into runs of one partition and
produces them: every replica once, in order, and a delivery report on the last
replica of each run only (the idempotent producer's success on it covers the run).
The end-to-end behaviour is tests/integration/engine/test_replication.py; here the
batch's shape is chosen: interleaved partitions, a run that ends with a record from
the target, a partition that is not ours.

Every record the loop is given was made by a consumer: produced to a source topic on
librdkafka's in-process mock cluster and read back from it (`_Source`), as the engine
gets them, never built in Python. The loop-prevention cases use the Identity policy:
there a record of the topic being replicated can be our copy of one from the target.

This is the Python loop, the reference (and the fallback where the compiled data plane
is absent). The replicas go through a real idempotent Producer to librdkafka's
in-process mock cluster and are read back from it, so what is checked is what actually
landed."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from prometheus_client import REGISTRY

from replicator.config.policies import IDENTITY_POLICY
from replicator.engine.headers import (
    OFFSET_HEADER,
    SOURCE_HEADER,
    TOPIC_HEADER,
    decode_offset,
    encode_offset,
)
from replicator.engine.partition import PartitionTracker
from replicator.engine.size_limits import SizeHold
from replicator.engine.task import ReplicationTask

from helpers.replication import flow_config

_REMOTE = "primary.orders"


class _RecordingProducer(Producer):
    """An idempotent producer on a mock cluster of its own that notes what the loop
    hands it: (partition, source offset, delivery report or None)."""

    def __init__(self, **config: Any) -> None:
        super().__init__({"test.mock.num.brokers": 1, "enable.idempotence": True, **config})
        self.produced: list[tuple[int, int, Any]] = []

    def produce(self, topic: str, *args: Any, **kwargs: Any) -> None:
        # As the task passes them: topic, value, key, partition by position (their
        # documented order), timestamp, headers and on_delivery by keyword.
        _value, _key, partition = args
        assert set(kwargs) <= {"timestamp", "headers", "on_delivery"}, kwargs
        assert topic.endswith(".orders") or topic.endswith(".payments")
        offset = decode_offset(dict(kwargs["headers"])[OFFSET_HEADER])
        assert offset is not None
        self.produced.append((partition, offset, kwargs.get("on_delivery")))
        super().produce(topic, *args, **kwargs)

    def landed(self, partitions: range, remote: str = _REMOTE) -> dict[int, list[tuple[Any, ...]]]:
        """What the mock cluster holds, per partition: (key, value, timestamp,
        headers) of each replica, in order."""
        assert self.flush(10) == 0
        broker = next(iter(self.list_topics(remote, timeout=10).brokers.values()))
        consumer = Consumer(
            {"bootstrap.servers": f"{broker.host}:{broker.port}", "group.id": "read-back"}
        )
        try:
            return {p: _read_partition(consumer, p, remote) for p in partitions}
        finally:
            consumer.close()


def _read_partition(
    consumer: Consumer, partition: int, remote: str = _REMOTE
) -> list[tuple[Any, ...]]:
    _low, high = consumer.get_watermark_offsets(TopicPartition(remote, partition), timeout=10)
    consumer.assign([TopicPartition(remote, partition, 0)])
    replicas: list[tuple[Any, ...]] = []
    while len(replicas) < high:
        messages = consumer.consume(high - len(replicas), 10)
        assert messages, f"partition {partition}: {len(replicas)} of {high} read back"
        for m in messages:
            assert m.error() is None, m.error()
            replicas.append((m.key(), m.value(), m.timestamp()[1], m.headers()))
    return replicas


@pytest.fixture
def producer() -> Iterator[_RecordingProducer]:
    yield _RecordingProducer()


@dataclass(frozen=True)
class _R:
    """A source record to be made: where it is, and what it holds. `origin`: it is
    our copy, on this topic, of a record that came from that cluster."""

    partition: int
    offset: int
    origin: bytes | None = None
    key: bytes | None = b"k"
    value: bytes | None = b"v"
    headers: tuple[tuple[str, bytes | None], ...] | None = None
    topic: str = "orders"

    def all_headers(self) -> list[tuple[str, bytes | None]] | None:
        if self.origin is None:
            return list(self.headers) if self.headers is not None else None
        ours = [(SOURCE_HEADER, self.origin), (TOPIC_HEADER, self.topic.encode())]
        return [*(self.headers or ()), *ours]


class _Source:
    """The source cluster: librdkafka's mock cluster, with topics `orders` and
    `payments` of 4 partitions (as it creates them on first use). `batch` produces
    the records asked for (at exactly the offsets asked for, with filler records
    before them) and returns them as a consumer reads them, in the order asked for."""

    def __init__(self) -> None:
        self.producer = Producer({"test.mock.num.brokers": 1, "log_level": 4})
        broker = next(iter(self.producer.list_topics(timeout=10).brokers.values()))
        self.bootstrap = f"{broker.host}:{broker.port}"
        self._next: dict[tuple[str, int], int] = {}

    def batch(self, records: Sequence[_R]) -> list[Message]:
        wanted = {(r.topic, r.partition, r.offset): r for r in records}
        for topic, partition in sorted({(r.topic, r.partition) for r in records}):
            start = self._next.get((topic, partition), 0)
            end = max(r.offset for r in records if (r.topic, r.partition) == (topic, partition))
            for offset in range(start, end + 1):
                r = wanted.get((topic, partition, offset), _R(partition, offset, topic=topic))
                self.producer.produce(
                    topic, r.value, r.key, partition, headers=r.all_headers(),
                    timestamp=1_700_000_000_000 + offset,
                )  # fmt: skip
            self._next[topic, partition] = end + 1
        assert self.producer.flush(10) == 0
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "source"})
        try:
            read: dict[tuple[str, int, int], Message] = {}
            for topic, partition in {(r.topic, r.partition) for r in records}:
                low = min(r.offset for r in records if (r.topic, r.partition) == (topic, partition))
                consumer.assign([TopicPartition(topic, partition, low)])
                end = self._next[topic, partition]
                while low + len([k for k in read if k[:2] == (topic, partition)]) < end:
                    messages = consumer.consume(end - low, 10)
                    assert messages, f"{topic}[{partition}]: not read back"
                    for m in messages:
                        assert m.error() is None, m.error()
                        read[m.topic(), m.partition(), m.offset()] = m
        finally:
            consumer.close()
        return [read[r.topic, r.partition, r.offset] for r in records]


@pytest.fixture
def source() -> _Source:
    return _Source()


def _record(partition: int, offset: int, origin: bytes | None = None, **fields: Any) -> _R:
    if "headers" in fields and fields["headers"] is not None:
        fields["headers"] = tuple(fields["headers"])
    return _R(partition, offset, origin, **fields)


def _ours(offset: int, topic: str = "orders") -> list[tuple[str, bytes]]:
    return [
        (SOURCE_HEADER, b"primary"),
        (OFFSET_HEADER, encode_offset(offset)),
        (TOPIC_HEADER, topic.encode()),
    ]


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


def _task(
    producer: Producer, partitions: range, topics: Sequence[str] = ("orders",)
) -> ReplicationTask:
    flow = flow_config(
        ("primary", "localhost:1"), ("dr", "localhost:2"), "orders|payments",
        {"replication.policy.class": IDENTITY_POLICY},
    )  # fmt: skip
    task = ReplicationTask(flow)
    task._compose(_Pausing(), _Acknowledged(), {}, producer, resume_points=None)  # type: ignore[arg-type]
    for topic in topics:
        for partition in partitions:
            tracker = PartitionTracker(
                flow.name, topic, partition, f"primary.{topic}", SizeHold(limit=1_000_000),
                next_offset=0, resuming=False, producer=producer,
            )  # fmt: skip
            task._parts.partitions.add(tracker)
    return task


def _delivered(task: ReplicationTask, producer: _RecordingProducer) -> list[tuple[int, ...]]:
    """Serve the delivery reports: (partition, first source, last source, count,
    target offset) of each run, as the offset syncs learn them, in source order."""
    assert producer.flush(10) == 0
    return sorted(
        (r["partition"], r["first_source"], r["last_source"], r["count"], r["target_offset"])
        for r in task._parts.syncs.runs  # type: ignore[attr-defined]
    )


def test_each_run_is_produced_in_order_with_one_report_on_its_last_replica(
    producer: _RecordingProducer, source: _Source
) -> None:
    task = _task(producer, range(2))
    batch = [
        _record(0, 10), _record(0, 11), _record(0, 12),
        _record(1, 5), _record(1, 6, origin=b"dr"),  # replicating it back would loop
        _record(3, 1),  # not ours: dropped
        _record(0, 13),
    ]  # fmt: skip
    task._replicate(task._parts, source.batch(batch))

    assert _delivered(task, producer) == [(0, 10, 12, 3, 2), (0, 13, 13, 1, 3), (1, 5, 5, 1, 0)]
    landed = producer.landed(range(2))
    assert [decode_offset(dict(r[3])[OFFSET_HEADER]) for r in landed[0]] == [10, 11, 12, 13]
    assert [decode_offset(dict(r[3])[OFFSET_HEADER]) for r in landed[1]] == [5]
    # Only a run's last replica carries a report.
    reports = [(p, o) for p, o, r in producer.produced if r is not None]
    assert reports == [(0, 12), (1, 5), (0, 13)]
    handed = [(p, o) for p, o, _ in producer.produced]
    assert handed == [(0, 10), (0, 11), *reports]
    # Where each partition continues: after its last record, replicated or skipped.
    assert task._parts.partitions.trackers["orders", 0].next_offset == 14
    assert task._parts.partitions.trackers["orders", 1].next_offset == 7
    assert task._parts.partitions.trackers["orders", 1].counters.skipped == 1
    assert task._parts.partitions.trackers["orders", 0].counters.replicated == 4


def test_a_run_of_records_from_the_target_produces_nothing_and_moves_on(
    producer: _RecordingProducer, source: _Source
) -> None:
    task = _task(producer, range(1))
    task._parts.partitions.trackers["orders", 0].next_offset = 3
    task._replicate(
        task._parts, source.batch([_record(0, 3, origin=b"dr"), _record(0, 4, origin=b"dr")])
    )
    assert producer.produced == []
    assert producer.landed(range(1)) == {0: []}
    assert task._parts.partitions.trackers["orders", 0].next_offset == 5


def test_a_replica_keeps_key_value_timestamp_partition_and_gets_our_headers(
    producer: _RecordingProducer, source: _Source
) -> None:
    task = _task(producer, range(4))
    task._parts.partitions.trackers["orders", 3].next_offset = 42
    task._replicate(task._parts,
        source.batch([
            _record(3, 42),
            _record(3, 43, key=None, value=None),
            _record(3, 44, key=b"", value=b""),
            _record(3, 45, headers=[("trace", b"abc"), ("empty", None)]),
            _record(3, 46, key=b"x" * 300, value=bytes(range(256)) * 40),
        ])
    )  # fmt: skip
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
    counted = task._parts.partitions.trackers["orders", 3].counters.replicated_bytes
    assert counted == own + 2 * (len(b"k") + len(b"v")) + 300 + 256 * 40


def test_a_consume_error_ends_the_run_and_is_handled_before_the_rest(
    producer: _RecordingProducer, source: _Source, caplog: pytest.LogCaptureFixture
) -> None:
    task = _task(producer, range(1))
    task._parts.partitions.trackers["orders", 0].next_offset = 10
    # The error is an event, not a record: a transient one cannot be had from the
    # mock cluster on demand, so it alone is made here; the records are consumed.
    transient = Message(
        topic="orders", partition=0, error=KafkaError(KafkaError._TRANSPORT, retriable=True)
    )
    first, second = source.batch([_record(0, 10), _record(0, 11)])
    task._replicate(task._parts, [first, transient, second])

    assert [(o, r.count) for _, o, r in producer.produced] == [(10, 1), (11, 1)]
    assert "transient consume error" in caplog.text
    assert task._parts.partitions.trackers["orders", 0].next_offset == 12


def test_a_run_longer_than_the_producer_queue_waits_for_room_and_loses_nothing(
    source: _Source,
) -> None:
    """The queue takes 100 records and the run has 1,000: produce() is refused
    (BufferError) until delivery reports free room."""
    producer = _RecordingProducer(**{"queue.buffering.max.messages": 100})
    task = _task(producer, range(1))
    task._replicate(task._parts, source.batch([_record(0, offset) for offset in range(1_000)]))

    assert _delivered(task, producer) == [(0, 0, 999, 1_000, 999)]
    landed = producer.landed(range(1))[0]
    assert [decode_offset(dict(r[3])[OFFSET_HEADER]) for r in landed] == list(range(1_000))
    assert task._parts.partitions.trackers["orders", 0].next_offset == 1_000


def test_a_record_too_large_for_the_remote_topic_splits_the_run(
    producer: _RecordingProducer, source: _Source
) -> None:
    """The run stops before it; the size policy holds the partition there until
    the remote topic's config is synced, and what came before it is delivered as a
    run of its own."""
    task = _task(producer, range(1))
    task._parts.partitions.trackers["orders", 0].size.limit = 50
    task._replicate(
        task._parts,
        source.batch([_record(0, 0), _record(0, 1), _record(0, 2, value=b"v" * 60), _record(0, 3)]),
    )

    assert _delivered(task, producer) == [(0, 0, 1, 2, 1)]
    assert task._parts.partitions.trackers["orders", 0].size.held
    assert task._parts.partitions.trackers["orders", 0].next_offset == 2
    assert task._parts.consumer.paused == [TopicPartition("orders", 0)]  # type: ignore[attr-defined]


def test_own_headers_loops_and_forwarded_provenance_inside_one_run(
    producer: _RecordingProducer, source: _Source, caplog: pytest.LogCaptureFixture
) -> None:
    """One partition's run mixes plain records with every other kind. A true loop (our
    copy of a record from the target, on this topic) is skipped; a record that merely
    forwards provenance naming another topic is the application's and is copied, its
    forwarded headers replaced by ours."""
    task = _task(producer, range(1))
    forwarded = ((SOURCE_HEADER, b"dr"), (TOPIC_HEADER, b"payments"), ("app", b"1"))
    task._replicate(task._parts,
        source.batch([
            _record(0, 0), _record(0, 1),
            _record(0, 2, headers=[("trace", b"t")]),
            _record(0, 3),
            _record(0, 4, origin=b"dr"),  # a loop
            _record(0, 5), _record(0, 6, key=None, value=None), _record(0, 7, key=b"", value=b""),
            _record(0, 8, headers=forwarded),  # an application's record
            _record(0, 9),
        ])
    )  # fmt: skip

    assert _delivered(task, producer) == [(0, 0, 9, 9, 8)]
    landed = producer.landed(range(1))[0]
    assert landed == [
        (b"k", b"v", 1_700_000_000_000, _ours(0)),
        (b"k", b"v", 1_700_000_000_001, _ours(1)),
        (b"k", b"v", 1_700_000_000_002, [("trace", b"t"), *_ours(2)]),
        (b"k", b"v", 1_700_000_000_003, _ours(3)),
        (b"k", b"v", 1_700_000_000_005, _ours(5)),
        (None, None, 1_700_000_000_006, _ours(6)),
        (b"", b"", 1_700_000_000_007, _ours(7)),
        (b"k", b"v", 1_700_000_000_008, [("app", b"1"), *_ours(8)]),
        (b"k", b"v", 1_700_000_000_009, _ours(9)),
    ]
    tracker = task._parts.partitions.trackers["orders", 0]
    assert (tracker.next_offset, tracker.counters.skipped) == (10, 1)
    # Not silent: a log line naming the partition and the first offset, the metric,
    # and the partition's status.
    assert "primary->dr: orders[0] offset 4 is not replicated: it is our copy" in caplog.text
    labels = {"flow": "primary->dr", "topic": "orders", "partition": "", "reason": "loop"}
    assert REGISTRY.get_sample_value("replicator_skipped_records_total", labels) >= 1
    status = task._reporter._partition_status(tracker, None)
    assert status.skip_note == "1 skipped as loop from offset 4"


def test_two_topics_with_the_same_partition_number_in_one_batch(
    producer: _RecordingProducer, source: _Source
) -> None:
    task = _task(producer, range(1), topics=("orders", "payments"))
    task._replicate(task._parts,
        source.batch([
            _record(0, 0), _record(0, 1), _record(0, 2),
            _R(0, 0, topic="payments"), _R(0, 1, topic="payments"),
            _record(0, 3),
        ])
    )  # fmt: skip

    assert producer.landed(range(1))[0] == [
        (b"k", b"v", 1_700_000_000_000 + o, _ours(o)) for o in range(4)
    ]
    assert producer.landed(range(1), "primary.payments")[0] == [
        (b"k", b"v", 1_700_000_000_000 + o, _ours(o, "payments")) for o in range(2)
    ]
    assert task._parts.partitions.trackers["orders", 0].next_offset == 4
    assert task._parts.partitions.trackers["payments", 0].next_offset == 2


def test_a_refusal_other_than_queue_full_inside_a_run_stops_the_flow_after_what_came_before(
    source: _Source,
) -> None:
    """The target producer refuses a record outright (larger than its
    message.max.bytes, though the remote topic would take it): produce() is refused;
    the records before it are on the
    target, in order, nothing after it was produced, and the flow stops naming the
    partition, the offsets and librdkafka's reason."""
    producer = _RecordingProducer(**{"message.max.bytes": 2_000})
    task = _task(producer, range(1))
    batch = source.batch(
        [_record(0, 0), _record(0, 1), _record(0, 2, value=b"v" * 3_000), _record(0, 3)]
    )
    task._replicate(task._parts, batch)
    landed = producer.landed(range(1))[0]
    assert [decode_offset(dict(r[3])[OFFSET_HEADER]) for r in landed] == [0, 1]
    assert task._fatal is not None
    assert "orders[0] offsets 2..2" in task._fatal, task._fatal
    assert "Message size too large" in task._fatal and "stopped" in task._fatal


def test_a_failed_batch_inside_a_run_acknowledges_nothing_and_rewinds(source: _Source) -> None:
    """The target takes nothing in time (every batch times out) while a run longer
    than the producer's queue waits for room: no record of the run is acknowledged,
    and the partition rewinds to resume from the target's tail."""
    producer = _RecordingProducer(
        **{
            "queue.buffering.max.messages": 100,
            "test.mock.broker.rtt": 2_000,
            "message.timeout.ms": 300,
        }
    )
    task = _task(producer, range(1))
    task._parts.syncs.rolled_back = lambda _key: None  # type: ignore[attr-defined]
    task._replicate(task._parts, source.batch([_record(0, offset) for offset in range(500)]))
    producer.flush(10)

    assert _delivered(task, producer) == []
    tracker = task._parts.partitions.trackers["orders", 0]
    assert tracker.resuming and tracker.counters.replicated == 0
    assert task._parts.partitions.waiting() == [tracker]
