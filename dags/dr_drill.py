"""Quarterly DR drill. Non-disruptive by default: the real groups' positions are
translated into shadow groups on the DR side and checked record by record; with
`mode` "full" the drill applications fail over and back for real. RPO, RTO and
the per-partition results are stored in the DR state store (history), with the
drill's duration and how long applications were down (none unless "full")."""

from __future__ import annotations

from airflow.sdk import DAG, Param
from replicator_airflow.dag_defaults import DAG_DEFAULTS
from replicator_airflow.operators import ProcedureRunOperator

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
        "timeout_s": Param(120, type="number", description="seconds per wait"),
    },
):
    ProcedureRunOperator(task_id="drill", kind="drill")
