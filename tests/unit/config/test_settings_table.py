"""The settings table: one declaration per key drives the loader, FlowConfig's fields and
docs/configuration.md; every key of MirrorMaker 2's own ConfigDefs (the Kafka jars',
listed in mm2_keys.tsv by tests/integration/config/test_mm2_keys.py) is honoured or
refused with a message naming it; client settings the engine would override are
refused, and every client is built once at load (no brokers)."""

from __future__ import annotations

import dataclasses
import logging
import re
import typing
from pathlib import Path

import pytest

from replicator.config import ConfigError, FlowConfig, load_config
from replicator.config.client_check import check_client
from replicator.config.client_security import SECURITY_KEYS
from replicator.config.clients import is_client_key, renamed_settings
from replicator.config.flow_fields import COMMAND
from replicator.config.flow_fields import render as render_flow_settings
from replicator.config.flow_settings import FlowSettings
from replicator.config.keys import BY_KEY, CLIENT_RULES, TABLE, accepted_setting, python_type
from replicator.config.policies import load_policy
from replicator.config.reference import render
from replicator.engine.offset_syncs import OffsetSyncWriter
from replicator.engine.replica_producers import target_producer_config
from replicator.engine.size_limits import SizeLimits
from replicator.engine.topic_sync import HEADER_HEADROOM_BYTES, why_not_replicated

ROOT = Path(__file__).resolve().parents[3]
MM2_KEYS = Path(__file__).with_name("mm2_keys.tsv")

#: FlowConfig fields the loader combines from several keys (each named in the table).
COMBINED = {
    "source": "<alias>.bootstrap.servers and client settings",
    "target": "<alias>.bootstrap.servers and client settings",
    "topics": "topics, topics.exclude, topic.filter.class",
    "groups": "groups, groups.exclude, group.filter.class",
    "config_properties_exclude": "config.properties.exclude",
    "exactly_once": "exactly.once, exactly.once.source.support",
    "policy_settings": "<every key of the flow (a custom policy's configure)>",
    "status_topic_replication_factor": "status.topic.replication.factor",
    "mm2_offsets_topic": "offset.storage.topic",
}


def two_clusters(**extra: str) -> dict[str, str]:
    return {
        "clusters": "A, B",
        "A.bootstrap.servers": "a1:9092",
        "B.bootstrap.servers": "b1:9092",
        "A->B.enabled": "true",
        **extra,
    }


def error_of(props: dict[str, str]) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(props)
    return str(info.value)


# --- one table: FlowConfig and the reference page agree with it ---------------------------


def test_every_flow_field_is_declared_once_with_the_tables_default():
    """FlowConfig's settings fields are the table's `field`s, each once, with the table's
    default as the loader reads it; its other fields are combined from keys of the table."""
    settings = {f.name: f for f in dataclasses.fields(FlowSettings)}
    declared = [s for s in TABLE if s.field is not None]
    assert len({s.field for s in declared}) == len(declared), "a field filled by two keys"
    assert list(settings) == [s.field for s in declared]
    for setting in declared:
        field = settings[setting.field]
        if setting.default is None:
            assert field.default is None, setting.key
        else:
            parsed = setting.parse(setting.key, setting.default)
            assert field.default == parsed, f"{setting.key}: {field.default!r} != {parsed!r}"
            assert type(field.default) is type(parsed), setting.key
    assert issubclass(FlowConfig, FlowSettings)
    fields = {f.name for f in dataclasses.fields(FlowConfig)}
    assert fields - set(settings) == set(COMBINED), "FlowConfig fields no key of the table fills"
    for keys in COMBINED.values():
        for key in keys.split(", "):
            assert key.startswith("<") or key in BY_KEY, key


def test_the_flow_settings_module_is_generated_from_the_table():
    committed = (ROOT / "replicator" / "config" / "flow_settings.py").read_text()
    assert committed == render_flow_settings(), (
        "replicator/config/flow_settings.py is not what the settings table generates; "
        f"regenerate it: {COMMAND}"
    )


