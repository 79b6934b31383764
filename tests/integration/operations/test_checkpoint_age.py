"""The age of a flow's newest checkpoint, as the supervisor and the health check read
it every minute: from the end of the checkpoints topic backwards, past other flows'
checkpoints, not by reading every checkpoint kept (2,000,000 at 10,000 partitions and
200 groups)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from replicator.config import load_config
from replicator.engine.formats import Checkpoint
from replicator.engine.internal_topics import ensure_compacted_topic
from replicator.offsets.checkpoint_status import CheckpointRoundPublisher
from replicator.offsets.checkpoints import CheckpointReport
from replicator.operations.checkpoint_reads import checkpoint_info, newest_checkpoint
from replicator.operations.dr_status import checkpoint_age_s

from helpers.kafka import unique_topic
from helpers.replication import write_config

pytestmark = pytest.mark.integration


def test_the_newest_checkpoint_of_the_flow_is_found_behind_other_flows_checkpoints(
    tmp_path: Path, primary: str, dr: str
) -> None:
    topic = unique_topic("ckpt-age")
    flow = load_config(write_config(tmp_path, primary, dr, topic)).flow("primary->dr")
    checkpoints = flow.policy.checkpoints_topic(flow.source.alias)
    ensure_compacted_topic(flow.target, checkpoints, 1, "checkpoints.topic.replication.factor")

    now_ms = int(time.time() * 1000)
    producer = Producer({"bootstrap.servers": dr})
    ours = Checkpoint("app", f"primary.{topic}", 0, 10, 10)
    producer.produce(checkpoints, key=ours.key(), value=ours.value(), timestamp=now_ms - 100_000)
    # More than one window of another flow's checkpoints after it, newer.
    foreign = f"primary.{unique_topic('other')}"
    for i in range(2_500):
        theirs = Checkpoint(f"g{i}", foreign, 0, i, i)
        producer.produce(checkpoints, key=theirs.key(), value=theirs.value(), timestamp=now_ms)
    assert producer.flush(30) == 0

    age = checkpoint_age_s(flow)
    assert age is not None and 99 <= age < 130, age
    info = checkpoint_info(flow)
    assert info.checkpoints == 1 and info.groups == ["app"]
    assert info.age_seconds is not None and abs(info.age_seconds - age) < 5


def test_a_flow_without_checkpoints_has_no_age(tmp_path: Path, primary: str, dr: str) -> None:
    flow = load_config(write_config(tmp_path, primary, dr, unique_topic("none"))).flow(
        "primary->dr"
    )
    assert checkpoint_age_s(flow) is None


def test_at_rest_the_checkpoints_are_as_old_as_the_loops_last_round(
    tmp_path: Path, primary: str, dr: str
) -> None:
    """A round that finds nothing new writes no checkpoint: the newest record ages
    while every checkpoint stays current. The loop publishes each round's end in the
    status topic, and the age is the younger of the two; another flow of the same
    name with other topics (another deployment into the same target) is not vouched
    for by it."""
    topic = unique_topic("ckpt-rest")
    flow = load_config(write_config(tmp_path, primary, dr, topic)).flow("primary->dr")
    (tmp_path / "other").mkdir()
    other = load_config(write_config(tmp_path / "other", primary, dr, topic + "-x")).flow(
        "primary->dr"
    )
    checkpoints = flow.policy.checkpoints_topic(flow.source.alias)
    ensure_compacted_topic(flow.target, checkpoints, 1, "checkpoints.topic.replication.factor")
    producer = Producer({"bootstrap.servers": dr})
    for written in (flow, other):
        old = Checkpoint("app", f"primary.{written.topics.include[0].pattern}", 0, 10, 10)
        producer.produce(
            checkpoints,
            key=old.key(),
            value=old.value(),
            timestamp=int(time.time() * 1000) - 600_000,
        )
    assert producer.flush(30) == 0
    before = checkpoint_age_s(flow)
    assert before is not None and before >= 599, before

    report = CheckpointReport(flow.name)
    report.unchanged, report.groups_done, report.partitions = 1, 1, 1
    CheckpointRoundPublisher().publish(flow, report, 0.4)

    age = checkpoint_age_s(flow)
    assert age is not None and age < 60, age
    assert newest_checkpoint(flow).age_seconds >= 599, "the newest record is as old as it was"
    info = checkpoint_info(flow)
    assert info.checkpoints == 1  # the count is the topic's, as before
    other_age = checkpoint_age_s(other)
    assert other_age is not None and other_age >= 599, other_age
