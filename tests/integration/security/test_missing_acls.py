"""Every role that lacks one ACL gets an error naming the missing operation, the
resource and the principal (issue 14 item 2), beyond the replication engine
(test_secured_stack.py, test_access_denied.py): the checkpoint loop, the
verifier (our pre-flight check before Spark is submitted), and an application's
producer and consumer (the demo apps)."""

from __future__ import annotations

import logging
import threading
import uuid
from pathlib import Path

import pytest

from replicator.acls.plan import AclRule, application_rules, replicator_rules
from replicator.config import load_config
from replicator.config.model import ClusterConfig
from replicator.offsets.checkpoint_loop import CheckpointLoop
from replicator.statestore import StateStore

from helpers.kafka import create_topic, make_records, produce_records
from helpers.procedures import commit_offsets, demo_apps
from helpers.replication import running, wait_until
from helpers.secured import SecuredPair


def _all_but(rules: list[AclRule], cluster: str, name: str, operation: str) -> list[AclRule]:
    kept = [r for r in rules if (r.cluster, r.name, r.operation) != (cluster, name, operation)]
    assert len(kept) == len(rules) - 1, f"no rule {operation} on {name} on {cluster}"
    return kept


def _as_admin(pair: SecuredPair, alias: str) -> ClusterConfig:
    """The stack's super user on `alias`, as a cluster of a configuration."""
    client = pair.admin(alias)
    bootstrap = str(client["bootstrap.servers"])
    return ClusterConfig(alias, bootstrap, consumer=client, producer=client, admin=client)


def test_the_checkpoint_loop_names_the_principal_and_the_missing_acl(
    secured_pair: SecuredPair, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every ACL but WRITE on the checkpoints topic: the copies land, the round's
    checkpoints are refused, and the loop's line says who lacks what (it used to
    count the refused checkpoints as written)."""
    pair = secured_pair
    user = f"nockpt-{uuid.uuid4().hex[:6]}"
    config = pair.config_as(
        user,
        tmp_path / "mm2.properties",
        "dr->primary.enabled = false",
        "emit.checkpoints.interval.seconds = 1",
    )
    flow = load_config(config).flow("primary->dr")
    checkpoints = "primary.checkpoints.internal"
    pair.grant(_all_but(replicator_rules(load_config(config)), "dr", checkpoints, "WRITE"))
    topic = f"demo.ckpt-{uuid.uuid4().hex[:8]}"
    create_topic(pair.primary, topic, 1, client=pair.admin("primary"))
    produce_records(pair.primary, topic, make_records(100), client=pair.admin("primary"))
    group = f"app-{uuid.uuid4().hex[:8]}"
    commit_offsets(_as_admin(pair, "primary"), group, {(topic, 0): 50})

    stop = threading.Event()
    expected = f"User:{user} lacks ALLOW WRITE on TOPIC {checkpoints} on cluster 'dr'"
    with running(flow), caplog.at_level(logging.ERROR, logger="replicator.offsets"):
        wait_until(lambda: pair.end_offsets("dr", f"primary.{topic}", 1) == [100], 90, "copied")
        loop = CheckpointLoop([flow], stop, lambda: {flow.name: True})
        loop.start()
        try:
            wait_until(lambda: expected in caplog.text, 60, f"a line saying {expected!r}")
        finally:
            stop.set()
            loop.join(60)
    [line, *_] = [r.getMessage() for r in caplog.records if expected in r.getMessage()]
    assert line.startswith("flow primary->dr: checkpoints not written this round"), line
    assert "replicator acls apply" in line


@pytest.mark.parametrize(
    ("role", "missing", "expected"),
    [
        ("producer", ("TOPIC", "WRITE"), "lacks ALLOW WRITE on TOPIC {topic} on cluster 'primary'"),
        ("consumer", ("GROUP", "READ"), "lacks ALLOW READ on GROUP {app} on cluster 'primary'"),
    ],
)
def test_a_demo_app_without_one_acl_stops_with_one_line_naming_it(
    secured_pair: SecuredPair,
    tmp_path: Path,
    state_url: str,
    store: StateStore,
    role: str,
    missing: tuple[str, str],
    expected: str,
) -> None:
    """The producer and consumer roles (`replicator acls plan --role producer|consumer`)
    with every ACL of their plan but one: the app stops (exit 1) with one line naming
    its principal, the operation, the resource and the fix, instead of retrying."""
    pair = secured_pair
    user = f"{role}-{uuid.uuid4().hex[:6]}"
    config = pair.config_as(user, tmp_path / "app.properties")
    topic = f"demo.app-{uuid.uuid4().hex[:8]}"
    create_topic(pair.primary, topic, 1, client=pair.admin("primary"))
    app = f"app-{uuid.uuid4().hex[:8]}"
    if role == "consumer":  # something to read
        produce_records(pair.primary, topic, make_records(10), client=pair.admin("primary"))
    rules = application_rules(["primary"], f"User:{user}", role, topic, app)
    kept = [r for r in rules if (r.resource_type, r.operation) != missing]
    assert len(kept) == len(rules) - 1
    pair.grant(kept)
    store.applications.register(app, "primary")
    common = ["--config", str(config), "--app", app, "--topic", topic, "--state-url", state_url]
    with demo_apps(tmp_path) as start:
        process = start(role, *common, "--ledger", str(tmp_path / "ledger.jsonl"))
        assert process.wait(120) == 1
    errors = [
        line for line in (tmp_path / f"{role}.log").read_text().splitlines() if " ERROR " in line
    ]
    assert len(errors) == 1, errors
    assert f"User:{user} {expected.format(topic=topic, app=app)}" in errors[0], errors[0]
    assert "replicator acls apply" in errors[0] and f"--role {role}" in errors[0]
