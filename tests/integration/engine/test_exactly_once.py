"""Exactly-once mode: transactions fence zombies and survive kill -9 mid-transaction."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from replicator.engine.transactions import Outcome, TransactionalWriters

from helpers.exactly_once import kill_then_finish, next_offsets
from helpers.kafka import create_topic, read_partition, unique_topic
from helpers.replication import (
    preloaded_flow,
    source_offsets_on_target,
    start_replicator,
    wait_until,
)

pytestmark = pytest.mark.integration

GROUP = "replicator-primary-dr"
PARTITIONS = 6
RECORDS = 600_000
EXACTLY_ONCE = ("exactly.once = true",)


def _members_owning(primary: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": primary})
    try:
        group = admin.describe_consumer_groups([GROUP])[GROUP].result(timeout=10)
    except KafkaException:
        return -1
    return sum(
        1
        for member in group.members
        if any(tp.topic == topic for tp in member.assignment.topic_partitions)
    )


def _assert_exactly_once(dr: str, remote: str, wanted: list[int]) -> None:
    """A read_committed reader sees every source offset once, in order."""
    for partition in range(PARTITIONS):
        copied = source_offsets_on_target(dr, remote, partition, _high(dr, remote, partition))
        assert copied == list(range(wanted[partition])), f"partition {partition}"


def _high(bootstrap: str, topic: str, partition: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "high"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
    finally:
        consumer.close()


def _stop(process: subprocess.Popen[bytes], log: Path) -> None:
    process.send_signal(signal.SIGTERM)
    assert process.wait(60) == 0, log.read_text()[-3000:]


def test_zombie_is_fenced_and_rejoins(tmp_path: Path, primary: str, dr: str) -> None:
    flow = preloaded_flow(tmp_path, primary, dr, "zombie", RECORDS, PARTITIONS, extra=EXACTLY_ONCE)
    topic, remote, wanted, config = flow.topic, flow.remote, flow.wanted, flow.config
    logs = [tmp_path / "zombie.log", tmp_path / "survivor.log"]
    zombie, survivor = (start_replicator(config, log) for log in logs)
    try:
        wait_until(lambda: _members_owning(primary, topic) == 2, 90, "both workers replicating")
        # Stop it mid-stream, most likely inside a transaction.
        wait_until(
            lambda: min(o or 0 for o in next_offsets(dr, remote, PARTITIONS)) > 5_000,
            90,
            "progress",
        )
        zombie.send_signal(signal.SIGSTOP)
        wait_until(lambda: _members_owning(primary, topic) == 1, 60, "partitions moved away")
        zombie.send_signal(signal.SIGCONT)

        wait_until(
            lambda: next_offsets(dr, remote, PARTITIONS) == wanted, 180, "every record committed"
        )
        wait_until(lambda: _members_owning(primary, topic) == 2, 90, "the zombie rejoined")
        assert zombie.poll() is None, "the fenced worker keeps running"
        # Woken up, it either found itself out of the group first (and revoked its
        # partitions) or tried to commit and was fenced: either way it wrote nothing.
        zombie_log = logs[0].read_text()
        assert "producer fenced" in zombie_log or "revoking assignment" in zombie_log
        for process, log in zip((zombie, survivor), logs, strict=True):
            _stop(process, log)
    finally:
        for process in (zombie, survivor):
            if process.poll() is None:
                process.send_signal(signal.SIGCONT)
                process.kill()
        for log in logs:  # shown by pytest only if the test fails
            lines = [line for line in log.read_text().splitlines() if " replicator." in line]
            sys.stdout.write(f"--- {log.name}\n" + "\n".join(lines[-40:]) + "\n")
    _assert_exactly_once(dr, remote, wanted)


def test_kill_9_mid_transaction(tmp_path: Path, primary: str, dr: str) -> None:
    flow = preloaded_flow(
        tmp_path, primary, dr, "eos-crash", RECORDS, PARTITIONS, extra=EXACTLY_ONCE
    )
    remote, wanted, config = flow.remote, flow.wanted, flow.config
    log = tmp_path / "replicator.log"
    kill_then_finish(config, log, dr, remote, wanted, kill_after=30_000)
    _assert_exactly_once(dr, remote, wanted)


def test_the_next_owner_fences_the_previous_one(dr: str) -> None:
    topic = unique_topic("fence")
    create_topic(dr, topic, partitions=1)

    def config(transactional_id: str) -> dict[str, object]:
        return {"bootstrap.servers": dr, "transactional.id": transactional_id}

    previous, next_owner = (
        TransactionalWriters("a->b", config),
        TransactionalWriters("a->b", config),
    )
    producer = previous.open(topic, 0)
    previous.begin(topic, 0)
    producer.produce(topic, b"written by a zombie", partition=0)
    producer.flush(10)

    next_owner.open(topic, 0)  # same transactional id: the zombie's transaction is aborted

    assert {key: settled.outcome for key, settled in previous.commit_open().items()} == {
        (topic, 0): Outcome.FENCED
    }
    assert read_partition(dr, topic, 0) == []
    next_owner.close_all()
