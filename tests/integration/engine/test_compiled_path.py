"""A flow on the compiled data path (issue 29): `replicator.data.path = compiled`, so
the task refuses to start rather than fall back, and the log line and the metric say
the path. Its source, on two partitions, mixes plain records, records with headers
of their own (duplicate names, null and empty values), null and empty keys and
values, and records that carry our `__dr_*` headers from an earlier hop (forwarded
provenance): primary's copy of east's topic (copied on with the origin east kept)
and an application's record that forwarded another topic's provenance (copied as
primary's own). The Mover hands those back; Python's rewrite decides their headers.
The target is compared with the source record by record: keys, values, headers in
order (own, then `__dr_src`, `__dr_off`, `__dr_topic`, `__dr_origin` for forwarded
copies), timestamps, partitions and order. Each partition's status tells its lag
(measured against the Mover's fetches: the group consumer never fetches)."""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka import Producer
from prometheus_client import REGISTRY

from replicator.config.model import FlowConfig
from replicator.engine.headers import (
    OFFSET_HEADER,
    ORIGIN_HEADER,
    SOURCE_HEADER,
    TOPIC_HEADER,
    encode_offset,
)
from replicator.engine.status import PartitionStatus, read_status

from helpers.kafka import create_topic, read_partition, unique_topic
from helpers.replication import end_offsets, flow_config, running, wait_until

pytestmark = pytest.mark.integration

PARTITIONS = 2
PER_PARTITION = 400


def _records(upstream: str) -> list[tuple[bytes | None, bytes | None, list, int]]:
    """One partition's records: (key, value, headers, timestamp)."""
    out = []
    now_ms = int(time.time() * 1000)
    for i in range(PER_PARTITION):
        key: bytes | None = f"k{i}".encode()
        value: bytes | None = f"v{i}".encode() * (1 + i % 7)
        headers: list = []
        kind = i % 10
        if kind == 1:
            headers = [("app", b"1"), ("app", None), ("empty", b""), ("app", b"2")]
        elif kind == 2:
            key, value = None, None
        elif kind == 3:
            key, value = b"", b""
        elif kind == 4:  # primary's copy of east's record: forwarded on, origin kept
            headers = [
                ("trace", b"t"),
                (SOURCE_HEADER, b"east"),
                (OFFSET_HEADER, encode_offset(1000 + i)),
                (TOPIC_HEADER, upstream.encode()),
            ]
        elif kind == 5:  # an application forwarded another topic's provenance
            headers = [(SOURCE_HEADER, b"east"), (TOPIC_HEADER, b"elsewhere")]
        # Recent: the brokers' retention deletes segments of 2023 records at once.
        out.append((key, value, headers, now_ms - PER_PARTITION + i))
    return out


def _expected(topic: str, offset: int, headers: list) -> tuple[tuple[str, bytes | None], ...]:
    """The replica's headers the Python loop gives (RecordRewrite.headers)."""
    own = [(n, v) for n, v in headers if n not in (SOURCE_HEADER, OFFSET_HEADER, TOPIC_HEADER)]
    ours = [
        (SOURCE_HEADER, b"primary"),
        (OFFSET_HEADER, encode_offset(offset)),
        (TOPIC_HEADER, topic.encode()),
    ]
    forwarded = dict(headers).get(TOPIC_HEADER) not in (None, b"elsewhere")
    return tuple(own + ours + ([(ORIGIN_HEADER, b"east")] if forwarded else []))


def _statuses(flow: FlowConfig, topic: str) -> dict[int, PartitionStatus]:
    """Each partition's latest status."""
    return {
        r.partition: r
        for r in read_status(flow.target, flow.name)
        if isinstance(r, PartitionStatus) and r.topic == topic
    }


def _lags(flow: FlowConfig, topic: str) -> list[int | None]:
    """Each partition's lag as its latest status says (None: unknown or no status)."""
    statuses = _statuses(flow, topic)
    return [s.lag if (s := statuses.get(p)) else None for p in range(PARTITIONS)]


