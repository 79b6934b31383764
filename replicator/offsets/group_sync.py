"""MM2's `sync.group.offsets`: checkpointed positions committed to the same groups on
the target, only to groups without active members there and only forwards.

A checkpoint round hands every exact position it has to `GroupOffsetSync.sync`. What
costs is reading each target group's offsets (a client and a few round trips to its
coordinator a group), so a group whose positions did not change since this object
last synced it is left alone, and looked at again only every `RECHECK_ROUNDS`
rounds (an operator may have reset it on the target meanwhile). Active groups are
found in one request per coordinator, and so are groups the target does not know
(nothing committed: not read); the groups to read are read several at once.
"""

from __future__ import annotations

from concurrent.futures import Future

from confluent_kafka import TopicPartition

from replicator.engine.formats import Checkpoint
from replicator.errors import ReplicatorError
from replicator.offsets.groups import GroupAdmin

#: An unchanged group is read on the target again after this many rounds.
RECHECK_ROUNDS = 10

Positions = frozenset[tuple[str, int, int]]  # (target topic, partition, target offset)


class GroupOffsetSync:
    """Commits checkpointed positions to the idle target groups, forwards only."""

    def __init__(self, target: GroupAdmin) -> None:
        self._target = target
        #: Per group: the positions last synced, and rounds since it was read.
        self._synced: dict[str, tuple[Positions, int]] = {}
        self._prepared = False
        #: The target's pending answers about the groups (`prepare`).
        self._asked: list[Future[object]] | None = None
        #: Why the target's last answer about the groups failed (None: none failed).
        self._unanswered: str | None = None

    def close(self) -> None:
        self._target.close()

    def prepare(self, groups: list[str]) -> bool:
        """Ask the target about the groups, without waiting, until it answers: on a
        target just started the first group call makes the cluster create and load its
        offsets topic (tens of seconds at estate scale), which should happen while the
        copy runs rather than after it. Called every second from the run's start
        (`Checkpointer.warm_up`) and at each round; True once answered. A failed or
        timed-out answer is asked again at once (its error is kept for `sync` to say)."""
        if self._prepared or not groups:
            return self._prepared
        if self._asked is None:
            self._asked = self._target.ask_about(groups)
        try:
            self._prepared = bool(self._target.answered(self._asked))
        except ReplicatorError as exc:
            self._unanswered = str(exc)
            self._asked = self._target.ask_about(groups)
        return self._prepared

    def unchanged(self, group: str) -> bool:
        """True when `group`, whose positions did not change since the caller last
        handed them to `sync`, is left alone this round (counted as one); False when it
        is due to be read again: hand its positions to `sync`."""
        known = self._synced.get(group)
        if known is None or known[1] + 1 >= RECHECK_ROUNDS:
            return False
        self._synced[group] = (known[0], known[1] + 1)
        return True

    def sync(self, checkpoints: list[Checkpoint]) -> tuple[dict[str, int], list[str]]:
        """Commit what moves forward; (partitions committed per group, active groups)."""
        by_group: dict[str, list[Checkpoint]] = {}
        for checkpoint in checkpoints:
            by_group.setdefault(checkpoint.group, []).append(checkpoint)
        if by_group and not self.prepare(sorted(by_group)):
            # A call now would wait out the whole timeout.
            last = f"; its last answer: {self._unanswered}" if self._unanswered else ""
            raise ReplicatorError(
                "the target has not answered about its consumer groups yet (a cluster "
                f"just started creates and loads its offsets topic first){last}"
            )
        due = {}
        for group, wanted in by_group.items():
            positions = frozenset((c.topic, c.partition, c.downstream) for c in wanted)
            synced, rounds = self._synced.get(group, (frozenset(), RECHECK_ROUNDS))
            if positions == synced and rounds + 1 < RECHECK_ROUNDS:
                self._synced[group] = (synced, rounds + 1)
                continue
            due[group] = (wanted, positions)
        idle = self._target.idle(sorted(due))
        active = sorted(set(due) - set(idle))
        for group in active:
            self._synced.pop(group, None)  # looked at again next round
        readable = sorted(idle)
        # A group the target does not know has nothing committed: the first sync of
        # an estate's groups to a fresh target reads none (at 5,000 partitions and 50
        # groups that read was a seventh of the round).
        known = [group for group in readable if idle[group]]
        current = self._target.committed_many(
            known, sorted({(c.topic, c.partition) for g in known for c in due[g][0]})
        )
        forward: dict[str, list[TopicPartition]] = {}
        for group in readable:
            wanted, _ = due[group]
            now = {(c.topic, c.partition): c.offset for c in current.get(group, ())}
            moved = [
                TopicPartition(c.topic, c.partition, c.downstream)
                for c in wanted
                if c.downstream > now.get((c.topic, c.partition), -1)
            ]
            if moved:
                forward[group] = moved
        self._target.commit_many(forward)
        for group in readable:
            self._synced[group] = (due[group][1], 0)
        return {group: len(moved) for group, moved in forward.items()}, active
