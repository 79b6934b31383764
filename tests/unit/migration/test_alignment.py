"""Where MirrorMaker 2's copy ends, proven by content (`replicator.engine.alignment`),
and what the takeover policy does with a point that is not proven."""

from __future__ import annotations

import json

import pytest

from replicator.config import load_config
from replicator.engine.alignment import Content, align
from replicator.engine.mm2_state import _source_partition, mm2_offset_key
from replicator.engine.takeover import TakeoverPoint, decide
from replicator.errors import ConfigError


def _record(offset: int, i: int, *, timestamp: int | None = None) -> Content:
    ts = 1_700_000_000_000 + i if timestamp is None else timestamp
    return Content(offset, b"%d" % i, b"v%d" % i, ts, True, (("h", b"%d" % i),))


def _source(n: int, gap_at: int | None = None) -> list[Content]:
    """Records 0..n-1; a transaction marker (an offset without a record) at `gap_at`."""
    records, offset = [], 0
    for i in range(n):
        if offset == gap_at:
            offset += 1
        records.append(_record(offset, i))
        offset += 1
    return records


def _copy(source: list[Content], first_target: int = 0) -> list[Content]:
    return [
        Content(first_target + n, r.key, r.value, r.timestamp, True, r.headers)
        for n, r in enumerate(source)
    ]


def test_written_past_the_committed_offset_is_found_exactly() -> None:
    source = _source(1_000)
    # MM2 committed 700 but had copied 850 records when it was killed.
    target = _copy(source[:851])
    alignment = align((600, 600), source[600:], target[600:], 851)
    assert alignment.proven
    assert alignment.last == (850, 850)
    assert alignment.next_source == 851


def test_source_gaps_do_not_shift_the_alignment() -> None:
    source = _source(500, gap_at=250)  # a marker at 250: record 250 sits at offset 251
    target = _copy(source[:400], first_target=10)  # the target had earlier records of others
    alignment = align((source[200].offset, 210), source[200:], target[200:], 410)
    assert alignment.proven
    assert alignment.last == (source[399].offset, 409)
    assert alignment.next_source == 401


def test_a_different_record_stops_the_proof_and_counts_what_follows() -> None:
    source = _source(300)
    target = _copy(source[:200])
    target[150] = Content(150, b"someone", b"else", 1, True, ())
    alignment = align((100, 100), source[100:], target[100:], 200)
    assert not alignment.proven
    assert alignment.last == (149, 149)
    assert alignment.uncertain == 50
    assert "target record at offset 150" in (alignment.mismatch or "")


def test_a_timestamp_difference_is_a_different_record() -> None:
    source = _source(10)
    target = _copy(source)
    target[5] = Content(5, source[5].key, source[5].value, 42, True, source[5].headers)
    assert align((0, 0), source, target, 10).last == (4, 4)


def test_log_append_time_on_the_target_is_not_compared() -> None:
    source = _source(10)
    target = [Content(r.offset, r.key, r.value, 99, False, r.headers) for r in source]
    assert align((0, 0), source, target, 10).proven


def test_a_wrong_anchor_proves_nothing() -> None:
    source = _source(100)
    target = _copy(source)
    alignment = align((40, 41), source[40:], target[41:], 100)
    assert alignment.last is None
    assert not alignment.proven
    assert alignment.uncertain == 59


def test_more_target_records_than_source_records_are_uncertain() -> None:
    source = _source(20)
    target = [*_copy(source), _record(20, 20)]
    alignment = align((0, 0), source, target, 21)
    assert alignment.last == (19, 19)
    assert alignment.uncertain == 1


def test_mm2_offset_key_is_connects_json_in_javas_hashmap_order() -> None:
    # What MM2 4.1 wrote (read from mm2-offsets.<alias>.internal in the integration test).
    key = mm2_offset_key("primary", "orders", 3)
    assert key == b'["MirrorSourceConnector",{"cluster":"primary","partition":3,"topic":"orders"}]'
    assert _source_partition(key, "t") == ("primary", "orders", 3)
    other = json.dumps(["MirrorCheckpointConnector", {"group": "g"}]).encode()
    assert _source_partition(other, "t") is None


def _flow(policy: str | None = None):
    properties = {
        "clusters": "a, b",
        "a.bootstrap.servers": "localhost:1",
        "b.bootstrap.servers": "localhost:2",
        "a->b.enabled": "true",
    }
    if policy is not None:
        properties["replicator.takeover.uncertain"] = policy
    return load_config(properties).flow("a->b")


def _point(uncertain: int) -> TakeoverPoint:
    return TakeoverPoint(
        flow="a->b",
        topic="orders",
        partition=2,
        remote="a.orders",
        mm2_resume=700,
        copied_until=851 if uncertain == 0 else 800,
        target_end=900,
        start=851 if uncertain == 0 else 800,
        uncertain=uncertain,
        reason="test",
    )


def test_an_exact_point_is_taken_whatever_the_policy() -> None:
    assert decide(_flow(), _point(0)) == 851


def test_an_uncertain_point_is_refused_by_default_naming_partition_count_and_setting() -> None:
    with pytest.raises(ConfigError) as caught:
        decide(_flow(), _point(100))
    message = str(caught.value)
    assert "orders[2]" in message
    assert "100 records of a.orders[2]" in message
    assert "replicator.takeover.uncertain = at-least-once" in message


def test_at_least_once_starts_after_the_last_proven_copy() -> None:
    assert decide(_flow("at-least-once"), _point(100)) == 800


def test_an_unknown_policy_is_refused_at_load() -> None:
    with pytest.raises(ConfigError, match=r"replicator\.takeover\.uncertain"):
        _flow("maybe")


def test_our_own_replica_is_an_anchor_without_comparing_its_headers() -> None:
    # The flow was handed back to MM2 after our replica of source 99 at target 99;
    # MM2 copied 100..149 after it. Our replica carries provenance headers.
    source = _source(200)
    target = _copy(source[:150])
    ours = target[99]
    target[99] = Content(
        99, ours.key, ours.value, ours.timestamp, True, ((*ours.headers, ("__dr_src", b"a")))
    )
    assert align((99, 99), source[99:], target[99:], 150).last is None
    alignment = align((99, 99), source[99:], target[99:], 150, anchor_proven=True)
    assert alignment.proven
    assert alignment.next_source == 150
