"""Which source positions the engine commits for consumer-group tools, and when: never
past a record the target has not acknowledged, rate-limited, only what moved, and
nothing when `replicator.commit.source.offsets = false`."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from prometheus_client import REGISTRY

from replicator.engine import source_commits
from replicator.engine.partition import PartitionTracker
from replicator.engine.size_limits import SizeHold
from replicator.engine.source_commits import SourceCommits


class _Consumer:
    def __init__(self, refuse: KafkaError | None = None) -> None:
        self.commits: list[list[tuple[str, int, int]]] = []
        self.refuse = refuse

    def commit(self, *, offsets: list[TopicPartition], asynchronous: bool) -> None:
        assert asynchronous
        if self.refuse is not None:
            raise KafkaException(self.refuse)
        self.commits.append([(tp.topic, tp.partition, tp.offset) for tp in offsets])


def _tracker(partition: int, next_offset: int, acked_next: int = -1) -> PartitionTracker:
    return PartitionTracker(
        "primary->dr", "orders", partition, "primary.orders", SizeHold(limit=1_000_000),
        next_offset=next_offset, resuming=False, acked_next=acked_next,
    )  # fmt: skip


@pytest.fixture
def clock() -> list[float]:
    """The time the commits' rounds see, moved by hand (given to `SourceCommits`)."""
    return [1000.0]


def test_default_mode_commits_no_further_than_acknowledged(clock: list[float]) -> None:
    commits = SourceCommits(
        "primary->dr", enabled=True, transactional=False, clock=lambda: clock[0]
    )
    consumer = _Consumer()
    # Partition 0 has runs in flight: its acknowledged position; partition 1 none: its
    # next offset (records after its last run were skipped, e.g. loops).
    trackers = [_tracker(0, next_offset=500, acked_next=300), _tracker(1, next_offset=90)]
    commits.commit_due(consumer, trackers, {("orders", 0)})  # type: ignore[arg-type]
    assert consumer.commits == [[("orders", 0, 300), ("orders", 1, 90)]]


def test_exactly_once_commits_the_next_offset(clock: list[float]) -> None:
    """Every batch's transactions are settled before a round: next_offset is committed."""
    commits = SourceCommits("primary->dr", enabled=True, transactional=True, clock=lambda: clock[0])
    consumer = _Consumer()
    commits.commit_due(consumer, [_tracker(0, 500, acked_next=300)], {("orders", 0)})  # type: ignore[arg-type]
    assert consumer.commits == [[("orders", 0, 500)]]


def test_rounds_are_rate_limited_and_send_only_what_moved(clock: list[float]) -> None:
    commits = SourceCommits(
        "primary->dr", enabled=True, transactional=False, clock=lambda: clock[0]
    )
    consumer = _Consumer()
    trackers = [_tracker(0, 10), _tracker(1, 20)]
    commits.commit_due(consumer, trackers, set())  # type: ignore[arg-type]
    trackers[0].next_offset = 15
    clock[0] += 1
    commits.commit_due(consumer, trackers, set())  # type: ignore[arg-type]
    assert len(consumer.commits) == 1  # not due yet
    clock[0] += source_commits.COMMIT_EVERY_S
    commits.commit_due(consumer, trackers, set())  # type: ignore[arg-type]
    assert consumer.commits[-1] == [("orders", 0, 15)]
    # Given up: forced at once.
    trackers[1].next_offset = 25
    commits.commit_due(consumer, trackers, set(), force=True)  # type: ignore[arg-type]
    assert consumer.commits[-1] == [("orders", 1, 25)]


def test_waiting_stopped_and_unknown_partitions_keep_their_last_commit(clock: list[float]) -> None:
    commits = SourceCommits(
        "primary->dr", enabled=True, transactional=False, clock=lambda: clock[0]
    )
    consumer = _Consumer()
    waiting, stopped, unknown = _tracker(0, 10), _tracker(1, 20), _tracker(2, -1)
    waiting.resuming = True
    stopped.stopped = "a failure policy stopped it"
    commits.commit_due(consumer, [waiting, stopped, unknown], set())  # type: ignore[arg-type]
    assert consumer.commits == []


def test_off_commits_nothing(clock: list[float]) -> None:
    commits = SourceCommits(
        "primary->dr", enabled=False, transactional=False, clock=lambda: clock[0]
    )
    consumer = _Consumer()
    commits.commit_due(consumer, [_tracker(0, 10)], set(), force=True)  # type: ignore[arg-type]
    assert consumer.commits == []


@dataclass
class _Reported:
    """A partition of a commit report (librdkafka sets `error`; Python cannot)."""

    topic: str
    partition: int
    error: KafkaError | None = None


def _failed() -> float:
    labels = {"flow": "primary->dr", "outcome": "failed"}
    return REGISTRY.get_sample_value("replicator_source_offset_commits_total", labels) or 0.0


def test_a_failing_commit_is_counted_each_time_and_logged_once(
    clock: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="replicator.engine.source_commits")
    commits = SourceCommits(
        "primary->dr", enabled=True, transactional=False, clock=lambda: clock[0]
    )
    commits.group = "replicator-primary-dr"
    before = _failed()
    denied = KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED, "denied")
    for _ in range(3):
        commits.on_commit(None, [_Reported("orders", 0, denied)])  # type: ignore[list-item]
    assert _failed() - before == 3
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    for part in ("group replicator-primary-dr", "orders[0]", "READ on the group",
                 "replicator.commit.source.offsets = false"):  # fmt: skip
        assert part in warnings[0]
    # The failed position is committed again in the next round.
    consumer = _Consumer()
    commits.commit_due(consumer, [_tracker(0, 10)], set())  # type: ignore[arg-type]
    assert consumer.commits == [[("orders", 0, 10)]]
    commits.on_commit(None, [TopicPartition("orders", 0, 10)])
    assert "committed again" in caplog.text


def test_a_commit_refused_at_once_is_reported_not_raised(clock: list[float]) -> None:
    commits = SourceCommits(
        "primary->dr", enabled=True, transactional=False, clock=lambda: clock[0]
    )
    before = _failed()
    consumer = _Consumer(refuse=KafkaError(KafkaError._STATE, "no group membership"))
    commits.commit_due(consumer, [_tracker(0, 10)], set())  # type: ignore[arg-type]
    assert _failed() - before == 1
