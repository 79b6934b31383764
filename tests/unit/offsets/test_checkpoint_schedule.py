"""`CheckpointLoop`'s schedule (issue 41): the target is asked about the groups from
the first tick, before any round, and a round that held positions back (their
records were still being copied) is followed by the next one soon, not an interval
later. Fakes stand in for the checkpointer; the clusters' side is in
tests/integration/offsets."""

from __future__ import annotations

import itertools
import threading
import time
from types import SimpleNamespace

import pytest

from replicator.engine.written_runs import written_runs
from replicator.offsets import checkpoint_loop
from replicator.offsets.checkpoint_loop import EARLY_LOOK_S, HELD_RECHECK_S, CheckpointLoop
from replicator.offsets.checkpoints import CheckpointReport


class _Checkpointer:
    """Answers `warm_up` False until told, and rounds that leave `left` partitions."""

    made = 0

    def __init__(self, flow: SimpleNamespace) -> None:
        type(self).made += 1
        self.warmed = 0
        self.ready = False
        #: The partitions each round leaves (positions held, or not reached).
        self.left: set[tuple[str, int]] = set()
        #: Positions each round holds back: (partition, source offset).
        self.held: list[tuple[tuple[str, int], int]] = []
        #: Each round's partitions and whether it caught up on the round before's.
        self.rounds: list[tuple[set[tuple[str, int]], bool]] = []

    def warm_up(self) -> bool:
        self.warmed += 1
        return self.ready

    def list_topics(self) -> list[str]:
        return []

    def emit(self, partitions: set[tuple[str, int]], *, catch_up: bool = False) -> CheckpointReport:
        self.rounds.append((set(partitions), catch_up))
        report = CheckpointReport("primary->dr", catch_up=catch_up)
        report.partitions = len(partitions)
        report.left = self.left & partitions
        for (topic, partition), offset in self.held:
            report.held.append(
                SimpleNamespace(translation=SimpleNamespace(
                    topic=topic, partition=partition, source_offset=offset
                ))  # type: ignore[arg-type]
            )  # fmt: skip
            report.left.add((topic, partition))
        return report

    def close(self) -> None:
        pass


#: The flow's partitions, all this process's share.
SHARE = {("orders", p) for p in range(10)}


#: Each test's flow has clusters of its own: what this process wrote is kept per
#: flow and clusters (`written_runs`).
_CLUSTERS = itertools.count()


