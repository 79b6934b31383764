"""Loading MM2 configurations: examples, defaults, precedence, errors, secrets (no brokers)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from replicator.config import (
    ClusterConfig,
    ConfigError,
    FlowConfig,
    NameFilter,
    ReplicatorConfig,
    load_config,
    redact,
)
from replicator.config.loader import (
    DEFAULT_CONFIG_PROPERTIES_EXCLUDE,
    DEFAULT_GROUPS_EXCLUDE,
    DEFAULT_TOPICS_EXCLUDE,
)
from replicator.config.properties import parse_properties

EXAMPLES = Path(__file__).resolve().parents[3] / "include" / "config"


def two_clusters(**extra: str) -> dict[str, str]:
    """A minimal A->B configuration, plus `extra`."""
    props = {
        "clusters": "A, B",
        "A.bootstrap.servers": "a1:9092",
        "B.bootstrap.servers": "b1:9092",
        "A->B.enabled": "true",
    }
    props.update(extra)
    return props


def only_flow(config: ReplicatorConfig) -> FlowConfig:
    (flow,) = config.flows
    return flow


def error_of(props: dict[str, str]) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(props)
    message = str(info.value)
    assert "\n" not in message
    return message


# --- the example files ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "flows"),
    [
        ("mm2-active-passive.properties", ["primary->secondary"]),
        ("mm2-active-active.properties", ["A->B", "B->A"]),
        ("mm2-fan-out.properties", ["K->A", "K->B", "K->C"]),
        ("mm2-aggregation.properties", ["A->K", "B->K", "C->K"]),
        ("local.properties", ["primary->dr", "dr->primary"]),
    ],
)
def test_every_example_file_loads_as_is(name, flows):
    config = load_config(EXAMPLES / name)
    assert [flow.name for flow in config.flows] == flows
    assert config.source_file == str(EXAMPLES / name)


def test_active_passive_example():
    config = load_config(EXAMPLES / "mm2-active-passive.properties")
    flow = config.flow("primary->secondary")
    assert flow.source.bootstrap_servers == "broker1-primary:9092"
    assert flow.target.bootstrap_servers == "broker2-secondary:9092"
    assert flow.topics.matches("foo.bar")
    assert not flow.topics.matches("bar")
    with pytest.raises(ConfigError, match=r"'secondary->primary' is not enabled"):
        config.flow("secondary->primary")


def test_a_flow_is_named_as_a_to_b_or_in_its_shell_safe_form():
    config = load_config(EXAMPLES / "mm2-active-passive.properties")
    assert config.flow("primary:secondary") is config.flow("primary->secondary")
    # `replicator ... --flow primary->secondary` unquoted: bash cuts the word at '>'.
    with pytest.raises(ConfigError) as refused:
        config.flow("primary-")
    assert "enabled: primary:secondary" in str(refused.value)
    assert "write primary:B, or quote 'primary->B'" in str(refused.value)


def test_active_active_example_accepts_connect_settings(caplog):
    with caplog.at_level(logging.DEBUG, logger="replicator.config"):
        config = load_config(EXAMPLES / "mm2-active-active.properties")
    for flow in config.flows:
        assert flow.replication_factor == 1
        assert flow.checkpoints_topic_replication_factor == 1
        assert flow.heartbeats_topic_replication_factor == 1
        assert flow.offset_syncs_topic_replication_factor == 1
        # Ours, from Connect's status.storage.replication.factor (no status.topic.* set).
        assert flow.status_topic_replication_factor == 1
    assert config.clusters["A"].bootstrap_servers == "A_host1:9092, A_host2:9092, A_host3:9092"
    assert "offset.storage.replication.factor is accepted" in caplog.text


def test_fan_out_example_per_flow_filters():
    config = load_config(EXAMPLES / "mm2-fan-out.properties")
    k_to_a, k_to_b = config.flow("K->A"), config.flow("K->B")
    assert k_to_a.topics.matches("topic-1")
    assert not k_to_a.topics.matches("topic-3")
    assert k_to_a.groups.matches("group-2")
    assert k_to_b.topics.matches("topic-3")


def test_aggregation_example_top_level_defaults_apply_to_every_flow():
    config = load_config(EXAMPLES / "mm2-aggregation.properties")
    for flow in config.flows:
        assert flow.target.alias == "K"
        assert flow.emit_checkpoints_interval_seconds == 10
        assert flow.groups.matches("group1")
        assert not flow.groups.matches("group3")


def test_local_stack_configuration():
    config = load_config(EXAMPLES / "local.properties")
    flow = config.flow("primary->dr")
    assert flow.source.bootstrap_servers == "127.0.0.1:19092"
    assert flow.target.bootstrap_servers == "127.0.0.1:29092"
    assert [p.pattern for p in flow.topics.include] == [r"demo\..*"]
    assert flow.topics.matches("demo.orders")
    assert not flow.topics.matches("demoXorders")
    assert (
        flow.replication_factor,
        flow.heartbeats_topic_replication_factor,
        flow.checkpoints_topic_replication_factor,
        flow.offset_syncs_topic_replication_factor,
        flow.status_topic_replication_factor,
    ) == (1, 1, 1, 1, 1)


# --- documentation snippets that MM2 itself would misread ----------------------------


def test_doc_active_passive_snippet_without_clusters_fails_like_mm2():
    snippet = parse_properties(
        "primary.bootstrap.servers = broker1-primary:9092\n"
        "secondary.bootstrap.servers = broker2-secondary:9092\n"
        "primary->secondary.enabled = true\n"
    )
    assert error_of(snippet).startswith("clusters: required")


def test_doc_snippet_with_end_of_line_comment_is_rejected():
    snippet = parse_properties(
        "clusters = primary, secondary\n"
        "primary.bootstrap.servers = broker1-primary:9092\n"
        "secondary.bootstrap.servers = broker2-secondary:9092\n"
        "primary->secondary.enabled = true\n"
        "primary->secondary.topics = foo.*  # only replicate some topics\n"
    )
    message = error_of(snippet)
    assert message.startswith("primary->secondary.topics: pattern")
    assert "end-of-line comment" in message


def test_doc_clusters_line_with_end_of_line_comment_is_rejected():
    message = error_of({"clusters": "us-west, us-east   # defines cluster aliases"})
    assert message.startswith("clusters: alias")
    assert "end-of-line comment" in message


def test_doc_active_active_snippet_alias_typo_is_named():
    snippet = parse_properties(
        "clusters = us-west, us-east\n"
        "us-west.bootstrap.servers = broker1-west:9092,broker2-west:9092\n"
        "Us-east.bootstrap.servers = broker3-east:9092,broker4-east:9092\n"
        "us-west->us-east.enabled = true\n"
        "us-east->us-west.enabled = true\n"
    )
    message = error_of(snippet)
    assert message.startswith("Us-east.bootstrap.servers: 'Us-east' is not a cluster alias")
    assert "did you mean us-east.bootstrap.servers?" in message


def test_doc_flow_typo_names_the_key():
    props = two_clusters(**{"A->B.topics": "x"})
    props["us-west->us.east.topics"] = "foo.*, bar.*"
    message = error_of(props)
    assert message.startswith("us-west->us.east.topics: flow us-west->us names a cluster")


def test_legacy_readme_keys_get_a_suggestion():
    message = error_of(two_clusters(**{"A->B.emit.heartbeats": "false"}))
    assert message.startswith("A->B.emit.heartbeats: unknown setting")
    assert "did you mean A->B.emit.heartbeats.enabled?" in message


def test_doc_client_overrides_example():
    config = load_config(
        parse_properties(
            "clusters = us-west, us-east\n"
            "us-west.bootstrap.servers = broker3-west:9092\n"
            "us-east.bootstrap.servers = broker5-east:9092\n"
            "us-west->us-east.enabled = true\n"
            "tasks.max = 5\n"
            "us-west.offset.storage.topic = my-mirrormaker-offsets\n"
            "us-west.consumer.isolation.level = read_committed\n"
            "us-west.admin.bootstrap.servers = broker57-primary:9092\n"
            "us-east.producer.compression.type = gzip\n"
            "us-east.producer.buffer.memory = 32768\n"
            "us-east.admin.bootstrap.servers = broker8-secondary:9092\n"
        )
    )
    flow = config.flow("us-west->us-east")
    assert flow.tasks_max == 5
    assert flow.source.consumer["isolation.level"] == "read_committed"
    assert flow.source.consumer["bootstrap.servers"] == "broker3-west:9092"
    assert flow.source.admin["bootstrap.servers"] == "broker57-primary:9092"
    assert flow.target.producer["compression.type"] == "gzip"
    assert flow.target.producer["queue.buffering.max.kbytes"] == "32"
    assert flow.target.admin["bootstrap.servers"] == "broker8-secondary:9092"


def test_doc_securing_example_with_jks_explains_pem():
    props = two_clusters(
        **{
            "B.security.protocol": "SSL",
            "B.ssl.truststore.location": "/path/to/truststore.jks",
            "B.ssl.truststore.password": "my-secret-password",
            "B.ssl.keystore.location": "/path/to/keystore.jks",
            "B.ssl.keystore.password": "my-secret-password",
            "B.ssl.key.password": "my-secret-password",
        }
    )
    message = error_of(props)
    assert message.startswith("B.ssl.truststore.location: a JKS truststore cannot be used")
    assert "my-secret-password" not in message


# --- defaults -------------------------------------------------------------------------


def test_defaults_are_mm2_defaults():
    flow = only_flow(load_config(two_clusters()))
    assert flow.replication_policy_class == (
        "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
    )
    assert flow.replication_policy_separator == "."
    assert flow.replication_factor == 2
    assert flow.tasks_max == 1
    assert flow.offset_lag_max == 100
    assert flow.refresh_topics_interval_seconds == 600
    assert flow.refresh_groups_interval_seconds == 600
    assert flow.sync_topic_configs_interval_seconds == 600
    assert flow.sync_topic_acls_interval_seconds == 600
    assert flow.emit_heartbeats_interval_seconds == 1
    assert flow.emit_checkpoints_interval_seconds == 60
    assert flow.sync_group_offsets_enabled is False
    assert flow.sync_group_offsets_interval_seconds == 60
    assert flow.offset_syncs_topic_location == "source"
    assert flow.offset_syncs_cluster is flow.source
    assert flow.sync_topic_acls_enabled is False  # MM2: true; here opt-in (ALTER on CLUSTER)
    assert flow.status_topic_replication_factor == -1  # the broker's default
    assert flow.exactly_once is False
    assert flow.metrics_port is None
    assert [p.pattern for p in flow.topics.include] == [".*"]
    assert [p.pattern for p in flow.topics.exclude] == [
        p.strip() for p in DEFAULT_TOPICS_EXCLUDE.split(",")
    ]
    assert [p.pattern for p in flow.groups.exclude] == [
        p.strip() for p in DEFAULT_GROUPS_EXCLUDE.split(",")
    ]
    assert len(flow.config_properties_exclude) == len(DEFAULT_CONFIG_PROPERTIES_EXCLUDE.split(","))


@pytest.mark.parametrize(
    ("topic", "replicated"),
    [
        ("orders", True),
        ("mm2-offset-syncs.B.internal", False),
        ("A.checkpoints.internal", False),
        ("connect-offsets-internal", False),
        ("orders.replica", False),
        ("__consumer_offsets", False),
    ],
)
def test_default_topic_filter(topic, replicated):
    assert only_flow(load_config(two_clusters())).topics.matches(topic) is replicated


@pytest.mark.parametrize(
    ("group", "replicated"),
    [("app", True), ("console-consumer-42", False), ("connect-mm2", False), ("__x", False)],
)
def test_default_group_filter(group, replicated):
    assert only_flow(load_config(two_clusters())).groups.matches(group) is replicated


def test_default_config_property_exclusions():
    excluded = only_flow(load_config(two_clusters())).config_properties_exclude
    assert any(p.fullmatch("min.insync.replicas") for p in excluded)
    assert not any(p.fullmatch("retention.ms") for p in excluded)


def test_consumers_never_auto_commit_and_start_from_earliest():
    config = load_config(two_clusters(**{"A.consumer.auto.offset.reset": "earliest"}))
    flow = only_flow(config)
    assert flow.source.consumer["enable.auto.commit"] == "false"
    assert flow.source.consumer["auto.offset.reset"] == "earliest"
    assert flow.target.consumer["auto.offset.reset"] == "earliest"


def test_an_offset_reset_the_engine_would_override_is_refused():
    message = error_of(two_clusters(**{"A.consumer.auto.offset.reset": "latest"}))
    assert message.startswith("A.consumer.auto.offset.reset: refused (accepted: earliest)")
    assert "retention.gap.policy" in message


def test_auto_commit_true_is_refused():
    message = error_of(two_clusters(**{"A.consumer.enable.auto.commit": "true"}))
    assert message.startswith("A.consumer.enable.auto.commit: refused (accepted: false)")


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("session.timeout.ms", "10000"),
        ("heartbeat.interval.ms", "1000"),
        ("partition.assignment.strategy", "range"),
    ],
)
def test_classic_group_settings_with_the_consumer_group_protocol_are_refused(setting, value):
    props = {"A.consumer.group.protocol": "consumer", f"consumer.{setting}": value}
    message = error_of(two_clusters(**props))
    assert message.startswith(f"consumer.{setting} cannot be set with A.consumer.group.protocol")
    assert "group.consumer" in message


def test_consumer_group_protocol_and_remote_assignor_pass_through():
    props = {"A.consumer.group.protocol": "consumer", "A.consumer.group.remote.assignor": "uniform"}
    flow = only_flow(load_config(two_clusters(**props)))
    assert flow.source.consumer["group.protocol"] == "consumer"
    assert flow.source.consumer["group.remote.assignor"] == "uniform"


# --- flows ----------------------------------------------------------------------------


def test_flows_are_enabled_flows_in_clusters_order():
    props = {
        "clusters": "C, A, B",
        "A.bootstrap.servers": "a:1",
        "B.bootstrap.servers": "b:1",
        "C.bootstrap.servers": "c:1",
        "B->A.enabled": "true",
        "A->C.enabled": "TRUE",
        "C->B.enabled": "true",
        "A->B.enabled": "false",
        "C->A.enabled": "true",
    }
    config = load_config(props)
    assert [flow.name for flow in config.flows] == ["C->A", "C->B", "A->C", "B->A"]
    assert list(config.clusters) == ["C", "A", "B"]


def test_no_enabled_flow_warns(caplog):
    with caplog.at_level(logging.WARNING):
        config = load_config({"clusters": "A", "A.bootstrap.servers": "a:1"})
    assert config.flows == ()
    assert "no replication flow is enabled" in caplog.text


def test_cluster_without_bootstrap_and_without_flow_is_left_out():
    props = two_clusters(clusters="A, B, C")
    assert list(load_config(props).clusters) == ["A", "B"]


def test_flow_settings_override_top_level_settings():
    props = two_clusters(
        **{
            "clusters": "A, B, C",
            "C.bootstrap.servers": "c:1",
            "A->C.enabled": "true",
            "tasks.max": "4",
            "A->B.tasks.max": "8",
            "topics": "orders.*",
            "A->C.topics": "payments",
            "replication.policy.separator": "_",
        }
    )
    config = load_config(props)
    a_to_b, a_to_c = config.flow("A->B"), config.flow("A->C")
    assert (a_to_b.tasks_max, a_to_c.tasks_max) == (8, 4)
    assert a_to_b.topics.matches("orders.eu")
    assert not a_to_c.topics.matches("orders.eu")
    assert a_to_c.topics.matches("payments")
    assert a_to_b.replication_policy_separator == a_to_c.replication_policy_separator == "_"


def test_every_setting_is_read_with_its_mm2_name():
    props = two_clusters(
        **{
            "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
            "replication.policy.separator": "-",
            "replication.factor": "-1",
            "tasks.max": "3",
            "offset.lag.max": "0",
            "refresh.topics.enabled": "false",
            "refresh.topics.interval.seconds": "30",
            "refresh.groups.enabled": "true",
            "refresh.groups.interval.seconds": "31",
            "sync.topic.configs.enabled": "false",
            "sync.topic.configs.interval.seconds": "32",
            "sync.topic.acls.enabled": "false",
            "sync.topic.acls.interval.seconds": "33",
            "emit.heartbeats.enabled": "false",
            "emit.heartbeats.interval.seconds": "0.5",
            "emit.checkpoints.enabled": "true",
            "emit.checkpoints.interval.seconds": "5",
            "sync.group.offsets.enabled": "true",
            "sync.group.offsets.interval.seconds": "6",
            "offset-syncs.topic.location": "target",
            "heartbeats.topic.replication.factor": "1",
            "checkpoints.topic.replication.factor": "2",
            "offset-syncs.topic.replication.factor": "1",
            "retention.gap.policy": "skip",
            "topic.reset.policy": "skip",
            "oversized.record.policy": "skip",
            "status.topic.replication.factor": "1",
            "metrics.port": "9404",
            "exactly.once": "true",
        }
    )
    flow = only_flow(load_config(props))
    assert flow.replication_policy_class.endswith(".IdentityReplicationPolicy")
    assert flow.replication_policy_separator == "-"
    assert flow.replication_factor == -1
    assert flow.tasks_max == 3
    assert flow.offset_lag_max == 0
    assert flow.refresh_topics_enabled is False
    assert flow.refresh_groups_enabled is True
    assert flow.refresh_topics_interval_seconds == 30
    assert flow.refresh_groups_interval_seconds == 31
    assert flow.sync_topic_configs_enabled is flow.sync_topic_acls_enabled is False
    assert flow.sync_topic_configs_interval_seconds == 32
    assert flow.sync_topic_acls_interval_seconds == 33
    assert flow.emit_heartbeats_enabled is False
    assert flow.emit_heartbeats_interval_seconds == 0.5
    assert flow.emit_checkpoints_interval_seconds == 5
    assert flow.sync_group_offsets_enabled is True
    assert flow.sync_group_offsets_interval_seconds == 6
    assert flow.offset_syncs_topic_location == "target"
    assert flow.offset_syncs_cluster is flow.target
    assert flow.heartbeats_topic_replication_factor == 1
    assert flow.checkpoints_topic_replication_factor == 2
    assert flow.offset_syncs_topic_replication_factor == 1
    assert flow.retention_gap_policy == flow.topic_reset_policy == "skip"
    assert flow.oversized_record_policy == "skip"
    assert flow.status_topic_replication_factor == 1
    assert flow.metrics_port == 9404
    assert flow.exactly_once is True


# --- settings the replicator cannot honour are refused, not ignored ------------------


def test_offset_syncs_live_on_the_source_unless_the_target_is_asked_for():
    assert only_flow(load_config(two_clusters())).offset_syncs_cluster.alias == "A"
    flow = only_flow(load_config(two_clusters(**{"A->B.offset-syncs.topic.location": "target"})))
    assert flow.offset_syncs_cluster.alias == "B"


def test_acl_sync_is_opt_in():
    """Off by default (MM2: on), since it needs ALTER on the target's CLUSTER."""
    assert only_flow(load_config(two_clusters())).sync_topic_acls_enabled is False
    flow = only_flow(load_config(two_clusters(**{"sync.topic.acls.enabled": "true"})))
    assert flow.sync_topic_acls_enabled is True
    message = error_of(two_clusters(**{"sync.topic.acls.enabled": "yes"}))
    assert message.startswith("sync.topic.acls.enabled")


