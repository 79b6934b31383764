"""Failback of applications to a flow's source after a failover to its target.

After a failover over "A->B" the applications run on B: they write B's own
topics (`T`) and their groups read those and the copies of A's topics
(`A.T`). Failing back:

1. reconcile: list, per partition, the records A holds that never reached B
   (an unplanned failover leaves them behind). With the "replicate" choice
   the forward flow starts copying them to B now (exactly once: it resumes
   from B's tail), while the next steps run, and the last step waits until
   they are there; with "report" they stay listed in the run's history and the groups
   that had read everything before them skip them on A, so no application
   processes them unasked.
2. fence the applications on B, so B's topics stop growing and the groups
   commit and stop;
3. drain the reverse flow "B->A" (it copies `B:T` to `A:B.T`; provenance keeps
   `B:A.T` from echoing back) and stop it;
4. translate every group back: positions on `B:T` through the reverse flow's
   exact translation to `A:B.T`, positions on `B:A.T` through the record's
   source-offset header to `A:T`; write both as checkpoints on A and commit
   them to the same groups on A (never backwards);
5. switch the applications to A, remove the WRITE the failover's `grant_write`
   gave their producers on B (`revoke_write`, exactly what it created), resume the
   forward flow, verify.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, cast

from replicator.config.model import FlowConfig, ReplicatorConfig
from replicator.errors import ConfigError, ReplicatorError
from replicator.offsets.checkpoints import Checkpointer, GroupPosition, ReverseCheckpointer
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
    original_mismatch,
    plan_moves,
    verify_moves,
)
from replicator.procedures.positions import (
    PartitionProgress,
    current_progress,
    wait_drained,
    wait_replicated,
)
from replicator.procedures.steps import Procedure, Step, StepReport
from replicator.statestore import StateStore
from replicator.statestore.flow_states import RUNNING

Reconcile = Literal["replicate", "report"]


class Failback(Procedure):
    """Failback of `applications` over `flow` ("A->B": they run on B since a
    failover from A, and go back to A)."""

    kind = "failback"
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
        reconcile: Reconcile = "replicate",
        dry_run: bool = False,
        timeout_s: float = 120.0,
        revoke_write: bool = True,
        approval_gate: ApprovalGate | None = None,
    ) -> None:
        super().__init__(store, dry_run=dry_run, approval_gate=approval_gate)
        if not applications:
            raise ReplicatorError(f"failback over {flow}: name at least one application (--app)")
        self.revoke_write = revoke_write
        self.flow: FlowConfig = config.flow(flow)
        self.origin, self.dr = self.flow.source, self.flow.target
        reverse = f"{self.dr.alias}->{self.origin.alias}"
        try:
            self.reverse: FlowConfig = config.flow(reverse)
        except ConfigError as exc:
            raise ReplicatorError(
                f"failback over {flow} needs the reverse flow {reverse}, so that what "
                f"{self.dr.alias!r} received since the failover reaches {self.origin.alias!r}: "
                f"set `{reverse}.enabled = true` and `{reverse}.topics` in the configuration"
            ) from exc
        self.applications = list(dict.fromkeys(applications))
        self.choice: Reconcile = reconcile
        self.timeout_s = timeout_s
        #: Made while the applications stop (`_fence`), used by `commit_offsets` and
        #: made again by `checkpoint` (`replicator.procedures.cutover_checkpointers`).
        self._checkpointers = CutoverCheckpointers(
            lambda: (Checkpointer(self.reverse), ReverseCheckpointer(self.flow))
        )

    # -- Procedure -----------------------------------------------------------------

    def steps(self) -> list[Step]:
        return guarded(self, self._steps())

    def _steps(self) -> list[Step]:
        return [
            Step("preflight", self._preflight),
            Step("reconcile", self._reconcile),
            Step("replicate_missing", self._replicate_missing, self._preview_replicate_missing),
            Step("fence", self._fence, self._preview_fence),
            Step("start_reverse", self._start_reverse, self._preview_start_reverse),
            Step("drain_reverse", self._drain_reverse, self._preview_drain_reverse),
            Step("stop_reverse", self._stop_reverse, self._preview_stop_reverse),
            Step("commit_offsets", self._commit_offsets, self._preview_commit_offsets),
            Step("switch", self._switch, self._preview_switch),
            *(
                [Step(write_grants.REVOKE_STEP, self._revoke_write, self._preview_revoke_write)]
                if self.revoke_write
                else []
            ),
            # After the switch: the applications resume from the groups' committed
            # positions, not from checkpoints, so writing them is no part of the downtime.
            Step("checkpoint", self._checkpoint, self._preview_commit_offsets),
            Step("resume_forward", self._resume_forward, self._preview_resume_forward),
            Step("verify", self._verify),
        ]

    def params(self) -> dict[str, Any]:
        return {
            "flow": self.flow.name,
            "reverse_flow": self.reverse.name,
            "applications": self.applications,
            "reconcile": self.choice,
            "revoke_write": self.revoke_write,
        }

    def flow_name(self) -> str:
        return self.flow.name

    def mode(self) -> str:
        return self.choice

    def leases(self) -> list[str]:
        """The reverse flow too: the failback starts and stops it."""
        return [*super().leases(), f"flow {self.reverse.name}"]

    def rpo(self) -> int | None:
        """Records the applications wrote on the DR side that did not reach the origin
        (0 once the reverse flow drained)."""
        report = self.reported("drain_reverse")
        return None if report is None else int(report["records"])

    # -- reconcile -------------------------------------------------------------------

    def _preflight(self) -> StepReport:
        active = {
            name: self.store.applications.get(name).active_cluster for name in self.applications
        }
        elsewhere = {a: c for a, c in active.items() if c != self.dr.alias}
        if elsewhere:  # fencing them would stop production for nothing to fail back
            raise ReplicatorError(
                f"applications not active on {self.dr.alias!r}, the DR side of flow "
                f"{self.flow.name}: {elsewhere}; fail back only applications that failed "
                f"over with flow {self.flow.name} (nothing was fenced or changed)"
            )
        return {
            "origin": self.origin.alias,
            "dr": self.dr.alias,
            "reverse_partitions": len(current_progress(self.reverse)),
            "applications": active,
        }

    def _reconcile(self) -> StepReport:
        """The origin's records that never reached the DR side, per partition."""
        missing = [p for p in current_progress(self.flow) if p.behind]
        return {
            "choice": self.choice,
            "records": sum(p.behind for p in missing),
            "partitions": [
                {
                    "topic": p.topic,
                    "partition": p.partition,
                    "remote_topic": p.remote_topic,
                    "unreplicated": p.unreplicated(),
                    "records": p.behind,
                }
                for p in missing
            ],
        }

    def _replicate_missing(self) -> StepReport:
        """With "replicate", start the forward flow so it copies what reconcile listed.

        Not waited for here: starting a flow takes seconds (a worker, the resume from
        the target's tails), which the next steps overlap; and the translation of the
        groups is the same whether the copies landed yet or not (a group at the end of
        `B:A.T` continues at the first listed record either way). `verify` waits for
        the listed records, and only those: producers no procedure fences may write
        on the origin meanwhile (a moving end is never waited for)."""
        started = time.monotonic()
        listed = self.report("reconcile")
        if self.choice == "report" or not listed["records"]:
            seconds = round(time.monotonic() - started, 3)
            return {"replicating": 0, "forward_flow": "unchanged", "seconds": seconds}
        start_flow(self.store.flows, self.flow.name, self.procedure_id)
        return {
            "replicating": listed["records"],
            "forward_flow": RUNNING,
            "seconds": round(time.monotonic() - started, 3),
        }

    def _reconciled_copied(self) -> StepReport:
        """Wait until the records `replicate_missing` started copying are on the DR side."""
        started = time.monotonic()
        listed = self.report("reconcile")
        if self.choice == "report" or not listed["records"] or self.dry_run:
            return {"reconciled_copied": 0}
        wanted = [
            PartitionProgress(
                p["topic"],
                p["partition"],
                p["remote_topic"],
                p["unreplicated"][1] + 1,
                p["unreplicated"][0],
                p["records"],
            )
            for p in listed["partitions"]
        ]
        wait_replicated(self.flow, wanted, self.timeout_s, "copying the reconciled records")
        return {
            "reconciled_copied": listed["records"],
            "copy_wait_seconds": round(time.monotonic() - started, 3),
        }

    def _preview_replicate_missing(self) -> StepReport:
        listed = self.report("reconcile")
        copy = self.choice == "replicate" and listed["records"] > 0
        return {"would_replicate": listed["records"] if copy else 0}

    # -- drain the DR side ------------------------------------------------------------

    def _fence(self) -> StepReport:
        self._checkpointers.warm()  # ready by the commit_offsets step
        return applications.fence(self.store.applications, self.applications, self.timeout_s)

    def _preview_fence(self) -> StepReport:
        return applications.preview_fence(self.store.applications, self.applications)

    def _start_reverse(self) -> StepReport:
        return start_flow(self.store.flows, self.reverse.name, self.procedure_id)

    def _preview_start_reverse(self) -> StepReport:
        return {"flow": self.reverse.name, "would_set": RUNNING}

    def _drain_reverse(self) -> StepReport:
        started = time.monotonic()
        drained = wait_drained(self.reverse, self.timeout_s, "the reverse flow after the fence")
        return {
            "records": 0,
            "partitions": len(drained),
            "seconds": round(time.monotonic() - started, 3),
        }

    def _preview_drain_reverse(self) -> StepReport:
        behind = current_progress(self.reverse)
        return {"would_wait_for_records": sum(p.behind for p in behind)}

    def _stop_reverse(self) -> StepReport:
        return stop_flow(self.store.flows, self.reverse, self.procedure_id, self.timeout_s)

    def _preview_stop_reverse(self) -> StepReport:
        return preview_stop_flow(self.reverse)

    # -- groups ------------------------------------------------------------------------

    def _checkpoint(self) -> StepReport:
        """MM2-format checkpoints on the origin for both kinds of position, so tools
        built on `RemoteClusterUtils` see the failback positions too."""
        try:
            forward, back = self._checkpointers.get()
            # Both at once: each waits mostly for its producer's first acknowledgement
            # (a new producer's id, then the write), and the wait is part of the downtime.
            with ThreadPoolExecutor(2, thread_name_prefix="failback-checkpoints") as pool:
                reports = [
                    pool.submit(forward.emit, self.applications),
                    pool.submit(back.emit, self.applications),
                ]
                emitted = sum(len(report.result().emitted) for report in reports)
        finally:
            self._checkpointers.close()
        return {"emitted": emitted}

    def _planned_moves(self) -> list[GroupMove]:
        admin = GroupAdmin(self.origin)
        try:
            forward, back = self._checkpointers.get()
            # Every group's own positions together (one read per partition, however
            # many groups share it), as the failover translates them.
            translated = forward.translate_groups(list(self.applications))
            return [
                move
                for group in self.applications
                for move in plan_moves(
                    admin, group, self._translated(group, translated.get(group, []), back)
                )
            ]
        finally:
            self._checkpointers.close()

    def _translated(
        self, group: str, found: list[GroupPosition], back: ReverseCheckpointer
    ) -> list[Position]:
        """`group`'s positions on the DR side and where they are on the origin: its
        own positions on the reverse flow's topics (`found`, translated), and those on
        the copies of the origin's topics, translated back (`back`)."""
        own = [p.translation for p in found]
        inexact = [t for t in own if not t.exact]
        if inexact and not self.dry_run:
            listed = ", ".join(f"{t.topic}[{t.partition}]@{t.source_offset}" for t in inexact)
            raise ReplicatorError(
                f"group {group}: positions not replicated to {self.origin.alias!r} yet: "
                f"{listed}; the drain_reverse step should have waited for them: retry with "
                "the same id"
            )
        positions = [Position.of(t) for t in own]
        skip = self._skipped_ranges()
        policy = self.flow.policy
        for c in back.translate_group(group):
            remote = policy.format_remote_topic(self.origin.alias, c.topic)
            # A group at the first record DR never received skips what "report" left.
            first, end = skip.get((c.topic, c.partition), (-1, -1))
            to_offset = end if c.downstream == first else c.downstream
            positions.append(Position(remote, c.partition, c.upstream, c.topic, to_offset))
        return positions

    def _skipped_ranges(self) -> dict[tuple[str, int], tuple[int, int]]:
        """(first unreplicated offset, end) per origin partition left by "report"."""
        if self.choice != "report":
            return {}
        listed = self.report("reconcile")["partitions"]
        return {
            (p["topic"], p["partition"]): (p["unreplicated"][0], p["unreplicated"][1] + 1)
            for p in listed
        }

    def _commit_offsets(self) -> StepReport:
        moves = self._planned_moves()
        return {
            "groups": commit_moves(
                GroupAdmin(self.origin), self.origin.alias, moves, self.store.leases.check_guards
            )
        }

    def _preview_commit_offsets(self) -> StepReport:
        return {"would_commit": by_group(self._planned_moves())}

    def switches_to(self) -> str | None:
        return self.origin.alias

    def _switch(self) -> StepReport:
        return applications.switch(self.store.applications, self.applications, self.origin.alias)

    def _preview_switch(self) -> StepReport:
        return applications.preview_switch(
            self.store.applications, self.applications, self.origin.alias
        )

    def _revoke_write(self) -> StepReport:
        return write_grants.revoke(self.store.runs, self.flow, self.applications)

    def _preview_revoke_write(self) -> StepReport:
        return write_grants.preview_revoke(self.store.runs, self.flow, self.applications)

    def _resume_forward(self) -> StepReport:
        return start_flow(self.store.flows, self.flow.name, self.procedure_id)

    def _preview_resume_forward(self) -> StepReport:
        return {"flow": self.flow.name, "would_set": RUNNING}

    def _verify(self) -> StepReport:
        """Positions on the reverse flow's copies carry the DR offset the group was at;
        positions on the original topics are the source offset of the DR record the
        group was at (or, at the end of the copies, of the record after them); and the
        records reconcile listed are on the DR side ("replicate")."""
        copied = self._reconciled_copied()
        return {**self._verify_moves(), **copied}

    def _verify_moves(self) -> StepReport:
        step = self.report("commit_offsets")
        moves = cast(
            "dict[str, list[dict[str, Any]]]", step.get("groups", step.get("would_commit", {}))
        )
        reverse_policy = self.reverse.policy
        with (
            TargetIndex(self.origin, self.dr.alias) as copies_on_origin,
            TargetIndex(self.dr, self.origin.alias) as copies_on_dr,
        ):
            onto_copies = CopyCheck(
                copies_on_origin,
                {
                    group: [
                        m
                        for m in entries
                        if reverse_policy.topic_source(m["to_topic"]) == self.dr.alias
                    ]
                    for group, entries in moves.items()
                },
            )

            def mismatch(move: dict[str, Any]) -> str | None:
                if reverse_policy.topic_source(move["to_topic"]) == self.dr.alias:
                    return onto_copies(move)
                return original_mismatch(copies_on_dr, move)

            return verify_moves(
                GroupAdmin(self.origin),
                self.origin.alias,
                moves,
                mismatch,
                dry_run=self.dry_run,
            )
