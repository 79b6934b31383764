"""Step 1 of `replicator init`: does every cluster answer its configured clients?"""

from __future__ import annotations

from concurrent.futures import TimeoutError as FutureTimeout

from confluent_kafka import KafkaException

from replicator.config.model import ClusterConfig, ReplicatorConfig
from replicator.init.report import InitReport
from replicator.kafka.clients import quiet_admin
from replicator.kafka.errors import error_text

STEP = "clusters"
TIMEOUT_S = 15.0  # a cluster answers in well under a second; a dead one never


def check_clusters(config: ReplicatorConfig, report: InitReport) -> dict[str, ClusterConfig]:
    """The clusters that answered (by alias); each answer, or why not, in `report`."""
    reachable = {}
    for alias, cluster in sorted(config.clusters.items()):
        admin = quiet_admin(cluster, connect_timeout_ms=int(TIMEOUT_S * 1000))
        try:
            described = admin.describe_cluster(request_timeout=TIMEOUT_S).result(
                timeout=TIMEOUT_S + 5
            )
        except (KafkaException, FutureTimeout) as exc:
            cause = error_text(exc) or f"no answer in {TIMEOUT_S:.0f} s"
            report.add(
                STEP, alias, "failed",
                f"{cluster.bootstrap_servers} does not answer: {cause}; check "
                f"{alias}.bootstrap.servers and the cluster's security settings "
                f"({alias}.security.protocol, sasl.*, ssl.*)",
            )  # fmt: skip
            continue
        reachable[alias] = cluster
        report.add(
            STEP, alias, "ok",
            f"{cluster.bootstrap_servers} answers: cluster id {described.cluster_id}, "
            f"{len(described.nodes)} broker(s)",
        )  # fmt: skip
    return reachable
