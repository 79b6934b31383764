"""Every key an `mm2.properties` file may hold, declared once: the settings table.

Like Kafka's `ConfigDef`, each `Setting` says what a key is (its type), its default
(MirrorMaker 2's, unless `differs` says why not), where it may be set (`scope`),
what happens to it and who reads it (`status`, `reader`), and its documentation.
The loader reads the file through this table, and two files are generated from it:
`FlowConfig`'s settings fields (`replicator/config/flow_settings.py`, by
`replicator.config.flow_fields`: one field per `field` named here, typed by
`python_type`, with the default the loader gives and the entry's documentation) and
docs/configuration.md (`replicator.config.reference`). Unit tests check that both
committed files are what the table generates.

What happens to a key (`status`):

* `read`: honoured; `reader` names the part of the replicator that acts on it.
* `accepted`: MM2/Connect plumbing with no counterpart in the replicator (its REST
  server, Connect's own storage topics, ...): accepted so that an MM2 file loads
  unchanged, and logged once at INFO naming the key and why nothing reads it.
  Where a value would change what MM2 does with records, only the values the
  replicator behaves as are accepted (`parse` refuses the others, naming the key).
* `refused`: a ConfigError naming the key and `doc` (the reason and the fix).

Client settings (`consumer.`, `producer.`, `admin.` and connection settings) are
recognised in their three spellings (`client_key`) and translated by `clients`;
the few the engine itself decides are `CLIENT_RULES` (honoured where the value is
what the engine does anyway, refused otherwise, naming the key). The
`*_candidates` are the keys known at each position, for the "did you mean" of an
unknown one.
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
    only,
    only_true,
    pattern_list,
    port,
    replication_factor,
    separator,
    topic_name,
)

Role = Literal["source", "target"]
#: flow: top level or `<source>-><target>.`; cluster: `<alias>.` (MM2 reads it from the
#: target cluster's worker settings), also top level; worker: MM2's own process settings.
Scope = Literal["flow", "cluster", "worker"]
Status = Literal["read", "accepted", "refused"]
_KINDS: dict[str, ClientKind] = {kind: kind for kind in CLIENT_KINDS}
_ROLES: dict[str, Role] = {"source": "source", "target": "target"}

_MM2 = "org.apache.kafka.connect.mirror."
_BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"


class Setting(NamedTuple):
    """One key of the file, as Kafka's ConfigDef declares a key, plus what reads it."""

    key: str
    #: The type as the reference names it (boolean, int, seconds, list, class, ...; `a|b`:
    #: one of these words). It also gives the Python type of the `field` (`python_type`).
    type: str
    #: The default as written in a file; None: none (e.g. required, or unset means off).
    default: str | None
    scope: Scope
    status: Status
    #: Who acts on it (`read`), or why nothing does (`accepted`).
    reader: str
    doc: str
    #: `(key as written, value) -> typed value`, raising ConfigError naming the key.
    parse: Callable[[str, str], Any] | None = None
    #: The FlowConfig field the value fills; None: combined by the loader or unused.
    field: str | None = None
    #: Why the default is not MM2's (then MM2's default is `mm2_default`).
    differs: str = ""
    mm2_default: str | None = None
    #: A family of keys: every key starting with `key` (which ends with a dot).
    prefix: bool = False

    def read(self, written: str, value: str) -> Any:
        """`value`, set under `written` (the key as written), as its typed value; every
        setting in `SETTINGS` has a parser, so a call on one without is a bug here."""
        if self.parse is None:
            raise TypeError(f"{self.key} has no parser: it is not read from a file")
        return self.parse(written, value)


Parse = Callable[[str, str], Any]

#: The Python type of a `field`, by the setting's `type`. A type `a|b` is `Literal["a", "b"]`,
#: and a setting with no default (unset means off) is `<type> | None`.
PYTHON_TYPES: dict[str, str] = {
    "boolean": "bool",
    "int": "int",
    "port": "int",
    "seconds": "float",
    "string": "str",
    "class": "str",
}


def python_type(setting: Setting) -> str:
    """The annotation of the `FlowConfig` field `setting` fills (`replicator.config.flow_fields`
    writes it into the generated module); ValueError naming the key for a type with none."""
    if "|" in setting.type:
        words = ", ".join(f'"{word}"' for word in setting.type.split("|"))
        annotation = f"Literal[{words}]"
    elif setting.type in PYTHON_TYPES:
        annotation = PYTHON_TYPES[setting.type]
    else:
        raise ValueError(
            f"{setting.key}: no Python type for a field of type {setting.type!r}: add it to "
            "PYTHON_TYPES in replicator/config/keys.py"
        )
    return annotation if setting.default is not None else f"{annotation} | None"


