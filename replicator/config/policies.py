"""Replication policies: how remote topics are named and how their origin is told.

The methods are MirrorMaker 2's `ReplicationPolicy` methods in Python spelling
(`formatRemoteTopic` is `format_remote_topic`, `isInternalTopic` is
`is_internal_topic`, ...), with MM2's defaults, so a custom Java policy ports
line by line. A custom policy is a subclass of `ReplicationPolicy` named by its
dotted path in `replication.policy.class`.
"""

from __future__ import annotations

import importlib
import re
from abc import ABC, abstractmethod

from replicator.errors import ConfigError

DEFAULT_POLICY = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
IDENTITY_POLICY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"


class ReplicationPolicy(ABC):
    """Naming of remote topics for one flow (`source_alias` is the flow's source)."""

    def __init__(self, separator: str = ".", source_alias: str | None = None) -> None:
        if not separator:
            raise ConfigError("replication.policy.separator must not be empty")
        self.separator = separator
        self.source_alias = source_alias

    @abstractmethod
    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        """The name on the target of `topic` replicated from `source_alias`."""

    @abstractmethod
    def topic_source(self, topic: str) -> str | None:
        """The alias of the cluster `topic` was replicated from, or None if local."""

    @abstractmethod
    def upstream_topic(self, topic: str) -> str | None:
        """The name `topic` had one hop upstream, or None if local."""

    def original_topic(self, topic: str) -> str:
        """The name `topic` had on the cluster it was first produced to."""
        upstream = self.upstream_topic(topic)
        if upstream is None or upstream == topic:
            return topic
        return self.original_topic(upstream)

    def heartbeats_topic(self) -> str:
        return "heartbeats"

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        return f"mm2-offset-syncs.{cluster_alias}.internal"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        return f"{cluster_alias}.checkpoints.internal"

    def is_heartbeats_topic(self, topic: str) -> bool:
        return self.heartbeats_topic() == self.original_topic(topic)

    def is_checkpoints_topic(self, topic: str) -> bool:
        return topic.endswith(".checkpoints.internal")

    def is_mm2_internal_topic(self, topic: str) -> bool:
        return (topic.startswith("mm2") and topic.endswith(".internal")) or (
            self.is_checkpoints_topic(topic)
        )

    def is_internal_topic(self, topic: str) -> bool:
        """MM2's rule: Kafka's own topics, Connect's and MM2's internal topics."""
        kafka_internal = topic.startswith(("__", "."))
        connect_internal = topic.endswith(("-internal", ".internal"))
        return self.is_mm2_internal_topic(topic) or kafka_internal or connect_internal

    def is_cycle(self, topic: str, target_alias: str) -> bool:
        """True if `topic` came from `target_alias` (at any hop): replicating it
        there again would loop. Under Identity naming this cannot be told from
        the name; the provenance header catches those records instead."""
        source = self.topic_source(topic)
        if source is None:
            return False
        if source == target_alias:
            return True
        upstream = self.upstream_topic(topic)
        if upstream is None or upstream == topic:
            return False
        return self.is_cycle(upstream, target_alias)


class DefaultReplicationPolicy(ReplicationPolicy):
    """`<source><separator><topic>`, e.g. `primary.orders` on the DR cluster."""

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return f"{source_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        # Java's String.split drops trailing empty strings; match it.
        parts = re.split(re.escape(self.separator), topic)
        while parts and parts[-1] == "":
            parts.pop()
        return parts[0] if len(parts) >= 2 else None

    def upstream_topic(self, topic: str) -> str | None:
        source = self.topic_source(topic)
        if source is None:
            return None
        return topic[len(source) + len(self.separator) :]


class IdentityReplicationPolicy(DefaultReplicationPolicy):
    """Remote topics keep their names (heartbeats excepted, as in MM2). Loops
    between clusters are prevented per record from the provenance header."""

    def _looks_like_heartbeat(self, topic: str) -> bool:
        return topic.endswith(self.heartbeats_topic())

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        if self._looks_like_heartbeat(topic):
            return super().format_remote_topic(source_alias, topic)
        return topic

    def topic_source(self, topic: str) -> str | None:
        if self._looks_like_heartbeat(topic):
            return super().topic_source(topic)
        return self.source_alias

    def upstream_topic(self, topic: str) -> str | None:
        if self._looks_like_heartbeat(topic):
            return super().upstream_topic(topic)
        return topic

    def original_topic(self, topic: str) -> str:
        if self._looks_like_heartbeat(topic):
            return super().original_topic(topic)
        return topic


_BUILT_IN: dict[str, type[ReplicationPolicy]] = {
    DEFAULT_POLICY: DefaultReplicationPolicy,
    IDENTITY_POLICY: IdentityReplicationPolicy,
    "DefaultReplicationPolicy": DefaultReplicationPolicy,
    "IdentityReplicationPolicy": IdentityReplicationPolicy,
}


def load_policy(
    class_name: str, separator: str = ".", source_alias: str | None = None
) -> ReplicationPolicy:
    """The policy `replication.policy.class` names: MM2's Java class names map to
    the built-ins; anything else is a dotted Python path to a subclass."""
    policy_class = _BUILT_IN.get(class_name) or _import_policy(class_name)
    return policy_class(separator=separator, source_alias=source_alias)


def _import_policy(class_name: str) -> type[ReplicationPolicy]:
    module_name, _, attribute = class_name.rpartition(".")
    if not module_name:
        raise ConfigError(
            f"replication.policy.class={class_name!r}: give a dotted Python path "
            "(package.module.Class) or one of MM2's policy class names"
        )
    try:
        found = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(
            f"replication.policy.class={class_name!r} cannot be imported ({exc}); "
            "check the path and that its package is installed"
        ) from exc
    if not (isinstance(found, type) and issubclass(found, ReplicationPolicy)):
        raise ConfigError(
            f"replication.policy.class={class_name!r} is not a subclass of "
            "replicator.config.policies.ReplicationPolicy"
        )
    return found
