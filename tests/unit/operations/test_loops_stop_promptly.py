"""Once `replicator run` is asked to stop, its background loops finish the step in
progress and start no other flow's: with a cluster away each step may wait out a 30 s
client timeout, and a run with two flows, one of them to a cluster that was away, took
60 s to stop (one timeout per step per flow). The checkpoint loop's steps are in
tests/unit/offsets/test_checkpoint_schedule.py."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from replicator.flow_timer import FlowTimer
from replicator.operations.thread_status import ThreadStatusLoop

FLOWS = [SimpleNamespace(name="primary->dr"), SimpleNamespace(name="primary->gone")]


class _Rounds(FlowTimer[SimpleNamespace]):
    """A timer whose first flow's round is where SIGTERM comes."""

    thread_name = "rounds"

    def __init__(self, stop: threading.Event) -> None:
        super().__init__(FLOWS, stop, lambda: {f.name: True for f in FLOWS})
        self.rounds: list[str] = []

    def enabled(self, flow: SimpleNamespace) -> bool:
        return True

    def interval(self, flow: SimpleNamespace) -> float:
        return 0.0

    def round(self, flow: SimpleNamespace) -> None:
        self.rounds.append(flow.name)
        self._stop.set()


def test_a_timer_loop_starts_no_other_flows_round_once_asked_to_stop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("replicator.flow_timer.FIRST_ROUND_S", 0.0)
    loop = _Rounds(threading.Event())
    loop.tick()
    assert loop.rounds == ["primary->dr"]


def test_the_thread_status_loop_publishes_no_other_flow_once_asked_to_stop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stop = threading.Event()
    loop = ThreadStatusLoop(FLOWS, stop, [])  # type: ignore[arg-type]
    published: list[str] = []

    def publish(flow: SimpleNamespace, record: object) -> None:
        published.append(flow.name)
        stop.set()

    monkeypatch.setattr(loop, "_publish", publish)
    loop.tick()
    assert published == ["primary->dr"]
