"""How far a flow has replicated each partition, from the data itself.

The target tail (the last record carrying the flow's source-offset header) is
the truth for what was replicated; the source end offsets (planned failover)
or the last source ends the replicator published in the status topic (the
source is gone: unplanned failover) say what there was to replicate.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from replicator.config.model import FlowConfig
from replicator.engine.status import PartitionStatus, read_status
from replicator.engine.topic_sync import TopicSync
from replicator.errors import ReplicatorError
from replicator.offsets.groups import GroupAdmin
from replicator.offsets.translation import PartitionReader, TargetIndex

_POLL_S = 0.5


@dataclass(frozen=True)
class PartitionProgress:
    """One source partition: what there was to replicate, and how far it got.

    `replicated_until` is the next source offset not on the target (None:
    nothing replicated); `source_end` the source's end (high watermark, or
    the last one the replicator reported); `behind` the records between them
    (transaction markers at the source end are not counted)."""

    topic: str
    partition: int
    remote_topic: str
    source_end: int
    replicated_until: int | None
    behind: int

    @property
    def where(self) -> str:
        return f"{self.topic}[{self.partition}]"

    def unreplicated(self) -> list[int]:
        """[first, last] source offsets not on the target ([] when none)."""
        first = self.replicated_until or 0
        return [first, self.source_end - 1] if self.behind else []


def progress(flow: FlowConfig, index: TargetIndex) -> list[PartitionProgress]:
    """Every partition of the flow's topics, with the source reachable."""
    policy = flow.policy
    topics = TopicSync(flow).replicated_topics()
    # Heartbeats never stop while the flow runs, and no application reads them.
    partitions = [
        (t, p)
        for t, count in sorted(topics.items())
        if not policy.is_heartbeats_topic(t)
        for p in range(count)
    ]
    ends = GroupAdmin(flow.source).end_offsets(partitions)
    with PartitionReader(flow.source) as source:
        return [
            _progress_of(
                index,
                source,
                PartitionProgress(
                    topic,
                    partition,
                    policy.format_remote_topic(flow.source.alias, topic),
                    ends[(topic, partition)],
                    None,
                    0,
                ),
            )
            for topic, partition in partitions
        ]


def _progress_of(
    index: TargetIndex, source: PartitionReader, wanted: PartitionProgress
) -> PartitionProgress:
    """How far `wanted`'s partition is replicated now, towards its `source_end`
    (records after that end do not count)."""
    topic, partition, end = wanted.topic, wanted.partition, wanted.source_end
    until = _replicated_until(index, wanted.remote_topic, partition)
    behind = 0
    # A transactional source ends with a commit marker that is never replicated.
    if source.first(topic, partition, until or 0, end) is not None:
        behind = end - (until or 0)
    return PartitionProgress(topic, partition, wanted.remote_topic, end, until, behind)


def last_seen_progress(flow: FlowConfig, index: TargetIndex) -> list[PartitionProgress]:
    """Every partition the replicator reported in the status topic, against the last
    source end it saw there (`next_offset + lag`), without the source cluster."""
    policy = flow.policy
    result = []
    for row in read_status(flow.target, flow.name):
        if not isinstance(row, PartitionStatus) or row.next_offset is None:
            continue
        topic, partition = row.topic, row.partition
        if not flow.topics.matches(topic) or policy.is_heartbeats_topic(topic):
            continue  # a topic no longer (or never) of interest to applications
        remote = policy.format_remote_topic(flow.source.alias, topic)
        until = _replicated_until(index, remote, partition)
        seen_end = row.next_offset + (row.lag or 0)
        start = row.next_offset if until is None else until
        result.append(
            PartitionProgress(topic, partition, remote, seen_end, until, max(0, seen_end - start))
        )
    return sorted(result, key=lambda p: (p.topic, p.partition))


def current_progress(flow: FlowConfig) -> list[PartitionProgress]:
    """`progress` with an index of its own, for one look."""
    with TargetIndex(flow.target, flow.source.alias) as index:
        return progress(flow, index)


def wait_drained(flow: FlowConfig, timeout_s: float, what: str) -> list[PartitionProgress]:
    """Wait until `flow` has replicated every partition up to its source end as it
    is now (the applications are fenced, so their records are all written); see
    `wait_replicated`."""
    return wait_replicated(flow, current_progress(flow), timeout_s, what)


def wait_replicated(
    flow: FlowConfig, wanted: list[PartitionProgress], timeout_s: float, what: str
) -> list[PartitionProgress]:
    """Wait until every partition of `wanted` is replicated up to its `source_end`;
    ReplicatorError naming the partitions furthest behind after `timeout_s`.

    Only up to those ends: producers that no procedure fences (other applications,
    the demo traffic of `make run`) write on, and waiting for a moving end would
    last until a look happens to find every partition caught up at once."""
    deadline = time.monotonic() + timeout_s
    current = wanted
    with (
        TargetIndex(flow.target, flow.source.alias) as index,
        PartitionReader(flow.source) as source,
    ):
        while True:
            current = [_progress_of(index, source, p) if p.behind else p for p in current]
            if not any(p.behind for p in current):
                return current
            if time.monotonic() > deadline:
                raise ReplicatorError(
                    f"{what}: flow {flow.name} did not catch up within {timeout_s:g}s: "
                    f"{worst(current)}; is `replicator run` running it? Retry with the same "
                    "id once it replicates"
                )
            time.sleep(_POLL_S)


def worst(behind: list[PartitionProgress], shown: int = 5) -> str:
    """The partitions furthest behind, for error messages."""
    worst = sorted((p for p in behind if p.behind), key=lambda p: -p.behind)[:shown]
    return ", ".join(
        f"{p.where} {p.behind} behind (replicated until {p.replicated_until}, end {p.source_end})"
        for p in worst
    )


def _replicated_until(index: TargetIndex, remote: str, partition: int) -> int | None:
    last = index.last_replica(remote, partition)
    return None if last is None else last.source_offset + 1
