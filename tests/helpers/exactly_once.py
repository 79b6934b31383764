"""Exactly-once flows in worker processes: where the target's committed copy stands, and
the kill -9 then finish procedure (the Python loop's and the compiled path's tests)."""

from __future__ import annotations

import signal
from pathlib import Path

from replicator.engine.tail import TailReader
from replicator.errors import ReplicatorError

from helpers.replication import start_replicator, wait_until


def next_offsets(dr: str, remote: str, partitions: int) -> list[int | None]:
    """Per partition, the source offset after the last committed copy on the target."""
    reader = TailReader({"bootstrap.servers": dr}, "primary")
    try:
        return [reader.position(remote, p).next_source_offset for p in range(partitions)]
    except ReplicatorError:  # the remote topic may not exist yet
        return [None] * partitions
    finally:
        reader.close()


def kill_then_finish(
    config: Path, log: Path, dr: str, remote: str, wanted: list[int], *, kill_after: int
) -> None:
    """A worker killed with SIGKILL once `kill_after` records are committed, mid-stream;
    a second one copies the rest (every partition's committed copy ends at `wanted`)
    and stops cleanly on SIGTERM. Both log to `log`."""
    partitions = len(wanted)
    first = start_replicator(config, log)
    try:
        wait_until(
            lambda: sum(o or 0 for o in next_offsets(dr, remote, partitions)) > kill_after,
            90,
            "a start",
        )
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
    assert next_offsets(dr, remote, partitions) != wanted, "killed mid-stream"

    second = start_replicator(config, log)
    try:
        wait_until(
            lambda: next_offsets(dr, remote, partitions) == wanted, 180, "every record committed"
        )
        second.send_signal(signal.SIGTERM)
        assert second.wait(60) == 0, log.read_text()[-3000:]
    finally:
        if second.poll() is None:
            second.kill()