# --- our status topic's replication factor, from MM2's Connect setting -----------------


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({}, -1),
        ({"B.status.storage.replication.factor": "2"}, 2),
        ({"status.storage.replication.factor": "1", "B.status.storage.replication.factor": "2"}, 1),
        (
            {
                "A->B.status.storage.replication.factor": "4",
                "status.storage.replication.factor": "1",
            },
            4,
        ),
        ({"status.topic.replication.factor": "3", "status.storage.replication.factor": "1"}, 3),
        (
            {"status.topic.replication.factor": "3", "A->B.status.storage.replication.factor": "1"},
            3,
        ),
        ({"A->B.status.topic.replication.factor": "2", "status.topic.replication.factor": "3"}, 2),
        # Another cluster's Connect setting is not the target's.
        ({"A.status.storage.replication.factor": "2"}, -1),
    ],
)
def test_status_topic_replication_factor_precedence(extra, expected):
    flow = only_flow(load_config(two_clusters(**extra)))
    assert flow.status_topic_replication_factor == expected


def test_status_storage_replication_factor_is_validated():
    message = error_of(two_clusters(**{"B.status.storage.replication.factor": "0"}))
    assert message.startswith("B.status.storage.replication.factor: expected an integer >= 1")


def test_python_replication_policy_path_is_stored():
    props = two_clusters(**{"replication.policy.class": "my_package.policies.PrefixPolicy"})
    assert only_flow(load_config(props)).replication_policy_class == (
        "my_package.policies.PrefixPolicy"
    )


