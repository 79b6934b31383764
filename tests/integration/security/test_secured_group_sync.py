"""Group offset sync (`sync.group.offsets.enabled`) on SASL_SSL with the authorizer on
(issue 14 item 4): `replicator run` as `User:replicator`, with exactly the ACLs
`replicator acls apply` grants for this configuration, writes an idle group's
translated offsets to the same group on the target, exactly."""

from __future__ import annotations

import logging
import re
import uuid
from pathlib import Path

import pytest

from replicator.acls.plan import replicator_rules
from replicator.config import load_config
from replicator.config.model import ClusterConfig
from replicator.offsets.groups import GroupAdmin
from replicator.statestore import StateStore

from helpers.kafka import create_topic
from helpers.procedures import commit_offsets, runner
from helpers.replication import preload, wait_until
from helpers.secured import SecuredPair


def _as_admin(pair: SecuredPair, alias: str) -> ClusterConfig:
    client = pair.admin(alias)
    bootstrap = str(client["bootstrap.servers"])
    return ClusterConfig(alias, bootstrap, consumer=client, producer=client, admin=client)


def test_group_offsets_are_synced_to_the_target_on_the_secured_stack(
    secured_pair: SecuredPair,
    tmp_path: Path,
    store: StateStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The runner's checkpoint loop syncs the group; its offsets on dr are read once
    it stopped. (Reading them from this thread while the loop's thread synced ended
    in a SIGSEGV inside librdkafka: two threads' admin clients on the secured
    cluster at once; not investigated yet.)"""
    pair = secured_pair
    config_path = tmp_path / "mm2.properties"
    config_path.write_text(
        pair.clients_file.read_text()
        + "\n".join(
            [
                "dr->primary.enabled = false",
                "sync.group.offsets.enabled = true",
                "sync.group.offsets.interval.seconds = 1",
                "emit.checkpoints.interval.seconds = 1",
            ]
        )
        + "\n"
    )
    config = load_config(config_path)
    pair.grant(replicator_rules(config))  # what `replicator acls apply` grants for it
    topic = f"demo.gsync-{uuid.uuid4().hex[:8]}"
    create_topic(pair.primary, topic, 2, client=pair.admin("primary"))
    wanted = preload(pair.primary, topic, 400, 2, client=pair.admin("primary"))
    group = f"app-{uuid.uuid4().hex[:8]}"
    positions = {(topic, 0): wanted[0] // 2, (topic, 1): wanted[1]}
    commit_offsets(_as_admin(pair, "primary"), group, positions)
    remote = f"primary.{topic}"
    with (
        caplog.at_level(logging.INFO, logger="replicator.offsets"),
        runner([config.flow("primary->dr")], store),
    ):
        # Each round's line says how many partitions of each group it synced.
        synced = re.compile(rf"groups synced: .*'{group}': (\d+)")
        wait_until(
            lambda: sum(int(n) for n in synced.findall(caplog.text)) >= 2, 120, f"{group} synced"
        )
    on_dr = GroupAdmin(_as_admin(pair, "dr")).committed(group)
    assert {(c.topic, c.partition): c.offset for c in on_dr} == {
        (remote, p): o for (_, p), o in positions.items()
    }
