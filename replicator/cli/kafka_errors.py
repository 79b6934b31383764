"""One line for a Kafka client error that reached the command line.

librdkafka's errors name no cluster: `Failed to get metadata: Local: Broker
transport failure` may come from any cluster of the configuration. So the line
probes the clusters of the command's configuration (a few seconds, all at once)
and names those that do not answer, with their bootstrap servers and what to check.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from confluent_kafka import KafkaException

from replicator.config import load_config
from replicator.config.model import ClusterConfig
from replicator.kafka.access import access_problem
from replicator.kafka.clients import quiet_admin
from replicator.kafka.errors import error_text

#: How long a cluster may take to answer the probe: a reachable broker answers a
#: metadata request in milliseconds; the command already waited its own timeout.
_PROBE_TIMEOUT_S = 5.0


def kafka_error_line(error: KafkaException, config_file: Path | None) -> str:
    """What went wrong, which cluster (alias and bootstrap servers) and the fix."""
    what = error_text(error)
    if config_file is None:
        return f"Kafka: {what}; run with --verbose for the traceback"
    clusters = list(load_config(config_file).clusters.values())
    with ThreadPoolExecutor(max_workers=len(clusters) or 1) as pool:
        answers = list(pool.map(_answers, clusters))
    silent = [cluster for cluster, answered in zip(clusters, answers, strict=True) if not answered]
    for cluster in silent:  # refused rather than away: name the setting to fix
        problem = access_problem(cluster)
        if problem is not None:
            return problem
    if silent:
        names = ", ".join(f"{c.alias!r} at {c.bootstrap_servers}" for c in silent)
        keys = ", ".join(f"{c.alias}.bootstrap.servers" for c in silent)
        plural = "s" if len(silent) > 1 else ""
        return (
            f"cannot reach cluster{plural} {names} ({what}): check {keys} in {config_file}, "
            "that the brokers are up and reachable from this host, and the security settings"
        )
    names = ", ".join(f"{c.alias!r} at {c.bootstrap_servers}" for c in clusters)
    return f"Kafka: {what} (the clusters answer now: {names}); run with --verbose for the traceback"


def _answers(cluster: ClusterConfig) -> bool:
    """Whether `cluster` answers a metadata request now (its client logs nothing:
    the command's own clients already logged the connection failures)."""
    admin = quiet_admin(cluster)
    try:
        admin.list_topics(timeout=_PROBE_TIMEOUT_S)
    except KafkaException:
        return False
    return True