def test_exactly_once_from_mm2_worker_setting_on_target():
    props = two_clusters(**{"B.exactly.once.source.support": "enabled"})
    assert only_flow(load_config(props)).exactly_once is True
    props = two_clusters(**{"B.exactly.once.source.support": "preparing"})
    assert only_flow(load_config(props)).exactly_once is False


def test_exactly_once_contradiction():
    props = two_clusters(**{"exactly.once": "false", "B.exactly.once.source.support": "enabled"})
    assert error_of(props) == (
        "exactly.once and B.exactly.once.source.support contradict each other: keep one"
    )


# --- filters --------------------------------------------------------------------------


def test_legacy_blacklist_aliases_are_accepted():
    props = two_clusters(
        **{
            "topics.blacklist": "secret.*",
            "groups.blacklist": "batch-.*",
            "config.properties.blacklist": "retention\\.ms",
        }
    )
    flow = only_flow(load_config(props))
    assert not flow.topics.matches("secret.orders")
    assert flow.topics.matches("__consumer_offsets")  # the default exclude is replaced
    assert not flow.groups.matches("batch-1")
    assert [p.pattern for p in flow.config_properties_exclude] == ["retention\\.ms"]


def test_exclude_and_blacklist_with_different_values_contradict():
    props = two_clusters(**{"topics.exclude": "a.*", "topics.blacklist": "b.*"})
    assert error_of(props) == (
        "topics.exclude and topics.blacklist (its deprecated alias) differ: "
        "keep only topics.exclude"
    )
    props = two_clusters(**{"A->B.groups.exclude": "a.*", "A->B.groups.blacklist": "b.*"})
    assert error_of(props).startswith("A->B.groups.exclude and A->B.groups.blacklist")


