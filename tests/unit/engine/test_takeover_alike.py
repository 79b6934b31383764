"""A takeover from MM2 on a topic of records alike (heartbeats, status pings,
counters): where MM2's copy ends is proven by a sequence only one position explains,
never by the first target record that looks like MM2's committed one.

The issue's case (issue 44): 40 identical records, MM2 copied 0..11 and committed 9,
and left no offset sync. The first match of record 9's content is target offset 0, and
from there every target record "matched": the plan said exact, start 21, and 12..20
were never copied. Now several positions explain the target, so the partition is not
proven; at-least-once starts at MM2's committed offset, before the true end (12)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from replicator.config.model import FlowConfig
from replicator.engine.mm2_state import mm2_offset_key
from replicator.engine.takeover import TakeoverPlanner

from helpers.mock_cluster import flow_on, mock_cluster

TOPIC, REMOTE, OFFSETS = "pings", "primary.pings", "mm2-offsets.primary.internal"
STAMP = 1_700_000_000_000


@pytest.fixture
def flow(tmp_path: Path) -> Iterator[FlowConfig]:
    with mock_cluster() as cluster:
        for topic in (TOPIC, REMOTE, OFFSETS):
            cluster.create_topic(topic, 1)
        yield flow_on(cluster, tmp_path)


def _write(flow: FlowConfig, topic: str, values: list[bytes], key: bytes | None = None) -> None:
    producer = Producer({"bootstrap.servers": flow.source.bootstrap_servers})
    for value in values:
        producer.produce(topic, value, key, 0, timestamp=STAMP)
    assert producer.flush(10) == 0


def _mm2_committed(flow: FlowConfig, offset: int) -> None:
    value = json.dumps({"offset": offset}).encode()
    _write(flow, OFFSETS, [value], key=mm2_offset_key("primary", TOPIC, 0))


def test_identical_records_without_an_offset_sync_are_not_taken_as_proven(flow) -> None:
    _write(flow, TOPIC, [b"ping"] * 40)
    _write(flow, REMOTE, [b"ping"] * 12)  # MM2's copies of 0..11
    _mm2_committed(flow, 9)
    with TakeoverPlanner(flow) as planner:
        point = planner.point(TOPIC, 0, REMOTE)
    assert point is not None
    assert point.uncertain > 0, point.describe()
    assert point.start == 10 <= 12, point.describe()  # at-least-once: never past the end
    assert "cannot be told" in point.reason


def test_distinct_records_are_still_proven_exactly(flow) -> None:
    _write(flow, TOPIC, [b"v%d" % i for i in range(40)])
    _write(flow, REMOTE, [b"v%d" % i for i in range(12)])
    _mm2_committed(flow, 9)
    with TakeoverPlanner(flow) as planner:
        point = planner.point(TOPIC, 0, REMOTE)
    assert point is not None
    assert (point.uncertain, point.start) == (0, 12), point.describe()
