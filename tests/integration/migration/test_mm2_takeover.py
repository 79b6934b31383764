"""Taking a flow over from Apache Kafka's own MirrorMaker 2 (run from the Maven jars),
and handing it back, with nothing copied twice and nothing lost.

(a) MM2 copies while a producer writes and is stopped cleanly; the replicator then
    runs on the same properties: every record on the target exactly once, in order;
    a group MM2 checkpointed (and synced to the target) translates exactly, both ways,
    and its checkpoint and synced offset never move backwards. Then the reverse: the
    replicator stops, `replicator migrate --to-mm2` writes its position into MM2's
    offsets topic, MM2 starts again and continues there: still exactly once; and once
    more to the replicator, which continues after MM2's new copies.
(b) The same takeover after `kill -9` of MM2 under load, when MM2 had written past
    the offset it committed.

Before the takeover the engine resumed from its own provenance headers, which MM2's
copies lack, and copied every one of MM2's records a second time.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from replicator.config import load_config
from replicator.config.model import FlowConfig
from replicator.engine.mm2_state import MirrorMakerState, mm2_offset_key
from replicator.offsets.checkpoints import Checkpointer, ReverseCheckpointer, read_checkpoints
from replicator.offsets.groups import GroupAdmin

from helpers.kafka import create_topic, read_partition, unique_topic
from helpers.mirror_maker import MM2_START_S, mirror_maker, mm2_properties
from helpers.replication import PacedProduction, end_offsets, preload, running, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

PARTITIONS = 2
RECORDS = 4_000
RATE = 300  # records/s: MM2 is stopped (or killed) while the producer still writes
MORE = 400  # records written while MM2 has the flow back
SEED = 20  # records per partition MM2 copies before the producer starts


def _keys(bootstrap: str, topic: str, partition: int) -> list[bytes | None]:
    """The keys of every committed record of `topic[partition]`, in order."""
    return [record.key for _, record in read_partition(bootstrap, topic, partition)]


def _key_at(bootstrap: str, topic: str, partition: int, offset: int) -> bytes | None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex}"})
    try:
        consumer.assign([TopicPartition(topic, partition, offset)])
        message = consumer.consume(1, timeout=10)[0]
        assert message.error() is None and message.offset() == offset
        return message.key()
    finally:
        consumer.close()


def _assert_exactly_once(primary: str, dr: str, topic: str, remote: str) -> None:
    for partition in range(PARTITIONS):
        source, target = _keys(primary, topic, partition), _keys(dr, remote, partition)
        twice = (Counter(target) - Counter(source)).total()
        missing = (Counter(source) - Counter(target)).total()
        assert (missing, twice) == (0, 0), (
            f"{remote}[{partition}]: {missing} records missing, {twice} copied twice "
            f"({len(source)} on the source, {len(target)} on the target)"
        )
        assert target == source, f"{remote}[{partition}] holds the records out of order"


def _wait_copied(primary: str, dr: str, topic: str, remote: str, timeout: float) -> None:
    wanted = end_offsets(primary, topic, PARTITIONS)

    def copied() -> bool:
        ends = end_offsets(dr, remote, PARTITIONS)
        return ends is not None and all(e >= w for e, w in zip(ends, wanted or [], strict=True))

    wait_until(copied, timeout, f"{remote} to hold {wanted} records")


def _commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    committer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    committer.commit(
        offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False
    )
    committer.close()


def _mid_stream(dr: str, remote: str, production: PacedProduction, at_least: int) -> None:
    """Until MM2 copied `at_least` records of each partition, while the producer writes."""

    def far_enough() -> bool:
        ends = end_offsets(dr, remote, PARTITIONS)
        return ends is not None and min(ends) >= at_least

    wait_until(far_enough, 90, f"MirrorMaker 2 to copy {at_least} records per partition")
    assert production.running, "the producer finished before MirrorMaker 2 was stopped"


def _flow(properties: dict[str, str], source: str, target: str) -> FlowConfig:
    return load_config(properties).flow(f"{source}->{target}")


def _takeover(primary: str, dr: str, tmp_path: Path, *, kill: bool) -> dict[str, object]:
    """MM2 copies while a producer writes, is stopped (or killed) mid-stream, then the
    replicator takes over until everything is on the target. Returns the scene."""
    topic, group = unique_topic("mm2take"), unique_topic("mm2take-group")
    create_topic(primary, topic, partitions=PARTITIONS)
    properties, source, target = mm2_properties(primary, dr, topic, group)
    remote = f"{source}.{topic}"
    flow = _flow(properties, source, target)
    checkpoints_topic = f"{source}.checkpoints.internal"
    with mirror_maker(properties, tmp_path / "mm2") as node:
        # MM2 copies a first few records, and checkpoints a group that processed half
        # of them (and syncs it to the target group), before the producer starts.
        preload(primary, topic, 2 * SEED, PARTITIONS)
        _wait_copied(primary, dr, topic, remote, MM2_START_S)
        _commit(primary, group, topic, dict.fromkeys(range(PARTITIONS), SEED // 2))

        def checkpointed() -> bool:
            stored = read_checkpoints(flow.target, checkpoints_topic)
            return all((group, remote, p) in stored for p in range(PARTITIONS))

        wait_until(checkpointed, 90, f"MirrorMaker 2's checkpoints of {group}")
        with PacedProduction(primary, topic, RECORDS, PARTITIONS, RATE) as production:
            _mid_stream(dr, remote, production, SEED + 400)
            if kill:
                os.kill(node.pids()[0], signal.SIGKILL)
            node.stop()
            mm2_checkpoints = read_checkpoints(flow.target, checkpoints_topic)
            mm2_synced = {
                (c.topic, c.partition): c.offset for c in GroupAdmin(flow.target).committed(group)
            }
    state = MirrorMakerState.read(flow)
    mm2_ends = end_offsets(dr, remote, PARTITIONS)
    assert mm2_ends is not None
    for partition in range(PARTITIONS):
        committed = state.committed[(topic, partition)]
        # The key MM2 itself wrote is the one a hand-back writes.
        assert committed.key == mm2_offset_key(source, topic, partition)
    plan = subprocess.run(
        [sys.executable, "-m", "replicator", "migrate", "--from-mm2", "--dry-run",
         "--config", str(tmp_path / "mm2" / "mm2.properties")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert plan.returncode == 0, plan.stdout + plan.stderr
    print(plan.stdout)  # noqa: T201 (the dry run's real output, shown with -s)
    assert plan.stdout.count("(exact)") == PARTITIONS, plan.stdout
    with running(flow):
        _wait_copied(primary, dr, topic, remote, 90)
        time.sleep(1)  # anything copied twice lands now
    _assert_exactly_once(primary, dr, topic, remote)
    return {
        "topic": topic,
        "group": group,
        "remote": remote,
        "flow": flow,
        "properties": properties,
        "state": state,
        "mm2_ends": mm2_ends,
        "mm2_checkpoints": mm2_checkpoints,
        "mm2_synced": mm2_synced,
        "plan": plan.stdout,
    }


def _group_carries_on(primary: str, dr: str, scene: dict[str, object]) -> None:
    """The group MM2 checkpointed translates exactly from the takeover on, and its
    checkpoints and synced offsets never move backwards."""
    topic, group, remote = scene["topic"], scene["group"], scene["remote"]
    flow = scene["flow"]
    assert isinstance(flow, FlowConfig)
    mm2_checkpoints = scene["mm2_checkpoints"]
    mm2_synced = scene["mm2_synced"]
    assert isinstance(mm2_checkpoints, dict) and isinstance(mm2_synced, dict)
    for position in (SEED // 2, RECORDS // PARTITIONS - 100):  # in MM2's copies, then ours
        _commit(primary, group, str(topic), dict.fromkeys(range(PARTITIONS), position))
        with Checkpointer(flow) as checkpointer:
            report = checkpointer.emit([str(group)])
        assert not report.held, report.held
        stored = read_checkpoints(flow.target, f"{flow.source.alias}.checkpoints.internal")
        synced = {
            (c.topic, c.partition): c.offset for c in GroupAdmin(flow.target).committed(str(group))
        }
        for partition in range(PARTITIONS):
            checkpoint = stored[(group, remote, partition)]
            mm2 = mm2_checkpoints[(group, remote, partition)]
            assert checkpoint.upstream == position
            # Exact: the target record there is the copy of the source record.
            assert _key_at(dr, str(remote), partition, checkpoint.downstream) == _key_at(
                primary, str(topic), partition, position
            )
            assert checkpoint.downstream >= mm2.downstream, (checkpoint, mm2)
            assert synced[(remote, partition)] >= mm2_synced.get((remote, partition), -1)
            assert synced[(remote, partition)] == checkpoint.downstream
        # Back the other way (failback): the target group's position is the same source one.
        with ReverseCheckpointer(flow) as reverse:
            back = {c.partition: c.downstream for c in reverse.translate_group(str(group))}
        assert back == dict.fromkeys(range(PARTITIONS), position)


def test_takeover_after_a_clean_stop_and_back_to_mirror_maker(
    primary: str, dr: str, tmp_path: Path
) -> None:
    scene = _takeover(primary, dr, tmp_path, kill=False)
    _group_carries_on(primary, dr, scene)

    # The reverse: the replicator stopped, MM2 gets the flow back.
    topic, remote = str(scene["topic"]), str(scene["remote"])
    flow = scene["flow"]
    assert isinstance(flow, FlowConfig)
    state = scene["state"]
    assert isinstance(state, MirrorMakerState)
    ours = end_offsets(primary, topic, PARTITIONS)
    assert ours is not None
    # Left alone, MM2 would resume at its own committed offset + 1, before what we copied.
    assert all(state.committed[(topic, p)].offset + 1 < ours[p] for p in range(PARTITIONS))
    handed = subprocess.run(
        [sys.executable, "-m", "replicator", "migrate", "--to-mm2",
         "--config", str(tmp_path / "mm2" / "mm2.properties")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert handed.returncode == 0, handed.stdout + handed.stderr
    assert handed.stdout.count("written: ") == PARTITIONS, handed.stdout
    back = MirrorMakerState.read(flow)
    assert {p: back.committed[(topic, p)].offset for p in range(PARTITIONS)} == {
        p: ours[p] - 1 for p in range(PARTITIONS)
    }
    properties = scene["properties"]
    assert isinstance(properties, dict)
    with PacedProduction(primary, topic, MORE, PARTITIONS, RATE):
        pass
    with mirror_maker(properties, tmp_path / "mm2-again"):
        _wait_copied(primary, dr, topic, remote, 90)
        time.sleep(3)  # a re-copy of what we wrote would land now
    _assert_exactly_once(primary, dr, topic, remote)

    # And to the replicator again: MM2's new copies follow our last replica.
    with PacedProduction(primary, topic, MORE, PARTITIONS, RATE):
        pass
    with running(flow):
        _wait_copied(primary, dr, topic, remote, 90)
        time.sleep(1)  # anything copied twice lands now
    _assert_exactly_once(primary, dr, topic, remote)


def test_takeover_after_kill_9_under_load(
    primary: str, dr: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="replicator.engine.resume")
    scene = _takeover(primary, dr, tmp_path, kill=True)
    # The first start logs the plan the dry run printed.
    logged = {
        r.getMessage() for r in caplog.records if "taking over from MirrorMaker 2" in r.getMessage()
    }
    assert len(logged) == PARTITIONS, logged
    assert all(line.split(": ", 1)[1] in str(scene["plan"]) for line in logged), logged
    state = scene["state"]
    mm2_ends = scene["mm2_ends"]
    assert isinstance(state, MirrorMakerState) and isinstance(mm2_ends, list)
    topic = str(scene["topic"])
    # The point of the test: MM2 had copied records past the offset it committed.
    past = [mm2_ends[p] - (state.committed[(topic, p)].offset + 1) for p in range(PARTITIONS)]
    assert max(past) > 0, f"MM2 wrote nothing past its committed offsets ({past})"
    assert "past its committed offset" in str(scene["plan"])
    _group_carries_on(primary, dr, scene)