def test_exclude_and_blacklist_with_the_same_value_are_fine():
    props = two_clusters(**{"topics.exclude": "a.*, b.*", "topics.blacklist": "a.*,b.*"})
    assert only_flow(load_config(props)).topics.why_not("b1") == "excluded by pattern 'b.*'"


def test_flow_level_exclude_overrides_top_level_blacklist():
    props = two_clusters(**{"topics.blacklist": "a.*", "A->B.topics.exclude": "b.*"})
    flow = only_flow(load_config(props))
    assert flow.topics.matches("a1")
    assert not flow.topics.matches("b1")


def test_empty_topics_replicates_nothing_and_warns(caplog):
    with caplog.at_level(logging.WARNING):
        flow = only_flow(load_config(two_clusters(topics="")))
    assert flow.topics.include == ()
    assert not flow.topics.matches("anything")
    assert "topics is empty" in caplog.text


def test_java_regex_constructs_are_translated():
    props = two_clusters(
        topics=r"\Qa.b\E, x++y, (?<env>prod|test)\.orders, end\z",
        groups=r"(?i)app-.*",
    )
    flow = only_flow(load_config(props))
    assert flow.topics.matches("a.b")
    assert not flow.topics.matches("aXb")
    assert flow.topics.matches("xxy")
    assert flow.topics.matches("prod.orders")
    assert flow.topics.matches("end")
    assert flow.groups.matches("APP-1")


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("orders(", "invalid regular expression 'orders('"),
        (r"\p{Alpha}+", "uses Java's \\p{...} character classes"),
        ("[a-z&&[^x]]", "invalid regular expression"),
    ],
)
def test_bad_regex_names_key_and_pattern(pattern, problem):
    message = error_of(two_clusters(**{"A->B.topics": f"ok, {pattern}"}))
    assert message.startswith("A->B.topics: ")
    assert problem in message


