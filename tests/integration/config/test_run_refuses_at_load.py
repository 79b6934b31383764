"""`replicator run` on a file whose client settings librdkafka refuses exits at once,
naming the keys, instead of starting workers that crash-loop on them (the issue's
example: `src->dst.consumer.max.poll.interval.ms = 15000` alone). Through the real
CLI, in a process of its own; no broker is needed, since nothing may be started."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

#: The load takes a few seconds on a busy machine; a worker that started would retry
#: with backoff for much longer, and never exit by itself.
_EXIT_WITHIN_S = 60


def _run(tmp_path: Path, *lines: str) -> tuple[int, str, float]:
    config = tmp_path / "mm2.properties"
    config.write_text(
        "\n".join(
            [
                "clusters = src, dst",
                "src.bootstrap.servers = 127.0.0.1:1",
                "dst.bootstrap.servers = 127.0.0.1:2",
                "src->dst.enabled = true",
                *lines,
            ]
        )
    )
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "replicator", "run", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=_EXIT_WITHIN_S,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr, time.monotonic() - started


@pytest.mark.parametrize(
    ("lines", "named"),
    [
        (("src->dst.consumer.max.poll.interval.ms = 15000",), "session.timeout.ms"),
        (("src->dst.target.producer.max.in.flight = 10",), "enable.idempotence=true"),
        (("src.consumer.fetch.max.bytes = 1000", "src.message.max.bytes = 100000"),
         "src.message.max.bytes=100000"),
        (("dst.producer.max.request.size = 5000000",), "max.message.bytes"),
        (("consumer.group.id = mine",), "names its consumer groups"),
    ],
)  # fmt: skip
def test_run_exits_at_once_naming_the_keys(tmp_path: Path, lines: tuple[str, ...], named: str):
    returncode, output, _ = _run(tmp_path, *lines)
    assert returncode != 0, output
    key = lines[0].split(" = ")[0]
    assert f"replicator: error: {key}" in output, output
    assert named in output, output
    assert "Traceback" not in output, output


def test_run_exits_at_once_on_a_policy_class_with_no_port(tmp_path: Path) -> None:
    """A custom Java policy class with no Python port installed: `run` names the class
    and how to register a port, instead of workers failing on it one by one."""
    returncode, output, _ = _run(tmp_path, "replication.policy.class = com.example.NoSuchPolicy")
    assert returncode != 0, output
    assert "replicator: error: " in output and "com.example.NoSuchPolicy" in output, output
    assert "replicator.replication_policies" in output, output
    assert "Traceback" not in output, output
