"""`replicator acls plan`: which ACLs each role needs, derived from the configuration
(no cluster needed; the secured-stack tests prove them sufficient on real brokers)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from replicator.acls.plan import (
    AclRule,
    application_rules,
    principal_of,
    replicator_rules,
    topic_patterns,
    verifier_rules,
)
from replicator.cli import main
from replicator.config import load_config
from replicator.config.model import NameFilter, ReplicatorConfig
from replicator.errors import ConfigError
from replicator_lab import certificates

ROOT = Path(__file__).resolve().parents[3]


def _config(**extra: str) -> ReplicatorConfig:
    return load_config(
        {
            "clusters": "primary, dr",
            "primary.bootstrap.servers": "127.0.0.1:1",
            "dr.bootstrap.servers": "127.0.0.1:2",
            "primary->dr.enabled": "true",
            "primary->dr.topics": "orders|payments\\..*",
            "primary.sasl.mechanism": "SCRAM-SHA-512",
            "primary.security.protocol": "SASL_SSL",
            "primary.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
            'required username="mirror" password="secret";',
            **extra,
        }
    )


def _has(rules: list[AclRule], cluster: str, kind: str, pattern: str, name: str, op: str) -> bool:
    return any(
        (r.cluster, r.resource_type, r.pattern_type, r.name, r.operation)
        == (cluster, kind, pattern, name, op)
        for r in rules
    )


@pytest.mark.parametrize(
    ("regex", "expected"),
    [
        (".*", [("LITERAL", "*")]),
        ("orders", [("LITERAL", "orders")]),
        ("demo\\..*", [("PREFIXED", "demo.")]),
        ("a|b\\.c.*", [("LITERAL", "a"), ("PREFIXED", "b.c")]),
    ],
)
def test_topic_filters_become_literal_or_prefixed_acls(
    regex: str, expected: list[tuple[str, str]]
) -> None:
    patterns = topic_patterns(NameFilter((re.compile(regex),)), "topics")
    assert [(p.pattern_type, p.name) for p in patterns] == expected


def test_a_regex_acls_cannot_express_is_an_error_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"primary->dr.topics: the pattern 'ord\[0-9\]\+'"):
        replicator_rules(_config(**{"primary->dr.topics": "ord[0-9]+"}))


def test_the_replicator_gets_least_privilege_on_each_side() -> None:
    config = _config()
    principals = {alias: principal_of(c) for alias, c in config.clusters.items()}
    assert principals == {"primary": "User:mirror", "dr": "User:ANONYMOUS"}
    rules = replicator_rules(config, principals)
    assert _has(rules, "primary", "TOPIC", "LITERAL", "orders", "READ")
    assert _has(rules, "primary", "TOPIC", "PREFIXED", "payments.", "READ")
    assert not _has(rules, "primary", "TOPIC", "LITERAL", "orders", "WRITE")
    assert _has(rules, "dr", "TOPIC", "LITERAL", "primary.orders", "WRITE")
    assert _has(rules, "dr", "TOPIC", "PREFIXED", "primary.payments.", "CREATE")
    assert _has(rules, "primary", "TOPIC", "LITERAL", "mm2-offset-syncs.dr.internal", "WRITE")
    assert _has(rules, "dr", "TOPIC", "LITERAL", "primary.checkpoints.internal", "WRITE")
    assert _has(rules, "primary", "GROUP", "PREFIXED", "replicator-", "READ")
    assert not any(r.resource_type == "TRANSACTIONAL_ID" for r in rules)
    assert not any(r.resource_type == "CLUSTER" for r in rules)
    assert {r.principal for r in rules if r.cluster == "primary"} == {"User:mirror"}

    exactly_once = replicator_rules(_config(**{"exactly.once": "true"}), principals)
    assert _has(
        exactly_once, "dr", "TRANSACTIONAL_ID", "PREFIXED", "replicator-primary-dr-", "WRITE"
    )


def test_verifier_and_application_roles_only_read_or_write_their_topics() -> None:
    rules = verifier_rules(_config(), "User:spark")
    assert {r.operation for r in rules} == {"READ", "DESCRIBE", "DESCRIBE_CONFIGS"}
    # It reads the source topics' retention.ms, nothing else's configs.
    assert {(r.cluster, r.name) for r in rules if r.operation == "DESCRIBE_CONFIGS"} == {
        ("primary", "orders"),
        ("primary", "payments."),
    }
    assert _has(rules, "dr", "TOPIC", "LITERAL", "primary.orders", "READ")
    producer = application_rules(["primary"], "User:app", "producer", "orders")
    assert {(r.cluster, r.operation) for r in producer} == {
        ("primary", "WRITE"),
        ("primary", "DESCRIBE"),
    }
    consumer = application_rules(["primary", "dr"], "User:app", "consumer", "orders", "g")
    assert _has(consumer, "dr", "GROUP", "LITERAL", "g", "READ")


def test_an_mtls_principal_is_the_certificates_cn(tmp_path: Path) -> None:
    ca = certificates.new_ca()
    keystore = tmp_path / "client.pem"
    keystore.write_bytes(certificates.issue(ca, "mirror-tls", server=False).key_and_chain_pem(ca))
    config = _config(
        **{
            "dr.security.protocol": "SSL",
            "dr.ssl.keystore.type": "PEM",
            "dr.ssl.keystore.location": str(keystore),
        }
    )
    assert principal_of(config.clusters["dr"]) == "User:mirror-tls"


def test_plan_command_prints_one_line_per_resource(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "1000")  # wide enough that no cell wraps
    config = ROOT / "include" / "config" / "local.properties"
    assert main(["acls", "plan", "--config", str(config)]) == 0
    lines = capsys.readouterr().out.splitlines()
    demo = [line for line in lines if line.startswith("primary") and " demo. (prefixed)" in line]
    assert len(demo) == 1 and "DESCRIBE, DESCRIBE_CONFIGS, READ" in demo[0]
    assert main(["acls", "plan", "--config", str(config), "--role", "producer"]) == 1
    assert "--role producer needs --principal" in capsys.readouterr().err
