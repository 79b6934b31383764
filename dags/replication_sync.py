"""Every 5 minutes: one round of each flow's periodic sync, one task per concern.

`topics` creates missing remote topics, grows partition counts and copies topic
configs (`sync.topic.configs.enabled`); `checkpoints` writes the consumer
groups' translated positions to `<source>.checkpoints.internal` and, with
`sync.group.offsets.enabled`, commits them to idle groups on the target; `acls`
copies the source topics' ACLs to their remote topics by MirrorMaker 2's rules
(`sync.topic.acls.enabled`; nothing for flows without it).
`replicator run` does the same on its own timers; this DAG keeps it going and
visible while workers restart, and runs on demand (before a drill). Flows the
DR state store has stopped are left alone. Each round is idempotent.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param
from replicator_airflow.dag_defaults import DAG_DEFAULTS
from replicator_airflow.supervision import SyncOperator

with DAG(
    dag_id="replication_sync",
    schedule="*/5 * * * *",
    doc_md=__doc__,
    **DAG_DEFAULTS,
    params={
        "flows": Param(
            [], type="array", description='flows ("A->B") to sync; empty: every enabled flow'
        ),
    },
):
    # Topics first: a checkpoint names a remote topic, which must exist.
    topics = SyncOperator(task_id="topics", concerns=("topics",))
    topics >> SyncOperator(task_id="checkpoints", concerns=("checkpoints",))
    topics >> SyncOperator(task_id="acls", concerns=("acls",))
