"""Every minute: restart dead replicator workers, then check replication's health.

Workers started by `make run` (the local launcher, `$REPLICATOR_RUN_DIR`), the
replicator containers of docker-compose with `$REPLICATOR_LAUNCHER=docker`, or the
replicator chart's Deployments with `$REPLICATOR_LAUNCHER=kubernetes`, that
died are started again, unless the DR state store has stopped all their flows.
The run fails, listing every problem with its fix, on a flow without a live
worker, a partition stopped by a failure policy, lag beyond `max_lag_records`
on a partition, records lost to retention, checkpoints or heartbeats older
than their bound (counted from when the flow last started, so a flow that just
started is not paged). Flows the state store has stopped (a failover) are not
checked, unless the procedure that stopped them is no longer running and did
not succeed: then the run fails naming it and how to undo it. Each run records
one sample per flow (lag, checkpoint and heartbeat age, its problems) for the DR
status page's verdicts and charts, kept for `sample_retention_hours`.

Each problem (a flow and a check) opens an incident, told once through the
notifiers of the Airflow connection `dr_notifications` (SMTP, or any Airflow
notifier: README, Notifications), again every few hours while it lasts, and once
when it is resolved; not every minute.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param
from replicator_airflow.dag_defaults import DAG_DEFAULTS
from replicator_airflow.supervision import SupervisorOperator

from replicator.operations import DEFAULT_SAMPLE_RETENTION, Bounds

with DAG(
    dag_id="replicator_supervisor",
    schedule="* * * * *",
    doc_md=__doc__,
    **DAG_DEFAULTS,
    params={
        "restart": Param(True, type="boolean", description="restart dead workers"),
        "max_lag_records": Param(
            Bounds.max_lag_records,
            type="integer",
            minimum=0,
            description="records a partition may be behind its source",
        ),
        "max_lost_records": Param(
            Bounds.max_lost_records,
            type="integer",
            minimum=0,
            description="records a partition may have lost to retention (since its worker "
            "started); raise to acknowledge a known loss",
        ),
        "max_checkpoint_age_s": Param(
            Bounds.max_checkpoint_age_s,
            type="number",
            minimum=0,
            description="seconds the newest checkpoint may be old while groups moved on "
            "(keep above emit.checkpoints.interval.seconds)",
        ),
        "max_heartbeat_age_s": Param(
            Bounds.max_heartbeat_age_s,
            type="number",
            minimum=0,
            description="seconds the newest heartbeat on the target may be old",
        ),
        "sample_retention_hours": Param(
            DEFAULT_SAMPLE_RETENTION.total_seconds() / 3600,
            type="number",
            minimum=0.25,
            description="hours of per-flow samples (lag, checkpoint and heartbeat age) kept "
            "for the DR status page's charts; older ones are pruned each run",
        ),
    },
):
    SupervisorOperator(task_id="supervise")
