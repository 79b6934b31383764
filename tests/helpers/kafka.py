"""Helpers shared by tests that talk to real brokers: unique topics, producing
records with keys, headers and timestamps, and reading a partition to its end."""

from __future__ import annotations

import os
import random
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_CREATE_TIME,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from replicator_lab import ClusterSpec, LocalStack
from replicator_lab.broker import LOOPBACK_HOST, port_in_use
from replicator_lab.security import SecurityMode

Headers = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class Record:
    """A record as produced or as read back, comparable field by field."""

    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int

    @classmethod
    def from_message(cls, message: Message) -> Record:
        timestamp_type, timestamp = message.timestamp()
        assert timestamp_type == TIMESTAMP_CREATE_TIME, "records keep their CreateTime"
        headers = tuple((name, value) for name, value in message.headers() or [])
        return cls(message.key(), message.value(), headers, timestamp)


def unique_topic(prefix: str = "test") -> str:
    """A topic name no other test (or earlier run on the same cluster) uses."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 1,
    config: dict[str, str] | None = None,
    client: Mapping[str, str] | None = None,
) -> None:
    """`client`: more client settings (a secured cluster's credentials)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **(client or {})})
    topic = NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})
    admin.create_topics([topic], operation_timeout=30)[name].result(timeout=30)


@contextmanager
def dropped_after(bootstrap: str, topics: list[str]) -> Iterator[None]:
    """Delete `topics` (those that exist) when the block ends: an estate-size test's
    thousand partitions would otherwise make every later test on the session's
    clusters read their metadata and offsets."""
    try:
        yield
    finally:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        existing = set(admin.list_topics(timeout=30).topics)
        doomed = [t for t in topics if t in existing]
        for future in admin.delete_topics(doomed, operation_timeout=60).values() if doomed else ():
            future.result(60)


def make_records(
    count: int, null_key_every: int = 7, base_timestamp: int | None = None
) -> list[Record]:
    """`count` distinct records: every `null_key_every`-th has a null key, all have
    two headers (one repeated name) and strictly increasing CreateTime timestamps."""
    base = base_timestamp if base_timestamp is not None else int(time.time() * 1000) - count
    return [
        Record(
            key=None if i % null_key_every == 0 else f"key-{i % 97}".encode(),
            value=f"value-{i}".encode() * (1 + i % 5),
            headers=(("seq", str(i).encode()), ("tag", b"a"), ("tag", b"b")),
            timestamp=base + i,
        )
        for i in range(count)
    ]


def produce_records(
    bootstrap: str, topic: str, records: list[Record], client: Mapping[str, str] | None = None
) -> dict[int, list[tuple[int, Record]]]:
    """Produce `records` with an idempotent producer; return, per partition, the
    (offset, record) pairs the broker acknowledged, in offset order. Raises on
    any delivery failure, naming the record."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            **(client or {}),
        }
    )
    delivered: dict[int, list[tuple[int, Record]]] = defaultdict(list)
    failures: list[str] = []

    def on_delivery(record: Record, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failures.append(f"{record.headers[0][1].decode()}: {error}")
        else:
            delivered[message.partition()].append((message.offset(), record))

    for record in records:
        producer.produce(
            topic,
            key=record.key,
            value=record.value,
            headers=list(record.headers),
            timestamp=record.timestamp,
            on_delivery=lambda e, m, r=record: on_delivery(r, e, m),
        )
        producer.poll(0)
    remaining = producer.flush(60)
    assert remaining == 0, f"{remaining} records to {topic} still undelivered after 60s"
    assert not failures, f"delivery to {topic} failed: {failures[:5]}"
    return {p: sorted(pairs, key=lambda pair: pair[0]) for p, pairs in delivered.items()}


def read_partition(
    bootstrap: str,
    topic: str,
    partition: int,
    timeout: float = 60.0,
    client: Mapping[str, str] | None = None,
) -> list[tuple[int, Record]]:
    """Every (offset, record) of one partition, from its start to the end it had
    when called (read_committed, so control records and aborted data are skipped)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            **(client or {}),
        }
    )
    try:
        tp = TopicPartition(topic, partition)
        _, end = consumer.get_watermark_offsets(tp, timeout=10)
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        records: list[tuple[int, Record]] = []
        deadline = time.monotonic() + timeout
        while end > 0 and consumer.position([tp])[0].offset < end:
            assert time.monotonic() < deadline, (
                f"{topic}[{partition}] not read to offset {end} within {timeout}s "
                f"(got {len(records)} records)"
            )
            for message in consumer.consume(num_messages=1000, timeout=0.5):
                if message.error():
                    raise AssertionError(f"{topic}[{partition}]: {message.error()}")
                records.append((message.offset(), Record.from_message(message)))
        return records
    finally:
        consumer.close()


#: Ports for the clusters and servers tests start, per xdist worker: below the kernel's
#: range of ephemeral ports. A cluster a test stops and starts again on its port (an
#: outage) must not find the port taken meanwhile as the local port of some client's
#: connection, which the kernel picks from that range (a CI run failed so on a port
#: that `bind(0)` had chosen).
_PORTS_PER_WORKER = 1500


def _ephemeral_ports_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_port_pair() -> int:
    """A port P such that P and P+1 are both free right now, outside the ephemeral
    range and in this xdist worker's own block (two workers never pick the same)."""
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    top = _ephemeral_ports_start() - 2 - worker * _PORTS_PER_WORKER
    block = range(max(1024, top - _PORTS_PER_WORKER), top)
    for port in random.sample(block, min(200, len(block))):
        if not port_in_use(port) and not port_in_use(port + 1):
            return port
    raise AssertionError(f"no free port pair in {block.start}..{block.stop}")


def free_port_pairs(count: int) -> list[int]:
    """`count` ports as `free_port_pair` gives them, no two sharing a port (P, P+1):
    each draw is free when made, but two draws may pick the same pair (the Docker
    stack once failed to start: "Bind for 127.0.0.1:30128 failed: port is already
    allocated", by another of its own services)."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port_pair()
        if all(abs(port - taken) >= 2 for taken in ports):
            ports.append(port)
    return ports


@contextmanager
def own_cluster_pair(
    data_dir: Path, security: SecurityMode | None = None, host: str = LOOPBACK_HOST
) -> Iterator[LocalStack]:
    """A source (`primary`) and a target (`dr`) cluster of a test module's own, for
    tests that kill brokers without harming the session's clusters, or secured ones;
    listening on `host` (e.g. where containers reach them)."""
    first, second = free_port_pairs(2)
    stack = LocalStack(
        [ClusterSpec("primary", first, host=host), ClusterSpec("dr", second, host=host)],
        data_dir=data_dir,
        security=security,
    )
    stack.up(timeout=120)
    try:
        yield stack
    finally:
        stack.down(wipe=True)
