"""Background loops of `replicator run`, and the one rule they all follow.

`replicator run` does its side work in daemon threads beside replication: it reads
the flows' desired states from the DR state store (`DesiredStates`), emits
checkpoints (MM2's checkpoint connector) and syncs ACLs (MM2's source connector) on
timers of their own, and publishes the health of these threads. Reading both
clusters or the store must never stall replication, and a failure of either must
never end a thread, or `replicator run`, silently. So every such loop is a
`BackgroundLoop`:

- one pass of its work is `tick()`; whatever a pass raises is caught by the loop,
  never lost: the first failure of a run of failures (an *outage*) is logged once,
  as a warning (with the traceback when the error is not one of ours, so a bug can
  be fixed), every failure is counted (`replicator_background_errors_total`), the
  next attempts back off (1 s doubling to 10 s), and the first success after it is
  logged once with how long it lasted; no line per tick;
- its health (alive, failing since when and why, last pass) is watched: `health()`
  for the runner's status record (`replicator status`, the DR status page) and the
  `replicator_background_*` gauges; a thread that died anyway (a BaseException) is
  started again by `revive()`, which the runner's supervising loop calls, logged
  and counted.

`FlowTimer` is the loop that runs a round per flow on the flow's own interval: a
flow the state store has stopped gets no round (a procedure owns it); the first
round comes soon after start even when the interval is long; each flow's rounds
fail and recover on their own (one flow's failure never delays another's).
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Generic, Protocol, TypeVar

from replicator import metrics
from replicator.backoff import Backoff
from replicator.errors import ReplicatorError

log = logging.getLogger(__name__)

#: The first round comes this soon after start at the latest (the interval may be long).
FIRST_ROUND_S = 10.0
_TICK_S = 1.0
#: After a failure the next attempt waits this long, doubling up to the maximum.
RETRY_FIRST_S = 1.0
RETRY_MAX_S = 10.0


def _now_ms() -> int:
    return int(time.time() * 1000)


class Outage:
    """The failures of one piece of work (`what`) of one background thread: logged
    once when they start and once when they end, each counted, retried with backoff."""

    def __init__(self, thread: str, what: str, while_failing: str) -> None:
        self.thread = thread
        self.what = what
        self._while_failing = while_failing
        self._backoff = Backoff(RETRY_FIRST_S, RETRY_MAX_S)
        self._attempts = 0
        #: The current failure (None: the last attempt succeeded) and when it began.
        self.error: str | None = None
        self.since_ms: int | None = None

    def due(self, now: float) -> bool:
        return self._backoff.due(now)

    def failed(self, exc: BaseException, now: float) -> None:
        metrics.BACKGROUND_ERRORS.labels(self.thread, self.what).inc()
        self._attempts += 1
        self.error = (
            f"{type(exc).__name__}: {exc}" if not isinstance(exc, ReplicatorError) else str(exc)
        )
        if not self._backoff.failed(now):
            return  # said when it began: no line per attempt
        self.since_ms = _now_ms()
        log.warning(
            "%s: %s failed: %s; %s; trying again with backoff (up to %g s), and saying so "
            "once when it succeeds",
            self.thread, self.what, self.error, self._while_failing, RETRY_MAX_S,
            exc_info=not isinstance(exc, ReplicatorError),  # not ours: a bug, keep its traceback
        )  # fmt: skip

    def succeeded(self, now: float) -> None:
        lasted = self._backoff.succeeded(now)
        if lasted is not None:
            log.info(
                "%s: %s works again after %.1f s (%d failed attempt(s), the last: %s)",
                self.thread, self.what, lasted, self._attempts, self.error,
            )  # fmt: skip
        self._attempts = 0
        self.error = self.since_ms = None


@dataclass(frozen=True)
class ThreadHealth:
    """How a background thread is, as `replicator status` and the DR status page show it."""

    thread: str
    #: "ok", "failing" (alive, its work fails: `error` since `since_ms`), "dead" (the
    #: thread ended while it should run; the supervising loop starts it again), or
    #: "stopped" (not started, or ended because the run stops).
    state: str
    error: str | None = None
    since_ms: int | None = None
    #: When its loop last went round (it does so every second or so while alive).
    beat_ms: int | None = None
    #: Times it died and was started again.
    restarts: int = 0


class BackgroundLoop(ABC):
    """A daemon thread running `tick()` every `tick_s` until `stop` is set, by the
    rule of this module (see its docstring)."""

    thread_name: ClassVar[str]
    #: What one pass does, as the log and the status name it ("reading ... failed").
    work: ClassVar[str] = "its round"
    tick_s: ClassVar[float] = _TICK_S
    #: What the process still does while a tick fails (said in the warning).
    while_failing: ClassVar[str] = "the previous results stay"

    def __init__(self, stop: threading.Event) -> None:
        self._stop = stop
        self._outages: dict[str, Outage] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._beat_ms: int | None = None
        self._restarts = 0
        self._died_said = False

    @abstractmethod
    def tick(self) -> None:
        """One pass of the loop's work; raising is fine (see the module docstring)."""

    def wanted(self) -> bool:
        """Whether the loop has work at all (no thread starts otherwise)."""
        return True

    def pause_s(self) -> float:
        """Seconds from one pass to the next: `tick_s`, unless the loop watches for
        something sooner (see FlowTimer.due_early)."""
        return self.tick_s

    def start(self) -> None:
        if self.wanted() and self._thread is None:
            self._spawn()

    def join(self, timeout: float) -> None:
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout)

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def revive(self) -> bool:
        """Start the thread again if it died while it should run: logged and counted.
        True if it did (the supervising loop calls this about every second)."""
        if self._thread is None or self._thread.is_alive() or self._stop.is_set():
            return False
        self._restarts += 1
        metrics.BACKGROUND_ERRORS.labels(self.thread_name, "thread died").inc()
        log.error(
            "background thread %s ended (see the error above); starting it again (restart %d)",
            self.thread_name, self._restarts,
        )  # fmt: skip
        self._spawn()
        return True

    def health(self) -> ThreadHealth:
        with self._lock:
            failing = [o for o in self._outages.values() if o.error is not None]
        if self._thread is None or (self._stop.is_set() and not self._thread.is_alive()):
            state = "stopped"
        elif not self._thread.is_alive():
            state = "dead"
        else:
            state = "failing" if failing else "ok"
        first = min(failing, key=lambda o: o.since_ms or 0) if failing else None
        return ThreadHealth(
            self.thread_name,
            state,
            error=None if first is None else f"{first.what}: {first.error}",
            since_ms=None if first is None else first.since_ms,
            beat_ms=self._beat_ms,
            restarts=self._restarts,
        )

    def guarded(self, what: str, work: Callable[[], object], while_failing: str = "") -> bool:
        """Do `work` unless its backoff says wait; True if it ran and succeeded. Its
        failures follow this module's rule under the name `what`."""
        with self._lock:
            outage = self._outages.get(what)
            if outage is None:
                outage = Outage(self.thread_name, what, while_failing or self.while_failing)
                self._outages[what] = outage
        now = time.monotonic()
        if not outage.due(now):
            return False
        try:
            work()
        except Exception as exc:  # logged once, counted and shown: see Outage
            outage.failed(exc, time.monotonic())
            self._gauges()
            return False
        outage.succeeded(time.monotonic())
        self._gauges()
        return True

    def _spawn(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=self.thread_name, daemon=True)
        self._thread.start()
        metrics.BACKGROUND_THREAD_ALIVE.labels(self.thread_name).set(1)

    def _gauges(self) -> None:
        with self._lock:
            failing = any(o.error is not None for o in self._outages.values())
        metrics.BACKGROUND_FAILING.labels(self.thread_name).set(int(failing))

    def _loop(self) -> None:
        try:
            self._beat_ms = _now_ms()
            while not self._stop.wait(self.pause_s()):
                self._beat_ms = _now_ms()
                self.guarded(self.work, self.tick)
        finally:
            if not self._stop.is_set():
                metrics.BACKGROUND_THREAD_ALIVE.labels(self.thread_name).set(0)


