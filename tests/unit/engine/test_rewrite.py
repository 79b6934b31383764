"""The record rewrite: the headers a replica carries, and which records are loops.

A record is a loop only when it is itself our copy, on the topic being replicated
now, of a record that came from the target. A record that carries provenance naming
another topic (an application that forwards its input's headers, as Kafka Streams
does) is the application's own and is copied. Records written before `__dr_topic`
are told by the topic's name where the policy names remote topics after their
source (Default), and treated as before, counted apart, where it does not
(Identity)."""

from __future__ import annotations

import pytest

from replicator.cli.replication import _print_status
from replicator.config.policies import DefaultReplicationPolicy, IdentityReplicationPolicy
from replicator.engine.headers import (
    OFFSET_HEADER,
    ORIGIN_HEADER,
    SOURCE_HEADER,
    TOPIC_HEADER,
    encode_offset,
)
from replicator.engine.rewrite import LOOP, LOOP_LEGACY, RecordRewrite
from replicator.engine.status import PartitionStatus, WorkerStatus


def _rewrite(policy: str = "default", source: str = "primary", target: str = "dr") -> RecordRewrite:
    kind = DefaultReplicationPolicy if policy == "default" else IdentityReplicationPolicy
    return RecordRewrite(source, target, kind(source_alias=source))


def _ours(offset: int, topic: str) -> list[tuple[str, bytes]]:
    return [
        (SOURCE_HEADER, b"primary"),
        (OFFSET_HEADER, encode_offset(offset)),
        (TOPIC_HEADER, topic.encode()),
    ]


def test_the_records_own_headers_are_kept_in_order_counted_and_ours_follow() -> None:
    own = [("trace", b"abc"), ("empty", None), ("trace", b"d")]
    headers, own_bytes = _rewrite().headers(own, 42, "orders", 0)
    assert headers == [*own, *_ours(42, "orders")]
    assert own_bytes == (5 + 3 + 10) + (5 + 0 + 10) + (5 + 1 + 10)


def test_our_copy_of_a_record_from_elsewhere_names_the_cluster_it_originated_on() -> None:
    # Read on `primary` from `east.orders`, where we replicated it from `east`: the
    # earlier hop's headers go, ours come, and `east` is kept as the origin.
    headers = [(SOURCE_HEADER, b"east"), (TOPIC_HEADER, b"orders"), ("app", b"1")]
    out, own_bytes = _rewrite().headers(headers, 42, "east.orders", 0)
    assert out == [("app", b"1"), *_ours(42, "east.orders"), (ORIGIN_HEADER, b"east")]
    assert own_bytes == len("app") + 1 + 10


@pytest.mark.parametrize("policy", ["default", "identity"])
def test_our_copy_of_a_record_from_the_target_on_this_topic_is_a_loop(policy: str) -> None:
    rewrite = _rewrite(policy)
    topic = "dr.orders" if policy == "default" else "orders"
    copy = [(SOURCE_HEADER, b"dr"), (OFFSET_HEADER, b"\0" * 8), (TOPIC_HEADER, b"orders")]
    assert rewrite.headers(copy, 42, topic, 0) == (None, 0)
    assert rewrite.skip == LOOP


def test_in_a_ring_the_origin_decides_and_the_third_hop_is_a_loop() -> None:
    """Identity ring dr -> west -> primary -> dr: flow primary -> dr reads our copy of
    a record that originated on dr and came through west: a loop."""
    rewrite = _rewrite("identity")
    copy = [(SOURCE_HEADER, b"west"), (TOPIC_HEADER, b"orders"), (ORIGIN_HEADER, b"dr")]
    assert rewrite.headers(copy, 1, "orders", 0) == (None, 0)
    # ...while a copy that originated on a third cluster goes on, keeping its origin.
    other = [(SOURCE_HEADER, b"west"), (TOPIC_HEADER, b"orders"), (ORIGIN_HEADER, b"east")]
    out, _ = rewrite.headers(other, 1, "orders", 0)
    assert out == [*_ours(1, "orders"), (ORIGIN_HEADER, b"east")]


def _copy_of(source_offset: int, source: bytes = b"dr") -> list[tuple[str, bytes]]:
    """Our copy, read back on `primary` under Identity, of a record of dr's orders."""
    return [
        (SOURCE_HEADER, source),
        (OFFSET_HEADER, encode_offset(source_offset)),
        (TOPIC_HEADER, b"orders"),
    ]


