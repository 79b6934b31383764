"""What this process wrote where: per source partition, the runs of records its
writers put on the target one after the other, so that a checkpoint round answers
most translations from memory instead of reading the target
(`replicator.offsets.batch_translation`).

A run is a stretch of source offsets `first..last` whose records are every record of
that stretch, written at consecutive target offsets: the record at source offset `c`
inside it is at target offset `target + (c - first)`. Runs are learnt from the
writers' acknowledgements, as the offset syncs are (`OffsetSyncWriter` tells both):
a delivered run that continues the previous one on both sides (no source offset
skipped, nothing else on the target between) extends it; anything else (a
transaction marker or a compacted record on either side, a skipped record, a resume
from the target tail, another writer) starts a new run whose only known record is
its last. In exactly-once mode a run counts once its transaction committed.

What memory answers (the rest is read from the target, as before):
- a position inside a run: the record's own replica (exact);
- on a partition this process writes now, the position right after the newest
  record written: the next replica's place (exact, as a read of the target would
  answer), and a position past it: "past the copy", settled by the source as a read
  would be (markers only between: exact; else held until the copy gets there).

A partition whose target no longer holds the newest record written (the target
partition was truncated or recreated) answers nothing from memory; a write that goes
back on either side (a rewind, a reset, a recreated target) forgets the runs before
it. Each partition keeps its newest `MAX_RUNS` runs.

Memory is per process: the workers of `tasks.max` > 1 and of several flows run in
processes of their own, so only a flow's single in-process worker shares it with the
checkpoint loop today; the others' positions are read, as before.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass, field
from typing import NamedTuple

from replicator.config.model import FlowConfig

Key = tuple[str, int]  # (source topic, partition)

#: Runs kept per partition (the newest): with a transaction marker between every
#: transaction's records, one run per transaction.
MAX_RUNS = 256


class Answer(NamedTuple):
    """What memory knows of one position: `exact` (the position's place on the
    target is `target_offset`) or past the copy (the next replica lands at
    `target_offset`; exact only if the source holds no record from
    `replicated_until` up to the position). `replicated_until`: the source offset
    after the newest record written."""

    exact: bool
    target_offset: int
    replicated_until: int


@dataclass
class _Partition:
    """One source partition's runs, ascending on both sides."""

    firsts: list[int] = field(default_factory=list)
    targets: list[int] = field(default_factory=list)
    lasts: list[int] = field(default_factory=list)
    #: Target offset of the newest record written (that of `lasts[-1]`).
    last_target: int = -1
    #: This process writes the partition now (its newest record is the copy's end).
    owned: bool = False
    #: The next acknowledgement may continue the newest run (no resume since).
    chained: bool = False
    #: Exactly-once: runs acknowledged in the open transaction.
    pending: list[tuple[int, int, int, int]] = field(default_factory=list)

    def add(self, first: int, last: int, count: int, target: int) -> None:
        if (
            self.chained
            and self.lasts
            and last - first + 1 == count
            and first == self.lasts[-1] + 1
            and target - count == self.last_target
        ):
            self.lasts[-1] = last
            self.last_target = target
            return
        if self.lasts and (last <= self.lasts[-1] or target <= self.last_target):
            self.firsts, self.targets, self.lasts = [], [], []  # went back: all stale
        self.firsts.append(last)
        self.targets.append(target)
        self.lasts.append(last)
        self.last_target = target
        self.chained = True
        if len(self.firsts) > MAX_RUNS:
            del self.firsts[0], self.targets[0], self.lasts[0]


