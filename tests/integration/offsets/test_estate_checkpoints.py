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
from confluent_kafka import Consumer, TopicPartition

from replicator.engine.formats import Checkpoint
from replicator.offsets.groups import GroupAdmin
from replicator.statestore import StateStore

from helpers.estate import (
    PARTITIONS,
    RECORDS,
    TOPICS,
    create,
    exact,
    fill,
    high_watermarks,
    replica_offsets,
)
from helpers.kafka import dropped_after
from helpers.procedures import commit_offsets, runner
from helpers.replication import flow_config, wait_until

pytestmark = pytest.mark.integration

GROUPS = 20
DEADLINE_S = 120.0


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
    topics = create(primary, prefix)
    fill(primary, topics)
    ends = high_watermarks(primary, topics)
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
            return high_watermarks(dr, remotes) == wanted_ends
        except Exception:  # remote topics not all created yet
            return False

    with runner([flow], store):
        wait_until(copied, 240, "every record of the 1,000 partitions on dr")
        copied_at = time.monotonic()
        replicas = replica_offsets(dr, remotes)
        expected = {
            group: {
                (f"primary.{t}", p): exact(replicas[f"primary.{t}", p], min(30 + i, ends[t, p]))
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
            (f"primary.{t}", p): exact(replicas[f"primary.{t}", p], min(80, ends[t, p]))
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
