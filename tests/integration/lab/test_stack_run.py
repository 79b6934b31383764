"""`replicator stack run` (what `make run` starts): clusters, demo traffic, clean Ctrl-C."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replicator_lab import ClusterSpec, LocalStack
from replicator_lab.demo import DEMO_TOPICS

from helpers.kafka import free_port_pairs

pytestmark = pytest.mark.integration


def _wait_for_line(process: subprocess.Popen[str], text: str, timeout: float) -> list[str]:
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line and process.poll() is not None:
            break
        seen.append(line)
        if text in line:
            return seen
    raise AssertionError(f"{text!r} not printed within {timeout}s; output so far:\n{''.join(seen)}")


def test_run_brings_up_traffic_and_ctrl_c_stops_everything(tmp_path: Path) -> None:
    src, dst = free_port_pairs(2)
    clusters = [ClusterSpec("src", src), ClusterSpec("dst", dst)]
    command = [sys.executable, "-m", "replicator", "stack", "run", "--data-dir", str(tmp_path)]
    for spec in clusters:
        command += ["--cluster", f"{spec.name}={spec.port}"]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    stack = LocalStack(clusters, data_dir=tmp_path)
    try:
        output = "".join(_wait_for_line(process, "Stop: Ctrl-C", timeout=120))
        assert f"bootstrap.servers={clusters[0].bootstrap}" in output
        assert f"bootstrap.servers={clusters[1].bootstrap}" in output

        statuses = {s.name: s for s in stack.status()}
        assert set(DEMO_TOPICS) <= set(statuses["src"].topics)
        assert statuses["dst"].state == "running"

        process.send_signal(signal.SIGINT)
        remaining, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
        stack.down()

    assert process.returncode == 0, remaining
    assert "stopped: src, dst" in remaining
    assert all(broker.pids() == [] for broker in stack.brokers.values())
