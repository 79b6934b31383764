"""Interoperability with Apache Kafka's own MirrorMaker 2, run from the Maven jars.

(a) MM2's client library (`RemoteClusterUtils.translateOffsets`) reads checkpoints
    written with our encoder and returns our offsets: our binary format is MM2's.
(b) MM2's checkpoint connector translates a group 1,600 records behind; its answer is
    recorded next to the exact one, for the comparison with our exact translation.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from replicator.engine.formats import Checkpoint
from replicator_lab import StackError
from replicator_lab.mirrormaker_translation import (
    SOURCE_ALIAS,
    mirror_maker_translation,
    translate_offsets,
)

from helpers.kafka import create_topic, unique_topic
from helpers.replication import preload

pytestmark = pytest.mark.integration

RECORDS = 5_000
BEHIND = 1_600


def _write_checkpoints(bootstrap: str, topic: str, checkpoints: list[Checkpoint]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for checkpoint in checkpoints:
        producer.produce(topic, key=checkpoint.key(), value=checkpoint.value())
    assert producer.flush(30) == 0, f"checkpoints to {topic} not delivered in 30 s"


def test_remote_cluster_utils_reads_our_checkpoints(dr: str) -> None:
    alias = unique_topic("ours")
    checkpoints_topic = f"{alias}.checkpoints.internal"
    create_topic(dr, checkpoints_topic, partitions=1, config={"cleanup.policy": "compact"})
    group, remote = unique_topic("group"), f"{alias}.orders"
    _write_checkpoints(
        dr,
        checkpoints_topic,
        [
            Checkpoint(group, remote, 0, upstream=1_200, downstream=1_000),
            Checkpoint(group, remote, 1, upstream=250, downstream=240, metadata="app=billing"),
            Checkpoint(f"{group}-other", remote, 0, upstream=7, downstream=5),
            # A later checkpoint for the same key wins, even a lower one (a group rewind).
            Checkpoint(group, remote, 0, upstream=1_100, downstream=900),
        ],
    )

    assert translate_offsets(dr, alias, group) == {(remote, 0): 900, (remote, 1): 240}
    assert translate_offsets(dr, alias, f"{group}-none") == {}


def test_translate_offsets_names_a_missing_checkpoints_topic(dr: str) -> None:
    alias = unique_topic("nobody")
    with pytest.raises(StackError, match=rf"no topic {alias}\.checkpoints\.internal"):
        translate_offsets(dr, alias, "any-group")


def test_mirror_maker_translation_of_a_group_1600_behind(
    primary: str, dr: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topic, group = unique_topic("mm2cmp"), unique_topic("mm2cmp-group")
    create_topic(primary, topic, partitions=1)
    preload(primary, topic, RECORDS, partitions=1)
    exact = RECORDS - BEHIND
    committer = Consumer(
        {"bootstrap.servers": primary, "group.id": group, "enable.auto.commit": False}
    )
    committer.commit(offsets=[TopicPartition(topic, 0, exact)], asynchronous=False)
    committer.close()

    translated = mirror_maker_translation(primary, dr, topic, group, workdir=tmp_path / "mm2")

    remote = f"{SOURCE_ALIAS}.{topic}"
    assert set(translated) == {(remote, 0)}
    mm2 = translated[(remote, 0)]
    # MM2's copy starts at offset 0 without gaps, so `exact` is the right answer there;
    # MM2 may only err towards re-reading, never past the group's position.
    assert 0 <= mm2 <= exact
    # What MM2 wrote is what its own client library reads back.
    assert translate_offsets(dr, SOURCE_ALIAS, group) == translated
    with capsys.disabled():  # the figure the comparison reports, shown in every run
        print(  # noqa: T201
            f"\nMirrorMaker 2 translated offset {exact:,} of a group {BEHIND:,} records behind "
            f"to {mm2:,}: {exact - mm2:,} records before the exact offset {exact:,}"
        )
