"""A takeover from a real MirrorMaker 2 (from the Maven jars) on a topic of identical
records, MM2 killed with -9 half way, with no offset sync to anchor on (issue 44,
point 1).

Heartbeats, status pings and counters: every record of the topic has the same key,
value, headers and timestamp, and MM2 runs with `emit.offset-syncs.enabled = false`,
so the offset it committed (which a kill leaves behind its copies) is all it leaves.
Where MM2's copy ends cannot be proven by content there. Each partition is taken over
exactly (the target ends with exactly the source's count) or refused, naming its
uncertain records, with nothing copied to it; with `at-least-once` and a restart a
refused partition goes on from MM2's committed offset: never fewer records than the
source. Before, the takeover anchored on the first target record that looked like
MM2's committed one, said "exact", and skipped records.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from confluent_kafka import Producer

from replicator.config import load_config
from replicator.config.model import FlowConfig
from replicator.engine.status import PartitionStatus

from helpers.kafka import create_topic, unique_topic
from helpers.mirror_maker import MM2_START_S, mirror_maker, mm2_properties
from helpers.replication import end_offsets, partition_status, running, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

PARTITIONS = 2
PER_PARTITION = 3_000
RATE = 300  # records/s over both partitions: MM2 is killed while they are written
STAMP = 1_700_000_000_000


class _Pings(threading.Thread):
    """Writes PER_PARTITION identical records to each partition, paced."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(name="pings", daemon=True)
        self._args = (bootstrap, topic)
        self.error: BaseException | None = None

    def run(self) -> None:
        bootstrap, topic = self._args
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        try:
            for i in range(PER_PARTITION * PARTITIONS):
                producer.produce(
                    topic, b"status: ok", b"ping", i % PARTITIONS,
                    headers=[("app", b"pinger")], timestamp=STAMP,
                )  # fmt: skip
                producer.poll(0)
                time.sleep(1 / RATE)
            assert producer.flush(30) == 0
        except BaseException as exc:  # reported by the test
            self.error = exc


def _stopped(flow: FlowConfig, topic: str, partition: int) -> PartitionStatus | None:
    status = partition_status(flow, topic, partition)
    return status if status is not None and status.state == "stopped" else None


def test_identical_records_without_offset_syncs_are_never_skipped(
    primary: str, dr: str, tmp_path: Path
) -> None:
    topic, group = unique_topic("pings"), unique_topic("pings-group")
    # The records' timestamp is years old: with the default retention, the broker's
    # next retention check (every 5 minutes) deletes them, on either cluster (the
    # remote topic takes the source's configuration), and the run fails on a gap.
    create_topic(primary, topic, partitions=PARTITIONS, config={"retention.ms": "-1"})
    properties, source, target = mm2_properties(primary, dr, topic, group)
    # No offset syncs: then no checkpoints either (MM2 and our loader refuse them
    # without), and no setting of the offset-syncs topic (MM2 refuses the connector).
    del properties["offset-syncs.topic.replication.factor"]
    properties |= {
        "emit.offset-syncs.enabled": "false",
        "emit.checkpoints.enabled": "false",
        "sync.group.offsets.enabled": "false",
    }
    remote = f"{source}.{topic}"
    flow = load_config(properties).flow(f"{source}->{target}")
    pings = _Pings(primary, topic)
    with mirror_maker(properties, tmp_path / "mm2") as node:
        pings.start()

        def half_way() -> bool:
            ends = end_offsets(dr, remote, PARTITIONS)
            return ends is not None and min(ends) >= PER_PARTITION // 3

        wait_until(half_way, MM2_START_S, "MirrorMaker 2 to copy a third of the pings")
        os.kill(node.pids()[0], signal.SIGKILL)
        node.stop()
    pings.join(120)
    assert pings.error is None and not pings.is_alive(), pings.error
    source_ends = end_offsets(primary, topic, PARTITIONS)
    mm2_ends = end_offsets(dr, remote, PARTITIONS)
    assert source_ends == [PER_PARTITION] * PARTITIONS
    assert mm2_ends is not None and all(0 < e < PER_PARTITION for e in mm2_ends), mm2_ends

    refused: dict[int, PartitionStatus] = {}
    with running(flow):

        def settled() -> bool:
            ends = end_offsets(dr, remote, PARTITIONS) or []
            for p in range(PARTITIONS):
                status = _stopped(flow, topic, p)
                if status is not None:
                    refused[p] = status
            return all(p in refused or ends[p] >= PER_PARTITION for p in range(PARTITIONS))

        wait_until(settled, 120, "each partition taken over or refused")
        time.sleep(2)  # anything written past the end lands now
    ends = end_offsets(dr, remote, PARTITIONS)
    assert ends is not None
    for partition in range(PARTITIONS):
        if partition in refused:
            error = refused[partition].error or ""
            assert f"{topic}[{partition}]" in error and "uncertain" in error, error
            assert ends[partition] == mm2_ends[partition], "a refused partition was written"
        else:
            assert ends[partition] == PER_PARTITION, (
                f"{remote}[{partition}] holds {ends[partition]} records, the source "
                f"{PER_PARTITION}: taken over as exact, it must hold exactly as many"
            )

    # The operator chooses at-least-once: a refused partition goes on, never short.
    again = replace(flow, takeover_uncertain="at-least-once")
    with running(again):
        wait_until(
            lambda: all(e >= PER_PARTITION for e in end_offsets(dr, remote, PARTITIONS) or [0]),
            120,
            "every partition to hold at least the source's records",
        )
    final = end_offsets(dr, remote, PARTITIONS)
    assert final is not None and all(e >= PER_PARTITION for e in final), final
    print(f"MM2 copied {mm2_ends}, refused {sorted(refused)}, at the end {final}")  # noqa: T201
