"""The compiled path's writer alone (`replicator.engine.mover_writer`) over a fake
Mover (`helpers.engine_fakes.FakeMover`), the real `Partitions` over `MoverFetch`
over a fake group consumer: the Mover's settings; the group consumer kept paused
while the Mover is assigned by hand where the parts set positions; handed-back
records settled (forwarded provenance released with the replica's headers, a loop
skipped, an oversized record held for a config sync and read again); `progress()`
fed to the partitions and the offset syncs, shifts first; a `MoverError` stopping
the task, but an offset out of range; a lost assignment dropping the Mover; and
which path `data_path` chooses. The Mover on real clusters is
tests/integration/engine/test_compiled_path.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, OFFSET_INVALID, TopicPartition

from replicator.engine import data_path, mover_writer
from replicator.engine.headers import (
    OFFSET_HEADER,
    ORIGIN_HEADER,
    SOURCE_HEADER,
    TOPIC_HEADER,
    encode_offset,
)
from replicator.engine.mover_writer import MoverFetch, MoverWriter
from replicator.engine.partitions import Partitions
from replicator.engine.reporting import TaskReporter
from replicator.errors import ConfigError, ReplicatorError

from helpers.engine_fakes import (
    FakeConsumer,
    FakeDataplane,
    FakeMover,
    FakeMoverError,
    FakeProducer,
    FakeReporter,
    FakeSyncs,
    FakeTopics,
    flow,
    tracker,
)

KEY = ("orders", 0)


class _Path:
    """A MoverWriter over fakes, and what it did to them."""

    def __init__(
        self,
        topics: FakeTopics | None = None,
        clock: Callable[[], float] = time.monotonic,
        **properties: str,
    ) -> None:
        self.flow = flow(**properties)
        self.module = FakeDataplane()
        self.consumer = FakeConsumer()
        self.fetch = MoverFetch(self.consumer)  # type: ignore[arg-type]
        self.syncs = FakeSyncs()
        self.reporter = FakeReporter()
        self.partitions = Partitions(self.flow.name, self.fetch, self.syncs, self.reporter)  # type: ignore[arg-type]
        self.topics = topics or FakeTopics()
        self.failures: list[tuple[str, bool]] = []
        self.out_of_range: list[tuple[str, int]] = []
        self.writer = MoverWriter(
            self.flow,
            self.partitions,
            self.syncs,  # type: ignore[arg-type]
            self.reporter,  # type: ignore[arg-type]
            module=self.module,  # type: ignore[arg-type]
            topics=self.topics,
            fail=self.fail,
            out_of_range=lambda topic, partition, _why: self.out_of_range.append(
                (topic, partition)
            ),
            stopping=threading.Event(),
            make_producer=FakeProducer,
            clock=clock,
        )
        self.fetch.bind(self.writer)
        self.writer.start({})

    @property
    def mover(self) -> FakeMover:
        return FakeMover.made[-1]

    def fail(self, message: str, *, access: bool = False) -> None:
        self.failures.append((message, access))

    def replicating(self, partition: int = 0, next_offset: int = 0) -> Any:
        """A partition resumed at `next_offset` and fetched from there, as Rebalance does."""
        made = tracker(partition, next_offset=next_offset, resuming=True)
        self.partitions.add(made)
        self.writer.for_partition(made)
        made.acked_next = next_offset
        self.partitions.resumed(made)
        self.partitions.restart_fetch(made)
        return made


@pytest.fixture
def p() -> _Path:
    return _Path()


def test_the_movers_settings_are_the_loops_without_the_group_as_strings() -> None:
    # A poll interval below the default session timeout: librdkafka refuses a consumer
    # that has one without the other (the group's settings are the group consumer's).
    p = _Path(**{"consumer.max.poll.interval.ms": "15000", "consumer.session.timeout.ms": "10000"})
    source, target = p.mover.source, p.mover.target
    assert "max.poll.interval.ms" not in source and "session.timeout.ms" not in source
    assert "group.id" not in source and "partition.assignment.strategy" not in source
    assert source["isolation.level"] == "read_committed"
    assert source["enable.auto.commit"] == "false"
    assert source["auto.offset.reset"] == "error"
    assert target["enable.idempotence"] == "true"
    assert target["message.timeout.ms"] == "0"
    assert target["enable.gapless.guarantee"] == "true"
    assert all(isinstance(v, str) for v in (*source.values(), *target.values()))
    assert p.mover.provenance == [(SOURCE_HEADER, b"primary")]
    assert p.mover.options["offset_header"] == OFFSET_HEADER
    assert p.mover.options["topic_header"] == TOPIC_HEADER
    assert set(p.mover.options["reserved_headers"]) >= {SOURCE_HEADER, ORIGIN_HEADER}


def test_the_group_consumer_stays_paused_and_the_mover_is_assigned_by_hand(p: _Path) -> None:
    made = p.partitions.track("orders", 0, "primary.orders", 1_000)
    p.partitions.track("orders", 1, "primary.orders", 1_000)
    p.fetch.incremental_assign([
        TopicPartition("orders", 0, 5),
        TopicPartition("orders", 1, OFFSET_BEGINNING),  # waits for its position
    ])  # fmt: skip
    assert ("pause", [("orders", 0, 5), ("orders", 1, OFFSET_BEGINNING)]) in p.consumer.calls
    assert p.mover.calls == [("assign", [("orders", 0, 5, "primary.orders")])]
    p.fetch.resume([TopicPartition("orders", 0)])  # the group consumer is not resumed
    assert not [c for c in p.consumer.calls if c[0] == "resume"]
    p.partitions.pause(made)
    assert p.mover.calls[-1] == ("unassign", [KEY])
    p.fetch.incremental_unassign([TopicPartition("orders", 1)])  # the Mover never read it
    assert p.mover.calls[-1] == ("unassign", [KEY])
    assert p.consumer.calls[-1] == ("unassign", [("orders", 1, -1001)])


def test_forwarded_provenance_is_released_with_the_replicas_headers(p: _Path) -> None:
    """east.orders on primary is primary's copy of east's orders: copied on to dr with
    its own headers, then our provenance, the origin (east) kept."""
    made = tracker(topic="east.orders", next_offset=7, resuming=True)
    p.partitions.add(made)
    p.partitions.resumed(made)
    p.partitions.restart_fetch(made)
    own = [("app", b"1"), (SOURCE_HEADER, b"east"), (TOPIC_HEADER, b"orders")]
    p.mover.handed = [
        ("east.orders", 0, 7, b"k", b"v", 0, 1_700_000_000_000, own, "reserved_header")
    ]
    p.writer.move(0.1)
    assert p.mover.calls[-1] == (
        "release",
        (
            "east.orders",
            0,
            [
                ("app", b"1"),
                (SOURCE_HEADER, b"primary"),
                (OFFSET_HEADER, encode_offset(7)),
                (TOPIC_HEADER, b"east.orders"),
                (ORIGIN_HEADER, b"east"),
            ],
        ),
    )


def test_a_loop_is_skipped_and_counted(p: _Path) -> None:
    """dr.orders on primary is our copy of dr's orders: it goes back nowhere."""
    made = tracker(topic="dr.orders", next_offset=3, resuming=True)
    p.partitions.add(made)
    p.partitions.resumed(made)
    p.partitions.restart_fetch(made)
    own = [(SOURCE_HEADER, b"dr"), (TOPIC_HEADER, b"orders")]
    p.mover.handed = [("dr.orders", 0, 3, None, b"v", 0, 1, own, "reserved_header")]
    p.writer.move(0.1)
    assert p.mover.calls[-1] == ("release", ("dr.orders", 0, None))
    assert made.counters.skipped == 1
    assert p.reporter.published[-1][0] == "skipped"
    # The Mover learns it as a loop's provenance, skipped in order (`rewrite`).
    learnt = [args for call, args in p.mover.calls if call == "learn"]
    assert learnt == [("dr.orders", own, "loop", [], True)]


