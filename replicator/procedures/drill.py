"""DR drill, non-disruptive: proof that the DR side would resume every group right.

The real consumer groups keep running on the source, untouched; nothing moves.
The drill takes each group's committed source positions, translates them
exactly to the target, and commits them to *shadow* groups on the target
(`<prefix><group>`, never the real names). Then, per partition, it reads the
record the real group would read next on the source and the record a consumer
of the shadow group would read first on the target, and checks that they are
the same record: the target record's source-offset header names that source
offset, and key, value, timestamp and the application's own headers are equal.
This is what an unplanned failover at this moment would have given each group,
checked record by record rather than assumed from offsets.

Measured and stored with the run, for auditors: RPO, the records not replicated
when the positions were taken (the flow's lag over all its partitions); RTO,
the seconds from the start of the drill to the end of `commit_shadow` (the time
the DR side needs to have consumers positioned).

The per-partition results are the point of a drill, so a wrong position does
not fail the `check` step itself (its report would be lost to an error
string): `check` saves every partition's result, `cleanup` removes the shadow
groups either way, and `verdict` fails the run naming every partition that
was wrong. The run history then holds both the failure and the evidence.

Shadow groups carry a marker in their commit metadata. A drill only writes
and deletes groups that are empty of members and hold no offsets other than a
drill's, so a real group on the target that happens to have a shadow's name
is refused, never overwritten or deleted.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any, Literal

from confluent_kafka import TIMESTAMP_CREATE_TIME, KafkaError, Message, TopicPartition

from replicator.config.model import FlowConfig, ReplicatorConfig
from replicator.engine.headers import OURS, SOURCE_HEADER, replica_source_offset
from replicator.engine.status import live_workers
from replicator.engine.topic_sync import TopicSync
from replicator.errors import ReplicatorError
from replicator.kafka.clients import admin_for
from replicator.kafka.errors import error_code, error_text
from replicator.offsets.checkpoints import Checkpointer
from replicator.offsets.groups import GroupAdmin
from replicator.offsets.translation import PartitionReader, TargetIndex, Translation, translate
from replicator.procedures.positions import progress
from replicator.procedures.steps import Procedure, Step, StepReport
from replicator.statestore import StateStore

Status = Literal["match", "at_end", "mismatch", "not_replicated"]
#: Statuses that fail the drill: a consumer moved to the target would read the wrong
#: record first, or would skip records that never reached it.
FAILING: frozenset[str] = frozenset({"mismatch", "not_replicated"})
#: Commit metadata of shadow groups: marks them as a drill's, so a drill never
#: overwrites or deletes a group it did not write.
SHADOW_METADATA = "replicator drill"
_POLL_S = 0.5
_ADMIN_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class DrillPosition:
    """One group's committed source position on one partition, and where it is on
    the target (see `replicator.offsets.translation.Translation` for the fields)."""

    group: str
    shadow_group: str
    topic: str
    partition: int
    remote_topic: str
    source_offset: int
    target_offset: int
    exact: bool
    replicated_until: int | None
    missing: int | None
    unreplicated_before: int | None

    @property
    def where(self) -> str:
        return f"group {self.group} {self.topic}[{self.partition}]@{self.source_offset}"


@dataclass(frozen=True)
class PartitionCheck:
    """The verdict on one position: `match` (the shadow group reads the same record
    first as the real group), `at_end` (both have read everything), `mismatch`
    (another record, or none where there is one), `not_replicated` (records the
    group has not read yet, or read already, are missing on the target)."""

    group: str
    shadow_group: str
    topic: str
    partition: int
    remote_topic: str
    source_offset: int
    target_offset: int
    status: Status
    detail: str


class Drill(Procedure):
    """Non-disruptive DR drill of `groups` over `flow` ("A->B"): translate, commit to
    shadow groups on B, check record by record, clean up, give the verdict."""

    kind = "drill"
    recovery_step = "commit_shadow"

    def __init__(
        self,
        config: ReplicatorConfig,
        flow: str,
        groups: list[str],
        store: StateStore,
        *,
        shadow_prefix: str = "drill-",
        keep_shadow: bool = False,
        dry_run: bool = False,
        timeout_s: float = 60.0,
    ) -> None:
        super().__init__(store, dry_run=dry_run)
        if not shadow_prefix:
            raise ReplicatorError(
                f"drill of {flow}: the shadow prefix is empty, so shadow groups would be the "
                "real groups; a non-disruptive drill never writes those: give a prefix "
                "(--shadow-prefix, default 'drill-')"
            )
        self.flow: FlowConfig = config.flow(flow)
        self.groups = list(dict.fromkeys(groups))
        self.shadow_prefix = shadow_prefix
        self.keep_shadow = keep_shadow
        #: How long `translate` and `check` wait for replication to reach a position.
        self.timeout_s = timeout_s
        self.source, self.target = self.flow.source, self.flow.target

    # -- Procedure -----------------------------------------------------------------

    def steps(self) -> list[Step]:
        return [
            Step("preflight", self._preflight),
            Step("translate", self._translate),
            Step("commit_shadow", self._commit_shadow, self._preview_commit_shadow),
            Step("check", self._check),
            Step("cleanup", self._cleanup, self._preview_cleanup),
            Step("verdict", self._verdict),
        ]

    def params(self) -> dict[str, Any]:
        return {
            "flow": self.flow.name,
            "groups": self.groups,
            "shadow_prefix": self.shadow_prefix,
            "keep_shadow": self.keep_shadow,
            "timeout_s": self.timeout_s,
        }

    def flow_name(self) -> str:
        return self.flow.name

    def mode(self) -> str:
        return "non-disruptive"

    def rpo(self) -> int | None:
        """Records of the flow not on the target when the positions were taken."""
        report = self.reported("translate")
        return None if report is None else int(report["rpo_records"])

    def leases(self) -> list[str]:
        """None: a non-disruptive drill writes only its shadow groups, so it changes
        nothing another procedure relies on, and it must never delay a failover."""
        return []

    def shadow_group(self, group: str) -> str:
        return f"{self.shadow_prefix}{group}"

    # -- preflight -------------------------------------------------------------------

    def _preflight(self) -> StepReport:
        """Both clusters answer, the flow replicates (a drill measures a running
        flow), every group has positions on the flow's topics, and no shadow name
        is taken on the target by a group that is not a drill's."""
        workers = [w.worker for w in live_workers(self.flow)]
        if not workers:
            raise ReplicatorError(
                f"flow {self.flow.name} has no running worker, so the drill would measure a "
                "stopped copy; start `replicator run` for it (and check that its desired "
                "state in the state store is running)"
            )
        source = GroupAdmin(self.source)
        topics = set(TopicSync(self.flow, self.flow.policy).replicated_topics())
        groups = self._groups(source, topics)
        target = GroupAdmin(self.target)
        for group in groups:
            self._check_shadow_is_ours(target, self.shadow_group(group))
        return {
            "source": self.source.alias,
            "target": self.target.alias,
            "workers": workers,
            "groups": groups,
            "shadow_groups": [self.shadow_group(g) for g in groups],
        }

    def _groups(self, source: GroupAdmin, topics: set[str]) -> list[str]:
        """The groups asked for, each with positions on the flow's topics; or, when
        none were named, every group the flow checkpoints that has such positions."""
        if self.groups:
            for group in self.groups:
                if not any(c.topic in topics for c in source.committed(group)):
                    raise ReplicatorError(
                        f"group {group} has no committed offsets on the topics of flow "
                        f"{self.flow.name} on {self.source.alias!r}; name groups that consume "
                        "them, or none to drill every group the flow checkpoints"
                    )
            return self.groups
        with Checkpointer(self.flow) as checkpointer:
            candidates = checkpointer.groups()
        groups = [g for g in candidates if any(c.topic in topics for c in source.committed(g))]
        if not groups:
            raise ReplicatorError(
                f"flow {self.flow.name}: no group on {self.source.alias!r} that its groups "
                "filter admits has committed offsets on its topics; name the groups to drill"
            )
        return groups

    def _check_shadow_is_ours(self, target: GroupAdmin, shadow: str) -> None:
        foreign = [
            f"{c.topic}[{c.partition}]@{c.offset}"
            for c in target.committed(shadow)
            if not c.metadata.startswith(SHADOW_METADATA)
        ]
        if foreign:
            raise ReplicatorError(
                f"group {shadow} exists on {self.target.alias!r} with offsets no drill wrote "
                f"({', '.join(foreign[:5])}); it may be a real group, which a drill never "
                "touches: choose another shadow prefix (--shadow-prefix)"
            )

    # -- translate ---------------------------------------------------------------------

    def _translate(self) -> StepReport:
        """Every group's committed positions, translated exactly. A position whose
        earlier records are still on their way is translated again until they are
        there (the flow is running) or `timeout_s` passes: then it stays inexact and
        `check` reports it as not replicated."""
        groups = self.report("preflight")["groups"]
        started = time.monotonic()
        with TargetIndex(self.target, self.source.alias) as index:
            behind = progress(self.flow, index)  # RPO: before anything else moves
        positions: list[DrillPosition] = []
        with Checkpointer(self.flow) as checkpointer:
            for group in groups:
                positions += [
                    self._position(group, p.translation)
                    for p in checkpointer.translate_group(group)
                ]
        positions = self._catch_up(positions, started + self.timeout_s)
        return {
            "rpo_records": sum(p.behind for p in behind),
            "lag": {p.where: p.behind for p in behind if p.behind},
            "partitions": [asdict(p) for p in positions],
            "inexact": sum(1 for p in positions if not p.exact),
            "seconds": round(time.monotonic() - started, 3),
        }

    def _position(self, group: str, t: Translation) -> DrillPosition:
        return DrillPosition(
            group=group,
            shadow_group=self.shadow_group(group),
            topic=t.topic,
            partition=t.partition,
            remote_topic=t.remote_topic,
            source_offset=t.source_offset,
            target_offset=t.target_offset,
            exact=t.exact,
            replicated_until=t.replicated_until,
            missing=t.missing,
            unreplicated_before=t.unreplicated_before,
        )

    def _catch_up(self, positions: list[DrillPosition], deadline: float) -> list[DrillPosition]:
        """Translate the same source offsets again while some are inexact."""
        source = GroupAdmin(self.source)
        reader = PartitionReader(self.source)
        try:
            with TargetIndex(self.target, self.source.alias) as index:
                while any(not p.exact for p in positions) and time.monotonic() < deadline:
                    time.sleep(_POLL_S)
                    inexact = [p for p in positions if not p.exact]
                    ends = source.end_offsets([(p.topic, p.partition) for p in inexact])
                    again = {
                        id(p): self._position(
                            p.group,
                            translate(
                                index,
                                p.topic,
                                p.partition,
                                p.remote_topic,
                                p.source_offset,
                                source=(reader, ends[p.topic, p.partition]),
                            ),
                        )
                        for p in inexact
                    }
                    positions = [again.get(id(p), p) for p in positions]
        finally:
            reader.close()
        return positions

    def _positions(self) -> list[DrillPosition]:
        return [DrillPosition(**p) for p in self.report("translate")["partitions"]]

    # -- commit_shadow -------------------------------------------------------------------

    def _commit_shadow(self) -> StepReport:
        """Commit the translated positions to the shadow groups on the target (the
        real groups are not written on either cluster). Idempotent: the same offsets
        are committed again on a retry."""
        target = GroupAdmin(self.target)
        by_shadow = _by_shadow(self._positions())
        marker = f"{SHADOW_METADATA} {self.procedure_id}"
        for shadow, positions in by_shadow.items():
            self._check_shadow_is_ours(target, shadow)
            if not target.is_idle(shadow):
                raise ReplicatorError(
                    f"shadow group {shadow} has active members on {self.target.alias!r}, so "
                    "its offsets cannot be set; stop the consumers using it (or choose another "
                    "--shadow-prefix) and retry with the same id"
                )
            wanted = [
                TopicPartition(p.remote_topic, p.partition, p.target_offset, metadata=marker)
                for p in positions
            ]
            self._commit(target, shadow, wanted)
        return {"shadow_groups": _commits(by_shadow)}

    def _commit(self, target: GroupAdmin, shadow: str, wanted: list[TopicPartition]) -> None:
        """Commit, again while the group coordinator is still loading (a retriable
        error, common right after a broker start or a coordinator move)."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                target.commit(shadow, wanted)
                return
            except ReplicatorError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(_POLL_S)

    def _preview_commit_shadow(self) -> StepReport:
        return {"would_commit": _commits(_by_shadow(self._positions()))}

    # -- check -----------------------------------------------------------------------------

    def _check(self) -> StepReport:
        """Per partition, the record the real group reads next on the source against
        the record the shadow group reads first on the target. Read-only; a dry run
        checks the positions `commit_shadow` would have committed."""
        positions = self._positions()
        shadow_offsets = {} if self.dry_run else self._shadow_offsets(positions)
        deadline = time.monotonic() + self.timeout_s
        source = PartitionReader(self.source)
        target = PartitionReader(self.target)
        try:
            checks = [
                self._check_one(p, shadow_offsets, source, target, deadline) for p in positions
            ]
        finally:
            source.close()
            target.close()
        counts: dict[str, int] = defaultdict(int)
        for check in checks:
            counts[check.status] += 1
        return {
            "partitions": [asdict(c) for c in checks],
            "counts": dict(counts),
            "failing": sum(1 for c in checks if c.status in FAILING),
        }

    def _shadow_offsets(self, positions: list[DrillPosition]) -> dict[tuple[str, str, int], int]:
        """(shadow group, remote topic, partition) -> offset committed on the target now."""
        admin = GroupAdmin(self.target)
        return {
            (shadow, c.topic, c.partition): c.offset
            for shadow in sorted({p.shadow_group for p in positions})
            for c in admin.committed(shadow)
        }

    def _check_one(
        self,
        p: DrillPosition,
        shadow_offsets: dict[tuple[str, str, int], int],
        source: PartitionReader,
        target: PartitionReader,
        deadline: float,
    ) -> PartitionCheck:
        problem = self._position_problem(p, shadow_offsets)
        if problem is None:
            status, detail = self._compare(p, source, target, deadline)
            offset = p.target_offset
        else:
            status, detail, offset = problem
        return PartitionCheck(
            p.group,
            p.shadow_group,
            p.topic,
            p.partition,
            p.remote_topic,
            p.source_offset,
            offset,
            status,
            detail,
        )

    def _position_problem(
        self, p: DrillPosition, shadow_offsets: dict[tuple[str, str, int], int]
    ) -> tuple[Status, str, int] | None:
        """A position wrong before any record is read: translated over a gap, or
        the shadow group is not where the drill put it."""
        remote = f"{p.remote_topic}[{p.partition}]"
        if not p.exact:
            return (
                "not_replicated",
                f"{p.unreplicated_before} records before source offset {p.source_offset} "
                f"were not on {self.target.alias!r} (replicated until {p.replicated_until}): "
                f"a consumer moved there would skip them ({p.missing} records from the "
                "position on were not there either)",
                p.target_offset,
            )
        if self.dry_run:
            return None
        committed = shadow_offsets.get((p.shadow_group, p.remote_topic, p.partition))
        if committed is None:
            return (
                "mismatch",
                f"shadow group {p.shadow_group} has no offset on {remote}",
                p.target_offset,
            )
        if committed != p.target_offset:
            return (
                "mismatch",
                f"shadow group {p.shadow_group} is at {committed} on {remote}, not at "
                f"{p.target_offset} as committed by the drill; was it moved?",
                committed,
            )
        return None

    def _compare(
        self, p: DrillPosition, source: PartitionReader, target: PartitionReader, deadline: float
    ) -> tuple[Status, str]:
        """Read the group's next record on the source and the shadow group's first on
        the target, and compare them; look again while the flow is still bringing
        the record (or a record was produced between the two reads)."""
        remote = f"{p.remote_topic}[{p.partition}]"
        local = f"{p.topic}[{p.partition}]"
        offset = p.target_offset
        while True:
            wanted = _first_record(source, p.topic, p.partition, p.source_offset)
            found = _first_record(target, p.remote_topic, p.partition, offset)
            if wanted is not None and found is not None:
                differences = _differences(wanted, found, self.source.alias.encode())
                pair = f"{remote}@{found.offset()}", f"{local}@{wanted.offset()}"
                if differences:
                    listed = "; ".join(differences)
                    return "mismatch", f"{pair[0]} is not the record at {pair[1]}: {listed}"
                return "match", f"{pair[0]} is the record at {pair[1]}"
            if wanted is None and found is None:
                return self._at_end(p, target)
            if time.monotonic() >= deadline:
                if wanted is not None:
                    return (
                        "not_replicated",
                        f"the group's next record, {local}@{wanted.offset()}, did not reach "
                        f"{remote} within {self.timeout_s:g}s (the flow is behind)",
                    )
                assert found is not None
                return (
                    "mismatch",
                    f"{remote}@{found.offset()} holds a record although the group has read "
                    f"everything on {local} from {p.source_offset}: the position is too early",
                )
            time.sleep(_POLL_S)

    def _at_end(self, p: DrillPosition, target: PartitionReader) -> tuple[Status, str]:
        """The group has read everything: the shadow position must be the end of the
        replicated data, not past the partition's end (a consumer would reset)."""
        remote = f"{p.remote_topic}[{p.partition}]"
        _, end = target.bounds(p.remote_topic, p.partition)
        if p.target_offset > end:
            return (
                "mismatch",
                f"the group has read everything, but the position {p.target_offset} is beyond "
                f"the end of {remote} ({end}): a consumer there would reset its offset",
            )
        return (
            "at_end",
            f"the group has read everything on {p.topic}[{p.partition}], and {remote} has no "
            f"replicated record at or after {p.target_offset}",
        )

    # -- cleanup -----------------------------------------------------------------------------

    def _shadows(self) -> list[str]:
        return list(self.report("preflight")["shadow_groups"])

    def _cleanup(self) -> StepReport:
        """Delete the shadow groups (unless kept for inspection). Idempotent: a group
        already gone counts as deleted; a group holding offsets no drill wrote is
        left alone."""
        if self.keep_shadow:
            return {"kept": self._shadows(), "deleted": []}
        target = GroupAdmin(self.target)
        for shadow in self._shadows():
            self._check_shadow_is_ours(target, shadow)
        admin = admin_for(self.target)
        futures = admin.delete_consumer_groups(self._shadows(), request_timeout=_ADMIN_TIMEOUT_S)
        for shadow, future in futures.items():
            try:
                future.result(timeout=_ADMIN_TIMEOUT_S)
            except Exception as exc:
                if error_code(exc) == KafkaError.GROUP_ID_NOT_FOUND:
                    continue  # deleted before: a retry
                raise ReplicatorError(
                    f"shadow group {shadow} on {self.target.alias!r} not deleted: "
                    f"{error_text(exc)}; if "
                    "consumers use it, stop them, then retry with the same id (or delete it "
                    "with `kafka-consumer-groups --delete --group`)"
                ) from exc
        return {"kept": [], "deleted": self._shadows()}

    def _preview_cleanup(self) -> StepReport:
        key = "would_keep" if self.keep_shadow else "would_delete"
        return {key: self._shadows()}

    # -- verdict -----------------------------------------------------------------------------

    def _verdict(self) -> StepReport:
        """Fail the drill if any position was wrong, naming each; the per-partition
        results stay in the `check` step's report in the run history."""
        checks = [PartitionCheck(**c) for c in self.report("check")["partitions"]]
        failing = [c for c in checks if c.status in FAILING]
        if failing:
            listed = "; ".join(
                f"group {c.group} {c.topic}[{c.partition}]@{c.source_offset} -> "
                f"{c.remote_topic}[{c.partition}]@{c.target_offset}: {c.status}: {c.detail}"
                for c in failing
            )
            raise ReplicatorError(
                f"drill of flow {self.flow.name} found {len(failing)} of {len(checks)} "
                f"positions wrong on {self.target.alias!r}: {listed}; a failover now would "
                "resume these groups wrongly. The results are in the run history; after fixing "
                "the cause (`replicator diagnose` for a stopped partition), drill again"
            )
        return {
            "ok": True,
            "positions": len(checks),
            "match": sum(1 for c in checks if c.status == "match"),
            "at_end": sum(1 for c in checks if c.status == "at_end"),
        }


