"""Topic sync while the replicator runs: new topics, more partitions, config changes.

Each test runs on both data paths (`replicator.data.path`): the compiled Mover, whose
producer must learn a remote topic's new partitions before their first record (until
issue 29's fix it refused them, `_UNKNOWN_PARTITION`, and the flow stopped), and the
Python loop."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
)

from helpers.kafka import create_topic, make_records, produce_records, unique_topic
from helpers.replication import end_offsets, flow_config, running, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(params=["compiled", "python"])
def data_path(request: pytest.FixtureRequest) -> dict[str, str]:
    """The flow's `replicator.data.path` (compiled: refuses to start if not built)."""
    return {"replicator.data.path": request.param}


def _topic_configs(bootstrap: str, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(timeout=10)
    return {name: entry.value for name, entry in entries.items()}


def _set_configs(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()
    ]
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=10)


def test_new_topics_partitions_and_configs_reach_the_target(
    primary: str, dr: str, data_path: dict[str, str]
) -> None:
    prefix = unique_topic("live")
    first, second = f"{prefix}.a", f"{prefix}.b"
    create_topic(primary, first, partitions=2, config={"retention.ms": "86400000"})
    produce_records(primary, first, make_records(100))
    flow = flow_config(("primary", primary), ("dr", dr), f"{prefix}\\..*", data_path)

    with running(flow):
        wait_until(lambda: sum(end_offsets(dr, f"primary.{first}", 2) or [0]) == 100, 60, "first")
        assert _topic_configs(dr, f"primary.{first}")["retention.ms"] == "86400000"

        create_topic(primary, second, partitions=3)
        produced = produce_records(primary, second, make_records(300))
        wanted = [len(produced.get(p, [])) for p in range(3)]
        wait_until(lambda: end_offsets(dr, f"primary.{second}", 3) == wanted, 60, "new topic")

        admin = AdminClient({"bootstrap.servers": primary})
        admin.create_partitions([NewPartitions(first, 4)])[first].result(timeout=10)
        _set_configs(primary, first, {"retention.ms": "3600000", "min.insync.replicas": "1"})
        produced = produce_records(primary, first, make_records(400))
        wait_until(
            lambda: sum(end_offsets(dr, f"primary.{first}", 4) or [0]) == 500,
            60,
            "records in the new partitions",
        )
        wait_until(
            lambda: _topic_configs(dr, f"primary.{first}")["retention.ms"] == "3600000",
            60,
            "the config change",
        )

    remote = _topic_configs(dr, f"primary.{first}")
    # min.insync.replicas is in MM2's default exclusions: it stays the target's own.
    admin = AdminClient({"bootstrap.servers": dr})
    resource = ConfigResource(ConfigResource.Type.TOPIC, f"primary.{first}")
    entry = admin.describe_configs([resource])[resource].result(timeout=10)["min.insync.replicas"]
    assert entry.source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value, (
        f"excluded config reached the target: {remote['min.insync.replicas']}"
    )
    assert int(remote["max.message.bytes"]) > int(
        _topic_configs(primary, first)["max.message.bytes"]
    )


def test_partitions_assigned_before_the_topic_refresh_saw_them(
    primary: str, dr: str, data_path: dict[str, str]
) -> None:
    """Partitions added to a source topic reach the consumer's assignment (its metadata
    refresh, 10 s) long before the flow's topic refresh (600 s here): the remote topic
    grows to the highest assigned partition, and their records land in the partitions
    of the same number (before the fix it kept its old count: the known one)."""
    topic = unique_topic("grown")
    create_topic(primary, topic, partitions=2)
    produce_records(primary, topic, make_records(100))
    flow = flow_config(
        ("primary", primary),
        ("dr", dr),
        topics=topic,
        properties={"refresh.topics.interval.seconds": "600", **data_path},
    )
    remote = f"primary.{topic}"

    with running(flow):
        wait_until(lambda: sum(end_offsets(dr, remote, 2) or [0]) == 100, 60, "the first 100")
        admin = AdminClient({"bootstrap.servers": primary})
        admin.create_partitions([NewPartitions(topic, 5)])[topic].result(timeout=10)
        produce_records(primary, topic, make_records(500))
        wanted = end_offsets(primary, topic, 5)
        assert wanted is not None
        assert all(wanted[2:]), wanted  # records in every new partition
        wait_until(lambda: end_offsets(dr, remote, 5) == wanted, 90, "the new partitions' records")