def _flow(interval: float = 60.0) -> SimpleNamespace:
    at = next(_CLUSTERS)
    return SimpleNamespace(
        name="primary->dr",
        source=SimpleNamespace(bootstrap_servers=f"source-{at}:9092"),
        target=SimpleNamespace(bootstrap_servers=f"target-{at}:9092"),
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
    monkeypatch.setattr(made, "_share_of", lambda flow, checkpointer: set(SHARE))
    made.joined = []  # type: ignore[attr-defined]
    monkeypatch.setattr(made, "_joined", lambda flow, checkpointer: made.joined.append(flow.name))  # type: ignore[attr-defined]
    monkeypatch.setattr(made, "_rounds", _Rounds())
    return made


def test_the_checkpoint_group_is_joined_at_the_first_tick_before_the_first_round(
    loop: CheckpointLoop,
) -> None:
    """Joining takes seconds on a real estate (the group's first rebalance waits the
    broker's `group.initial.rebalance.delay.ms`, 3 s by default): the member joins at
    the first tick, so the first round finds its share assigned rather than waiting."""
    loop.tick()
    assert loop.joined == ["primary->dr"]  # type: ignore[attr-defined]
    assert loop._checkpointers["primary->dr"].rounds == []


def test_a_join_that_fails_does_not_keep_the_target_from_being_asked(
    loop: CheckpointLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The source away at start (its topics cannot be listed to join): the checkpoint
    writer and the target's coordinators are still readied, and the failure is the
    checkpoint group's, as the log and `replicator status` name it."""

    def refused(flow: SimpleNamespace, checkpointer: _Checkpointer) -> None:
        raise RuntimeError("source away")

    monkeypatch.setattr(loop, "_joined", refused)
    loop.tick()
    assert loop._checkpointers["primary->dr"].warmed == 1
    assert loop.health().error == (
        "the checkpoint group of flow primary->dr: RuntimeError: source away"
    )


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


def test_a_round_that_left_partitions_is_followed_by_one_that_catches_up_on_them(
    loop: CheckpointLoop,
) -> None:
    """Positions held, or partitions the copy has not reached: the next round comes
    within seconds and reads those partitions alone; once none is left, the interval
    and a full round again."""
    flow = loop._flows[0]
    checkpointer = loop._checkpointer(flow)
    loop.round(flow)
    assert loop.next_round_in(flow) == 60.0  # nothing left: the interval
    checkpointer.left = {("orders", 3), ("orders", 7)}
    loop.round(flow)
    assert loop.next_round_in(flow) == HELD_RECHECK_S
    loop.round(flow)  # the copy has not reached them yet: again
    assert loop.next_round_in(flow) == HELD_RECHECK_S
    checkpointer.left = set()
    loop.round(flow)
    assert loop.next_round_in(flow) == 60.0
    loop.round(flow)
    assert checkpointer.rounds == [
        (SHARE, False),
        (SHARE, False),
        ({("orders", 3), ("orders", 7)}, True),
        ({("orders", 3), ("orders", 7)}, True),
        (SHARE, False),
    ]
    # Every round says it ended, written or not (a round at rest writes nothing).
    assert len(loop._rounds.published) == 5


def test_catching_up_gives_way_to_a_full_round_an_interval_after_the_last(
    loop: CheckpointLoop,
) -> None:
    """A copy far behind leaves positions held round after round: groups that commit
    elsewhere still get a full round an interval after the last one ended."""
    flow = loop._flows[0]
    checkpointer = loop._checkpointer(flow)
    checkpointer.left = {("orders", 1)}
    loop.round(flow)
    loop.round(flow)
    ended, took = loop._full[flow.name]
    loop._full[flow.name] = (ended - 60.0, took)  # an interval has passed since then
    loop.round(flow)
    loop.round(flow)
    assert [catch_up for _, catch_up in checkpointer.rounds] == [False, True, False, True]


def test_a_round_that_left_nearly_all_partitions_is_followed_by_a_full_round(
    loop: CheckpointLoop,
) -> None:
    """The copy has reached no partition yet: the round after reads the groups on all
    of them, as a full round (which a catch-up may follow for as long as it took);
    left with nine of the ten, a catch-up."""
    flow = loop._flows[0]
    checkpointer = loop._checkpointer(flow)
    checkpointer.left = set(SHARE)
    loop.round(flow)
    loop.round(flow)
    checkpointer.left = set(SHARE) - {("orders", 0)}
    loop.round(flow)
    loop.round(flow)
    assert [catch_up for _, catch_up in checkpointer.rounds] == [False, False, False, True]


def test_the_rest_before_catching_up_follows_what_is_left(loop: CheckpointLoop) -> None:
    """The loop rests a fifth of the time at least: a round that took 20 s and left a
    tenth of its partitions is followed after a second (the catch-up should take 2 s),
    one that left all of them after 5 s."""
    flow = loop._flows[0]
    loop._left[flow.name] = ({("orders", 1)}, 20.0, 10)
    assert loop.next_round_in(flow) == HELD_RECHECK_S
    loop._left[flow.name] = (set(SHARE), 20.0, 10)
    assert loop.next_round_in(flow) == 5.0
    loop._left[flow.name] = (set(SHARE), 400.0, 10)
    assert loop.next_round_in(flow) == 60.0  # never more than the interval


def test_the_catch_up_starts_as_soon_as_the_copy_has_written_a_share_of_what_was_left(
    loop: CheckpointLoop,
) -> None:
    """The catch-up comes when this process's writers have copied `EARLY_SHARE` of
    what the round left (a partition not reached: any record; a held position: every
    record before it), looked for every `EARLY_LOOK_S`, not after its rest, and reads
    those partitions alone; the others wait for the next catch-up. Leftovers that were
    copied before a round began and are left again wait for their rest."""
    flow = loop._flows[0]
    loop.tick()  # the first round is seconds away
    checkpointer = loop._checkpointers[flow.name]
    checkpointer.left = {("orders", 3)}
    checkpointer.held = [(("orders", 5), 50)]
    loop.round(flow)
    loop._due[flow.name] = time.monotonic() + 60.0  # its rest is far from over
    assert loop.pause_s() == EARLY_LOOK_S
    loop.tick()
    assert len(checkpointer.rounds) == 1  # nothing copied yet

    runs = written_runs(flow)  # type: ignore[arg-type]
    for key in (("orders", 3), ("orders", 5)):
        runs.track(key)
    runs.acknowledged(("orders", 5), 0, 48, 49, 48, committed=True)
    loop.tick()
    assert len(checkpointer.rounds) == 1  # offset 49 of orders[5] is not written yet

    runs.acknowledged(("orders", 3), 0, 9, 10, 9, committed=True)
    loop.tick()
    assert checkpointer.rounds[-1] == ({("orders", 3)}, True)  # half of what was left
    assert loop.pause_s() == EARLY_LOOK_S  # orders[5] still waits for the copy
    loop._due[flow.name] = time.monotonic() + 60.0
    loop.tick()
    assert len(checkpointer.rounds) == 2

    runs.acknowledged(("orders", 5), 49, 99, 51, 99, committed=True)
    loop.tick()
    assert checkpointer.rounds[-1] == ({("orders", 5)}, True)
    # Left again although copied: held for another reason, so the rest applies.
    assert loop.pause_s() == loop.tick_s
    loop._due[flow.name] = time.monotonic() + 60.0
    loop.tick()
    assert len(checkpointer.rounds) == 3


def test_a_catch_up_waits_for_a_share_of_what_was_left(loop: CheckpointLoop) -> None:
    """One partition copied of the eight a round left is not worth a round of its own
    (each reads every group's offsets); two are."""
    flow = loop._flows[0]
    loop.tick()
    checkpointer = loop._checkpointers[flow.name]
    checkpointer.left = {("orders", p) for p in range(8)}
    loop.round(flow)
    checkpointer.left = set()
    loop._due[flow.name] = time.monotonic() + 60.0
    runs = written_runs(flow)  # type: ignore[arg-type]
    for p in range(8):
        runs.track(("orders", p))
    runs.acknowledged(("orders", 0), 0, 9, 10, 9, committed=True)
    loop.tick()
    assert len(checkpointer.rounds) == 1
    runs.acknowledged(("orders", 1), 0, 9, 10, 9, committed=True)
    loop.tick()
    assert checkpointer.rounds[-1] == ({("orders", 0), ("orders", 1)}, True)
    assert loop._left[flow.name][0] == {("orders", p) for p in range(2, 8)}


def test_partitions_another_process_copies_wait_for_the_rest_not_for_this_copy(
    loop: CheckpointLoop,
) -> None:
    """With `tasks.max` > 1 a process checkpoints partitions another process copies
    (the checkpoint group's share is not the copy's): this process never sees them
    written, so its early catch-ups read only what it copied itself, and what the other
    process copies is read by the catch-up after the rest, not waited for for good."""
    flow = loop._flows[0]
    loop.tick()
    checkpointer = loop._checkpointers[flow.name]
    ours, theirs = {("orders", 0), ("orders", 1)}, {("orders", 8), ("orders", 9)}
    checkpointer.left = ours | theirs
    loop.round(flow)
    checkpointer.left = theirs  # copied elsewhere by now, but not known here
    runs = written_runs(flow)  # type: ignore[arg-type]
    for key in ours:
        runs.track(key)
    loop._due[flow.name] = time.monotonic() + 60.0
    for key in sorted(ours):
        runs.acknowledged(key, 0, 9, 10, 9, committed=True)
        loop.tick()
        assert checkpointer.rounds[-1] == ({key}, True)
    assert len(checkpointer.rounds) == 3
    assert loop._left[flow.name][0] == theirs
    assert not loop.due_early(flow)  # nothing here will say they were copied
    loop.tick()
    assert len(checkpointer.rounds) == 3
    loop._due[flow.name] = time.monotonic()  # the rest is over
    checkpointer.left = set()
    loop.tick()
    assert checkpointer.rounds[-1] == (theirs, True)
    assert flow.name not in loop._left


def test_a_stop_asked_during_one_flows_step_starts_no_other_flows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each step of a tick may wait out a cluster's timeout (30 s when it is away):
    once `replicator run` is asked to stop, no other flow's step or round starts, so
    the process stops after the step in progress, not after one step per flow (a run
    with a flow whose target was away took 60 s to stop)."""
    monkeypatch.setattr(checkpoint_loop, "Checkpointer", _Checkpointer)
    stop = threading.Event()
    flows = [_flow(), _flow()]
    flows[1].name = "primary->gone"
    loop = CheckpointLoop(flows, stop, lambda: {f.name: True for f in flows})
    monkeypatch.setattr(loop, "_join", lambda flow: None)
    warmed: list[str] = []

    def warm_up(flow: SimpleNamespace) -> None:
        warmed.append(flow.name)
        stop.set()  # SIGTERM while the first flow's target is asked

    monkeypatch.setattr(loop, "_warm_up", warm_up)
    monkeypatch.setattr(loop, "round", lambda flow: pytest.fail("a round after the stop"))
    loop.tick()
    assert warmed == ["primary->dr"]
