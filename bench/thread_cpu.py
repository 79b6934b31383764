"""CPU time per thread of the replicator's processes over a run, from /proc.

A replicator that uses less than a core in all may still be limited by one thread
that uses a whole one: our Python loop, a librdkafka broker thread (the producer's
compresses and builds the requests, one per broker), or one of MM2's JVM threads.
The busiest threads over the backlog's copy say which, and how long each waited for
a CPU while it could run: a thread at 0.9 of a core that waited the other 0.1 is
CPU-bound on a machine whose cores are all taken, not waiting on Kafka.
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
    #: Time it was ready to run but waited for a CPU (run queue), in cores.
    waiting: float = 0.0


def read_stat(path: Path) -> tuple[str, float]:
    """The name and user + system CPU seconds in a /proc `stat` file (a process's
    counts all its threads, a task's only its own)."""
    stat = path.read_text(encoding="utf-8")
    name = stat[stat.index("(") + 1 : stat.rindex(")")]
    after_name = stat.rsplit(")", 1)[1].split()  # the name in (...) may hold spaces
    return name, (int(after_name[11]) + int(after_name[12])) / CLOCK_TICKS


def run_queue_seconds(task: Path) -> float:
    """Seconds a thread has waited on a run queue (`schedstat`'s second field, ns)."""
    return int((task / "schedstat").read_text(encoding="utf-8").split()[1]) / 1e9


def _threads(pids: Sequence[int]) -> dict[tuple[int, int], tuple[str, float, float]]:
    """(pid, tid) -> (name, CPU seconds, run-queue seconds so far) of every live
    thread of `pids`."""
    found = {}
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                found[(pid, int(task.name))] = (*read_stat(task / "stat"), run_queue_seconds(task))
            except (FileNotFoundError, ProcessLookupError):
                continue  # the thread ended
    return found


class ThreadCpu:
    """`start` takes a snapshot, `finish` keeps the `top` busiest threads since in
    `busiest`."""

    def __init__(self, top: int = 5) -> None:
        self._top = top
        self._before: dict[tuple[int, int], tuple[str, float, float]] = {}
        self.busiest: list[ThreadLoad] = []

    def start(self, pids: Sequence[int]) -> None:
        self._before = _threads(pids)

    def finish(self, pids: Sequence[int], seconds: float) -> None:
        """The threads by CPU used since `start`, as cores over `seconds`."""
        loads = []
        for key, (name, cpu, queued) in _threads(pids).items():
            _, cpu_before, queued_before = self._before.get(key, (name, 0.0, 0.0))
            per_s = 1 / seconds if seconds else 0.0
            loads.append(
                ThreadLoad(
                    key[0], name, (cpu - cpu_before) * per_s, (queued - queued_before) * per_s
                )
            )
        self.busiest = sorted(loads, key=lambda load: load.cores, reverse=True)[: self._top]
