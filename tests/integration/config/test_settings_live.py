"""Settings that MM2 honours and the replicator once refused or tied to something else,
on real brokers: offset syncs kept on the target (`offset-syncs.topic.location =
target`), and topic configs synced on their own timer
(`sync.topic.configs.interval.seconds`, not only when topics are refreshed)."""

from __future__ import annotations

import re
import uuid

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from replicator.engine.formats import OffsetSync
from replicator.verification.plan import plan_verification

from helpers.kafka import create_topic, make_records, produce_records, read_partition, unique_topic
from helpers.replication import (
    end_offsets,
    flow_config,
    running,
    source_offsets_on_target,
    wait_until,
)

pytestmark = pytest.mark.integration


def _aliases() -> tuple[str, str]:
    """Aliases of the test's own, so its offset-syncs topic is its own too."""
    run = uuid.uuid4().hex[:8]
    return f"src{run}", f"dst{run}"


def _topics(bootstrap: str) -> set[str]:
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics)


def test_offset_syncs_live_on_the_target_when_asked(primary: str, dr: str) -> None:
    """The writer puts every sync on the target's `mm2-offset-syncs.<target>.internal`,
    none on the source, and each points at the replica of its source offset; the
    verification reads them there."""
    topic = unique_topic("syncs-on-target")
    create_topic(primary, topic, partitions=2)
    produced = produce_records(primary, topic, make_records(120))
    source, target = _aliases()
    flow = flow_config(
        (source, primary),
        (target, dr),
        topics=re.escape(topic),
        properties={"offset-syncs.topic.location": "target", "offset.lag.max": "10"},
    )
    syncs_topic = flow.policy.offset_syncs_topic(target)
    remote = flow.policy.format_remote_topic(source, topic)
    wanted = [len(produced.get(p, [])) for p in range(2)]

    def newest_syncs() -> dict[int, OffsetSync]:
        if syncs_topic not in _topics(dr):
            return {}
        newest: dict[int, OffsetSync] = {}
        for _, record in read_partition(dr, syncs_topic, 0):
            sync = OffsetSync.decode(record.key, record.value)
            if sync.topic == topic:  # heartbeats are synced too
                newest[sync.partition] = sync
        return newest

    with running(flow):
        wait_until(lambda: end_offsets(dr, remote, 2) == wanted, 60, "the copy")
        seen: list[object] = []

        def synced() -> bool:
            seen[:] = [{p: s.upstream for p, s in newest_syncs().items()}]
            return seen[0] == {p: n - 1 for p, n in enumerate(wanted)}

        try:
            wait_until(synced, 60, "the offset syncs of the last records, on the target")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: wanted {wanted}, saw {seen}") from None

    assert syncs_topic not in _topics(primary), "offset syncs written to the source"
    every = [OffsetSync.decode(r.key, r.value) for _, r in read_partition(dr, syncs_topic, 0)]
    syncs = [sync for sync in every if sync.topic == topic]  # heartbeats are synced too
    assert {sync.partition for sync in syncs} == {0, 1}
    for partition in range(2):
        on_target = source_offsets_on_target(dr, remote, partition)
        for sync in (s for s in syncs if s.partition == partition):
            assert on_target[sync.downstream] == sync.upstream, sync

    plan = plan_verification(flow, [topic])
    assert plan.offset_syncs_bootstrap == dr
    assert plan.offset_syncs_topic == syncs_topic
    assert sum(plan.offset_syncs_ends) >= len(every)


def test_topic_configs_sync_on_their_own_timer(primary: str, dr: str) -> None:
    """Topics refreshed every 600 s, configs every second: a config change on the
    source reaches the remote topic within seconds (before, config sync rode on the
    topic refresh and came 600 s later)."""
    topic = unique_topic("config-timer")
    create_topic(primary, topic, partitions=1, config={"retention.ms": "86400000"})
    produce_records(primary, topic, make_records(10))
    flow = flow_config(
        ("primary", primary),
        ("dr", dr),
        topics=re.escape(topic),
        properties={
            "refresh.topics.interval.seconds": "600",
            "sync.topic.configs.interval.seconds": "1",
        },
    )
    remote = f"primary.{topic}"
    admin = AdminClient({"bootstrap.servers": primary})
    with running(flow):
        wait_until(lambda: end_offsets(dr, remote, 1) == [10], 60, "the copy")
        change = ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[change])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(timeout=10)
        wait_until(lambda: _retention(dr, remote) == "3600000", 20, "the config change")


def _retention(bootstrap: str, topic: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return admin.describe_configs([resource])[resource].result(timeout=10)["retention.ms"].value
