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
copies), timestamps, partitions and order."""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka import Producer
from prometheus_client import REGISTRY

from replicator.engine.headers import (
    OFFSET_HEADER,
    ORIGIN_HEADER,
    SOURCE_HEADER,
    TOPIC_HEADER,
    encode_offset,
)

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
