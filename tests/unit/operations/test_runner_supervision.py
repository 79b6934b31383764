"""The runner's supervision loop, without Kafka: which ended workers it starts
again, and what it tells the operator about them."""

from __future__ import annotations

import logging
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from replicator.operations import runner

from helpers.replication import wait_until


class _FakeWorker(runner._Worker):
    """Ends like a worker process that got SIGTERM before its handler was set."""

    def __init__(self, flow: Any, index: int) -> None:
        super().__init__(flow, f"{flow.name}#{index}")
        self.running = True

    def alive(self) -> bool:
        return self.running

    def stop(self) -> None:
        self.running = False

    def join(self, timeout: float) -> None:
        self.running = False

    def killed(self) -> bool:
        return True

    def failure(self) -> str | None:
        return None


def test_a_worker_stopped_with_its_flow_is_not_called_killed_nor_restarted(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(runner, "_SUPERVISE_EVERY_S", 0.01)
    flow = SimpleNamespace(name="primary->dr")
    wanted = {"primary->dr": True}
    desired = SimpleNamespace(running=lambda: dict(wanted))
    started: list[_FakeWorker] = []

    def start(flow: Any, index: int) -> _FakeWorker:
        started.append(_FakeWorker(flow, index))
        return started[-1]

    stop = threading.Event()
    loop = threading.Thread(target=runner._supervise, args=([(flow, 0)], start, stop, desired))
    with caplog.at_level(logging.INFO, logger=runner.__name__):
        loop.start()
        wait_until(lambda: started, 5, "the first worker")
        wanted["primary->dr"] = False
        wait_until(lambda: "stopped: its flow is stopped" in caplog.text, 5, "the stop")
        stop.set()
        loop.join(5)
    assert len(started) == 1
    assert "was killed" not in caplog.text