# A row of the table reads best with its columns in order, hence the positions.
def _flow(  # noqa: PLR0917
    key: str,
    type_: str,
    default: str | None,
    parse: Parse,
    field: str | None,
    reader: str,
    doc: str,
    *,
    differs: str = "",
    mm2_default: str | None = None,
) -> Setting:
    return Setting(
        key, type_, default, "flow", "read", reader, doc, parse, field, differs, mm2_default
    )


def _ours(  # noqa: PLR0917
    key: str, type_: str, default: str | None, parse: Parse, field: str | None, reader: str,
    doc: str,
) -> Setting:  # fmt: skip
    return Setting(
        key, type_, default, "flow", "read", reader, "Ours (not MM2's). " + doc, parse, field
    )


def _accepted(
    key: str, type_: str, default: str | None, why: str, *, scope: Scope = "worker",
    parse: Parse | None = None, prefix: bool = False,
) -> Setting:  # fmt: skip
    return Setting(key, type_, default, scope, "accepted", why, why, parse, prefix=prefix)


_TOPIC_SYNC = "engine.topic_sync (TopicSync, on the task's loop)"
_TASK = "engine.task (the replication loop)"
_CHECKPOINTS = "offsets.checkpoint_loop (CheckpointLoop)"

#: The table. Entries of other parts of the replicator go in here too, one per key.
TABLE: tuple[Setting, ...] = (
    # --- which topics and groups, and how remote topics are named ---------------------
    _flow(
        "topics",
        "list",
        ".*",
        pattern_list,
        None,
        _TOPIC_SYNC,
        "Topics to replicate: comma-separated Java regular expressions, each matched "
        "against the whole name.",
    ),
    _flow(
        "topics.exclude",
        "list",
        r".*[\-\.]internal,.*\.replica,__.*",
        pattern_list,
        None,
        _TOPIC_SYNC,
        "Topics never replicated (regexes); `topics.blacklist` is its "
        "deprecated alias. Internal topics (Kafka's, Connect's and MM2's) are never "
        "replicated whatever this says.",
        differs="every `.internal`/`-internal` topic (MM2's checkpoints, Connect's) is "
        "excluded by the filter itself, which status and diagnostics use alone; MM2 "
        "excludes them through its policy's internal-topic rule, so what is replicated "
        "is the same",
        mm2_default=r"mm2.*\.internal,.*\.replica,__.*",
    ),
    _flow(
        "topics.blacklist",
        "list",
        None,
        pattern_list,
        None,
        _TOPIC_SYNC,
        "Deprecated alias of `topics.exclude`.",
    ),
    _flow(
        "groups",
        "list",
        ".*",
        pattern_list,
        None,
        _CHECKPOINTS,
        "Consumer groups whose offsets are checkpointed (regexes).",
    ),
    _flow(
        "groups.exclude",
        "list",
        "console-consumer-.*,connect-.*,__.*",
        pattern_list,
        None,
        _CHECKPOINTS,
        "Groups never checkpointed; `groups.blacklist` is its deprecated alias.",
    ),
    _flow(
        "groups.blacklist",
        "list",
        None,
        pattern_list,
        None,
        _CHECKPOINTS,
        "Deprecated alias of `groups.exclude`.",
    ),
    _flow(
        "topic.filter.class",
        "class",
        _MM2 + "DefaultTopicFilter",
        filter_class("DefaultTopicFilter", "topic"),
        "topic_filter_class",
        _TOPIC_SYNC,
        "MM2's default filter (topics, topics.exclude), or a Python port of a custom Java "
        "filter registered under the Java class name in the entry-point group "
        "`replicator.topic_filters` (see below).",
    ),
    _flow(
        "group.filter.class",
        "class",
        _MM2 + "DefaultGroupFilter",
        filter_class("DefaultGroupFilter", "group"),
        "group_filter_class",
        _CHECKPOINTS,
        "MM2's default filter (groups, groups.exclude), or a Python port registered in the "
        "entry-point group `replicator.group_filters`.",
    ),
    _flow(
        "config.property.filter.class",
        "class",
        _MM2 + "DefaultConfigPropertyFilter",
        filter_class("DefaultConfigPropertyFilter", None),
        None,
        _TOPIC_SYNC,
        "Only MM2's default is accepted: express the filter with config.properties.exclude.",
    ),
    _flow(
        "config.properties.exclude",
        "list",
        r"follower\.replication\.throttled\.replicas,leader\.replication\.throttled\.replicas,"
        r"message\.timestamp\.difference\.max\.ms,message\.timestamp\.type,"
        r"unclean\.leader\.election\.enable,min\.insync\.replicas",
        pattern_list,
        None,
        _TOPIC_SYNC,
        "Topic configs never copied to remote topics (regexes); `config.properties.blacklist` "
        "is its deprecated alias.",
    ),
    _flow(
        "config.properties.blacklist",
        "list",
        None,
        pattern_list,
        None,
        _TOPIC_SYNC,
        "Deprecated alias of `config.properties.exclude`.",
    ),
    _flow(
        "replication.policy.class",
        "class",
        _MM2 + "DefaultReplicationPolicy",
        class_name,
        "replication_policy_class",
        "config.policies (every part that names a topic)",
        "How remote topics are named. MM2's Default and Identity policies are built in; "
        "another Java class name loads the Python port registered under that name in the "
        "entry-point group `replicator.replication_policies`; a dotted Python path loads "
        "that class.",
    ),
    _flow(
        "replication.policy.separator",
        "string",
        ".",
        separator,
        "replication_policy_separator",
        "config.policies",
        "Between the source alias and the topic name of a remote topic.",
    ),
    _flow(
        "replication.policy.internal.topic.separator.enabled",
        "boolean",
        "true",
        boolean,
        "replication_policy_internal_topic_separator_enabled",
        "config.policies",
        "Whether the separator is also used in the names of the internal topics "
        "(offset syncs, checkpoints), as MM2 does since Kafka 3.1.",
    ),
    _flow(
        "heartbeats.replication.enabled",
        "boolean",
        "true",
        boolean,
        "heartbeats_replication_enabled",
        _TOPIC_SYNC,
        "Whether heartbeats topics are replicated (MM2's KIP-710 setting).",
    ),
    # --- remote topics ----------------------------------------------------------------
    _flow(
        "replication.factor",
        "int",
        "2",
        replication_factor,
        "replication_factor",
        _TOPIC_SYNC,
        "Replication factor of the remote topics created on the target; -1: the broker's "
        "default.replication.factor.",
    ),
    _flow(
        "refresh.topics.enabled",
        "boolean",
        "true",
        boolean,
        "refresh_topics_enabled",
        _TASK,
        "Whether new matching topics and partition increases are picked up while running.",
    ),
    _flow(
        "refresh.topics.interval.seconds",
        "seconds",
        "600",
        interval,
        "refresh_topics_interval_seconds",
        _TASK,
        "How often topics are refreshed.",
    ),
    _flow(
        "sync.topic.configs.enabled",
        "boolean",
        "true",
        boolean,
        "sync_topic_configs_enabled",
        _TOPIC_SYNC,
        "Whether remote topics get the source topics' non-default configs "
        "(minus config.properties.exclude; max.message.bytes always large enough).",
    ),
    _flow(
        "sync.topic.configs.interval.seconds",
        "seconds",
        "600",
        interval,
        "sync_topic_configs_interval_seconds",
        _TOPIC_SYNC,
        "How often topic configs are synced, on a timer of its own (independent of "
        "refresh.topics.interval.seconds).",
    ),
    _flow(
        "sync.topic.acls.enabled",
        "boolean",
        "false",
        boolean,
        "sync_topic_acls_enabled",
        "acls.loop (AclSyncLoop)",
        "Whether topic ACLs are copied (no WRITE; ALL becomes READ), as MM2 does.",
        differs="off unless asked for: ACL sync needs ALTER on the target's CLUSTER "
        "resource, which a principal can use to grant itself anything; a file that never "
        "mentions it must not demand that",
        mm2_default="true",
    ),
    _flow(
        "sync.topic.acls.interval.seconds",
        "seconds",
        "600",
        interval,
        "sync_topic_acls_interval_seconds",
        "acls.loop (AclSyncLoop)",
        "How often ACLs are synced.",
    ),
    _flow(
        "admin.timeout.ms",
        "int",
        "60000",
        at_least(1),
        "admin_timeout_ms",
        _TOPIC_SYNC,
        "Timeout of the admin requests of topic discovery and sync.",
    ),
    # --- workers --------------------------------------------------------------------------
    _flow(
        "tasks.max",
        "int",
        "1",
        at_least(1),
        "tasks_max",
        "operations.runner",
        "Replication tasks `replicator run` starts per flow (each a member of the flow's "
        "consumer group).",
    ),
    _flow(
        "offset.lag.max",
        "int",
        "100",
        at_least(0),
        "offset_lag_max",
        "engine.offset_syncs (OffsetSyncWriter)",
        "An offset sync is written at least every this many records of a partition.",
    ),
    _flow(
        "emit.offset-syncs.enabled",
        "boolean",
        "true",
        boolean,
        "emit_offset_syncs_enabled",
        "engine.offset_syncs (OffsetSyncWriter)",
        "Whether offset syncs are written at all; false needs emit.checkpoints.enabled = "
        "false (as in MM2). The replicator's own translation reads the replicas' headers, "
        "not the syncs: the syncs are for MM2's tools and the verification.",
    ),
    _flow(
        "offset-syncs.topic.location",
        "source|target",
        "source",
        choice("source", "target"),
        "offset_syncs_topic_location",
        "engine.offset_syncs, verification (FlowConfig.offset_syncs_cluster)",
        "Which cluster holds the flow's offset-syncs topic `mm2-offset-syncs.<target>.internal`.",
    ),
    _flow(
        "offset-syncs.topic.replication.factor",
        "int",
        "3",
        replication_factor,
        "offset_syncs_topic_replication_factor",
        "engine.task",
        "Replication factor of the offset-syncs topic when it is created.",
    ),
    # --- heartbeats, checkpoints, group offsets ---------------------------------------------
    _flow(
        "emit.heartbeats.enabled",
        "boolean",
        "true",
        boolean,
        "emit_heartbeats_enabled",
        _TASK,
        "Whether heartbeats are written to the source's `heartbeats` topic.",
    ),
    _flow(
        "emit.heartbeats.interval.seconds",
        "seconds",
        "1",
        interval,
        "emit_heartbeats_interval_seconds",
        _TASK,
        "How often a heartbeat is written.",
    ),
    _flow(
        "heartbeats.topic.replication.factor",
        "int",
        "3",
        replication_factor,
        "heartbeats_topic_replication_factor",
        "engine.task",
        "Replication factor of the heartbeats topic when it is created.",
    ),
    _flow(
        "emit.checkpoints.enabled",
        "boolean",
        "true",
        boolean,
        "emit_checkpoints_enabled",
        _CHECKPOINTS,
        "Whether group offsets are translated and written to "
        "`<source>.checkpoints.internal` on the target, in MM2's format.",
    ),
    _flow(
        "emit.checkpoints.interval.seconds",
        "seconds",
        "60",
        interval,
        "emit_checkpoints_interval_seconds",
        _CHECKPOINTS,
        "How often checkpoints are written.",
    ),
    _flow(
        "checkpoints.topic.replication.factor",
        "int",
        "3",
        replication_factor,
        "checkpoints_topic_replication_factor",
        "offsets.checkpoints",
        "Replication factor of the checkpoints topic when it is created.",
    ),
    _flow(
        "refresh.groups.enabled",
        "boolean",
        "true",
        only_true(
            why="the replicator lists "
            "the source's groups at every checkpoint round; to checkpoint fewer groups, narrow "
            "groups and groups.exclude"
        ),
        "refresh_groups_enabled",
        _CHECKPOINTS,
        "Groups are listed again at every checkpoint round, so new groups are found; "
        "`false` is refused.",
    ),
    _flow(
        "refresh.groups.interval.seconds",
        "seconds",
        "600",
        interval,
        "refresh_groups_interval_seconds",
        _CHECKPOINTS,
        "New groups are checkpointed no later than MM2 would: the groups are listed at "
        "every checkpoint round, and MM2 checkpoints a group it found only at its next "
        "checkpoint round too.",
    ),
    _flow(
        "sync.group.offsets.enabled",
        "boolean",
        "false",
        boolean,
        "sync_group_offsets_enabled",
        _CHECKPOINTS,
        "Whether checkpointed offsets are also committed to the same groups "
        "on the target (only groups with no active member, and never backwards).",
    ),
    _flow(
        "sync.group.offsets.interval.seconds",
        "seconds",
        "60",
        interval,
        "sync_group_offsets_interval_seconds",
        _CHECKPOINTS,
        "How often group offsets are synced (in the checkpoint round).",
    ),
    # --- exactly once -------------------------------------------------------------------
    Setting(
        "exactly.once.source.support",
        "string",
        "disabled",
        "cluster",
        "read",
        "engine.exactly_once",
        "Connect's worker setting, read from the target cluster "
        "(`<target>.exactly.once.source.support`) or the flow: `enabled` copies in "
        "per-partition transactions, as `exactly.once = true`.",
        exactly_once_source_support,
    ),
    _ours(
        "exactly.once",
        "boolean",
        "false",
        boolean,
        None,
        "engine.exactly_once",
        "Per-partition transactional producers: a stalled worker is fenced after a rebalance.",
    ),
    # --- ours -----------------------------------------------------------------------------
    _ours(
        "retention.gap.policy",
        "fail|skip",
        "fail",
        choice("fail", "skip"),
        "retention_gap_policy",
        "engine.retention",
        "Records deleted by retention before they were replicated: stop the partition "
        "(fail) or go on after the gap, counted and logged (skip).",
    ),
    _ours(
        "topic.reset.policy",
        "fail|skip",
        "fail",
        choice("fail", "skip"),
        "topic_reset_policy",
        "engine.resume",
        "A source topic deleted and recreated: stop, or start the new topic from its beginning.",
    ),
    _ours(
        "oversized.record.policy",
        "fail|skip",
        "fail",
        choice("fail", "skip"),
        "oversized_record_policy",
        "engine.size_limits",
        "A record larger than its remote topic takes: stop the partition or skip it.",
    ),
    _ours(
        "metrics.port",
        "port",
        None,
        port,
        "metrics_port",
        "operations.runner",
        "Port of the Prometheus metrics endpoint of `replicator run`; unset: none.",
    ),
    _ours(
        "metrics.partition.labels",
        "boolean",
        "false",
        boolean,
        "metrics_partition_labels",
        "metrics (engine.partition, engine.offset_syncs)",
        "Metrics get a series per partition, not per topic (docs/monitoring.md).",
    ),
    _ours(
        "replicator.commit.source.offsets",
        "boolean",
        "true",
        boolean,
        "commit_source_offsets",
        "engine.source_commits",
        "Commit the source positions under the flow's consumer "
        "group, so consumer-group tools show replication lag; never read back "
        "(docs/monitoring.md).",
    ),
    _ours(
        "replicator.data.path",
        "auto|python|compiled",
        "auto",
        choice("auto", "python", "compiled"),
        "data_path",
        "engine.data_path",
        "How the records move: `auto` through the compiled data plane (replicator._dataplane) "
        "when it is built (exactly-once flows too: a transactional Mover per partition), else "
        "the Python loop; `python` always the Python loop; `compiled` the data plane or refuse "
        "to start (docs/dataplane.md).",
    ),
    _ours(
        "replicator.takeover.uncertain",
        "refuse|at-least-once",
        "refuse",
        choice("refuse", "at-least-once"),
        "takeover_uncertain",
        "engine.takeover",
        "Taking over from MirrorMaker 2 where the exact point is not proven: refuse to "
        "start, or copy the uncertain records again.",
    ),
    _ours(
        "replicator.takeover.force",
        "boolean",
        "false",
        boolean,
        "takeover_force",
        "engine.mm2_liveness",
        "Take partitions over from MirrorMaker 2 even while it shows signs of life (fresh "
        "heartbeats of the flow on the target, the target growing while nothing of ours "
        "writes to it), each time "
        "logged with what was seen. Unset, such partitions wait until MM2 is gone. "
        "`replicator run --force-takeover` sets it for the run.",
    ),
    _ours(
        "status.topic.replication.factor",
        "int",
        None,
        replication_factor,
        None,
        "engine.status",
        "Replication factor of the replicator's status and resets topics "
        "on the target; unset: status.storage.replication.factor, else the broker's default.",
    ),
    Setting(
        "status.storage.replication.factor",
        "int",
        "3",
        "cluster",
        "read",
        "engine.status",
        "Connect's status topic setting: the replication factor of the replicator's status "
        "topic when status.topic.replication.factor is not set.",
        replication_factor,
        differs="unset means the broker's default.replication.factor (-1), as MM2's "
        "topic creation asks",
        mm2_default="3",
    ),
    Setting(
        "offset.storage.topic",
        "string",
        None,
        "cluster",
        "read",
        "engine.mm2_state (a takeover from MM2)",
        "Connect's offsets topic, where MM2's dedicated mode keeps each source partition's "
        "committed offset (on the target): read when a flow is taken over from MM2, by "
        "`replicator run` and `replicator migrate --from-mm2` alike. Top level over "
        "`<target>.offset.storage.topic`, as MM2's worker reads them (flow level over both); "
        "unset: mm2-offsets.<source>.internal, MM2's default.",
        topic_name,
    ),
    # --- MM2 connector settings the replicator sets itself or has no use for ------------------
    _accepted("name", "string", None, "MM2 names its connectors itself; the replicator has none."),
    _accepted(
        "connector.class",
        "class",
        None,
        "MM2 sets its connector classes itself; the replicator has no connectors.",
    ),
    _accepted("connector.plugin.version", "string", None, "Connect plugin versions; no plugins."),
    _accepted(
        "source.cluster.alias",
        "string",
        None,
        "Set per flow by MM2 itself; the replicator takes it from the flow.",
    ),
    _accepted(
        "target.cluster.alias",
        "string",
        "target",
        "Set per flow by MM2 itself; the replicator takes it from the flow.",
    ),
    _accepted(
        "consumer.poll.timeout.ms",
        "int",
        "1000",
        "The replication loop waits for records "
        "at most 200 ms and takes what is there in batches: a wait changes latency only.",
    ),
    _accepted(
        "tasks.max.enforce",
        "boolean",
        "true",
        "The replicator never runs more tasks than tasks.max, which is what either value allows.",
    ),
    _accepted(
        "config.action.reload",
        "string",
        "restart",
        "Connect reloads connectors on a "
        "config change; restart `replicator run` after changing the file.",
    ),
    _accepted(
        "use.defaults.from",
        "string",
        None,
        "MM2's legacy flow defaults; flow-level keys fall back to top-level ones as in MM2.",
    ),
    _accepted(
        "default.replication.policy.heartbeats.topic.name",
        "string",
        None,
        "Legacy; the heartbeats topic is `heartbeats`.",
    ),
    Setting(
        "forwarding.admin.class",
        "class",
        "org.apache.kafka.clients.admin.ForwardingAdmin",
        "flow",
        "accepted",
        "Only MM2's default is accepted: custom admin classes are Java.",
        "Only MM2's default is accepted: custom admin classes are Java.",
        only(
            "org.apache.kafka.clients.admin.ForwardingAdmin",
            why="custom Java admin classes cannot run in the replicator",
        ),
    ),
    Setting(
        "key.converter",
        "class",
        None,
        "worker",
        "accepted",
        "Records are copied as bytes.",
        "Records are copied as bytes: only ByteArrayConverter (MM2's) is accepted.",
        only(_BYTES, why="records are copied as bytes, as MM2 does with ByteArrayConverter"),
    ),
    Setting(
        "value.converter",
        "class",
        None,
        "worker",
        "accepted",
        "Records are copied as bytes.",
        "Records are copied as bytes: only ByteArrayConverter (MM2's) is accepted.",
        only(_BYTES, why="records are copied as bytes, as MM2 does with ByteArrayConverter"),
    ),
    Setting(
        "header.converter",
        "class",
        None,
        "worker",
        "accepted",
        "Headers are copied as bytes.",
        "Headers are copied as bytes: only ByteArrayConverter (MM2's) is accepted.",
        only(_BYTES, why="headers are copied as bytes, as MM2 does with ByteArrayConverter"),
    ),
    _accepted(
        "key.converter.", "any", None, "Settings of the converters (bytes need none).", prefix=True
    ),
    _accepted(
        "value.converter.",
        "any",
        None,
        "Settings of the converters (bytes need none).",
        prefix=True,
    ),
    _accepted(
        "header.converter.",
        "any",
        None,
        "Settings of the converters (bytes need none).",
        prefix=True,
    ),
    Setting(
        "transforms",
        "list",
        "",
        "flow",
        "accepted",
        "No transformations.",
        "Single message transforms are Java: only an empty list is accepted.",
        only(
            "",
            why="single message transforms are Java classes and cannot run in the "
            "replicator, which copies records unchanged",
        ),
    ),
    Setting(
        "predicates",
        "list",
        "",
        "flow",
        "accepted",
        "No transformations.",
        "Predicates of transforms: only an empty list is accepted.",
        only("", why="predicates only serve transforms, which cannot run in the replicator"),
    ),
    _accepted(
        "transforms.", "any", None, "Settings of transforms (none may be listed).", prefix=True
    ),
    _accepted(
        "predicates.", "any", None, "Settings of predicates (none may be listed).", prefix=True
    ),
    Setting(
        "errors.tolerance",
        "string",
        "none",
        "flow",
        "accepted",
        "The failure policies decide.",
        "Only `none` (stop at an error, MM2's default) is accepted: what may be skipped is "
        "retention.gap.policy, topic.reset.policy and oversized.record.policy.",
        only(
            "none",
            why="skipping is decided per cause by retention.gap.policy, "
            "topic.reset.policy and oversized.record.policy",
        ),
    ),
    _accepted(
        "errors.retry.timeout",
        "int",
        "0",
        "Converters and transforms do not exist here; "
        "the engine retries Kafka errors itself, with backoff.",
    ),
    _accepted("errors.retry.delay.max.ms", "int", "60000", "As errors.retry.timeout."),
    _accepted(
        "errors.log.enable",
        "boolean",
        "false",
        "Every error is logged, naming topic, partition and offset.",
    ),
    _accepted(
        "errors.log.include.messages", "boolean", "false", "Record contents are never logged."
    ),
    _accepted(
        "errors.",
        "any",
        None,
        "Connect's dead-letter queue settings: records that cannot "
        "be copied stop or are skipped by the failure policies.",
        prefix=True,
    ),
    _accepted(
        "metric.reporters",
        "list",
        "org.apache.kafka.common.metrics.JmxReporter",
        "Metrics are exported for Prometheus (metrics.port), not by Java reporters.",
    ),
    _accepted(
        "checkpoints.topic.", "any", None, "Other settings of MM2's internal topics.", prefix=True
    ),
    _accepted(
        "heartbeats.topic.", "any", None, "Other settings of MM2's internal topics.", prefix=True
    ),
    _accepted(
        "offset-syncs.topic.", "any", None, "Other settings of MM2's internal topics.", prefix=True
    ),
    # --- Connect worker (MirrorMakerConfig) settings --------------------------------------------
    Setting(
        "group.id",
        "string",
        None,
        "worker",
        "refused",
        "",
        "MM2's Connect worker group has no counterpart: the replicator's workers of flow "
        "A->B share the consumer group replicator-A-B on A, the name ACLs, status and "
        "takeover rely on; remove group.id",
    ),
    _accepted(
        "config.providers",
        "list",
        "",
        "`${env:...}`, `${file:...}`, `${directory:...}` and `${conn:...}` are "
        "resolved whether or not providers are declared.",
    ),
    _accepted(
        "config.providers.",
        "any",
        None,
        "Provider classes: env, file, directory and conn are built in.",
        prefix=True,
    ),
    _accepted("dedicated.mode.enable.internal.rest", "boolean", "false", "No REST server."),
    _accepted("listeners", "list", "http://:8083", "No REST server."),
    _accepted("listeners.", "any", None, "No REST server.", prefix=True),
    _accepted("admin.listeners", "list", None, "No REST server."),
    _accepted("admin.listeners.", "any", None, "No REST server.", prefix=True),
    _accepted("rest.", "any", None, "No REST server.", prefix=True),
    _accepted("access.control.", "any", None, "No REST server.", prefix=True),
    _accepted("response.http.headers.config", "string", "", "No REST server."),
    _accepted("rest.extension.classes", "list", "", "No REST server."),
    _accepted(
        "ssl.client.auth",
        "string",
        "none",
        "TLS client authentication of MM2's REST "
        "server; the replicator has none (its clients' TLS is set with ssl.*).",
    ),
    _accepted(
        "offset.storage.",
        "any",
        None,
        "Connect's offsets topic's other settings: the replicator "
        "resumes from the target's tail (offset.storage.topic is read for takeovers).",
        prefix=True,
    ),
    _accepted(
        "config.storage.",
        "any",
        None,
        "Connect's configs topic: configuration is the file.",
        prefix=True,
    ),
    _accepted(
        "status.storage.",
        "any",
        None,
        "Connect's status topic (its replication factor is read above).",
        prefix=True,
    ),
    _accepted(
        "offset.flush.interval.ms",
        "int",
        "60000",
        "Connect commits source offsets; the replicator resumes from the target's tail.",
    ),
    _accepted("offset.flush.timeout.ms", "int", "5000", "As offset.flush.interval.ms."),
    _accepted(
        "session.timeout.ms",
        "int",
        None,
        "Connect worker group timing; the replication "
        "group's are client settings (consumer.session.timeout.ms).",
        scope="worker",
    ),
    _accepted("heartbeat.interval.ms", "int", None, "As session.timeout.ms."),
    _accepted("rebalance.timeout.ms", "int", None, "As session.timeout.ms."),
    _accepted(
        "scheduled.rebalance.max.delay.ms",
        "int",
        None,
        "Connect's task rebalancing; replication tasks rebalance through the consumer group.",
    ),
    _accepted("connect.protocol", "string", None, "Connect's worker protocol."),
    _accepted("worker.sync.timeout.ms", "int", None, "Connect worker coordination."),
    _accepted("worker.unsync.backoff.ms", "int", None, "Connect worker coordination."),
    _accepted("worker.", "any", None, "Connect worker settings.", prefix=True),
    _accepted("task.", "any", None, "Connect task settings.", prefix=True),
    _accepted(
        "task.shutdown.graceful.timeout.ms",
        "int",
        None,
        "`replicator run` stops its tasks itself (flushing what is in flight).",
    ),
    _accepted(
        "plugin.path",
        "list",
        None,
        "No Connect plugins (ports of custom classes are "
        "Python packages found through entry points).",
    ),
    _accepted("plugin.discovery", "string", None, "No Connect plugins."),
    _accepted(
        "connector.client.config.override.policy",
        "string",
        None,
        "Client overrides are read as MM2 reads them.",
    ),
    _accepted("topic.creation.enable", "boolean", None, "Remote topics are created by topic sync."),
    _accepted(
        "topic.creation.", "any", None, "Remote topics are created by topic sync.", prefix=True
    ),
    _accepted("topic.tracking.enable", "boolean", None, "Connect's topic tracking (REST)."),
    _accepted("topic.tracking.allow.reset", "boolean", None, "Connect's topic tracking (REST)."),
    _accepted("offset.storage.file.filename", "string", None, "Connect standalone mode."),
    _accepted(
        "exactly.once.support",
        "string",
        None,
        "Connect's per-connector setting; exactly.once.source.support or exactly.once decide.",
    ),
    _accepted(
        "transaction.boundary",
        "string",
        None,
        "Transactions are per partition batch in exactly-once mode.",
    ),
    _accepted("transaction.boundary.interval.ms", "int", None, "As transaction.boundary."),
    _accepted("inter.worker.", "any", None, "Connect worker coordination.", prefix=True),
)

