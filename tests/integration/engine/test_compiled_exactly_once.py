"""An exactly-once flow on the compiled data path (issue 29): `exactly.once = true`
with `replicator.data.path = compiled`, so the worker refuses to start rather than
fall back to the Python loop, and its log says the path.

The source, on two partitions, is written by a transactional producer: transactions
of 500 records, every fifth one aborted, its records mixing plain ones, records with
headers of their own (duplicate names, null and empty values) and null and empty
keys and values. A worker is killed with SIGKILL while it copies (most likely
inside its transactions), a second one finishes the copy. The target is then read
read_committed and compared with the source record by record: every committed
source record exactly once, in order (no duplicate, no gap, no aborted record),
with its key, value, timestamp, its own headers in order, then `__dr_src`,
`__dr_off` and `__dr_topic`. And a partition whose transactional id another producer
initialises (its next owner) is given up, nothing more of it visible."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from prometheus_client import REGISTRY

from replicator.engine.headers import OFFSET_HEADER, SOURCE_HEADER, TOPIC_HEADER, encode_offset

from helpers.exactly_once import kill_then_finish, next_offsets
from helpers.kafka import create_topic, read_partition, unique_topic
from helpers.replication import (
    flow_config,
    running,
    source_offsets_on_target,
    wait_until,
    write_config,
)

pytestmark = pytest.mark.integration

PARTITIONS = 2
TRANSACTIONS = 250  # per partition
PER_TRANSACTION = 500


def _record(i: int, now_ms: int) -> tuple[bytes | None, bytes | None, list, int]:
    """Record `i` of a partition: (key, value, headers, timestamp)."""
    key: bytes | None = f"k{i}".encode()
    value: bytes | None = f"v{i}".encode() * (1 + i % 5)
    headers: list = []
    kind = i % 10
    if kind == 1:
        headers = [("app", b"1"), ("app", None), ("empty", b""), ("app", b"2")]
    elif kind == 2:
        key, value = None, None
    elif kind == 3:
        key, value = b"", b""
    elif kind == 4:
        headers = [("trace", b"t-%d" % i)]
    return key, value, headers, now_ms - 100_000 + i


def _write_source(primary: str, topic: str) -> None:
    """Transactions on each partition, every fifth one aborted."""
    producer = Producer(
        {"bootstrap.servers": primary, "transactional.id": f"{topic}-writer", "linger.ms": 20}
    )
    producer.init_transactions(30)
    now_ms = int(time.time() * 1000)
    i = 0
    for t in range(TRANSACTIONS):
        producer.begin_transaction()
        for _ in range(PER_TRANSACTION):
            key, value, headers, timestamp = _record(i, now_ms)
            for partition in range(PARTITIONS):
                producer.produce(
                    topic, value, key, partition, headers=headers or None, timestamp=timestamp
                )
            i += 1
        producer.flush(30)  # an abort drops unsent records: these must reach the log
        if t % 5 == 3:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
    assert producer.flush(30) == 0


def test_an_exactly_once_flow_on_the_compiled_path_survives_a_kill_exactly(
    tmp_path: Path, primary: str, dr: str
) -> None:
    topic = unique_topic("eos-compiled")
    remote = f"primary.{topic}"
    create_topic(primary, topic, partitions=PARTITIONS)
    _write_source(primary, topic)
    source = {p: read_partition(primary, topic, p) for p in range(PARTITIONS)}
    wanted = [source[p][-1][0] + 1 for p in range(PARTITIONS)]
    committed = TRANSACTIONS * PER_TRANSACTION * 4 // 5
    assert [len(source[p]) for p in range(PARTITIONS)] == [committed] * PARTITIONS

    config = write_config(
        tmp_path,
        primary,
        dr,
        topic,
        extra=("exactly.once = true", "replicator.data.path = compiled"),
    )
    log = tmp_path / "replicator.log"
    kill_then_finish(config, log, dr, remote, wanted, kill_after=10_000)
    text = log.read_text()
    assert text.count("records move through the compiled data plane (librdkafka") == 2, text[-3000:]
    assert "exactly-once: a transactional Mover per partition" in text

    for p in range(PARTITIONS):
        copied = read_partition(dr, remote, p)
        offsets = [int.from_bytes(dict(r.headers)[OFFSET_HEADER], "big") for _, r in copied]
        assert offsets == [o for o, _ in source[p]], f"partition {p}: duplicates or gaps"
        for (_, replica), (offset, original) in zip(copied, source[p], strict=True):
            assert (replica.key, replica.value, replica.timestamp) == (
                original.key, original.value, original.timestamp,
            ), f"partition {p} offset {offset}"  # fmt: skip
            assert replica.headers == (
                *original.headers,
                (SOURCE_HEADER, b"primary"),
                (OFFSET_HEADER, encode_offset(offset)),
                (TOPIC_HEADER, topic.encode()),
            ), f"partition {p} offset {offset}: {replica.headers}"


def test_a_partition_fenced_by_its_next_owner_is_given_up_on_the_compiled_path(
    primary: str, dr: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Another producer initialises the partition's transactional id (as its next owner
    would): the worker's next transaction is fenced, the partition is dropped (it
    belongs to another worker) and nothing more of it becomes visible."""
    topic = unique_topic("eos-fenced")
    remote = f"primary.{topic}"
    create_topic(primary, topic, partitions=1)
    flow = flow_config(
        ("primary", primary), ("dr", dr), topic, {"replicator.data.path": "compiled"},
        exactly_once=True,
    )  # fmt: skip
    source = Producer({"bootstrap.servers": primary, "enable.idempotence": True})

    def produce(first: int, count: int) -> None:
        for i in range(first, first + count):
            source.produce(topic, b"v%d" % i, b"k%d" % i, 0)
        assert source.flush(30) == 0

    before = REGISTRY.get_sample_value(
        "replicator_errors_total", {"flow": flow.name, "kind": "fenced"}
    )
    caplog.set_level(logging.WARNING, logger="replicator.engine")
    produce(0, 2_000)
    with running(flow) as task:
        wait_until(lambda: next_offsets(dr, remote, 1) == [2_000], 90, "the first records")
        next_owner = Producer(
            {"bootstrap.servers": dr, "transactional.id": f"replicator-primary-dr-{topic}-0"}
        )
        next_owner.init_transactions(30)  # fences the worker's Mover
        produce(2_000, 1_000)
        wait_until(
            lambda: task._parts.partitions.get((topic, 0)) is None,
            60,
            "the partition dropped",
            state=lambda: _partition_state(task, (topic, 0), dr, remote),
        )
        time.sleep(2)  # nothing more of it is written
    after = REGISTRY.get_sample_value(
        "replicator_errors_total", {"flow": flow.name, "kind": "fenced"}
    )
    assert (after or 0) - (before or 0) == 1
    assert "producer fenced" in caplog.text
    assert source_offsets_on_target(dr, remote, 0) == list(range(2_000))


def _partition_state(task: Any, key: tuple[str, int], dr: str, remote: str) -> str:
    """What the worker holds of a partition that was not given up: its tracker, whether
    a Mover reads it, and the target's committed tail (a wait's explanation)."""
    tracker = task._parts.partitions.get(key)
    writer = task._parts.writer
    shown = (
        None
        if tracker is None
        else {
            name: getattr(tracker, name) for name in ("resuming", "stopped", "epoch", "next_offset")
        }
    )
    return (
        f"tracker {shown}, Mover {writer.movers.get(key) is not None}, "
        f"transaction taking {writer.movers.taking(key)}, target tail {next_offsets(dr, remote, 1)}"
    )
