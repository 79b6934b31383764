"""Reading many partitions forward at once, each from an offset of its own, with one
consumer: the reads of a checkpoint round, batched per broker.

`RangeReader` (`replicator.kafka.range_reads`) reads one partition range at a time:
right for a bisection, but a round that looks at a thousand partitions pays a
thousand sequences of fetches. Here every partition that needs a look is assigned
at once, so each fetch request to a broker carries all of that broker's partitions,
and each partition's `Scan` decides, record by record, whether it needs more, a
jump ahead (the partition assigned again at the new offset) or is done (its
partition is unassigned). A scan's partition end (`enable.partition.eof`) ends it
too.

`replicator.kafka.bounds` gives the log start and end of many partitions in two
requests per broker, what a caller needs to decide where each scan starts.

Records of a partition still queued when its scan jumped or ended are dropped here
(the rest of the batch after a jump: they come again from the new offset; offsets
behind the jump; the partition done), so a scan sees each record once and in order.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import cast

from confluent_kafka import KafkaError, Message, TopicPartition

from replicator.errors import ReplicatorError
from replicator.kafka.range_reads import range_reader
from replicator.listing import first_of

#: How long one wait for records lasts before the scans are looked at again.
_POLL_S = 0.05
#: Records taken per consume call.
_BATCH = 10_000
#: A scan that receives nothing for this long fails: the cluster is away.
READ_TIMEOUT_S = 30.0

Key = tuple[str, int]


class Scan(ABC):
    """One partition's forward read: where it starts, and what each record says."""

    #: Set when the scan needs no more records.
    done: bool = False

    @abstractmethod
    def start(self) -> int:
        """The first offset to read."""

    @abstractmethod
    def record(self, message: Message) -> int | None:
        """Take the next record; return an offset to jump to (ahead of this record),
        or None to go on. Set `done` when nothing more is needed."""

    @abstractmethod
    def end(self) -> None:
        """The partition's end was reached (nothing more to read now)."""


def scan_partitions(
    base: Mapping[str, object],
    purpose: str,
    cluster: str,
    scans: Mapping[Key, Scan],
    **settings: object,
) -> None:
    """Run every scan of `scans` (by (topic, partition)) to its end, with one consumer
    on `base` (the settings of the cluster whose alias is `cluster`, `settings` added:
    e.g. isolation level).
    ReplicatorError naming the partitions when nothing arrives for `READ_TIMEOUT_S`."""
    pending = {key: scan for key, scan in scans.items() if not scan.done}
    if not pending:
        return
    consumer = range_reader(
        base,
        purpose,
        cluster,
        **{"auto.offset.reset": "earliest", "max.partition.fetch.bytes": 65_536, **settings},
    )
    #: The lowest offset each partition's next record may have (after a jump).
    floor = {key: scan.start() for key, scan in pending.items()}
    try:
        consumer.assign([TopicPartition(t, p, floor[t, p]) for t, p in pending])
        deadline = time.monotonic() + READ_TIMEOUT_S
        while pending:
            messages = consumer.consume(_BATCH, _POLL_S)
            if not messages:
                if time.monotonic() > deadline:
                    raise ReplicatorError(_stalled(cluster, pending.keys(), floor))
                continue
            deadline = time.monotonic() + READ_TIMEOUT_S
            finished = _route(messages, pending, floor, consumer, cluster)
            if finished:
                consumer.incremental_unassign([TopicPartition(t, p) for t, p in finished])
    finally:
        consumer.close()


def _route(
    messages: Iterable[Message],
    pending: dict[Key, Scan],
    floor: dict[Key, int],
    consumer: object,
    cluster: str,
) -> list[Key]:
    """Hand each record to its partition's scan; the partitions whose scans ended."""
    finished = []
    jumped = set()  # their other records in this batch come again from the new offset
    for message in messages:
        key = cast(Key, (message.topic(), message.partition()))
        scan = pending.get(key)
        if scan is None or key in jumped:
            continue  # ended earlier in this batch, or before
        error = message.error()
        if error is not None:
            if error.code() != KafkaError._PARTITION_EOF:
                raise ReplicatorError(
                    f"reading {key[0]}[{key[1]}] on {cluster!r} from offset {floor[key]}: "
                    f"{error.str()}"
                )
            scan.end()
            scan.done = True
        elif cast(int, message.offset()) >= floor[key]:
            jump = scan.record(message)
            if jump is not None and not scan.done:
                floor[key] = jump  # reassigned, not sought: see Partitions.restart_fetch
                jumped.add(key)
                consumer.incremental_unassign([TopicPartition(*key)])  # type: ignore[attr-defined]
                consumer.incremental_assign([TopicPartition(*key, jump)])  # type: ignore[attr-defined]
        if scan.done:
            del pending[key]
            finished.append(key)
    return finished


def _stalled(cluster: str, keys: Iterable[Key], floor: dict[Key, int]) -> str:
    listed = sorted(keys)
    shown = first_of([f"{t}[{p}]@{floor[t, p]}" for t, p in listed])
    return (
        f"reading {shown} on {cluster!r} received nothing for {READ_TIMEOUT_S:.0f}s; "
        f"is {cluster!r} reachable?"
    )
