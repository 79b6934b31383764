"""The status page's count of a flow's checkpoints, kept between page loads: a refresh
reads only the checkpoints written since the last (2,000,000 at 10,000 partitions and
200 groups take 20 s to read whole, and the page refreshes every 10 s), and a topic
that was recreated is counted again from its start."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from replicator.config import load_config
from replicator.config.model import FlowConfig
from replicator.engine.formats import Checkpoint
from replicator.engine.internal_topics import ensure_compacted_topic
from replicator.operations.checkpoint_reads import CheckpointTally, checkpoint_info

from helpers.replication import recreate_topic

pytestmark = pytest.mark.integration


def _flow(tmp_path: Path, primary: str, dr: str) -> FlowConfig:
    """A flow whose source alias is its own, so that its checkpoints topic is too."""
    alias = f"tally{uuid.uuid4().hex[:8]}"
    config = tmp_path / "mm2.properties"
    config.write_text(
        "\n".join(
            [
                f"clusters = {alias}, dr",
                f"{alias}.bootstrap.servers = {primary}",
                f"dr.bootstrap.servers = {dr}",
                f"{alias}->dr.enabled = true",
                f"{alias}->dr.topics = orders",
                "replication.factor = 1",
                "checkpoints.topic.replication.factor = 1",
            ]
        )
    )
    return load_config(config).flow(f"{alias}->dr")


def _write(
    bootstrap: str, topic: str, checkpoints: list[Checkpoint], *, gone: bool = False
) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for checkpoint in checkpoints:
        producer.produce(topic, key=checkpoint.key(), value=None if gone else checkpoint.value())
    assert producer.flush(30) == 0


def test_a_kept_tally_reads_what_was_written_since_and_starts_over_on_a_new_topic(
    tmp_path: Path, primary: str, dr: str
) -> None:
    flow = _flow(tmp_path, primary, dr)
    topic = flow.checkpoints_topic
    remote = f"{flow.source.alias}.orders"
    ensure_compacted_topic(flow.target, topic, 1, "checkpoints.topic.replication.factor")
    ours = [Checkpoint(f"g{g}", remote, p, 10, 10) for g in range(3) for p in range(100)]
    theirs = [Checkpoint("g0", f"{flow.source.alias}.other", p, 5, 5) for p in range(50)]
    _write(dr, topic, ours + theirs)

    tally = CheckpointTally(flow)
    first = tally.read()
    assert (first.checkpoints, first.groups, tally.last_read) == (300, ["g0", "g1", "g2"], 350)
    again = tally.read()
    assert (again.checkpoints, tally.last_read) == (300, 0), "nothing new, nothing read"

    moved = [Checkpoint(c.group, c.topic, c.partition, 20, 20) for c in ours[:10]]
    _write(dr, topic, [*moved, Checkpoint("g3", remote, 0, 1, 1)])
    _write(dr, topic, [ours[-1]], gone=True)  # a tombstone: g2 on partition 99 is gone
    later = tally.read()
    assert tally.last_read == 12
    assert (later.checkpoints, later.groups) == (300, ["g0", "g1", "g2", "g3"])
    fresh = checkpoint_info(flow)  # the same, read whole
    assert (fresh.checkpoints, fresh.groups) == (later.checkpoints, later.groups)

    # Recreated with more records than were read: the offsets alone do not show it.
    recreate_topic(dr, topic)
    _write(dr, topic, [Checkpoint("h", remote, p % 2, p, p) for p in range(400)])
    anew = tally.read()
    assert (anew.checkpoints, anew.groups, tally.last_read) == (2, ["h"], 400)