def test_a_flow_on_the_compiled_path_copies_forwarded_provenance_exactly(
    primary: str, dr: str, caplog: pytest.LogCaptureFixture
) -> None:
    upstream = unique_topic("orders")
    topic = f"east.{upstream}"  # under the default policy: primary's copy of east's
    remote = f"primary.{topic}"
    create_topic(primary, topic, partitions=PARTITIONS)
    producer = Producer({"bootstrap.servers": primary, "enable.idempotence": True})
    written = {p: _records(upstream) for p in range(PARTITIONS)}
    for p, records in written.items():
        for key, value, headers, timestamp in records:
            producer.produce(topic, value, key, p, headers=headers or None, timestamp=timestamp)
    assert producer.flush(30) == 0
    flow = flow_config(
        ("primary", primary), ("dr", dr), topic, {"replicator.data.path": "compiled"}
    )

    caplog.set_level(logging.INFO, logger="replicator.engine.data_path")
    with running(flow):
        wait_until(
            lambda: end_offsets(dr, remote, PARTITIONS) == [PER_PARTITION] * PARTITIONS,
            90,
            f"{remote} on dr holds every record",
        )
        # The lag is measured against the Mover's fetches (the group consumer never
        # fetches): known, and 0 once caught up, in each partition's status.
        wait_until(
            lambda: _lags(flow, topic) == [0] * PARTITIONS,
            60,
            f"every partition of {topic} reporting lag 0 in its status",
        )
        path = REGISTRY.get_sample_value(
            "replicator_data_path", {"flow": flow.name, "path": "compiled"}
        )
        python = REGISTRY.get_sample_value(
            "replicator_data_path", {"flow": flow.name, "path": "python"}
        )
    assert (path, python) == (1.0, 0.0)
    said = [r.getMessage() for r in caplog.records if r.name == "replicator.engine.data_path"]
    assert (
        f"flow {flow.name}: records move through the compiled data plane (librdkafka 2.12.1)"
        in said
    ), said

    for p in range(PARTITIONS):
        copied = read_partition(dr, remote, p)
        source = read_partition(primary, topic, p)
        assert [o for o, _ in copied] == list(range(PER_PARTITION))
        for (offset, replica), (source_offset, original) in zip(copied, source, strict=True):
            assert offset == source_offset
            assert (replica.key, replica.value, replica.timestamp) == (
                original.key, original.value, original.timestamp,
            ), f"partition {p} offset {offset}"  # fmt: skip
            assert replica.headers == _expected(topic, offset, list(original.headers)), (
                f"partition {p} offset {offset}: {replica.headers}"
            )


def test_the_lag_of_a_partition_stopped_after_the_start_counts_what_came_since(
    primary: str, dr: str
) -> None:
    # The group consumer's watermarks are at best those of a fetch before its pause, at
    # the assignment: a partition stopped later showed lag 0 (and none at all when that
    # fetch lost the race, as under load). Measured against the Mover's fetches: 6.
    topic = unique_topic("lagging")
    remote = f"primary.{topic}"
    create_topic(primary, topic, partitions=1)
    create_topic(dr, remote, partitions=1, config={"max.message.bytes": "20000"})
    producer = Producer({"bootstrap.servers": primary, "enable.idempotence": True})
    for i in range(10):
        producer.produce(topic, b"before %d" % i, partition=0)
    assert producer.flush(30) == 0
    flow = flow_config(
        ("primary", primary),
        ("dr", dr),
        topic,
        {"replicator.data.path": "compiled", "sync.topic.configs.enabled": "false"},
    )
    with running(flow):
        wait_until(lambda: _lags(flow, topic)[0] == 0, 60, f"{topic}[0] caught up, lag 0")
        producer.produce(topic, b"x" * 50_000, partition=0)  # above the remote's limit
        for i in range(5):
            producer.produce(topic, b"after %d" % i, partition=0)
        assert producer.flush(30) == 0
        wait_until(
            lambda: (
                (s := _statuses(flow, topic).get(0)) is not None
                and (s.state, s.next_offset, s.lag) == ("stopped", 10, 6)
            ),
            60,
            f"{topic}[0] stopped at the big record (offset 10), its lag 6",
        )
