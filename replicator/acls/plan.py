"""The exact ACLs each principal of a DR setup needs, derived from an `mm2.properties`.

A secured cluster (an authorizer with `allow.everyone.if.no.acl.found=false`)
refuses the replicator everything nobody granted it. `plan` lists what to grant,
per cluster and role, with the reason for each entry, so that an operator grants
no more than needed and knows why each line is there:

- `replicator`: the replication engine of every enabled flow (source consumer,
  target producer, topic and config sync, offset syncs, heartbeats, status,
  checkpoints and group-offset sync), and the failover/failback/drill procedures,
  which run with the same client settings (a procedure starts the reverse flow).
  ACL sync (`sync.topic.acls.enabled`) adds DESCRIBE on the source's CLUSTER and
  ALTER on the target's; `applications.<name>.producer.principals` (the
  failover's `grant_write` step) adds ALTER on the target's CLUSTER.
- `verifier`: the verification job (Spark), which only reads: the source topics,
  their copies, the offset syncs and the checkpoints.
- `producer` / `consumer`: an application (e.g. the demo) on its topic.

Topic filters are Java regexes; ACLs are literal names, `*` or prefixes. A filter
is turned into ACL patterns when it is one of those (`.*`, `orders`, `demo\\..*`,
`a|b`); any other regex is an error naming it, never a silent `*`. Exclusions
(`topics.exclude`) grant nothing away: excluded topics are not read, whatever
the ACLs allow.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from replicator.acls.principal import principal_of
from replicator.config.model import FlowConfig, NameFilter, ReplicatorConfig
from replicator.config.policies import ReplicationPolicy
from replicator.engine.internal_topics import RESETS_TOPIC, STATUS_TOPIC
from replicator.errors import ConfigError

__all__ = ["AclRule", "application_rules", "principal_of", "replicator_rules", "verifier_rules"]

ROLES = ("replicator", "verifier", "producer", "consumer")
#: Every consumer group the replicator creates for itself starts with this (the
#: flow's group `replicator-<source>-<target>`, and the one-off readers of tails,
#: compacted topics and resets), as do its transactional ids.
OWN_PREFIX = "replicator-"
#: The default prefix of a drill's shadow groups on the target (`Drill`): it commits
#: the translated offsets to them, checks them and deletes them.
DRILL_SHADOW_PREFIX = "drill-"
#: The prefix of the verification jobs' consumer groups (never joined or committed).
VERIFIER_GROUP_PREFIX = f"{OWN_PREFIX}verify"
#: The Spark Kafka connector's group id in verification jobs (`kafka.group.id`), not
#: Spark's `spark-kafka-relation-<uuid>`: one id for every run, so a verification
#: server's pooled consumers serve the next run of the same partitions instead of
#: piling up one set per run (the pool's key includes the group id).
VERIFIER_CONNECTOR_GROUP = f"{VERIFIER_GROUP_PREFIX}-connector"

#: The one CLUSTER resource of a Kafka cluster, as the Admin API names it.
CLUSTER_RESOURCE = "kafka-cluster"
_META = set(r"\.^$*+?{}[]()|")
_ESCAPED_LITERAL = re.compile(r"\\(.)")


@dataclass(frozen=True, order=True)
class AclRule:
    """One ALLOW ACL: `principal` may do `operation` on a resource of `cluster`."""

    cluster: str
    principal: str
    resource_type: str  # TOPIC, GROUP, TRANSACTIONAL_ID, CLUSTER
    pattern_type: str  # LITERAL or PREFIXED
    name: str
    operation: str  # READ, WRITE, CREATE, DESCRIBE, DESCRIBE_CONFIGS, ALTER, ALTER_CONFIGS
    role: str
    why: str

    def describe(self) -> str:
        """`ALLOW READ on TOPIC demo. (prefixed)`, the way error messages name it."""
        kind = "prefixed" if self.pattern_type == "PREFIXED" else "literal"
        return f"ALLOW {self.operation} on {self.resource_type} {self.name} ({kind})"


@dataclass(frozen=True)
class Resource:
    """A resource pattern: a type, literal or prefixed, and a name (`*`: all)."""

    resource_type: str
    pattern_type: str
    name: str


def topic_patterns(names: NameFilter, what: str) -> list[Resource]:
    """The ACL patterns that cover exactly the topics of a filter's include list.
    `what` names the setting, for the error."""
    return [
        Resource("TOPIC", pattern_type, name)
        for pattern in names.include
        for alternative in _alternatives(pattern.pattern)
        for pattern_type, name in [_as_acl_pattern(alternative, what)]
    ]


def group_patterns(names: NameFilter, what: str) -> list[Resource]:
    return [Resource("GROUP", r.pattern_type, r.name) for r in topic_patterns(names, what)]


def _alternatives(pattern: str) -> list[str]:
    """Top-level `a|b` alternatives (a `|` inside a group or escaped stays)."""
    parts, depth, start, index = [], 0, 0, 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        elif char == "|" and depth == 0:
            parts.append(pattern[start:index])
            start = index + 1
        index += 1
    return [*parts, pattern[start:]]


def _literal(text: str) -> str | None:
    """`text` unescaped if it matches exactly one string, else None."""
    unescaped = _ESCAPED_LITERAL.sub("", text)
    if any(char in _META for char in unescaped):
        return None
    return _ESCAPED_LITERAL.sub(r"\1", text)


def _as_acl_pattern(pattern: str, what: str) -> tuple[str, str]:
    if pattern in (".*", ".+"):
        return "LITERAL", "*"
    literal = _literal(pattern)
    if literal is not None:
        return "LITERAL", literal
    for suffix in (".*", ".+"):
        if pattern.endswith(suffix):
            prefix = _literal(pattern[: -len(suffix)])
            if prefix is not None:
                return "PREFIXED", prefix
    raise ConfigError(
        f"{what}: the pattern {pattern!r} cannot be granted as ACLs, which are literal names, "
        "'*' or prefixes; write it as names or prefixes (e.g. orders|payments\\..*), "
        "or grant the topics' ACLs yourself"
    )


class _Rules:
    """Collects rules, each (cluster, principal, resource, operation) once, with the
    first reason given (the most specific: flows are walked in order)."""

    def __init__(self) -> None:
        self._rules: dict[tuple[str, ...], AclRule] = {}

    def grant(
        self,
        cluster: str,
        principal: str,
        role: str,
        resources: Iterable[Resource],
        operations: Iterable[str],
        *,
        why: str,
    ) -> None:
        for resource in resources:
            for operation in operations:
                key = (cluster, principal, *vars(resource).values(), operation)
                self._rules.setdefault(
                    key,
                    AclRule(
                        cluster,
                        principal,
                        resource.resource_type,
                        resource.pattern_type,
                        resource.name,
                        operation,
                        role,
                        why,
                    ),
                )

    def sorted(self) -> list[AclRule]:
        return sorted(self._rules.values())


def _policy(flow: FlowConfig) -> ReplicationPolicy:
    return flow.policy


def _remote_patterns(flow: FlowConfig, policy: ReplicationPolicy) -> list[Resource]:
    """The source topic patterns as the target names them (the same prefix or name,
    renamed by the replication policy; `*` stays `*` under the identity policy)."""
    remote = []
    for resource in topic_patterns(flow.topics, f"{flow.name}.topics"):
        if resource.name == "*":
            prefix = policy.format_remote_topic(flow.source.alias, "x")[:-1]
            remote.append(Resource("TOPIC", "PREFIXED", prefix) if prefix else resource)
        else:
            name = policy.format_remote_topic(flow.source.alias, resource.name)
            remote.append(Resource("TOPIC", resource.pattern_type, name))
    return remote


_CLUSTER = [Resource("CLUSTER", "LITERAL", CLUSTER_RESOURCE)]


def _literal_topics(*names: str) -> list[Resource]:
    return [Resource("TOPIC", "LITERAL", name) for name in names]


_Grant = Callable[..., None]


def _granter(rules: _Rules, flow_name: str) -> _Grant:
    """`grant(cluster, principal, resources, *operations, why=...)` for one flow."""

    def grant(
        cluster: str, principal: str, resources: list[Resource], *operations: str, why: str
    ) -> None:
        rules.grant(
            cluster, principal, "replicator", resources, operations, why=f"{flow_name}: {why}"
        )

    return grant


def replicator_rules(
    config: ReplicatorConfig, principals: Mapping[str, str] | None = None
) -> list[AclRule]:
    """The replicator's ACLs for every enabled flow; `principals` maps a cluster
    alias to the principal it authenticates as there (default: those the
    configuration's clients authenticate as, see `principal_of`)."""
    if principals is None:
        principals = {alias: principal_of(c) for alias, c in config.clusters.items()}
    rules = _Rules()
    for flow in config.flows:
        policy = _policy(flow)
        source, target = flow.source.alias, flow.target.alias
        on_source, on_target = principals[source], principals[target]
        topics = topic_patterns(flow.topics, f"{flow.name}.topics")
        remote = _remote_patterns(flow, policy)
        own_groups = [Resource("GROUP", "PREFIXED", OWN_PREFIX)]
        heartbeats = policy.heartbeats_topic()
        offset_syncs = policy.offset_syncs_topic(target)
        grant = _granter(rules, flow.name)

        grant(source, on_source, topics, "READ", "DESCRIBE", why="consume the source topics")
        if flow.sync_topic_configs_enabled:
            grant(source, on_source, topics, "DESCRIBE_CONFIGS", why="read configs to sync them")
        grant(
            source, on_source, own_groups, "READ", "DESCRIBE",
            why=f"its consumer group {OWN_PREFIX}{source}-{target} and one-off readers",
        )  # fmt: skip
        syncs_on = target if flow.offset_syncs_cluster is flow.target else source
        grant(
            syncs_on, principals[syncs_on], _literal_topics(offset_syncs), "CREATE", "WRITE",
            "READ", "DESCRIBE", why="write and read the offset syncs",
        )  # fmt: skip
        grant(
            source, on_source, _literal_topics(heartbeats), "CREATE", "WRITE", "READ",
            "DESCRIBE", "DESCRIBE_CONFIGS", why="emit heartbeats, which are replicated too",
        )  # fmt: skip
        remote_heartbeats = _literal_topics(policy.format_remote_topic(source, heartbeats))
        target_topics = remote + (remote_heartbeats if remote_heartbeats != remote else [])
        grant(
            target, on_target, target_topics, "CREATE", "WRITE", "READ", "DESCRIBE",
            "DESCRIBE_CONFIGS", "ALTER", why="create the remote topics, add partitions, "
            "write the copies and read their tail to resume",
        )  # fmt: skip
        if flow.sync_topic_configs_enabled:
            grant(target, on_target, target_topics, "ALTER_CONFIGS", why="sync topic configs")
        grant(
            target, on_target, _literal_topics(STATUS_TOPIC, RESETS_TOPIC), "CREATE", "WRITE",
            "READ", "DESCRIBE", why="publish and read worker status and offset resets",
        )  # fmt: skip
        grant(target, on_target, own_groups, "READ", "DESCRIBE", why="one-off tail readers")
        if flow.exactly_once:
            transactional = [
                Resource("TRANSACTIONAL_ID", "PREFIXED", f"{OWN_PREFIX}{source}-{target}-")
            ]
            grant(
                target, on_target, transactional, "WRITE", "DESCRIBE",
                why="one transactional producer per source partition (exactly.once)",
            )  # fmt: skip
        if flow.sync_topic_acls_enabled:
            grant(source, on_source, _CLUSTER, "DESCRIBE", why="read the topic ACLs to sync them")
            grant(
                target, on_target, _CLUSTER, "ALTER",
                why="create the synced ACLs (sync.topic.acls.enabled; ALTER implies DESCRIBE)",
            )  # fmt: skip
        if any(app.producer_principals for app in config.applications.values()):
            grant(
                target, on_target, _CLUSTER, "ALTER",
                why="grant_write: grant the applications' producers WRITE at a failover, "
                "remove it at the failback",
            )  # fmt: skip
        if flow.emit_checkpoints_enabled or flow.sync_group_offsets_enabled:
            groups = group_patterns(flow.groups, f"{flow.name}.groups")
            grant(
                source, on_source, groups, "DESCRIBE",
                why="list the applications' groups and read their committed offsets",
            )  # fmt: skip
            grant(
                target, on_target, _literal_topics(policy.checkpoints_topic(source)),
                "CREATE", "WRITE", "READ", "DESCRIBE", why="write and read checkpoints",
            )  # fmt: skip
            grant(
                target, on_target, groups, "READ", "DESCRIBE",
                why="sync the groups' offsets to the target (group sync, failover)",
            )  # fmt: skip
            grant(
                target, on_target, [Resource("GROUP", "PREFIXED", DRILL_SHADOW_PREFIX)], "READ",
                "DESCRIBE", "DELETE", why="a drill's shadow groups: commit, check, delete",
            )  # fmt: skip
    return rules.sorted()


def verifier_rules(config: ReplicatorConfig, principal: str) -> list[AclRule]:
    """What the verification job reads: source topics and their copies, offset
    syncs (on the source) and checkpoints (on the target), with the Spark
    connector's consumer groups on both."""
    rules = _Rules()
    spark_groups = [Resource("GROUP", "PREFIXED", f"{VERIFIER_GROUP_PREFIX}-")]
    for flow in config.flows:
        policy = _policy(flow)
        source, target = flow.source.alias, flow.target.alias
        why = f"{flow.name}: verification reads"
        for cluster in (source, target):
            rules.grant(
                cluster, principal, "verifier", spark_groups, ("READ", "DESCRIBE"),
                why=f"{flow.name}: the Spark Kafka connector's consumers (kafka.group.id)",
            )  # fmt: skip
            rules.grant(
                cluster, principal, "verifier", [Resource("GROUP", "PREFIXED", OWN_PREFIX)],
                ("DESCRIBE",), why=f"{flow.name}: the plan's readers (find their coordinator; "
                "they only assign, never join or commit)",
            )  # fmt: skip
        topics = topic_patterns(flow.topics, f"{flow.name}.topics")
        offset_syncs = _literal_topics(policy.offset_syncs_topic(target))
        syncs_on = target if flow.offset_syncs_cluster is flow.target else source
        rules.grant(source, principal, "verifier", topics, ("READ", "DESCRIBE"), why=why)
        rules.grant(syncs_on, principal, "verifier", offset_syncs, ("READ", "DESCRIBE"), why=why)
        rules.grant(
            source, principal, "verifier", topics, ("DESCRIBE_CONFIGS",),
            why=f"{flow.name}: retention.ms, for the margin before unreplicated records go",
        )  # fmt: skip
        checkpoints = _literal_topics(policy.checkpoints_topic(source))
        rules.grant(
            target,
            principal,
            "verifier",
            _remote_patterns(flow, policy) + checkpoints,
            ("READ", "DESCRIBE"),
            why=why,
        )
    return rules.sorted()


def application_rules(
    clusters: Iterable[str], principal: str, role: str, topic: str, group: str | None = None
) -> list[AclRule]:
    """An application's producer (WRITE) or consumer (READ, and its group) on `topic`,
    on each of `clusters` (where it runs; a failover moves it)."""
    rules = _Rules()
    topics = _literal_topics(topic)
    for cluster in clusters:
        if role == "producer":
            rules.grant(
                cluster, principal, role, topics, ("WRITE", "DESCRIBE"), why=f"produce {topic}"
            )
        else:
            rules.grant(
                cluster, principal, role, topics, ("READ", "DESCRIBE"), why=f"consume {topic}"
            )
            if group is not None:
                rules.grant(
                    cluster,
                    principal,
                    role,
                    [Resource("GROUP", "LITERAL", group)],
                    ("READ", "DESCRIBE"),
                    why=f"commit offsets of group {group}",
                )
    return rules.sorted()
