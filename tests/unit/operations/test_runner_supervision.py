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

    def access_denied(self) -> bool:
        return False


class _DeniedWorker(_FakeWorker):
    """Ends at once like a worker whose target refused its principal (AccessDenied)."""

    def alive(self) -> bool:
        return False

    def killed(self) -> bool:
        return False

    def failure(self) -> str | None:
        return "lacks ALLOW WRITE on TOPIC primary.orders"

    def access_denied(self) -> bool:
        return True


def test_a_worker_stopped_with_its_flow_is_not_called_killed_nor_restarted(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(runner, "_SUPERVISE_EVERY_S", 0.01)
    flow = SimpleNamespace(name="primary->dr")
    wanted = {"primary->dr": True}
    desired = SimpleNamespace(running=lambda: dict(wanted), changed=threading.Event())
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


def test_a_worker_refused_by_a_cluster_is_not_restarted_until_its_flow_is_restarted(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """No ACL appears by waiting: the flow stays stopped, with no line of the
    supervisor's (the worker's own line says it all), however many rounds pass,
    until the state store stops and starts the flow again."""
    monkeypatch.setattr(runner, "_SUPERVISE_EVERY_S", 0.001)
    monkeypatch.setattr(runner, "_RESTART_FIRST_S", 0.0)
    flow = SimpleNamespace(name="primary->dr")
    wanted = {"primary->dr": True}
    rounds = [0]

    def running() -> dict[str, bool]:
        rounds[0] += 1
        return dict(wanted)

    started: list[_DeniedWorker] = []

    def start(flow: Any, index: int) -> _DeniedWorker:
        started.append(_DeniedWorker(flow, index))
        return started[-1]

    stop = threading.Event()
    desired = SimpleNamespace(running=running, changed=threading.Event())
    loop = threading.Thread(target=runner._supervise, args=([(flow, 0)], start, stop, desired))
    with caplog.at_level(logging.INFO, logger=runner.__name__):
        loop.start()
        wait_until(lambda: rounds[0] > 200, 30, "200 rounds of supervision")
        assert len(started) == 1
        wanted["primary->dr"] = False
        stopped_at = rounds[0]
        wait_until(lambda: rounds[0] > stopped_at + 5, 30, "the stop seen")
        wanted["primary->dr"] = True
        wait_until(lambda: len(started) == 2, 30, "the flow started again")
        restarted_at = rounds[0]
        wait_until(lambda: rounds[0] > restarted_at + 200, 30, "200 more rounds")
        stop.set()
        loop.join(5)
    assert len(started) == 2
    assert "starting it again" not in caplog.text
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