class WrittenRuns:
    """One flow's runs in this process: told by its writers, asked by its checkpoint
    rounds (from another thread: every call holds the lock)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._partitions: dict[Key, _Partition] = {}

    # -- told by the writers (through `OffsetSyncWriter`) ------------------------------

    def track(self, key: Key) -> None:
        """The partition is assigned to a writer of this process."""
        with self._lock:
            state = self._partitions.setdefault(key, _Partition())
            state.owned, state.chained = True, False
            state.pending.clear()

    def release(self, key: Key) -> None:
        """The partition is no longer written here: what was written stays known,
        but the copy's end is its next owner's."""
        with self._lock:
            state = self._partitions.get(key)
            if state is not None:
                state.owned, state.chained = False, False
                state.pending.clear()

    def restart(self, key: Key) -> None:
        """The partition resumes from the target tail: its next run starts anew."""
        with self._lock:
            state = self._partitions.get(key)
            if state is not None:
                state.chained = False
                state.pending.clear()

    def acknowledged(
        self, key: Key, first: int, last: int, count: int, target: int, *, committed: bool
    ) -> None:
        """`count` records of source offsets `first..last` acknowledged, the last at
        target offset `target`; not `committed` yet: held for `committed`."""
        with self._lock:
            state = self._partitions.setdefault(key, _Partition())
            if committed:
                state.add(first, last, count, target)
            else:
                state.pending.append((first, last, count, target))

    def committed(self, key: Key) -> None:
        """The partition's transaction committed: its runs count."""
        with self._lock:
            state = self._partitions.get(key)
            if state is not None:
                for run in state.pending:
                    state.add(*run)
                state.pending.clear()

    def rolled_back(self, key: Key) -> None:
        """The partition's open transaction will not commit: its runs never were."""
        with self._lock:
            state = self._partitions.get(key)
            if state is not None:
                state.pending.clear()

    # -- asked by the translation -----------------------------------------------------

    def answers(self, key: Key, offsets: list[int], high: int) -> list[Answer | None]:
        """What memory knows of each of `offsets` (ascending) of the partition whose
        target partition ends at `high` now; None where it knows nothing."""
        with self._lock:
            state = self._partitions.get(key)
            if state is None or not state.lasts or state.last_target >= high:
                return [None] * len(offsets)
            newest = state.lasts[-1]
            found: list[Answer | None] = []
            for offset in offsets:
                at = bisect.bisect_right(state.firsts, offset) - 1
                if at >= 0 and offset <= state.lasts[at]:
                    target = state.targets[at] + offset - state.firsts[at]
                    found.append(Answer(True, target, newest + 1))
                elif state.owned and offset >= newest + 1:
                    exact = offset == newest + 1
                    found.append(Answer(exact, state.last_target + 1, newest + 1))
                else:
                    found.append(None)
            return found

    def newest_target(self, key: Key) -> int | None:
        """The target offset of the newest record written on the partition (None:
        none known): a target end read before it is older than what memory knows."""
        with self._lock:
            state = self._partitions.get(key)
            return state.last_target if state is not None and state.lasts else None

    def copied(self, needs: dict[Key, int]) -> set[Key]:
        """The partitions of `needs` on which this process has written the records
        before its source offset there (0: any record): the copy has reached what a
        checkpoint round left (`CheckpointLoop.due_early`). Never a partition another
        process writes (its runs are not known here)."""
        with self._lock:
            reached = set()
            for key, need in needs.items():
                state = self._partitions.get(key)
                if state is not None and state.lasts and state.lasts[-1] + 1 >= need:
                    reached.add(key)
            return reached


_FLOWS: dict[tuple[str, str, str], WrittenRuns] = {}
_FLOWS_LOCK = threading.Lock()


def written_runs(flow: FlowConfig) -> WrittenRuns:
    """The runs of `flow` in this process (made on first use), told apart by name and
    by both clusters' bootstrap servers (a process that runs one flow name against
    other clusters, as tests do, learns of each separately)."""
    key = (flow.name, flow.source.bootstrap_servers, flow.target.bootstrap_servers)
    with _FLOWS_LOCK:
        runs = _FLOWS.get(key)
        if runs is None:
            runs = _FLOWS[key] = WrittenRuns()
        return runs
