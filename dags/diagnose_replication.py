"""On demand: why is topic X not replicated (or not fully)?

Runs every check of `replicator diagnose` for one topic of one flow: topics
filter, internal and cycle rules, source and remote topic, size limits,
permissions, and per partition the workers' status, resume offset and lag.
The diagnosis (problems first, each with its fix) is in the task's log and its
XCom; the run succeeds whatever the verdict.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param
from replicator_airflow.dag_defaults import DAG_DEFAULTS
from replicator_airflow.supervision import DiagnoseOperator

from replicator.operations import DEFAULT_LAG_THRESHOLD

with DAG(
    dag_id="diagnose_replication",
    schedule=None,
    doc_md=__doc__,
    **DAG_DEFAULTS,
    params={
        "flow": Param("primary->dr", type="string", description="the flow, A->B"),
        "topic": Param(
            "demo.orders",
            type="string",
            minLength=1,
            description="the topic's name on the flow's source cluster",
        ),
        "lag_threshold": Param(
            DEFAULT_LAG_THRESHOLD,
            type="integer",
            minimum=0,
            description="report partitions more records behind than this",
        ),
    },
):
    DiagnoseOperator(task_id="diagnose")
