"""Where each partition's verification window lies, read for every partition at once.

A plan needs, per source partition, the source's log start and end, the target
partition's, the last replica on the target (what the replicator had acknowledged)
and the timestamp of the oldest record still in flight (the lag in time). Asked one
partition at a time these are four rounds of requests per partition: a
10,000-partition flow waited minutes before Spark started. Here each is one batch:
the offsets in two requests per broker on each cluster (`partition_bounds`), the
target tails read together (`tail_replicas`, the scan a rebalance uses, with the
backward read left for the few partitions whose last replica lies further back), and
the first record in flight of every lagging partition read together
(`scan_partitions`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from confluent_kafka import KafkaException, Message, TopicCollection

from replicator.config.model import ClusterConfig, FlowConfig
from replicator.engine.tail import NOT_NEAR_END, Replica, tail_replicas
from replicator.errors import ReplicatorError
from replicator.kafka.bounds import ABSENT, READ_TIMEOUT_S, partition_bounds
from replicator.kafka.clients import admin_for
from replicator.kafka.errors import error_code, error_text
from replicator.kafka.partition_scans import Key, Scan, scan_partitions
from replicator.listing import first_of
from replicator.offsets.translation import TargetIndex


@dataclass(frozen=True)
class Positions:
    """One source partition's offsets as the plan found them."""

    #: The source partition's log start and end (its high watermark).
    source_start: int
    source_end: int
    #: The remote partition's log start and end ((0, 0) when it does not exist yet).
    target_start: int
    target_end: int
    #: The source offset after the last replica on the target (`source_start` when
    #: there is none): what the replicator had acknowledged.
    acknowledged: int
    #: The timestamp (ms) of the first committed record after `acknowledged`, None
    #: when nothing is in flight.
    oldest_in_flight_ms: int | None
    #: The remote topic's id (None: it does not exist, or the cluster did not tell).
    target_topic_id: str | None = None


def read_positions(flow: FlowConfig, partitions: list[Key]) -> dict[Key, Positions]:
    """`Positions` of each source partition of `partitions` (its remote partition is
    the flow's policy's name for it)."""
    policy, alias = flow.policy, flow.source.alias
    source = partition_bounds(flow.source, partitions)
    absent = [f"{t}[{p}]" for t, p in partitions if (t, p) not in source]
    if absent:
        raise ReplicatorError(
            f"cluster {alias!r}: {first_of(absent)} did not answer "
            "(no leader, or deleted since the topics were listed); verify again once "
            "every partition has a leader"
        )
    remote = {(t, p): (policy.format_remote_topic(alias, t), p) for t, p in partitions}
    target = partition_bounds(flow.target, list(remote.values()))
    ids = _topic_ids(flow.target, sorted({topic for topic, _ in target}))
    last = _last_replicas(flow, target)
    acknowledged = {}
    for key, (start, end) in source.items():
        replica = last.get(remote[key])
        known = start if replica is None else replica.source_offset + 1
        acknowledged[key] = max(start, min(known, end))
    lagging = {key: (acknowledged[key], end) for key, (_, end) in source.items()}
    oldest = _first_timestamps(
        flow, {key: (start, end) for key, (start, end) in lagging.items() if start < end}
    )
    return {
        key: Positions(
            start,
            end,
            *target.get(remote[key], (0, 0)),
            acknowledged[key],
            oldest.get(key),
            ids.get(remote[key][0]),
        )
        for key, (start, end) in source.items()
    }


def _topic_ids(cluster: ClusterConfig, topics: list[str]) -> dict[str, str]:
    """The id of each of `topics` that exists (one request per broker; a topic
    deleted and created again under its name has another)."""
    if not topics:
        return {}
    admin = admin_for(cluster)  # kept until the answers came: it answers them
    futures = admin.describe_topics(TopicCollection(topics), request_timeout=READ_TIMEOUT_S)
    ids = {}
    for topic, future in futures.items():
        try:
            described = future.result(timeout=READ_TIMEOUT_S)
        except KafkaException as exc:
            if error_code(exc) in ABSENT:
                continue  # deleted since its offsets were read: the bounds tell
            raise ReplicatorError(
                f"cluster {cluster.alias!r}: topic {topic} not described: {error_text(exc)}; "
                "check that the cluster is reachable and the principal may DESCRIBE it"
            ) from exc
        ids[topic] = str(described.topic_id)
    return ids


def _last_replicas(
    flow: FlowConfig, bounds: dict[Key, tuple[int, int]]
) -> dict[Key, Replica | None]:
    """The last replica of the flow in each target partition of `bounds` (None when
    it holds none)."""
    tails = tail_replicas(flow.target, flow.source.alias, bounds)
    last = cast(
        "dict[Key, Replica | None]",
        {key: found for key, found in tails.items() if found is not NOT_NEAR_END},
    )
    further = [key for key in tails if key not in last]
    if further:
        with TargetIndex(flow.target, flow.source.alias) as index:
            for topic, partition in further:
                end = bounds[topic, partition][1]
                last[topic, partition] = index.last_replica(topic, partition, end)
    return last


class _FirstRecord(Scan):
    """The timestamp of the first committed record in [start, end)."""

    def __init__(self, start: int, end: int) -> None:
        self._start = start
        self._end = end
        self.timestamp_ms: int | None = None

    def start(self) -> int:
        return self._start

    def record(self, message: Message) -> int | None:
        if cast(int, message.offset()) < self._end:
            self.timestamp_ms = message.timestamp()[1]
        self.done = True
        return None

    def end(self) -> None:
        pass  # only markers or aborted records in the range: nothing in flight to date


def _first_timestamps(flow: FlowConfig, ranges: dict[Key, tuple[int, int]]) -> dict[Key, int]:
    """The timestamp of the first committed record in each source range, read at once."""
    scans = {key: _FirstRecord(start, end) for key, (start, end) in ranges.items()}
    scan_partitions(
        flow.source.consumer,
        "plan",
        flow.source.alias,
        scans,
        **{"isolation.level": "read_committed"},
    )
    return {key: scan.timestamp_ms for key, scan in scans.items() if scan.timestamp_ms is not None}
