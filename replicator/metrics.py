"""Prometheus metrics of the replication engine.

Tasks count in plain integers on the hot path and publish the deltas here
about once a second, so a labelled counter is never touched per record.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, start_http_server

_LABELS = ("flow", "topic", "partition")

RECORDS = Counter("replicator_records_replicated", "Records written to the target.", _LABELS)
BYTES = Counter(
    "replicator_bytes_replicated", "Key and value bytes written to the target.", _LABELS
)
SKIPPED = Counter(
    "replicator_records_skipped",
    "Source records deliberately not written (cycle, or a `skip` policy).",
    (*_LABELS, "reason"),
)
LOST = Counter(
    "replicator_records_lost",
    "Source offsets that can never be replicated (deleted by retention before they were).",
    (*_LABELS, "reason"),
)
ERRORS = Counter("replicator_errors", "Errors by kind.", ("flow", "kind"))
LAG = Gauge(
    "replicator_lag_records", "Source records not yet replicated (high watermark - next).", _LABELS
)
RECORD_AGE = Gauge(
    "replicator_record_age_seconds",
    "Age of the newest replicated record when it was acknowledged by the target.",
    _LABELS,
)
LATENCY = Histogram(
    "replicator_replication_latency_seconds",
    "Target acknowledgement time minus record timestamp, sampled at every offset sync.",
    ("flow",),
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)
PARTITION_STATE = Gauge(
    "replicator_partition_stopped",
    "1 when a partition is stopped by a failure policy and needs an operator, 0 while it "
    "replicates; only the worker owning the partition reports it.",
    _LABELS,
)
C_SPANS_DISABLED = Gauge(
    "replicator_c_span_producer_disabled",
    "1 when the replication loop runs in Python alone because its C part cannot be used in "
    "this process (reason: not_built, version, layout, bind, self_test, handle); the log and "
    "`replicator status` say why.",
    ("reason",),
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


def serve(port: int) -> None:
    """Expose /metrics on `port` (all interfaces, as Prometheus scrapes remotely)."""
    start_http_server(port)
