"""How far a flow has replicated each partition, from the data itself.

The target tail (the last record carrying the flow's source-offset header) is
the truth for what was replicated; the source end offsets (planned failover)
or the last source ends the replicator published in the status topic (the
source is gone: unplanned failover) say what there was to replicate.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import cast

from replicator.config.model import FlowConfig
from replicator.engine.status import PartitionStatus, read_status
from replicator.engine.topic_sync import TopicSync
from replicator.errors import ReplicatorError
from replicator.offsets.groups import GroupAdmin
from replicator.offsets.replica_reads import first_records, last_replicas
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
    """Every partition of the flow's topics, with the source reachable: every target
    tail, then every source range after it, read for all partitions at once."""
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
    remote = {where: (policy.format_remote_topic(flow.source.alias, where[0]), where[1])
              for where in partitions}  # fmt: skip
    lasts = last_replicas(flow.target, flow.source.alias, index, list(remote.values()))
    until = {
        where: None if (last := lasts[remote[where]]) is None else last.source_offset + 1
        for where in partitions
    }
    # A transactional source ends with a commit marker that is never replicated: only
    # a committed record between the tail and the end counts as behind.
    firsts = first_records(
        flow.source, {w: until[w] or 0 for w in partitions if (until[w] or 0) < ends[w]}
    )
    return [
        PartitionProgress(
            topic,
            partition,
            remote[topic, partition][0],
            ends[topic, partition],
            until[topic, partition],
            _behind(
                firsts.get((topic, partition)), ends[topic, partition], until[topic, partition]
            ),
        )
        for topic, partition in partitions
    ]


def _behind(first: int | None, end: int, until: int | None) -> int:
    """Offsets from the tail to the end, when a committed record lies there (`first`)."""
    return 0 if first is None or first >= end else end - (until or 0)


def _progress_of(
    index: TargetIndex, source: PartitionReader, wanted: PartitionProgress
) -> PartitionProgress:
    """How far `wanted`'s partition is replicated now, towards its `source_end`
    (records after that end do not count)."""
    topic, partition, end = wanted.topic, wanted.partition, wanted.source_end
    until = _replicated_until(index, wanted.remote_topic, partition)
    first = source.first(topic, partition, until or 0, end)
    behind = _behind(None if first is None else first.offset(), end, until)
    return PartitionProgress(topic, partition, wanted.remote_topic, end, until, behind)


def last_seen_progress(flow: FlowConfig, index: TargetIndex) -> list[PartitionProgress]:
    """Every partition the replicator reported in the status topic, against the last
    source end it saw there (`next_offset + lag`), without the source cluster."""
    policy = flow.policy
    rows = []
    for row in read_status(flow.target, flow.name):
        if not isinstance(row, PartitionStatus) or row.next_offset is None:
            continue
        if not flow.topics.matches(row.topic) or policy.is_heartbeats_topic(row.topic):
            continue  # a topic no longer (or never) of interest to applications
        rows.append((row, policy.format_remote_topic(flow.source.alias, row.topic)))
    lasts = last_replicas(
        flow.target, flow.source.alias, index, [(remote, r.partition) for r, remote in rows]
    )
    result = []
    for row, remote in rows:
        last = lasts[remote, row.partition]
        until = None if last is None else last.source_offset + 1
        next_offset = cast(int, row.next_offset)  # rows without one were left out above
        seen_end = next_offset + (row.lag or 0)
        start = next_offset if until is None else until
        result.append(
            PartitionProgress(
                row.topic, row.partition, remote, seen_end, until, max(0, seen_end - start)
            )
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
