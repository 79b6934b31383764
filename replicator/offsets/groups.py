"""Consumer groups of one cluster: which exist, where they are, whether anyone is in them.

Checkpoints, group-offset sync and the failover procedures all need these few
admin calls; they live here once, with errors that name the group and cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    TopicPartition,
)
from confluent_kafka.admin import OffsetSpec

from replicator.acls.principal import missing_acl
from replicator.config.model import ClusterConfig, NameFilter
from replicator.errors import ReplicatorError
from replicator.kafka.clients import admin_for
from replicator.kafka.errors import error_code, error_text

_TIMEOUT_S = 30.0
#: States in which a group has no members, so its offsets may be written from outside.
_IDLE = frozenset({ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD})
_REFUSED = frozenset({KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED})


@dataclass(frozen=True)
class Committed:
    """A group's committed position on one partition."""

    topic: str
    partition: int
    offset: int
    metadata: str = ""


class GroupAdmin:
    """Group operations on one cluster."""

    def __init__(self, cluster: ClusterConfig) -> None:
        self.cluster = cluster
        self._admin = admin_for(cluster)

    def groups(self, wanted: NameFilter) -> list[str]:
        """Consumer groups of the cluster that `wanted` (a flow's groups filter) admits."""
        result = self._result(self._admin.list_consumer_groups(request_timeout=_TIMEOUT_S), "")
        return sorted(g.group_id for g in result.valid if wanted.matches(g.group_id))

    def committed(self, group: str) -> list[Committed]:
        """Every committed offset of `group`."""
        request = [ConsumerGroupTopicPartitions(group)]
        futures = self._admin.list_consumer_group_offsets(request, request_timeout=_TIMEOUT_S)
        result = self._result(futures[group], f" group {group!r}", ("DESCRIBE", f"GROUP {group}"))
        return [
            Committed(tp.topic, tp.partition, tp.offset, tp.metadata or "")
            for tp in result.topic_partitions
            if tp.offset >= 0
        ]

    def is_idle(self, group: str) -> bool:
        """True when the group has no active members (its offsets can be set)."""
        futures = self._admin.describe_consumer_groups([group], request_timeout=_TIMEOUT_S)
        description = self._result(
            futures[group], f" group {group!r}", ("DESCRIBE", f"GROUP {group}")
        )
        return description.state in _IDLE

    def commit(self, group: str, positions: list[TopicPartition]) -> None:
        """Set `group`'s committed offsets; the group must have no active members."""
        request = [ConsumerGroupTopicPartitions(group, positions)]
        futures = self._admin.alter_consumer_group_offsets(request, request_timeout=_TIMEOUT_S)
        result = self._result(futures[group], f" group {group!r}", ("READ", f"GROUP {group}"))
        # The request can succeed while single partitions fail (e.g. the coordinator
        # is still loading): those would be lost silently.
        failed = [tp for tp in result.topic_partitions if tp.error is not None]
        if failed:
            listed = ", ".join(
                f"{tp.topic}[{tp.partition}]@{tp.offset}: {tp.error}" for tp in failed
            )
            raise ReplicatorError(
                f"cluster {self.cluster.alias!r} group {group!r}: offsets not committed for "
                f"{listed}; retry (a retriable error clears once the group coordinator is ready)"
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
        if not partitions:
            return {}
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

    def _result(self, future: object, what: str, needs: tuple[str, str] | None = None) -> object:
        """The future's result; a refusal names the ACL `needs` (operation, resource)
        and the principal that lacks it."""
        try:
            return future.result(timeout=_TIMEOUT_S)  # type: ignore[attr-defined]
        except Exception as exc:
            if needs is not None and error_code(exc) in _REFUSED:
                raise ReplicatorError(
                    f"cluster {self.cluster.alias!r}{what}: {error_text(exc)}; "
                    + missing_acl(self.cluster, *needs)
                ) from exc
            raise ReplicatorError(
                f"cluster {self.cluster.alias!r}{what}: {error_text(exc)}; check that the "
                "cluster is reachable and the principal may DESCRIBE (and READ) consumer groups"
            ) from exc