# --- client settings and their precedence ---------------------------------------------


def test_client_settings_go_to_the_right_kinds():
    props = two_clusters(
        **{
            "security.protocol": "SSL",
            "A.fetch.min.bytes": "100",
            "A.acks": "all",
            "client.id": "mm2",
        }
    )
    config = load_config(props)
    a = config.clusters["A"]
    assert a.consumer["fetch.min.bytes"] == "100"
    assert "fetch.min.bytes" not in a.producer
    assert a.producer["acks"] == "all"
    assert "acks" not in a.admin
    for client in (a.consumer, a.producer, a.admin):
        assert client["security.protocol"] == "SSL"
        assert client["client.id"] == "mm2"
        assert client["bootstrap.servers"] == "a1:9092"


def test_top_level_bootstrap_servers_is_every_clusters_default():
    props = {"clusters": "A, B", "bootstrap.servers": "shared:9092", "A->B.enabled": "true"}
    props["B.bootstrap.servers"] = "b:9092"
    flow = only_flow(load_config(props))
    assert flow.source.bootstrap_servers == "shared:9092"
    assert flow.target.bootstrap_servers == "b:9092"


# Every layer of a non-connection setting, highest first (see _client_settings).
OTHER_LAYERS = [
    ("A->B.source.consumer.fetch.min.bytes", "1"),
    ("A.consumer.fetch.min.bytes", "2"),
    ("A->B.consumer.fetch.min.bytes", "3"),
    ("A.fetch.min.bytes", "4"),
    ("consumer.fetch.min.bytes", "5"),
    ("fetch.min.bytes", "6"),
]
# Every layer of a connection setting, highest first: MM2 puts flow-level last.
CONNECTION_LAYERS = [
    ("A->B.source.consumer.sasl.kerberos.service.name", "1"),
    ("A.consumer.sasl.kerberos.service.name", "2"),
    ("A.sasl.kerberos.service.name", "3"),
    ("consumer.sasl.kerberos.service.name", "4"),
    ("sasl.kerberos.service.name", "5"),
    ("A->B.consumer.sasl.kerberos.service.name", "6"),
]


@pytest.mark.parametrize(
    ("layers", "setting"),
    [(OTHER_LAYERS, "fetch.min.bytes"), (CONNECTION_LAYERS, "sasl.kerberos.service.name")],
)
def test_client_precedence_follows_mm2(layers, setting):
    for highest in range(len(layers)):
        props = two_clusters(**dict(layers[highest:]))
        consumer = only_flow(load_config(props)).source.consumer
        assert consumer[setting] == layers[highest][1], f"{layers[highest][0]} should win"


def test_flow_level_connection_setting_overridden_by_top_level_warns(caplog):
    props = two_clusters(
        **{"security.protocol": "SSL", "A->B.consumer.security.protocol": "SASL_SSL"}
    )
    with caplog.at_level(logging.WARNING):
        flow = only_flow(load_config(props))
    assert flow.source.consumer["security.protocol"] == "SSL"
    assert "A->B.consumer.security.protocol is overridden by security.protocol" in caplog.text
    assert "A->B.source.consumer.security.protocol" in caplog.text


def test_flow_level_overrides_apply_to_both_roles_and_role_prefixes_to_one():
    props = two_clusters(
        **{
            "A->B.producer.linger.ms": "7",
            "A->B.target.producer.linger.ms": "9",
            "A->B.admin.retry.backoff.ms": "11",
        }
    )
    flow = only_flow(load_config(props))
    assert flow.source.producer["linger.ms"] == "7"  # offset syncs on the source
    assert flow.target.producer["linger.ms"] == "9"
    assert flow.source.admin["retry.backoff.ms"] == flow.target.admin["retry.backoff.ms"] == "11"


def test_cluster_configs_do_not_include_flow_overrides():
    props = two_clusters(**{"A->B.consumer.fetch.min.bytes": "3"})
    config = load_config(props)
    assert "fetch.min.bytes" not in config.clusters["A"].consumer
    assert only_flow(config).source.consumer["fetch.min.bytes"] == "3"


def test_a_more_specific_java_name_overrides_a_librdkafka_name():
    props = two_clusters(
        **{"A.message.max.bytes": "1000000", "A.producer.max.request.size": "5000"}
    )
    assert only_flow(load_config(props)).source.producer["message.max.bytes"] == "5000"


def test_dropped_java_settings_are_logged_by_key(caplog):
    props = two_clusters(
        **{
            "A.consumer.max.poll.records": "500",
            "B.producer.key.serializer": "org.apache.kafka...ByteArraySerializer",
            "B.producer.interceptor.classes": "com.example.Audit",
        }
    )
    with caplog.at_level(logging.DEBUG, logger="replicator.config"):
        flow = only_flow(load_config(props))
    assert "max.poll.records" not in flow.source.consumer
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    debugs = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert any(m.startswith("A.consumer.max.poll.records is ignored") for m in warnings)
    assert any(m.startswith("B.producer.interceptor.classes is ignored") for m in warnings)
    assert any(m.startswith("B.producer.key.serializer is ignored") for m in debugs)
    assert "com.example.Audit" not in caplog.text


def test_setting_for_the_wrong_client_kind_warns(caplog):
    with caplog.at_level(logging.WARNING):
        load_config(two_clusters(**{"A.consumer.acks": "all"}))
    assert "A.consumer.acks has no effect: acks is not a consumer setting" in caplog.text


def test_flow_level_client_setting_without_kind_warns(caplog):
    with caplog.at_level(logging.WARNING):
        load_config(two_clusters(**{"A->B.security.protocol": "SSL"}))
    assert "A->B.security.protocol has no effect" in caplog.text


