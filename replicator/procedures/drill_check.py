"""The drill's `check` step: does each shadow group read first, on the target, the
record its real group reads next on the source?

Per partition, a position is wrong before any record is read (translated over
records that never reached the target, or the shadow group moved since the drill
committed it), or the two records are compared: the target record's source-offset
header names the source offset, and key, value, timestamp and the application's
own headers are equal. Payloads are described by size only: the run history is no
place for data.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal, cast

from confluent_kafka import TIMESTAMP_CREATE_TIME, Message

from replicator.engine.headers import OURS, SOURCE_HEADER, Headers, replica_source_offset
from replicator.offsets.translation import PartitionReader

Status = Literal["match", "at_end", "mismatch", "not_replicated"]
#: Statuses that fail the drill: a consumer moved to the target would read the wrong
#: record first, or would skip records that never reached it.
FAILING: frozenset[str] = frozenset({"mismatch", "not_replicated"})
_POLL_S = 0.5


@dataclass(frozen=True)
class DrillPosition:
    """One group's committed source position on one partition, and where it is on
    the target (see `replicator.offsets.translation.Translation` for the fields)."""

    group: str
    shadow_group: str
    topic: str
    partition: int
    remote_topic: str
    source_offset: int
    target_offset: int
    exact: bool
    replicated_until: int | None
    missing: int | None
    unreplicated_before: int | None

    @property
    def where(self) -> str:
        return f"group {self.group} {self.topic}[{self.partition}]@{self.source_offset}"


@dataclass(frozen=True)
class PartitionCheck:
    """The verdict on one position: `match` (the shadow group reads the same record
    first as the real group), `at_end` (both have read everything), `mismatch`
    (another record, or none where there is one), `not_replicated` (records the
    group has not read yet, or read already, are missing on the target)."""

    group: str
    shadow_group: str
    topic: str
    partition: int
    remote_topic: str
    source_offset: int
    target_offset: int
    status: Status
    detail: str


class ShadowCheck:
    """Checks the positions of one drill, comparing records with `readers` (source,
    target; `names` their aliases), waiting up to `timeout_s` in all for records the
    flow is still bringing. A dry run has committed nothing, so it checks positions
    without shadow offsets."""

    def __init__(
        self,
        readers: tuple[PartitionReader, PartitionReader],
        names: tuple[str, str],
        timeout_s: float,
        dry_run: bool,
    ) -> None:
        self._source, self._target = readers
        source_alias, self._target_alias = names
        self._source_alias = source_alias.encode()
        self._timeout_s, self._dry_run = timeout_s, dry_run
        self._deadline = time.monotonic() + timeout_s

    def check(
        self, p: DrillPosition, shadow_offsets: dict[tuple[str, str, int], int]
    ) -> PartitionCheck:
        """The verdict on position `p`; `shadow_offsets` maps (shadow group, remote
        topic, partition) to the offset committed on the target now."""
        problem = self._position_problem(p, shadow_offsets)
        if problem is None:
            status, detail = self._compare(p)
            offset = p.target_offset
        else:
            status, detail, offset = problem
        return PartitionCheck(
            p.group,
            p.shadow_group,
            p.topic,
            p.partition,
            p.remote_topic,
            p.source_offset,
            offset,
            status,
            detail,
        )

    def _position_problem(
        self, p: DrillPosition, shadow_offsets: dict[tuple[str, str, int], int]
    ) -> tuple[Status, str, int] | None:
        """A position wrong before any record is read: translated over a gap, or
        the shadow group is not where the drill put it."""
        remote = f"{p.remote_topic}[{p.partition}]"
        if not p.exact:
            return (
                "not_replicated",
                f"{p.unreplicated_before} records before source offset {p.source_offset} "
                f"were not on {self._target_alias!r} (replicated until {p.replicated_until}): "
                f"a consumer moved there would skip them ({p.missing} records from the "
                "position on were not there either)",
                p.target_offset,
            )
        if self._dry_run:
            return None
        committed = shadow_offsets.get((p.shadow_group, p.remote_topic, p.partition))
        if committed is None:
            return (
                "mismatch",
                f"shadow group {p.shadow_group} has no offset on {remote}",
                p.target_offset,
            )
        if committed != p.target_offset:
            return (
                "mismatch",
                f"shadow group {p.shadow_group} is at {committed} on {remote}, not at "
                f"{p.target_offset} as committed by the drill; was it moved?",
                committed,
            )
        return None

    def _compare(self, p: DrillPosition) -> tuple[Status, str]:
        """Read the group's next record on the source and the shadow group's first on
        the target, and compare them; look again while the flow is still bringing
        the record (or a record was produced between the two reads)."""
        remote = f"{p.remote_topic}[{p.partition}]"
        local = f"{p.topic}[{p.partition}]"
        offset = p.target_offset
        while True:
            wanted = _first_record(self._source, p.topic, p.partition, p.source_offset)
            found = _first_record(self._target, p.remote_topic, p.partition, offset)
            if wanted is not None and found is not None:
                differences = _differences(wanted, found, self._source_alias)
                pair = f"{remote}@{found.offset()}", f"{local}@{wanted.offset()}"
                if differences:
                    listed = "; ".join(differences)
                    return "mismatch", f"{pair[0]} is not the record at {pair[1]}: {listed}"
                return "match", f"{pair[0]} is the record at {pair[1]}"
            if wanted is None and found is None:
                return self._at_end(p)
            if time.monotonic() >= self._deadline:
                if wanted is not None:
                    return (
                        "not_replicated",
                        f"the group's next record, {local}@{wanted.offset()}, did not reach "
                        f"{remote} within {self._timeout_s:g}s (the flow is behind)",
                    )
                assert found is not None
                return (
                    "mismatch",
                    f"{remote}@{found.offset()} holds a record although the group has read "
                    f"everything on {local} from {p.source_offset}: the position is too early",
                )
            time.sleep(_POLL_S)

    def _at_end(self, p: DrillPosition) -> tuple[Status, str]:
        """The group has read everything: the shadow position must be the end of the
        replicated data, not past the partition's end (a consumer would reset)."""
        remote = f"{p.remote_topic}[{p.partition}]"
        _, end = self._target.bounds(p.remote_topic, p.partition)
        if p.target_offset > end:
            return (
                "mismatch",
                f"the group has read everything, but the position {p.target_offset} is beyond "
                f"the end of {remote} ({end}): a consumer there would reset its offset",
            )
        return (
            "at_end",
            f"the group has read everything on {p.topic}[{p.partition}], and {remote} has no "
            f"replicated record at or after {p.target_offset}",
        )


