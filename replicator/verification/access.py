"""Before a verification job is planned and submitted: may the configuration's
principal read everything the job reads?

Spark's Kafka connector is a Java client: a missing ACL surfaces as a JVM stack
trace deep in an executor's log, after minutes of start-up, naming neither the
ACL nor the fix. So the run asks the brokers first, with the job's own
credentials, for the operations its principal may perform on each topic the job
reads (the flow's topics, their copies, the offset syncs and the checkpoints) and
on the connector's consumer groups (`VERIFIER_GROUP_PREFIX`), and stops with one
line naming every missing operation, resource and principal.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AclOperation

from replicator.acls.plan import OWN_PREFIX, VERIFIER_GROUP_PREFIX
from replicator.acls.principal import principal_of
from replicator.config.model import ClusterConfig, FlowConfig
from replicator.engine.topic_sync import TopicSync
from replicator.errors import ReplicatorError
from replicator.kafka.clients import admin_for
from replicator.kafka.coordinator import SETTLING, UNEXPIRED_S, NotSettled, until_settled
from replicator.kafka.errors import error_code, error_text

_TIMEOUT_S = 30.0
_REFUSED = frozenset({KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED})
_ABSENT = frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC})
#: The groups checked, with what they need (the real ones carry random ids): the
#: connector's consumers, and the plan's one-off readers, which only assign.
_GROUPS = (
    (f"{VERIFIER_GROUP_PREFIX}-access-check", f"{VERIFIER_GROUP_PREFIX}-", AclOperation.READ),
    (f"{OWN_PREFIX}plan-access-check", OWN_PREFIX, AclOperation.DESCRIBE),
)


def check_access(flow: FlowConfig, topics: list[str] | None = None) -> None:
    """ReplicatorError naming every ACL the job's principal lacks to verify `flow`
    (all its topics, or `topics`). Topics that do not exist are left to the plan,
    which says so."""
    policy = flow.policy
    source, target = flow.source, flow.target
    if topics is None:
        replicated = TopicSync(flow).replicated_topics()
        topics = sorted(t for t in replicated if not policy.is_heartbeats_topic(t))
    remote = [policy.format_remote_topic(source.alias, topic) for topic in topics]
    # The plan reads the source topics' retention.ms too.
    missing = [
        *_topics(source, topics, (AclOperation.READ, AclOperation.DESCRIBE_CONFIGS)),
        *_topics(flow.offset_syncs_cluster, [flow.offset_syncs_topic]),
        *_group(source),
        *_topics(target, [*remote, flow.checkpoints_topic]),
        *_group(target),
    ]
    if missing:
        principal = principal_of(source)
        raise ReplicatorError(
            f"verification of {flow.name} cannot read what it must: {'; '.join(missing)}; "
            "grant them, e.g. with `replicator acls apply --config <this configuration> "
            f"--role verifier --principal {principal}` (the job was not submitted)"
        )


def _topics(
    cluster: ClusterConfig,
    names: Iterable[str],
    operations: tuple[AclOperation, ...] = (AclOperation.READ,),
) -> list[str]:
    """What the principal lacks on the topics `names` of `cluster`: DESCRIBE, or
    any of `operations`."""
    wanted = list(dict.fromkeys(names))
    if not wanted:
        return []
    admin = admin_for(cluster)
    futures = admin.describe_topics(
        TopicCollection(wanted), include_authorized_operations=True, request_timeout=_TIMEOUT_S
    )
    return [
        lack
        for name in wanted
        for lack in _lacks(cluster, f"TOPIC {name}", futures[name], operations, absent_ok=True)
    ]


def _group(cluster: ClusterConfig) -> list[str]:
    """What the principal lacks on the consumer groups of the job and of the plan,
    once their coordinator answers (a cluster that just started loads it first)."""
    return until_settled(_TIMEOUT_S, _group_once, cluster)


def _group_once(cluster: ClusterConfig) -> list[str]:
    admin = admin_for(cluster)
    futures = admin.describe_consumer_groups(
        [probe for probe, _, _ in _GROUPS],
        include_authorized_operations=True,
        request_timeout=UNEXPIRED_S,  # never shorter than the wait: see there
    )
    return [
        lack
        for probe, prefix, operation in _GROUPS
        for lack in _lacks(
            cluster, f"GROUP {prefix} (prefixed)", futures[probe], (operation,), absent_ok=False
        )
    ]


def _lacks(
    cluster: ClusterConfig,
    resource: str,
    future: Future,
    operations: tuple[AclOperation, ...],
    *,
    absent_ok: bool,
) -> list[str]:
    """DESCRIBE and `operations` as the broker's answer about `resource` shows them."""
    try:
        described = future.result(timeout=_TIMEOUT_S)
    except TimeoutError:
        raise ReplicatorError(
            f"cluster {cluster.alias!r}: no answer about {resource} within {_TIMEOUT_S:.0f} s; "
            "check that the cluster is reachable"
        ) from None
    except KafkaException as exc:
        code = error_code(exc)
        if absent_ok and code in _ABSENT:
            return []
        if code in SETTLING:
            raise NotSettled(
                f"cluster {cluster.alias!r}: the group coordinator for {resource} has not "
                f"settled ({error_text(exc)}): the cluster is still starting or moving it; "
                "run the verification again in a minute"
            ) from exc
        if code not in _REFUSED:
            raise ReplicatorError(
                f"cluster {cluster.alias!r}: cannot check access to {resource}: "
                f"{error_text(exc)}; check that the cluster is reachable"
            ) from exc
        return [_lack(cluster, "DESCRIBE", resource)]
    allowed = described.authorized_operations
    if allowed is None:  # a broker that does not say: the job finds out
        return []
    return [_lack(cluster, op.name, resource) for op in operations if op not in allowed]


def _lack(cluster: ClusterConfig, operation: str, resource: str) -> str:
    return (
        f"{principal_of(cluster)} lacks ALLOW {operation} on {resource} on cluster "
        f"{cluster.alias!r} ({cluster.bootstrap_servers})"
    )
