"""Incremental verification's rules, without Kafka or Spark: where a partition's run
starts after what earlier runs proved, when it is verified whole again, and which
ranges a run's digests prove."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from replicator.statestore.records import VerifiedRange
from replicator.verification.incremental import (
    Resume,
    Window,
    digest_hex,
    due_samples,
    proved,
    resume,
)

T0 = datetime(2026, 12, 1, tzinfo=UTC)
NOW = datetime(2026, 12, 3, tzinfo=UTC)


def verified(first: int, end: int, target: tuple[int, int], digest: int = 1) -> VerifiedRange:
    return VerifiedRange(
        flow="a->b",
        topic="orders",
        partition=0,
        source_first=first,
        source_end=end,
        target_topic="a.orders",
        target_topic_id="id-1",
        target_first=target[0],
        target_end=target[1],
        records=end - first,
        digest=digest_hex(digest),
        verified_at=T0,
        checked_at=T0,
    )


def resumed(ranges: list[VerifiedRange], **now: object) -> Resume:
    bounds = {
        "source_start": 0,
        "target_start": 0,
        "target_end": 1_000,
        "target_topic": "a.orders",
        "target_topic_id": "id-1",
        **now,
    }
    return resume(ranges, **bounds)  # type: ignore[arg-type]


def test_nothing_verified_yet_is_verified_from_the_log_start() -> None:
    start = resumed([], source_start=40)
    assert (start.source_start, start.target_start, start.reverify) == (40, None, None)
    assert start.verified_before == 0


def test_a_run_starts_after_the_last_verified_range_and_its_copies() -> None:
    ranges = [verified(0, 100, (0, 100)), verified(100, 250, (100, 260))]
    start = resumed(ranges)
    assert (start.source_start, start.target_start, start.prior_start) == (250, 260, 0)
    assert start.verified_before == 250 and start.retired == []


def test_ranges_retention_deleted_on_the_source_are_retired_not_faults() -> None:
    ranges = [verified(0, 100, (0, 100)), verified(100, 250, (100, 250))]
    start = resumed(ranges, source_start=120)
    assert [r.source_first for r in start.retired] == [0]
    assert [r.source_first for r in start.standing] == [100]
    assert (start.source_start, start.reverify) == (250, None)


def test_a_gap_ends_what_stands() -> None:
    ranges = [verified(0, 100, (0, 100)), verified(150, 250, (150, 250))]
    start = resumed(ranges)
    assert start.source_start == 100
    assert [r.source_first for r in start.retired] == [150]


def test_a_target_that_no_longer_holds_the_verified_copies_is_verified_whole() -> None:
    ranges = [verified(0, 100, (0, 100)), verified(100, 250, (100, 250))]
    cases = {
        "truncated": {"target_end": 200},
        "created again": {"target_topic_id": "id-2"},
        "deleted verified copies": {"target_start": 50},
        "another remote topic": {"target_topic": "b.orders"},
    }
    for case, now in cases.items():
        start = resumed(ranges, **now)
        assert start.reverify is not None, case
        assert (start.source_start, start.target_start, start.standing) == (0, None, []), case
        assert len(start.retired) == 2, case
        assert start.verified_end == 250, case  # proved copied: not in flight
    assert "a.orders[0] ends at offset 200" in resumed(ranges, target_end=200).reverify


def window(start: int, end: int) -> Window:
    return Window("a->b", "orders", 0, "a.orders", "id-1", start, end)


def row(first: int, end: int, *, clean: bool = True, digest: int = 7) -> dict[str, object]:
    return {
        "first": first,
        "end": end,
        "records": end - first,
        "digest": digest,
        "target_first": first,
        "target_end": end,
        "clean": clean,
    }


def test_the_clean_ranges_from_the_windows_start_are_proved_up_to_the_first_that_differs() -> None:
    rows = [row(200_000, 250_000), row(0, 100_000), row(100_000, 200_000, clean=False)]
    out = proved(window(0, 250_000), rows, [], range_offsets=100_000, run_id="r", now=NOW)
    assert [(r.source_first, r.source_end) for r in out] == [(0, 100_000)]
    assert out[0].digest == digest_hex(7) and out[0].run_id == "r"


def test_a_range_continued_in_its_bucket_is_merged_and_empty_offsets_are_covered() -> None:
    before = verified(0, 50, (0, 50), digest=0b0101)
    rows = [row(60, 90, digest=0b0011), row(100, 120, digest=1)]
    out = proved(window(50, 130), rows, [before], range_offsets=100, run_id="r", now=NOW)
    # 50..59 held no record: the first new range starts at the window's start, and
    # continues the stored one's bucket (0..99): one range, digests XORed.
    spans = [(r.source_first, r.source_end, r.records) for r in out]
    assert spans == [(0, 100, 80), (100, 130, 20)]
    assert out[0].digest == digest_hex(0b0110)
    assert (out[0].target_first, out[0].target_end) == (0, 90)
    assert out[0].verified_at == T0 and out[1].verified_at == NOW


def test_a_window_of_markers_only_extends_the_last_range() -> None:
    before = verified(0, 50, (0, 50))
    out = proved(window(50, 53), [], [before], range_offsets=100, run_id="r", now=NOW)
    assert [(r.source_first, r.source_end, r.records) for r in out] == [(0, 53, 50)]
    assert proved(window(50, 50), [], [before], range_offsets=100, run_id="r", now=NOW) == []


def test_digests_are_sixteen_hex_digits_of_the_unsigned_value() -> None:
    assert digest_hex(-1) == "ffffffffffffffff"
    assert digest_hex(None) == "0" * 16


def test_the_sample_is_what_is_overdue_and_the_share_the_time_since_the_last_run_is() -> None:
    week = timedelta(days=7)
    ranges = [
        replace(verified(i * 100, i * 100 + 100, (i * 100, i * 100 + 100)), checked_at=NOW - age)
        for i, age in enumerate(
            [timedelta(days=8), timedelta(days=3), timedelta(days=6), timedelta(hours=1)]
        )
    ]
    # A run right after another: only the overdue range.
    just = due_samples(ranges, now=NOW, last_run=NOW - timedelta(minutes=2), period=week)
    assert [r.source_first for r in just] == [0]
    # Half a week since the last run: half of them, least recently checked first.
    half = due_samples(ranges, now=NOW, last_run=NOW - week / 2, period=week)
    assert [r.source_first for r in half] == [0, 200]
    # A run after a whole period re-reads everything; none before: only the overdue.
    assert len(due_samples(ranges, now=NOW, last_run=NOW - 2 * week, period=week)) == 4
    assert [r.source_first for r in due_samples(ranges, now=NOW, last_run=None)] == [0]
