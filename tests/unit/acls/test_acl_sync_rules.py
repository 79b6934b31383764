"""ACL sync's rules (MM2's MirrorSourceConnector.shouldReplicateAcl / targetAclBinding and
our two stricter ones), grant_write's bindings and the ACLs both add to the replicator's
plan, without a cluster (tests/integration/acls/ runs them on a secured stack)."""

from __future__ import annotations

import pytest

from replicator.acls.bindings import Binding
from replicator.acls.grants import write_bindings
from replicator.acls.plan import CLUSTER_RESOURCE, replicator_rules
from replicator.acls.sync import (
    DENY,
    NOT_REPLICATED,
    NOT_TOPIC,
    PREFIXED,
    WILDCARD,
    WRITE,
    planned_bindings,
)
from replicator.config import load_config
from replicator.config.model import ReplicatorConfig
from replicator.errors import ConfigError

IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"


def _config(**extra: str) -> ReplicatorConfig:
    return load_config(
        {
            "clusters": "primary, dr",
            "primary.bootstrap.servers": "127.0.0.1:1",
            "dr.bootstrap.servers": "127.0.0.1:2",
            "primary->dr.enabled": "true",
            "primary->dr.topics": "orders|payments\\..*",
            **extra,
        }
    )


def _acl(name: str, operation: str = "READ", permission: str = "ALLOW", **kw: str) -> Binding:
    fields = {
        "resource_type": "TOPIC",
        "pattern_type": "LITERAL",
        "name": name,
        "principal": "User:app",
        "host": "*",
        "operation": operation,
        "permission": permission,
        **kw,
    }
    return Binding(**fields)


def _synced(acl: Binding, **extra: str) -> tuple[list[Binding], dict[str, int]]:
    return planned_bindings(_config(**extra).flows[0], [acl])


def test_a_literal_allow_read_is_synced_on_the_remote_topic_name() -> None:
    [target], left_out = _synced(_acl("orders", host="10.0.0.1"))
    assert target == _acl("primary.orders", host="10.0.0.1")
    assert left_out == {}


def test_under_the_identity_policy_the_name_stays() -> None:
    [target], _ = _synced(_acl("payments.eu"), **{"replication.policy.class": IDENTITY})
    assert target == _acl("payments.eu")


def test_allow_all_becomes_read_and_other_operations_stay() -> None:
    assert _synced(_acl("orders", "ALL"))[0] == [_acl("primary.orders", "READ")]
    assert _synced(_acl("orders", "DESCRIBE"))[0] == [_acl("primary.orders", "DESCRIBE")]
    assert _synced(_acl("orders", "DESCRIBE_CONFIGS"))[0] == [
        _acl("primary.orders", "DESCRIBE_CONFIGS")
    ]


@pytest.mark.parametrize(
    ("acl", "rule"),
    [
        (_acl("orders", "WRITE"), WRITE),
        (_acl("orders", "READ", "DENY"), DENY),
        (_acl("orders", "ALL", "DENY"), DENY),
        (_acl("orders", "WRITE", "DENY"), DENY),
        (_acl("payments.", pattern_type="PREFIXED"), PREFIXED),
        (_acl("*"), WILDCARD),
        (_acl("other"), NOT_REPLICATED),
        (_acl("__consumer_offsets"), NOT_REPLICATED),  # internal, whatever the filter says
        (_acl("dr.orders"), NOT_REPLICATED),  # came from the target: a cycle
        (_acl("demo", resource_type="GROUP"), NOT_TOPIC),
    ],
)
def test_what_is_never_synced(acl: Binding, rule: str) -> None:
    assert _synced(acl) == ([], {rule: 1})


def test_one_target_acl_per_binding_even_when_all_and_read_both_map_to_read() -> None:
    flow = _config().flows[0]
    wanted, left_out = planned_bindings(
        flow, [_acl("orders", "ALL"), _acl("orders", "READ"), _acl("orders", "WRITE")]
    )
    assert wanted == [_acl("primary.orders", "READ")]
    assert left_out == {WRITE: 1}


def _cluster_rules(config: ReplicatorConfig) -> set[tuple[str, str]]:
    return {
        (rule.cluster, rule.operation)
        for rule in replicator_rules(config)
        if rule.resource_type == "CLUSTER" and rule.name == CLUSTER_RESOURCE
    }


def test_the_plan_adds_the_cluster_acls_acl_sync_needs_and_nothing_without_it() -> None:
    assert _cluster_rules(_config()) == set()
    assert _cluster_rules(_config(**{"sync.topic.acls.enabled": "true"})) == {
        ("primary", "DESCRIBE"),
        ("dr", "ALTER"),
    }
    grant_write = {"applications.orders.producer.principals": "User:orders-app"}
    assert _cluster_rules(_config(**grant_write)) == {("dr", "ALTER")}


def test_grant_write_gives_each_producer_write_and_describe_on_its_topics() -> None:
    config = _config(
        **{
            "applications.orders.producer.principals": "User:a, User:b",
            "applications.orders.producer.topics": "orders|orders\\.eu\\..*",
        }
    )
    granted = write_bindings(config, config.flows[0], ["orders"])
    assert {(b.principal, b.pattern_type, b.name, b.operation) for b in granted["orders"]} == {
        (principal, pattern, name, operation)
        for principal in ("User:a", "User:b")
        for pattern, name in (("LITERAL", "orders"), ("PREFIXED", "orders.eu."))
        for operation in ("WRITE", "DESCRIBE")
    }
    assert all(b.permission == "ALLOW" and b.host == "*" for b in granted["orders"])


def test_grant_write_defaults_to_the_flows_topics_and_names_what_is_missing() -> None:
    config = _config(**{"applications.orders.producer.principals": "User:a"})
    granted = write_bindings(config, config.flows[0], ["orders"])
    assert {(b.pattern_type, b.name) for b in granted["orders"]} == {
        ("LITERAL", "orders"),
        ("PREFIXED", "payments."),
    }
    with pytest.raises(ConfigError, match=r"applications\.billing\.producer\.principals is not"):
        write_bindings(config, config.flows[0], ["billing"])
    everything = _config(
        **{"applications.orders.producer.principals": "User:a", "primary->dr.topics": ".*"}
    )
    with pytest.raises(ConfigError, match=r"covers every topic.*producer\.topics"):
        write_bindings(everything, everything.flows[0], ["orders"])


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("applications.orders.producer.principal", "User:a", "unknown application setting"),
        ("applications.orders.producer.principals", "orders-app", "got orders-app"),
        ("applications.orders.producer.topics", "(", "invalid regular expression"),
    ],
)
def test_bad_application_settings_are_refused_naming_the_key(
    key: str, value: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as refused:
        _config(**{key: value})
    assert str(refused.value).startswith(key)
