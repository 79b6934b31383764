"""Step 2 of `replicator init`: the internal topics the replicator keeps its
bookkeeping in, created as its workers would create them on their first start."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from replicator.config.model import ClusterConfig, FlowConfig, ReplicatorConfig
from replicator.engine.internal_topics import ensure_compacted_topic
from replicator.engine.resets import RESETS_TOPIC
from replicator.engine.status import STATUS_TOPIC
from replicator.errors import ReplicatorError
from replicator.init.report import InitReport
from replicator.kafka.clients import admin_for

STEP = "topics"
_TIMEOUT_S = 30.0


class InternalTopic(NamedTuple):
    cluster: ClusterConfig
    name: str
    replication_factor: int
    setting: str  # the key of its replication factor
    #: Its readers use its older records (`ensure_compacted_topic`): offset syncs.
    history: bool = False


def internal_topics(flow: FlowConfig) -> list[InternalTopic]:
    """The compacted topics `flow` writes: offset syncs, heartbeats, status, offset
    resets and (when it checkpoints or syncs groups) checkpoints."""
    policy = flow.policy
    status_rf = (flow.status_topic_replication_factor, "status.topic.replication.factor")
    topics = [
        InternalTopic(
            flow.offset_syncs_cluster, policy.offset_syncs_topic(flow.target.alias),
            flow.offset_syncs_topic_replication_factor, "offset-syncs.topic.replication.factor",
            history=True,
        ),
        InternalTopic(
            flow.source, policy.heartbeats_topic(),
            flow.heartbeats_topic_replication_factor, "heartbeats.topic.replication.factor",
        ),
        InternalTopic(flow.target, STATUS_TOPIC, *status_rf),
        InternalTopic(flow.target, RESETS_TOPIC, *status_rf),
    ]  # fmt: skip
    if flow.emit_checkpoints_enabled or flow.sync_group_offsets_enabled:
        checkpoints = policy.checkpoints_topic(flow.source.alias)
        rf = flow.checkpoints_topic_replication_factor
        topics.append(
            InternalTopic(flow.target, checkpoints, rf, "checkpoints.topic.replication.factor")
        )
    return topics


def ensure_internal_topics(
    config: ReplicatorConfig,
    reachable: Mapping[str, ClusterConfig],
    report: InitReport,
    *,
    dry_run: bool,
) -> None:
    """Create the internal topics of every flow that are missing, on the clusters
    that answered; each topic once, however many flows share it."""
    wanted: dict[tuple[str, str], InternalTopic] = {}
    for flow in config.flows:
        for topic in internal_topics(flow):
            wanted.setdefault((topic.cluster.alias, topic.name), topic)
    existing: dict[str, set[str]] = {}
    for (alias, name), topic in sorted(wanted.items()):
        if alias not in reachable:
            continue  # said in step 1
        if alias not in existing:
            listed = admin_for(topic.cluster).list_topics(timeout=_TIMEOUT_S)
            existing[alias] = set(listed.topics)
        rf = topic.replication_factor
        shape = f"compacted, 1 partition, replication factor {rf if rf > 0 else 'broker default'}"
        if name in existing[alias]:
            report.add(STEP, alias, "ok", f"{name} exists")
        elif dry_run:
            report.add(STEP, alias, "would", f"create {name} ({shape})")
        else:
            try:
                ensure_compacted_topic(
                    topic.cluster, name, rf, topic.setting, history=topic.history
                )
            except ReplicatorError as exc:
                report.add(STEP, alias, "failed", str(exc))
                continue
            report.add(STEP, alias, "done", f"created {name} ({shape})")
