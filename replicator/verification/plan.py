"""Which offsets a verification run compares, per partition.

Records still in flight must not count as missing, so each partition is
verified up to what the replicator had acknowledged when the run started: the
source offset after the last replica on the target (the target tail). The
target side is read up to its end at that moment. Both bounds are written into
the plan and reported with the results ("verified up to ...; N records in
flight not counted").
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from replicator.checkpoints import policy_of
from replicator.config.model import FlowConfig
from replicator.groups import GroupAdmin
from replicator.topic_sync import TopicSync
from replicator.translation import TargetIndex


@dataclass(frozen=True)
class PartitionWindow:
    """One source partition and its copy: source offsets [source_start, source_end)
    are compared with the copies found in target offsets [target_start, target_end)."""

    topic: str
    partition: int
    remote_topic: str
    source_start: int
    source_end: int
    target_start: int
    target_end: int
    #: Source records after `source_end` when the run started: in flight, not verified.
    in_flight: int


@dataclass(frozen=True)
class VerificationPlan:
    flow: str
    source_alias: str
    source_bootstrap: str
    target_bootstrap: str
    windows: list[PartitionWindow] = field(default_factory=list)

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(asdict(self), indent=2))
        return path

    @classmethod
    def read(cls, path: Path) -> VerificationPlan:
        data = json.loads(path.read_text())
        windows = [PartitionWindow(**w) for w in data.pop("windows")]
        return cls(**data, windows=windows)


def plan_verification(flow: FlowConfig, topics: list[str] | None = None) -> VerificationPlan:
    """The windows of every partition of the flow's topics (or of `topics`)."""
    policy = policy_of(flow)
    replicated = TopicSync(flow, policy).replicated_topics()
    chosen = sorted(
        t
        for t in replicated
        if not policy.is_heartbeats_topic(t) and (topics is None or t in topics)
    )
    partitions = [(t, p) for t in chosen for p in range(replicated[t])]
    ends = GroupAdmin(flow.source).end_offsets(partitions)
    starts = GroupAdmin(flow.source).start_offsets(partitions)
    windows = []
    with TargetIndex(flow.target, flow.source.alias) as index:
        for topic, partition in partitions:
            remote = policy.format_remote_topic(flow.source.alias, topic)
            target_start, target_end = index.bounds(remote, partition)
            last = index.last_replica(remote, partition)
            acknowledged = starts[(topic, partition)] if last is None else last.source_offset + 1
            source_end = min(acknowledged, ends[(topic, partition)])
            windows.append(
                PartitionWindow(
                    topic,
                    partition,
                    remote,
                    starts[(topic, partition)],
                    source_end,
                    target_start,
                    target_end,
                    ends[(topic, partition)] - source_end,
                )
            )
    return VerificationPlan(
        flow.name,
        flow.source.alias,
        flow.source.bootstrap_servers,
        flow.target.bootstrap_servers,
        windows,
    )
