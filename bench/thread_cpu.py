"""CPU time per thread of the replicator's processes over a run, from /proc.

A replicator that uses less than a core in all may still be limited by one thread
that uses a whole one: our Python loop, a librdkafka broker thread (the producer's
compresses and builds the requests, one per broker), or one of MM2's JVM threads.
The busiest threads over the backlog's copy say which.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ThreadLoad:
    """One thread's share of a core over the measured interval."""

    pid: int
    name: str  # the thread's name (comm): MainThread is the process's own name
    cores: float


def read_stat(path: Path) -> tuple[str, float]:
    """The name and user + system CPU seconds in a /proc `stat` file (a process's
    counts all its threads, a task's only its own)."""
    stat = path.read_text(encoding="utf-8")
    name = stat[stat.index("(") + 1 : stat.rindex(")")]
    after_name = stat.rsplit(")", 1)[1].split()  # the name in (...) may hold spaces
    return name, (int(after_name[11]) + int(after_name[12])) / CLOCK_TICKS


def _threads(pids: Sequence[int]) -> dict[tuple[int, int], tuple[str, float]]:
    """(pid, tid) -> (name, CPU seconds so far) of every live thread of `pids`."""
    found = {}
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                found[(pid, int(task.name))] = read_stat(task / "stat")
            except (FileNotFoundError, ProcessLookupError):
                continue  # the thread ended
    return found


class ThreadCpu:
    """`start` takes a snapshot, `finish` keeps the `top` busiest threads since in
    `busiest`."""

    def __init__(self, top: int = 5) -> None:
        self._top = top
        self._before: dict[tuple[int, int], tuple[str, float]] = {}
        self.busiest: list[ThreadLoad] = []

    def start(self, pids: Sequence[int]) -> None:
        self._before = _threads(pids)

    def finish(self, pids: Sequence[int], seconds: float) -> None:
        """The threads by CPU used since `start`, as cores over `seconds`."""
        loads = []
        for key, (name, cpu) in _threads(pids).items():
            used = cpu - self._before.get(key, (name, 0.0))[1]
            loads.append(ThreadLoad(key[0], name, used / seconds if seconds else 0.0))
        self.busiest = sorted(loads, key=lambda load: load.cores, reverse=True)[: self._top]
