"""DR drill, non-disruptive: proof that the DR side would resume every group right.

The real consumer groups keep running on the source, untouched; nothing moves.
The drill takes each group's committed source positions, translates them
exactly to the target, and commits them to *shadow* groups on the target
(`<prefix><group>`, never the real names). Then, per partition, it reads the
record the real group would read next on the source and the record a consumer
of the shadow group would read first on the target, and checks that they are
the same record: the target record's source-offset header names that source
offset, and key, value, timestamp and the application's own headers are equal
(`replicator.procedures.drill_check`).
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
from dataclasses import asdict
from typing import Any

from confluent_kafka import KafkaError, TopicPartition

from replicator.acls.plan import DRILL_SHADOW_PREFIX
from replicator.config.model import FlowConfig, ReplicatorConfig
from replicator.engine.status import live_workers
from replicator.engine.topic_sync import TopicSync
from replicator.errors import ReplicatorError
from replicator.kafka.clients import admin_for
from replicator.kafka.coordinator import UNEXPIRED_S
from replicator.kafka.errors import error_code, error_text
from replicator.offsets.checkpoints import Checkpointer
from replicator.offsets.groups import GroupAdmin
from replicator.offsets.translation import PartitionReader, TargetIndex, Translation, translate
from replicator.procedures.drill_check import FAILING, DrillPosition, PartitionCheck, ShadowCheck
from replicator.procedures.positions import progress
from replicator.procedures.steps import Procedure, Step, StepReport
from replicator.statestore import StateStore

#: Commit metadata of shadow groups: marks them as a drill's, so a drill never
#: overwrites or deletes a group it did not write.
SHADOW_METADATA = "replicator drill"
_POLL_S = 0.5
_ADMIN_TIMEOUT_S = 30.0


class Drill(Procedure):
    """Non-disruptive DR drill of `groups` over `flow` ("A->B"): translate, commit to
    shadow groups on B, check record by record, clean up, give the verdict."""

    kind = "drill"
    recovery_step = "commit_shadow"

    #: Always set here (Procedure's default is None).
    timeout_s: float

    def __init__(
        self,
        config: ReplicatorConfig,
        flow: str,
        groups: list[str],
        store: StateStore,
        *,
        shadow_prefix: str = DRILL_SHADOW_PREFIX,
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
        topics = set(TopicSync(self.flow).replicated_topics())
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
        source = PartitionReader(self.source)
        target = PartitionReader(self.target)
        try:
            checker = ShadowCheck(
                (source, target),
                (self.source.alias, self.target.alias),
                self.timeout_s,
                self.dry_run,
            )
            checks = [checker.check(p, shadow_offsets) for p in positions]
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
        # A request timeout never shorter than the wait (see `UNEXPIRED_S`).
        futures = admin.delete_consumer_groups(self._shadows(), request_timeout=UNEXPIRED_S)
        for shadow, future in futures.items():
            try:
                future.result(timeout=_ADMIN_TIMEOUT_S)
            except TimeoutError:
                raise ReplicatorError(
                    f"shadow group {shadow} on {self.target.alias!r}: no answer to its "
                    f"deletion within {_ADMIN_TIMEOUT_S:.0f} s; retry with the same id once "
                    "the cluster answers"
                ) from None
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
