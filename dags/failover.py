"""Failover of applications to a flow's target cluster, one task per procedure step.

Trigger with the form (flow, mode, applications, reverse, dry run). A planned
failover waits for a human's approval before the switch (skip it for drills);
a failed step can be cleared and retried alone: completed steps are never applied
twice. The `report` task logs RPO and RTO.
"""

from __future__ import annotations

from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk import DAG, Param, chain
from replicator_airflow.dag_defaults import DAG_DEFAULTS
from replicator_airflow.operators import (
    ApprovalBranchOperator,
    ProcedureReportOperator,
    ProcedureStepOperator,
)

from replicator.procedures.orchestration import STEPS

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
        "skip_approval": Param(False, type="boolean", description="no human step (drills)"),
        "timeout_s": Param(120, type="number", description="seconds per wait"),
    },
):
    steps = {
        step: ProcedureStepOperator(task_id=step, kind="failover", step=step)
        for step in STEPS["failover"]
    }
    gate = ApprovalBranchOperator(task_id="needs_approval", approval="approval", then="switch")
    approval = ApprovalOperator(
        task_id="approval",
        subject="Switch the applications to the DR cluster?",
        body="Groups are committed on {{ params.flow }}'s target; approve to switch "
        "{{ params.applications }}.",
    )
    before, after = (
        STEPS["failover"][: STEPS["failover"].index("switch")],
        STEPS["failover"][STEPS["failover"].index("switch") :],
    )
    chain(*(steps[s] for s in before), gate, approval, steps["switch"])
    gate >> steps["switch"]
    chain(*(steps[s] for s in after), ProcedureReportOperator(task_id="report", kind="failover"))
