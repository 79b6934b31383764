"""A round of work per flow on the flow's own interval, in a thread beside replication.

`replicator run` keeps checkpoints (MM2's checkpoint connector) and ACLs (MM2's source
connector) up to date on timers of their own. Each is one daemon thread per runner
process, so reading both clusters never stalls replication; a flow the state store
has stopped gets no round (a procedure owns it); the first round comes soon after
start even when the interval is long. What a round does, and what it does with its
failures, is the subclass's.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import ClassVar, Generic, Protocol, TypeVar

#: The first round comes this soon after start at the latest (the interval may be long).
FIRST_ROUND_S = 10.0
_TICK_S = 1.0


class _Flow(Protocol):
    @property
    def name(self) -> str: ...


F = TypeVar("F", bound=_Flow)


class FlowTimer(ABC, Generic[F]):
    """Runs `round(flow)` for each flow `enabled` picks, every `interval(flow)`
    seconds, until `stop` is set, while `running()` says the flow runs."""

    thread_name: ClassVar[str]

    def __init__(
        self,
        flows: Sequence[F],
        stop: threading.Event,
        running: Callable[[], dict[str, bool]],
    ) -> None:
        self._flows = [flow for flow in flows if self.enabled(flow)]
        self._stop = stop
        self._running = running
        self._thread = threading.Thread(target=self._loop, name=self.thread_name, daemon=True)

    @abstractmethod
    def enabled(self, flow: F) -> bool:
        """Whether the flow's configuration asks for these rounds at all."""

    @abstractmethod
    def interval(self, flow: F) -> float:
        """Seconds between two rounds of the flow."""

    @abstractmethod
    def round(self, flow: F) -> None:
        """One round for the flow; it handles its own failures (the next round retries)."""

    def start(self) -> None:
        if self._flows:
            self._thread.start()

    def join(self, timeout: float) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _loop(self) -> None:
        start = time.monotonic()
        due = {flow.name: start + min(FIRST_ROUND_S, self.interval(flow)) for flow in self._flows}
        while not self._stop.wait(_TICK_S):
            wanted = self._running()
            for flow in self._flows:
                now = time.monotonic()
                if now < due[flow.name] or not wanted.get(flow.name, True):
                    continue
                due[flow.name] = now + self.interval(flow)
                self.round(flow)
