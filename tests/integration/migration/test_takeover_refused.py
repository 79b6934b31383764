"""A takeover from MirrorMaker 2 that cannot be proven stops that partition only.

MM2's state is written here as MM2 leaves it (its Connect offsets topic on the
target, in its own format), without running MM2: partition 0 holds exact copies,
written past MM2's committed offset; partition 1 holds records that are no copies of
the source. Under the default `replicator.takeover.uncertain = refuse`, partition 0
continues exactly after MM2's last copy while partition 1 stops, its status naming
the partition, the uncertain records and the setting; the task stays up. With
`at-least-once` partition 1 goes on from MM2's committed offset. Before: the refusal
was raised out of the worker, which `replicator run` restarted with growing backoff,
so no partition of the flow replicated.
"""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Producer

from replicator.engine.headers import OFFSET_HEADER, decode_offset
from replicator.engine.mm2_state import connect_offsets_topic, mm2_offset_key
from replicator.engine.status import PartitionStatus

from helpers.kafka import create_topic, read_partition, unique_topic
from helpers.replication import end_offsets, flow_config, partition_status, running, wait_until

pytestmark = pytest.mark.integration

RECORDS = 10
COPIED = 7  # records of partition 0 MM2 copied
COMMITTED = 3  # the last offset MM2 committed (it wrote past it)


def _produce(bootstrap: str, topic: str, records: list[tuple[int, bytes, bytes, int]]) -> None:
    """(partition, key, value, timestamp) in order, each delivered."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for partition, key, value, timestamp in records:
        producer.produce(topic, value, key, partition, timestamp=timestamp)
    assert producer.flush(30) == 0, f"records to {topic} not delivered in 30 s"


def _scene(primary: str, dr: str) -> tuple[str, str, str]:
    """Source topic, MM2's copies and MM2's committed offsets; returns (source alias,
    target alias, topic)."""
    source, target = f"src{uuid.uuid4().hex[:8]}", f"dst{uuid.uuid4().hex[:8]}"
    topic = unique_topic("takeover-refused")
    remote = f"{source}.{topic}"
    # Years-old timestamps (below): kept from the brokers' retention checks.
    forever = {"retention.ms": "-1"}
    create_topic(primary, topic, partitions=2, config=forever)
    create_topic(dr, remote, partitions=2, config=forever)
    base = 1_700_000_000_000
    originals = [
        (p, f"k{p}-{i}".encode(), f"v{p}-{i}".encode(), base + i)
        for p in (0, 1)
        for i in range(RECORDS)
    ]
    _produce(primary, topic, originals)
    copies = [r for r in originals if r[0] == 0][:COPIED]
    others = [(1, b"x", f"not a copy {i}".encode(), base + i) for i in range(5)]
    _produce(dr, remote, copies + others)
    offsets = connect_offsets_topic_for(source)
    create_topic(dr, offsets, partitions=1, config={"cleanup.policy": "compact"})
    _produce(
        dr,
        offsets,
        [
            (0, mm2_offset_key(source, topic, p), json.dumps({"offset": COMMITTED}).encode(), base)
            for p in (0, 1)
        ],
    )
    return source, target, topic


def connect_offsets_topic_for(source: str) -> str:
    return f"mm2-offsets.{source}.internal"


def test_an_unproven_partition_stops_and_the_others_continue(primary: str, dr: str) -> None:
    source, target, topic = _scene(primary, dr)
    remote = f"{source}.{topic}"
    flow = flow_config((source, primary), (target, dr), topics=topic)
    assert connect_offsets_topic(flow) == connect_offsets_topic_for(source)

    with running(flow) as task:
        wait_until(lambda: end_offsets(dr, remote, 2) == [RECORDS, 5], 60, "partition 0 copied")
        stopped: list[PartitionStatus | None] = [None]

        def stopped_now() -> bool:
            stopped[0] = partition_status(flow, topic, 1)
            return stopped[0] is not None and stopped[0].state == "stopped"

        wait_until(stopped_now, 60, f"partition 1 stopped, last status {stopped[0]}")
        assert not task.stop_event.is_set()
    # Partition 0: MM2's 7 copies, then ours from source offset 7, each once.
    replicas = read_partition(dr, remote, 0)
    assert [record.value for _, record in replicas] == [f"v0-{i}".encode() for i in range(RECORDS)]
    ours = [decode_offset(dict(r.headers)[OFFSET_HEADER]) for _, r in replicas[COPIED:]]
    assert ours == list(range(COPIED, RECORDS))
    # Partition 1: nothing written; the status names the partition, the count, the fix.
    assert end_offsets(dr, remote, 2) == [RECORDS, 5]
    error = stopped[0].error if stopped[0] is not None else ""
    assert f"{topic}[1]" in error and "5 records" in error, error
    assert "replicator.takeover.uncertain = at-least-once" in error, error

    # The operator chooses at-least-once: partition 1 goes on from MM2's committed offset.
    flow = flow_config(
        (source, primary),
        (target, dr),
        topics=topic,
        properties={"replicator.takeover.uncertain": "at-least-once"},
    )
    with running(flow):
        wait_until(
            lambda: end_offsets(dr, remote, 2) == [RECORDS, 5 + RECORDS - COMMITTED - 1],
            60,
            "partition 1 copied from MM2's committed offset",
        )
    ours = [
        decode_offset(dict(r.headers)[OFFSET_HEADER]) for _, r in read_partition(dr, remote, 1)[5:]
    ]
    assert ours == list(range(COMMITTED + 1, RECORDS))
