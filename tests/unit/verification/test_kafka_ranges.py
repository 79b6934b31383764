"""Which ranges the job's driver reads itself, and what it reads, on librdkafka's mock
cluster (the job with Spark and real brokers: tests/integration/verification)."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from replicator_spark import kafka_ranges
from replicator_spark.kafka_ranges import DRIVER_OFFSETS, SMALL_RANGE_OFFSETS, split

from replicator.kafka.partition_scans import scan_partitions

from helpers.mock_cluster import MockCluster, mock_cluster


def test_small_ranges_go_to_the_driver_smallest_first_within_its_budget() -> None:
    small = [("t", p, 0, SMALL_RANGE_OFFSETS - 1) for p in range(60)]
    large = ("t", 99, 5, 5 + SMALL_RANGE_OFFSETS)
    empty = ("t", 98, 7, 7)
    driver, connector = split([large, empty, *small])
    budget = DRIVER_OFFSETS // (SMALL_RANGE_OFFSETS - 1)
    assert driver == small[:budget]
    assert connector == [*small[budget:], large]  # past the budget, and the large one


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with mock_cluster() as mock:
        mock.create_topic("orders", 2)
        yield mock


def test_the_driver_reads_each_range_in_the_connectors_schema(cluster: MockCluster) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for i in range(10):
        for partition in (0, 1):
            headers = [("trace", b"t%d" % i)] if i % 2 else None
            producer.produce(
                "orders",
                key=None if i == 3 else b"k%d" % i,
                value=b"v%d" % i,
                partition=partition,
                headers=headers,
                timestamp=1_700_000_000_000 + i,
            )
    assert producer.flush(10) == 0
    columns = kafka_ranges._Columns()
    scans = {
        ("orders", 0): kafka_ranges._Collect(columns, 2, 5),
        ("orders", 1): kafka_ranges._Collect(columns, 8, 10),
    }
    scan_partitions({"bootstrap.servers": cluster.bootstrap_servers}, "test", "mock", scans)
    table = columns.table()
    assert table.schema == kafka_ranges._ARROW_SCHEMA
    rows = sorted(table.to_pylist(), key=lambda r: (r["partition"], r["offset"]))
    assert [(r["partition"], r["offset"]) for r in rows] == [(0, 2), (0, 3), (0, 4), (1, 8), (1, 9)]
    third = rows[1]
    assert third["key"] is None and third["value"] == b"v3"
    assert third["headers"] == [{"key": "trace", "value": b"t3"}]
    assert rows[0]["headers"] is None  # none: null, as the connector gives them
    assert third["timestamp"].timestamp() == pytest.approx(1_700_000_000.003)
    assert {r["timestampType"] for r in rows} == {0}  # create time


def test_no_record_read_is_an_empty_table_of_the_schema() -> None:
    table = kafka_ranges._Columns().table()
    assert table.num_rows == 0 and isinstance(table, pa.Table)
