"""The offset reset's decisions, without brokers: whether a task honours a request
(only while the partition's last replica on the target is the one the request
recorded), what honouring it does to the resume position and the skip count, what
a planned request says it will do, and the request's record format. The reset
against real clusters is tests/integration/procedures/test_offset_reset.py."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from prometheus_client import REGISTRY

from replicator.config.model import FlowConfig
from replicator.engine.resets import PendingResets, ResetRequest, applies
from replicator.engine.tail import Replica, TailPosition
from replicator.errors import ReplicatorError
from replicator.procedures.reset_requests import ResetTo, plan_partition

from helpers.replication import flow_config

_MS = 1_700_000_000_000


def _flow(name: str = "t") -> FlowConfig:
    # Unreachable clusters: nothing here may talk to Kafka.
    return flow_config(("primary", "localhost:1"), ("dr", "localhost:2"), name)


def _request(offset: int, tail_source: int, tail_target: int, topic: str = "t") -> ResetRequest:
    return ResetRequest(
        flow="primary->dr",
        topic=topic,
        partition=0,
        offset=offset,
        tail_target_offset=tail_target,
        tail_source_offset=tail_source,
        from_offset=tail_source + 1,
        copied_again=max(0, tail_source + 1 - offset),
        skipped=max(0, offset - tail_source - 1),
        requested_ms=_MS,
        requested_by="test",
    )


def _tail(last: Replica | None, end: int) -> TailPosition:
    return TailPosition(last, end)


def _skipped(topic: str) -> float:
    labels = {"flow": "primary->dr", "topic": topic, "partition": "", "reason": "offset_reset"}
    return REGISTRY.get_sample_value("replicator_skipped_records_total", labels) or 0.0


def test_a_request_applies_only_while_the_tail_is_the_one_it_recorded() -> None:
    request = _request(offset=40, tail_source=99, tail_target=99)
    assert applies(request, _tail(Replica(99, 99), 100))
    # Replication went on: another source offset at the tail.
    assert not applies(request, _tail(Replica(169, 109), 170))
    # The rewind copied 40..99 again: same source offset at the tail, another record.
    assert not applies(request, _tail(Replica(159, 99), 160))
    # Others wrote after our last replica: the tail (our last replica) did not move.
    assert applies(request, _tail(Replica(99, 99), 130))


def test_a_request_before_anything_was_replicated() -> None:
    request = _request(offset=30, tail_source=-1, tail_target=-1)
    assert applies(request, _tail(None, 0))
    assert not applies(request, _tail(Replica(0, 30), 1))
    # A replica of a record the request did not know: the target had one already.
    assert not applies(_request(offset=30, tail_source=99, tail_target=99), _tail(None, 0))


def test_the_task_honours_a_request_from_its_one_read_of_the_tail(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="replicator.engine.resets")
    request = _request(offset=40, tail_source=99, tail_target=99)
    resets = PendingResets(_flow(), {("t", 0): request})
    tail = _tail(Replica(99, 99), 100)
    assert resets.honoured("t", 1, tail, 100) is None  # no request for it
    assert caplog.text == ""
    assert resets.honoured("t", 0, tail, 100) == request
    assert "offset reset applied" in caplog.text
    assert "resuming at source offset 40 instead of 100" in caplog.text
    assert "source offsets 40..99 (60 records) are copied again" in caplog.text

    caplog.clear()
    moved = _tail(Replica(159, 99), 160)
    assert resets.honoured("t", 0, moved, 100) is None
    assert "offset reset to 40" in caplog.text and "ignored" in caplog.text
    assert "resuming from the target tail at 100" in caplog.text
    assert "applied (" not in caplog.text


def test_an_applied_skip_counts_the_offsets_it_leaves_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="replicator.engine.resets")
    topic = "skip-counted"
    request = _request(offset=120, tail_source=99, tail_target=99, topic=topic)
    before = _skipped(topic)
    resets = PendingResets(_flow(topic), {(topic, 0): request})
    assert resets.honoured(topic, 0, _tail(Replica(99, 99), 100), 100)
    assert _skipped(topic) - before == 20
    assert "source offsets 100..119 (20) are skipped" in caplog.text
    # Ignored, nothing is counted.
    resets.honoured(topic, 0, _tail(Replica(100, 120), 101), 121)
    assert _skipped(topic) - before == 20


def test_reading_the_requests_of_no_partitions_reads_nothing() -> None:
    # A cooperative rebalance that gave the worker nothing new: no read of the topic
    # (the flow's clusters do not exist; a read would fail).
    assert PendingResets.read(_flow(), []).requests == {}


@pytest.mark.parametrize(
    ("source", "last", "expected"),
    [
        # (log start, end, offset to go to); last replica; (from, copied again, skipped)
        pytest.param((0, 100, 40), Replica(99, 99), (100, 60, 0), id="rewind"),
        pytest.param((0, 150, 120), Replica(99, 99), (100, 0, 20), id="skip"),
        pytest.param((0, 100, 100), Replica(99, 99), (100, 0, 0), id="no-change"),
        pytest.param((10, 50, 50), None, (10, 0, 40), id="nothing-replicated-skip"),
        pytest.param((10, 50, 10), None, (10, 0, 0), id="nothing-replicated-earliest"),
        # Retention removed source offsets the target never got: not skipped by the reset.
        pytest.param((80, 150, 120), Replica(49, 49), (50, 0, 40), id="retention-gap"),
        # The source topic was recreated below the tail: only its log is copied again.
        pytest.param((0, 30, 0), Replica(99, 99), (100, 30, 0), id="tail-beyond-end"),
    ],
)
def test_a_planned_request_counts_within_the_source_log(
    source: tuple[int, int, int], last: Replica | None, expected: tuple[int, int, int]
) -> None:
    request = plan_partition(
        "primary->dr", "t", 0, source=source, last=last, requested_ms=_MS, requested_by="me"
    )
    assert (request.from_offset, request.copied_again, request.skipped) == expected
    assert request.offset == source[2]
    recorded = (-1, -1) if last is None else (last.source_offset, last.target_offset)
    assert (request.tail_source_offset, request.tail_target_offset) == recorded
    # The request applies to the tail it was planned from, and to no other.
    assert applies(request, _tail(last, 200))
    assert not applies(request, _tail(Replica(500, 500), 501))


def test_reset_targets_and_request_records() -> None:
    assert ResetTo.parse("earliest") == ResetTo.earliest()
    assert ResetTo.parse("latest") == ResetTo("latest")
    assert ResetTo.parse(42) == ResetTo.offset(42)
    when = datetime(2024, 5, 1, 12, tzinfo=UTC)
    assert ResetTo.parse(when) == ResetTo.timestamp(1_714_564_800_000)
    assert str(ResetTo.parse(when)) == "timestamp 2024-05-01T12:00:00+00:00 (1714564800000 ms)"
    for bad in ("soon", True, -3, 1.5):
        with pytest.raises(ReplicatorError):
            ResetTo.parse(bad)  # type: ignore[arg-type]
    with pytest.raises(ReplicatorError, match="takes no value"):
        ResetTo("latest", 3)

    rewind = _request(offset=40, tail_source=99, tail_target=99)
    assert ResetRequest.decode(rewind.value()) == rewind
    assert rewind.key == "primary->dr|reset|t|0"
    assert rewind.effect() == (
        "t[0]: 100 -> 40: 60 records will be copied again (the target then holds source "
        "offsets 40..99 twice)"
    )
    skip = _request(offset=120, tail_source=99, tail_target=99)
    assert skip.effect() == (
        "t[0]: 100 -> 120: 20 records will be skipped (source offsets 100..119 are never "
        "replicated)"
    )
