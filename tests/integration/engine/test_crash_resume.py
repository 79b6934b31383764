"""`kill -9` of the replicator mid-stream, then a restart: nothing lost, nothing twice."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from helpers.replication import (
    end_offsets,
    preloaded_flow,
    source_offsets_on_target,
    start_replicator,
    wait_until,
)

pytestmark = pytest.mark.integration

PARTITIONS = 6
#: Enough that the kill lands mid-stream: the compiled path copied 400,000 of these in
#: less than wait_until's pause had grown to (2026-11-30: all copied at the first look).
RECORDS = 1_000_000
#: How often the first run's progress is looked at, until the kill.
LOOK_EVERY_S = 0.05


def test_kill_9_mid_stream_then_restart_loses_and_doubles_nothing(
    tmp_path: Path, primary: str, dr: str
) -> None:
    flow = preloaded_flow(tmp_path, primary, dr, "crash", RECORDS, PARTITIONS)
    remote, wanted, config = flow.remote, flow.wanted, flow.config
    log = tmp_path / "replicator.log"

    first = start_replicator(config, log)
    try:
        wait_until(
            lambda: sum(end_offsets(dr, remote, PARTITIONS) or [0]) >= 40_000,
            60,
            "a start",
            every_s=LOOK_EVERY_S,
        )
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
    at_kill = sum(end_offsets(dr, remote, PARTITIONS) or [0])
    assert at_kill < RECORDS, "killed mid-stream, not after the end"

    second = start_replicator(config, log)
    try:
        wait_until(lambda: end_offsets(dr, remote, PARTITIONS) == wanted, 120, "all records")
        second.send_signal(signal.SIGTERM)
        assert second.wait(60) == 0, log.read_text()[-3000:]
    finally:
        if second.poll() is None:
            second.kill()

    for partition in range(PARTITIONS):
        copied = source_offsets_on_target(dr, remote, partition, wanted[partition])
        assert copied == list(range(wanted[partition])), f"partition {partition}"
