"""MirrorMaker 2 must be gone before a partition is taken over from it (issue 44, point 2).

Two MM2 nodes run one flow in dedicated mode (one Connect group, the internal REST
server on, as several nodes need it), heartbeats on; while
a producer writes, the node that does not run the flow's source task is killed with
-9, so the survivor goes on copying (Connect hands a killed node's tasks to the others
only after `scheduled.rebalance.max.delay.ms`, so the killed node's heartbeats stop
for minutes). `replicator run` started then takes no partition over while the other
node runs: it says MM2 still writes the flow, with what it saw (the target growing
while the takeover was planned, or a fresh heartbeat), and writes nothing to the
target. Once the survivor is stopped, the partitions go on by themselves, exactly:
every source record on the target once, in order.

Before, the takeover never looked: the replicator started after MM2's committed offset
while the surviving node could go on copying, and both wrote the same records.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections import Counter
from pathlib import Path

import pytest

from replicator.engine.headers import SOURCE_HEADER
from replicator_lab.mirrormaker import MirrorMaker

from helpers.kafka import create_topic, read_partition, unique_topic
from helpers.mirror_maker import MM2_START_S, mirror_maker, mm2_properties
from helpers.replication import PacedProduction, end_offsets, start_replicator, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

PARTITIONS = 2
RATE = 200  # records/s
RECORDS = RATE * 150  # written while both nodes run, one is killed and the other stopped
REFUSAL = "MirrorMaker 2 still writes this flow"
SOURCE_TASK = "MirrorSourceConnector-0"


def _node(properties: dict[str, str]) -> dict[str, str]:
    """One node's properties: several dedicated-mode nodes need MM2's internal REST
    server (KIP-710: a follower forwards task configurations to the leader), each on a
    port of its own."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return {
        **properties,
        "dedicated.mode.enable.internal.rest": "true",
        "listeners": f"http://127.0.0.1:{port}",
    }


def _runs(node: MirrorMaker, task: str) -> bool:
    """Whether `node` runs `task` now (its log's last word on it is a start)."""
    running = False
    for line in node.log_lines():
        if f"Starting task {task}" in line:
            running = True
        elif f"Stopping task {task}" in line:
            running = False
    return running


def _ours(bootstrap: str, topic: str) -> int:
    """Records of the target partitions that carry our provenance (replicas of ours)."""
    return sum(
        1
        for partition in range(PARTITIONS)
        for _, record in read_partition(bootstrap, topic, partition)
        if SOURCE_HEADER in dict(record.headers or [])
    )


def test_the_takeover_waits_until_every_mirror_maker_node_is_gone(
    primary: str, dr: str, tmp_path: Path
) -> None:
    topic, group = unique_topic("mm2live"), unique_topic("mm2live-group")
    create_topic(primary, topic, partitions=PARTITIONS)
    properties, source, _ = mm2_properties(primary, dr, topic, group, heartbeats=True)
    remote = f"{source}.{topic}"
    config = tmp_path / "replicator.properties"
    config.write_text("".join(f"{k} = {v}\n" for k, v in properties.items()), encoding="utf-8")
    log = tmp_path / "run.log"
    process = None
    try:
        with (
            mirror_maker(_node(properties), tmp_path / "node-1") as first,
            mirror_maker(_node(properties), tmp_path / "node-2") as second,
            PacedProduction(primary, topic, RECORDS, PARTITIONS, RATE) as production,
        ):

            def copying() -> bool:
                ends = end_offsets(dr, remote, PARTITIONS)
                return ends is not None and min(ends) >= 500

            wait_until(copying, MM2_START_S, "MirrorMaker 2 to copy 500 records per partition")
            nodes = (first, second)
            wait_until(
                lambda: sum(_runs(n, SOURCE_TASK) for n in nodes) == 1,
                60,
                f"one node to run {SOURCE_TASK}",
            )
            idle, survivor = nodes if _runs(second, SOURCE_TASK) else nodes[::-1]
            os.kill(idle.pids()[0], signal.SIGKILL)
            idle.stop()
            process = start_replicator(config, log)

            def refused() -> bool:
                return REFUSAL in log.read_text(encoding="utf-8", errors="replace")

            wait_until(refused, 120, f"the run to say {REFUSAL!r}")
            time.sleep(20)  # the survivor copies on, longer than a heartbeat stays fresh
            text = log.read_text(encoding="utf-8", errors="replace")
            assert "while its takeover was planned" in text or "heartbeat of" in text, text
            assert "taking over from MirrorMaker 2" not in text, text[-3000:]
            assert _ours(dr, remote) == 0, "the replicator wrote while MirrorMaker 2 ran"
            assert process.poll() is None, text[-3000:]
            survivor.stop()
            assert production.running, "the producer finished before MirrorMaker 2 was gone"

        wanted = end_offsets(primary, topic, PARTITIONS)

        def copied() -> bool:
            return end_offsets(dr, remote, PARTITIONS) == wanted

        wait_until(copied, 180, f"{remote} to hold {wanted} records")
        time.sleep(2)  # anything copied twice lands now
    finally:
        if process is not None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=90)
    text = log.read_text(encoding="utf-8", errors="replace")
    assert "MirrorMaker 2 shows no sign of life after" in text, text[-3000:]
    assert "taking over from MirrorMaker 2" in text, text[-3000:]
    for partition in range(PARTITIONS):
        keys = [r.key for _, r in read_partition(primary, topic, partition)]
        copies = [r.key for _, r in read_partition(dr, remote, partition)]
        twice = (Counter(copies) - Counter(keys)).total()
        missing = (Counter(keys) - Counter(copies)).total()
        assert (missing, twice) == (0, 0), (
            f"{remote}[{partition}]: {missing} records missing, {twice} copied twice"
        )
        assert copies == keys, f"{remote}[{partition}] holds the records out of order"
    assert _ours(dr, remote) > 0, "the replicator copied nothing after MirrorMaker 2"