def test_under_identity_a_re_drive_of_our_copy_into_the_same_topic_is_copied() -> None:
    """An application on `primary` re-produced our copy of dr's orders@100 into
    `orders` (a retry, headers kept): the same headers as our copy, but it stands
    after our copies of later records, out of their order. It is the application's
    record, originated here: copied, with no origin. Our copies around it stay loops."""
    rewrite = _rewrite("identity")
    assert rewrite.headers(_copy_of(100), 10, "orders", 0) == (None, 0)
    assert rewrite.headers(_copy_of(101), 11, "orders", 0) == (None, 0)
    out, _ = rewrite.headers([("retry", b"1"), *_copy_of(100)], 12, "orders", 0)
    assert out == [("retry", b"1"), *_ours(12, "orders")]
    assert rewrite.loop_provenance, "its provenance is still a loop's (the Mover learns so)"
    assert rewrite.headers(_copy_of(102), 13, "orders", 0) == (None, 0)
    assert rewrite.skip == LOOP


def test_the_order_is_per_partition_and_provenance_and_starts_over_on_a_rewind() -> None:
    rewrite = _rewrite("identity")
    assert rewrite.headers(_copy_of(100), 10, "orders", 0) == (None, 0)
    # Another partition, or copies from another cluster: orders of their own.
    assert rewrite.headers(_copy_of(5), 11, "orders", 1) == (None, 0)
    ring = [*_copy_of(7, b"west"), (ORIGIN_HEADER, b"dr")]
    assert rewrite.headers(ring, 11, "orders", 0) == (None, 0)
    # Read again from an earlier offset (a rewind): taken as our copies again.
    assert rewrite.headers(_copy_of(100), 10, "orders", 0) == (None, 0)
    assert rewrite.headers(_copy_of(90), 9, "orders", 0) == (None, 0)


@pytest.mark.parametrize(
    ("policy", "topic"), [("default", "enriched"), ("identity", "enriched"), ("default", "orders")]
)
def test_an_applications_record_that_forwards_provenance_is_copied_as_its_own(
    policy: str, topic: str
) -> None:
    """An application on `primary` read `dr.orders` (or `orders` under Identity), the
    replica of dr's orders, and wrote `topic` with its input's headers: the record
    says it came from dr, but not as our copy into `topic`. It is the application's:
    copied, with no origin (it originated here)."""
    upstream = b"orders"
    forwarded = [(SOURCE_HEADER, b"dr"), (OFFSET_HEADER, b"\0" * 8), (TOPIC_HEADER, upstream)]
    out, _ = _rewrite(policy).headers([("app", b"x"), *forwarded], 7, topic, 0)
    assert out == [("app", b"x"), *_ours(7, topic)]


def test_legacy_headers_are_told_by_the_topic_name_under_the_default_policy() -> None:
    """No `__dr_topic` (written by an older replicator): under Default the topic's
    name says whether it holds replicas from the cluster the record names."""
    rewrite = _rewrite("default")
    legacy = [(SOURCE_HEADER, b"dr"), (OFFSET_HEADER, b"\0" * 8)]
    assert rewrite.headers(legacy, 3, "dr.orders", 0) == (None, 0)
    assert rewrite.skip == LOOP
    out, _ = rewrite.headers(legacy, 3, "enriched", 0)  # an application's topic
    assert out == _ours(3, "enriched")


def test_legacy_headers_under_identity_are_treated_as_before_and_counted_apart() -> None:
    rewrite = _rewrite("identity")
    legacy = [(SOURCE_HEADER, b"dr"), (OFFSET_HEADER, b"\0" * 8)]
    assert rewrite.headers(legacy, 3, "enriched", 0) == (None, 0)
    assert rewrite.skip == LOOP_LEGACY
    # From another cluster: copied, that cluster kept as the origin, as before.
    out, _ = rewrite.headers([(SOURCE_HEADER, b"east")], 3, "orders", 0)
    assert out == [*_ours(3, "orders"), (ORIGIN_HEADER, b"east")]


def test_status_lines_say_what_was_skipped(capsys: pytest.CaptureFixture[str]) -> None:
    partition = PartitionStatus(
        "primary->dr", "orders", 3, "replicating", 20, 0, 15, skipped=5,
        skipped_by={LOOP: [4, 11], LOOP_LEGACY: [1, 9]},
    )  # fmt: skip
    worker = WorkerStatus("primary->dr", "w1", "running")
    _print_status([partition, worker])
    out = " ".join(capsys.readouterr().out.split())  # a table's cells wrap at its width
    assert "(4 skipped as loop from offset 11; 1 skipped as loop legacy from offset 9)" in out
