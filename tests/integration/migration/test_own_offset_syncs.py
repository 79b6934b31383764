"""A flow only this replicator ever copied restarts where it stopped after retention
removed every replica from the target (an idle partition of a topic with a short
retention): no refusal, no second copy.

Our offset syncs share MM2's topic. They were once counted as MM2's state: such a
partition (records on the target's offsets, none left to read) looked like an MM2 copy
that could not be proven and was refused (issue 44), and without them it would be
copied again from the source's log start. Our newest sync names the target's last
record, so the copy continues right after its source offset."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from replicator.engine.headers import OFFSET_HEADER, decode_offset
from replicator.engine.mm2_state import MirrorMakerState

from helpers.kafka import create_topic, read_partition, unique_topic
from helpers.replication import end_offsets, flow_config, running, wait_until

pytestmark = pytest.mark.integration

PARTITIONS = 2
FIRST, MORE = 20, 5


def _produce(bootstrap: str, topic: str, first: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for partition in range(PARTITIONS):
        for i in range(first, first + count):
            producer.produce(topic, f"v{partition}-{i}".encode(), partition=partition)
    assert producer.flush(30) == 0, f"records to {topic} not delivered in 30 s"


def _expire_every_replica(bootstrap: str, topic: str, end: int) -> None:
    """What retention does to an idle partition: its log start moves to its end."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(topic, p, end) for p in range(PARTITIONS)])
    for future in futures.values():
        assert future.result(30).low_watermark == end


def test_replicas_expired_on_the_target_restart_after_our_own_sync(primary: str, dr: str) -> None:
    source, target = f"src{uuid.uuid4().hex[:8]}", f"dst{uuid.uuid4().hex[:8]}"
    topic = unique_topic("own-syncs")
    remote = f"{source}.{topic}"
    create_topic(primary, topic, partitions=PARTITIONS)
    _produce(primary, topic, 0, FIRST)
    flow = flow_config((source, primary), (target, dr), topics=topic)

    def synced_to_the_end() -> bool:
        state = MirrorMakerState.read(flow)
        return all(state.own_sync(topic, p) is not None for p in range(PARTITIONS)) and all(
            state.own_sync(topic, p)[0] == FIRST - 1 for p in range(PARTITIONS)
        )

    with running(flow):
        wait_until(lambda: end_offsets(dr, remote, PARTITIONS) == [FIRST] * PARTITIONS, 60,
                   "the first records copied")  # fmt: skip
        wait_until(synced_to_the_end, 60, "our offset syncs at the end of the copy")
    assert not MirrorMakerState.read(flow).has_evidence(topic, 0), "ours counted as MM2's"

    _expire_every_replica(dr, remote, FIRST)
    _produce(primary, topic, FIRST, MORE)
    with running(flow):
        wait_until(
            lambda: end_offsets(dr, remote, PARTITIONS) == [FIRST + MORE] * PARTITIONS,
            60,
            "the new records copied after the restart",
        )
    for partition in range(PARTITIONS):
        copied = [
            decode_offset(dict(record.headers)[OFFSET_HEADER])
            for _, record in read_partition(dr, remote, partition)
        ]
        assert copied == list(range(FIRST, FIRST + MORE)), (partition, copied)