# --- errors, each one line naming the key ---------------------------------------------


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({"clusters": " "}, "clusters: expected at least one cluster alias"),
        ({"clusters": "A, A"}, "clusters: an alias is listed twice"),
        ({"clusters": "A, B C"}, "clusters: alias 'B C' must not contain whitespace"),
        (
            {"clusters": "A, B", "A->B.enabled": "true", "A.bootstrap.servers": "a:1"},
            "B.bootstrap.servers: required for every cluster of an enabled flow",
        ),
        (
            two_clusters(**{"A->A.enabled": "true"}),
            "A->A.enabled: a flow from cluster A to itself is not possible",
        ),
        (
            two_clusters(**{"X->B.enabled": "true"}),
            "X->B.enabled: flow X->B names a cluster that is not in clusters (A, B)",
        ),
        (
            two_clusters(**{"A->B.enabled": "yes"}),
            "A->B.enabled: expected true or false, got 'yes'",
        ),
        (
            two_clusters(**{"A->B.refresh.topics.enabled": "1"}),
            "A->B.refresh.topics.enabled: expected true or false, got '1'",
        ),
        (two_clusters(**{"tasks.max": "0"}), "tasks.max: expected an integer >= 1, got '0'"),
        (two_clusters(**{"tasks.max": "two"}), "tasks.max: expected an integer >= 1, got 'two'"),
        (
            two_clusters(**{"replication.factor": "0"}),
            "replication.factor: expected an integer >= 1, or -1 for the broker default, got '0'",
        ),
        (
            two_clusters(**{"emit.checkpoints.interval.seconds": "0"}),
            "emit.checkpoints.interval.seconds: expected a positive number of seconds, got '0'",
        ),
        (
            two_clusters(**{"A->B.sync.topic.acls.interval.seconds": "soon"}),
            "A->B.sync.topic.acls.interval.seconds: expected a positive number of seconds",
        ),
        (
            two_clusters(**{"offset-syncs.topic.location": "elsewhere"}),
            "offset-syncs.topic.location: expected source or target, got 'elsewhere'",
        ),
        (
            two_clusters(**{"retention.gap.policy": "ignore"}),
            "retention.gap.policy: expected fail or skip, got 'ignore'",
        ),
        (
            two_clusters(**{"A->B.oversized.record.policy": "truncate"}),
            "A->B.oversized.record.policy: expected fail or skip, got 'truncate'",
        ),
        (two_clusters(**{"metrics.port": "70000"}), "metrics.port: expected a TCP port (1-65535)"),
        (
            two_clusters(**{"replication.policy.class": "IdentityReplicationPolicy"}),
            "replication.policy.class: expected a fully qualified class name",
        ),
        (
            two_clusters(**{"replication.policy.separator": ""}),
            "replication.policy.separator: expected a non-empty separator",
        ),
        (two_clusters(enabled="true"), "enabled: flows are enabled one by one"),
        (
            two_clusters(**{"A.replication.factor": "3"}),
            "A.replication.factor: replication.factor cannot be set per cluster",
        ),
        (
            two_clusters(**{"topic.filter.class": "com.example.MyTopicFilter"}),
            "topic.filter.class = com.example.MyTopicFilter: no Python port of this Java class",
        ),
        (
            two_clusters(**{"B.exactly.once.source.support": "on"}),
            "B.exactly.once.source.support: expected enabled, preparing or disabled, got 'on'",
        ),
        (
            two_clusters(**{"A.security.protocol": "TLS"}),
            "A.security.protocol: expected one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL",
        ),
    ],
)
def test_errors_name_the_key(props, expected):
    assert error_of(props).startswith(expected)


@pytest.mark.parametrize(
    ("emit", "sync"),
    [
        ("emit.checkpoints.enabled", "sync.group.offsets.enabled"),
        ("A->B.emit.checkpoints.enabled", "sync.group.offsets.enabled"),
        ("emit.checkpoints.enabled", "A->B.sync.group.offsets.enabled"),
    ],
)
def test_group_offset_sync_needs_checkpoints(emit, sync):
    message = error_of(two_clusters(**{emit: "false", sync: "true"}))
    assert message.startswith(f"{sync}=true contradicts {emit}=false")


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [
        ("topics.exlude", "topics.exclude"),
        ("emit.checkpoint.enabled", "emit.checkpoints.enabled"),
        ("consumer.fetch.min.byte", "consumer.fetch.min.bytes"),
        ("A.consumer.isolation.levels", "A.consumer.isolation.level"),
        ("A->B.sync.group.offsets", "A->B.sync.group.offsets.enabled"),
    ],
)
def test_unknown_keys_suggest_the_closest_known_key(key, suggestion):
    message = error_of(two_clusters(**{key: "x"}))
    assert message.startswith(f"{key}: unknown setting")
    assert f"(did you mean {suggestion}?)" in message


def test_unknown_key_without_a_close_match():
    message = error_of(two_clusters(**{"totally.made.up": "x"}))
    assert message == (
        "totally.made.up: unknown setting: neither an MM2/Connect setting, a Kafka client "
        "setting nor a replicator setting"
    )


def test_several_unknown_keys_are_reported_together():
    message = error_of(two_clusters(**{"zzz.one": "1", "yyy.two": "2"}))
    assert message.index("yyy.two") < message.index("zzz.one")


def test_accepted_mm2_and_connect_settings(caplog):
    props = two_clusters(
        **{
            "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
            "value.converter.schemas.enable": "false",
            "header.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
            "offset.storage.replication.factor": "1",
            "config.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "emit.offset-syncs.enabled": "true",
            "dedicated.mode.enable.internal.rest": "true",
            "replication.policy.internal.topic.separator.enabled": "false",
            "checkpoints.topic.retention.ms": "1000",
            "topic.filter.class": "org.apache.kafka.connect.mirror.DefaultTopicFilter",
            "A->B.group.filter.class": "org.apache.kafka.connect.mirror.DefaultGroupFilter",
            "config.providers": "file, env",
            "config.providers.file.class": (
                "org.apache.kafka.common.config.provider.FileConfigProvider"
            ),
            "B.offset.storage.topic": "mm2-offsets",
            "A->B.consumer.poll.timeout.ms": "500",
            "admin.timeout.ms": "60000",
        }
    )
    with caplog.at_level(logging.INFO, logger="replicator.config"):
        flow = only_flow(load_config(props))
    assert "group.id" not in flow.target.consumer
    assert flow.mm2_offsets_topic == "mm2-offsets"  # where a takeover reads MM2's offsets
    assert "key.converter is accepted" in caplog.text