def test_the_mover_learns_each_provenances_verdict_and_reports_its_own_skips(p: _Path) -> None:
    """Python decides once per provenance; the Mover settles the next records of it
    itself (at the plain record's rate) and reports the loops it skipped."""
    made = tracker(topic="east.orders", next_offset=7, resuming=True)
    p.partitions.add(made)
    p.partitions.resumed(made)
    p.partitions.restart_fetch(made)
    own = [("app", b"1"), (SOURCE_HEADER, b"east"), (TOPIC_HEADER, b"orders")]
    p.mover.handed = [("east.orders", 0, 7, b"k", b"v", 0, 1, own, "reserved_header")]
    p.writer.move(0.1)
    learnt = [args for call, args in p.mover.calls if call == "learn"]
    assert learnt == [("east.orders", own, None, [(ORIGIN_HEADER, b"east")], False)]
    loop = [(SOURCE_HEADER, b"dr"), (TOPIC_HEADER, b"orders")]
    p.mover.handed = [("east.orders", 0, 8, None, b"v", 0, 1, loop, "reserved_header")]
    p.writer.move(0.1)
    learnt = [args for call, args in p.mover.calls if call == "learn"]
    assert learnt[-1] == ("east.orders", loop, None, [], False)  # not ours: copied as its own
    p.mover.skipped = [("east.orders", 0, "loop", 40, 9)]
    p.writer.serve()
    assert made.counters.skipped == 40
    assert p.reporter.published[-1][0] == "skipped"