#: Connect worker settings MM2 also reads from the target cluster's (`<target>.<key>`).
TARGET_CLUSTER_SETTINGS = tuple(s.key for s in TABLE if s.scope == "cluster")

#: Settings read by key (not prefix families), by key.
BY_KEY: dict[str, Setting] = {s.key: s for s in TABLE if not s.prefix}
#: The replication settings the loader reads at top and flow level.
SETTINGS: dict[str, Setting] = {
    s.key: s for s in TABLE if s.status == "read" and s.parse is not None and not s.prefix
}
_ACCEPTED = {s.key: s for s in TABLE if s.status != "read" and not s.prefix}
_ACCEPTED_PREFIXES = tuple(s for s in TABLE if s.status != "read" and s.prefix)


def accepted_setting(name: str) -> Setting | None:
    """The `accepted` or `refused` entry `name` is (a key, or one of a family), else None."""
    found = _ACCEPTED.get(name)
    if found is not None:
        return found
    return next((s for s in _ACCEPTED_PREFIXES if name.startswith(s.key)), None)


def is_connect_setting(name: str) -> bool:
    return accepted_setting(name) is not None


class ClientRule(NamedTuple):
    """A client setting the engine decides for one client: honoured when the user's
    value is one the engine uses anyway (`accepts`), refused otherwise."""

    name: str  # the librdkafka name (Java names are translated first)
    kind: ClientKind
    #: Which client of a flow: the source consumer, the target producer, or every
    #: client of the kind.
    client: Literal["source", "target", "all"]
    accepts: tuple[str, ...]
    reason: str


