"""Checkpoints and group sync at an estate's size (issue 41): 1,000 partitions over 250
topics and 20 groups, through `replicator run` with MM2's defaults and a 5 s interval.

Before the batched translation a round translated every (group, partition) by its own
bisection: 0 of 20,000 group offsets were synced after 420 s. Here every group's
offset on every partition must be synced on the target, each exactly where a fresh
translation puts it (computed independently: every target partition read whole), within
120 s of the copy completing; a group that then moves on gets its next checkpoint, and
no checkpoint in the topic ever went backwards.

Ten of the topics are written in transactions, so their source offsets skip the commit
markers and target offsets are not source offsets; each group commits a position of
its own (30 + its number), some of them on a marker.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from replicator.engine.formats import Checkpoint
from replicator.engine.headers import replica_source_offset
from replicator.offsets.groups import GroupAdmin
from replicator.statestore import StateStore

from helpers.kafka import dropped_after
from helpers.procedures import commit_offsets, runner
from helpers.replication import flow_config, wait_until

pytestmark = pytest.mark.integration

TOPICS = 250
PARTITIONS = 4
RECORDS = 100  # per partition
GROUPS = 20
TRANSACTIONAL = 10  # of the topics, written 9 records to a transaction
DEADLINE_S = 120.0


def _create(bootstrap: str, prefix: str) -> list[str]:
    names = [f"{prefix}-{i:03d}" for i in range(TOPICS)]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(n, PARTITIONS, 1) for n in names])
    for future in futures.values():
        future.result(60)
    return names


def _fill(bootstrap: str, topics: list[str]) -> None:
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for topic in topics[TRANSACTIONAL:]:
        for partition in range(PARTITIONS):
            for i in range(RECORDS):
                plain.produce(topic, value=b"v%d" % i, key=b"k%d" % i, partition=partition)
            plain.poll(0)
    assert plain.flush(60) == 0
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": uuid.uuid4().hex})
    txn.init_transactions(30)
    for topic in topics[:TRANSACTIONAL]:
        for partition in range(PARTITIONS):
            for start in range(0, RECORDS, 9):
                txn.begin_transaction()
                for i in range(start, min(start + 9, RECORDS)):
                    txn.produce(topic, value=b"t%d" % i, partition=partition)
                txn.commit_transaction(30)


def _ends(bootstrap: str, topics: list[str]) -> dict[tuple[str, int], int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex})
    try:
        return {
            (t, p): consumer.get_watermark_offsets(TopicPartition(t, p), timeout=30)[1]
            for t in topics
            for p in range(PARTITIONS)
        }
    finally:
        consumer.close()


def _replica_offsets(bootstrap: str, remotes: list[str]) -> dict[tuple[str, int], list]:
    """Every target partition read whole: (target offset, source offset) of each replica."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": uuid.uuid4().hex,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    found: dict[tuple[str, int], list] = defaultdict(list)
    pending = {(t, p) for t in remotes for p in range(PARTITIONS)}
    try:
        consumer.assign([TopicPartition(t, p, 0) for t, p in pending])
        deadline = time.monotonic() + 120
        while pending and time.monotonic() < deadline:
            for message in consumer.consume(10_000, 0.2):
                key = (message.topic(), message.partition())
                if message.error() is not None:
                    pending.discard(key)
                    continue
                source = replica_source_offset(message.headers(), b"primary")
                if source is not None:
                    found[key].append((message.offset(), source))
        assert not pending, f"{len(pending)} target partitions not read to their end"
    finally:
        consumer.close()
    return found


def _exact(replicas: list, committed: int) -> int:
    """The fresh exact translation: the first replica whose source offset is >= it."""
    for target, source in replicas:
        if source >= committed:
            return target
    return replicas[-1][0] + 1