def test_a_release_into_a_full_queue_is_tried_again_next_round(p: _Path) -> None:
    """The target takes nothing: the release gives up after a moment (the record stays
    held in the Mover) and the task goes back to its group; the next round releases it
    again, before moving anything."""
    made = tracker(topic="east.orders", next_offset=7, resuming=True)
    p.partitions.add(made)
    p.partitions.resumed(made)
    p.partitions.restart_fetch(made)
    own = [(SOURCE_HEADER, b"east"), (TOPIC_HEADER, b"orders")]
    p.mover.queue_full = True
    p.mover.handed = [("east.orders", 0, 7, b"k", b"v", 0, 1, own, "reserved_header")]
    p.writer.move(0.1)
    releases = [args for call, args in p.mover.calls if call == "release"]
    assert len(releases) == 1 and p.failures == []
    assert p.writer.move(0.1) == 0  # tried again, still full: nothing else moves
    assert [args for call, args in p.mover.calls if call == "release"] == releases * 2
    p.mover.queue_full = False
    p.writer.move(0.1)
    assert [args for call, args in p.mover.calls if call == "release"] == releases * 3
    p.writer.move(0.1)  # released: not again
    assert [args for call, args in p.mover.calls if call == "release"] == releases * 3


def test_a_rewind_waits_for_what_was_in_flight_before_the_tail_is_read(p: _Path) -> None:
    """A rewind drops what never left and keeps the old Mover until its records in
    flight settled: one that lands after the tail was read would be copied twice."""
    p.replicating()
    old = p.mover
    old.in_flight_left = 3
    p.writer.rewind_all("records unacknowledged")
    assert ("purge_queue", None) in old.calls and not old.closed
    assert p.mover is not old and p.writer.draining
    assert not p.writer.settled()  # the partitions wait, paused
    old.in_flight_left = 0
    assert p.writer.settled() and old.closed and not p.writer.draining


def test_progress_feeds_the_partition_and_the_offset_syncs_shifts_first(p: _Path) -> None:
    made = p.replicating(next_offset=10)
    p.mover.reports = {KEY: (19, 108, 5, 10, 1_000, [(10, 100), (15, 104)], 1_700_000_000_000, 19)}
    p.writer.serve()
    assert (made.acked_next, made.next_offset) == (20, 20)
    assert (made.counters.replicated, made.counters.replicated_bytes) == (10, 1_000)
    assert made.counters.acked_timestamp_ms == 1_700_000_000_000  # the record's, not now
    runs = [
        (r["first_source"], r["last_source"], r["count"], r["target_offset"])
        for r in p.syncs.acknowledged_runs
    ]
    # Each shift a run of its own record (where the run before it ends is not told),
    # the newest pair the end of the run from the last shift.
    assert runs == [(10, 10, 1, 100), (15, 15, 1, 104), (16, 19, 4, 108)]
    assert p.writer.in_flight() == {KEY}
    p.mover.reports = {KEY: (19, 108, 0, 0, 0, [], 1_700_000_000_000, 19)}
    p.writer.serve()
    assert p.writer.in_flight() == set()
    assert len(p.syncs.acknowledged_runs) == 3  # nothing new


def test_the_newest_pair_is_the_newest_record_written_not_a_skipped_one_after_it(
    p: _Path,
) -> None:
    # 10..18 written at 100..108, then 19 skipped (a loop record): delivered through 19,
    # but the pair is 18 -> 108 (19 -> 108 would point a translation at record 18).
    p.replicating(next_offset=10)
    p.mover.reports = {KEY: (19, 108, 0, 9, 900, [(10, 100)], 1_700_000_000_000, 18)}
    p.writer.serve()
    runs = [
        (r["first_source"], r["last_source"], r["count"], r["target_offset"])
        for r in p.syncs.acknowledged_runs
    ]
    assert runs == [(10, 10, 1, 100), (11, 18, 8, 108)]


