"""`tail_replicas` answers for the partition as its caller measured it: a replica
written after the end the caller read is not taken.

A verification plan reads each target partition's end and then its last replica; a
copy landing between the two once made the plan count its source record as
acknowledged while the window it read ended before the copy, and the run reported
that record missing (CI of 2026-12-03, `test_verify_after_failback`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from replicator.config.model import ClusterConfig
from replicator.engine import tail
from replicator.engine.headers import OFFSET_HEADER, SOURCE_HEADER, encode_offset
from replicator.engine.tail import NOT_NEAR_END, TAIL_OFFSETS, Replica, replica_of, tail_replicas

from helpers.mock_cluster import MockCluster, mock_cluster

TOPIC = "primary.orders"


@pytest.fixture
def target() -> Iterator[MockCluster]:
    with mock_cluster() as cluster:
        cluster.create_topic(TOPIC, 1)
        yield cluster


def _replicate(cluster: MockCluster, source_offsets: range) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for offset in source_offsets:
        headers = [(SOURCE_HEADER, b"primary"), (OFFSET_HEADER, encode_offset(offset))]
        producer.produce(TOPIC, value=b"v", partition=0, headers=headers)
    assert producer.flush(10) == 0


def _config(cluster: MockCluster) -> ClusterConfig:
    return ClusterConfig("dr", cluster.bootstrap_servers, consumer={
        "bootstrap.servers": cluster.bootstrap_servers,
    })  # fmt: skip


def test_a_replica_after_the_end_read_is_not_taken(target: MockCluster) -> None:
    _replicate(target, range(100, 110))  # target offsets 0..9
    _replicate(target, range(110, 112))  # 10, 11: written after the caller's look
    found = tail_replicas(_config(target), "primary", {(TOPIC, 0): (0, 10)})
    assert found[TOPIC, 0] == Replica(9, 109)


def test_the_whole_partition_when_the_end_is_its_end(target: MockCluster) -> None:
    _replicate(target, range(100, 112))
    found = tail_replicas(_config(target), "primary", {(TOPIC, 0): (0, 12)})
    assert found[TOPIC, 0] == Replica(11, 111)


def test_no_replica_near_the_end_read_asks_to_read_back(target: MockCluster) -> None:
    _replicate(target, range(TAIL_OFFSETS + 1))
    producer = Producer({"bootstrap.servers": target.bootstrap_servers})
    for _ in range(TAIL_OFFSETS):
        producer.produce(TOPIC, value=b"the application's own", partition=0)
    assert producer.flush(10) == 0
    end = 2 * TAIL_OFFSETS + 1
    _replicate(target, range(1000, 1001))  # after the end read: not near it
    found = tail_replicas(_config(target), "primary", {(TOPIC, 0): (0, end)})
    assert found[TOPIC, 0] is NOT_NEAR_END


def test_the_last_replica_before_records_of_others(target: MockCluster) -> None:
    _replicate(target, range(100, 110))  # target offsets 0..9
    producer = Producer({"bootstrap.servers": target.bootstrap_servers})
    for _ in range(3):  # 10..12: the application's own, after the last replica
        producer.produce(TOPIC, value=b"the application's own", partition=0)
    assert producer.flush(10) == 0
    found = tail_replicas(_config(target), "primary", {(TOPIC, 0): (0, 13)})
    assert found[TOPIC, 0] == Replica(9, 109)


def test_only_the_records_after_the_last_replica_have_their_headers_read(
    target: MockCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Newest first, up to the first replica: at 5,000 partitions, the headers of every
    record of each window were most of a supervisor run."""
    looked = []

    def counted(message: object, alias: bytes) -> Replica | None:
        looked.append(message)
        return replica_of(message, alias)  # type: ignore[arg-type]

    monkeypatch.setattr(tail, "replica_of", counted)
    _replicate(target, range(100, 110))
    found = tail_replicas(_config(target), "primary", {(TOPIC, 0): (0, 10)})
    assert found[TOPIC, 0] == Replica(9, 109)
    assert len(looked) == 1
