"""`partition_bounds` on librdkafka's mock cluster: the client it is given is the one
it asks, and an estate's partitions are asked in several requests (the reads against
real brokers: tests/integration/offsets)."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from replicator.config.model import ClusterConfig
from replicator.kafka import partition_scans
from replicator.kafka.clients import admin_for
from replicator.kafka.partition_scans import BOUNDS_PER_REQUEST, partition_bounds

from helpers.mock_cluster import mock_cluster


def test_the_bounds_of_more_partitions_than_one_request_holds_are_all_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    partitions = BOUNDS_PER_REQUEST + 7
    with mock_cluster() as mock:
        mock.create_topic("orders", partitions)
        mock.create_topic("empty", 1)
        producer = Producer({"bootstrap.servers": mock.bootstrap_servers})
        for partition in range(partitions):
            for _ in range(partition % 3):
                producer.produce("orders", b"v", partition=partition)
        assert producer.flush(10) == 0
        servers = {"bootstrap.servers": mock.bootstrap_servers}
        cluster = ClusterConfig("mock", mock.bootstrap_servers, admin=servers)
        admin = admin_for(cluster)
        while admin:  # served until nothing is in flight: such a client is falsy
            admin.poll(0.1)

        def no_new_client(*_: object, **__: object) -> None:
            raise AssertionError("partition_bounds made a client of its own")

        monkeypatch.setattr(partition_scans, "admin_for", no_new_client)
        asked = [("orders", p) for p in range(partitions)] + [("empty", 0), ("absent", 0)]
        bounds = partition_bounds(cluster, asked, admin)
    assert bounds == {
        **{("orders", p): (0, p % 3) for p in range(partitions)},
        ("empty", 0): (0, 0),
    }  # a topic that does not exist is left out