def test_mapping_values_must_be_strings():
    with pytest.raises(ConfigError, match=r"tasks\.max: values must be strings, got int"):
        load_config({**two_clusters(), "tasks.max": 3})  # type: ignore[dict-item]


def test_values_are_trimmed_like_kafka_configdef():
    props = two_clusters(**{"tasks.max": " 3 ", "A->B.enabled": " true\t"})
    assert only_flow(load_config(props)).tasks_max == 3


# --- indirection and secrets ----------------------------------------------------------

SECRETS = ("jaas-pass-123", "key-pass-456", "trust-pass-789", "oidc-secret-000")


def secret_props(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    secrets = tmp_path / "secrets.properties"
    secrets.write_text(f"truststore = {SECRETS[2]}\n")
    monkeypatch.setenv("MM2_JAAS_PASSWORD", SECRETS[0])
    monkeypatch.setenv("MM2_KEY_PASSWORD", SECRETS[1])
    return two_clusters(
        **{
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": (
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                'username="mm2" password="${env:MM2_JAAS_PASSWORD}";'
            ),
            "A.ssl.truststore.type": "PEM",
            "A.ssl.truststore.location": "/etc/ca.pem",
            "A.ssl.truststore.password": f"${{file:{secrets}:truststore}}",
            "A.ssl.keystore.type": "PKCS12",
            "A.ssl.keystore.location": "/etc/client.p12",
            "A.ssl.keystore.password": "${env:MM2_KEY_PASSWORD}",
            "A.ssl.key.password": "${env:MM2_KEY_PASSWORD}",
            "B.sasl.mechanism": "OAUTHBEARER",
            "B.sasl.jaas.config": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                f'clientId="mm2" clientSecret="{SECRETS[3]}";'
            ),
            "B.sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
            # things that log warnings, to check those too
            "A.consumer.max.poll.records": "10",
            "A->B.consumer.security.protocol": "SSL",
            "A->B.sasl.jaas.config": "ignored at flow level",
        }
    )


def test_secrets_are_resolved_into_client_configs(tmp_path, monkeypatch):
    flow = only_flow(load_config(secret_props(tmp_path, monkeypatch)))
    assert flow.source.consumer["sasl.username"] == "mm2"
    assert flow.source.consumer["sasl.password"] == SECRETS[0]
    assert flow.source.consumer["ssl.ca.location"] == "/etc/ca.pem"
    assert flow.source.consumer["ssl.keystore.password"] == SECRETS[1]
    assert flow.target.producer["sasl.oauthbearer.client.secret"] == SECRETS[3]
    assert flow.target.producer["sasl.oauthbearer.method"] == "oidc"


def test_secrets_never_appear_in_repr_str_or_logs(tmp_path, monkeypatch, caplog):
    with caplog.at_level(logging.DEBUG):
        config = load_config(secret_props(tmp_path, monkeypatch))
    shown = [repr(config), str(config), repr(config.flows[0]), repr(config.clusters["A"])]
    for secret in SECRETS:
        for text in shown:
            assert secret not in text
        assert secret not in caplog.text
    assert "'sasl.password': '******'" in repr(config.clusters["A"])
    assert "A->B.sasl.jaas.config has no effect" in caplog.text


def test_a_secret_from_the_connection_is_resolved_and_never_shown():
    """`${conn:NAME}` (the Airflow connection's secrets, which the plugin's hook passes
    in) resolves like `${env:...}` and is shown nowhere either."""
    props = two_clusters(
        **{
            "A.security.protocol": "SASL_SSL",
            "A.sasl.mechanism": "SCRAM-SHA-512",
            "A.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                'username="mm2" password="${conn:password}";'
            ),
        }
    )
    config = load_config(props, connection={"password": SECRETS[0]})
    assert config.clusters["A"].consumer["sasl.password"] == SECRETS[0]
    assert SECRETS[0] not in repr(config) + str(config) + repr(config.clusters["A"])
    assert "${conn:password}" in error_of(props)  # no connection given: named, not guessed


def test_secrets_never_appear_in_errors(tmp_path, monkeypatch):
    props = secret_props(tmp_path, monkeypatch)
    props["B.ssl.truststore.location"] = "/etc/truststore.jks"
    props["B.ssl.truststore.password"] = SECRETS[2]
    props["A.sasl.pasword"] = SECRETS[1]  # a typo'd key holding a secret
    with pytest.raises(ConfigError) as info:
        load_config(props)
    message = str(info.value)
    assert "A.sasl.pasword: unknown setting" in message
    assert "did you mean A.sasl.password?" in message
    for secret in SECRETS:
        assert secret not in message


def test_a_broken_jaas_string_is_never_quoted():
    props = two_clusters(
        **{"sasl.mechanism": "PLAIN", "A.sasl.jaas.config": 'PlainLoginModule username="u" p="x9"'}
    )
    message = error_of(props)
    assert message.startswith("A.sasl.jaas.config:")
    assert "x9" not in message


def test_missing_env_reference_names_the_key(monkeypatch):
    monkeypatch.delenv("NO_SUCH_SECRET", raising=False)
    message = error_of(two_clusters(**{"A.sasl.password": "${env:NO_SUCH_SECRET}"}))
    assert message.startswith("A.sasl.password: environment variable NO_SUCH_SECRET")


