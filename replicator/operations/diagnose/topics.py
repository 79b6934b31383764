"""The checks on the topic on both clusters: it exists on the source, its remote topic
exists on the target with as many partitions, the target takes every record the
source admitted (max.message.bytes, plus the replicator's headers), and what the
brokers say the principal of our client settings may do on each."""

from __future__ import annotations

import difflib

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient, ConfigResource, TopicDescription

from replicator.config.model import FlowConfig, shell_safe
from replicator.engine.topic_sync import HEADER_HEADROOM_BYTES, MAX_MESSAGE_BYTES
from replicator.kafka.errors import kafka_error
from replicator.operations.diagnose.findings import (
    TIMEOUT_S,
    Findings,
    Subject,
    n_partitions,
    unverifiable,
)

#: What the replicator does on a source topic, by the permission it needs for it.
_NEEDED_ON_SOURCE = {
    AclOperation.READ: "consume",
    AclOperation.DESCRIBE: "read its metadata and offsets",
    AclOperation.DESCRIBE_CONFIGS: "read its configs",
}


def check_source_topic(subject: Subject, findings: Findings) -> TopicDescription | None:
    alias = subject.flow.source.alias
    try:
        described = _describe_topic(subject.sync.source_admin, subject.topic)
    except KafkaException as exc:
        if kafka_error(exc).code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise unverifiable(
                exc,
                alias,
                f"describe topic {subject.topic}",
                "DESCRIBE",
                f"topic {subject.topic}",
            ) from exc
        findings.add(
            "source topic",
            "problem",
            f"{subject.topic} does not exist on {alias!r}",
            _similar_names(subject),
        )
        return None
    findings.add(
        "source topic",
        "ok",
        f"{subject.topic} exists on {alias!r} with {n_partitions(len(described.partitions))}",
    )
    _permissions(findings, described, alias, subject.topic, _NEEDED_ON_SOURCE)
    return described


def _similar_names(subject: Subject) -> str:
    alias = subject.flow.source.alias
    try:
        names = [d.source_topic for d in subject.sync.decisions()]
    except KafkaException as exc:
        raise unverifiable(exc, alias, "list topics", "DESCRIBE", "the topics") from exc
    upstream = subject.policy.upstream_topic(subject.topic)
    similar = [upstream] if upstream in names and upstream != subject.topic else []
    similar += difflib.get_close_matches(subject.topic, names, n=5)
    if not similar:
        return (
            f"no topic on {alias!r} has a similar name: check the name (give it as it is "
            f"called on {alias!r}), or create the topic there"
        )
    return f"did you mean {', '.join(dict.fromkeys(similar))} (topics on {alias!r})?"


def check_target_topic(subject: Subject, findings: Findings, source_partitions: int) -> int | None:
    """The remote topic's partition count, or None when it does not exist."""
    flow, target, remote = subject.flow, subject.flow.target.alias, subject.remote
    try:
        described = _describe_topic(subject.sync.target_admin, remote)
    except KafkaException as exc:
        if kafka_error(exc).code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise unverifiable(
                exc, target, f"describe topic {remote}", "DESCRIBE", f"topic {remote}"
            ) from exc
        findings.add(
            "target topic",
            "problem",
            f"{remote} does not exist on {target!r}: nothing of {subject.topic} was replicated",
            f"run the replicator for flow {flow.name} (replicator run --config FILE --flow "
            f"{shell_safe(flow.name)}): it creates {remote}; its principal needs CREATE on "
            f"{remote} "
            f"(or on the cluster) on {target!r}",
        )
        return None
    have = len(described.partitions)
    where = (
        f"{remote} on {target!r} has {n_partitions(have)}, {subject.topic} on "
        f"{flow.source.alias!r} {source_partitions}"
    )
    if have < source_partitions:
        findings.add(
            "target topic",
            "problem",
            f"{where}: {_span(have, source_partitions)} of {subject.topic} cannot be replicated",
            f"the replicator adds them at its next topic refresh (refresh.topics.enabled, "
            f"every {flow.refresh_topics_interval_seconds:.0f} s); if they stay missing, "
            f"grant its principal ALTER on {remote} on {target!r}, or add them by hand: "
            f"kafka-topics.sh --alter --topic {remote} --partitions {source_partitions}",
        )
    elif have > source_partitions:
        findings.add(
            "target topic",
            "warning",
            f"{where}: was {subject.topic} recreated with fewer partitions? "
            f"Nothing is replicated into {_span(source_partitions, have)} of {remote}",
        )
    else:
        findings.add("target topic", "ok", f"{where}, the same")
    _permissions(findings, described, target, remote, _needed_on_target(flow))
    return have