def test_each_generated_field_has_the_python_type_of_its_values():
    """The annotation the table gives (`python_type`) holds the default and, for a choice
    (`a|b`), is exactly the values the setting's parser accepts."""
    hints = typing.get_type_hints(FlowSettings)
    for setting in (s for s in TABLE if s.field is not None):
        hint = hints[setting.field]
        if setting.default is None:
            assert type(None) in typing.get_args(hint), setting.key
            continue
        value = setting.parse(setting.key, setting.default)
        if typing.get_origin(hint) is typing.Literal:
            options = typing.get_args(hint)
            assert list(options) == setting.type.split("|"), setting.key
            assert value in options, setting.key
            for option in options:
                assert setting.parse(setting.key, option) == option, setting.key
            with pytest.raises(ConfigError, match=re.escape(setting.key)):
                setting.parse(setting.key, "neither")
        else:
            assert type(value) is hint, (setting.key, value, hint)


def test_a_field_type_the_table_cannot_map_fails_naming_the_key():
    unmapped = BY_KEY["topics"]._replace(field="topics_patterns")
    with pytest.raises(ValueError, match=r"^topics: no Python type .* PYTHON_TYPES"):
        python_type(unmapped)


def test_defaults_are_mm2s_unless_a_reason_is_written():
    mm2 = {}
    for line in MM2_KEYS.read_text().splitlines():
        _, key, _, default = line.split("\t")
        mm2[key] = default
    for setting in TABLE:
        if setting.key not in mm2 or setting.prefix or setting.status != "read":
            continue
        theirs = mm2[setting.key]
        if setting.differs:
            assert setting.mm2_default == theirs, setting.key
            continue
        if theirs in ("null", "<required>"):
            assert setting.default is None, setting.key
        elif setting.parse is not None and setting.key not in ("exactly.once.source.support",):
            ours = setting.parse(setting.key, setting.default)
            assert ours == setting.parse(setting.key, theirs), (
                setting.key,
                setting.default,
                theirs,
            )


def test_the_reference_page_is_generated_from_the_table():
    committed = (ROOT / "docs" / "configuration.md").read_text()
    assert committed == render(), (
        "docs/configuration.md is stale: python -m replicator.config.reference > "
        "docs/configuration.md"
    )
    for setting in TABLE:
        assert f"`{setting.key}" in committed, setting.key


# --- every key of MM2's documented configuration: honoured or refused ------------------------


def _mm2_keys() -> list[tuple[str, str, str]]:
    rows = {}
    for line in MM2_KEYS.read_text().splitlines():
        _, key, type_, default = line.split("\t")
        rows[key] = (key, type_, default)
    return sorted(rows.values())


_SAMPLES = {"CLASS": "com.example.Custom", "LIST": "a", "BOOLEAN": "true", "PASSWORD": "secret"}


def _value(type_: str, default: str) -> str:
    if default not in ("null", "<required>"):
        return default
    return _SAMPLES.get(type_, "1" if type_ in ("INT", "LONG", "SHORT", "DOUBLE") else "x")


@pytest.mark.parametrize(("key", "type_", "default"), _mm2_keys())
def test_every_mm2_key_is_honoured_or_refused_naming_it(key, type_, default, caplog):
    """Each key of MirrorSourceConfig, MirrorCheckpointConfig, MirrorHeartbeatConfig and
    MirrorMakerConfig (Kafka 4.1's jars), at top level with MM2's default (or a sample):
    it is read by the replicator (the table's reader, or a client translated for
    librdkafka), accepted with the logged reason, dropped with a warning naming it, or
    refused with a message naming it. Never unknown, never silent."""
    if key == "clusters":
        return  # required: every load reads it
    value = _value(type_, default)
    with caplog.at_level(logging.DEBUG, logger="replicator.config"):
        try:
            config = load_config(two_clusters(**{key: value}))
        except ConfigError as exc:
            message = str(exc)
            assert "unknown setting" not in message, message
            assert key in message, message
            return
    setting = BY_KEY.get(key) or accepted_setting(key)
    logged = " ".join(r.getMessage() for r in caplog.records if r.levelno >= logging.INFO)
    if setting is not None and setting.status == "read":
        assert setting.reader, key
    elif setting is not None and setting.status == "accepted":
        assert f"{key} is accepted for MM2 compatibility and not read" in logged, key
    elif key in SECURITY_KEYS:
        # Combined with their partners (a truststore's type and password with its
        # location, ...) by client_security, as Java does: tests/unit/config/
        # test_config_clients.py covers each; alone they mean nothing, in MM2 too.
        pass
    else:
        assert is_client_key(key), f"{key}: neither in the table nor a client setting"
        flow = config.flows[0]
        clients = [flow.source.consumer, flow.source.producer, flow.target.admin]
        translated = any(name in client for client in clients for name in _names(key))
        assert translated or key in logged, f"{key}={value} disappeared without a word"


