"""Incremental verification: where each partition's run starts after what earlier runs
proved, and which ranges a finished run proved.

An earlier run left, per partition, verified ranges of source offsets
(`statestore.verified`): contiguous, each with where its copies lie on the target
and the digest both sides summed to. The next run starts after the last of them
(`resume`), on the target after the last verified copy, unless the target no longer
holds what was proved: its remote topic was created again (another topic id), its
log ends before the verified copies (truncated), or retention on the target deleted
verified copies whose source records are still there (missing now). Then the whole
partition is verified again and the report says why. Ranges whose source records
retention deleted are retired: not a fault.

A copy of an already verified offset written after the last verified copy (a
duplicate that arrived later) lies in the new target window but outside the new
source window: the job counts it as duplicated (`prior_start`).

Each run also re-reads a rotating sample of the ranges earlier runs proved, on the
target only, and compares what it finds with their digests (`due_samples`): every
range not re-checked for a whole period (a week by default), and the share of them
that the time since the flow's last run is of that period, least recently checked
first, so that runs at any cadence re-check every range within the period. A run
right after another samples nothing.

`proved` turns the job's per-range digests (`digests.json`) into ranges to store:
from the start of the window, the ranges whose sides agree, up to the first that
does not (the next run starts there again); a range continued in the same bucket
of `range_offsets` is merged with the stored one (digests XOR, counts add).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the Spark job's driver imports `plan`, and so this: not the store
    from replicator.statestore.records import VerifiedRange

Key = tuple[str, int]
_MASK = (1 << 64) - 1


def digest_hex(value: int | None) -> str:
    """A digest (a signed 64-bit XOR from Spark, None for none) as 16 hex digits."""
    return format((value or 0) & _MASK, "016x")


@dataclass(frozen=True)
class Resume:
    """Where a partition's verification starts, from its verified ranges."""

    #: The first source offset to verify.
    source_start: int
    #: The target offset the new copies lie from (None: the target's log start).
    target_start: int | None
    #: Verified source offsets [prior_start, source_start): a copy of one found in the
    #: new window is a duplicate.
    prior_start: int
    #: Ranges still standing (kept), and ranges to forget.
    standing: list[VerifiedRange] = field(default_factory=list)
    retired: list[VerifiedRange] = field(default_factory=list)
    #: Why the whole partition is verified again (None: it is not).
    reverify: str | None = None
    #: Where earlier runs' verification ended (-1: none): records before it were
    #: copied and proved, so never in flight, even when the target lost them.
    verified_end: int = -1

    @property
    def verified_before(self) -> int:
        """Records verified by earlier runs and still standing."""
        return sum(r.records for r in self.standing)


def resume(
    ranges: list[VerifiedRange],
    *,
    source_start: int,
    target_start: int,
    target_end: int,
    target_topic: str,
    target_topic_id: str | None,
) -> Resume:
    """Where the partition's run starts, given its stored `ranges` (sorted by first
    offset), its source log start now, and its remote partition's log bounds and
    topic id now."""
    retired = [r for r in ranges if r.source_end <= source_start]
    standing = _contiguous([r for r in ranges if r.source_end > source_start])
    retired += [r for r in ranges if r not in standing and r not in retired]
    whole = Resume(source_start, None, source_start, [], retired + standing)
    if not standing:
        return whole
    first, last = standing[0], standing[-1]
    where = f"{target_topic}[{first.partition}]"
    reason = None
    if first.target_topic != target_topic:
        reason = f"its remote topic is now {target_topic}, not {first.target_topic}"
    elif (
        first.target_topic_id is not None
        and target_topic_id is not None
        and first.target_topic_id != target_topic_id
    ):
        reason = f"{target_topic} was deleted and created again since it was verified"
    elif last.target_end is not None and target_end < last.target_end:
        reason = (
            f"{where} ends at offset {target_end}, before the verified copies "
            f"(up to {last.target_end}): truncated or created again"
        )
    elif first.target_first is not None and target_start > first.target_first:
        reason = (
            f"{where} starts at offset {target_start}: the target deleted verified copies "
            f"(from {first.target_first}) whose source records are still there"
        )
    if reason is not None:
        return replace(whole, reverify=reason, verified_end=last.source_end)
    after = last.target_end if last.target_end is not None else target_start
    return Resume(
        max(source_start, last.source_end),
        max(target_start, after),
        first.source_first,
        standing,
        retired,
        verified_end=last.source_end,
    )