CLIENT_RULES: tuple[ClientRule, ...] = (
    ClientRule(
        "group.id",
        "consumer",
        "all",
        (),
        "the replicator names its consumer groups itself: the workers of flow A->B share "
        "replicator-A-B on A (the name ACLs, status and takeover rely on)",
    ),
    ClientRule(
        "enable.auto.commit",
        "consumer",
        "all",
        ("false",),
        "the replicator commits nothing automatically: where to resume is the target's tail",
    ),
    ClientRule(
        "enable.auto.offset.store",
        "consumer",
        "source",
        ("false",),
        "the replication loop stores positions itself, after delivery",
    ),
    ClientRule(
        "isolation.level",
        "consumer",
        "source",
        ("read_committed",),
        "only committed records are replicated (aborted ones never reach the target)",
    ),
    ClientRule(
        "auto.offset.reset",
        "consumer",
        "source",
        ("earliest",),
        "a partition never replicated is read from its beginning; a position out of "
        "range is decided by retention.gap.policy and topic.reset.policy, never "
        "jumped over",
    ),
    ClientRule(
        "partition.assignment.strategy",
        "consumer",
        "source",
        ("cooperative-sticky",),
        "the workers rebalance incrementally (cooperative-sticky) so that a worker "
        "joining or leaving never stops the others",
    ),
    ClientRule(
        "enable.idempotence",
        "producer",
        "target",
        ("true",),
        "the target producer is idempotent: no record is written twice by a retry",
    ),
    ClientRule(
        "enable.gapless.guarantee",
        "producer",
        "target",
        ("true",),
        "a failed batch must stop the partition, never leave a hole behind it",
    ),
    ClientRule(
        "acks",
        "producer",
        "target",
        ("all", "-1"),
        "the idempotent producer needs every in-sync replica's acknowledgement",
    ),
    ClientRule(
        "request.required.acks",
        "producer",
        "target",
        ("all", "-1"),
        "the idempotent producer needs every in-sync replica's acknowledgement",
    ),
    ClientRule(
        "message.max.bytes",
        "producer",
        "target",
        (),
        "the target producer's request size follows the remote topics' "
        "max.message.bytes (every record the source took fits); remove it, or raise "
        "max.message.bytes on the topics",
    ),
    ClientRule(
        "transactional.id",
        "producer",
        "target",
        (),
        "transactions are the engine's (exactly.once = true gives each partition its "
        "own transactional id)",
    ),
)


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


