"""Keeping a running step's leases: renewed in the background while the step runs.

A step takes its leases when it starts (`steps.Procedure._attempt`); a step may
run longer than a lease lasts (a fence waiting on slow clients, a drain), so a
`LeaseRenewer` thread, owned by the step runner, renews them every third of the
shortest lease while the step runs and is stopped (and joined) when it ends,
whatever the ending.

A lease can still be lost: another owner took it (someone released it by hand,
or it lapsed while the store did not answer), or no renewal got through for two
thirds of its length, so it may lapse before the next. The renewer then stops
renewing and the step stops acting: `ensure_held()` raises `LeaseLost` in the
thread that runs the step (a fence's wait calls it at every look), and the step
runner calls `check()` before it saves the step as done.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from replicator.errors import ReplicatorError
from replicator.statestore import LeaseTaken, StateStore, StateStoreError, fencing
from replicator.statestore.fencing import Guard
from replicator.statestore.leases import LeaseStore

log = logging.getLogger(__name__)

#: How long stopping a renewer may take: a renewal in flight ends within the store's
#: own timeouts (SQLite's busy timeout is 30 s).
_STOP_TIMEOUT_S = 60.0


class LeaseLost(ReplicatorError):
    """A running step lost a lease it needs; it must not act any further."""


@dataclass(frozen=True)
class Hold:
    """Leases on `resources`, held by `owner` with the fencing tokens they were taken
    with (`replicator.statestore.fencing`), each renewal for `ttl_s` seconds."""

    resources: tuple[str, ...]
    owner: str
    ttl_s: float
    tokens: tuple[int, ...]

    @classmethod
    def take(cls, store: LeaseStore, resources: Iterable[str], owner: str, ttl_s: float) -> Hold:
        """Take (or renew) the leases on `resources` for `owner`: LeaseHeld when
        another owner holds one."""
        leases = store.acquire(resources, owner, ttl_s)
        return cls(
            tuple(lease.resource for lease in leases),
            owner,
            ttl_s,
            tuple(lease.token for lease in leases),
        )

    def guards(self) -> list[Guard]:
        return [Guard(r, self.owner, t) for r, t in zip(self.resources, self.tokens, strict=True)]


class LeaseRenewer:
    """Renews `holds` every third of the shortest lease in a thread of its own, from
    `start()` to `stop()`; `what` names the step in logs and errors."""

    def __init__(self, store: StateStore, holds: list[Hold], what: str) -> None:
        self.store = store
        self.holds = holds
        self.what = what
        shortest = min(hold.ttl_s for hold in holds)
        self.interval_s = shortest / 3
        #: After this long without a renewal the lease may lapse before the next one.
        self.safe_s = shortest - self.interval_s
        self.renewals = 0
        self._renewed_at = time.monotonic()
        self._lost: str | None = None
        self._cause: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, name=f"lease {what}", daemon=True)

    def start(self) -> None:
        self._renewed_at = time.monotonic()
        self._thread.start()

    def stop(self) -> None:
        """Stop renewing and wait for the thread to end. A thread stuck in a renewal
        longer than `_STOP_TIMEOUT_S` counts as a lost lease (`check` raises)."""
        self._stop.set()
        if not self._thread.is_alive():
            return
        self._thread.join(_STOP_TIMEOUT_S)
        if self._thread.is_alive():
            self._lose(f"its lease renewal did not end within {_STOP_TIMEOUT_S:g}s")

    def check(self) -> None:
        """Raise LeaseLost if the leases are lost, or may lapse before the next renewal."""
        unrenewed = time.monotonic() - self._renewed_at
        if self._lost is None and unrenewed > self.safe_s and not self._stop.is_set():
            self._lose(
                f"no renewal of its leases got through for {unrenewed:.1f}s, so they may "
                f"lapse within {self.safe_s + self.interval_s - unrenewed:.1f}s"
            )
        if self._lost is not None:
            raise LeaseLost(
                f"{self.what} lost its lease: {self._lost}; it stopped so as not to act "
                "beside another procedure. Check `replicator history` and the leases "
                "(`replicator status`), then run it again with the same id"
            ) from self._cause

    def _lose(self, why: str, cause: BaseException | None = None) -> None:
        if self._lost is None:
            self._lost, self._cause = why, cause
            log.error("%s lost its lease: %s", self.what, why)

    def _renew(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:  # only while still ours: never taken back behind whoever took it
                for hold in self.holds:
                    self.store.leases.renew(hold.guards(), hold.ttl_s)
            except LeaseTaken as exc:  # someone else holds it now: lost for good
                self._lose(str(exc), exc)
                return
            except StateStoreError as exc:  # the store did not answer: try again
                unrenewed = time.monotonic() - self._renewed_at
                if unrenewed > self.safe_s:
                    self._lose(f"the store did not answer for {unrenewed:.1f}s: {exc}", exc)
                    return
                log.warning("%s: renewing its lease failed, retrying: %s", self.what, exc)
                continue
            except Exception as exc:  # surfaced to the step by `check`, never dropped
                log.exception("%s: renewing its lease failed", self.what)
                self._lose(f"renewing it failed: {exc!r}", exc)
                return
            self._renewed_at = time.monotonic()
            self.renewals += 1


_RUNNING: contextvars.ContextVar[tuple[LeaseRenewer, ...]] = contextvars.ContextVar(
    "replicator_running_step_leases", default=()
)


@contextmanager
def renewing(renewer: LeaseRenewer) -> Iterator[LeaseRenewer]:
    """Run the body with `renewer` renewing (stopped on the way out, however the body
    ends), known to `ensure_held` in this thread (nested steps: a full drill's halves
    run inside its steps, so every enclosing step's leases are checked), and with the
    store's writes in this thread conditional on its leases' fencing tokens."""
    renewer.start()
    token = _RUNNING.set((*_RUNNING.get(), renewer))
    try:
        with fencing.guarded(g for hold in renewer.holds for g in hold.guards()):
            yield renewer
    finally:
        _RUNNING.reset(token)
        renewer.stop()


def ensure_held() -> None:
    """Raise LeaseLost when the step running in this thread lost a lease it holds;
    nothing outside a step. Call it before acting after a long wait."""
    for renewer in _RUNNING.get():
        renewer.check()
