"""Helpers for the DR procedure tests: demo apps as subprocesses, a runner in a thread."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from replicator.config.model import FlowConfig
from replicator.runner import run_flows
from replicator.statestore import StateStore

DEMO = Path(__file__).resolve().parents[1] / "include" / "demo"


Start = Callable[..., subprocess.Popen[bytes]]


@contextmanager
def demo_apps(logs: Path) -> Iterator[Start]:
    """Start demo apps (`start("producer", *args)`), logging under `logs`; every one
    still running at the end is killed."""
    processes: list[subprocess.Popen[bytes]] = []

    def start(script: str, *args: str) -> subprocess.Popen[bytes]:
        with (logs / f"{script}.log").open("ab") as log:
            process = subprocess.Popen(
                [sys.executable, str(DEMO / f"{script}.py"), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        processes.append(process)
        return process

    try:
        yield start
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)


@contextmanager
def runner(flows: list[FlowConfig], store: StateStore) -> Iterator[None]:
    """`replicator run` for `flows` in a thread, obeying `store`'s flow states."""
    stop = threading.Event()
    failure: list[BaseException] = []

    def target() -> None:
        try:
            run_flows(flows, stop, store)
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=target, name="runner", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=120)
        assert not thread.is_alive(), "runner did not stop within 120 s"
        if failure:
            raise failure[0]
