"""Abort a failover or failback that stopped midway (a failed step, a run given up).

Unfences the applications the run fenced and sets running again the flows it
stopped, so production runs as before; records the run as "aborted" in the
history, and none of its steps runs again. A run that already switched the
applications is refused: fail them back instead. The procedure id is the
stopped run's `<dag id>/<run id>` (e.g. `failover/manual__2026-...`), or the
`--id` of a CLI run; `replicator history` lists them.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param
from replicator_airflow.dag_defaults import DAG_DEFAULTS
from replicator_airflow.operators import ProcedureAbortOperator

with DAG(
    dag_id="abort_procedure",
    schedule=None,
    doc_md=__doc__,
    **DAG_DEFAULTS,
    params={
        "procedure_id": Param(
            type="string", minLength=1, description="the stopped run: <dag id>/<run id>"
        ),
        "reason": Param("", type="string", description="why, for the history"),
    },
):
    ProcedureAbortOperator(task_id="abort")
