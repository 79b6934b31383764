"""`GroupOffsetSync`: idle target groups get the checkpointed positions, forwards only,
and a group whose positions did not change is not read again every round."""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition

from replicator.engine.formats import Checkpoint
from replicator.errors import ReplicatorError
from replicator.offsets.checkpoints import Checkpointer, CheckpointReport
from replicator.offsets.group_sync import RECHECK_ROUNDS, GroupOffsetSync
from replicator.offsets.groups import Committed


class _Target:
    """A target cluster's groups: their committed offsets, and which have members."""

    def __init__(self, active: set[str] = frozenset()) -> None:
        self.offsets: dict[str, dict[tuple[str, int], int]] = {}
        self.active = set(active)
        self.reads = 0

    def ask_about(self, groups: list[str]) -> list[str]:
        return groups

    def answered(self, asked: list[str]) -> bool:
        return True

    def idle(self, groups: list[str]) -> dict[str, bool]:
        """Idle groups, each with whether the target knows it (has committed)."""
        return {g: g in self.offsets for g in groups if g not in self.active}

    def committed_many(
        self, groups: list[str], partitions: list[tuple[str, int]]
    ) -> dict[str, list[Committed]]:
        self.reads += len(groups)
        return {
            g: [Committed(t, p, o) for (t, p), o in self.offsets.get(g, {}).items()] for g in groups
        }

    def commit_many(self, positions: dict[str, list[TopicPartition]]) -> None:
        for group, moved in positions.items():
            for tp in moved:
                self.offsets.setdefault(group, {})[tp.topic, tp.partition] = tp.offset


def _at(group: str, offset: int, partition: int = 0) -> Checkpoint:
    return Checkpoint(group, "primary.orders", partition, offset, offset)


def test_idle_groups_move_forward_and_active_ones_are_left_alone() -> None:
    target = _Target(active={"busy"})
    target.offsets["app"] = {("primary.orders", 1): 90}
    sync = GroupOffsetSync(target)  # type: ignore[arg-type]
    synced, active = sync.sync([_at("app", 50), _at("app", 40, 1), _at("busy", 7)])
    assert (synced, active) == ({"app": 1}, ["busy"])
    assert target.offsets["app"] == {("primary.orders", 0): 50, ("primary.orders", 1): 90}
    assert "busy" not in target.offsets


def test_an_unchanged_group_is_read_again_only_every_few_rounds() -> None:
    target = _Target()
    target.offsets["app"] = {}  # known to the target, nothing committed
    sync = GroupOffsetSync(target)  # type: ignore[arg-type]
    sync.sync([_at("app", 50)])
    assert target.reads == 1
    for _ in range(RECHECK_ROUNDS - 1):
        assert sync.sync([_at("app", 50)]) == ({}, [])
    assert target.reads == 1
    target.offsets["app"] = {}  # reset by an operator on the target meanwhile
    assert sync.sync([_at("app", 50)]) == ({"app": 1}, [])
    assert target.reads == 2


def test_a_group_the_target_does_not_know_is_synced_without_a_read() -> None:
    target = _Target()
    sync = GroupOffsetSync(target)  # type: ignore[arg-type]
    assert sync.sync([_at("app", 50), _at("app", 40, 1)]) == ({"app": 2}, [])
    assert target.reads == 0
    assert target.offsets["app"] == {("primary.orders", 0): 50, ("primary.orders", 1): 40}


def test_a_group_that_moved_is_synced_in_the_next_round() -> None:
    target = _Target()
    sync = GroupOffsetSync(target)  # type: ignore[arg-type]
    sync.sync([_at("app", 50)])
    assert sync.sync([_at("app", 80)]) == ({"app": 1}, [])
    assert target.offsets["app"][("primary.orders", 0)] == 80


def test_an_active_group_is_looked_at_again_next_round() -> None:
    target = _Target(active={"app"})
    sync = GroupOffsetSync(target)  # type: ignore[arg-type]
    assert sync.sync([_at("app", 50)]) == ({}, ["app"])
    target.active.clear()
    assert sync.sync([_at("app", 50)]) == ({"app": 1}, [])


def test_a_group_left_unchanged_by_the_caller_is_due_every_few_rounds() -> None:
    """The checkpointer does not translate a group that committed nothing new: it asks
    `unchanged`, and hands the group's stored positions over only when it is due."""
    target = _Target()
    sync = GroupOffsetSync(target)  # type: ignore[arg-type]
    assert not sync.unchanged("app")  # never synced: due
    sync.sync([_at("app", 50)])
    due = [not sync.unchanged("app") for _ in range(RECHECK_ROUNDS)]
    assert due == [False] * (RECHECK_ROUNDS - 1) + [True]
    target.offsets["app"] = {}  # reset by an operator on the target meanwhile
    assert sync.sync([_at("app", 50)]) == ({"app": 1}, [])
    assert target.reads == 1  # the first sync found the group unknown: nothing to read


def test_a_failed_group_sync_leaves_the_rounds_checkpoints_standing() -> None:
    """A target whose group coordinator is still loading refuses group calls: the
    round's checkpoints stand, the failure is reported, and the groups stay due."""

    class _Refusing:
        def unchanged(self, group: str) -> bool:
            return False

        def sync(self, checkpoints: list[Checkpoint]) -> tuple[dict[str, int], list[str]]:
            raise ReplicatorError("cluster 'dr' group 'app': Local: Timed out")

    checkpointer = object.__new__(Checkpointer)  # only its group-sync step is exercised
    report = CheckpointReport("primary->dr")
    checkpointer._sync_groups(_Refusing(), [_at("app", 50)], {}, report)  # type: ignore[arg-type]
    assert report.group_sync_errors == ["cluster 'dr' group 'app': Local: Timed out"]
    assert report.synced_groups == {}


def test_the_target_is_asked_about_the_groups_once_before_anything_is_synced() -> None:
    """Asked without waiting; a failed answer is asked again at once, and said by the
    sync that cannot go on."""
    target = _Target()
    asked: list[list[str]] = []
    answers: list[bool | Exception | None] = [
        None,
        None,
        ReplicatorError("no answer"),
        None,
        True,
    ]

    def ask_about(groups: list[str]) -> list[str]:
        asked.append(groups)
        return groups

    def answered(_futures: object) -> bool | None:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    target.ask_about = ask_about  # type: ignore[attr-defined]
    target.answered = answered  # type: ignore[attr-defined]
    sync = GroupOffsetSync(target)  # type: ignore[arg-type]
    assert not sync.prepare(["app", "other"])  # asked, pending
    with pytest.raises(ReplicatorError, match="not answered"):
        sync.sync([_at("app", 50)])  # a call now would wait out the whole timeout
    assert not sync.prepare(["app", "other"])  # failed: asked again at once
    with pytest.raises(ReplicatorError, match="its last answer: no answer"):
        sync.sync([_at("app", 50)])
    assert sync.prepare(["app", "other"])  # answered
    assert sync.prepare(["app", "other"])  # done: not asked again
    assert asked == [["app", "other"], ["app", "other"]]
    assert sync.sync([_at("app", 50)]) == ({"app": 1}, [])
