"""A last-resort watchdog for tests that hang where pytest-timeout cannot reach.

pytest-timeout's thread method (pyproject.toml) fires from a Python thread: a hang
inside a C call that holds the GIL (a native client's teardown from a finalizer, say)
never lets that thread run, and the whole run then waits until CI's 90 minutes are
gone, with nothing said about where. This plugin arms `faulthandler`'s own watchdog
around each test, a C thread that needs no GIL: `GRACE_S` after the test's timeout it
writes every thread's stack to `.data/test-artifacts/hangs/<pid>.txt` and ends the
process. pytest-xdist then reports the test as failed (its worker crashed) and goes on
with a new worker; `make test` prints the stacks after the phase.
"""

from __future__ import annotations

import faulthandler
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

#: Where the stacks go (`REPLICATOR_TEST_HANGS` moves them: the watchdog's own test).
HANGS = Path(
    os.environ.get("REPLICATOR_TEST_HANGS")
    or Path(__file__).resolve().parents[2] / ".data" / "test-artifacts" / "hangs"
)
#: Beyond the test's own timeout, for pytest-timeout to fire first when it can.
GRACE_S = float(os.environ.get("REPLICATOR_TEST_WATCHDOG_GRACE_S", "120"))


class _StackFile:
    """This process's file for stacks, opened at the first test (faulthandler writes to
    its descriptor from its C thread, so it stays open for the process's life); empty
    unless the watchdog fired."""

    def __init__(self) -> None:
        self._out: IO[str] | None = None

    def arm(self, item: pytest.Item, seconds: float) -> None:
        if self._out is None:
            HANGS.mkdir(parents=True, exist_ok=True)
            self._out = (HANGS / f"{os.getpid()}.txt").open("w")
        self._out.write(f"{item.nodeid}: no end {seconds:.0f} s after its start\n")
        self._out.flush()
        faulthandler.dump_traceback_later(seconds, exit=True, file=self._out)

    def disarm(self) -> None:
        faulthandler.cancel_dump_traceback_later()
        if self._out is not None:
            self._out.seek(0)
            self._out.truncate()


_STACKS = _StackFile()


def _timeout_s(item: pytest.Item) -> float:
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0])
    return float(item.config.getini("timeout") or 0)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    timeout = _timeout_s(item)
    if timeout <= 0:
        yield
        return
    _STACKS.arm(item, timeout + GRACE_S)
    try:
        yield
    finally:
        _STACKS.disarm()
