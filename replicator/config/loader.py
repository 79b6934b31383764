"""Load an MM2 `mm2.properties` file (or a mapping) into a `ReplicatorConfig`.

A user migrating from MirrorMaker 2 points the replicator at their existing
file, so this follows MM2's own reading of it (MirrorMakerConfig,
MirrorConnectorConfig and friends, Kafka 3.x): the same keys, defaults,
aliases and precedence. Where MM2 silently ignores something that cannot be
what the user meant, this fails fast with a one-line message naming the key.

Keys are read in three positions:

* top level: `topics = .*`, `security.protocol = SSL`, `consumer.fetch.min.bytes = 1`
* cluster level: `<alias>.<key>`, e.g. `us-east.bootstrap.servers`
* flow level: `<source>-><target>.<key>`, e.g. `us-west->us-east.topics`

Replication settings (`topics`, `tasks.max`, `emit.checkpoints.*`, ...) are
flow-level over top-level, as in MM2's connectorBaseConfig. Client settings
follow `_client_settings`, whose docstring gives the exact order.

Connect worker and MM2 connector settings that the replicator has no use for
(`offset.storage.replication.factor`, `key.converter`, ...) are accepted and
logged at DEBUG. A key that is neither an MM2/Connect setting nor a Kafka
client setting nor one of ours is an error, with the closest known key.
"""

from __future__ import annotations

import difflib
import functools
import logging
import os
import re
import warnings
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any, Literal, NamedTuple

from replicator.config.clients import (
    CLIENT_KINDS,
    ClientKind,
    Translation,
    client_keys,
    is_client_key,
    is_connection_key,
    librdkafka_name,
    translate,
)
from replicator.config.model import ClusterConfig, FlowConfig, NameFilter, ReplicatorConfig
from replicator.config.properties import read_properties, resolve_references
from replicator.config.redact import invalid_value
from replicator.errors import ConfigError

_log = logging.getLogger(__name__)

Role = Literal["source", "target"]
Flow = tuple[str, str]
_KINDS: dict[str, ClientKind] = {kind: kind for kind in CLIENT_KINDS}
_ROLES: dict[str, Role] = {"source": "source", "target": "target"}

# MM2's defaults (DefaultTopicFilter, DefaultGroupFilter, DefaultConfigPropertyFilter).
DEFAULT_TOPICS = ".*"
DEFAULT_TOPICS_EXCLUDE = r".*[\-\.]internal, .*\.replica, __.*"
DEFAULT_GROUPS = ".*"
DEFAULT_GROUPS_EXCLUDE = "console-consumer-.*, connect-.*, __.*"
DEFAULT_CONFIG_PROPERTIES_EXCLUDE = (
    r"follower\.replication\.throttled\.replicas, leader\.replication\.throttled\.replicas, "
    r"message\.timestamp\.difference\.max\.ms, message\.timestamp\.type, "
    r"unclean\.leader\.election\.enable, min\.insync\.replicas"
)

_MM2_PACKAGE = "org.apache.kafka.connect.mirror."
_CLASS_NAME = re.compile(r"[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)+")
_LIST_SEPARATOR = re.compile(r"\s*,\s*")
_INLINE_COMMENT = re.compile(r"\s#")


# --- value parsers: (key as written, value) -> typed value ----------------------------


def _boolean(key: str, value: str) -> bool:
    if value.lower() not in ("true", "false"):
        raise invalid_value(key, value, "true or false")
    return value.lower() == "true"


