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

Connect worker and MM2 connector settings that the replicator has no counterpart
of (`offset.storage.replication.factor`, `listeners`, ...) are accepted, logged at
INFO with the reason, and those whose value would change what MM2 does to records
only with the values the replicator behaves as. Client settings the engine decides
itself are honoured when they agree with it and refused otherwise, naming the key;
every client is then built once (`client_check`), so that librdkafka's own checks
fail the load rather than a worker. A key that is neither an MM2/Connect setting
nor a Kafka client setting nor one of ours is an error, with the closest known key.

This module indexes the keys by position and builds the FlowConfigs; which keys
exist, their defaults and how each is read are the table of `replicator.config.keys`,
the readers of the values `replicator.config.values`.
"""

from __future__ import annotations

import difflib
import logging
import os
import re
from collections import defaultdict
from collections.abc import Mapping
from typing import Any, NamedTuple

from replicator.config.applications import (
    APPLICATIONS_PREFIX,
    application_setting,
    read_applications,
)
from replicator.config.client_check import check_client
from replicator.config.clients import (
    CLASSIC_GROUP_SETTINGS,
    CLIENT_KINDS,
    ClientKind,
    Translation,
    check_consumer_timeouts,
    is_connection_key,
    librdkafka_name,
    translate,
)
from replicator.config.keys import (
    BY_KEY,
    CLIENT_RULES,
    SETTINGS,
    TARGET_CLUSTER_SETTINGS,
    ClientKey,
    Role,
    Setting,
    accepted_setting,
    client_key,
    cluster_candidates,
    connect_override,
    flow_candidates,
    top_candidates,
)
from replicator.config.model import (
    ClusterConfig,
    FlowConfig,
    NameFilter,
    PortedFilter,
    ReplicatorConfig,
)
from replicator.config.ports import (
    GROUP_FILTERS,
    POLICIES,
    TOPIC_FILTERS,
    not_ported,
    registered,
)
from replicator.config.properties import read_properties, resolve_references
from replicator.config.values import boolean, cluster_aliases, pattern_list
from replicator.errors import ConfigError

_log = logging.getLogger(__name__)

Flow = tuple[str, str]

# MM2's defaults (DefaultTopicFilter, DefaultGroupFilter, DefaultConfigPropertyFilter),
# as the settings table declares them.
DEFAULT_TOPICS = BY_KEY["topics"].default or ""
DEFAULT_TOPICS_EXCLUDE = BY_KEY["topics.exclude"].default or ""
DEFAULT_GROUPS = BY_KEY["groups"].default or ""
DEFAULT_GROUPS_EXCLUDE = BY_KEY["groups.exclude"].default or ""
DEFAULT_CONFIG_PROPERTIES_EXCLUDE = BY_KEY["config.properties.exclude"].default or ""
_MM2_FILTERS = "org.apache.kafka.connect.mirror."


class _Value(NamedTuple):
    """A client setting's value, the key that set it, and its client name as written."""

    value: str
    key: str
    name: str


class _Found(NamedTuple):
    """A replication setting's parsed value and the key it was read from."""

    key: str
    value: Any


