"""The log start and end of many partitions at once: what a checkpoint round, a resume
and a verification plan ask of each cluster, in requests per broker.

`partition_bounds` asks with `AdminClient.list_offsets`, one call at a time, and a
topic one call found without a serving leader is not asked again in the same read.
Both rules keep librdkafka's (2.16) leader lookup off a path that crashed the process:

- a ListOffsets answer that says NOT_LEADER_OR_FOLLOWER or LEADER_NOT_AVAILABLE for a
  partition (a partition the target is still creating: its metadata names the leader
  seconds before the broker serves it) deletes that topic from the client's metadata
  cache (`rd_kafka_ListOffsets_handle_result`);
- a ListOffsets call that then finds a topic it asks for missing from the cache looks
  its leaders up asynchronously (`rd_kafka_topic_partition_list_query_leaders_async`):
  it registers its state with the metadata cache, where librdkafka's main thread may
  take it, finish it and free it while the calling thread still starts a timer on it.

With every call sent before any answer was read (as until 2026-12-07), an answer of
the first calls could delete a topic the later ones asked for: a process reading the
bounds of 5,000 partitions the target was still creating died of a segmentation fault
in `list_offsets` in 1 run of 25 that day. Now every call asks only topics the
metadata read at the start of the read listed with a leader and no answer since has
deleted, so the lookup finds every leader in the cache and never waits.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

from replicator.config.model import ClusterConfig
from replicator.errors import ReplicatorError
from replicator.kafka.clients import AdminClient, admin_for
from replicator.kafka.errors import error_code, error_text

Key = tuple[str, int]

#: How long one request may take before the read fails: the cluster is away.
READ_TIMEOUT_S = 30.0

#: A partition that does not exist (yet), or whose leader is not settled right after its
#: creation (or an election): left out of the bounds, its topic not asked again in the
#: same read.
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

#: Partitions asked in one ListOffsets call. librdkafka matches each partition of an
#: answer to its request by a search through the request (n * n / 2 comparisons): one
#: call of 5,000 partitions cost 0.46 CPU-s for both bounds, calls of 500 0.22 CPU-s.
BOUNDS_PER_REQUEST = 500


def _failure(future: Future[Any]) -> BaseException | None:
    """How `future` failed, or None: asked, never raised. Raising the exception a
    future holds (`result()`) writes the raising frames into it, and the frame that
    catches it holds the futures: a reference cycle, with the admin client in it when
    that frame holds the client. The cyclic garbage collector then frees the client,
    at an allocation of any thread; confluent-kafka clients torn down that way while
    their librdkafka threads still call back are reported to crash (its issues #1761,
    #2129)."""
    try:
        return future.exception(timeout=READ_TIMEOUT_S)
    except TimeoutError as exc:
        return exc


def partition_bounds(
    cluster: ClusterConfig, partitions: list[Key], admin: AdminClient | None = None
) -> dict[Key, tuple[int, int]]:
    """(log start, high watermark) of each of `partitions` that exists and has a
    serving leader; the others are left out. Both bounds or neither: a partition
    answered by one call and not the other (its leader settled in between) is left out.

    The metadata is read first (a partition without a leader there would fail its
    whole call: librdkafka's "No leaders found"), then each `BOUNDS_PER_REQUEST`
    partitions' start and end, one call after the other (see the module). A caller
    that asks often passes its own `admin` of `cluster`: a new client each time costs
    the cluster a connection and a metadata request of its own (at 1,000 partitions,
    read every half second while the target creates its partitions, that load slowed
    their creation). Tested with `is None`: a client with no request in flight is
    falsy (its `len` is 0)."""
    admin = admin if admin is not None else admin_for(cluster)
    try:
        topics = admin.list_topics(timeout=READ_TIMEOUT_S).topics
    except KafkaException as exc:
        raise ReplicatorError(
            f"cluster {cluster.alias!r}: metadata not read: {error_text(exc)}; check that "
            "the cluster is reachable"
        ) from exc
    led = [
        (t, p)
        for t, p in partitions
        if (meta := topics.get(t)) is not None
        and meta.error is None
        and p in meta.partitions
        and meta.partitions[p].leader >= 0
    ]
    unserved: set[str] = set()  # topics an answer deleted from the client's cache
    bounds: dict[Key, tuple[int, int]] = {}
    for at in range(0, len(led), BOUNDS_PER_REQUEST):
        chunk = [(t, p) for t, p in led[at : at + BOUNDS_PER_REQUEST] if t not in unserved]
        starts = _offsets(cluster, admin, chunk, OffsetSpec.earliest(), unserved)
        answered = [(t, p) for t, p in starts if t not in unserved]
        ends = _offsets(cluster, admin, answered, OffsetSpec.latest(), unserved)
        bounds.update((key, (starts[key], end)) for key, end in ends.items())
    return bounds


def _offsets(
    cluster: ClusterConfig,
    admin: AdminClient,
    partitions: list[Key],
    spec: OffsetSpec,
    unserved: set[str],
) -> dict[Key, int]:
    """One ListOffsets call, waited for: the offset of each partition answered; the
    topics of those left out are added to `unserved`."""
    if not partitions:
        return {}
    futures = admin.list_offsets(
        {TopicPartition(t, p): spec for t, p in partitions}, request_timeout=READ_TIMEOUT_S
    )
    answers = {}
    for tp, future in futures.items():
        failed = _failure(future)
        if failed is None:
            answers[tp.topic, tp.partition] = future.result().offset
        elif error_code(failed) in ABSENT:
            unserved.add(tp.topic)
        else:
            raise ReplicatorError(
                f"cluster {cluster.alias!r} {tp.topic}[{tp.partition}]: offsets not read: "
                f"{error_text(failed)}; check that the cluster is reachable and the "
                "principal may DESCRIBE the topic"
            ) from failed
    return answers