class _Flow(Protocol):
    @property
    def name(self) -> str: ...


F = TypeVar("F", bound=_Flow)


class FlowTimer(BackgroundLoop, Generic[F]):
    """Runs `round(flow)` for each flow `enabled` picks, every `interval(flow)`
    seconds, until `stop` is set, while `running()` says the flow runs."""

    while_failing = "replication goes on, and the previous round's results stay"

    def __init__(
        self,
        flows: Sequence[F],
        stop: threading.Event,
        running: Callable[[], dict[str, bool]],
    ) -> None:
        super().__init__(stop)
        self._flows = [flow for flow in flows if self.enabled(flow)]
        self._running = running
        self._due: dict[str, float] | None = None

    @abstractmethod
    def enabled(self, flow: F) -> bool:
        """Whether the flow's configuration asks for these rounds at all."""

    @abstractmethod
    def interval(self, flow: F) -> float:
        """Seconds between two rounds of the flow."""

    @abstractmethod
    def round(self, flow: F) -> None:
        """One round for the flow. It logs the failures it expects (a cluster away) and
        returns; anything it raises follows this module's rule (logged once, counted,
        retried with backoff, shown), apart from the other flows'."""

    def next_round_in(self, flow: F) -> float:
        """Seconds from the end of a round to the next: the interval, unless the round
        left work that cannot wait that long (see CheckpointLoop)."""
        return self.interval(flow)

    def due_early(self, flow: F) -> bool:
        """Whether the flow's next round should start now, before `next_round_in` has
        passed: what the round before left is ready (see CheckpointLoop)."""
        return False

    def paused(self, flow: F) -> None:
        """The flow does not run now (the state store stopped it): no round, and what
        its rounds publish must not read as failing (see CheckpointLoop)."""

    def wanted(self) -> bool:
        return bool(self._flows)

    def tick(self) -> None:
        if self._due is None:
            start = time.monotonic()
            self._due = {f.name: start + min(FIRST_ROUND_S, self.interval(f)) for f in self._flows}
        wanted = self._running()
        for flow in self._flows:
            if self._stop.is_set():  # asked to stop: no other flow's round starts
                return
            if not wanted.get(flow.name, True):
                self.paused(flow)
                continue
            if time.monotonic() < self._due[flow.name] and not self.due_early(flow):
                continue
            if self.guarded(f"the round of flow {flow.name}", lambda flow=flow: self.round(flow)):  # type: ignore[misc]
                self._due[flow.name] = time.monotonic() + self.next_round_in(flow)
