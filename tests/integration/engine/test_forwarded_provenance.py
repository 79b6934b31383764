"""Loop prevention never drops an application's own records (issue 26, point 1).

An application on `primary` reads the replica of dr's `orders` (`dr.orders`, or
`orders` itself under the Identity policy) and writes its own topic, forwarding its
input's headers, as Kafka Streams does by default: every record it writes says it
came from `dr`. Those records are the application's data, not our copies: with an
active-active pair running, every one of them reaches `dr` exactly once. Our own
copies of them, read back on `dr`, are true loops and are still dropped (Identity),
or never read (Default names them `primary.<topic>` on dr, which the backward flow
excludes by name)."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client import REGISTRY

from replicator.config.model import FlowConfig
from replicator.engine.headers import OFFSET_HEADER, SOURCE_HEADER, decode_offset

from helpers.kafka import create_topic, make_records, produce_records, read_partition, unique_topic
from helpers.replication import end_offsets, flow_config, running, wait_until

pytestmark = pytest.mark.integration

IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
PARTITIONS = 3
RECORDS = 300


def _count(bootstrap: str, topic: str) -> int:
    return sum(end_offsets(bootstrap, topic, PARTITIONS) or [-1])


def _forward(primary: str, source_topic: str, output: str, count: int) -> None:
    """The application: read `count` records of `source_topic` on primary and write
    each to the same partition of `output`, transformed, with its headers as read."""
    consumer = Consumer(
        {
            "bootstrap.servers": primary,
            "group.id": f"app-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
        }
    )
    producer = Producer({"bootstrap.servers": primary, "enable.idempotence": True})
    try:
        consumer.assign([TopicPartition(source_topic, p, 0) for p in range(PARTITIONS)])
        forwarded = 0
        while forwarded < count:
            for message in consumer.consume(500, 1.0):
                assert message.error() is None, message.error()
                headers = message.headers()
                assert headers and dict(headers)[SOURCE_HEADER] == b"dr", headers
                producer.produce(
                    output, b"enriched:" + (message.value() or b""), message.key(),
                    message.partition(), headers=headers,
                )  # fmt: skip
                forwarded += 1
        assert producer.flush(30) == 0
    finally:
        consumer.close()


def _loops(flow: str, topic: str) -> float:
    """replicator_skipped_records_total{reason="loop"} of `flow` for `topic`."""
    labels = {"flow": flow, "topic": topic, "partition": "", "reason": "loop"}
    return REGISTRY.get_sample_value("replicator_skipped_records_total", labels) or 0.0


@pytest.mark.parametrize("policy", ["default", "identity"])
def test_an_application_forwarding_a_replicas_headers_loses_nothing(
    primary: str, dr: str, policy: str
) -> None:
    orders, output = unique_topic("orders"), unique_topic("enriched")
    properties = {"replication.policy.class": IDENTITY} if policy == "identity" else {}
    replica = orders if policy == "identity" else f"dr.{orders}"
    on_dr = output if policy == "identity" else f"primary.{output}"
    create_topic(dr, orders, partitions=PARTITIONS)
    create_topic(primary, output, partitions=PARTITIONS)
    if policy == "identity":
        create_topic(primary, orders, partitions=PARTITIONS)
        create_topic(dr, output, partitions=PARTITIONS)
    produce_records(dr, orders, make_records(RECORDS))
    topics = f"{orders}|{output}"
    forward = flow_config(("primary", primary), ("dr", dr), topics, properties)
    backward = flow_config(("dr", dr), ("primary", primary), topics, properties)

    with running(forward), running(backward):
        wait_until(lambda: _count(primary, replica) == RECORDS, 90, f"dr's orders in {replica}")
        _forward(primary, replica, output, RECORDS)
        wait_until(
            lambda: _count(dr, on_dr) >= RECORDS, 90, f"the application's records in {on_dr} on dr"
        )
        if policy == "identity":
            # Our copies, read back on the other side, are true loops: dropped, counted.
            wait_until(
                lambda: (
                    _loops("primary->dr", orders) == RECORDS
                    and _loops("dr->primary", output) == RECORDS
                ),
                90,
                "dr's orders read back on primary and the output's copies read back on dr "
                "dropped as loops",
            )

    copied = [r for p in range(PARTITIONS) for _, r in read_partition(dr, on_dr, p)]
    values = Counter(r.value for r in copied)
    assert len(copied) == RECORDS, f"{len(copied)} records on dr, {RECORDS} written"
    assert all(n == 1 for n in values.values()), "a record reached dr twice"
    assert all(v.startswith(b"enriched:") for v in values)
    for record in copied:
        headers = dict(record.headers)
        assert headers[SOURCE_HEADER] == b"primary"  # copied from primary, as its own
        assert decode_offset(headers[OFFSET_HEADER]) is not None
    assert _count(primary, output) == RECORDS, "nothing came back to primary"


RE_DRIVEN = 60


@pytest.mark.parametrize("path", ["compiled", "python"])
def test_under_identity_a_re_drive_into_the_same_topic_is_copied_once(
    primary: str, dr: str, path: str
) -> None:
    """Issue 42, point 2. An application on `primary` re-produces some of our copies of
    dr's `orders` into `orders` itself (a retry or dead-letter re-drive under Identity,
    headers kept): the same headers as our copies, so headers alone called it a loop
    and dropped it. It stands after our copies, out of their order (`rewrite`): the
    application's record, which reaches dr exactly once and never comes back; our
    copies read back on either side are still dropped as loops. On both data paths
    (compiled, the default where it is built, named so that it cannot fall back)."""
    orders, forward, backward = _identity_pair(primary, dr, {"replicator.data.path": path})

    with running(forward), running(backward):
        wait_until(lambda: _count(primary, orders) == RECORDS, 90, "dr's orders on primary")
        _re_drive(primary, orders, RE_DRIVEN)
        wait_until(lambda: _count(dr, orders) >= RECORDS + RE_DRIVEN, 90, "the re-drives on dr")
        wait_until(
            lambda: (
                _loops("primary->dr", orders) == RECORDS
                and _loops("dr->primary", orders) == RE_DRIVEN
            ),
            90,
            "our copies read back on primary, and the re-drives' copies read back on dr, "
            "dropped as loops",
        )

    on_dr = [r for p in range(PARTITIONS) for _, r in read_partition(dr, orders, p)]
    retries = Counter(r.value for r in on_dr if r.value.startswith(b"retry:"))
    assert len(on_dr) == RECORDS + RE_DRIVEN, f"{len(on_dr)} records on dr"
    assert sum(retries.values()) == RE_DRIVEN and all(n == 1 for n in retries.values())
    for record in on_dr:
        if record.value.startswith(b"retry:"):
            assert dict(record.headers)[SOURCE_HEADER] == b"primary"  # primary's own
    assert _count(primary, orders) == RECORDS + RE_DRIVEN, "nothing came back to primary"


def _identity_pair(
    primary: str, dr: str, properties: dict[str, str] | None = None
) -> tuple[str, FlowConfig, FlowConfig]:
    """`orders` on both clusters, dr's holding `RECORDS` records, and the two flows
    between them under the Identity policy (with `properties` added)."""
    orders = unique_topic("orders")
    for bootstrap in (primary, dr):
        create_topic(bootstrap, orders, partitions=PARTITIONS)
    produce_records(dr, orders, make_records(RECORDS))
    wanted = {"replication.policy.class": IDENTITY, **(properties or {})}
    forward = flow_config(("primary", primary), ("dr", dr), orders, wanted)
    backward = flow_config(("dr", dr), ("primary", primary), orders, wanted)
    return orders, forward, backward


def _re_drive(primary: str, topic: str, count: int) -> None:
    """The application: read the first `count` of our copies on primary and produce
    each again into the same topic and partition, headers kept, marked as a retry."""
    copies = [
        (p, record)
        for p in range(PARTITIONS)
        for _, record in read_partition(primary, topic, p)[: count // PARTITIONS]
    ]
    producer = Producer({"bootstrap.servers": primary, "enable.idempotence": True})
    for partition, record in copies:
        assert dict(record.headers)[SOURCE_HEADER] == b"dr", record.headers
        producer.produce(
            topic, b"retry:" + (record.value or b""), record.key, partition,
            headers=list(record.headers),
        )  # fmt: skip
    assert producer.flush(30) == 0


def test_under_identity_a_re_drive_read_first_after_a_restart_is_copied(
    primary: str, dr: str
) -> None:
    """The re-drives are written while the flow that reads them is down: after its
    restart they may be the first records of their provenance it reads."""
    orders, forward, backward = _identity_pair(primary, dr)

    with running(backward):
        with running(forward):
            wait_until(lambda: _count(primary, orders) == RECORDS, 90, "dr's orders on primary")
            wait_until(lambda: _loops("primary->dr", orders) >= RECORDS, 90, "copies skipped")
        _re_drive(primary, orders, RE_DRIVEN)
        with running(forward):
            wait_until(lambda: _count(dr, orders) >= RECORDS + RE_DRIVEN, 90, "the re-drives on dr")
    on_dr = [r for p in range(PARTITIONS) for _, r in read_partition(dr, orders, p)]
    assert len(on_dr) == RECORDS + RE_DRIVEN, f"{len(on_dr)} records on dr"
