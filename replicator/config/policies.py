"""Replication policies: how remote topics are named and how their origin is told.

The methods are MirrorMaker 2's `ReplicationPolicy` methods in Python spelling
(`formatRemoteTopic` is `format_remote_topic`, `isInternalTopic` is
`is_internal_topic`, ...), with MM2's defaults, so a custom Java policy ports
line by line. A custom policy is a subclass of `ReplicationPolicy`, registered
under its Java class name by an installed package (`replicator.config.ports`) or
named by its dotted Python path in `replication.policy.class`.
"""

from __future__ import annotations

import importlib
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping

from replicator.config.ports import POLICIES, not_ported, registered
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
        #: `replication.policy.internal.topic.separator.enabled` (MM2's, true by default):
        #: the internal topics' names use the separator too.
        self.internal_separator_enabled = True

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

    def _internal_separator(self) -> str:
        return self.separator if self.internal_separator_enabled else "."

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        sep = self._internal_separator()
        return f"mm2-offset-syncs{sep}{cluster_alias}{sep}internal"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        sep = self._internal_separator()
        return f"{cluster_alias}{sep}checkpoints{sep}internal"

    def is_heartbeats_topic(self, topic: str) -> bool:
        return self.heartbeats_topic() == self.original_topic(topic)

    def is_checkpoints_topic(self, topic: str) -> bool:
        sep = self._internal_separator()
        return topic.endswith(f"{sep}checkpoints{sep}internal")

    def is_mm2_internal_topic(self, topic: str) -> bool:
        internal = f"{self._internal_separator()}internal"
        return (topic.startswith("mm2") and topic.endswith(internal)) or (
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
    class_name: str,
    separator: str = ".",
    source_alias: str | None = None,
    *,
    internal_separator: bool = True,
    settings: Mapping[str, str] | None = None,
) -> ReplicationPolicy:
    """The policy `replication.policy.class` names: MM2's Java class names map to
    the built-ins; another name is looked up among the ports installed packages
    register (`replicator.config.ports`), then as a dotted Python path."""
    policy_class = (
        _BUILT_IN.get(class_name) or _registered_policy(class_name) or _import_policy(class_name)
    )
    policy = policy_class(separator=separator, source_alias=source_alias)
    policy.internal_separator_enabled = internal_separator
    if settings is not None and callable(getattr(policy, "configure", None)):
        try:
            # As MM2 calls configure(Map) on a policy (found callable above).
            policy.configure(dict(settings))  # type: ignore[attr-defined]
        except Exception as exc:  # a port failing: name it, keep the cause
            raise ConfigError(
                f"replication.policy.class = {class_name}: configure failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
    return policy


def _registered_policy(class_name: str) -> type[ReplicationPolicy] | None:
    found = registered(POLICIES, class_name)
    if found is None:
        return None
    if not (isinstance(found, type) and issubclass(found, ReplicationPolicy)):
        raise ConfigError(
            f"replication.policy.class = {class_name}: the port registered in {POLICIES} "
            f"({found!r}) is not a subclass of replicator.config.policies.ReplicationPolicy"
        )
    return found


def _import_policy(class_name: str) -> type[ReplicationPolicy]:
    module_name, _, attribute = class_name.rpartition(".")
    not_found = not_ported(
        "replication.policy.class", class_name, POLICIES,
        "a subclass of replicator.config.policies.ReplicationPolicy",
    )  # fmt: skip
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            # Not a Python path either: a Java class whose port is not installed.
            raise not_found from None
        raise ConfigError(
            f"replication.policy.class={class_name!r}: module {module_name} cannot be "
            f"imported ({exc})"
        ) from exc
    except ImportError as exc:
        raise ConfigError(
            f"replication.policy.class={class_name!r}: module {module_name} cannot be "
            f"imported ({exc})"
        ) from exc
    found = getattr(module, attribute, None)
    if found is None:
        raise not_found
    if not (isinstance(found, type) and issubclass(found, ReplicationPolicy)):
        raise ConfigError(
            f"replication.policy.class={class_name!r} is not a subclass of "
            "replicator.config.policies.ReplicationPolicy"
        )
    return found
