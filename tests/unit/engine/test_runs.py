"""How the replication loop cuts a consumed batch into runs of one partition and
produces them: every replica once, in order, and a delivery report on the last
replica of each run only (the idempotent producer's success on it covers the run).
The end-to-end behaviour is tests/integration/engine/test_replication.py; here the
batch's shape is chosen: interleaved partitions, a run that ends with a record from
the target, a partition that is not ours."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, Message

from replicator.engine.headers import OFFSET_HEADER, SOURCE_HEADER, decode_offset, encode_offset
from replicator.engine.partition import PartitionTracker
from replicator.engine.size_limits import SizeHold
from replicator.engine.task import ReplicationTask

from helpers.replication import flow_config


class _RecordingProducer:
    """What the target producer was handed: (partition, source offset, has a report),
    and each replica whole in `replicas`."""

    def __init__(self) -> None:
        self.produced: list[tuple[int, int, Any]] = []
        self.replicas: list[tuple[Any, ...]] = []

    def produce(self, topic: str, *args: Any) -> None:
        # By position, as the task passes them (confluent-kafka's order).
        value, key, partition, on_delivery, _callback, timestamp, headers = args
        assert topic == "primary.orders"
        offset = decode_offset(dict(headers)[OFFSET_HEADER])
        assert offset is not None
        self.produced.append((partition, offset, on_delivery))
        self.replicas.append((partition, key, value, timestamp, headers))


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


def _task(producer: _RecordingProducer, partitions: range) -> ReplicationTask:
    flow = flow_config(("primary", "localhost:1"), ("dr", "localhost:2"), "orders")
    task = ReplicationTask(flow)
    for partition in partitions:
        tracker = PartitionTracker(
            flow.name, "orders", partition, "primary.orders", SizeHold(limit=1_000_000),
            next_offset=0, resuming=False, producer=producer,  # type: ignore[arg-type]
        )  # fmt: skip
        task._trackers[tracker.key] = tracker
    return task


def test_each_run_is_produced_in_order_with_one_report_on_its_last_replica() -> None:
    producer = _RecordingProducer()
    task = _task(producer, range(2))
    batch = [
        _record(0, 10), _record(0, 11), _record(0, 12),
        _record(1, 5), _record(1, 6, origin=b"dr"),  # replicating it back would loop
        _record(7, 1),  # not ours: dropped
        _record(0, 13),
    ]  # fmt: skip
    task._replicate(batch)

    assert [(p, o) for p, o, _ in producer.produced] == [(0, 10), (0, 11), (0, 12), (1, 5), (0, 13)]
    reports = [(p, o, r) for p, o, r in producer.produced if r is not None]
    assert [(r.first_source, r.last_source, r.count) for _, _, r in reports] == [
        (10, 12, 3),
        (5, 5, 1),
        (13, 13, 1),
    ]
    assert [(p, o) for p, o, _ in reports] == [(0, 12), (1, 5), (0, 13)]
    # Where each partition continues: after its last record, replicated or skipped.
    assert task._trackers["orders", 0].next_offset == 14
    assert task._trackers["orders", 1].next_offset == 7
    assert task._trackers["orders", 1].counters.skipped == 1


def test_a_run_of_records_from_the_target_produces_nothing_and_moves_on() -> None:
    producer = _RecordingProducer()
    task = _task(producer, range(1))
    task._replicate([_record(0, 3, origin=b"dr"), _record(0, 4, origin=b"dr")])
    assert producer.produced == []
    assert task._trackers["orders", 0].next_offset == 5


def test_a_replica_keeps_key_value_timestamp_partition_and_gets_our_headers() -> None:
    producer = _RecordingProducer()
    task = _task(producer, range(4))
    task._replicate(
        [
            _record(3, 42),
            _record(3, 43, key=None, value=None),
            _record(3, 44, headers=[("trace", b"abc"), ("empty", None)]),
        ]
    )
    ours = [(SOURCE_HEADER, b"primary"), (OFFSET_HEADER, encode_offset(42))]
    assert producer.replicas[0] == (3, b"k", b"v", 1_700_000_000_042, ours)
    assert producer.replicas[1][1:3] == (None, None)  # null key and value stay null
    assert producer.replicas[2][4] == [
        ("trace", b"abc"),
        ("empty", None),
        (SOURCE_HEADER, b"primary"),
        (OFFSET_HEADER, encode_offset(44)),
    ]
    # Key, value and the record's own headers are what count against the remote
    # topic's max.message.bytes (ours fit in the headroom topic sync adds).
    own = (5 + 3 + 10) + (5 + 0 + 10)
    counted = task._trackers["orders", 3].counters.replicated_bytes
    assert counted == own + 2 * (len(b"k") + len(b"v"))


def test_a_consume_error_ends_the_run_and_is_handled_before_the_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    producer = _RecordingProducer()
    task = _task(producer, range(1))
    transient = Message(
        topic="orders", partition=0, error=KafkaError(KafkaError._TRANSPORT, retriable=True)
    )
    task._replicate([_record(0, 10), transient, _record(0, 11)])

    assert [(o, r.count) for _, o, r in producer.produced] == [(10, 1), (11, 1)]
    assert "transient consume error" in caplog.text
    assert task._trackers["orders", 0].next_offset == 12