def _names(key: str) -> set[str]:
    """The librdkafka settings a Java security key may become."""
    derived = {
        "sasl.jaas.config": {"sasl.username", "sasl.password", "sasl.oauthbearer.config"},
        "ssl.truststore.location": {"ssl.ca.location"},
        "ssl.keystore.location": {"ssl.keystore.location", "ssl.certificate.location"},
    }
    return {key, *derived.get(key, set()), *renamed_settings().get(key, {}).values()}


# --- no silent override of the engine's client settings -------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "named"),
    [
        ("B.producer.max.request.size", "5000000", "max.message.bytes"),
        ("A->B.target.producer.enable.idempotence", "false", "idempotent"),
        ("producer.acks", "1", "acknowledgement"),
        ("consumer.group.id", "mine", "names its consumer groups"),
        ("A.consumer.isolation.level", "read_uncommitted", "committed"),
        ("group.id", "mm2-workers", "Connect worker group"),
        ("B.group.id", "mm2-workers", "Connect worker group"),
        ("A->B.source.consumer.partition.assignment.strategy", "range", "incrementally"),
        ("key.converter", "org.apache.kafka.connect.json.JsonConverter", "bytes"),
        ("transforms", "mask", "transforms"),
        ("errors.tolerance", "all", "retention.gap.policy"),
        ("refresh.groups.enabled", "false", "every checkpoint round"),
    ],
)
def test_settings_the_replicator_would_not_honour_are_refused_naming_the_key(key, value, named):
    message = error_of(two_clusters(**{key: value}))
    assert message.startswith(f"{key}: refused"), message
    assert named in message


def test_client_settings_the_engine_leaves_to_the_user_are_honoured():
    flow = load_config(
        two_clusters(
            **{
                "producer.linger.ms": "7",
                "B.producer.acks": "all",
                "A.producer.batch.size": "65536",  # the offset-syncs producer's: honoured
                "A.consumer.auto.offset.reset": "earliest",
                "A.consumer.topic.metadata.refresh.interval.ms": "5000",
            }
        )
    ).flows[0]
    assert flow.target.producer["linger.ms"] == flow.source.producer["linger.ms"] == "7"
    assert flow.source.producer["batch.size"] == "65536"
    assert flow.source.consumer["topic.metadata.refresh.interval.ms"] == "5000"


def test_the_target_producers_batch_size_is_the_users_capped_by_the_remote_topics():
    """producer.batch.size is honoured, below the smallest remote topic's limit (a larger
    batch would be refused whole by the broker)."""

    def config(**extra: str) -> dict[str, object]:
        limits = SizeLimits()
        limits.update({"A.small": 200_000, "A.large": 5_000_000})
        return target_producer_config(load_config(two_clusters(**extra)).flows[0], limits)

    cap = 200_000 - HEADER_HEADROOM_BYTES
    assert config()["batch.size"] == cap
    assert config(**{"producer.batch.size": "65536"})["batch.size"] == 65536
    assert config(**{"B.producer.batch.size": "1000000"})["batch.size"] == cap


def test_every_client_rule_is_a_real_librdkafka_setting():
    for client, kind in (("source", "consumer"), ("target", "producer")):
        rules = [r for r in CLIENT_RULES if r.kind == kind and r.client in ("all", client)]
        for index in range(max(len(r.accepts) for r in rules)):
            fixed = {r.name: r.accepts[index % len(r.accepts)] for r in rules if r.accepts}
            check_client(kind, fixed, {}, "a probe")


# --- clients built once at load --------------------------------------------------------------


