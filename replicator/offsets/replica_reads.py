"""Our replicas on a target cluster, looked up for many partitions at once: the first
replica at or after an offset, the last replica of a partition, and the first record
of a source range.

`TargetIndex` answers one partition at a time; a failover of an application on 1,000
partitions asked it 1,000 times in turn (the unplanned failover's "what was not
replicated" step took about 50 s, its verification about 30 s). Here every partition
is read at once by one consumer (`scan_partitions`: each fetch carries all of a
broker's partitions); what a short read cannot answer (a partition whose last replica
lies far behind its end) is asked of `TargetIndex` as before.
"""

from __future__ import annotations

from collections.abc import Mapping

from confluent_kafka import Message

from replicator.config.model import ClusterConfig
from replicator.engine.tail import NOT_NEAR_END, TAIL_OFFSETS, Replica, replica_of, tail_replicas
from replicator.kafka.bounds import partition_bounds
from replicator.kafka.partition_scans import Scan, scan_partitions
from replicator.offsets.translation import TargetIndex

Where = tuple[str, int]


class _First(Scan):
    """The first replica at or after `start`."""

    def __init__(self, alias: bytes, start: int) -> None:
        self._alias = alias
        self._start = start
        self.found: Replica | None = None

    def start(self) -> int:
        return self._start

    def record(self, message: Message) -> int | None:
        replica = replica_of(message, self._alias)
        if replica is not None:
            self.found = replica
            self.done = True
        return None

    def end(self) -> None:
        pass


class _FirstRecord(Scan):
    """The offset of the first committed record at or after `start` (None: none)."""

    def __init__(self, start: int) -> None:
        self._start = start
        self.first: int | None = None

    def start(self) -> int:
        return self._start

    def record(self, message: Message) -> int | None:
        self.first = message.offset()
        self.done = True
        return None

    def end(self) -> None:
        pass


def first_records(cluster: ClusterConfig, starts: Mapping[Where, int]) -> dict[Where, int | None]:
    """The offset of the first committed record (read_committed: no transaction markers,
    no aborted records) at or after each partition's offset in `starts`, None when
    there is none up to the partition's end: whether anything there is still to copy."""
    scans = {where: _FirstRecord(start) for where, start in starts.items()}
    _read(cluster, scans)
    return {where: scan.first for where, scan in scans.items()}


def first_replicas(
    target: ClusterConfig, source_alias: str, starts: Mapping[Where, int]
) -> dict[Where, Replica | None]:
    """The first replica of the flow from `source_alias` at or after each partition's
    offset in `starts` (None: none up to the partition's end)."""
    alias = source_alias.encode()
    scans = {where: _First(alias, start) for where, start in starts.items()}
    _read(target, scans)
    return {where: scan.found for where, scan in scans.items()}


def last_replicas(
    target: ClusterConfig, source_alias: str, index: TargetIndex, partitions: list[Where]
) -> dict[Where, Replica | None]:
    """The last replica of the flow from `source_alias` in each partition (None: none,
    or the partition does not exist): the last offsets of every partition read at once
    (`tail_replicas`), `index` asked for the few whose replicas end earlier."""
    bounds = partition_bounds(target, partitions)
    near = tail_replicas(target, source_alias, bounds)
    found: dict[Where, Replica | None] = dict.fromkeys(partitions)
    for where, (_, high) in bounds.items():
        replica = near[where]
        if replica is NOT_NEAR_END:  # none near the end: read back, one partition at a time
            found[where] = index.last_replica(*where, end=high - TAIL_OFFSETS)
        else:
            found[where] = replica  # type: ignore[assignment]
    return found


def _read(cluster: ClusterConfig, scans: Mapping[Where, Scan]) -> None:
    if scans:
        scan_partitions(
            cluster.consumer,
            "replicas",
            cluster.alias,
            scans,
            **{"isolation.level": "read_committed"},
        )
