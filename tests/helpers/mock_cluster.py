"""librdkafka's in-process mock cluster with its brokers under the test's control.

`test.mock.num.brokers` gives a client a mock cluster of its own, but confluent-kafka
offers no way to take one of its brokers down. librdkafka's public mock API
(`rdkafka_mock.h`) does: this module calls it through ctypes, in the librdkafka that
confluent-kafka links (the one its clients use). The cluster listens on real local
ports, so any client (the engine's producer, a read-back consumer) reaches it
through `bootstrap_servers`.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import confluent_kafka

from replicator.config import load_config
from replicator.config.model import FlowConfig


def _librdkafka() -> ctypes.CDLL:
    libs = Path(confluent_kafka.__file__).resolve().parents[1] / "confluent_kafka.libs"
    found = sorted(libs.glob("librdkafka*.so*"))
    assert found, f"no librdkafka next to confluent-kafka in {libs}"
    lib = ctypes.CDLL(str(found[0]))
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
    lib.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rd_kafka_mock_cluster_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
    for name in ("rd_kafka_mock_broker_set_down", "rd_kafka_mock_broker_set_up"):
        getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_int32]
    lib.rd_kafka_mock_topic_create.argtypes = [
        ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int,
    ]  # fmt: skip
    lib.rd_kafka_mock_partition_set_leader.argtypes = [
        ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32, ctypes.c_int32,
    ]  # fmt: skip
    lib.rd_kafka_mock_push_request_errors_array.restype = None
    lib.rd_kafka_mock_push_request_errors_array.argtypes = [
        ctypes.c_void_p, ctypes.c_int16, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int),
    ]  # fmt: skip
    return lib


class MockCluster:
    """A one-broker mock cluster whose broker can be taken down and brought back."""

    def __init__(self, lib: ctypes.CDLL, handle: int, cluster: int) -> None:
        self._lib = lib
        self._handle = handle
        self._cluster = cluster
        self.bootstrap_servers: str = lib.rd_kafka_mock_cluster_bootstraps(cluster).decode()

    def create_topic(self, topic: str, partitions: int) -> None:
        error = self._lib.rd_kafka_mock_topic_create(self._cluster, topic.encode(), partitions, 1)
        assert error == 0, f"mock topic {topic}: librdkafka error {error}"

    def produce(self, topic: str, records: Mapping[int, int]) -> None:
        """Write `records[p]` records to each partition `p` of `topic`, acknowledged."""
        producer = confluent_kafka.Producer({"bootstrap.servers": self.bootstrap_servers})
        for partition, count in records.items():
            for _ in range(count):
                producer.produce(topic, b"v", partition=partition)
        assert producer.flush(10) == 0, f"mock {topic}: records not acknowledged"

    def set_leader(self, topic: str, partition: int, broker: int) -> None:
        """Make `broker` the partition's leader; -1: it has none (as right after its
        creation, or during an election)."""
        error = self._lib.rd_kafka_mock_partition_set_leader(
            self._cluster, topic.encode(), partition, broker
        )
        assert error == 0, f"mock {topic}[{partition}] leader: librdkafka error {error}"

    def fail_requests(self, api_key: int, error: int, count: int = 1) -> None:
        """Answer the next `count` requests of `api_key` (the Kafka protocol's number:
        ListOffsets is 2) with `error` (a Kafka error code) on everything they ask."""
        errors = (ctypes.c_int * count)(*([error] * count))
        self._lib.rd_kafka_mock_push_request_errors_array(self._cluster, api_key, count, errors)

    def broker_down(self) -> None:
        """Drop the broker's connections and refuse new ones (its log is kept)."""
        assert self._lib.rd_kafka_mock_broker_set_down(self._cluster, 1) == 0

    def broker_up(self) -> None:
        assert self._lib.rd_kafka_mock_broker_set_up(self._cluster, 1) == 0

    def close(self) -> None:
        self._lib.rd_kafka_mock_cluster_destroy(self._cluster)
        self._lib.rd_kafka_destroy(self._handle)


@contextmanager
def mock_cluster() -> Iterator[MockCluster]:
    """A mock cluster of one broker, destroyed after the block."""
    lib = _librdkafka()
    errstr = ctypes.create_string_buffer(512)
    # The mock cluster runs in a client's threads: a producer that sends nothing.
    handle = lib.rd_kafka_new(0, lib.rd_kafka_conf_new(), errstr, len(errstr))
    assert handle, errstr.value.decode()
    cluster = lib.rd_kafka_mock_cluster_new(handle, 1)
    assert cluster, "rd_kafka_mock_cluster_new failed"
    mock = MockCluster(lib, handle, cluster)
    try:
        yield mock
    finally:
        mock.close()


def flow_on(cluster: MockCluster, folder: Path) -> FlowConfig:
    """Flow primary->dr with both ends on `cluster` (source and target topics side by
    side), loaded from an mm2.properties written in `folder`."""
    path = folder / "mm2.properties"
    path.write_text(
        "clusters = primary, dr\n"
        f"primary.bootstrap.servers = {cluster.bootstrap_servers}\n"
        f"dr.bootstrap.servers = {cluster.bootstrap_servers}\n"
        "primary->dr.enabled = true\n"
    )
    return load_config(path).flow("primary:dr")