def _contiguous(ranges: list[VerifiedRange]) -> list[VerifiedRange]:
    """The leading ranges that follow each other without a gap (the rest are stale)."""
    kept: list[VerifiedRange] = []
    for r in ranges:
        if kept and r.source_first != kept[-1].source_end:
            break
        kept.append(r)
    return kept


@dataclass(frozen=True)
class Window:
    """What `proved` needs of one partition's window."""

    flow: str
    topic: str
    partition: int
    remote_topic: str
    remote_topic_id: str | None
    source_start: int
    source_end: int


def proved(
    window: Window,
    digests: Iterable[Mapping[str, Any]],
    standing: list[VerifiedRange],
    *,
    range_offsets: int,
    run_id: str,
    now: datetime,
) -> list[VerifiedRange]:
    """The ranges to store for `window` after a run: the new ones its `digests` rows
    (this partition's, any order) prove, merged into the last `standing` range where
    they continue its bucket. Ranges the run did not change are not returned."""
    from replicator.statestore.records import VerifiedRange  # noqa: PLC0415 - see the top

    rows = sorted(digests, key=lambda row: int(row["first"]))
    out: list[VerifiedRange] = []
    previous = standing[-1] if standing else None
    for i, row in enumerate(rows):
        if not row["clean"]:
            break
        following = rows[i + 1] if i + 1 < len(rows) else None
        # Up to the next range (empty buckets between hold nothing on either side),
        # or the window's end after the last.
        end = int(following["first"]) if following is not None else window.source_end
        # The first from the window's start (offsets before its first record hold
        # none: markers, aborted records), so the ranges stay contiguous.
        first = window.source_start if i == 0 else int(row["first"])
        new = VerifiedRange(
            flow=window.flow,
            topic=window.topic,
            partition=window.partition,
            source_first=first,
            source_end=end,
            target_topic=window.remote_topic,
            target_topic_id=window.remote_topic_id,
            target_first=_int(row.get("target_first")),
            target_end=_int(row.get("target_end")),
            records=int(row["records"]),
            digest=digest_hex(_int(row.get("digest"))),
            verified_at=now,
            checked_at=now,
            run_id=run_id,
        )
        if previous is not None and _continues(previous, new, range_offsets):
            new = _merged(previous, new)
            out = [r for r in out if r.source_first != previous.source_first]
        out.append(new)
        previous = new
    else:
        if not rows and previous is not None and window.source_end > previous.source_end:
            # Nothing but transaction markers or aborted records came: the last range
            # reaches the window's end.
            out.append(replace(previous, source_end=window.source_end, checked_at=now))
    return out


def _continues(before: VerifiedRange, after: VerifiedRange, range_offsets: int) -> bool:
    return (
        before.source_end == after.source_first
        and before.source_first // range_offsets == after.source_first // range_offsets
    )


def _merged(before: VerifiedRange, after: VerifiedRange) -> VerifiedRange:
    digest = int(before.digest, 16) ^ int(after.digest, 16)
    firsts = [t for t in (before.target_first, after.target_first) if t is not None]
    ends = [t for t in (before.target_end, after.target_end) if t is not None]
    return replace(
        after,
        source_first=before.source_first,
        target_first=min(firsts) if firsts else None,
        target_end=max(ends) if ends else None,
        records=before.records + after.records,
        digest=format(digest, "016x"),
        verified_at=before.verified_at,
    )


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


#: How long a verified range may go without being re-read against its digest.
SAMPLE_PERIOD = timedelta(days=7)


def due_samples(
    standing: list[VerifiedRange],
    *,
    now: datetime,
    last_run: datetime | None,
    period: timedelta = SAMPLE_PERIOD,
) -> list[VerifiedRange]:
    """The ranges of `standing` this run re-reads: every one not re-checked for
    `period`, and the share of all of them the time since `last_run` (the flow's
    previous run; None: none) is of `period`, least recently checked first (rounded
    down, so a run right after another samples only what is overdue)."""
    overdue = {r for r in standing if r.checked_at <= now - period}
    share = 0.0 if last_run is None else min(1.0, max(0.0, (now - last_run) / period))
    order = sorted(standing, key=lambda r: (r.checked_at, r.topic, r.partition, r.source_first))
    chosen = overdue | set(order[: int(len(standing) * share)])
    return sorted(chosen, key=lambda r: (r.topic, r.partition, r.source_first))
