"""Failure policies on the real clusters: nothing is lost, skipped or stopped silently.

An oversized record, a retention gap and a recreated source topic each stop the
partition (policy `fail`, the default) or skip past the problem (policy `skip`),
and either way the status topic, the metrics and the log say so, naming the
topic, partition and offset. Other partitions keep replicating meanwhile.
"""

from __future__ import annotations

import os

import pytest
from confluent_kafka import KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from prometheus_client import REGISTRY

from replicator.config.model import FlowConfig
from replicator.engine.headers import OFFSET_HEADER, SOURCE_HEADER, decode_offset
from replicator.engine.status import PartitionStatus, read_status

from helpers.kafka import create_topic, read_partition, unique_topic
from helpers.replication import end_offsets, flow_config, recreate_topic, running, wait_until

pytestmark = pytest.mark.integration

SOURCE_LIMIT = 2_097_152
BIG = 1_500_000


def _flow(primary: str, dr: str, topics: str, **properties: str) -> FlowConfig:
    return flow_config(("primary", primary), ("dr", dr), topics=topics, properties=properties)


def _produce(bootstrap: str, topic: str, partition: int, values: list[bytes]) -> list[int]:
    """Produce `values` to one partition (records up to 4 MB, timestamps now);
    return their offsets."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.max.bytes": 4_000_000,
        }
    )
    offsets: list[int] = []
    failures: list[str] = []

    def on_delivery(error: KafkaError | None, message: object) -> None:
        if error is not None:
            failures.append(error.str())
        else:
            offsets.append(message.offset())

    for value in values:
        producer.produce(topic, value, partition=partition, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(60) == 0, f"records to {topic}[{partition}] undelivered after 60 s"
    assert not failures, f"delivery to {topic}[{partition}] failed: {failures[:3]}"
    return sorted(offsets)


def _small(label: str, count: int) -> list[bytes]:
    return [f"{label}-{i}".encode() for i in range(count)]


def _copied(bootstrap: str, remote: str, partition: int) -> list[tuple[int, bytes]]:
    """(source offset, value) of every record replicated into `remote[partition]`."""
    copied = []
    for _, record in read_partition(bootstrap, remote, partition):
        headers = dict(record.headers)
        assert headers[SOURCE_HEADER] == b"primary"
        copied.append((decode_offset(headers[OFFSET_HEADER]), record.value))
    return copied


def _partition_status(flow: FlowConfig, topic: str, partition: int) -> PartitionStatus | None:
    for record in read_status(flow.target, flow.name):
        if isinstance(record, PartitionStatus) and (record.topic, record.partition) == (
            topic,
            partition,
        ):
            return record
    return None


def _wait_for_state(
    flow: FlowConfig, topic: str, partition: int, state: str, timeout: float = 30
) -> PartitionStatus:
    seen: list[PartitionStatus | None] = [None]

    def reached() -> bool:
        seen[0] = _partition_status(flow, topic, partition)
        return seen[0] is not None and seen[0].state == state

    wait_until(reached, timeout, f"status {state!r} of {topic}[{partition}], last {seen[0]}")
    assert seen[0] is not None
    return seen[0]


def _metric(name: str, flow: FlowConfig, topic: str, partition: int, **labels: str) -> float:
    """The series of `topic`, or of its `partition` when the flow asks for partition labels."""
    label = str(partition) if flow.metrics_partition_labels else ""
    value = REGISTRY.get_sample_value(
        name, {"flow": flow.name, "topic": topic, "partition": label, **labels}
    )
    return value or 0.0


def _topic_config(bootstrap: str, topic: str, name: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return admin.describe_configs([resource])[resource].result(timeout=10)[name].value


def _set_topic_config(bootstrap: str, topic: str, name: str, value: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entry = ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=10)


def _delete_records_before(bootstrap: str, topic: str, partition: int, offset: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(topic, partition, offset)])
    for future in futures.values():
        assert future.result(timeout=30).low_watermark == offset


# -- oversized records -------------------------------------------------------------------


def test_oversized_record_replicates_intact_when_configs_sync(primary: str, dr: str) -> None:
    """A topic with a 2 MB limit appears while the replicator runs: topic sync
    raises the remote's limit and the target producer follows, so a 1.5 MB
    record is copied byte for byte between small ones."""
    prefix = unique_topic("big-sync")
    small_topic, big_topic = f"{prefix}.small", f"{prefix}.big"
    create_topic(primary, small_topic)
    _produce(primary, small_topic, 0, _small("s", 5))
    flow = _flow(primary, dr, f"{prefix}\\..*")
    big = os.urandom(BIG)  # incompressible: the size on the wire is the size here
    values = [*_small("before", 3), big, *_small("after", 3)]

    with running(flow):
        wait_until(lambda: end_offsets(dr, f"primary.{small_topic}", 1) == [5], 60, "small")
        create_topic(primary, big_topic, config={"max.message.bytes": str(SOURCE_LIMIT)})
        _produce(primary, big_topic, 0, values)
        wait_until(lambda: end_offsets(dr, f"primary.{big_topic}", 1) == [7], 60, "big topic")

    assert _copied(dr, f"primary.{big_topic}", 0) == list(enumerate(values))
    assert int(_topic_config(dr, f"primary.{big_topic}", "max.message.bytes")) > SOURCE_LIMIT
    assert _metric("replicator_stopped_partitions", flow, big_topic, 0) == 0


def test_raised_source_limit_synced_before_applying_the_policy(primary: str, dr: str) -> None:
    """The source topic's limit is raised while the replicator runs and a big
    record follows at once, long before the next periodic config sync: the
    record triggers a sync of its topic and replicates instead of stopping."""
    topic = unique_topic("big-raised")
    remote = f"primary.{topic}"
    create_topic(primary, topic)
    _produce(primary, topic, 0, _small("before", 3))
    flow = _flow(primary, dr, topic, **{"sync.topic.configs.interval.seconds": "600"})
    values = [*_small("before", 3), os.urandom(BIG), *_small("after", 3)]

    with running(flow):
        wait_until(lambda: end_offsets(dr, remote, 1) == [3], 60, "small records")
        _set_topic_config(primary, topic, "max.message.bytes", str(SOURCE_LIMIT))
        _produce(primary, topic, 0, values[3:])
        wait_until(lambda: end_offsets(dr, remote, 1) == [7], 60, "the big record and after")
        assert _metric("replicator_stopped_partitions", flow, topic, 0) == 0

    assert _copied(dr, remote, 0) == list(enumerate(values))


def test_oversized_record_stops_its_partition_only(primary: str, dr: str) -> None:
    """Without config sync the remote keeps the broker's 1 MB limit: partition 0
    stops at the 1.5 MB record, with status, metric and the fix; partition 1
    keeps replicating."""
    topic = unique_topic("big-stop")
    remote = f"primary.{topic}"
    create_topic(primary, topic, partitions=2, config={"max.message.bytes": str(SOURCE_LIMIT)})
    values = [*_small("before", 3), os.urandom(BIG), *_small("after", 3)]
    _produce(primary, topic, 0, values)
    _produce(primary, topic, 1, _small("other", 5))
    # A series per partition (metrics.partition.labels): partition 0's gauge says stopped.
    settings = {"sync.topic.configs.enabled": "false", "metrics.partition.labels": "true"}
    flow = _flow(primary, dr, topic, **settings)

    with running(flow):
        status = _wait_for_state(flow, topic, 0, "stopped")
        wait_until(lambda: end_offsets(dr, remote, 2) == [3, 5], 60, "records before the big one")
        _produce(primary, topic, 1, _small("more", 5))
        wait_until(lambda: end_offsets(dr, remote, 2) == [3, 10], 60, "partition 1 flowing")
        assert _metric("replicator_stopped_partitions", flow, topic, 0) == 1
        assert _metric("replicator_stopped_partitions", flow, topic, 1) == 0

    assert _copied(dr, remote, 0) == list(enumerate(values[:3]))  # nothing after offset 3
    assert _topic_config(dr, remote, "max.message.bytes") == "1048588"
    error = str(status.error)
    assert status.next_offset == 3
    for part in (f"{topic}[0]", "offset 3", "max.message.bytes", "sync.topic.configs.enabled"):
        assert part in error, f"{part!r} not in status error: {error}"
    assert "oversized.record.policy=skip" in error


def test_oversized_record_skipped_and_counted_with_skip_policy(primary: str, dr: str) -> None:
    topic = unique_topic("big-skip")
    remote = f"primary.{topic}"
    create_topic(primary, topic, config={"max.message.bytes": str(SOURCE_LIMIT)})
    values = [*_small("before", 3), os.urandom(BIG), *_small("after", 3)]
    _produce(primary, topic, 0, values)
    flow = _flow(
        primary,
        dr,
        topic,
        **{"sync.topic.configs.enabled": "false", "oversized.record.policy": "skip"},
    )

    with running(flow):
        wait_until(lambda: end_offsets(dr, remote, 1) == [6], 60, "all but the big record")

    assert _copied(dr, remote, 0) == [(o, v) for o, v in enumerate(values) if o != 3]
    skipped = "replicator_skipped_records_total"
    assert _metric(skipped, flow, topic, 0, reason="record_too_large") == 1
    assert _metric("replicator_stopped_partitions", flow, topic, 0) == 0
    status = _partition_status(flow, topic, 0)
    assert status is not None
    assert status.skipped == 1
    assert status.next_offset == 7


# -- retention gaps ----------------------------------------------------------------------


def test_retention_gap_while_stopped_fails_then_skips(primary: str, dr: str) -> None:
    """Records deleted at the source before they were replicated: with the default
    policy the partition stops and says exactly how many offsets were lost; an
    operator who accepts the loss sets `skip` and the survivors replicate."""
    topic = unique_topic("gap")
    remote = f"primary.{topic}"
    create_topic(primary, topic, partitions=2)
    for partition in (0, 1):
        _produce(primary, topic, partition, _small(f"p{partition}", 20))
    flow = _flow(primary, dr, topic)
    with running(flow):
        wait_until(lambda: end_offsets(dr, remote, 2) == [20, 20], 60, "first records")

    later = _small("later", 30)  # offsets 20..49 of partition 0
    _produce(primary, topic, 0, later)
    _produce(primary, topic, 1, _small("p1-later", 10))
    _delete_records_before(primary, topic, 0, 35)  # 20..34: 15 never replicated
    lost_metric = "replicator_lost_records_total"
    lost_before = _metric(lost_metric, flow, topic, 0, reason="retention")

    with running(flow):
        status = _wait_for_state(flow, topic, 0, "stopped")
        wait_until(lambda: end_offsets(dr, remote, 2) == [20, 30], 60, "partition 1 flowing")
        assert _metric("replicator_stopped_partitions", flow, topic, 0) == 1
    assert status.lost == 15
    assert status.next_offset == 20
    error = str(status.error)
    for part in (f"{topic}[0]", "20..34", "15 records", "retention.gap.policy=skip"):
        assert part in error, f"{part!r} not in status error: {error}"
    assert _metric(lost_metric, flow, topic, 0, reason="retention") - lost_before == 15
    assert end_offsets(dr, remote, 2) == [20, 30], "nothing after the gap was replicated"

    lost_before = _metric(lost_metric, flow, topic, 0, reason="retention")
    skip = _flow(primary, dr, topic, **{"retention.gap.policy": "skip"})
    with running(skip):
        wait_until(lambda: end_offsets(dr, remote, 2) == [35, 30], 60, "the survivors")
        status = _wait_for_state(skip, topic, 0, "replicating")
        assert status.lost == 15
        # A per-second gauge: the survivors can be copied before the task's next second.
        wait_until(
            lambda: _metric("replicator_stopped_partitions", flow, topic, 0) == 0,
            10,
            "the stopped gauge back to 0",
        )

    survivors = [(20 + i, v) for i, v in enumerate(later) if 20 + i >= 35]
    assert _copied(dr, remote, 0) == [*enumerate(_small("p0", 20)), *survivors]
    assert _metric(lost_metric, flow, topic, 0, reason="retention") - lost_before == 15


@pytest.mark.parametrize("policy", ["fail", "skip"])
def test_retention_gap_while_running(primary: str, dr: str, policy: str) -> None:
    """The gap opens while the task runs but lags (its fetch is paused here to lag
    deterministically: the group consumer's, or on the compiled path the Mover's,
    through `MoverFetch`): the fetch hits offset-out-of-range, and the same policy
    applies as at start."""
    topic = unique_topic(f"gap-live-{policy}")
    remote = f"primary.{topic}"
    create_topic(primary, topic)
    _produce(primary, topic, 0, _small("first", 10))
    flow = _flow(primary, dr, topic, **{"retention.gap.policy": policy})
    lost_metric = "replicator_lost_records_total"

    with running(flow) as task:
        wait_until(lambda: end_offsets(dr, remote, 1) == [10], 60, "first records")
        partition = [TopicPartition(topic, 0)]
        task._parts.fetch.pause(partition)
        later = _small("later", 20)  # offsets 10..29
        _produce(primary, topic, 0, later)
        _delete_records_before(primary, topic, 0, 18)  # 10..17 lost
        task._parts.partitions.restart_fetch(task._parts.partitions.get((topic, 0)))
        if policy == "fail":
            status = _wait_for_state(flow, topic, 0, "stopped")
            assert "10..17" in str(status.error)
            assert end_offsets(dr, remote, 1) == [10]
        else:
            wait_until(lambda: end_offsets(dr, remote, 1) == [22], 60, "the survivors")
            status = _wait_for_state(flow, topic, 0, "replicating")
        assert status.lost == 8

    assert _metric(lost_metric, flow, topic, 0, reason="retention") == 8
    expected = list(enumerate(_small("first", 10)))
    if policy == "skip":
        expected += [(10 + i, v) for i, v in enumerate(later) if 10 + i >= 18]
    assert _copied(dr, remote, 0) == expected


# -- recreated topics --------------------------------------------------------------------


def test_recreated_topic_fails_then_skips(primary: str, dr: str) -> None:
    """The source topic is deleted and recreated with fewer records than were
    replicated: the resume offset is beyond its end. `fail` stops the partition;
    `skip` replicates the new topic from its beginning."""
    topic = unique_topic("recreated")
    remote = f"primary.{topic}"
    create_topic(primary, topic)
    first = _small("old", 30)
    _produce(primary, topic, 0, first)
    flow = _flow(primary, dr, topic)
    with running(flow):
        wait_until(lambda: end_offsets(dr, remote, 1) == [30], 60, "first records")

    recreate_topic(primary, topic)
    second = _small("new", 10)
    _produce(primary, topic, 0, second)

    with running(flow):
        status = _wait_for_state(flow, topic, 0, "stopped")
        assert _metric("replicator_stopped_partitions", flow, topic, 0) == 1
    error = str(status.error)
    for part in (f"{topic}[0]", "resume offset 30", "log end 10", "topic.reset.policy=skip"):
        assert part in error, f"{part!r} not in status error: {error}"
    assert end_offsets(dr, remote, 1) == [30]

    skip = _flow(primary, dr, topic, **{"topic.reset.policy": "skip"})
    with running(skip):
        wait_until(lambda: end_offsets(dr, remote, 1) == [40], 60, "the new topic's records")
        # A per-second gauge: the records can be copied before the task's next second.
        wait_until(
            lambda: _metric("replicator_stopped_partitions", flow, topic, 0) == 0,
            10,
            "the stopped gauge back to 0",
        )

    assert _copied(dr, remote, 0) == [*enumerate(first), *enumerate(second)]