def test_a_combination_librdkafka_refuses_fails_the_load_naming_the_keys():
    message = error_of(two_clusters(**{"A->B.target.producer.max.in.flight": "10"}))
    assert "A->B.target.producer.max.in.flight=10" in message
    assert "enable.idempotence" in message
    assert "the producer of cluster B (target of flow A->B)" in message
    message = error_of(
        two_clusters(**{"A.consumer.fetch.max.bytes": "1000", "A.message.max.bytes": "100000"})
    )
    assert "A.consumer.fetch.max.bytes=1000" in message
    assert "A.message.max.bytes=100000" in message


def test_the_issues_poll_interval_alone_is_refused_naming_the_keys():
    message = error_of(two_clusters(**{"A->B.consumer.max.poll.interval.ms": "15000"}))
    assert "A->B.consumer.max.poll.interval.ms=15000" in message
    assert "session.timeout.ms" in message


def test_secrets_never_reach_a_client_check_message():
    message = error_of(
        two_clusters(
            **{
                "A->B.target.producer.max.in.flight": "10",
                "B.sasl.jaas.config": (
                    "org.apache.kafka.common.security.plain.PlainLoginModule required "
                    'username="u" password="hunter2";'
                ),
                "B.security.protocol": "SASL_PLAINTEXT",
                "B.sasl.mechanism": "PLAIN",
            }
        )
    )
    assert "hunter2" not in message


# --- settings once accepted and unread, now honoured --------------------------------------------


def test_internal_topic_names_follow_the_separator_as_in_mm2():
    policy = load_policy("DefaultReplicationPolicy", "_", "A")
    assert policy.offset_syncs_topic("B") == "mm2-offset-syncs_B_internal"
    assert policy.checkpoints_topic("A") == "A_checkpoints_internal"
    assert policy.is_internal_topic("A_checkpoints_internal")
    legacy = load_policy("DefaultReplicationPolicy", "_", "A", internal_separator=False)
    assert legacy.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    flow = load_config(
        two_clusters(
            **{
                "replication.policy.separator": "_",
                "replication.policy.internal.topic.separator.enabled": "false",
            }
        )
    ).flows[0]
    assert flow.policy.checkpoints_topic("A") == "A.checkpoints.internal"


def test_heartbeats_replication_can_be_turned_off():
    flow = load_config(two_clusters()).flows[0]
    assert why_not_replicated(flow, "heartbeats") is None
    off = load_config(two_clusters(**{"heartbeats.replication.enabled": "false"})).flows[0]
    assert "heartbeats.replication.enabled = false" in why_not_replicated(off, "heartbeats")


def test_admin_timeout_is_read():
    flow = load_config(two_clusters(**{"admin.timeout.ms": "5000"})).flows[0]
    assert flow.admin_timeout_ms == 5000


class _Recorder:
    def __init__(self) -> None:
        self.produced: list[tuple[str, bytes]] = []

    def produce(self, topic: str, *, key: bytes, value: bytes, headers: object) -> None:
        self.produced.append((topic, key))

    def poll(self, timeout: float) -> int:
        return 0

    def flush(self, timeout: float) -> int:
        return 0


def test_emit_offset_syncs_false_writes_none_and_needs_checkpoints_off():
    message = error_of(two_clusters(**{"emit.offset-syncs.enabled": "false"}))
    assert message.startswith("emit.offset-syncs.enabled=false contradicts")
    flow = load_config(
        two_clusters(**{"emit.offset-syncs.enabled": "false", "emit.checkpoints.enabled": "false"})
    ).flows[0]
    assert flow.emit_offset_syncs_enabled is False
    for enabled, expected in ((True, 1), (False, 0)):
        producer = _Recorder()
        writer = OffsetSyncWriter(
            producer, "syncs", "A->B", 100, transactional=False, enabled=enabled
        )
        writer.track(("t", 0))
        writer.acknowledged(("t", 0), first_source=0, last_source=9, count=10, target_offset=9,
                            timestamp_ms=1)  # fmt: skip
        writer.acknowledged(("t", 0), first_source=20, last_source=29, count=10,
                            target_offset=19, timestamp_ms=2)  # fmt: skip
        assert len(producer.produced) == expected
