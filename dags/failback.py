"""Failback of applications to a flow's source after a failover, one task per step
(the steps from `fence` to `switch` in one task, `cutover`, as in `failover`).

Records the source holds that never reached the DR side are listed by the
`reconcile` task; `reconcile_choice` "replicate" copies them to the DR side
first, "report" leaves them listed (groups skip them). The `report` task reads
the outcome: RPO, RTO, duration and the applications' downtime; a failed step can
be cleared and retried alone, or the run aborted with the `abort_procedure` DAG.
A dry run's answer is the `plan` task.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param, chain
from replicator_airflow.dag_defaults import DAG_DEFAULTS
from replicator_airflow.operators import (
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
        "timeout_s": Param(120, type="number", description="seconds per wait"),
    },
):
    chain(
        ProcedurePlanOperator(task_id="plan", kind="failback"),
        *(
            ProcedureStepOperator(task_id=task, kind="failback", steps=steps)
            for task, steps in dag_tasks("failback")
        ),
        ProcedureReportOperator(task_id="report", kind="failback"),
    )
