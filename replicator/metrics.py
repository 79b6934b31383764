"""Prometheus metrics of the replication engine.

Names follow Prometheus' conventions: `replicator_` first, the unit last, `_total` on
counters (prometheus_client adds it to a Counter's name), timestamps as
`*_timestamp_seconds`. docs/monitoring.md lists every family; the shipped alert rules
and dashboard (deploy/monitoring/) use only these names, and a test checks it.

Labels stay bounded: the partition families below are labelled by flow and topic, and
the `partition` label is empty (which Prometheus stores as absent: one series per
topic) unless the flow sets `metrics.partition.labels = true` (`partition_label`).

Tasks count in plain integers on the hot path and publish the deltas here about once
a second, so a labelled counter is never touched per record.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

#: No `*_created` series: they double the series count, no rule or panel reads them,
#: and `replicator run` serves its workers' families merged with its own
#: (`replicator.operations.metrics_tree`), where they would be one family twice.
disable_created_metrics()

#: Labels of the partition families; `partition` is "" unless asked for.
PARTITION_LABELS = ("flow", "topic", "partition")

RECORDS = Counter(
    "replicator_replicated_records",
    "Records the target acknowledged (written and, in exactly-once mode, committed).",
    PARTITION_LABELS,
)
BYTES = Counter(
    "replicator_replicated_bytes",
    "Key and value bytes of the records the target acknowledged.",
    PARTITION_LABELS,
)
SKIPPED = Counter(
    "replicator_skipped_records",
    "Source records deliberately not written, by reason: loop, loop_legacy (our copy of "
    "a record from the target), record_too_large (oversized.record.policy=skip), "
    "offset_reset (an operator's reset skipped them).",
    (*PARTITION_LABELS, "reason"),
)
LOST = Counter(
    "replicator_lost_records",
    "Source offsets that can never be replicated (deleted by retention before they were).",
    (*PARTITION_LABELS, "reason"),
)
ERRORS = Counter("replicator_errors", "Errors by kind.", ("flow", "kind"))
LAG = Gauge(
    "replicator_lag_records",
    "Source records not yet replicated (source high watermark - the offset after the "
    "last record the target acknowledged, or past it where nothing is in flight), "
    "summed over the worker's partitions of the topic.",
    PARTITION_LABELS,
)
RECORD_AGE = Gauge(
    "replicator_record_age_seconds",
    "Age of the newest replicated record when the target acknowledged it (the oldest "
    "over the worker's partitions of the topic).",
    PARTITION_LABELS,
)
ACKED_TIMESTAMP = Gauge(
    "replicator_acknowledged_record_timestamp_seconds",
    "Timestamp of the newest record of the topic the target acknowledged; "
    "time() minus it is how old the newest replica is (for `heartbeats`: the heartbeat "
    "age the supervisor checks).",
    PARTITION_LABELS,
)
STOPPED = Gauge(
    "replicator_stopped_partitions",
    "Partitions of the topic a failure policy stopped (they need an operator); only the "
    "worker owning a partition counts it.",
    PARTITION_LABELS,
)
LATENCY = Histogram(
    "replicator_replication_latency_seconds",
    "Target acknowledgement time minus record timestamp, sampled at every offset sync.",
    ("flow",),
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)
OFFSET_SYNC_TIMESTAMP = Gauge(
    "replicator_offset_sync_timestamp_seconds",
    "When the worker last wrote an offset sync for the topic (the newest over its "
    "partitions); time() minus it is the offset-sync age.",
    PARTITION_LABELS,
)
CHECKPOINT_DURATION = Histogram(
    "replicator_checkpoint_duration_seconds",
    "How long a checkpoint round (translating the groups, writing checkpoints, group "
    "offset sync) took, successful or not.",
    ("flow",),
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
CHECKPOINT_TIMESTAMP = Gauge(
    "replicator_checkpoint_success_timestamp_seconds",
    "When the last checkpoint round of the flow succeeded; time() minus it is the checkpoint age.",
    ("flow",),
)
CHECKPOINT_TRANSLATIONS = Counter(
    "replicator_checkpoint_translations",
    "Group positions translated by checkpoint rounds and failovers, by how they were "
    "answered: cache (unchanged since an earlier round), written (from where this "
    "process's writers put the records), read (a short read forward from a known "
    "offset pair, batched over partitions), bisect (the fallback: no pair near, "
    "MirrorMaker 2's copies) or absent (held: the target partition is not created yet).",
    ("flow", "how"),
)
CHECKPOINT_OVERRUNS = Counter(
    "replicator_checkpoint_round_overruns",
    "Checkpoint rounds that took longer than the flow's checkpoint interval (the next "
    "round takes the groups checkpointed longest ago first).",
    ("flow",),
)
HEARTBEAT_TIMESTAMP = Gauge(
    "replicator_heartbeat_emitted_timestamp_seconds",
    "When the worker last wrote a heartbeat to the source's heartbeats topic.",
    ("flow",),
)
SOURCE_COMMITS = Counter(
    "replicator_source_offset_commits",
    "Commits of the workers' source positions under the flow's consumer group "
    "(replicator.commit.source.offsets), by outcome (ok, failed).",
    ("flow", "outcome"),
)
FLOW_DESIRED_RUNNING = Gauge(
    "replicator_flow_desired_running",
    "1 while the DR state store wants the flow to run in this process, 0 while it is "
    "stopped on purpose (paused, or the standby direction after a failover): alerts on "
    "a flow's replication gate on it, and its disappearing means the process vanished.",
    ("flow",),
)
WORKER_RUNNING = Gauge(
    "replicator_worker_running",
    "1 while the worker's replication loop runs, 0 once it failed (the runner starts it "
    "again with backoff); a loop stopped on purpose (its flow stopped) has no series.",
    ("flow", "worker"),
)
DATA_PATH = Gauge(
    "replicator_data_path",
    "1 for the data path a flow's records take in this process: path=compiled (the "
    "compiled data plane, replicator._dataplane) or path=python (the Python loop); 0 for "
    "the other. replicator.data.path chooses; the log and `replicator status` say why.",
    ("flow", "path"),
)

CLUSTER_REACHABLE = Gauge(
    "replicator_cluster_reachable",
    "1 while the cluster answers this process, 0 from when a metadata probe after a "
    "client's connection failure went unanswered until one is answered again "
    "(see replicator.kafka.reachability). Labelled by alias and bootstrap servers: two "
    "clusters may share an alias in one process (two configurations).",
    ("cluster", "bootstrap"),
)
CLUSTER_OUTAGES = Counter(
    "replicator_cluster_outages",
    "Times the cluster became unreachable from this process.",
    ("cluster", "bootstrap"),
)

BACKGROUND_ERRORS = Counter(
    "replicator_background_errors",
    "Failed attempts of the work of a background thread of `replicator run` (flow states "
    "from the DR state store, checkpoints, ACL sync, thread status), by thread and work; "
    "an outage is logged once, each attempt is counted here (see replicator.flow_timer).",
    ("thread", "what"),
)
BACKGROUND_FAILING = Gauge(
    "replicator_background_failing",
    "1 while the last attempt of some work of the background thread failed, else 0.",
    ("thread",),
)
BACKGROUND_THREAD_ALIVE = Gauge(
    "replicator_background_thread_alive",
    "1 while the background thread runs, 0 when it ended unasked (it is started again).",
    ("thread",),
)


def partition_label(partition: int, per_partition: bool) -> str:
    """The `partition` label value of a partition family: the number when the flow asks
    for per-partition series (`metrics.partition.labels`), else "" (one series per topic)."""
    return str(partition) if per_partition else ""
