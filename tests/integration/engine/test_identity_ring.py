"""A ring of three clusters under the Identity policy (primary -> dr -> west ->
primary): every topic has the same name everywhere, so only our provenance headers
and the order of our copies (issue 42, `replicator.engine.rewrite`) tell a record
that went round from a cluster's own. Each cluster's records reach the two others
exactly once and never come back; the third hop is stopped as a loop. The default
data path."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack

import pytest
from confluent_kafka import Producer

from replicator_lab import ClusterSpec, LocalStack

from helpers.kafka import create_topic, free_port_pair, read_partition, unique_topic
from helpers.replication import end_offsets, flow_config, running, wait_until

pytestmark = pytest.mark.integration

IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
PARTITIONS = 3
RECORDS = 150  # per cluster


@pytest.fixture(scope="module")
def west(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A third cluster of the module's own."""
    stack = LocalStack(
        [ClusterSpec("west", free_port_pair())], data_dir=tmp_path_factory.mktemp("west")
    )
    stack.up(timeout=120)
    yield stack.bootstrap("west")
    stack.down(wipe=True)


def _count(bootstrap: str, topic: str) -> int:
    return sum(end_offsets(bootstrap, topic, PARTITIONS) or [-1])


def _produce(bootstrap: str, topic: str, origin: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(RECORDS):
        producer.produce(topic, f"{origin}-{i}".encode(), f"k{i}".encode(), i % PARTITIONS)
    assert producer.flush(30) == 0


def test_an_identity_ring_of_three_copies_each_record_once_and_stops_its_loop(
    primary: str, dr: str, west: str
) -> None:
    orders = unique_topic("orders")
    clusters = {"primary": primary, "dr": dr, "west": west}
    for name, bootstrap in clusters.items():
        create_topic(bootstrap, orders, partitions=PARTITIONS)
        _produce(bootstrap, orders, name)
    ring = [("primary", "dr"), ("dr", "west"), ("west", "primary")]
    properties = {"replication.policy.class": IDENTITY}
    flows = [flow_config((s, clusters[s]), (t, clusters[t]), orders, properties) for s, t in ring]

    with ExitStack() as stack:
        for flow in flows:
            stack.enter_context(running(flow))
        for name, bootstrap in clusters.items():
            wait_until(
                lambda bootstrap=bootstrap: _count(bootstrap, orders) >= 3 * RECORDS,
                120,
                f"every cluster's records on {name}",
            )

    for name, bootstrap in clusters.items():
        values = Counter(
            record.value
            for p in range(PARTITIONS)
            for _, record in read_partition(bootstrap, orders, p)
        )
        assert sum(values.values()) == 3 * RECORDS, f"{name}: {sum(values.values())} records"
        assert all(n == 1 for n in values.values()), f"{name}: a record arrived twice"
        origins = Counter(value.split(b"-")[0] for value in values)
        assert origins == {b"primary": RECORDS, b"dr": RECORDS, b"west": RECORDS}, origins
