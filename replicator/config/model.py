"""Typed configuration of the replicator, as loaded from MM2's properties format.

`replicator.config.loader` fills these from a `mm2.properties` file; everything
else in the engine reads only these objects. A flow's settings that one key each
fills are generated from the settings table (`FlowSettings`, which `FlowConfig`
inherits); defaults follow MirrorMaker 2 unless the table says why not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

from replicator.config.applications import ApplicationConfig
from replicator.config.flow_settings import FlowSettings
from replicator.config.policies import ReplicationPolicy, load_policy
from replicator.config.redact import redact
from replicator.errors import ConfigError


@dataclass(frozen=True)
class NameFilter:
    """Include/exclude lists of Java-style regexes (comma means "or"), matched
    against the whole name, as MM2's DefaultTopicFilter and DefaultGroupFilter do."""

    include: tuple[re.Pattern[str], ...]
    exclude: tuple[re.Pattern[str], ...] = ()

    def matches(self, name: str) -> bool:
        return self._included(name) and not self._excluded(name)

    def why_not(self, name: str) -> str | None:
        """None if `name` matches, else which setting rules it out (for `replicator topics`)."""
        if not self._included(name):
            return "matches no include pattern"
        if self._excluded(name):
            pattern = next(p for p in self.exclude if p.fullmatch(name))
            return f"excluded by pattern {pattern.pattern!r}"
        return None

    @cached_property
    def _included(self) -> _AnyOf:
        return _AnyOf(self.include)

    @cached_property
    def _excluded(self) -> _AnyOf:
        return _AnyOf(self.exclude)


#: A backreference by number or name, or a conditional on a group.
_GROUP_REFERENCE = re.compile(r"\\[1-9]|\(\?P=|\(\?\(")


class _AnyOf:
    """Whether any of `patterns` matches a whole name, in one regex: a flow that lists
    its 2,500 topics by name (`topics = orders, payments, ...`) tested each name
    against each pattern, 6.25 million matches (1 s of a 10,000-partition plan); the
    alternation of the same patterns matches in C (10 ms). Patterns that cannot share
    one regex are tried in turn: one that refers to a group by number or name (its
    number would change) or names a group another names too, or sets a flag after
    its start."""

    def __init__(self, patterns: tuple[re.Pattern[str], ...]) -> None:
        self._patterns = patterns
        self._one: re.Pattern[str] | None = None
        if len(patterns) > 1 and not any(_GROUP_REFERENCE.search(p.pattern) for p in patterns):
            try:
                self._one = re.compile("|".join(f"(?:{p.pattern})" for p in patterns))
            except re.error:
                self._one = None

    def __call__(self, name: str) -> bool:
        if self._one is not None:
            return self._one.fullmatch(name) is not None
        return any(p.fullmatch(name) for p in self._patterns)


@dataclass(frozen=True)
class PortedFilter(NameFilter):
    """A custom MM2 topic or group filter, as its Python port decides (`include` is `.*`,
    so that ACL planning, which cannot know what the port picks, grants every name)."""

    port: object = None
    class_name: str = ""
    kind: str = "topic"

    def matches(self, name: str) -> bool:
        method = "should_replicate_topic" if self.kind == "topic" else "should_replicate_group"
        return bool(getattr(self.port, method)(name))

    def why_not(self, name: str) -> str | None:
        return (
            None if self.matches(name) else f"refused by {self.kind}.filter.class {self.class_name}"
        )


@dataclass(frozen=True)
class ClusterConfig:
    """One cluster alias and the librdkafka settings of each client kind on it.

    The three dicts are complete librdkafka configurations (bootstrap servers,
    security and overrides already merged with MM2's precedence and translated
    from Java client names); secrets are in them as plain values, so never log
    them: use `replicator.config.redact`.
    """

    alias: str
    bootstrap_servers: str
    consumer: dict[str, str] = field(default_factory=dict)
    producer: dict[str, str] = field(default_factory=dict)
    admin: dict[str, str] = field(default_factory=dict)

    def idempotent_producer(self, linger_ms: int | None = None) -> dict[str, object]:
        """The settings of an idempotent producer to this cluster: `linger.ms` =
        `linger_ms` unless the cluster's (and flow's) producer settings say otherwise,
        those settings, and `enable.idempotence`, which no setting turns off. The
        producers of the engine's own records (offset syncs, heartbeats, checkpoints,
        MM2's formats, reset requests) are made from it."""
        defaults: dict[str, object] = {} if linger_ms is None else {"linger.ms": linger_ms}
        return {**defaults, **self.producer, "enable.idempotence": True}

    def __repr__(self) -> str:
        # The generated repr would print passwords; this one is safe to log,
        # and FlowConfig's and ReplicatorConfig's reprs use it.
        return (
            f"ClusterConfig(alias={self.alias!r}, bootstrap_servers={self.bootstrap_servers!r}, "
            f"consumer={redact(self.consumer)!r}, producer={redact(self.producer)!r}, "
            f"admin={redact(self.admin)!r})"
        )


#: Every flow's engine group starts with it and its source alias (`engine_group`).
ENGINE_GROUP_PREFIX = "replicator-"
#: The metadata of every position a worker commits under its engine group: such a
#: group is the replicator's, whatever the aliases of the configuration that ran it.
ENGINE_COMMIT_METADATA = "replicator engine position"