def check_max_message_bytes(subject: Subject, findings: Findings) -> None:
    """The target must take every record the source admitted, plus our headers."""
    flow = subject.flow
    source, target = flow.source.alias, flow.target.alias
    source_limit = _limit(subject.sync.source_admin, source, subject.topic)
    target_limit = _limit(subject.sync.target_admin, target, subject.remote)
    wanted = source_limit + HEADER_HEADROOM_BYTES
    limits = (
        f"max.message.bytes of {subject.remote} on {target!r} is {target_limit}, "
        f"of {subject.topic} on {source!r} {source_limit}"
    )
    raise_it = f"raise max.message.bytes of {subject.remote} on {target!r} to at least {wanted}"
    if flow.sync_topic_configs_enabled:
        fix = (
            f"topic sync sets it to {wanted} every "
            f"{flow.sync_topic_configs_interval_seconds:.0f} s and when a record does not "
            f"fit; if it stays at {target_limit}, it was overridden by hand or the "
            f"principal lacks ALTER_CONFIGS on {subject.remote} on {target!r}: {raise_it}"
        )
    else:
        fix = f"set sync.topic.configs.enabled=true to have topic sync keep it, or {raise_it}"
    if target_limit < source_limit:
        findings.add(
            "max.message.bytes",
            "problem",
            f"{limits}: records of {target_limit}..{source_limit} bytes, which the source "
            "accepts, cannot be replicated",
            fix,
        )
    elif target_limit < wanted:
        findings.add(
            "max.message.bytes",
            "warning",
            f"{limits}: records within {wanted - target_limit} bytes of the source's limit "
            "do not fit once the replicator's headers are added",
            fix,
        )
    else:
        findings.add("max.message.bytes", "ok", f"{limits}: every source record fits")


def _permissions(
    findings: Findings,
    described: TopicDescription,
    alias: str,
    topic: str,
    needed: dict[AclOperation, str],
) -> None:
    """What the broker says the principal of our client settings may do on `topic`."""
    granted = set(described.authorized_operations or ())
    if not granted:
        return  # the broker did not say
    missing = [op for op in needed if not granted & {op, AclOperation.ALL}]
    if missing:
        names = ", ".join(op.name for op in missing)
        findings.add(
            "authorization",
            "problem",
            f"the principal of the {alias!r} client settings may not "
            + "; ".join(f"{needed[op]} ({op.name})" for op in missing)
            + f" on {topic}",
            f"grant it {names} on topic {topic} on {alias!r} "
            f"(kafka-acls.sh --add --operation ... --topic {topic})",
        )
    else:
        names = ", ".join(op.name for op in needed)
        findings.add("authorization", "ok", f"allowed {names} on {topic} on {alias!r}")


def _describe_topic(admin: AdminClient, topic: str) -> TopicDescription:
    futures = admin.describe_topics(
        TopicCollection([topic]), include_authorized_operations=True, request_timeout=TIMEOUT_S
    )
    return futures[topic].result()


def _limit(admin: AdminClient, alias: str, topic: str) -> int:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    try:
        entries = admin.describe_configs([resource], request_timeout=TIMEOUT_S)[resource].result()
    except KafkaException as exc:
        raise unverifiable(
            exc,
            alias,
            f"describe the configs of topic {topic}",
            "DESCRIBE_CONFIGS",
            f"topic {topic}",
        ) from exc
    return int(entries[MAX_MESSAGE_BYTES].value)


def _needed_on_target(flow: FlowConfig) -> dict[AclOperation, str]:
    needed = {
        AclOperation.WRITE: "produce",
        AclOperation.READ: "read the tail to resume",
        AclOperation.DESCRIBE: "read its metadata",
        AclOperation.DESCRIBE_CONFIGS: "read its size limit",
        AclOperation.ALTER: "add partitions",
    }
    if flow.sync_topic_configs_enabled:
        needed[AclOperation.ALTER_CONFIGS] = "sync its configs"
    return needed


def _span(first: int, end: int) -> str:
    """Partitions `first` up to `end` (exclusive), as a phrase."""
    return f"partition {first}" if end - first == 1 else f"partitions {first}..{end - 1}"
