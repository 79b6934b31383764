"""`replicator run` emits checkpoints on its schedule (and syncs idle groups), so an
unplanned failover finds recent ones."""

from __future__ import annotations

import uuid

import pytest

from replicator.offsets.checkpoints import read_checkpoints
from replicator.statestore import StateStore

from helpers.kafka import create_topic, unique_topic
from helpers.procedures import commit_offsets, committed_offsets, runner
from helpers.replication import flow_config, preload, wait_until

pytestmark = pytest.mark.integration


def test_run_emits_checkpoints_and_syncs_idle_groups(
    primary: str, dr: str, store: StateStore
) -> None:
    topic = unique_topic("scheduled")
    create_topic(primary, topic, partitions=2)
    preload(primary, topic, 400, 2)
    flow = flow_config(
        ("primary", primary),
        ("dr", dr),
        topic,
        {
            "emit.checkpoints.interval.seconds": "1",
            "sync.group.offsets.enabled": "true",
            "sync.group.offsets.interval.seconds": "1",
        },
    )
    group = f"app-{uuid.uuid4().hex[:8]}"
    commit_offsets(flow.source, group, {(topic, 0): 150, (topic, 1): 200})
    remote = f"primary.{topic}"

    def checkpointed() -> dict[tuple[str, int], int]:
        checkpoints = read_checkpoints(flow.target, "primary.checkpoints.internal")
        return {(t, p): c.downstream for (g, t, p), c in checkpoints.items() if g == group}

    with runner([flow], store):
        wanted = {(remote, 0): 150, (remote, 1): 200}  # one-to-one: a fresh copy
        wait_until(lambda: checkpointed() == wanted, 90, "checkpoints of the group")
        wait_until(
            lambda: committed_offsets("dr", dr, group) == wanted, 90, "the idle group synced"
        )
        commit_offsets(flow.source, group, {(topic, 0): 180})  # the group moves on
        wait_until(lambda: checkpointed()[(remote, 0)] == 180, 90, "the next round's checkpoint")
