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
from replicator.operations.dr_status import checkpoint_age_s, checkpoint_info

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
