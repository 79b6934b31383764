"""Moving consumer groups from one cluster to the other: where each group goes,
committing it there, and checking that it points at the right record.

Failover moves groups from a flow's source to its target (the remote topics);
failback moves them back, both from the target's own topics (through the
reverse flow) and from the remote topics (to the original topics). Every move
is a `GroupMove`: the group's position on the cluster it leaves and the
position it gets on the cluster it goes to.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

from confluent_kafka import TopicPartition

from replicator.engine.tail import Replica
from replicator.errors import ReplicatorError
from replicator.offsets.groups import GroupAdmin
from replicator.offsets.replica_reads import first_replicas
from replicator.offsets.translation import TargetIndex, Translation


class Position(NamedTuple):
    """One translated position: where a group is, and where that is on the other side."""

    from_topic: str
    partition: int
    from_offset: int
    to_topic: str
    to_offset: int
    #: Not on `to_topic` yet (a dry run only: a real run waits until it is, or stops):
    #: the record at `to_offset` is not the one to check; replication moves it on.
    pending: bool = False

    @classmethod
    def of(cls, t: Translation) -> Position:
        """Where a translated source position is on the target (pending when the
        translation is not exact: a dry run's)."""
        return cls(
            t.topic, t.partition, t.source_offset, t.remote_topic, t.target_offset,
            pending=not t.exact,
        )  # fmt: skip


#: What a step reports: group -> its moves as plain dicts.
MovesByGroup = dict[str, list[dict[str, Any]]]


@dataclass(frozen=True)
class GroupMove:
    """One group position moved: where it was, where it goes, what the group had
    there before, and whether it is written (never backwards)."""

    group: str
    partition: int
    from_topic: str
    from_offset: int
    to_topic: str
    to_offset: int
    previous: int | None
    committed: bool
    #: See `Position.pending`.
    pending: bool = False


def plan_moves(to: GroupAdmin, group: str, positions: list[Position]) -> list[GroupMove]:
    """`group`'s translated positions against what it has committed on `to`."""
    current = {(c.topic, c.partition): c.offset for c in to.committed(group)}
    moves = []
    for p in positions:
        previous = current.get((p.to_topic, p.partition))
        forward = previous is None or previous < p.to_offset
        moves.append(
            GroupMove(
                group,
                p.partition,
                p.from_topic,
                p.from_offset,
                p.to_topic,
                p.to_offset,
                previous,
                forward,
                p.pending,
            )
        )
    return moves


def commit_moves(
    to: GroupAdmin, alias: str, moves: list[GroupMove], still_held: Callable[[str], None]
) -> MovesByGroup:
    """Commit the forward moves, group by group; a group with active members on `to`
    cannot be set (its consumers would overwrite it) and stops the step.
    `still_held(what)` raises unless the step still holds its leases (the store's
    `check_guards`): a Kafka commit cannot join the store's transaction, so each
    group's is preceded by that check (and is idempotent: the same positions)."""
    grouped = by_group(moves)
    for group in grouped:
        still_held(f"moving group {group!r} on {alias!r}")
        if not to.is_idle(group):
            raise ReplicatorError(
                f"group {group} has active members on {alias!r}, so its offsets cannot be "
                "set; stop its consumers there (or fence the application) and retry with "
                "the same id"
            )
        wanted = [
            TopicPartition(m.to_topic, m.partition, m.to_offset)
            for m in moves
            if m.group == group and m.committed
        ]
        if wanted:
            to.commit(group, wanted)
    return grouped


def by_group(moves: list[GroupMove]) -> MovesByGroup:
    grouped: MovesByGroup = defaultdict(list)
    for move in moves:
        entry = asdict(move)
        del entry["group"]
        grouped[move.group].append(entry)
    return dict(grouped)


def verify_moves(
    to: GroupAdmin,
    alias: str,
    moves: MovesByGroup,
    same_record: Callable[[dict[str, Any]], str | None],
    *,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Each moved position points at the record after the group's last processed one
    (`same_record` says what is wrong with a move, or None), and each committed one
    is in place on `to` (a group that consumed on since is at or after it). A dry
    run's positions not replicated yet are counted, not checked: the flow still
    copies towards them, so the record at their offset changes under the check."""
    problems, checked, pending = [], 0, 0
    for group, entries in moves.items():
        now = {(c.topic, c.partition): c.offset for c in to.committed(group)}
        for entry in entries:
            if entry.get("pending"):
                pending += 1
                continue
            checked += 1
            where = f"group {group} {entry['to_topic']}[{entry['partition']}]"
            wrong = same_record(entry)
            if wrong:
                problems.append(f"{where}: {wrong}")
            position = now.get((entry["to_topic"], entry["partition"]))
            if (
                not dry_run
                and entry["committed"]
                and (position is None or position < entry["to_offset"])
            ):
                problems.append(f"{where} is at {position}, behind {entry['to_offset']}")
    if problems:
        raise ReplicatorError(
            f"verification failed: {'; '.join(problems)}; check these groups on {alias!r} "
            "(`kafka-consumer-groups --describe`) before the applications process more"
        )
    checks: dict[str, Any] = {"positions_checked": checked, "ok": True}
    if pending:
        checks["positions_not_replicated_yet"] = pending
    return checks


class CopyCheck:
    """For moves onto copies (`to_topic` holds replicas of `from_topic`): what is wrong
    with the record at each new position, or None. Right is the first replica whose
    source offset is `>= from_offset` (the group's position may be a transaction
    marker's, whose record is the next one): the replica there carries
    `from_offset`, or a later one with the replica before it carrying an earlier one
    (or none: the first of ours, after MirrorMaker 2's copies of a partition taken
    over). At the end of the copies (no replica there) nothing was replicated after
    the group's position. The records at every position are read at once
    (`first_replicas`), one position per partition per read."""

    def __init__(self, index: TargetIndex, moves: MovesByGroup) -> None:
        self._index = index
        wanted = {
            _key(entry)
            for entries in moves.values()
            for entry in entries
            if not entry.get("pending")
        }
        self._found: dict[tuple[str, int, int, int], Replica | None] = {}
        by_partition: dict[tuple[str, int], list[int]] = {}
        for topic, partition, to_offset, _ in wanted:
            by_partition.setdefault((topic, partition), []).append(to_offset)
        at: dict[tuple[str, int, int], Replica | None] = {}
        while by_partition:  # one position per partition a read
            starts = {where: offsets.pop() for where, offsets in by_partition.items()}
            found = first_replicas(index.target, index.source_alias, starts)
            at.update({(*where, offset): found[where] for where, offset in starts.items()})
            by_partition = {where: rest for where, rest in by_partition.items() if rest}
        self._found = {key: at[key[:3]] for key in wanted}

    def __call__(self, move: dict[str, Any]) -> str | None:
        key = _key(move)
        replica = self._found[key] if key in self._found else self._index.replica_at(*key[:3])
        wanted = move["from_offset"]
        if replica is None or replica.source_offset == wanted:
            return None
        if replica.source_offset > wanted:
            before = self._index.last_replica(key[0], key[1], end=replica.target_offset)
            if before is None or before.source_offset < wanted:
                return None
        return (
            f"offset {move['to_offset']} holds the copy of {move['from_topic']}@"
            f"{replica.source_offset}, not the first at or after @{wanted}"
        )


def _key(move: dict[str, Any]) -> tuple[str, int, int, int]:
    return move["to_topic"], move["partition"], move["to_offset"], move["from_offset"]


def original_mismatch(index: TargetIndex, move: dict[str, Any]) -> str | None:
    """For a move off copies back to the originals (`from_topic` holds replicas of
    `to_topic`): what is wrong with the new position, or None. The copy the group
    was at carries the source offset it must resume at; past the last copy there
    is nothing to compare (the origin may hold records never copied)."""
    replica = index.replica_at(move["from_topic"], move["partition"], move["from_offset"])
    if replica is not None and replica.source_offset != move["to_offset"]:
        return (
            f"the group was at the copy of {move['to_topic']}@{replica.source_offset}, "
            f"but is moved to @{move['to_offset']}"
        )
    return None
