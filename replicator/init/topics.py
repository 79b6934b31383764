"""Step 2 of `replicator init`: the internal topics the replicator keeps its
bookkeeping in, created as its workers would create them on their first start."""

from __future__ import annotations

from collections.abc import Mapping

from replicator.config.model import ClusterConfig, ReplicatorConfig
from replicator.engine.internal_topics import InternalTopic, flow_topics
from replicator.errors import ReplicatorError
from replicator.init.report import InitReport
from replicator.kafka.clients import admin_for

STEP = "topics"
_TIMEOUT_S = 30.0


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
        for topic in flow_topics(flow):
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
                topic.ensure()
            except ReplicatorError as exc:
                report.add(STEP, alias, "failed", str(exc))
                continue
            report.add(STEP, alias, "done", f"created {name} ({shape})")
