"""Quarterly DR drill. Non-disruptive by default: the real groups' positions are
translated into shadow groups on the DR side and checked record by record; with
`mode` "full" the drill applications fail over and back for real, so a person is
asked first (`approval`), as for a failover: only the deployment's approvers may
answer, the drill checks the recorded answer before it moves anything, and
`skip_approval` is honoured only where the deployment's approval policy lets full
drills skip (docs/failover-approval.md). RPO, RTO and the per-partition results are
stored in the DR state store (history), with the drill's duration and how long
applications were down (none unless "full")."""

from __future__ import annotations

from airflow.sdk import DAG, Param, chain
from replicator_airflow.dag_defaults import DAG_DEFAULTS, approval_params
from replicator_airflow.notifiers import ApprovalNotifier
from replicator_airflow.operators import (
    ApprovalBranchOperator,
    ProcedureApprovalOperator,
    ProcedureRunOperator,
)

with DAG(
    dag_id="dr_drill",
    schedule="@quarterly",
    doc_md=__doc__,
    **DAG_DEFAULTS,
    params={
        "flow": Param("primary->dr", type="string", description="the flow to drill"),
        "mode": Param("non-disruptive", enum=["non-disruptive", "full"]),
        "applications": Param(
            [],
            type="array",
            description="non-disruptive: groups (empty: every checkpointed group); "
            "full: the drill applications to move",
        ),
        "dry_run": Param(False, type="boolean", description="only say what it would do"),
        **approval_params(
            "full: ask nobody; refused unless the deployment's approval policy "
            "lets full drills skip"
        ),
        "timeout_s": Param(120, type="number", description="seconds per wait"),
    },
):
    drill = ProcedureRunOperator(task_id="drill", kind="drill")
    approval = ProcedureApprovalOperator(
        task_id="approval",
        kind="drill",
        findings=(),
        subject="Run a full DR drill of {{ params.applications }} over {{ params.flow }}?",
        body="Approve to fail {{ params.applications }} over to {{ params.flow }}'s target "
        "and back, for real (they stop twice). Reject to leave everything as it is.",
        notifiers=[ApprovalNotifier()],
    )
    gate = ApprovalBranchOperator(
        task_id="needs_approval", kind="drill", approval="approval", then=drill.task_id
    )
    chain(gate, approval, drill)
    gate >> drill
