"""An estate-size source for the tests of issue 41: 250 topics x 4 partitions of 100
records each, ten of them written in transactions of 9 records (their source offsets
skip the commit markers), and how to check a copy of it on the target exactly."""

from __future__ import annotations

import time
import uuid
from collections import defaultdict

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from replicator.engine.headers import replica_source_offset

TOPICS = 250
PARTITIONS = 4
RECORDS = 100  # per partition
TRANSACTIONAL = 10  # of the topics, written 9 records to a transaction


def create(bootstrap: str, prefix: str) -> list[str]:
    names = [f"{prefix}-{i:03d}" for i in range(TOPICS)]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(n, PARTITIONS, 1) for n in names])
    for future in futures.values():
        future.result(60)
    return names


def fill(bootstrap: str, topics: list[str]) -> None:
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for topic in topics[TRANSACTIONAL:]:
        for partition in range(PARTITIONS):
            for i in range(RECORDS):
                plain.produce(topic, value=b"v%d" % i, key=b"k%d" % i, partition=partition)
            plain.poll(0)
    assert plain.flush(60) == 0
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": uuid.uuid4().hex})
    txn.init_transactions(30)
    for topic in topics[:TRANSACTIONAL]:
        for partition in range(PARTITIONS):
            for start in range(0, RECORDS, 9):
                txn.begin_transaction()
                for i in range(start, min(start + 9, RECORDS)):
                    txn.produce(topic, value=b"t%d" % i, partition=partition)
                txn.commit_transaction(30)


def high_watermarks(bootstrap: str, topics: list[str]) -> dict[tuple[str, int], int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex})
    try:
        return {
            (t, p): consumer.get_watermark_offsets(TopicPartition(t, p), timeout=30)[1]
            for t in topics
            for p in range(PARTITIONS)
        }
    finally:
        consumer.close()


def replica_offsets(bootstrap: str, remotes: list[str]) -> dict[tuple[str, int], list]:
    """Every target partition read whole: (target offset, source offset) of each replica."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": uuid.uuid4().hex,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    found: dict[tuple[str, int], list] = defaultdict(list)
    pending = {(t, p) for t in remotes for p in range(PARTITIONS)}
    try:
        consumer.assign([TopicPartition(t, p, 0) for t, p in pending])
        deadline = time.monotonic() + 120
        while pending and time.monotonic() < deadline:
            for message in consumer.consume(10_000, 0.2):
                key = (message.topic(), message.partition())
                if message.error() is not None:
                    pending.discard(key)
                    continue
                source = replica_source_offset(message.headers(), b"primary")
                if source is not None:
                    found[key].append((message.offset(), source))
        assert not pending, f"{len(pending)} target partitions not read to their end"
    finally:
        consumer.close()
    return found


def exact(replicas: list, committed: int) -> int:
    """The fresh exact translation: the first replica whose source offset is >= it."""
    for target, source in replicas:
        if source >= committed:
            return target
    return replicas[-1][0] + 1