def connect_override(rest: str) -> ClientKey | None:
    """Kafka Connect's per-connector client override, `producer.override.<k>` (or
    `consumer.`/`admin.`), as a ClientKey of that kind; None for anything else."""
    head, _, tail = rest.partition(".")
    kind = _KINDS.get(head)
    word, _, name = tail.partition(".")
    if kind is None or word != "override" or not is_client_key(name):
        return None
    return ClientKey(name, kind, "target" if kind == "producer" else None)


_WORDS = frozenset(s.key for s in TABLE if not s.prefix)


@functools.cache
def top_candidates() -> frozenset[str]:
    kinds = frozenset(f"{kind}.{name}" for kind in CLIENT_KINDS for name in client_keys())
    return _WORDS | client_keys() | kinds | {"clusters"}


@functools.cache
def cluster_candidates() -> frozenset[str]:
    kinds = frozenset(f"{kind}.{name}" for kind in CLIENT_KINDS for name in client_keys())
    accepted = frozenset(_ACCEPTED) | frozenset(TARGET_CLUSTER_SETTINGS)
    return accepted | client_keys() | kinds


@functools.cache
def flow_candidates() -> frozenset[str]:
    kinds = frozenset(
        f"{role}{kind}.{name}"
        for role in ("", "source.", "target.")
        for kind in CLIENT_KINDS
        for name in client_keys()
    )
    return _WORDS | kinds | {"enabled"}