def _by_shadow(positions: list[DrillPosition]) -> dict[str, list[DrillPosition]]:
    grouped: dict[str, list[DrillPosition]] = defaultdict(list)
    for position in positions:
        grouped[position.shadow_group].append(position)
    return dict(grouped)


def _commits(by_shadow: dict[str, list[DrillPosition]]) -> dict[str, list[dict[str, Any]]]:
    return {
        shadow: [
            {
                "remote_topic": p.remote_topic,
                "partition": p.partition,
                "target_offset": p.target_offset,
                "source_offset": p.source_offset,
            }
            for p in positions
        ]
        for shadow, positions in by_shadow.items()
    }


def _first_record(
    reader: PartitionReader, topic: str, partition: int, start: int
) -> Message | None:
    """The first committed record at or after `start` (what a consumer positioned at
    `start` reads first, read_committed), or None at the end. A position before the
    log start reads from the log start."""
    low, end = reader.bounds(topic, partition)
    start = max(start, low)
    if start >= end:
        return None
    return next(iter(reader.messages(topic, partition, start, end)), None)


def _differences(wanted: Message, found: Message, source_alias: bytes) -> list[str]:
    """How the target record differs from the source record (empty: the same).
    Payloads are described by size only: the run history is no place for data."""
    differences = []
    source_offset = replica_source_offset(found.headers(), source_alias)
    if source_offset is None:
        origin = dict(found.headers() or []).get(SOURCE_HEADER)
        differences.append(
            "it was not replicated from "
            f"{source_alias.decode()!r} (source header {origin!r}, or no source offset)"
        )
    elif source_offset != wanted.offset():
        differences.append(f"it carries source offset {source_offset}")
    for name, a, b in (
        ("key", wanted.key(), found.key()),
        ("value", wanted.value(), found.value()),
    ):
        if a != b:
            differences.append(
                f"{name} differs ({_size(a)} on the source, {_size(b)} on the target)"
            )
    (_, wanted_ts), (found_type, found_ts) = wanted.timestamp(), found.timestamp()
    # A target topic with LogAppendTime stamps its own time: nothing to compare.
    if found_type == TIMESTAMP_CREATE_TIME and wanted_ts != found_ts:
        differences.append(
            f"timestamp differs ({wanted_ts} on the source, {found_ts} on the target)"
        )
    wanted_headers, found_headers = _own_headers(wanted), _own_headers(found)
    if wanted_headers != found_headers:
        differences.append(
            f"headers differ ({[n for n, _ in wanted_headers]} on the source, "
            f"{[n for n, _ in found_headers]} on the target)"
        )
    return differences


def _own_headers(message: Message) -> list[tuple[str, bytes | None]]:
    """The application's headers, without the replication headers."""
    return [(n, v) for n, v in message.headers() or [] if n not in OURS]


def _size(payload: bytes | None) -> str:
    return "null" if payload is None else f"{len(payload)} bytes"
