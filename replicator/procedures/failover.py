"""Failover of a flow's applications from its source cluster to its target.

Planned (both clusters up): fence the applications so producers and consumers
stop and commit, drain replication to zero lag, stop the flow, write a final
checkpoint, commit every group's exactly translated position to the same
group on the target, move the applications, verify. Nothing is lost and
nothing processed twice (RPO 0).

Unplanned (the source is gone): no fence and no drain are possible. Groups
continue from their last checkpoints on the target, the applications move,
and the report says per partition exactly which source offsets never reached
the target: from the target tail to the last source end the replicator saw.

Consumer groups are named like the applications (the demo apps' convention).

With `grant_write` (opt-in per run), the `grant_write` step gives the
applications' producers WRITE on their topics on the target just before the
switch (`replicator.procedures.write_grants`): ACL sync, as MM2's, never copies
WRITE, so without it they are refused there.
"""

from __future__ import annotations

import time
from typing import Any, Literal, cast

from replicator.acls.grants import write_bindings
from replicator.config.model import FlowConfig, ReplicatorConfig
from replicator.engine.status import PartitionStatus, live_workers, read_status
from replicator.errors import ReplicatorError
from replicator.offsets.checkpoints import Checkpointer, read_checkpoints
from replicator.offsets.groups import GroupAdmin
from replicator.offsets.translation import TargetIndex
from replicator.procedures import applications, write_grants
from replicator.procedures.approval import ApprovalGate, guarded
from replicator.procedures.cutover_checkpointers import CutoverCheckpointers
from replicator.procedures.flows import preview_stop_flow, start_flow, stop_flow
from replicator.procedures.group_moves import (
    CopyCheck,
    GroupMove,
    Position,
    by_group,
    commit_moves,
    plan_moves,
    verify_moves,
)
from replicator.procedures.positions import (
    current_progress,
    last_seen_progress,
    wait_drained,
    worst,
)
from replicator.procedures.steps import Procedure, Step, StepReport
from replicator.statestore import StateStore
from replicator.statestore.flow_states import RUNNING

Mode = Literal["planned", "unplanned"]


