"""Replication on the real clusters: exact copies, nothing lost, nothing doubled."""

from __future__ import annotations

import time

import pytest

from replicator.engine.headers import OFFSET_HEADER, OURS, SOURCE_HEADER, decode_offset

from helpers.kafka import Record, create_topic, produce_records, read_partition, unique_topic
from helpers.replication import end_offsets, flow_config, running, wait_until

pytestmark = pytest.mark.integration


def _records(count: int) -> list[Record]:
    """Keys, null keys, tombstones (null values), headers and explicit timestamps.

    Timestamps are recent: older than the brokers' 7-day retention, records are
    deleted by retention on the target (and source) within minutes."""
    base = int(time.time() * 1000) - 3_600_000
    return [
        Record(
            key=None if i % 11 == 0 else f"k{i % 500}".encode(),
            value=None if i % 13 == 0 else (b"v%d-" % i) * (1 + i % 7),
            headers=(("h", str(i).encode()), ("dup", b"1"), ("dup", b"2")) if i % 3 else (),
            timestamp=base + i * 7,
        )
        for i in range(count)
    ]


def _own(record: Record) -> Record:
    """A target record with our headers removed."""
    headers = tuple((k, v) for k, v in record.headers if k not in OURS)
    return Record(record.key, record.value, headers, record.timestamp)


def test_exact_copy_of_100k_records_over_12_partitions(primary: str, dr: str) -> None:
    topic = unique_topic("exact")
    create_topic(primary, topic, partitions=12)
    produced = produce_records(primary, topic, _records(100_000))
    flow = flow_config(("primary", primary), ("dr", dr), topics=topic)
    remote = f"primary.{topic}"

    with running(flow):
        wanted = [len(produced.get(p, [])) for p in range(12)]
        wait_until(lambda: end_offsets(dr, remote, 12) == wanted, 60, f"{wanted} on dr")

    for partition in range(12):
        copied = read_partition(dr, remote, partition)
        source = produced.get(partition, [])
        assert [_own(r) for _, r in copied] == [r for _, r in source]
        assert [decode_offset(dict(r.headers)[OFFSET_HEADER]) for _, r in copied] == [
            o for o, _ in source
        ]
        assert all(dict(r.headers)[SOURCE_HEADER] == b"primary" for _, r in copied)
