"""Failback of applications to a flow's source after a failover, one task per step
(the steps from `fence` to `switch` in one task, `cutover`, as in `failover`).

Records the source holds that never reached the DR side are listed by the
`reconcile` task; `mode` "replicate" copies them to the DR side first, "report"
leaves them listed (groups skip them). Before anything changes a person is asked
(`approval`, with the preflight, the reconcile list and the plan), as for a
failover: only the deployment's approvers may answer, the first changing step
checks the recorded answer, and `skip_approval` is honoured only where the
deployment's approval policy lets failbacks skip (docs/failover-approval.md). The
`report` task reads the outcome: RPO, RTO, duration and the applications' downtime;
a failed step can be cleared and retried alone, or the run aborted with the
`abort_procedure` DAG. A dry run's answer is the `plan` task.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param, chain
from replicator_airflow.dag_defaults import DAG_DEFAULTS, approval_params
from replicator_airflow.notifiers import ApprovalNotifier
from replicator_airflow.operators import (
    ApprovalBranchOperator,
    ProcedureApprovalOperator,
    ProcedurePlanOperator,
    ProcedureReportOperator,
    ProcedureStepOperator,
)

from replicator.procedures import dag_tasks

with DAG(
    dag_id="failback",
    schedule=None,
    doc_md=__doc__,
    **DAG_DEFAULTS,
    params={
        "flow": Param("primary->dr", type="string", description="the flow they failed over with"),
        "mode": Param(
            "replicate",
            enum=["replicate", "report"],
            description="records never replicated: copy them to the DR side, or only list them",
        ),
        "applications": Param(["demo"], type="array", description="applications (= groups)"),
        "revoke_write": Param(
            True,
            type="boolean",
            description="after the switch, remove the WRITE the failover's grant_write gave "
            "the applications' producers on the DR side (exactly what it created)",
        ),
        "dry_run": Param(False, type="boolean", description="only say what it would do"),
        **approval_params(
            "ask nobody: refused unless the deployment's approval policy lets failbacks skip"
        ),
        "timeout_s": Param(120, type="number", description="seconds per wait"),
    },
):
    tasks = {
        task: ProcedureStepOperator(task_id=task, kind="failback", steps=steps)
        for task, steps in dag_tasks("failback")
    }
    # preflight and reconcile only read; replicate_missing is the first that changes.
    preflight, reconcile, first, *rest = tasks.values()
    approval = ProcedureApprovalOperator(
        task_id="approval",
        kind="failback",
        findings=("preflight", "reconcile", "plan"),
        subject="Fail {{ params.applications }} back over {{ params.flow }}?",
        body="Approve to fence {{ params.applications }} on {{ params.flow }}'s target, drain "
        "the reverse flow and switch them back to its source. Reject to leave everything "
        "as it is.",
        notifiers=[ApprovalNotifier()],
    )
    gate = ApprovalBranchOperator(
        task_id="needs_approval", kind="failback", approval="approval", then=first.task_id
    )
    chain(
        ProcedurePlanOperator(task_id="plan", kind="failback", for_approval=True),
        preflight,
        reconcile,
        gate,
        approval,
        first,
    )
    gate >> first
    chain(first, *rest, ProcedureReportOperator(task_id="report", kind="failback"))
