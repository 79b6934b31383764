"""The task loop's timers: reports of every partition (metrics, status) are spaced by
their own cost, so at thousands of partitions they never take the loop from the copy."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from replicator.engine import task

from helpers.replication import flow_config


class _Clock:
    """The wall clock and the thread's CPU clock, both moved by hand: the test's reports
    spend CPU time as they take wall time."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> _Clock:
    return _Clock()


def _timers(clock: _Clock, cpu_clock: Callable[[], float] | None = None) -> task._Timers:
    flow = flow_config(("a", "127.0.0.1:1"), ("b", "127.0.0.1:2"), "t")
    return task._Timers(flow, clock=clock, cpu_clock=cpu_clock or clock)


def test_a_cheap_report_comes_every_interval(clock: _Clock) -> None:
    timers = _timers(clock)
    assert timers.due("metrics", clock.now, 1.0)
    with timers.spaced("metrics", 1.0):
        clock.now += 0.05  # a twentieth of its interval
    assert not timers.due("metrics", clock.now + 0.9, 1.0)
    assert timers.due("metrics", clock.now + 0.95, 1.0)  # 1 s after it began


def test_a_report_that_takes_half_its_interval_comes_ten_times_its_cost_later(
    clock: _Clock,
) -> None:
    """At 5,000 partitions beside a checkpoint round the metrics took 0.2 to 2 s; every
    second, that left the copy a fraction of the loop (the copy took 15 to 23 s)."""
    timers = _timers(clock)
    assert timers.due("metrics", clock.now, 1.0)
    with timers.spaced("metrics", 1.0):
        clock.now += 0.5
    ended = clock.now
    assert not timers.due("metrics", ended + 4.9, 1.0)
    clock.now = ended + 5.0
    assert timers.due("metrics", clock.now, 1.0)  # its time / _REPORTS_DUTY after it
    # A cheap one after it is back to every second.
    with timers.spaced("metrics", 1.0):
        clock.now += 0.01
    assert timers.due("metrics", ended + 6.0, 1.0)


def test_a_report_kept_waiting_by_other_threads_is_not_spaced(clock: _Clock) -> None:
    """Its wall time is other threads' (or processes') doing: only its own CPU counts."""
    timers = _timers(clock, cpu_clock=lambda: 50.0)
    assert timers.due("metrics", clock.now, 1.0)
    with timers.spaced("metrics", 1.0):
        clock.now += 0.8  # waited, at no CPU cost of its own
    assert timers.due("metrics", clock.now + 0.2, 1.0)


def test_the_status_is_spaced_from_its_own_interval(clock: _Clock) -> None:
    timers = _timers(clock)
    assert timers.due("status", clock.now, 10.0)
    with timers.spaced("status", 10.0):
        clock.now += 0.5  # 5 s at a tenth: less than its interval, so the interval stands
    assert not timers.due("status", clock.now + 9.0, 10.0)
    assert timers.due("status", clock.now + 9.5, 10.0)


def test_the_topics_loaded_at_the_start_are_refreshed_an_interval_later(clock: _Clock) -> None:
    """The start listed the topics and synced their remote topics and configs: doing it
    again in the first round described 1,250 topics' configs a second before the copy
    began."""
    timers = _timers(clock)
    flow = flow_config(("a", "127.0.0.1:1"), ("b", "127.0.0.1:2"), "t")
    every = flow.refresh_topics_interval_seconds
    assert not timers.due("refresh", clock.now, every)
    assert not timers.due("config_sync", clock.now, flow.sync_topic_configs_interval_seconds)
    assert timers.due("refresh", clock.now + every, every)