def test_redact():
    config = {
        "bootstrap.servers": "h:1",
        "sasl.username": "alice",
        "sasl.password": "p",
        "sasl.jaas.config": "j",
        "ssl.key.password": "k",
        "ssl.key.pem": "pem",
        "ssl.keystore.password": "ks",
        "ssl.keystore.key": "pem2",
        "sasl.oauthbearer.client.secret": "s",
        "sasl.oauthbearer.assertion.private.key.passphrase": "pp",
        "A.producer.sasl.jaas.config": "j2",
        "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "nested": {"ssl.truststore.password": "t", "client.id": "c"},
    }
    assert redact(config) == {
        "bootstrap.servers": "h:1",
        "sasl.username": "alice",
        "sasl.password": "******",
        "sasl.jaas.config": "******",
        "ssl.key.password": "******",
        "ssl.key.pem": "******",
        "ssl.keystore.password": "******",
        "ssl.keystore.key": "******",
        "sasl.oauthbearer.client.secret": "******",
        "sasl.oauthbearer.assertion.private.key.passphrase": "******",
        "A.producer.sasl.jaas.config": "******",
        "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "nested": {"ssl.truststore.password": "******", "client.id": "c"},
    }


def test_cluster_config_repr_redacts_but_keeps_the_rest():
    cluster = ClusterConfig("A", "h:1", consumer={"sasl.password": "pw", "group.id": "g"})
    assert repr(cluster) == (
        "ClusterConfig(alias='A', bootstrap_servers='h:1', "
        "consumer={'sasl.password': '******', 'group.id': 'g'}, producer={}, admin={})"
    )
    assert cluster.consumer["sasl.password"] == "pw"


def test_name_filter_explains_why_a_topic_is_not_replicated():
    flow = only_flow(load_config(two_clusters(topics="orders.*")))
    assert isinstance(flow.topics, NameFilter)
    assert flow.topics.why_not("payments") == "matches no include pattern"
    assert flow.topics.why_not("orders.replica") == r"excluded by pattern '.*\\.replica'"
    assert flow.topics.why_not("orders") is None


@pytest.mark.parametrize(
    ("topics", "name", "replicated"),
    [
        # Alternatives of one pattern, and a pattern that matches a prefix only.
        ("orders|payments, audit", "payments", True),
        ("orders, orders.eu", "orders.eu", True),
        ("order, orders.*", "orders", True),
        ("orders.x", "orders", False),
        # A group referred to by number or name: its number in a joined regex would
        # differ, so each pattern is matched alone.
        ("(a)b, (x)\\1", "xx", True),
        ("(a)b, (x)\\1", "xa", False),
        ("(?P<c>y)(?P=c), (?P<c>z)", "yy", True),
        # A group name given twice: not one regex either.
        ("(?P<c>y), (?P<c>z)", "z", True),
    ],
)
def test_a_topic_list_matches_as_each_pattern_alone_would(topics, name, replicated):
    flow = only_flow(load_config(two_clusters(topics=topics)))
    assert flow.topics.matches(name) is replicated
    alone = any(p.fullmatch(name) for p in flow.topics.include)
    assert alone is replicated


def test_a_flow_that_lists_thousands_of_topics_matches_them_in_one_regex():
    # 2,500 topics listed by name were 6.25 million matches for the whole list.
    names = [f"plan.bench.{i:05d}" for i in range(2500)]
    flow = only_flow(load_config(two_clusters(topics=", ".join(names))))
    assert all(flow.topics.matches(name) for name in names)
    assert not flow.topics.matches("plan.bench.02500")
    assert not flow.topics.matches("plan.bench.00001.replica")  # excluded by default
    assert flow.topics._included._one is not None


def test_cluster_kind_setting_overriding_flow_kind_setting_warns(caplog):
    props = two_clusters(
        **{"A.consumer.fetch.min.bytes": "2", "A->B.consumer.fetch.min.bytes": "3"}
    )
    with caplog.at_level(logging.WARNING):
        flow = only_flow(load_config(props))
    assert flow.source.consumer["fetch.min.bytes"] == "2"
    assert "A->B.consumer.fetch.min.bytes is overridden by A.consumer.fetch.min.bytes" in (
        caplog.text
    )


def test_role_specific_flow_override_wins_without_warning(caplog):
    props = two_clusters(
        **{
            "A.consumer.fetch.min.bytes": "2",
            "A->B.consumer.fetch.min.bytes": "3",
            "A->B.source.consumer.fetch.min.bytes": "4",
        }
    )
    with caplog.at_level(logging.WARNING):
        flow = only_flow(load_config(props))
    assert flow.source.consumer["fetch.min.bytes"] == "4"
    assert flow.target.consumer["fetch.min.bytes"] == "3"
    assert "overridden" not in caplog.text


def test_a_connect_producer_override_is_the_flows_target_producer_setting(caplog):
    """Strimzi's connector configuration carries Kafka Connect's client overrides; MM2's
    worker applies `producer.override.*` to the producer that writes to the target."""
    props = two_clusters(
        **{
            "A->B.producer.override.batch.size": "327680",
            "A->B.producer.override.linger.ms": "100",
            "A->B.consumer.override.fetch.min.bytes": "5",
            "B.producer.override.acks": "1",
        }
    )
    with caplog.at_level(logging.INFO, logger="replicator.config"):
        flow = only_flow(load_config(props))
    assert flow.target.producer["batch.size"] == "327680"
    assert flow.target.producer["linger.ms"] == "100"
    assert "batch.size" not in flow.source.producer  # offset syncs on the source: not Connect's
    assert "fetch.min.bytes" not in flow.source.consumer
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        w.startswith("A->B.consumer.override.fetch.min.bytes has no effect") for w in warnings
    )
    assert any(w.startswith("B.producer.override.acks has no effect") for w in warnings)
    assert flow.target.producer.get("acks") != "1"


def test_one_setting_by_override_and_by_role_prefix_is_refused():
    props = two_clusters(
        **{"A->B.producer.override.linger.ms": "100", "A->B.target.producer.linger.ms": "9"}
    )
    with pytest.raises(ConfigError, match=r"linger\.ms.*keep one"):
        load_config(props)


def test_an_override_of_an_unknown_client_setting_is_unknown():
    with pytest.raises(ConfigError, match=r"A->B\.producer\.override\.lingr\.ms: unknown setting"):
        load_config(two_clusters(**{"A->B.producer.override.lingr.ms": "100"}))
