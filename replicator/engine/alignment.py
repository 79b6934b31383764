"""Which source records a target partition holds copies of, proven by content.

MirrorMaker 2's copies carry no provenance header, so where its copy of a partition
ends is found by comparing records: from an anchor (a target record known to be the
copy of a source record: an offset sync MM2 wrote, or the copy of the record MM2
committed), each next target record must equal the next committed source record
(key, value, headers, and the timestamp where the target kept the producer's). The
last target record that matched says exactly which source record was copied last;
the first that does not match ends the proof there, and what follows it is
uncertain. Pure logic over records already read: `replicator.engine.takeover`
reads them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

from confluent_kafka import TIMESTAMP_CREATE_TIME, Message


@dataclass(frozen=True)
class Content:
    """What identifies one record's content, and where it is."""

    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    #: The timestamp is the producer's (CreateTime), not the broker's append time.
    create_time: bool
    headers: tuple[tuple[str, bytes | None], ...] = ()

    @classmethod
    def of(cls, message: Message) -> Content:
        kind, timestamp = message.timestamp()
        return cls(
            offset=cast(int, message.offset()),
            key=message.key(),
            value=message.value(),
            timestamp=timestamp,
            create_time=kind == TIMESTAMP_CREATE_TIME,
            headers=tuple(cast("Iterable[tuple[str, bytes | None]]", message.headers() or ())),
        )

    def copied_as(self, copy: Content) -> bool:
        """Whether `copy` (a target record) is a copy of this source record. A target
        topic with LogAppendTime has its own timestamps: those are not compared."""
        if (self.key, self.value, self.headers) != (copy.key, copy.value, copy.headers):
            return False
        return not (self.create_time and copy.create_time) or self.timestamp == copy.timestamp

    def describe(self) -> str:
        key = self.key if self.key is None or len(self.key) <= 40 else self.key[:40] + b"..."
        return f"offset {self.offset} (key {key!r}, timestamp {self.timestamp})"


@dataclass(frozen=True)
class Alignment:
    """The proof from one anchor to the target's end.

    `last` is the (source offset, target offset) of the last target record proven
    to be a copy (None: not even the anchor matched); `uncertain` counts the target
    records after it that could not be matched, and `mismatch` says why the proof
    stopped there (None: every target record up to `target_end` is proven)."""

    anchor: tuple[int, int]
    last: tuple[int, int] | None
    target_end: int
    uncertain: int
    mismatch: str | None

    @property
    def proven(self) -> bool:
        return self.last is not None and self.mismatch is None

    @property
    def next_source(self) -> int | None:
        """The source offset after the last record proven copied."""
        return None if self.last is None else self.last[0] + 1


def align(
    anchor: tuple[int, int],
    source: Iterable[Content],
    target: Iterable[Content],
    target_end: int,
    *,
    anchor_proven: bool = False,
) -> Alignment:
    """Match `target` (committed records from the anchor's target offset to
    `target_end`) against `source` (committed records from the anchor's source
    offset on), pairwise in order; see `Alignment`. `anchor_proven`: the anchor
    pair is known to match otherwise (our own replica, by its provenance headers,
    which the source record lacks), so its content is not compared."""
    sources = iter(source)
    last: tuple[int, int] | None = None
    targets = iter(target)
    for copy in targets:
        original = next(sources, None)
        if original is None:
            why = f"target record at {copy.describe()} has no source record left to be a copy of"
        elif last is None and (original.offset, copy.offset) != anchor:
            why = (
                f"the anchor is not readable: source {original.describe()}, "
                f"target {copy.describe()}, anchor {anchor}"
            )
        elif original.copied_as(copy) or (anchor_proven and last is None):
            last = (original.offset, copy.offset)
            continue
        else:
            why = (
                f"target record at {copy.describe()} is not the copy of source record at "
                f"{original.describe()}"
            )
        uncertain = 1 + sum(1 for _ in targets)
        return Alignment(anchor, last, target_end, uncertain, why)
    return Alignment(anchor, last, target_end, 0, None)
