"""The partitions part alone (`replicator.engine.partitions`): the registry of tracked
partitions and what each change does to the source fetch and the offset-sync state,
with a consumer and sync writer that only record what they are asked."""

from __future__ import annotations

import pytest

from replicator.engine.partitions import Partitions

from helpers.engine_fakes import FakeConsumer, FakeReporter, FakeSyncs, tracker


@pytest.fixture
def consumer() -> FakeConsumer:
    return FakeConsumer()


@pytest.fixture
def syncs() -> FakeSyncs:
    return FakeSyncs()


@pytest.fixture
def reporter() -> FakeReporter:
    return FakeReporter()


@pytest.fixture
def partitions(consumer: FakeConsumer, syncs: FakeSyncs, reporter: FakeReporter) -> Partitions:
    return Partitions("primary->dr", consumer, syncs, reporter)  # type: ignore[arg-type]


def test_a_tracked_partition_waits_to_resume_and_its_syncs_are_tracked(
    partitions: Partitions, syncs: FakeSyncs
) -> None:
    made = partitions.track("orders", 3, "primary.orders", limit=500)
    assert (made.key, made.remote, made.size.limit, made.resuming) == (
        ("orders", 3),
        "primary.orders",
        500,
        True,
    )
    assert partitions.get(("orders", 3)) is made
    assert partitions.waiting() == [made]
    assert partitions.replicating(("orders", 3)) is None  # not before it resumed
    assert syncs.calls == [("track", ("orders", 3))]

    partitions.resumed(made)
    assert partitions.waiting() == []
    assert partitions.replicating(("orders", 3)) is made
    assert syncs.calls[-1] == ("restart", ("orders", 3))


def test_rewind_resets_the_tracker_pauses_it_and_resuming_fetches_it_from_its_position(
    partitions: Partitions, consumer: FakeConsumer, syncs: FakeSyncs
) -> None:
    one = tracker(0, next_offset=40)
    partitions.add(one)
    epoch = one.epoch

    partitions.rewind(one)
    assert one.resuming and one.epoch == epoch + 1  # its reports in flight are stale
    assert partitions.waiting() == [one]
    assert consumer.calls == [("pause", [("orders", 0, -1001)])]
    assert ("rolled_back", ("orders", 0)) in syncs.calls
    assert partitions.replicating(one.key) is None

    one.next_offset = 37  # where the target tail says it continues
    partitions.resumed(one)
    partitions.restart_fetch(one)
    assert consumer.calls[1:] == [
        ("unassign", [("orders", 0, -1001)]),
        ("assign", [("orders", 0, 37)]),  # reassigned at its position, not sought
        ("resume", [("orders", 0, -1001)]),
    ]


def test_partitions_resumed_together_are_fetched_again_in_one_call_of_each_kind(
    partitions: Partitions, consumer: FakeConsumer
) -> None:
    """At an estate's start thousands of partitions resume at once: one call each was
    5 s of round trips to the consumer's thread before the copy began."""
    first, second, stopped = tracker(0, next_offset=7), tracker(1, next_offset=9), tracker(2)
    for made in (first, second, stopped):
        partitions.add(made)
    partitions.stop(stopped, "stopped")
    consumer.calls.clear()
    partitions.restart_fetch(first, second, stopped)
    assert consumer.calls == [
        ("pause", [("orders", 2, -1001)]),
        ("unassign", [("orders", 0, -1001), ("orders", 1, -1001)]),
        ("assign", [("orders", 0, 7), ("orders", 1, 9)]),
        ("resume", [("orders", 0, -1001), ("orders", 1, -1001)]),
    ]
    consumer.calls.clear()
    partitions.restart_fetch()
    assert consumer.calls == []


def test_a_rewind_in_exactly_once_mode_drops_the_partitions_transactional_producer(
    consumer: FakeConsumer, syncs: FakeSyncs, reporter: FakeReporter
) -> None:
    partitions = Partitions("f", consumer, syncs, reporter, transactional=True)  # type: ignore[arg-type]
    one = tracker(0)
    one.producer = object()  # type: ignore[assignment]
    partitions.add(one)
    partitions.rewind(one)
    assert one.producer is None  # made anew (fencing earlier owners) when it resumes


def test_rewind_all_leaves_stopped_partitions_stopped(partitions: Partitions) -> None:
    running, stopped = tracker(0), tracker(1)
    stopped.stopped = "a policy stopped it"
    partitions.add(running)
    partitions.add(stopped)
    partitions.rewind_all()
    assert running.resuming and not stopped.resuming
    assert partitions.waiting() == [running]


def test_halt_stops_one_partition_and_leaves_the_others(
    partitions: Partitions, consumer: FakeConsumer, reporter: FakeReporter
) -> None:
    one, other = tracker(0), tracker(1)
    partitions.add(one)
    partitions.add(other)

    partitions.halt(one, "orders[0] offset 5: too large; the partition is stopped")
    assert one.stopped == "orders[0] offset 5: too large; the partition is stopped"
    assert other.stopped is None
    assert consumer.paused() == [("orders", 0)]
    assert partitions.replicating(one.key) is None
    assert partitions.replicating(other.key) is other
    # Counted in the stopped gauge at once, and its status published at once.
    assert reporter.published == [("metrics", 2), ("partition", ("orders", 0))]


def test_a_stopped_partition_is_not_fetched_again(
    partitions: Partitions, consumer: FakeConsumer
) -> None:
    one = tracker(0)
    partitions.add(one)
    partitions.stop(one, "stopped")
    partitions.restart_fetch(one)
    assert consumer.calls == [("pause", [("orders", 0, -1001)])]


def test_drop_forgets_a_fenced_partition_and_pauses_it(
    partitions: Partitions, consumer: FakeConsumer, syncs: FakeSyncs
) -> None:
    one, other = tracker(0, resuming=True), tracker(1)
    partitions.add(one)
    partitions.add(other)
    partitions.drop(one)
    assert partitions.get(one.key) is None and not partitions.is_current(one)
    assert partitions.waiting() == []
    assert partitions.is_current(other)
    assert consumer.paused() == [("orders", 0)]
    assert syncs.calls == [("forget", ("orders", 0))]


def test_forget_returns_the_revoked_partitions_tracker(
    partitions: Partitions, syncs: FakeSyncs
) -> None:
    one = tracker(0, resuming=True)
    partitions.add(one)
    assert partitions.forget(one.key) is one
    assert partitions.forget(one.key) is None
    assert len(partitions) == 0 and partitions.waiting() == []
    assert syncs.calls == [("forget", ("orders", 0))] * 2


def test_a_partition_held_at_an_oversized_record_takes_no_records(
    partitions: Partitions,
) -> None:
    one = tracker(0)
    partitions.add(one)
    one.size.held = True
    assert partitions.replicating(one.key) is None
    assert partitions.replicating(("orders", 9)) is None  # not ours


def test_a_partition_assigned_again_goes_on_counting_what_it_copied(
    partitions: Partitions,
) -> None:
    """A rebalance (a topic created on the source, a worker joining) revokes every
    partition and hands most back to the worker that had them: its status counts what
    this process copied, not what it copied since the rebalance (`flows describe`
    showed 0 of 200 after one)."""
    first = partitions.track("orders", 3, "primary.orders", limit=500)
    first.counters.replicated += 200
    partitions.forget(("orders", 3))
    again = partitions.track("orders", 3, "primary.orders", limit=500)
    assert again is not first and again.status(lag=0).replicated == 200
    other = partitions.track("orders", 4, "primary.orders", limit=500)
    assert other.status(lag=0).replicated == 0