def _all_checkpoints(bootstrap: str, topic: str) -> list[Checkpoint]:
    """Every checkpoint record in the topic, in order (not only the latest per key)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex, "enable.partition.eof": True}
    )
    records = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        while True:
            message = consumer.poll(10)
            assert message is not None, f"{topic} not read to its end"
            if message.error() is not None:
                break
            records.append(Checkpoint.decode(message.key(), message.value()))
    finally:
        consumer.close()
    return records


def test_every_group_of_1000_partitions_is_synced_exactly(
    primary: str, dr: str, store: StateStore
) -> None:
    prefix = f"estate{uuid.uuid4().hex[:6]}"
    names = [f"{prefix}-{i:03d}" for i in range(TOPICS)]
    with dropped_after(primary, names), dropped_after(dr, [f"primary.{t}" for t in names]):
        _every_group_synced_exactly(primary, dr, store, prefix)


def _every_group_synced_exactly(primary: str, dr: str, store: StateStore, prefix: str) -> None:
    topics = _create(primary, prefix)
    _fill(primary, topics)
    ends = _ends(primary, topics)
    groups = [f"{prefix}-app-{i:02d}" for i in range(GROUPS)]
    flow = flow_config(
        ("primary", primary),
        ("dr", dr),
        f"{prefix}-.*",
        {
            "groups": f"{prefix}-app-.*",
            "emit.checkpoints.interval.seconds": "5",
            "sync.group.offsets.enabled": "true",
            "sync.group.offsets.interval.seconds": "5",
        },
    )
    for i, group in enumerate(groups):
        commit_offsets(flow.source, group, {where: min(30 + i, end) for where, end in ends.items()})
    remotes = [f"primary.{t}" for t in topics]
    # Every record once on dr; the source's commit markers are not copied.
    wanted_ends = {(f"primary.{t}", p): RECORDS for t, p in ends}

    def copied() -> bool:
        try:
            return _ends(dr, remotes) == wanted_ends
        except Exception:  # remote topics not all created yet
            return False

    with runner([flow], store):
        wait_until(copied, 240, "every record of the 1,000 partitions on dr")
        copied_at = time.monotonic()
        replicas = _replica_offsets(dr, remotes)
        expected = {
            group: {
                (f"primary.{t}", p): _exact(replicas[f"primary.{t}", p], min(30 + i, ends[t, p]))
                for t, p in ends
            }
            for i, group in enumerate(groups)
        }
        on_dr = GroupAdmin(flow.target)

        def synced(group: str) -> dict[tuple[str, int], int]:
            return {(c.topic, c.partition): c.offset for c in on_dr.committed(group)}

        wait_until(
            lambda: all(synced(g) == expected[g] for g in groups),
            DEADLINE_S,
            "every group's offset of every partition synced on dr",
        )
        synced_s = time.monotonic() - copied_at
        assert synced_s < DEADLINE_S
        # Some positions sit on commit markers: their translation is the record after.
        assert any(expected[groups[i]][f"primary.{topics[0]}", 0] != 30 + i for i in range(GROUPS))

        # The group moves on while rounds run: the next round checkpoints it.
        mover = groups[0]
        commit_offsets(flow.source, mover, {where: min(80, end) for where, end in ends.items()})
        moved = {
            (f"primary.{t}", p): _exact(replicas[f"primary.{t}", p], min(80, ends[t, p]))
            for t, p in ends
        }
        wait_until(lambda: synced(mover) == moved, DEADLINE_S, "the moved group synced")

    history: dict[tuple[str, str, int], list[Checkpoint]] = defaultdict(list)
    for checkpoint in _all_checkpoints(dr, "primary.checkpoints.internal"):
        if checkpoint.group.startswith(prefix):
            history[checkpoint.group, checkpoint.topic, checkpoint.partition].append(checkpoint)
    assert len(history) == GROUPS * TOPICS * PARTITIONS
    for key, written in history.items():
        downstream = [c.downstream for c in written]
        assert downstream == sorted(downstream), f"{key} went backwards: {downstream}"
