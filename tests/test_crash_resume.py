"""`kill -9` of the replicator mid-stream, then a restart: nothing lost, nothing twice."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from replication_helpers import end_offsets, wait_until

from replicator.headers import OFFSET_HEADER, decode_offset

from kafka_helpers import create_topic, unique_topic

pytestmark = pytest.mark.integration

PARTITIONS = 6
RECORDS = 400_000


def _preload(bootstrap: str, topic: str) -> list[int]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000})
    value = b"x" * 100
    for i in range(RECORDS):
        while True:
            try:
                producer.produce(topic, value=value, key=b"%d" % i, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(60) == 0
    return [
        RECORDS // PARTITIONS + (1 if p < RECORDS % PARTITIONS else 0) for p in range(PARTITIONS)
    ]


def _config(tmp_path: Path, primary: str, dr: str, topic: str) -> Path:
    path = tmp_path / "mm2.properties"
    path.write_text(
        "\n".join(
            [
                "clusters = primary, dr",
                f"primary.bootstrap.servers = {primary}",
                f"dr.bootstrap.servers = {dr}",
                "primary->dr.enabled = true",
                f"primary->dr.topics = {topic}",
                "replication.factor = 1",
                "heartbeats.topic.replication.factor = 1",
                "checkpoints.topic.replication.factor = 1",
                "offset-syncs.topic.replication.factor = 1",
                "status.topic.replication.factor = 1",
            ]
        )
    )
    return path


def _start(config: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "replicator", "run", "--config", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _source_offsets_on_target(bootstrap: str, topic: str, partition: int, end: int) -> list[int]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique_topic("check"),
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    offsets: list[int] = []
    try:
        while consumer.position([TopicPartition(topic, partition)])[0].offset < end:
            for message in consumer.consume(10_000, timeout=1.0):
                assert message.error() is None, message.error()
                offsets.append(decode_offset(dict(message.headers())[OFFSET_HEADER]))
    finally:
        consumer.close()
    return offsets


def test_kill_9_mid_stream_then_restart_loses_and_doubles_nothing(
    tmp_path: Path, primary: str, dr: str
) -> None:
    topic = unique_topic("crash")
    create_topic(primary, topic, partitions=PARTITIONS)
    wanted = _preload(primary, topic)
    remote = f"primary.{topic}"
    config = _config(tmp_path, primary, dr, topic)
    log = tmp_path / "replicator.log"

    first = _start(config, log)
    try:
        wait_until(lambda: sum(end_offsets(dr, remote, PARTITIONS) or [0]) >= 40_000, 60, "a start")
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
    at_kill = sum(end_offsets(dr, remote, PARTITIONS) or [0])
    assert at_kill < RECORDS, "killed mid-stream, not after the end"

    second = _start(config, log)
    try:
        wait_until(lambda: end_offsets(dr, remote, PARTITIONS) == wanted, 120, "all records")
        second.send_signal(signal.SIGTERM)
        assert second.wait(60) == 0, log.read_text()[-3000:]
    finally:
        if second.poll() is None:
            second.kill()

    for partition in range(PARTITIONS):
        copied = _source_offsets_on_target(dr, remote, partition, wanted[partition])
        assert copied == list(range(wanted[partition])), f"partition {partition}"
