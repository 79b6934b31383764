"""Consumer groups of one cluster: which exist, where they are, whether anyone is in them.

Checkpoints, group-offset sync and the failover procedures all need these few
calls; they live here once, with errors that name the group and cluster.

A group's committed offsets are read and written through a consumer of the group
(which never joins it: no subscribe), not the admin client's
ListConsumerGroupOffsets / AlterConsumerGroupOffsets. librdkafka 2.16's admin path
takes the process down when the group's coordinator is loading or has moved, as it
does after any broker restart (SIGSEGV in `rd_kafka_cgrp_op`, or the assertion
`eonce->refcnt > 0`; librdkafka issue #5040); the consumer's own path retries there.
For the same reason no call here sends DescribeConsumerGroups: whether a group has
active members is read with ListGroups, and coordinators are located by a consumer
(`replicator.kafka.coordinator.UNEXPIRED_S` says why).
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import NamedTuple, TypeVar

from confluent_kafka import ConsumerGroupState, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from replicator.acls.principal import missing_acl
from replicator.config.model import ENGINE_COMMIT_METADATA, ClusterConfig, NameFilter
from replicator.errors import ReplicatorError
from replicator.kafka.clients import admin_for
from replicator.kafka.coordinator import ask_coordinator
from replicator.kafka.errors import error_code, error_text
from replicator.listing import first_of
from replicator.offsets.group_consumers import GroupConsumers

T = TypeVar("T")

_TIMEOUT_S = 30.0
#: Groups whose offsets `committed_many` reads (and `commit_many` writes) at once: each
#: is a few round trips to the group's coordinator, most of its time waiting.
_PARALLEL_READS = 8
#: Partitions asked for in one offset fetch: librdkafka matches each partition of the
#: answer to the request by a search through the request, so one fetch of n partitions
#: costs n * n / 2 comparisons (12.5 million at 5,000 partitions, per group, per round).
_OFFSETS_PER_REQUEST = 500
#: States in which a group has no members, so its offsets may be written from outside.
_IDLE = frozenset({ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD})
_REFUSED = frozenset({KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED})


class Committed(NamedTuple):
    """A group's committed position on one partition. A named tuple, not a dataclass:
    a checkpoint round makes one per group and partition (2,000,000 at 10,000
    partitions and 200 groups) and compares a group's list with the last round's."""

    topic: str
    partition: int
    offset: int
    metadata: str = ""


class GroupAdmin:
    """Group operations on one cluster."""

    def __init__(
        self, cluster: ClusterConfig, admin: AdminClient | None = None, *, keep_consumers: int = 0
    ) -> None:
        """`admin`: a client of `cluster` the caller already has (connected, its
        metadata read), rather than a new one. `keep_consumers`: keep the consumers of
        that many groups from one call to the next (`GroupConsumers`), for a loop that
        asks the same groups every round; `close` closes them."""
        self.cluster = cluster
        self._admin = admin_for(cluster) if admin is None else admin
        self._consumers = GroupConsumers(cluster, keep_consumers)
        #: The threads `committed_many` and `commit_many` read and write with, made at
        #: the first call and kept (a pool a call started eight threads every chunk).
        self._pool: ThreadPoolExecutor | None = None
        #: The thread `ask_about` asks in, made at its first call.
        self._asking: ThreadPoolExecutor | None = None

    def close(self) -> None:
        """Stop the threads of the many-group calls and close the kept consumers (the
        admin client needs no close)."""
        for pool in (self._pool, self._asking):
            if pool is not None:
                pool.shutdown(wait=False)
        self._pool = self._asking = None
        self._consumers.close()

    def _parallel(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(_PARALLEL_READS, thread_name_prefix="group-offsets")
        return self._pool

    def groups(self, wanted: NameFilter) -> list[str]:
        """Consumer groups of the cluster that `wanted` (a flow's groups filter) admits."""
        result = self._result(self._admin.list_consumer_groups(request_timeout=_TIMEOUT_S), "")
        return sorted(g.group_id for g in result.valid if wanted.matches(g.group_id))

    def committed(
        self,
        group: str,
        topics: Iterable[str] | None = None,
        *,
        partitions: Iterable[tuple[str, int]] | None = None,
    ) -> list[Committed]:
        """Every committed offset of `group` (on `topics` only, or on exactly
        `partitions`, when given: a caller asking many groups lists the partitions
        once, not once a group); none for a
        replicator's engine group (positions committed with `ENGINE_COMMIT_METADATA`),
        which no application resumes from: checkpoints, group sync, the supervisor, the
        drill and failover all read groups here, and never act on it."""
        wanted = (
            self._partitions(topics)
            if partitions is None
            else [TopicPartition(t, p) for t, p in partitions]
        )
        if not wanted:
            return []
        with self._consumers.lend(group) as consumer:
            try:
                found = [
                    tp
                    for at in range(0, len(wanted), _OFFSETS_PER_REQUEST)
                    for tp in consumer.committed(
                        wanted[at : at + _OFFSETS_PER_REQUEST], timeout=_TIMEOUT_S
                    )
                ]
            except KafkaException as exc:
                raise self._refused(
                    exc, f" group {group!r}", ("DESCRIBE", f"GROUP {group}")
                ) from exc
        failed = [tp for tp in found if tp.error is not None]
        if failed:
            raise ReplicatorError(
                f"cluster {self.cluster.alias!r} group {group!r}: committed offsets not read "
                f"for {_listed(failed)}; retry (a retriable error clears once the group "
                "coordinator is ready), and check that the principal may DESCRIBE the topics"
            )
        if any(tp.metadata == ENGINE_COMMIT_METADATA for tp in found):
            return []
        return [
            Committed(tp.topic, tp.partition, tp.offset, tp.metadata or "")
            for tp in found
            if tp.offset >= 0
        ]

    def is_idle(self, group: str) -> bool:
        """True when the group has no active members (its offsets can be set)."""
        return group in self.idle([group])

    def committed_many(
        self, groups: list[str], partitions: list[tuple[str, int]]
    ) -> dict[str, list[Committed]]:
        """`committed(group, partitions=partitions)` of every group, several at once."""
        if len(groups) <= 1:
            return {g: self.committed(g, partitions=partitions) for g in groups}
        found = self._parallel().map(lambda g: self.committed(g, partitions=partitions), groups)
        return dict(zip(groups, found, strict=True))

    def commit_many(self, positions: dict[str, list[TopicPartition]]) -> None:
        """`commit(group, positions[group])` of every group, several at once."""
        if len(positions) <= 1:
            for group, wanted in positions.items():
                self.commit(group, wanted)
            return
        list(self._parallel().map(lambda item: self.commit(*item), positions.items()))

    def idle(self, groups: list[str]) -> dict[str, bool]:
        """Those of `groups` with no active members, each with whether the cluster knows
        it at all (one it does not know has no committed offset to read): one ListGroups
        request per broker, not DescribeConsumerGroups (see `UNEXPIRED_S`). A group is
        listed by its coordinator; one not listed while a broker did not answer may be
        that broker's, so its state is not known: ReplicatorError, naming the groups."""
        if not groups:
            return {}
        future = self._admin.list_consumer_groups(request_timeout=_TIMEOUT_S)
        listed = self._result(future, " (listing its groups)", ("DESCRIBE", "GROUP *"))
        states = {g.group_id: g.state for g in listed.valid}
        unknown = [group for group in groups if group not in states]
        if listed.errors and unknown:
            raise ReplicatorError(
                f"cluster {self.cluster.alias!r}: {len(listed.errors)} broker(s) did not list "
                f"their groups ({error_text(listed.errors[0])}), so whether "
                f"{_names(unknown)} have active members is not known; the next round asks "
                "again"
            )
        return {
            group: group in states and states[group] != ConsumerGroupState.DEAD
            for group in groups
            if states.get(group, ConsumerGroupState.DEAD) in _IDLE
        }

    def ask_about(self, groups: list[str]) -> list[Future[object]]:
        """Have the cluster locate the coordinators of `groups` without waiting for the
        answer (on a cluster just started, it creates and loads its offsets topic
        first), in a thread of its own: each group's coordinator is asked for an offset
        by a consumer of the group (`ask_coordinator`). Not DescribeConsumerGroups, whose request
        timing out before the coordinator answered takes the process down (see
        `UNEXPIRED_S`). `answered` reads the futures."""
        if self._asking is None:
            self._asking = ThreadPoolExecutor(1, thread_name_prefix="group-coordinators")
        return [self._asking.submit(self._locate_all, groups)]

    def _locate_all(self, groups: list[str]) -> None:
        if len(groups) <= 1:
            for group in groups:
                self._locate(group)
            return
        list(self._parallel().map(self._locate, groups))

    def _locate(self, group: str) -> None:
        try:
            ask_coordinator(self.cluster, group, _TIMEOUT_S)
        except KafkaException as exc:
            raise self._refused(exc, f" group {group!r}", ("DESCRIBE", f"GROUP {group}")) from exc

    def answered(self, asked: list[Future[object]]) -> bool | None:
        """None while `ask_about`'s futures are pending, True once all answered;
        ReplicatorError naming the first that failed."""
        if not all(future.done() for future in asked):
            return None
        for future in asked:
            self._result(future, " (locating group coordinators)")
        return True

    def commit(self, group: str, positions: list[TopicPartition]) -> None:
        """Set `group`'s committed offsets; the group must have no active members."""
        if not positions:
            return
        with self._consumers.lend(group) as consumer:
            try:  # `_OFFSETS_PER_REQUEST` at a time (each partition's commit stands alone)
                result = [
                    tp
                    for at in range(0, len(positions), _OFFSETS_PER_REQUEST)
                    for tp in consumer.commit(
                        offsets=positions[at : at + _OFFSETS_PER_REQUEST], asynchronous=False
                    )
                    or []
                ]
            except KafkaException as exc:
                raise self._refused(exc, f" group {group!r}", ("READ", f"GROUP {group}")) from exc
        # The request can succeed while single partitions fail (e.g. the coordinator
        # is still loading): those would be lost silently.
        failed = [tp for tp in result if tp.error is not None]
        if failed:
            raise ReplicatorError(
                f"cluster {self.cluster.alias!r} group {group!r}: offsets not committed for "
                f"{_listed(failed)}; retry (a retriable error clears once the group "
                "coordinator is ready)"
            )

    def end_offsets(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """High watermarks of the partitions, in one request per broker."""
        return self._list_offsets(partitions, OffsetSpec.latest())

    def start_offsets(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Log start offsets of the partitions (what retention has not deleted)."""
        return self._list_offsets(partitions, OffsetSpec.earliest())

    def _list_offsets(
        self, partitions: list[tuple[str, int]], spec: OffsetSpec
    ) -> dict[tuple[str, int], int]:
        """One ListOffsets call, after the metadata is listed: a call that finds a topic
        missing from the client's metadata cache (a new client's first call) looks its
        leaders up on librdkafka's asynchronous path, which waited 3 s in about one
        verification plan in twenty and is the path of a crash
        (`replicator.kafka.bounds`)."""
        if not partitions:
            return {}
        try:
            self._admin.list_topics(timeout=_TIMEOUT_S)
        except KafkaException as exc:
            raise self._refused(exc, "", None) from exc
        futures = self._admin.list_offsets(
            {TopicPartition(t, p): spec for t, p in partitions},
            request_timeout=_TIMEOUT_S,
        )
        return {
            (tp.topic, tp.partition): self._result(
                future, f" {tp.topic}[{tp.partition}]", ("DESCRIBE", f"TOPIC {tp.topic}")
            ).offset
            for tp, future in futures.items()
        }

    def _partitions(self, topics: Iterable[str] | None) -> list[TopicPartition]:
        """Every partition of `topics` (default: every topic but Kafka's internal ones)
        that exists on the cluster."""
        wanted = None if topics is None else set(topics)
        try:
            metadata = self._admin.list_topics(timeout=_TIMEOUT_S)
        except KafkaException as exc:
            raise self._refused(exc, "", None) from exc
        return [
            TopicPartition(name, partition)
            for name, topic in sorted(metadata.topics.items())
            if (name in wanted if wanted is not None else not name.startswith("__"))
            and topic.error is None
            for partition in sorted(topic.partitions)
        ]

    def _result(self, future: Future[T], what: str, needs: tuple[str, str] | None = None) -> T:
        """The future's result; a refusal names the ACL `needs` (operation, resource)
        and the principal that lacks it."""
        try:
            return future.result(timeout=_TIMEOUT_S)
        except TimeoutError as exc:
            raise ReplicatorError(
                f"cluster {self.cluster.alias!r}{what}: no answer within {_TIMEOUT_S:.0f}s "
                "(a group coordinator still loading answers late on a cluster just started); "
                "the next round asks again"
            ) from exc
        except Exception as exc:
            raise self._refused(exc, what, needs) from exc

    def _refused(self, exc: Exception, what: str, needs: tuple[str, str] | None) -> ReplicatorError:
        """`exc` as the error callers see: a refusal names the ACL `needs` (operation,
        resource) and the principal that lacks it."""
        if needs is not None and error_code(exc) in _REFUSED:
            return ReplicatorError(
                f"cluster {self.cluster.alias!r}{what}: {error_text(exc)}; "
                + missing_acl(self.cluster, *needs)
            )
        return ReplicatorError(
            f"cluster {self.cluster.alias!r}{what}: {error_text(exc)}; check that the "
            "cluster is reachable and the principal may DESCRIBE (and READ) consumer groups"
        )


def _names(groups: list[str]) -> str:
    return first_of([repr(g) for g in groups])


def _listed(partitions: list[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}[{tp.partition}]@{tp.offset}: {tp.error}" for tp in partitions)
