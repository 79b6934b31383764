"""On demand: wait until a flow's DR copy is caught up (within `max_lag` records).

Trigger it before work that needs the copy current (maintenance of the primary,
an export from the DR side), or let another DAG wait for its success. The
sensor defers to the triggerer, so waiting holds no worker slot; it fails
after `timeout_s` naming the partitions still behind.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param
from replicator_airflow.dag_defaults import DAG_DEFAULTS
from replicator_airflow.sensors import ReplicationLagSensor

with DAG(
    dag_id="wait_for_replication",
    schedule=None,
    doc_md=__doc__,
    **DAG_DEFAULTS,
    params={
        "flow": Param("primary->dr", type="string", description="the flow, A->B"),
        "max_lag": Param(
            0, type="integer", minimum=0, description="records each partition may be behind"
        ),
    },
):
    ReplicationLagSensor(
        task_id="caught_up",
        flow="{{ params.flow }}",
        max_lag="{{ params.max_lag }}",
        deferrable=True,
        poke_interval=10,
        timeout=3600,
    )
