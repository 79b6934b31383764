"""Step 1 of `replicator init`: does every cluster answer its configured clients?

Two ways not to: a cluster that does not answer at all (no connection, no answer in
time: an outage, or an address that is wrong) is `unreachable`, and init goes on with
the others (a DR site must be set up while the primary is down); a cluster that
answers but refuses the client (authentication, TLS, authorization) is `failed`: a
configuration to fix, whatever the other clusters say."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from confluent_kafka import KafkaError, KafkaException

from replicator.config.model import ClusterConfig, ReplicatorConfig
from replicator.init.report import UNREACHABLE, InitReport
from replicator.kafka.clients import admin_for
from replicator.kafka.errors import error_code, error_text

STEP = "clusters"
TIMEOUT_S = 15.0  # a cluster answers in well under a second; a dead one never
#: A request that failed with one of these got no answer: nobody was reached.
NO_ANSWER = frozenset(
    {
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._RESOLVE,
    }
)


def check_clusters(config: ReplicatorConfig, report: InitReport) -> dict[str, ClusterConfig]:
    """The clusters that answered (by alias); each answer, or why not, in `report`.
    Asked all at once: clusters that do not answer cost one `TIMEOUT_S`, not one each."""
    clusters = sorted(config.clusters.items())
    with ThreadPoolExecutor(max_workers=max(1, len(clusters)), thread_name_prefix="init") as pool:
        answers = list(pool.map(lambda item: _ask(item[1]), clusters))
    reachable = {}
    for (alias, cluster), (outcome, text) in zip(clusters, answers, strict=True):
        report.add(STEP, alias, outcome, text)
        if outcome == "ok":
            reachable[alias] = cluster
    return reachable


def _ask(cluster: ClusterConfig) -> tuple[str, str]:
    """The outcome of describing `cluster` and its finding's text."""
    # What the client reports besides connection trouble (librdkafka's error callback):
    # an authentication or TLS failure, which times the request out.
    refusals: list[KafkaError] = []
    admin = admin_for(
        cluster,
        {
            "log_level": 0,  # one finding says it all, not a line per attempt
            "socket.connection.setup.timeout.ms": int(TIMEOUT_S * 1000),
            "error_cb": refusals.append,
        },
    )
    try:
        described = admin.describe_cluster(request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S + 5)
    except (KafkaException, FutureTimeout) as exc:
        admin.poll(0)  # serves the error callbacks the failed request left
        return _not_answered(cluster, exc, refusals)
    return "ok", (
        f"{cluster.bootstrap_servers} answers: cluster id {described.cluster_id}, "
        f"{len(described.nodes)} broker(s)"
    )


def _not_answered(
    cluster: ClusterConfig, exc: BaseException, refusals: list[KafkaError]
) -> tuple[str, str]:
    alias, bootstrap = cluster.alias, cluster.bootstrap_servers
    code = error_code(exc)
    if refusals or (code is not None and code not in NO_ANSWER):
        cause = "; ".join(dict.fromkeys(f"{e.name()}: {e.str()}" for e in refusals))
        return "failed", (
            f"{bootstrap} refuses the client: {cause or error_text(exc)}; check "
            f"{alias}.security.protocol and the cluster's sasl.* and ssl.* settings "
            "(credentials, certificates) and the principal's ACLs"
        )
    cause = error_text(exc) if code is not None else f"no answer in {TIMEOUT_S:.0f} s"
    return UNREACHABLE, (
        f"{bootstrap} does not answer: {cause}. If {alias} is down, nothing to fix: "
        f"init did what it could on the other clusters, and its topics and permissions "
        f"are checked when `replicator init` runs again after it is back; if it is up, "
        f"check {alias}.bootstrap.servers, the network (DNS, firewall) and "
        f"{alias}.security.protocol"
    )
