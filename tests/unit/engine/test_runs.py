"""How the replication loop cuts a consumed batch into runs of one partition and
produces them: every replica once, in order, and a delivery report on the last
replica of each run only (the idempotent producer's success on it covers the run).
The end-to-end behaviour is tests/integration/engine/test_replication.py; here the
batch's shape is chosen: interleaved partitions, a run that ends with a record from
the target, a partition that is not ours."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Message

from replicator.engine.headers import OFFSET_HEADER, SOURCE_HEADER, decode_offset
from replicator.engine.partition import PartitionTracker
from replicator.engine.size_limits import SizeHold
from replicator.engine.task import ReplicationTask

from helpers.replication import flow_config


class _RecordingProducer:
    """What the target producer was handed: (partition, source offset, has a report)."""

    def __init__(self) -> None:
        self.produced: list[tuple[int, int, Any]] = []

    def produce(self, topic: str, *args: Any) -> None:
        # By position, as the task passes them (confluent-kafka's order).
        _value, _key, partition, on_delivery, _callback, _timestamp, headers = args
        assert topic == "primary.orders"
        offset = decode_offset(dict(headers)[OFFSET_HEADER])
        assert offset is not None
        self.produced.append((partition, offset, on_delivery))


def _record(partition: int, offset: int, origin: bytes | None = None) -> Message:
    headers = [(SOURCE_HEADER, origin)] if origin else None
    return Message(
        topic="orders", partition=partition, offset=offset, key=b"k", value=b"v",
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
