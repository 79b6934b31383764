"""Every key an `mm2.properties` file may hold, and how each is read.

`SETTINGS` are the replication settings (MM2's and ours) with their readers and
the FlowConfig field each fills; Connect worker and MM2 connector settings the
replicator has no use for are accepted (`is_connect_setting`); client settings are
recognised in their three spellings (`client_key`). The `*_candidates` are the
keys known at each position, for the "did you mean" of an unknown one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

from replicator.config.clients import CLIENT_KINDS, ClientKind, client_keys, is_client_key
from replicator.config.values import (
    at_least,
    boolean,
    choice,
    class_name,
    exactly_once_source_support,
    filter_class,
    interval,
    offset_syncs_location,
    pattern_list,
    port,
    replication_factor,
    separator,
)

Role = Literal["source", "target"]
_KINDS: dict[str, ClientKind] = {kind: kind for kind in CLIENT_KINDS}
_ROLES: dict[str, Role] = {"source": "source", "target": "target"}


class Setting(NamedTuple):
    """A replication setting: how its value is read, and which FlowConfig field it fills."""

    parse: Callable[[str, str], Any]
    field: str | None  # None: combined with other keys by the loader


SETTINGS: dict[str, Setting] = {
    "replication.policy.class": Setting(class_name, "replication_policy_class"),
    "replication.policy.separator": Setting(separator, "replication_policy_separator"),
    "replication.factor": Setting(replication_factor, "replication_factor"),
    "tasks.max": Setting(at_least(1), "tasks_max"),
    "offset.lag.max": Setting(at_least(0), "offset_lag_max"),
    "refresh.topics.enabled": Setting(boolean, "refresh_topics_enabled"),
    "refresh.topics.interval.seconds": Setting(interval, "refresh_topics_interval_seconds"),
    "refresh.groups.enabled": Setting(boolean, "refresh_groups_enabled"),
    "refresh.groups.interval.seconds": Setting(interval, "refresh_groups_interval_seconds"),
    "sync.topic.configs.enabled": Setting(boolean, "sync_topic_configs_enabled"),
    "sync.topic.configs.interval.seconds": Setting(interval, "sync_topic_configs_interval_seconds"),
    "sync.topic.acls.enabled": Setting(boolean, "sync_topic_acls_enabled"),
    "sync.topic.acls.interval.seconds": Setting(interval, "sync_topic_acls_interval_seconds"),
    "emit.heartbeats.enabled": Setting(boolean, "emit_heartbeats_enabled"),
    "emit.heartbeats.interval.seconds": Setting(interval, "emit_heartbeats_interval_seconds"),
    "emit.checkpoints.enabled": Setting(boolean, "emit_checkpoints_enabled"),
    "emit.checkpoints.interval.seconds": Setting(interval, "emit_checkpoints_interval_seconds"),
    "sync.group.offsets.enabled": Setting(boolean, "sync_group_offsets_enabled"),
    "sync.group.offsets.interval.seconds": Setting(interval, "sync_group_offsets_interval_seconds"),
    "offset-syncs.topic.location": Setting(offset_syncs_location, "offset_syncs_topic_location"),
    "heartbeats.topic.replication.factor": Setting(
        replication_factor, "heartbeats_topic_replication_factor"
    ),
    "checkpoints.topic.replication.factor": Setting(
        replication_factor, "checkpoints_topic_replication_factor"
    ),
    "offset-syncs.topic.replication.factor": Setting(
        replication_factor, "offset_syncs_topic_replication_factor"
    ),
    # Ours (no MM2 equivalent).
    "retention.gap.policy": Setting(choice("fail", "skip"), "retention_gap_policy"),
    "topic.reset.policy": Setting(choice("fail", "skip"), "topic_reset_policy"),
    "oversized.record.policy": Setting(choice("fail", "skip"), "oversized_record_policy"),
    "metrics.port": Setting(port, "metrics_port"),
    "replicator.takeover.uncertain": Setting(choice("refuse", "at-least-once"), "takeover_uncertain"),
    # Combined by the loader.
    "status.topic.replication.factor": Setting(replication_factor, None),  # ours
    "status.storage.replication.factor": Setting(replication_factor, None),
    "topics": Setting(pattern_list, None),
    "topics.exclude": Setting(pattern_list, None),
    "topics.blacklist": Setting(pattern_list, None),
    "groups": Setting(pattern_list, None),
    "groups.exclude": Setting(pattern_list, None),
    "groups.blacklist": Setting(pattern_list, None),
    "config.properties.exclude": Setting(pattern_list, None),
    "config.properties.blacklist": Setting(pattern_list, None),
    "exactly.once": Setting(boolean, None),
    "exactly.once.source.support": Setting(exactly_once_source_support, None),
    "topic.filter.class": Setting(filter_class("DefaultTopicFilter"), None),
    "group.filter.class": Setting(filter_class("DefaultGroupFilter"), None),
    "config.property.filter.class": Setting(filter_class("DefaultConfigPropertyFilter"), None),
}

# Connect worker settings MM2 also reads from the target cluster's (`<target>.<key>`).
TARGET_CLUSTER_SETTINGS = ("exactly.once.source.support", "status.storage.replication.factor")

# MM2 connector and Connect worker settings that the replicator accepts and does not use.
_CONNECT_SETTINGS = frozenset(
    [
        "name",
        "connector.class",
        "source.cluster.alias",
        "target.cluster.alias",
        "consumer.poll.timeout.ms",
        "admin.timeout.ms",
        "emit.offset-syncs.enabled",
        "use.defaults.from",
        "forwarding.admin.class",
        "default.replication.policy.heartbeats.topic.name",
        "key.converter",
        "value.converter",
        "header.converter",
        "transforms",
        "predicates",
        "exactly.once.support",
        "transaction.boundary",
        "transaction.boundary.interval.ms",
        "offsets.storage.topic",
        "config.action.reload",
        "group.id",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "rebalance.timeout.ms",
        "offset.flush.interval.ms",
        "offset.flush.timeout.ms",
        "task.shutdown.graceful.timeout.ms",
        "worker.sync.timeout.ms",
        "worker.unsync.backoff.ms",
        "scheduled.rebalance.max.delay.ms",
        "connect.protocol",
        "listeners",
        "rest.advertised.host.name",
        "rest.advertised.port",
        "rest.advertised.listener",
        "rest.host.name",
        "rest.port",
        "admin.listeners",
        "plugin.path",
        "plugin.discovery",
        "config.providers",
        "connector.client.config.override.policy",
        "response.http.headers.config",
        "topic.creation.enable",
        "offset.storage.file.filename",
        "dedicated.mode.enable.internal.rest",
        "ssl.client.auth",
        "rest.extension.classes",
        "topic.tracking.enable",
        "topic.tracking.allow.reset",
    ]
)
_CONNECT_PREFIXES = (
    "key.converter.",
    "value.converter.",
    "header.converter.",
    "offset.storage.",
    "config.storage.",
    "status.storage.",
    "config.providers.",
    "transforms.",
    "predicates.",
    "errors.",
    "topic.creation.",
    "rest.",
    "listeners.",
    "admin.listeners.",
    "inter.worker.",
    "access.control.",
    "replication.policy.",
    "checkpoints.topic.",
    "heartbeats.topic.",
    "offset-syncs.topic.",
    "worker.",
    "task.",
)


def is_connect_setting(name: str) -> bool:
    return name in _CONNECT_SETTINGS or name.startswith(_CONNECT_PREFIXES)


class ClientKey(NamedTuple):
    """A client setting found in a key: which client kind and role it is for, if any."""

    name: str
    kind: ClientKind | None
    role: Role | None


def client_key(rest: str, *, with_role: bool) -> ClientKey | None:
    """`security.protocol`, `consumer.x` or (flow level) `source.consumer.x`, else None."""
    if is_client_key(rest):
        return ClientKey(rest, None, None)
    head, _, tail = rest.partition(".")
    kind = _KINDS.get(head)
    if kind is not None and is_client_key(tail):
        return ClientKey(tail, kind, None)
    role = _ROLES.get(head) if with_role else None
    if role is not None:
        kind_name, _, name = tail.partition(".")
        kind = _KINDS.get(kind_name)
        if kind is not None and is_client_key(name):
            return ClientKey(name, kind, role)
    return None


@functools.cache
def top_candidates() -> frozenset[str]:
    kinds = frozenset(f"{kind}.{name}" for kind in CLIENT_KINDS for name in client_keys())
    return frozenset(SETTINGS) | _CONNECT_SETTINGS | client_keys() | kinds | {"clusters"}


@functools.cache
def cluster_candidates() -> frozenset[str]:
    kinds = frozenset(f"{kind}.{name}" for kind in CLIENT_KINDS for name in client_keys())
    return _CONNECT_SETTINGS | client_keys() | kinds | frozenset(TARGET_CLUSTER_SETTINGS)


@functools.cache
def flow_candidates() -> frozenset[str]:
    kinds = frozenset(
        f"{role}{kind}.{name}"
        for role in ("", "source.", "target.")
        for kind in CLIENT_KINDS
        for name in client_keys()
    )
    return frozenset(SETTINGS) | _CONNECT_SETTINGS | kinds | {"enabled"}