class Failover(Procedure):
    """Failover of `applications` over `flow` ("A->B": from A to B)."""

    kind = "failover"
    recovery_step = "switch"
    #: Set by an orchestrator that asks a person (`replicator.procedures.approval`):
    #: every step that changes something first checks the run's recorded answer.
    #: Always set here (Procedure's default is None).
    timeout_s: float

    def __init__(
        self,
        config: ReplicatorConfig,
        flow: str,
        applications: list[str],
        store: StateStore,
        *,
        mode: Mode = "planned",
        reverse: bool = False,
        dry_run: bool = False,
        max_lag: int = 100_000,
        timeout_s: float = 120.0,
        grant_write: bool = False,
        approval_gate: ApprovalGate | None = None,
    ) -> None:
        super().__init__(store, dry_run=dry_run, approval_gate=approval_gate)
        if not applications:
            raise ReplicatorError(f"failover of {flow}: name at least one application (--app)")
        self.config = config
        self.flow: FlowConfig = config.flow(flow)
        self.applications = list(dict.fromkeys(applications))
        self.grant_write = grant_write
        if grant_write:  # a setting missing for it stops the run before it starts
            write_bindings(config, self.flow, self.applications)
        self.failover_mode: Mode = mode
        self.reverse_flow = (
            f"{self.flow.target.alias}->{self.flow.source.alias}" if reverse else None
        )
        #: `replicator run` starts the reverse flow only if its configuration enables it.
        self.reverse_enabled = any(f.name == self.reverse_flow for f in config.flows)
        self.max_lag = max_lag
        self.timeout_s = timeout_s
        #: Made while the applications stop (`_fence`), used by `commit_offsets` and
        #: made again by `checkpoint` (`replicator.procedures.cutover_checkpointers`).
        self._checkpointers = CutoverCheckpointers(lambda: (Checkpointer(self.flow),))
        self.source, self.target = self.flow.source, self.flow.target

    # -- Procedure -----------------------------------------------------------------

    def steps(self) -> list[Step]:
        if self.failover_mode == "planned":
            first = [
                Step("preflight", self._preflight_planned),
                Step("fence", self._fence, self._preview_fence),
                Step("drain", self._drain, self._preview_drain),
                Step("stop_flow", self._stop_flow, self._preview_stop_flow),
            ]
        else:
            # What was not replicated is read before the flow stops: a stopping task
            # publishes its partitions without the source end it last saw.
            first = [
                Step("preflight", self._preflight_unplanned),
                Step("unreplicated", self._unreplicated),
                Step("stop_flow", self._stop_flow, self._preview_stop_flow),
            ]
        grant = [Step(write_grants.GRANT_STEP, self._grant_write, self._preview_grant_write)]
        last = [
            Step("commit_offsets", self._commit_offsets, self._preview_commit_offsets),
            *(grant if self.grant_write else []),
            Step("switch", self._switch, self._preview_switch),
        ]
        if self.failover_mode == "planned":
            # After the switch: the applications resume from the groups' committed
            # positions, not from checkpoints, so writing them is no part of the downtime.
            last.append(Step("checkpoint", self._checkpoint, self._preview_checkpoint))
        if self.reverse_flow:
            last.append(Step("start_reverse", self._start_reverse, self._preview_start_reverse))
        return guarded(self, [*first, *last, Step("verify", self._verify)])

    def params(self) -> dict[str, Any]:
        return {
            "flow": self.flow.name,
            "applications": self.applications,
            "mode": self.failover_mode,
            "reverse": bool(self.reverse_flow),
            "max_lag": self.max_lag,
            "grant_write": self.grant_write,
        }

    def flow_name(self) -> str:
        return self.flow.name

    def mode(self) -> str:
        return self.failover_mode

    def rpo(self) -> int | None:
        """Planned: the records still behind after the drain (0). Unplanned: the
        source records that never reached the target."""
        step = "drain" if self.failover_mode == "planned" else "unreplicated"
        report = self.reported(step)
        if report is None or report["records"] is None:
            return None  # not reported, or not known (no status to compare with)
        return int(report["records"])

    # -- checks ----------------------------------------------------------------------

    def _applications_on(self, cluster: str) -> dict[str, Any]:
        """Every application exists and is active on `cluster` (or on the target
        already: a rerun of a procedure that switched it)."""
        active = {
            name: self.store.applications.get(name).active_cluster for name in self.applications
        }
        elsewhere = {a: c for a, c in active.items() if c not in (cluster, self.target.alias)}
        if elsewhere:
            raise ReplicatorError(
                f"applications active elsewhere than {cluster!r}: {elsewhere}; fail over only "
                f"applications that run on the source of flow {self.flow.name}"
            )
        return active

    def _preflight_planned(self) -> StepReport:
        active = self._applications_on(self.source.alias)
        stopped = [
            f"{row.where}: {row.error}"
            for row in read_status(self.target, self.flow.name)
            if isinstance(row, PartitionStatus)
            and row.state == "stopped"
            and self.flow.topics.matches(row.topic)
        ]
        if stopped:
            raise ReplicatorError(
                f"flow {self.flow.name} has stopped partitions, so it cannot drain: "
                f"{'; '.join(stopped)}; fix them first (see `replicator diagnose`)"
            )
        behind = current_progress(self.flow)
        lag = sum(p.behind for p in behind)
        workers = [w.worker for w in live_workers(self.flow)]
        if lag and not workers:
            raise ReplicatorError(
                f"flow {self.flow.name} is {lag} records behind and no worker is running; "
                f"start `replicator run` for it (and check its desired state in the state store)"
            )
        if lag > self.max_lag:
            raise ReplicatorError(
                f"flow {self.flow.name} is {lag} records behind (more than {self.max_lag}): "
                f"{worst(behind)}; wait for it to catch up or raise the bound (--max-lag)"
            )
        return {
            "source": self.source.alias,
            "target": self.target.alias,
            "partitions": len(behind),
            "lag": lag,
            "workers": workers,
            "applications": active,
        }

    def _preflight_unplanned(self) -> StepReport:
        active = self._applications_on(self.source.alias)
        with TargetIndex(self.target, self.source.alias):
            pass  # the target answers, or this raises naming it
        return {
            "source": self.source.alias,
            "target": self.target.alias,
            "status_partitions": sum(
                1
                for r in read_status(self.target, self.flow.name)
                if isinstance(r, PartitionStatus)
            ),
            "applications": active,
        }

    # -- planned steps -------------------------------------------------------------------

    def _fence(self) -> StepReport:
        self._checkpointers.warm()  # ready by the commit_offsets step
        return applications.fence(self.store.applications, self.applications, self.timeout_s)

    def _preview_fence(self) -> StepReport:
        return applications.preview_fence(self.store.applications, self.applications)

    def _drain(self) -> StepReport:
        started = time.monotonic()
        drained = wait_drained(self.flow, self.timeout_s, "after the fence")
        return {
            "records": 0,
            "partitions": len(drained),
            "source_ends": {p.where: p.source_end for p in drained},
            "seconds": round(time.monotonic() - started, 3),
        }

    def _preview_drain(self) -> StepReport:
        behind = current_progress(self.flow)
        return {"would_wait_for_records": sum(p.behind for p in behind), "partitions": len(behind)}

    def _checkpoint(self) -> StepReport:
        try:
            [checkpointer] = self._checkpointers.get()
            report = checkpointer.emit(self.applications)
        finally:
            self._checkpointers.close()
        if report.held and self.failover_mode == "planned":
            held = ", ".join(
                f"group {h.group} {h.translation.topic}[{h.translation.partition}]@"
                f"{h.translation.source_offset}"
                for h in report.held
            )
            raise ReplicatorError(
                f"positions not fully replicated after the drain: {held}; retry with the same id"
            )
        return {"emitted": len(report.emitted), "unchanged": report.unchanged}

    def _preview_checkpoint(self) -> StepReport:
        return {"would_checkpoint": by_group(self._planned_positions())}

    # -- unplanned steps ------------------------------------------------------------------

    def _unreplicated(self) -> StepReport:
        with TargetIndex(self.target, self.source.alias) as index:
            seen = last_seen_progress(self.flow, index)
        partitions = [
            {
                "topic": p.topic,
                "partition": p.partition,
                "remote_topic": p.remote_topic,
                "replicated_until": p.replicated_until,
                "last_seen_source_end": p.source_end,
                "unreplicated": p.unreplicated(),
                "records": p.behind,
            }
            for p in seen
        ]
        if not seen:
            # Nothing to compare with: the report must not read as "nothing lost".
            return {
                "records": None,
                "partitions": [],
                "unknown": (
                    f"the status topic on {self.target.alias!r} holds no partition status of "
                    f"flow {self.flow.name} (no replicator of the flow reported there yet, or "
                    "its status was deleted): what the source held beyond the copy is not "
                    "known; compare the remote topics with the source once it is back"
                ),
            }
        return {"records": sum(p.behind for p in seen), "partitions": partitions}

    # -- both modes ------------------------------------------------------------------------

    def _stop_flow(self) -> StepReport:
        planned = self.failover_mode == "planned"
        timeout = self.timeout_s if planned else min(self.timeout_s, 15.0)
        return stop_flow(self.store.flows, self.flow, self.procedure_id, timeout, required=planned)

    def _preview_stop_flow(self) -> StepReport:
        return preview_stop_flow(self.flow)

    def _planned_positions(self) -> list[GroupMove]:
        """Each group's position on the target, before any commit: exact translation of
        its source commits (planned), or its last checkpoints (unplanned)."""
        admin = GroupAdmin(self.target)
        translated = self._translated()
        return [
            move
            for group in self.applications
            for move in plan_moves(admin, group, translated.get(group, []))
        ]

    def _translated(self) -> dict[str, list[Position]]:
        """Each application group's positions on the source topics, and where they are
        on the target: all groups together (one read per partition, however many
        groups share it)."""
        if self.failover_mode == "unplanned":
            checkpoints = read_checkpoints(self.target, self.flow.checkpoints_topic)
            wanted = set(self.applications)
            positions: dict[str, list[Position]] = {}
            for (group, _, _), c in sorted(checkpoints.items()):
                if group in wanted:
                    positions.setdefault(group, []).append(
                        Position(
                            self.flow.policy.upstream_topic(c.topic) or c.topic,
                            c.partition,
                            c.upstream,
                            c.topic,
                            c.downstream,
                        )
                    )
            return positions
        try:
            [checkpointer] = self._checkpointers.get()
            translated = checkpointer.translate_groups(list(self.applications))
        finally:
            self._checkpointers.close()
        inexact = [
            (group, p.translation)
            for group, found in translated.items()
            for p in found
            if not p.translation.exact
        ]
        if inexact and not self.dry_run:  # a dry run does not drain: not everything is there
            listed = ", ".join(
                f"group {g} {t.topic}[{t.partition}]@{t.source_offset}" for g, t in inexact
            )
            raise ReplicatorError(
                f"positions not replicated to {self.target.alias!r} yet: {listed}; the drain "
                "step should have waited for them: retry with the same id"
            )
        return {
            group: [Position.of(p.translation) for p in found]
            for group, found in translated.items()
        }

    def _commit_offsets(self) -> StepReport:
        moves = self._planned_positions()
        return {
            "groups": commit_moves(
                GroupAdmin(self.target), self.target.alias, moves, self.store.leases.check_guards
            )
        }

    def _preview_commit_offsets(self) -> StepReport:
        return {"would_commit": by_group(self._planned_positions())}

    def _grant_write(self) -> StepReport:
        return write_grants.grant(
            self.store.runs, self.procedure_id, self.config, self.flow, self.applications
        )

    def _preview_grant_write(self) -> StepReport:
        return write_grants.preview_grant(self.config, self.flow, self.applications)

    def switches_to(self) -> str | None:
        return self.target.alias

    def _switch(self) -> StepReport:
        return applications.switch(self.store.applications, self.applications, self.target.alias)

    def _preview_switch(self) -> StepReport:
        return applications.preview_switch(
            self.store.applications, self.applications, self.target.alias
        )

    def _start_reverse(self) -> StepReport:
        assert self.reverse_flow is not None
        report = start_flow(self.store.flows, self.reverse_flow, self.procedure_id)
        return {**report, "enabled_in_config": self.reverse_enabled}

    def _preview_start_reverse(self) -> StepReport:
        return {
            "flow": self.reverse_flow,
            "would_set": RUNNING,
            "enabled_in_config": self.reverse_enabled,
        }

    def _verify(self) -> StepReport:
        """Each committed position points at the record after the group's last processed
        one: the record there carries that source offset, or nothing was replicated
        after it (the position is the end)."""
        step = self.report("commit_offsets")
        moves = cast(
            "dict[str, list[dict[str, Any]]]", step.get("groups", step.get("would_commit", {}))
        )
        with TargetIndex(self.target, self.source.alias) as index:
            return verify_moves(
                GroupAdmin(self.target),
                self.target.alias,
                moves,
                CopyCheck(index, moves),
                dry_run=self.dry_run,
            )