def _integer(key: str, value: str, expected: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise invalid_value(key, value, expected) from None


def _at_least(minimum: int) -> Callable[[str, str], int]:
    expected = f"an integer >= {minimum}"

    def parse(key: str, value: str) -> int:
        number = _integer(key, value, expected)
        if number < minimum:
            raise invalid_value(key, value, expected)
        return number

    return parse


def _replication_factor(key: str, value: str) -> int:
    # -1 asks the broker for its default.replication.factor (KIP-464), as in MM2.
    expected = "an integer >= 1, or -1 for the broker default"
    number = _integer(key, value, expected)
    if number < 1 and number != -1:
        raise invalid_value(key, value, expected)
    return number


def _interval(key: str, value: str) -> float:
    expected = "a positive number of seconds"
    try:
        seconds = float(value)
    except ValueError:
        raise invalid_value(key, value, expected) from None
    if not seconds > 0 or seconds == float("inf"):
        raise invalid_value(key, value, expected)
    return seconds


def _port(key: str, value: str) -> int:
    number = _integer(key, value, "a TCP port (1-65535)")
    if not 1 <= number <= 65535:
        raise invalid_value(key, value, "a TCP port (1-65535)")
    return number


def _choice(*options: str) -> Callable[[str, str], str]:
    def parse(key: str, value: str) -> str:
        if value not in options:
            raise invalid_value(key, value, " or ".join(options))
        return value

    return parse


def _offset_syncs_location(key: str, value: str) -> str:
    # MM2 also takes `target`; the replicator writes offset syncs to the source only,
    # and reading them from the target (verification, translation) would find none.
    if value == "target":
        raise ConfigError(
            f"{key} = target is not supported: the replicator writes offset syncs to the "
            "source cluster only; remove the key or set it to source"
        )
    return _choice("source")(key, value)


def _acl_sync(key: str, value: str) -> bool:
    # MM2 defaults to true; here the default is false and true is refused, so that no
    # file asks for ACL sync and silently gets none.
    if _boolean(key, value):
        raise ConfigError(
            f"{key} = true is not supported: the replicator does not sync topic ACLs yet; "
            "remove the key or set it to false, and grant the ACLs on the target yourself"
        )
    return False


def _class_name(key: str, value: str) -> str:
    # Java class names (org.apache.kafka.connect.mirror.IdentityReplicationPolicy) and
    # dotted Python paths (package.module.ClassName) look alike; policies.py resolves them.
    if not _CLASS_NAME.fullmatch(value):
        raise invalid_value(key, value, "a fully qualified class name (package.ClassName)")
    return value


def _separator(key: str, value: str) -> str:
    if not value:
        raise invalid_value(key, value, "a non-empty separator")
    return value


def _exactly_once_source_support(key: str, value: str) -> bool:
    # Connect's worker setting: "preparing" is the first step of a rolling upgrade.
    if value.lower() not in ("enabled", "preparing", "disabled"):
        raise invalid_value(key, value, "enabled, preparing or disabled")
    return value.lower() == "enabled"


def _filter_class(default: str) -> Callable[[str, str], str]:
    """MM2's default filter class is accepted; a custom (Java) one cannot be honoured."""

    def parse(key: str, value: str) -> str:
        if value != _MM2_PACKAGE + default:
            raise ConfigError(
                f"{key}: custom Java filter classes cannot run in the replicator; "
                "express the filter with topics/topics.exclude, groups/groups.exclude "
                "and config.properties.exclude"
            )
        return value

    return parse


def _pattern_list(key: str, value: str) -> tuple[re.Pattern[str], ...]:
    """A comma-separated list of Java regexes, as MM2's ConfigDef LIST reads it.

    An empty list matches nothing, as in MM2 (MirrorUtils.compilePatternList).
    """
    items = [item for item in _LIST_SEPARATOR.split(value.strip()) if item]
    return tuple(_java_regex(key, item) for item in items)


def _java_regex(key: str, pattern: str) -> re.Pattern[str]:
    """Compile a Java regex with Python's `re`, translating what differs.

    Possessive quantifiers and atomic groups are the same in Python 3.11+.
    `\\Q...\\E`, `\\z`, `\\Z` and `(?<name>...)` are translated; Java's
    `\\p{...}` classes and set operations in classes are rejected clearly.
    """
    if _INLINE_COMMENT.search(pattern):
        raise ConfigError(
            f"{key}: pattern {pattern!r} holds an end-of-line comment; .properties files only "
            "have whole-line comments: move the comment to its own line"
        )
    translated = _python_regex(key, pattern)
    with warnings.catch_warnings():
        # Python warns (FutureWarning) where Java's class syntax ([a&&[b]]) differs.
        warnings.simplefilter("error", FutureWarning)
        try:
            return re.compile(translated)
        except (re.error, FutureWarning) as exc:
            raise ConfigError(f"{key}: invalid regular expression {pattern!r}: {exc}") from None


def _python_regex(key: str, pattern: str) -> str:
    out: list[str] = []
    position = 0
    while position < len(pattern):
        if pattern.startswith("\\", position) and position + 1 < len(pattern):
            escape = pattern[position + 1]
            if escape == "Q":
                end = pattern.find("\\E", position + 2)
                end = len(pattern) if end < 0 else end
                out.append(re.escape(pattern[position + 2 : end]))
                position = end + 2
                continue
            if escape in "pP":
                raise ConfigError(
                    f"{key}: pattern {pattern!r} uses Java's \\{escape}{{...}} character classes, "
                    "which Python lacks; write the class out, e.g. [a-zA-Z0-9]"
                )
            out.append({"z": r"\Z", "Z": r"(?=\n?\Z)"}.get(escape, "\\" + escape))
            position += 2
        elif pattern.startswith("(?<", position) and pattern[position + 3 : position + 4] not in (
            "=",
            "!",
        ):
            out.append("(?P<")
            position += 3
        else:
            out.append(pattern[position])
            position += 1
    return "".join(out)


class _Setting(NamedTuple):
    """A replication setting: how its value is read, and which FlowConfig field it fills."""

    parse: Callable[[str, str], Any]
    field: str | None  # None: combined with other keys by the loader


_SETTINGS: dict[str, _Setting] = {
    "replication.policy.class": _Setting(_class_name, "replication_policy_class"),
    "replication.policy.separator": _Setting(_separator, "replication_policy_separator"),
    "replication.factor": _Setting(_replication_factor, "replication_factor"),
    "tasks.max": _Setting(_at_least(1), "tasks_max"),
    "offset.lag.max": _Setting(_at_least(0), "offset_lag_max"),
    "refresh.topics.enabled": _Setting(_boolean, "refresh_topics_enabled"),
    "refresh.topics.interval.seconds": _Setting(_interval, "refresh_topics_interval_seconds"),
    "refresh.groups.enabled": _Setting(_boolean, "refresh_groups_enabled"),
    "refresh.groups.interval.seconds": _Setting(_interval, "refresh_groups_interval_seconds"),
    "sync.topic.configs.enabled": _Setting(_boolean, "sync_topic_configs_enabled"),
    "sync.topic.configs.interval.seconds": _Setting(
        _interval, "sync_topic_configs_interval_seconds"
    ),
    "sync.topic.acls.enabled": _Setting(_acl_sync, "sync_topic_acls_enabled"),
    "sync.topic.acls.interval.seconds": _Setting(_interval, "sync_topic_acls_interval_seconds"),
    "emit.heartbeats.enabled": _Setting(_boolean, "emit_heartbeats_enabled"),
    "emit.heartbeats.interval.seconds": _Setting(_interval, "emit_heartbeats_interval_seconds"),
    "emit.checkpoints.enabled": _Setting(_boolean, "emit_checkpoints_enabled"),
    "emit.checkpoints.interval.seconds": _Setting(_interval, "emit_checkpoints_interval_seconds"),
    "sync.group.offsets.enabled": _Setting(_boolean, "sync_group_offsets_enabled"),
    "sync.group.offsets.interval.seconds": _Setting(
        _interval, "sync_group_offsets_interval_seconds"
    ),
    "offset-syncs.topic.location": _Setting(_offset_syncs_location, "offset_syncs_topic_location"),
    "heartbeats.topic.replication.factor": _Setting(
        _replication_factor, "heartbeats_topic_replication_factor"
    ),
    "checkpoints.topic.replication.factor": _Setting(
        _replication_factor, "checkpoints_topic_replication_factor"
    ),
    "offset-syncs.topic.replication.factor": _Setting(
        _replication_factor, "offset_syncs_topic_replication_factor"
    ),
    # Ours (no MM2 equivalent).
    "retention.gap.policy": _Setting(_choice("fail", "skip"), "retention_gap_policy"),
    "topic.reset.policy": _Setting(_choice("fail", "skip"), "topic_reset_policy"),
    "oversized.record.policy": _Setting(_choice("fail", "skip"), "oversized_record_policy"),
    "metrics.port": _Setting(_port, "metrics_port"),
    # Combined by the loader.
    "status.topic.replication.factor": _Setting(_replication_factor, None),  # ours
    "status.storage.replication.factor": _Setting(_replication_factor, None),
    "topics": _Setting(_pattern_list, None),
    "topics.exclude": _Setting(_pattern_list, None),
    "topics.blacklist": _Setting(_pattern_list, None),
    "groups": _Setting(_pattern_list, None),
    "groups.exclude": _Setting(_pattern_list, None),
    "groups.blacklist": _Setting(_pattern_list, None),
    "config.properties.exclude": _Setting(_pattern_list, None),
    "config.properties.blacklist": _Setting(_pattern_list, None),
    "exactly.once": _Setting(_boolean, None),
    "exactly.once.source.support": _Setting(_exactly_once_source_support, None),
    "topic.filter.class": _Setting(_filter_class("DefaultTopicFilter"), None),
    "group.filter.class": _Setting(_filter_class("DefaultGroupFilter"), None),
    "config.property.filter.class": _Setting(_filter_class("DefaultConfigPropertyFilter"), None),
}

# Connect worker settings MM2 also reads from the target cluster's (`<target>.<key>`).
_TARGET_CLUSTER_SETTINGS = ("exactly.once.source.support", "status.storage.replication.factor")

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


def _is_connect_setting(name: str) -> bool:
    return name in _CONNECT_SETTINGS or name.startswith(_CONNECT_PREFIXES)


class _ClientKey(NamedTuple):
    """A client setting found in a key: which client kind and role it is for, if any."""

    name: str
    kind: ClientKind | None
    role: Role | None


def _client_key(rest: str, *, with_role: bool) -> _ClientKey | None:
    """`security.protocol`, `consumer.x` or (flow level) `source.consumer.x`, else None."""
    if is_client_key(rest):
        return _ClientKey(rest, None, None)
    head, _, tail = rest.partition(".")
    kind = _KINDS.get(head)
    if kind is not None and is_client_key(tail):
        return _ClientKey(tail, kind, None)
    role = _ROLES.get(head) if with_role else None
    if role is not None:
        kind_name, _, name = tail.partition(".")
        kind = _KINDS.get(kind_name)
        if kind is not None and is_client_key(name):
            return _ClientKey(name, kind, role)
    return None


class _Value(NamedTuple):
    """A client setting's value, the key that set it, and its client name as written."""

    value: str
    key: str
    name: str


class _Found(NamedTuple):
    """A replication setting's parsed value and the key it was read from."""

    key: str
    value: Any


def load_config(source: str | os.PathLike[str] | Mapping[str, str]) -> ReplicatorConfig:
    """Load an `mm2.properties` file, or an already parsed mapping, into a ReplicatorConfig.

    Raises ConfigError, with a one-line message naming the key, for anything
    unknown, malformed or contradictory. Secrets are never part of a message or
    a log line.
    """
    if isinstance(source, Mapping):
        raw = dict(source)
        for key, value in raw.items():
            if not isinstance(value, str):
                raise ConfigError(f"{key}: values must be strings, got {type(value).__name__}")
        source_file = None
    else:
        raw = read_properties(source)
        source_file = os.fspath(source)
    # Kafka's ConfigDef trims every value it parses; so does the replicator.
    props = {key: value.strip() for key, value in resolve_references(raw).items()}
    return _Loader(props).load(source_file)


class _Loader:
    """One load: indexes every key by position, then builds clusters and flows."""

    def __init__(self, props: dict[str, str]) -> None:
        self.props = props
        self.aliases = _aliases(props)
        self.reported: set[tuple[int, str]] = set()
        self.top: dict[str, _Found] = {}
        self.flow_settings: dict[Flow, dict[str, _Found]] = defaultdict(dict)
        self.cluster_settings: dict[str, dict[str, _Found]] = defaultdict(dict)
        self.enabled: dict[Flow, bool] = {}
        # Client settings by layer: ("top", kind), ("cluster", alias, kind) and
        # ("flow", source, target, role, kind), with "" for no kind or no role.
        self.clients: dict[tuple[str, ...], dict[str, _Value]] = defaultdict(dict)
        self._flow_prefixes = sorted(
            ((f"{s}->{t}.", s, t) for s in self.aliases for t in self.aliases),
            key=lambda item: -len(item[0]),
        )
        self._cluster_prefixes = sorted(
            ((f"{alias}.", alias) for alias in self.aliases), key=lambda item: -len(item[0])
        )
        self._index()

    # --- indexing -------------------------------------------------------------------

    def _index(self) -> None:
        problems = []
        for key in sorted(self.props):
            if key == "clusters":
                continue
            try:
                self._index_key(key)
            except ConfigError as exc:
                problems.append(str(exc))
        if problems:
            raise ConfigError("; ".join(problems))

    def _index_key(self, key: str) -> None:
        value = self.props[key]
        if "->" in key:
            self._index_flow_key(key, value)
            return
        for prefix, alias in self._cluster_prefixes:
            if key.startswith(prefix):
                self._index_cluster_key(key, alias, key[len(prefix) :], value)
                return
        if key in _SETTINGS:
            self.top[key] = _Found(key, _SETTINGS[key].parse(key, value))
        elif key == "enabled":
            raise ConfigError("enabled: flows are enabled one by one, e.g. A->B.enabled = true")
        elif _is_connect_setting(key):
            self._accepted(key)
        elif (client := _client_key(key, with_role=False)) is not None:
            self._client(("top", client.kind or ""), client, key, value)
        else:
            raise self._unknown(key)

    def _index_cluster_key(self, key: str, alias: str, rest: str, value: str) -> None:
        if rest in _TARGET_CLUSTER_SETTINGS:
            self.cluster_settings[alias][rest] = _Found(key, _SETTINGS[rest].parse(key, value))
        elif rest in _SETTINGS or rest == "enabled":
            raise ConfigError(
                f"{key}: {rest} cannot be set per cluster (MM2 ignores it there too); "
                f"set {rest} or <source>-><target>.{rest}"
            )
        elif _is_connect_setting(rest):
            self._accepted(key)
        elif (client := _client_key(rest, with_role=False)) is not None:
            self._client(("cluster", alias, client.kind or ""), client, key, value)
        else:
            raise self._unknown(key, prefix=f"{alias}.", candidates=_cluster_candidates())

    def _index_flow_key(self, key: str, value: str) -> None:
        match = next((item for item in self._flow_prefixes if key.startswith(item[0])), None)
        if match is None:
            source, _, rest = key.partition("->")
            target = rest.partition(".")[0]
            raise ConfigError(
                f"{key}: flow {source}->{target} names a cluster that is not in clusters "
                f"({', '.join(self.aliases)})"
            )
        prefix, source, target = match
        if source == target:
            raise ConfigError(f"{key}: a flow from cluster {source} to itself is not possible")
        flow, rest = (source, target), key[len(prefix) :]
        if rest == "enabled":
            self.enabled[flow] = _boolean(key, value)
        elif rest in _SETTINGS:
            self.flow_settings[flow][rest] = _Found(key, _SETTINGS[rest].parse(key, value))
        elif _is_connect_setting(rest):
            self._accepted(key)
        elif (client := _client_key(rest, with_role=True)) is None:
            raise self._unknown(key, prefix=prefix, candidates=_flow_candidates())
        elif client.kind is None:
            self._warn(
                f"{key} has no effect (nor in MM2): set {prefix}consumer.{client.name} "
                f"(or producer./admin.) for this flow, or <alias>.{client.name} for a cluster"
            )
        else:
            self._client(("flow", *flow, client.role or "", client.kind), client, key, value)

    def _client(self, layer: tuple[str, ...], client: _ClientKey, key: str, value: str) -> None:
        self.clients[layer][client.name] = _Value(value, key, client.name)

    def _accepted(self, key: str) -> None:
        self._debug(f"{key} is accepted for MM2 compatibility and not used by the replicator")

    def _unknown(
        self, key: str, *, prefix: str = "", candidates: frozenset[str] | None = None
    ) -> ConfigError:
        rest = key[len(prefix) :]
        if not prefix and "." in key:
            alias_typo = self._alias_typo(key)
            if alias_typo:
                return ConfigError(alias_typo)
        known = candidates if candidates is not None else _top_candidates()
        close = difflib.get_close_matches(rest, known, n=1, cutoff=0.7)
        hint = f" (did you mean {prefix}{close[0]}?)" if close else ""
        return ConfigError(
            f"{key}: unknown setting: neither an MM2/Connect setting, a Kafka client setting "
            f"nor a replicator setting{hint}"
        )

    def _alias_typo(self, key: str) -> str | None:
        """A message if `key` looks like `<alias>.<setting>` with an alias not in clusters."""
        parts = key.split(".")
        for cut in range(1, len(parts)):
            alias, rest = ".".join(parts[:cut]), ".".join(parts[cut:])
            if rest in _cluster_candidates():
                lowered = {a.lower(): a for a in self.aliases}
                close = difflib.get_close_matches(alias.lower(), list(lowered), n=1, cutoff=0.6)
                hint = f"; did you mean {lowered[close[0]]}.{rest}?" if close else ""
                return (
                    f"{key}: {alias!r} is not a cluster alias listed in clusters "
                    f"({', '.join(self.aliases)}){hint}"
                )
        return None

    # --- building -----------------------------------------------------------------

    def load(self, source_file: str | None) -> ReplicatorConfig:
        flows = [
            (source, target)
            for source in self.aliases
            for target in self.aliases
            if self.enabled.get((source, target), False)
        ]
        missing = [
            f"{alias}.bootstrap.servers"
            for alias in dict.fromkeys(alias for flow in flows for alias in flow)
            if self._bootstrap(alias) is None
        ]
        if missing:
            raise ConfigError(
                f"{', '.join(missing)}: required for every cluster of an enabled flow "
                "(a comma-separated list of host:port)"
            )
        clusters = {}
        for alias in self.aliases:
            if self._bootstrap(alias) is None:
                self._debug(f"cluster {alias} has no {alias}.bootstrap.servers and is left out")
                continue
            clusters[alias] = self._cluster(alias)
        if not flows:
            self._warn("no replication flow is enabled (set e.g. A->B.enabled = true)")
        return ReplicatorConfig(
            clusters=clusters,
            flows=tuple(self._flow(source, target) for source, target in flows),
            source_file=source_file,
        )

    def _bootstrap(self, alias: str) -> str | None:
        for layer in (("cluster", alias, ""), ("top", "")):
            found = self.clients.get(layer, {}).get("bootstrap.servers")
            if found is not None and found.value:
                return found.value
        return None

    def _cluster(self, alias: str, flow: Flow | None = None) -> ClusterConfig:
        role: Role | None = None if flow is None else ("source" if alias == flow[0] else "target")
        configs = {kind: self._client_config(alias, kind, flow, role) for kind in CLIENT_KINDS}
        return ClusterConfig(
            alias=alias,
            bootstrap_servers=self._bootstrap(alias) or "",
            consumer=configs["consumer"],
            producer=configs["producer"],
            admin=configs["admin"],
        )

    def _client_settings(
        self, alias: str, kind: ClientKind, flow: Flow | None, role: Role | None
    ) -> dict[str, _Value]:
        """Merge the client settings of a `kind` client of cluster `alias`, MM2's way.

        For the consumer of flow A->B (role source, cluster A), highest first;
        producer and admin clients and the target role (cluster B) alike:

        Connection settings (bootstrap.servers, security.protocol, ssl.*, sasl.*):
          1. A->B.source.consumer.<k>
          2. A.consumer.<k>
          3. A.<k>
          4. consumer.<k>   (an extension: MM2 ignores top-level consumer.*)
          5. <k>
          6. A->B.consumer.<k>
        Other client settings:
          1. A->B.source.consumer.<k>
          2. A.consumer.<k>
          3. A->B.consumer.<k>
          4. A.<k>          (an extension: MM2 passes only connection settings from A.*)
          5. consumer.<k>   (an extension)
          6. <k>            (an extension)

        This is MirrorMakerConfig.clusterProps + connectorBaseConfig followed by
        MirrorConnectorConfig.sourceConsumerConfig (and its producer/admin and
        target siblings): clusterProps copies A.<k> and <k> into A's consumer./
        producer./admin. settings when they are connection settings, and those
        land under `source.consumer.*`, which the connector applies after the
        flow-level `consumer.*`. So `A->B.consumer.security.protocol` loses to
        `security.protocol`, and `A->B.consumer.<k>` to `A.consumer.<k>`; a
        warning says so when it happens. Without a flow (ReplicatorConfig.clusters)
        the flow-level layers are absent.
        """
        top, top_kind = self.clients[("top", "")], self.clients[("top", kind)]
        cluster = self.clients[("cluster", alias, "")]
        cluster_kind = self.clients[("cluster", alias, kind)]
        flow_kind = self.clients[("flow", *flow, "", kind)] if flow else {}
        flow_role = self.clients[("flow", *flow, role or "", kind)] if flow else {}
        connection_layers = (flow_kind, top, top_kind, cluster, cluster_kind, flow_role)
        other_layers = (top, top_kind, cluster, flow_kind, cluster_kind, flow_role)
        merged: dict[str, _Value] = {}
        for connection, layers in ((True, connection_layers), (False, other_layers)):
            for layer in layers:
                for name, value in layer.items():
                    if is_connection_key(name) == connection:
                        merged[librdkafka_name(name, kind)] = value
        for name, value in flow_kind.items():
            winner = merged[librdkafka_name(name, kind)]
            if flow is not None and not winner.key.startswith(f"{flow[0]}->{flow[1]}."):
                self._warn(
                    f"{value.key} is overridden by {winner.key}, as in MM2, which applies "
                    "cluster-level client settings after flow-level ones; set "
                    f"{flow[0]}->{flow[1]}.{role}.{kind}.{name} to override it for this flow"
                )
        return merged

    def _client_config(
        self, alias: str, kind: ClientKind, flow: Flow | None, role: Role | None
    ) -> dict[str, str]:
        merged = self._client_settings(alias, kind, flow, role)
        settings = {value.name: value.value for value in merged.values()}
        names = {value.name: value.key for value in merged.values()}
        translation = translate(settings, kind, names=names)
        self._report(translation, names, kind)
        config = translation.config
        if kind == "consumer":
            # As MM2's sourceConsumerConfig: offsets are the replicator's business,
            # and a partition never seen before is read from its beginning.
            if config.get("enable.auto.commit", "false").lower() != "false":
                self._warn(f"{names['enable.auto.commit']} is ignored: the replicator commits")
            config["enable.auto.commit"] = "false"
            config.setdefault("auto.offset.reset", "earliest")
        return config

    def _report(self, translation: Translation, names: Mapping[str, str], kind: str) -> None:
        for name, dropped in translation.dropped.items():
            message = f"{names[name]} is ignored: {dropped.reason}"
            if dropped.harmless:
                self._debug(message)
            else:
                self._warn(message)
        for name in translation.other_kind:
            key = names[name]
            if f"{kind}.{name}" in key:
                self._warn(f"{key} has no effect: {name} is not a {kind} setting")

    def _flow(self, source: str, target: str) -> FlowConfig:
        flow = (source, target)
        fields: dict[str, Any] = {
            setting.field: found.value
            for name, setting in _SETTINGS.items()
            if setting.field is not None and (found := self._setting(flow, name)) is not None
        }
        sync_offsets = self._setting(flow, "sync.group.offsets.enabled")
        checkpoints = self._setting(flow, "emit.checkpoints.enabled")
        if sync_offsets and sync_offsets.value and checkpoints and not checkpoints.value:
            raise ConfigError(
                f"{sync_offsets.key}=true contradicts {checkpoints.key}=false: group offsets "
                "are synced from checkpoints"
            )
        topics_exclude = self._exclude(flow, "topics", DEFAULT_TOPICS_EXCLUDE)
        groups_exclude = self._exclude(flow, "groups", DEFAULT_GROUPS_EXCLUDE)
        topics = self._patterns(flow, "topics", DEFAULT_TOPICS)
        if not topics:
            self._warn(f"{source}->{target}: topics is empty, so the flow replicates nothing")
        return FlowConfig(
            source=self._cluster(source, flow),
            target=self._cluster(target, flow),
            topics=NameFilter(topics, topics_exclude),
            groups=NameFilter(self._patterns(flow, "groups", DEFAULT_GROUPS), groups_exclude),
            config_properties_exclude=self._exclude(
                flow, "config.properties", DEFAULT_CONFIG_PROPERTIES_EXCLUDE
            ),
            exactly_once=self._exactly_once(flow),
            status_topic_replication_factor=self._status_replication_factor(flow),
            **fields,
        )

    def _setting(self, flow: Flow, name: str) -> _Found | None:
        """A replication setting: flow-level over top-level, as MM2's connectorBaseConfig."""
        return self.flow_settings[flow].get(name) or self.top.get(name)

    def _patterns(self, flow: Flow, name: str, default: str) -> tuple[re.Pattern[str], ...]:
        found = self._setting(flow, name)
        return found.value if found else _pattern_list(name, default)

    def _exclude(self, flow: Flow, base: str, default: str) -> tuple[re.Pattern[str], ...]:
        """`<base>.exclude`, or its deprecated alias `<base>.blacklist`, flow over top level."""
        for level in (self.flow_settings[flow], self.top):
            exclude, blacklist = level.get(f"{base}.exclude"), level.get(f"{base}.blacklist")
            if exclude and blacklist and _sources(exclude.value) != _sources(blacklist.value):
                raise ConfigError(
                    f"{exclude.key} and {blacklist.key} (its deprecated alias) differ: "
                    f"keep only {exclude.key}"
                )
            found = exclude or blacklist
            if found is not None:
                return found.value
        return _pattern_list(f"{base}.exclude", default)

    def _exactly_once(self, flow: Flow) -> bool:
        """Ours (`exactly.once`) or MM2's (`<target>.exactly.once.source.support`)."""
        ours = self._setting(flow, "exactly.once")
        mm2 = (
            self.flow_settings[flow].get("exactly.once.source.support")
            or self.cluster_settings[flow[1]].get("exactly.once.source.support")
            or self.top.get("exactly.once.source.support")
        )
        if ours and mm2 and ours.value != mm2.value:
            raise ConfigError(f"{ours.key} and {mm2.key} contradict each other: keep one")
        found = ours or mm2
        return bool(found and found.value)

    def _status_replication_factor(self, flow: Flow) -> int:
        """Ours (`status.topic.replication.factor`), else MM2's Connect setting for its own
        status topic, `status.storage.replication.factor` (flow level, top level, then the
        target cluster's: MM2's workerConfig applies top-level status.storage.* after the
        cluster's), else -1, the broker's default.replication.factor, as MM2's
        topic.creation asks; so an MM2 file for a one-broker cluster works unchanged."""
        name = "status.storage.replication.factor"
        found = (
            self._setting(flow, "status.topic.replication.factor")
            or self._setting(flow, name)
            or self.cluster_settings[flow[1]].get(name)
        )
        return found.value if found else -1

    # --- logging, each message once per load ------------------------------------------

    def _warn(self, message: str) -> None:
        if (logging.WARNING, message) not in self.reported:
            self.reported.add((logging.WARNING, message))
            _log.warning("%s", message)

    def _debug(self, message: str) -> None:
        if (logging.DEBUG, message) not in self.reported:
            self.reported.add((logging.DEBUG, message))
            _log.debug("%s", message)


def _aliases(props: Mapping[str, str]) -> tuple[str, ...]:
    """The `clusters` list, in order, each alias checked."""
    if "clusters" not in props:
        raise ConfigError("clusters: required: the comma-separated cluster aliases, e.g. A, B")
    aliases = [alias for alias in _LIST_SEPARATOR.split(props["clusters"]) if alias]
    if not aliases:
        raise ConfigError("clusters: expected at least one cluster alias, got an empty list")
    for alias in aliases:
        if "#" in alias:
            raise ConfigError(
                f"clusters: alias {alias!r} holds an end-of-line comment; .properties files only "
                "have whole-line comments: move the comment to its own line"
            )
        if re.search(r"\s", alias) or "->" in alias:
            raise ConfigError(f"clusters: alias {alias!r} must not contain whitespace or '->'")
    if len(set(aliases)) != len(aliases):
        raise ConfigError("clusters: an alias is listed twice")
    return tuple(aliases)


def _sources(patterns: tuple[re.Pattern[str], ...]) -> tuple[str, ...]:
    return tuple(pattern.pattern for pattern in patterns)


@functools.cache
def _top_candidates() -> frozenset[str]:
    kinds = frozenset(f"{kind}.{name}" for kind in CLIENT_KINDS for name in client_keys())
    return frozenset(_SETTINGS) | _CONNECT_SETTINGS | client_keys() | kinds | {"clusters"}


@functools.cache
def _cluster_candidates() -> frozenset[str]:
    kinds = frozenset(f"{kind}.{name}" for kind in CLIENT_KINDS for name in client_keys())
    return _CONNECT_SETTINGS | client_keys() | kinds | frozenset(_TARGET_CLUSTER_SETTINGS)


@functools.cache
def _flow_candidates() -> frozenset[str]:
    kinds = frozenset(
        f"{role}{kind}.{name}"
        for role in ("", "source.", "target.")
        for kind in CLIENT_KINDS
        for name in client_keys()
    )
    return frozenset(_SETTINGS) | _CONNECT_SETTINGS | kinds | {"enabled"}
