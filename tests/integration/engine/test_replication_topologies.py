"""Bidirectional flows under both policies, and transactional sources."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer

from replicator.engine.task import ReplicationTask

from helpers.kafka import create_topic, make_records, produce_records, read_partition, unique_topic
from helpers.replication import end_offsets, flow_config, running, wait_until

pytestmark = pytest.mark.integration

IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"


def _count(bootstrap: str, topic: str, partitions: int = 3) -> int:
    return sum(end_offsets(bootstrap, topic, partitions) or [-1])


def _same_topic_on_both(primary: str, dr: str, prefix: str) -> str:
    """One topic name, 3 partitions on each cluster: 300 local records on primary, 200 on dr."""
    topic = unique_topic(prefix)
    for bootstrap, count in ((primary, 300), (dr, 200)):
        create_topic(bootstrap, topic, partitions=3)
        produce_records(bootstrap, topic, make_records(count))
    return topic


def test_active_active_default_policy(primary: str, dr: str) -> None:
    topic = _same_topic_on_both(primary, dr, "aa")
    forward = flow_config(("primary", primary), ("dr", dr), topics=topic)
    backward = flow_config(("dr", dr), ("primary", primary), topics=topic)

    with running(forward), running(backward):
        wait_until(lambda: _count(dr, f"primary.{topic}") == 300, 60, "primary's records on dr")
        wait_until(lambda: _count(primary, f"dr.{topic}") == 200, 60, "dr's records on primary")

    assert _count(primary, topic) == 300, "local topics keep only local records"
    assert _count(dr, topic) == 200
    for bootstrap, looped in ((primary, f"primary.dr.{topic}"), (dr, f"dr.primary.{topic}")):
        assert end_offsets(bootstrap, looped, 1) is None, f"{looped} must never exist"


def test_active_active_identity_policy(primary: str, dr: str) -> None:
    topic = _same_topic_on_both(primary, dr, "identity")
    properties = {"replication.policy.class": IDENTITY}
    forward = flow_config(("primary", primary), ("dr", dr), topic, properties)
    backward = flow_config(("dr", dr), ("primary", primary), topic, properties)

    with running(forward) as to_dr, running(backward) as to_primary:
        wait_until(lambda: _count(dr, topic) == 500, 60, "dr = 200 local + 300 replicated")
        wait_until(lambda: _count(primary, topic) == 500, 60, "primary = 300 + 200")
        # Each side has read the other's copies back and dropped them by provenance.
        wait_until(lambda: _skipped(to_dr) == 200, 60, "dr's records not sent back to dr")
        wait_until(lambda: _skipped(to_primary) == 300, 60, "primary's not sent back")

    assert _count(primary, topic) == 500
    assert _count(dr, topic) == 500


def _skipped(task: ReplicationTask) -> int:
    return sum(tracker.counters.skipped for tracker in task._parts.partitions.values())


def test_only_committed_transactions_are_replicated(primary: str, dr: str) -> None:
    topic = unique_topic("txn")
    create_topic(primary, topic, partitions=1)
    producer = Producer(
        {"bootstrap.servers": primary, "transactional.id": f"txn-{uuid.uuid4().hex}"}
    )
    producer.init_transactions(30)
    committed = []
    for batch, commit in enumerate([True, False, True, False, True]):
        producer.begin_transaction()
        for i in range(50):
            value = f"batch{batch}-{i}".encode()
            producer.produce(topic, value=value, partition=0)
            if commit:
                committed.append(value)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.flush(30)
            producer.abort_transaction(30)
    produce_records(primary, topic, make_records(10))  # and a plain tail after them
    flow = flow_config(("primary", primary), ("dr", dr), topics=topic)

    with running(flow):
        wait_until(lambda: _count(dr, f"primary.{topic}", 1) == 160, 60, "committed on dr")

    copied = [record.value for _, record in read_partition(dr, f"primary.{topic}", 0)]
    assert copied[:150] == committed
    assert len(copied) == 160