def _lag_reporter(p: _Path, monkeypatch: pytest.MonkeyPatch) -> TaskReporter:
    """A reporter whose lag reads the Mover's watermarks and positions at every call,
    and the writer's partitions with records in flight, as the task binds it."""
    monkeypatch.setattr(mover_writer, "_HIGHS_EVERY_S", 0.0)
    monkeypatch.setattr(mover_writer, "_HIGHS_DUTY", float("inf"))
    reporter = TaskReporter(p.flow.name, "w1", 0)
    reporter.read_lag_with(p.fetch, p.writer.in_flight)
    return reporter


def test_lag_is_measured_against_the_high_watermarks_the_mover_fetched(
    p: _Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The group consumer never fetches, so its cached watermarks stay unknown: lag
    # read from them was unknown on this path (status `lag` null, `flows list` no
    # total, the lag gauge 0) unless a fetch slipped in before its pause.
    p.consumer.high = OFFSET_INVALID
    reporter = _lag_reporter(p, monkeypatch)
    made = p.replicating(next_offset=10)
    assert reporter.lag(made) is None  # not fetched yet: unknown, not 0
    # ... and the group consumer, which never fetches, is not asked for its cache.
    assert not [call for call in p.consumer.calls if call[0] == "watermarks"]
    p.mover.highs[KEY] = 16
    assert reporter.lag(made) == 6
    p.partitions.pause(made)  # stopped: the Mover no longer reads it
    p.mover.highs.clear()
    assert reporter.lag(made) == 6  # its last known watermark stands
    p.writer.close()
    assert reporter.lag(made) == 6
    assert p.fetch.get_watermark_offsets(TopicPartition(*KEY), cached=False) == (0, OFFSET_INVALID)


def test_records_read_but_not_acknowledged_are_still_lag(
    p: _Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The Mover read a partition's 100 records at once and sent them: its position is
    # at the end, none acknowledged yet. The status published then said lag 0 and 0
    # replicated (`flows describe` showed 0 of 200 after `flows list` said lag 0), and
    # an unplanned failover counts what was lost from the last status.
    reporter = _lag_reporter(p, monkeypatch)
    made = p.replicating(next_offset=0)
    p.mover.highs[KEY] = p.mover.positions_read[KEY] = 100  # read to its end
    p.mover.reports = {KEY: (-1, -1, 100, 0, 0, [], -1, -1)}  # all 100 in flight
    p.writer.serve()
    assert p.writer.in_flight() == {KEY}
    assert reporter.lag(made) == 100
    p.mover.reports = {KEY: (59, 59, 40, 60, 6_000, [], 1_700_000_000_000, 59)}
    p.writer.serve()
    assert (reporter.lag(made), made.counters.replicated) == (40, 60)
    p.mover.reports = {KEY: (99, 99, 0, 40, 4_000, [], 1_700_000_000_000, 99)}
    p.writer.serve()
    assert (reporter.lag(made), made.counters.replicated) == (0, 100)
    # Without the writer's answer (as before), the position alone said 0 at once.
    alone = TaskReporter(p.flow.name, "w2", 0)
    alone.read_lag_with(p.fetch)
    assert alone.lag(made) == 0


def test_lag_counts_from_past_the_commit_markers_the_mover_read(
    p: _Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A transactional partition copied to its end: its last record is at 22, its
    # commit marker at 23, its high watermark 24. The consumer hands the marker to no
    # one, so the lag counted from the last record stayed 1 forever, and an unplanned
    # failover counted that marker as a lost record.
    reporter = _lag_reporter(p, monkeypatch)
    made = p.replicating(next_offset=23)
    p.mover.highs[KEY] = 24
    assert reporter.lag(made) == 1  # position not known yet: from the last record
    p.mover.positions_read[KEY] = 24
    assert reporter.lag(made) == 0
    made.size.held = True  # held at a record: what it read past it is not handled
    assert reporter.lag(made) == 1
    made.size.held = False
    p.fetch.incremental_assign([TopicPartition(*KEY, 23)])  # read again from 23
    p.mover.positions_read.clear()
    assert reporter.lag(made) == 1  # the position from before is forgotten


def test_librdkafkas_warning_about_a_setting_the_engine_forces_is_not_the_operators(
    p: _Path, caplog: pytest.LogCaptureFixture
) -> None:
    p.replicating()
    confwarn = (
        "CONFWARN [thrd:app]: Configuration property enable.gapless.guarantee is "
        "experimental: When set to `true`, any error that could result in a gap ..."
    )
    other = "CONFWARN [thrd:app]: Configuration property fetch.queue.backoff.ms is odd"
    p.mover.pending_events = [("target", "warning", confwarn), ("source", "warning", other)]
    with caplog.at_level("DEBUG"):
        p.writer.serve()
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert not any("gapless" in line for line in warned), warned
    assert any("fetch.queue.backoff.ms" in line for line in warned), warned
    assert any("gapless" in r.getMessage() for r in caplog.records if r.levelname == "DEBUG")


def test_an_oversized_record_is_held_for_a_sync_then_read_again(p: _Path) -> None:
    topics = FakeTopics({"primary.orders": 5_000_000})
    p = _Path(topics)
    made = p.replicating(next_offset=0)
    p.mover.handed = [("orders", 0, 4, None, b"x" * 2_000_000, 0, 1, [], "too_large")]
    p.writer.move(0.1)
    assert made.size.held and made.next_offset == 4
    assert p.mover.calls[-1] == ("unassign", [KEY])
    old = p.mover
    p.writer.resync_held()
    assert topics.synced == [{"orders": 1}]
    assert old.closed  # larger limits: a new Mover, whose producer takes the record
    assert int(p.mover.target["message.max.bytes"]) > 5_000_000
    assert p.mover.calls[-1] == ("assign", [("orders", 0, 4, "primary.orders")])


def test_the_mover_knows_each_target_topics_own_limit() -> None:
    """The Mover's producer takes records up to the largest remote topic's limit; each
    partition's own (smaller) limit is the Mover's to apply, or a record above it is
    refused by the broker and stops the whole flow."""
    p = _Path()
    p.replicating(next_offset=0)
    told = p.mover.record_limits
    assert told == {"primary.orders": p.writer.record_limit("primary.orders")}  # at assign
    p.writer.update_size_limits({"primary.orders": 20_000, "primary.heartbeats": 2_000_000})
    assert told["primary.orders"] == p.writer.record_limit("primary.orders") < 20_000
    assert int(p.mover.target["message.max.bytes"]) > 2_000_000  # the largest topic's


def test_an_oversized_record_stops_the_partition_when_the_policy_says_fail() -> None:
    p = _Path(**{"sync.topic.configs.enabled": "false"})
    made = p.replicating(next_offset=0)
    p.mover.handed = [("orders", 0, 4, None, b"x" * 2_000, 0, 1, [], "too_large")]
    p.writer.move(0.1)
    assert made.stopped and "oversized.record.policy=fail" in made.stopped
    assert p.mover.calls[-1] == ("unassign", [KEY])


def test_an_offset_out_of_range_goes_to_the_policies_any_other_error_stops(p: _Path) -> None:
    p.replicating()
    p.mover.raises = FakeMoverError(
        "consuming orders partition 0 at offset 5: _AUTO_OFFSET_RESET: Local: No offset stored"
    )
    p.writer.move(0.1)
    assert p.out_of_range == [KEY] and not p.failures
    p.mover.raises = FakeMoverError(
        "delivering orders partition 0 offset 9 (to primary.orders): Broker: Message size too large"
    )
    p.writer.move(0.1)
    ((message, access),) = p.failures
    assert "Message size too large" in message and "orders partition 0 offset 9" in message
    assert not access
    p.mover.raises = FakeMoverError(
        "consuming orders partition 0 at offset 5: TOPIC_AUTHORIZATION_FAILED: Broker: ..."
    )
    p.writer.move(0.1)
    assert p.failures[-1][1] is True


def test_a_lost_assignment_drops_the_mover_and_rewinds_every_partition(p: _Path) -> None:
    made = p.replicating()
    old = p.mover
    p.writer.release(lost=True)
    assert not any(c[0] == "flush" for c in old.calls)
    assert p.writer.settled() and old.closed  # closed once nothing of it is in flight
    assert made.resuming and p.mover is not old
    # It knows what the old one learnt; its partitions are read again once they
    # resume from the target tail.
    assert p.mover.calls == [("adopt", (old,))]


def test_a_revoke_flushes_and_rewinds_only_when_records_stay_in_flight(p: _Path) -> None:
    made = p.replicating()
    p.writer.release(lost=False)
    assert p.mover.calls[-1][0] == "flush" and not made.resuming
    p.mover.flush_leaves = 3
    old = p.mover
    p.writer.release(lost=False)
    assert made.resuming and p.writer.settled() and old.closed


def test_the_movers_own_producer_learns_the_remote_topics_before_their_records(
    p: _Path,
) -> None:
    # Rebalance asks before a partition resumes (a remote topic grown to a new source
    # partition included): the Mover's producer refuses a record for a partition it
    # does not know and refreshes its metadata only every 5 minutes, so it is the one
    # asked (the status producer has no `list_topics` here: asking it would raise).
    p.writer.know(iter(["primary.orders", "primary.items", "primary.orders"]), 10.0)
    assert p.mover.known == [["primary.items", "primary.orders"]]
    p.writer.know([], 10.0)
    assert len(p.mover.known) == 1
    p.mover.know_raises = FakeMoverError(
        "learning the partitions of primary.orders on the target: Local: Timed out"
    )
    # A ReplicatorError: Rebalance keeps the partitions waiting and tries again.
    with pytest.raises(ReplicatorError, match=r"primary\.orders on 'dr': learning") as raised:
        p.writer.know(["primary.orders"], 10.0)
    assert isinstance(raised.value.__cause__, FakeMoverError)


def test_the_path_is_chosen_once_and_compiled_refuses_clearly(monkeypatch: Any) -> None:
    assert data_path.choose(flow(**{"replicator.data.path": "python"})).path == "python"
    monkeypatch.setattr(data_path, "_module", lambda: (None, "replicator._dataplane is not built"))
    assert "not built" in data_path.choose(flow()).describe()
    with pytest.raises(ConfigError, match=r"replicator.data.path = compiled, but .*not built"):
        data_path.choose(flow(**{"replicator.data.path": "compiled"}))
    monkeypatch.setattr(data_path, "_module", lambda: (FakeDataplane, ""))
    chosen = data_path.choose(flow())
    assert chosen.compiled
    assert chosen.describe() == "records move through the compiled data plane (librdkafka 2.12.1)"
    exactly_once = data_path.choose(flow(**{"exactly.once": "true"}))
    assert exactly_once.compiled and exactly_once.describe() == (
        "records move through the compiled data plane (librdkafka 2.12.1, exactly-once: "
        "a transactional Mover per partition)"
    )


def test_a_flow_with_python_callbacks_stays_on_the_python_loop(monkeypatch: Any) -> None:
    """`stats_cb`, `oauth_cb`, ... given through the Python API: the compiled clients
    cannot call them, so such a flow is not moved there with its callbacks dropped."""
    monkeypatch.setattr(data_path, "_module", lambda: (FakeDataplane, ""))
    plain = flow()
    with_callback = replace(
        plain, target=replace(plain.target, producer={**plain.target.producer, "stats_cb": print})
    )
    chosen = data_path.choose(with_callback)
    assert chosen.path == "python"
    assert "Python callbacks (producer.stats_cb)" in chosen.describe()
    with pytest.raises(ConfigError, match=r"compiled, but the flow's client settings hold Python"):
        data_path.choose(replace(with_callback, data_path="compiled"))


def test_the_movers_are_read_less_often_the_longer_a_read_takes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A read of the Movers' watermarks costs a search per partition in librdkafka:
    at 5,000 partitions over 1,250 topics, reading every 0.5 s kept most of a core busy
    with nothing moving. Reads are spaced to take at most `_HIGHS_DUTY` of the time."""
    clock = [1000.0]
    p = _Path(clock=lambda: clock[0])
    reads = []

    def watermarks() -> dict[tuple[str, int], int]:
        reads.append(clock[0])
        clock[0] += 0.1  # a read of a large assignment
        return {}

    monkeypatch.setattr(p.mover, "watermarks", watermarks)
    p.writer.high_watermark(KEY)
    clock[0] += 1.0  # past _HIGHS_EVERY_S, not past 0.1 s / _HIGHS_DUTY
    p.writer.high_watermark(KEY)
    assert len(reads) == 1
    clock[0] += 0.1 / mover_writer._HIGHS_DUTY
    p.writer.high_watermark(KEY)
    assert len(reads) == 2
