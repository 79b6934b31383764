"""`partition_bounds` on librdkafka's mock cluster and on a stand-in client: the client
it is given is the one it asks, an estate's partitions are asked in several calls, one
at a time, and a topic without a serving leader is left out and not asked again in the
same read (the reads against real brokers: tests/integration/offsets)."""

from __future__ import annotations

import gc
import weakref
from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from replicator.config.model import ClusterConfig
from replicator.errors import ReplicatorError
from replicator.kafka import bounds
from replicator.kafka.bounds import BOUNDS_PER_REQUEST, partition_bounds
from replicator.kafka.clients import admin_for

from helpers.mock_cluster import MockCluster, mock_cluster

_LIST_OFFSETS = 2  # the Kafka protocol's ApiKey


def _cluster(mock: MockCluster) -> ClusterConfig:
    servers = {"bootstrap.servers": mock.bootstrap_servers}
    return ClusterConfig("mock", mock.bootstrap_servers, admin=servers)


def test_the_bounds_of_more_partitions_than_one_request_holds_are_all_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    partitions = BOUNDS_PER_REQUEST + 7
    with mock_cluster() as mock:
        mock.create_topic("orders", partitions)
        mock.create_topic("empty", 1)
        mock.produce("orders", {p: p % 3 for p in range(partitions)})
        cluster = _cluster(mock)
        admin = admin_for(cluster)
        while admin:  # served until nothing is in flight: such a client is falsy
            admin.poll(0.1)

        def no_new_client(*_: object, **__: object) -> None:
            raise AssertionError("partition_bounds made a client of its own")

        monkeypatch.setattr(bounds, "admin_for", no_new_client)
        asked = [("orders", p) for p in range(partitions)]
        asked += [("empty", 0), ("absent", 0), ("orders", partitions)]
        found = partition_bounds(cluster, asked, admin)
    assert found == {
        **{("orders", p): (0, p % 3) for p in range(partitions)},
        ("empty", 0): (0, 0),
    }  # a topic, or a partition, that does not exist is left out


def test_a_partition_without_a_leader_is_left_out_and_the_others_are_read() -> None:
    with mock_cluster() as mock:
        mock.create_topic("orders", 3)
        mock.produce("orders", {2: 1})
        mock.set_leader("orders", 1, -1)  # as while the target creates it
        found = partition_bounds(_cluster(mock), [("orders", p) for p in range(3)])
    assert found == {("orders", 0): (0, 0), ("orders", 2): (0, 1)}


def test_a_refused_partition_is_named_with_the_acl_it_needs() -> None:
    with mock_cluster() as mock:
        mock.create_topic("orders", 2)
        admin = admin_for(_cluster(mock))
        assert partition_bounds(_cluster(mock), [("orders", 0)], admin) == {("orders", 0): (0, 0)}
        mock.fail_requests(_LIST_OFFSETS, KafkaError.TOPIC_AUTHORIZATION_FAILED)
        with pytest.raises(ReplicatorError) as refused:
            partition_bounds(_cluster(mock), [("orders", 0), ("orders", 1)], admin)
    said = str(refused.value)
    assert said.startswith("cluster 'mock' orders[")
    assert "Topic authorization failed" in said and "may DESCRIBE the topic" in said


class _Waited(Future):  # type: ignore[type-arg]
    """A future that tells whether its caller looked at its outcome."""

    looked = False

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self.looked = True
        return super().exception(timeout)


class _CreatingAdmin:
    """A target still creating its partitions: the metadata names every leader, but
    `unserved[n]` does not serve yet (NOT_LEADER_OR_FOLLOWER, as a broker answers then)."""

    def __init__(self, topics: int) -> None:
        self.topics = [f"estate-{n:04d}" for n in range(topics)]
        self.unserved = {self.topics[1], self.topics[-1]}
        self.calls: list[list[str]] = []
        self._previous: list[_Waited] = []

    def list_topics(self, timeout: float) -> SimpleNamespace:
        led = SimpleNamespace(leader=1)
        meta = SimpleNamespace(error=None, partitions={0: led, 1: led})
        return SimpleNamespace(topics=dict.fromkeys(self.topics, meta))

    def list_offsets(self, wanted: dict[TopicPartition, object], **_: object) -> dict:
        assert all(f.looked for f in self._previous), "a call sent before the last was read"
        self.calls.append(sorted({tp.topic for tp in wanted}))
        futures: dict[TopicPartition, _Waited] = {}
        for tp in wanted:
            future = _Waited()
            if tp.topic in self.unserved:
                error = KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION)
                future.set_exception(KafkaException(error))
            else:
                future.set_result(SimpleNamespace(offset=7))
            futures[tp] = future
        self._previous = list(futures.values())
        return futures


def test_calls_go_one_at_a_time_and_a_topic_found_unserved_is_not_asked_again() -> None:
    """librdkafka deletes a topic whose answer said NOT_LEADER_OR_FOLLOWER from the
    client's metadata cache, and a later call that asks for it looks its leader up on a
    path that crashed the process (see the module): every call waits for the one before
    it, and asks none of the topics an answer left out."""
    admin = _CreatingAdmin(topics=BOUNDS_PER_REQUEST)  # two partitions each: two chunks
    asked = [(topic, p) for topic in admin.topics for p in (0, 1)]
    found = partition_bounds(ClusterConfig("target", "127.0.0.1:1"), asked, admin)  # type: ignore[arg-type]
    assert len(admin.calls) == 4  # each chunk's starts, then its ends
    starts, ends = admin.calls[0], admin.calls[1]
    assert admin.topics[1] in starts and admin.topics[1] not in ends
    assert admin.topics[-1] in admin.calls[2] and admin.topics[-1] not in admin.calls[3]
    assert set(found) == {(t, p) for t, p in asked if t not in admin.unserved}


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
    librdkafka threads call back is reported to crash the process."""
    cluster = ClusterConfig("stand-in", "127.0.0.1:1")
    admin = _StandInAdmin()
    freed = weakref.ref(admin)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        found = partition_bounds(cluster, [("orders", 0), ("orders", 1)], admin)  # type: ignore[arg-type]
        del admin
        assert freed() is None, "the client is kept by a reference cycle"
    finally:
        if was_enabled:
            gc.enable()
    assert found == {}  # orders[1] has no serving leader, and orders is not asked again
