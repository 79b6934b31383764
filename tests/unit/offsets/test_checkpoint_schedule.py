"""`CheckpointLoop`'s schedule (issue 41): the target is asked about the groups from
the first tick, before any round, and a round that held positions back (their
records were still being copied) is followed by the next one soon, not an interval
later. Fakes stand in for the checkpointer; the clusters' side is in
tests/integration/offsets."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from replicator.offsets import checkpoint_loop
from replicator.offsets.checkpoint_loop import HELD_RECHECK_S, CheckpointLoop
from replicator.offsets.checkpoints import CheckpointReport


class _Checkpointer:
    """Answers `warm_up` False until told, and rounds with `held` positions."""

    made = 0

    def __init__(self, flow: SimpleNamespace) -> None:
        type(self).made += 1
        self.warmed = 0
        self.ready = False
        self.held: list[object] = []
        #: Of `partitions` (the round's), those the copy has not reached yet.
        self.not_started = 0
        self.partitions = 10
        #: `positions_max_age_s` of each round.
        self.ages: list[float] = []

    def warm_up(self) -> bool:
        self.warmed += 1
        return self.ready

    def list_topics(self) -> list[str]:
        return []

    def emit(self, partitions: object = None, positions_max_age_s: float = 0.0) -> CheckpointReport:
        self.ages.append(positions_max_age_s)
        report = CheckpointReport("primary->dr")
        report.held = list(self.held)
        report.partitions, report.not_started = self.partitions, self.not_started
        return report

    def close(self) -> None:
        pass


def _flow(interval: float = 60.0) -> SimpleNamespace:
    return SimpleNamespace(
        name="primary->dr",
        emit_checkpoints_enabled=True,
        emit_checkpoints_interval_seconds=interval,
        sync_group_offsets_enabled=True,
        sync_group_offsets_interval_seconds=interval,
    )


class _Rounds:
    """The status-topic publisher, recording what each round said."""

    def __init__(self) -> None:
        self.published: list[tuple[str, CheckpointReport]] = []

    def publish(self, flow: SimpleNamespace, report: CheckpointReport, took_s: float) -> None:
        self.published.append((flow.name, report))


@pytest.fixture
def loop(monkeypatch: pytest.MonkeyPatch) -> CheckpointLoop:
    monkeypatch.setattr(checkpoint_loop, "Checkpointer", _Checkpointer)
    monkeypatch.setattr(_Checkpointer, "made", 0)
    made = CheckpointLoop([_flow()], threading.Event(), lambda: {"primary->dr": True})
    monkeypatch.setattr(made, "_share_of", lambda flow, checkpointer: set())
    monkeypatch.setattr(made, "_rounds", _Rounds())
    return made


def test_the_target_is_asked_about_groups_every_tick_until_it_answers(
    loop: CheckpointLoop,
) -> None:
    loop.tick()  # the first round is seconds away; the target is asked now
    checkpointer = loop._checkpointers["primary->dr"]
    assert checkpointer.warmed == 1
    loop.tick()
    assert checkpointer.warmed == 2
    checkpointer.ready = True
    loop.tick()
    loop.tick()  # answered: not asked again
    assert checkpointer.warmed == 3
    assert _Checkpointer.made == 1  # the round uses the same checkpointer


def test_a_round_that_held_positions_is_followed_by_the_next_within_seconds(
    loop: CheckpointLoop,
) -> None:
    flow = loop._flows[0]
    checkpointer = loop._checkpointer(flow)
    loop.round(flow)
    assert loop.next_round_in(flow) == 60.0  # nothing held: the interval
    checkpointer.held = ["a position whose records are still being copied"]
    loop.round(flow)
    assert loop.next_round_in(flow) == HELD_RECHECK_S
    checkpointer.held = []
    loop.round(flow)
    assert loop.next_round_in(flow) == 60.0
    # The round brought forward reuses the groups' positions read by the one before
    # (read within the interval); every other round reads them.
    assert checkpointer.ages == [0.0, 0.0, 60.0]
    # Every round says it ended, written or not (a round at rest writes nothing).
    assert len(loop._rounds.published) == 3


def test_a_round_the_copy_has_not_reached_everywhere_is_followed_by_the_next_within_seconds(
    loop: CheckpointLoop,
) -> None:
    """Remote partitions being created: while the copy has not reached all of them
    (none, or some), the next round comes soon for the rest (it reads only their
    bounds); once it reached every one, the interval again."""
    flow = loop._flows[0]
    checkpointer = loop._checkpointer(flow)
    checkpointer.not_started = 10  # all of them
    loop.round(flow)
    assert loop.next_round_in(flow) == HELD_RECHECK_S
    checkpointer.not_started = 4
    loop.round(flow)
    assert loop.next_round_in(flow) == HELD_RECHECK_S
    checkpointer.not_started = 0
    loop.round(flow)
    assert loop.next_round_in(flow) == 60.0