def load_config(
    source: str | os.PathLike[str] | Mapping[str, str],
    *,
    connection: Mapping[str, str] | None = None,
) -> ReplicatorConfig:
    """Load an `mm2.properties` file, or an already parsed mapping, into a ReplicatorConfig.

    `connection`: the secrets `${conn:NAME}` references resolve to (the Airflow
    connection's, which the plugin's hook passes in; see `properties`).
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
    props = {key: value.strip() for key, value in resolve_references(raw, connection).items()}
    return _Loader(props).load(source_file)


class _Loader:
    """One load: indexes every key by position, then builds clusters and flows."""

    def __init__(self, props: dict[str, str]) -> None:
        self.props = props
        if "clusters" not in props:
            raise ConfigError("clusters: required: the comma-separated cluster aliases, e.g. A, B")
        self.aliases = cluster_aliases(props["clusters"])
        self.reported: set[tuple[int, str]] = set()
        #: The client configurations built once already (`client_check`).
        self.checked: set[tuple[str, tuple[tuple[str, str], ...], bool]] = set()
        self.top: dict[str, _Found] = {}
        self.flow_settings: dict[Flow, dict[str, _Found]] = defaultdict(dict)
        self.cluster_settings: dict[str, dict[str, _Found]] = defaultdict(dict)
        self.enabled: dict[Flow, bool] = {}
        #: application -> setting -> (key, value), from `applications.<name>.<setting>`.
        self.applications: dict[str, dict[str, tuple[str, str]]] = defaultdict(dict)
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
        #: Keys the installed ports of the file's custom classes read (`config_keys`).
        self.port_keys = self._port_keys()
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
        if key in SETTINGS:
            self.top[key] = _Found(key, SETTINGS[key].read(key, value))
        elif key.startswith(APPLICATIONS_PREFIX):
            name, setting = application_setting(key)
            self.applications[name][setting] = (key, value)
        elif key == "enabled":
            raise ConfigError("enabled: flows are enabled one by one, e.g. A->B.enabled = true")
        elif (accepted := accepted_setting(key)) is not None:
            self._accepted(key, value, accepted)
        elif (client := client_key(key, with_role=False)) is not None:
            self._client(("top", client.kind or ""), client, key, value)
        elif (override := connect_override(key)) is not None:
            self._warn(_override_not_here(key, override))
        elif (port := self._port_key(key)) is not None:
            self._debug(f"{key} is read by the port of {port}")
        else:
            raise self._unknown(key)

    def _index_cluster_key(self, key: str, alias: str, rest: str, value: str) -> None:
        if rest in TARGET_CLUSTER_SETTINGS:
            self.cluster_settings[alias][rest] = _Found(key, SETTINGS[rest].read(key, value))
        elif rest in SETTINGS or rest == "enabled":
            raise ConfigError(
                f"{key}: {rest} cannot be set per cluster (MM2 ignores it there too); "
                f"set {rest} or <source>-><target>.{rest}"
            )
        elif (accepted := accepted_setting(rest)) is not None:
            self._accepted(key, value, accepted)
        elif (client := client_key(rest, with_role=False)) is not None:
            self._client(("cluster", alias, client.kind or ""), client, key, value)
        elif (override := connect_override(rest)) is not None:
            self._warn(_override_not_here(key, override))
        else:
            raise self._unknown(key, prefix=f"{alias}.", candidates=cluster_candidates())

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
            self.enabled[flow] = boolean(key, value)
        elif rest in SETTINGS:
            self.flow_settings[flow][rest] = _Found(key, SETTINGS[rest].read(key, value))
        elif (accepted := accepted_setting(rest)) is not None:
            self._accepted(key, value, accepted)
        elif (port := self._port_key(rest)) is not None:
            self._debug(f"{key} is read by the port of {port}")
        elif (override := connect_override(rest)) is not None:
            self._connect_override(key, flow, override, value)
        elif (client := client_key(rest, with_role=True)) is None:
            raise self._unknown(key, prefix=prefix, candidates=flow_candidates())
        elif client.kind is None:
            self._warn(
                f"{key} has no effect (nor in MM2): set {prefix}consumer.{client.name} "
                f"(or producer./admin.) for this flow, or <alias>.{client.name} for a cluster"
            )
        else:
            self._client(("flow", *flow, client.role or "", client.kind), client, key, value)

    def _port_keys(self) -> dict[str, str]:
        """The settings the ports of the file's custom classes declare they read (their
        `config_keys`: keys, or prefixes ending with a dot), each with its class name."""
        groups = {
            "replication.policy.class": POLICIES,
            "topic.filter.class": TOPIC_FILTERS,
            "group.filter.class": GROUP_FILTERS,
        }
        found: dict[str, str] = {}
        for key, value in self.props.items():
            name = key.rpartition("->")[2].partition(".")[2] if "->" in key else key
            group = groups.get(name)
            if group is None:
                continue
            port = registered(group, value)
            for declared in getattr(port, "config_keys", ()):
                found[declared] = value
        return found

    def _port_key(self, rest: str) -> str | None:
        """The class whose port reads setting `rest`, if one declares it."""
        for declared, class_name in self.port_keys.items():
            if rest == declared or (declared.endswith(".") and rest.startswith(declared)):
                return class_name
        return None

    def _client(self, layer: tuple[str, ...], client: ClientKey, key: str, value: str) -> None:
        earlier = self.clients[layer].get(client.name)
        if earlier is not None and earlier.key != key:
            raise ConfigError(
                f"{key} and {earlier.key} set the same client setting of the same client: keep one"
            )
        self.clients[layer][client.name] = _Value(value, key, client.name)

    def _connect_override(self, key: str, flow: Flow, override: ClientKey, value: str) -> None:
        """Connect's client override of a connector (`A->B.producer.override.<k>`, as
        Strimzi's connector configuration carries it). MM2's connectors are source
        connectors: their records (and checkpoints and heartbeats) are written by the
        worker's producer to the target, over which Connect applies
        `producer.override.*`; so it is the flow's target producer setting, as
        `A->B.target.producer.<k>` is. Connect applies consumer overrides only to sink
        connectors and admin overrides to topic creation, neither of which MM2 uses."""
        if override.kind != "producer":
            self._warn(
                f"{key} has no effect (nor in MM2: Kafka Connect applies "
                f"{override.kind}.override.* to sink connectors and topic creation, and "
                f"MM2's connectors are source connectors); set "
                f"{flow[0]}->{flow[1]}.source.{override.kind}.{override.name} (or target.) "
                "for this flow's clients"
            )
            return
        self._info(f"{key} is read as Kafka Connect applies it: the flow's target producer")
        self._client(("flow", *flow, "target", "producer"), override, key, value)

    def _accepted(self, key: str, value: str, setting: Setting) -> None:
        if setting.status == "refused":
            raise ConfigError(f"{key}: refused: {setting.doc}")
        if setting.parse is not None:
            setting.parse(key, value)  # refuses the values the replicator cannot behave as
        self._info(f"{key} is accepted for MM2 compatibility and not read: {setting.reader}")

    def _unknown(
        self, key: str, *, prefix: str = "", candidates: frozenset[str] | None = None
    ) -> ConfigError:
        rest = key[len(prefix) :]
        if not prefix and "." in key:
            alias_typo = self._alias_typo(key)
            if alias_typo:
                return ConfigError(alias_typo)
        known = candidates if candidates is not None else top_candidates()
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
            if rest in cluster_candidates():
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
            applications=read_applications(self.applications),
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
        keys = {name: value.key for name, value in merged.items()}  # librdkafka name -> key
        fixed = self._client_rules(config, keys, kind, role)
        if kind == "consumer":
            # As MM2's sourceConsumerConfig: offsets are the replicator's business,
            # and a partition never seen before is read from its beginning.
            config["enable.auto.commit"] = "false"
            config.setdefault("auto.offset.reset", "earliest")
            _check_group_protocol(config, names)
            check_consumer_timeouts(config, names)
        compiled = self._compiled(flow, role, kind)
        probe = (kind, tuple(sorted({**config, **fixed}.items())), compiled)
        if probe not in self.checked:
            self.checked.add(probe)
            what = f"the {kind} of cluster {alias}" + (
                f" ({role} of flow {flow[0]}->{flow[1]})" if flow and role else ""
            )
            check_client(kind, {**config, **fixed}, keys, what, data_path=compiled)
        return config

    def _compiled(self, flow: Flow | None, role: Role | None, kind: ClientKind) -> bool:
        """Whether the compiled data plane must build this client: a flow's source
        consumer or target producer under `replicator.data.path = compiled` (under
        `auto` a flow its librdkafka refuses takes the Python loop: `engine.data_path`)."""
        if flow is None or (role, kind) not in (("source", "consumer"), ("target", "producer")):
            return False
        path = self._setting(flow, "replicator.data.path")
        return path is not None and path.value == "compiled"

    def _client_rules(
        self, config: dict[str, str], keys: Mapping[str, str], kind: str, role: Role | None
    ) -> dict[str, str]:
        """Refuse, naming the key, a client setting the engine decides for this client
        unless it says what the engine does anyway; the engine's values of those it
        decides (for the load-time build of the client)."""
        fixed = {}
        for rule in CLIENT_RULES:
            if rule.kind != kind or rule.client not in ("all", role):
                continue
            if rule.name in CLASSIC_GROUP_SETTINGS and config.get("group.protocol") == "consumer":
                continue  # the broker assigns (KIP-848): `_check_group_protocol` says so
            if rule.accepts:
                fixed[rule.name] = rule.accepts[0]
            value = config.get(rule.name)
            if value is None or value.lower() in rule.accepts:
                continue
            allowed = f" (accepted: {', '.join(rule.accepts)})" if rule.accepts else ""
            raise ConfigError(f"{keys.get(rule.name, rule.name)}: refused{allowed}: {rule.reason}")
        return fixed

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
            for name, setting in SETTINGS.items()
            if setting.field is not None and (found := self._setting(flow, name)) is not None
        }
        sync_offsets = self._setting(flow, "sync.group.offsets.enabled")
        checkpoints = self._setting(flow, "emit.checkpoints.enabled")
        if sync_offsets and sync_offsets.value and checkpoints and not checkpoints.value:
            raise ConfigError(
                f"{sync_offsets.key}=true contradicts {checkpoints.key}=false: group offsets "
                "are synced from checkpoints"
            )
        self._check_combinations(flow)
        topics_exclude = self._exclude(flow, "topics", DEFAULT_TOPICS_EXCLUDE)
        groups_exclude = self._exclude(flow, "groups", DEFAULT_GROUPS_EXCLUDE)
        topics = self._patterns(flow, "topics", DEFAULT_TOPICS)
        topic_filter = self._ported(flow, "topic") or NameFilter(topics, topics_exclude)
        group_filter = self._ported(flow, "group") or NameFilter(
            self._patterns(flow, "groups", DEFAULT_GROUPS), groups_exclude
        )
        if not topics and not isinstance(topic_filter, PortedFilter):
            self._warn(f"{source}->{target}: topics is empty, so the flow replicates nothing")
        return FlowConfig(
            source=self._cluster(source, flow),
            target=self._cluster(target, flow),
            topics=topic_filter,
            groups=group_filter,
            config_properties_exclude=self._exclude(
                flow, "config.properties", DEFAULT_CONFIG_PROPERTIES_EXCLUDE
            ),
            exactly_once=self._exactly_once(flow),
            status_topic_replication_factor=self._status_replication_factor(flow),
            mm2_offsets_topic=self._mm2_offsets_topic(flow),
            policy_settings=self._flow_props(flow),
            **fields,
        )

    def _check_combinations(self, flow: Flow) -> None:
        """Settings that contradict each other, as MM2 refuses them (or should)."""
        offset_syncs = self._setting(flow, "emit.offset-syncs.enabled")
        checkpoints = self._setting(flow, "emit.checkpoints.enabled")
        if offset_syncs and not offset_syncs.value and (checkpoints is None or checkpoints.value):
            shown = checkpoints.key if checkpoints else "emit.checkpoints.enabled (default true)"
            raise ConfigError(
                f"{offset_syncs.key}=false contradicts {shown}: checkpoints need offset "
                "syncs, as in MM2; set emit.checkpoints.enabled = false too"
            )

    def _ported(self, flow: Flow, kind: str) -> PortedFilter | None:
        """The Python port of a custom MM2 topic or group filter class, configured with
        the flow's settings as MM2 configures it; None for MM2's default filter."""
        found = self._setting(flow, f"{kind}.filter.class")
        default = "DefaultTopicFilter" if kind == "topic" else "DefaultGroupFilter"
        if found is None or found.value == _MM2_FILTERS + default:
            return None
        group = TOPIC_FILTERS if kind == "topic" else GROUP_FILTERS
        method = f"should_replicate_{kind}"
        port_class = registered(group, found.value)
        if port_class is None:
            raise not_ported(found.key, found.value, group, f"a class with {method}(name) -> bool")
        if not callable(port_class):
            raise ConfigError(
                f"{found.key} = {found.value}: what the entry-point group {group} registers "
                f"under this name is not a class ({type(port_class).__name__}); register "
                f"the class itself (one with {method}(name) -> bool)"
            )
        try:
            port = port_class()
            if hasattr(port, "configure"):
                port.configure(self._flow_props(flow))
        except Exception as exc:  # a third-party port failing: name it, keep the cause
            raise ConfigError(
                f"{found.key} = {found.value}: its port failed to start: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if not callable(getattr(port, method, None)):
            raise ConfigError(
                f"{found.key} = {found.value}: the port registered in {group} has no {method}"
            )
        return PortedFilter((re.compile(".*"),), port=port, class_name=found.value, kind=kind)

    def _flow_props(self, flow: Flow) -> dict[str, str]:
        """The flow's settings, top level overridden by flow level (what MM2 passes to a
        connector's classes in `configure`)."""
        prefix = f"{flow[0]}->{flow[1]}."
        cluster_prefixes = tuple(p for p, _ in self._cluster_prefixes)
        top = {
            k: v
            for k, v in self.props.items()
            if "->" not in k and not k.startswith(cluster_prefixes)
        }
        top.update({k[len(prefix) :]: v for k, v in self.props.items() if k.startswith(prefix)})
        return top

    def _setting(self, flow: Flow, name: str) -> _Found | None:
        """A replication setting: flow-level over top-level, as MM2's connectorBaseConfig."""
        return self.flow_settings[flow].get(name) or self.top.get(name)

    def _patterns(self, flow: Flow, name: str, default: str) -> tuple[re.Pattern[str], ...]:
        found = self._setting(flow, name)
        return found.value if found else pattern_list(name, default)

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
        return pattern_list(f"{base}.exclude", default)

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

    def _mm2_offsets_topic(self, flow: Flow) -> str | None:
        """`offset.storage.topic` for the flow: flow level, top level, then the target
        cluster's (MM2's workerConfig applies top-level settings after the cluster's);
        None: MM2's default name (`mm2_state.connect_offsets_topic`)."""
        name = "offset.storage.topic"
        found = self._setting(flow, name) or self.cluster_settings[flow[1]].get(name)
        return found.value if found else None

    # --- logging, each message once per load ------------------------------------------

    def _warn(self, message: str) -> None:
        if (logging.WARNING, message) not in self.reported:
            self.reported.add((logging.WARNING, message))
            _log.warning("%s", message)

    def _info(self, message: str) -> None:
        if (logging.INFO, message) not in self.reported:
            self.reported.add((logging.INFO, message))
            _log.info("%s", message)

    def _debug(self, message: str) -> None:
        if (logging.DEBUG, message) not in self.reported:
            self.reported.add((logging.DEBUG, message))
            _log.debug("%s", message)


def _override_not_here(key: str, override: ClientKey) -> str:
    """The warning for a Connect client override outside a flow, where MM2 ignores it."""
    return (
        f"{key} has no effect (nor in MM2, which passes client overrides to its "
        f"connectors only from <source>-><target>.{override.kind}.override.*); set "
        f"<source>-><target>.{override.kind}.override.{override.name} for a flow, or "
        f"{override.kind}.{override.name} here"
    )


def _sources(patterns: tuple[re.Pattern[str], ...]) -> tuple[str, ...]:
    return tuple(pattern.pattern for pattern in patterns)


def _check_group_protocol(config: Mapping[str, str], names: Mapping[str, str]) -> None:
    """Refuse, at load time and naming the key, a classic group setting next to
    `group.protocol=consumer`, which librdkafka would refuse only when a worker
    starts."""
    if config.get("group.protocol") != "consumer":
        return
    for name in CLASSIC_GROUP_SETTINGS:
        if name in config:
            raise ConfigError(
                f"{names.get(name, name)} cannot be set with "
                f"{names.get('group.protocol', 'group.protocol')}=consumer: under that "
                "protocol (KIP-848) the broker's group.consumer.* settings decide it; "
                "remove it (group.remote.assignor names the assignor)"
            )
