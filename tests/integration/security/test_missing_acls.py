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

from replicator.acls.plan import AclRule, replicator_rules
from replicator.config import load_config
from replicator.config.model import ClusterConfig
from replicator.offsets.checkpoint_loop import CheckpointLoop

from helpers.kafka import create_topic, make_records, produce_records
from helpers.procedures import commit_offsets
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
