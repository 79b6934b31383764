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

`partition_bounds` gives the log start and end of many partitions in two requests per
broker, what a caller needs to decide where each scan starts.

Records of a partition still queued when its scan jumped or ended are dropped here
(the rest of the batch after a jump: they come again from the new offset; offsets
behind the jump; the partition done), so a scan sees each record once and in order.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from typing import Any, cast

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition
from confluent_kafka.admin import OffsetSpec

from replicator.config.model import ClusterConfig
from replicator.errors import ReplicatorError
from replicator.kafka.clients import AdminClient, admin_for
from replicator.kafka.errors import error_code, error_text
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


#: A partition that does not exist (yet), or whose leader is not settled right after its
#: creation (or an election): `partition_bounds` leaves it out.
ABSENT = frozenset(
    {
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.OFFSET_NOT_AVAILABLE,
    }
)


#: Partitions asked for in one ListOffsets call of `partition_bounds`. librdkafka
#: matches each partition of an answer to its request by a search through the request
#: (n * n / 2 comparisons), and one call of 5,000 partitions cost 0.46 CPU-s for both
#: bounds; in calls of 500, all sent before any answer is read, 0.22 CPU-s and no
#: longer to wait (a checkpoint round reads an estate's bounds several times).
BOUNDS_PER_REQUEST = 500


def _failure(future: Future[Any]) -> BaseException | None:
    """How `future` failed, or None: asked, never raised. Raising the exception a
    future holds (`result()`) writes the raising frames into it, and the frame that
    catches it holds the futures: a reference cycle, with the admin client in it when
    that frame holds the client. The cyclic garbage collector then frees the client,
    at an allocation of any thread; confluent-kafka clients torn down that way while
    their librdkafka threads still call back are reported to crash (its issues #1761,
    #2129), the likely cause of the segmentation faults in `list_offsets` seen beside
    thousands of partitions still getting their leaders."""
    try:
        return future.exception(timeout=READ_TIMEOUT_S)
    except TimeoutError as exc:
        return exc


def partition_bounds(
    cluster: ClusterConfig, partitions: list[Key], admin: AdminClient | None = None
) -> dict[Key, tuple[int, int]]:
    """(log start, high watermark) of each partition that exists, in requests of
    `BOUNDS_PER_REQUEST` partitions, all sent together; a partition that does not exist
    (or has no leader yet) is left out. (One
    such partition would fail the whole request: librdkafka's "No leaders found", so
    the cluster's metadata is asked first.) A caller that asks often passes its own
    `admin` of `cluster`: a new client each time costs the cluster a connection and a
    metadata request of its own (at 1,000 partitions, read every half second while
    the target creates its partitions, that load slowed their creation). Tested with
    `is None`: a client with no request in flight is falsy (its `len` is 0), and a
    round that passed its own made a new one every call."""
    admin = admin if admin is not None else admin_for(cluster)
    try:
        topics = admin.list_topics(timeout=READ_TIMEOUT_S).topics
    except KafkaException as exc:
        raise ReplicatorError(
            f"cluster {cluster.alias!r}: metadata not read: {error_text(exc)}; check that "
            "the cluster is reachable"
        ) from exc
    partitions = [
        (t, p)
        for t, p in partitions
        if (meta := topics.get(t)) is not None
        and meta.error is None
        and p in meta.partitions
        and meta.partitions[p].leader >= 0
    ]
    found: dict[Key, list[int | None]] = {}
    if not partitions:
        return {}
    specs = (OffsetSpec.earliest(), OffsetSpec.latest())
    asked = []
    for at in range(0, len(partitions), BOUNDS_PER_REQUEST):
        chunk = partitions[at : at + BOUNDS_PER_REQUEST]
        for slot, spec in enumerate(specs):
            wanted = {TopicPartition(t, p): spec for t, p in chunk}
            asked.append((slot, admin.list_offsets(wanted, request_timeout=READ_TIMEOUT_S)))
    for slot, futures in asked:
        for tp, future in futures.items():
            failed = _failure(future)
            if failed is None:
                offset = future.result().offset
            elif error_code(failed) in ABSENT:
                continue
            else:
                raise ReplicatorError(
                    f"cluster {cluster.alias!r} {tp.topic}[{tp.partition}]: offsets not read: "
                    f"{error_text(failed)}; check that the cluster is reachable and the "
                    "principal may DESCRIBE the topic"
                ) from failed
            found.setdefault((tp.topic, tp.partition), [None, None])[slot] = offset
    # A partition answered by one request and not the other (its leader settled in
    # between) is left out: both bounds or neither.
    return {
        key: (low, high)
        for key, (low, high) in found.items()
        if low is not None and high is not None
    }
