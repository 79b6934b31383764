"""Ledgers of the demo applications, and the check that proves a failover lost nothing.

A producer appends one line per record the broker acknowledged; a consumer
appends one line per record it processed, before committing its offset. Lines
are JSON: `{"id", "cluster", "topic", "partition", "offset"}`, where `id` is
unique per produced record. Comparing the two sets of files shows records lost
(acknowledged, never processed) and records processed twice, across any number
of failovers and clusters. Tests and DR drills call `check_ledgers`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType
from typing import IO

from replicator.errors import ReplicatorError


class LedgerError(ReplicatorError):
    """A ledger file cannot be read; the message names the file and line."""


@dataclass(frozen=True)
class LedgerEntry:
    id: str
    cluster: str
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class LedgerCheck:
    """What the producer ledgers say was acknowledged against what consumers processed."""

    produced: int
    consumed: int
    missing: tuple[str, ...]  # acknowledged, never processed
    duplicates: tuple[str, ...]  # processed more than once

    @property
    def ok(self) -> bool:
        return not self.missing and not self.duplicates

    def summary(self) -> str:
        """One line for a log, a test assertion or a drill report."""
        return (
            f"produced {self.produced}, consumed {self.consumed}, "
            f"missing {len(self.missing)} {list(self.missing[:5])}, "
            f"processed twice {len(self.duplicates)} {list(self.duplicates[:5])}"
        )


class LedgerWriter:
    """Appends entries to a ledger file; `mark`/`rollback` undo a batch whose
    processing did not complete (its offsets could not be committed)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        _drop_partial_line(path)
        self._file: IO[str] = path.open("a", encoding="utf-8")

    def write(self, entry: LedgerEntry) -> None:
        self._file.write(json.dumps(asdict(entry)) + "\n")

    def flush(self) -> None:
        self._file.flush()

    def mark(self) -> int:
        self.flush()
        return self._file.tell()

    def rollback(self, mark: int) -> None:
        self.flush()
        self._file.truncate(mark)

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> LedgerWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def read_ledger(path: Path) -> list[LedgerEntry]:
    """Every complete entry of a ledger, in the order written; a missing file is
    empty, and an unterminated last line (a writer killed mid-line) is ignored."""
    if not path.exists():
        return []
    entries = []
    lines = path.read_text(encoding="utf-8").split("\n")
    for number, line in enumerate(lines[:-1], start=1):  # lines[-1]: after the last "\n"
        try:
            entries.append(LedgerEntry(**json.loads(line)))
        except (ValueError, TypeError) as exc:
            raise LedgerError(
                f"{path}:{number} is not a ledger entry ({exc}); ledgers are written only "
                "by include/demo/producer.py and consumer.py: start with new files"
            ) from None
    return entries


def check_ledgers(
    producer_ledgers: Iterable[Path], consumer_ledgers: Iterable[Path]
) -> LedgerCheck:
    """Compare what producers had acknowledged with what consumers processed."""
    produced = {entry.id for path in producer_ledgers for entry in read_ledger(path)}
    processed = Counter(entry.id for path in consumer_ledgers for entry in read_ledger(path))
    return LedgerCheck(
        produced=len(produced),
        consumed=sum(processed.values()),
        missing=tuple(sorted(produced - processed.keys())),
        duplicates=tuple(sorted(i for i, times in processed.items() if times > 1)),
    )


def _drop_partial_line(path: Path) -> None:
    """Cut an unterminated last line left by a writer that was killed mid-line,
    so the next entry does not run into it."""
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with path.open("r+b") as file:
            file.truncate(data.rfind(b"\n") + 1)
