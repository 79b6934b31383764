"""Failover of applications to a flow's target cluster, one task per procedure step
(the steps from `fence` to `switch`, while the applications are stopped, in one
task, `cutover`, so Airflow's start-up between tasks does not lengthen it).

Trigger with the form (flow, mode, applications, reverse, grant_write, dry run). A
failover, planned or unplanned, asks a person first, before anything is fenced: the
`approval` question holds the preflight findings and the plan (what every step
would do), and only the approvers of the deployment's approval policy may answer it
(the `replicator_default` connection's extra "approval"; see docs/failover-approval.md).
Approve: the cutover (fence, drain, ..., switch), then the reverse flow; the cutover
itself checks the recorded answer, so marking `approval` successful by hand lets
nothing through. Reject, or no answer within `approval_timeout_minutes` (at most the
procedure's 1 h lease): nothing changes, the run is recorded as "rejected". Dry runs
ask nobody; `skip_approval` is honoured only where the deployment's policy lets that
kind of failover skip, and refused otherwise. A failed task can be cleared and retried
alone (completed steps are never applied twice; a retried `cutover` resumes at the
step that failed), or the run aborted with the `abort_procedure` DAG. The `report`
task reads the outcome: RPO, RTO, duration and the applications' downtime.
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
    dag_id="failover",
    schedule=None,
    doc_md=__doc__,
    **DAG_DEFAULTS,
    params={
        "flow": Param("primary->dr", type="string", description="A->B: from A to B"),
        "mode": Param("planned", enum=["planned", "unplanned"]),
        "applications": Param(["demo"], type="array", description="applications (= groups)"),
        "reverse": Param(True, type="boolean", description="then start the flow B->A"),
        "dry_run": Param(False, type="boolean", description="only say what it would do"),
        "grant_write": Param(
            False,
            type="boolean",
            description="before the switch, give the applications' producers WRITE on the "
            "target's topics (applications.<name>.producer.principals); failback removes it",
        ),
        **approval_params(
            "ask nobody: refused unless the deployment's approval policy lets "
            "this kind of failover skip"
        ),
        "timeout_s": Param(120, type="number", description="seconds per wait"),
    },
):
    tasks = {
        task: ProcedureStepOperator(task_id=task, kind="failover", steps=steps)
        for task, steps in dag_tasks("failover")
    }
    preflight, first, *rest = tasks.values()
    approval = ProcedureApprovalOperator(
        task_id="approval",
        kind="failover",
        subject="Fail {{ params.applications }} over to {{ params.flow }}'s target?",
        body="Approve to fence {{ params.applications }}, drain and stop {{ params.flow }}, "
        "and switch them to its target. Reject to leave everything as it is.",
        notifiers=[ApprovalNotifier()],
    )
    gate = ApprovalBranchOperator(
        task_id="needs_approval", kind="failover", approval="approval", then=first.task_id
    )
    chain(
        preflight,
        ProcedurePlanOperator(task_id="plan", kind="failover", for_approval=True),
        gate,
        approval,
        first,
    )
    gate >> first
    chain(first, *rest, ProcedureReportOperator(task_id="report", kind="failover"))
