"""`partition_bounds` on librdkafka's mock cluster: the client it is given is the one
it asks, and an estate's partitions are asked in several requests (the reads against
real brokers: tests/integration/offsets)."""

from __future__ import annotations

import gc
import weakref
from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

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


class _StandInAdmin:
    """An admin client whose `list_offsets` answers `orders[0]` and fails `orders[1]`
    as a partition still getting its leader does."""

    def list_topics(self, timeout: float) -> SimpleNamespace:
        led = SimpleNamespace(leader=1)
        return SimpleNamespace(
            topics={"orders": SimpleNamespace(error=None, partitions={0: led, 1: led})}
        )

    def list_offsets(self, wanted: dict[TopicPartition, object], **_: object) -> dict:
        futures: dict[TopicPartition, Future[object]] = {}
        for tp in wanted:
            future: Future[object] = Future()
            if tp.partition == 0:
                future.set_result(SimpleNamespace(offset=5))
            else:
                error = KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION)
                future.set_exception(KafkaException(error))
            futures[tp] = future
        return futures


def test_a_partition_still_getting_its_leader_leaves_the_client_to_be_freed_at_once() -> None:
    """The client a call was given or made is freed by its last reference, never by
    the cyclic collector: a failed future's exception, once raised in the frame that
    holds the client, kept the client in a reference cycle, and a confluent-kafka
    client freed by the collector (at any allocation, in any thread) while its
    librdkafka threads call back crashed the process (a segmentation fault)."""
    cluster = ClusterConfig("stand-in", "127.0.0.1:1")
    admin = _StandInAdmin()
    freed = weakref.ref(admin)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        bounds = partition_bounds(cluster, [("orders", 0), ("orders", 1)], admin)  # type: ignore[arg-type]
        del admin
        assert freed() is None, "the client is kept by a reference cycle"
    finally:
        if was_enabled:
            gc.enable()
    assert bounds == {("orders", 0): (5, 5)}  # the partition without a leader is left out