@dataclass(frozen=True)
class FlowConfig(FlowSettings):
    """One replication flow `source->target` with every setting resolved.

    The settings one key each fills are `FlowSettings`' fields, generated from the
    settings table (`replicator/config/flow_settings.py`: read it there, never edit it);
    the fields here are what the loader combines from several keys. Client settings
    already include the flow-level overrides (`A->B.consumer.*`, `A->B.producer.*`, ...)
    on top of the clusters' own.
    """

    source: ClusterConfig
    target: ClusterConfig
    #: `topics`, `topics.exclude` (and its alias) or `topic.filter.class`'s port.
    topics: NameFilter
    #: `groups`, `groups.exclude` (and its alias) or `group.filter.class`'s port.
    groups: NameFilter
    #: The flow's settings as written (flow level over top level), which a custom
    #: policy's port gets in `configure`, as MM2 configures a policy.
    policy_settings: dict[str, str] = field(default_factory=dict, repr=False)
    #: `config.properties.exclude` (and its alias `config.properties.blacklist`).
    config_properties_exclude: tuple[re.Pattern[str], ...] = ()
    #: `exactly.once` (ours), or `exactly.once.source.support = enabled` (Connect's).
    exactly_once: bool = False
    #: Of `replicator-status.internal` and `replicator-resets.internal` on the target:
    #: `status.topic.replication.factor`, else MM2's `status.storage.replication.factor`
    #: (Connect's status topic, on the target as ours), else -1, the broker's default.
    status_topic_replication_factor: int = -1
    #: MirrorMaker 2's Connect offsets topic on the target, as the file names it
    #: (`offset.storage.topic`); None: MM2's default, mm2-offsets.<source>.internal.
    mm2_offsets_topic: str | None = None

    @property
    def name(self) -> str:
        return f"{self.source.alias}->{self.target.alias}"

    @property
    def engine_group(self) -> str:
        """The consumer group the flow's workers read the source in (and commit their
        positions under): never an application's, so never checkpointed or drilled."""
        return f"{ENGINE_GROUP_PREFIX}{self.source.alias}-{self.target.alias}"

    def is_engine_group(self, group: str) -> bool:
        """Whether `group` is the engine group of a flow from this flow's source or
        target (this flow's, its reverse's, others of the same clusters)."""
        return any(
            group.startswith(f"{ENGINE_GROUP_PREFIX}{alias}-")
            for alias in (self.source.alias, self.target.alias)
        )

    @property
    def offset_syncs_cluster(self) -> ClusterConfig:
        """The cluster holding the flow's offset-syncs topic (`offset-syncs.topic.location`):
        the one place every writer and reader of the syncs asks."""
        return self.target if self.offset_syncs_topic_location == "target" else self.source

    @property
    def offset_syncs_topic(self) -> str:
        """The name of the flow's offset-syncs topic (on `offset_syncs_cluster`), as its
        policy names it: `mm2-offset-syncs.<target>.internal` by default."""
        return self.policy.offset_syncs_topic(self.target.alias)

    @property
    def checkpoints_topic(self) -> str:
        """The name of the flow's checkpoints topic on the target, as its policy names
        it: `<source>.checkpoints.internal` by default."""
        return self.policy.checkpoints_topic(self.source.alias)

    @property
    def heartbeats_topic(self) -> str:
        """The name of the heartbeats topic the flow writes on the source (and copies to
        the target as a remote topic), as its policy names it: `heartbeats` by default."""
        return self.policy.heartbeats_topic()

    @cached_property
    def policy(self) -> ReplicationPolicy:
        """The replication policy `replication.policy.class` names, loaded on first use
        (a custom policy's package need only be importable where the flow runs);
        ConfigError when it cannot be loaded."""
        return load_policy(
            self.replication_policy_class,
            self.replication_policy_separator,
            self.source.alias,
            internal_separator=self.replication_policy_internal_topic_separator_enabled,
            settings=self.policy_settings,
        )


@dataclass(frozen=True)
class ReplicatorConfig:
    """Everything one `mm2.properties` file describes."""

    clusters: dict[str, ClusterConfig]
    flows: tuple[FlowConfig, ...]  # enabled flows only, in the order of `clusters`
    source_file: str | None = None
    #: `applications.<name>.*` (ours): what the failover's `grant_write` step grants.
    applications: dict[str, ApplicationConfig] = field(default_factory=dict)

    def flow(self, name: str) -> FlowConfig:
        """The enabled flow `name` ("A->B", or its shell-safe form "A:B"); ConfigError
        naming the choices otherwise."""
        wanted = flow_name(name)
        for flow in self.flows:
            if flow.name == wanted:
                return flow
        enabled = ", ".join(shell_safe(f.name) for f in self.flows) or "none"
        hint = ""
        if name.endswith("-"):
            hint = (
                f"; an unquoted {name}>B is cut at '>' by the shell (which writes a file "
                f"named B): write {name[:-1]}:B, or quote '{name}>B'"
            )
        raise ConfigError(
            f"flow {name!r} is not enabled in the configuration (enabled: {enabled}){hint}"
        )


#: A flow A->B written without `>`, which a shell reads as a redirection: `A:B`. No
#: alias holds a colon (in a .properties file it ends the key).
SHELL_SAFE_SEPARATOR = ":"


def flow_name(text: str) -> str:
    """The flow's name, `A->B`, of `text` written either as `A->B` or as `A:B`."""
    source, colon, target = text.partition(SHELL_SAFE_SEPARATOR)
    if colon and "->" not in text:
        return f"{source}->{target}"
    return text


def shell_safe(name: str) -> str:
    """`A:B` for the flow `A->B`: the form to paste into a shell."""
    return name.replace("->", SHELL_SAFE_SEPARATOR, 1)