def _first_record(
    reader: PartitionReader, topic: str, partition: int, start: int
) -> Message | None:
    """The first committed record at or after `start` (what a consumer positioned at
    `start` reads first, read_committed), or None at the end. A position before the
    log start reads from the log start."""
    low, end = reader.bounds(topic, partition)
    start = max(start, low)
    if start >= end:
        return None
    return next(iter(reader.messages(topic, partition, start, end)), None)


def _differences(wanted: Message, found: Message, source_alias: bytes) -> list[str]:
    """How the target record differs from the source record (empty: the same).
    Payloads are described by size only: the run history is no place for data."""
    differences = []
    source_offset = replica_source_offset(cast("Headers | None", found.headers()), source_alias)
    if source_offset is None:
        origin = dict(found.headers() or []).get(SOURCE_HEADER)
        differences.append(
            "it was not replicated from "
            f"{source_alias.decode()!r} (source header {origin!r}, or no source offset)"
        )
    elif source_offset != wanted.offset():
        differences.append(f"it carries source offset {source_offset}")
    for name, a, b in (
        ("key", wanted.key(), found.key()),
        ("value", wanted.value(), found.value()),
    ):
        if a != b:
            differences.append(
                f"{name} differs ({_size(a)} on the source, {_size(b)} on the target)"
            )
    (_, wanted_ts), (found_type, found_ts) = wanted.timestamp(), found.timestamp()
    # A target topic with LogAppendTime stamps its own time: nothing to compare.
    if found_type == TIMESTAMP_CREATE_TIME and wanted_ts != found_ts:
        differences.append(
            f"timestamp differs ({wanted_ts} on the source, {found_ts} on the target)"
        )
    wanted_headers, found_headers = _application_headers(wanted), _application_headers(found)
    if wanted_headers != found_headers:
        differences.append(
            f"headers differ ({[n for n, _ in wanted_headers]} on the source, "
            f"{[n for n, _ in found_headers]} on the target)"
        )
    return differences


def _application_headers(message: Message) -> list[tuple[str, bytes | None]]:
    """The application's headers, without the replication headers."""
    headers = cast("Headers | None", message.headers())
    return [(n, v) for n, v in headers or [] if n not in OURS]


def _size(payload: bytes | None) -> str:
    return "null" if payload is None else f"{len(payload)} bytes"
