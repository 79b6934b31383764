"""Incremental verification against real clusters, Spark and GX: a run verifies what
is new since the flow's last run (nothing, when nothing came), a copy of a verified
record written later is found at once, `--full` verifies everything again, and a
remote topic created again since it was verified is verified whole and named."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from replicator.config.model import FlowConfig
from replicator.engine.headers import OFFSET_HEADER, SOURCE_HEADER, encode_offset
from replicator.statestore import StateStore
from replicator.verification.plan import plan_verification
from replicator.verification.run import Verification, verify

from helpers.kafka import create_topic, unique_topic
from helpers.replication import flow_config, preload, running, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]
RECORDS = 100


def test_runs_verify_what_is_new_and_find_what_changed_since(
    tmp_path: Path, primary: str, dr: str, store: StateStore
) -> None:
    altered, recreated = unique_topic("incremental"), unique_topic("incremental")
    for topic in (altered, recreated):
        create_topic(primary, topic, partitions=1)
        preload(primary, topic, RECORDS, 1)
    flow = flow_config(("primary", primary), ("dr", dr), f"{altered}|{recreated}")
    _replicate_all(flow)

    first = verify(flow, store, results=tmp_path / "1")
    assert first.success, first.summary
    assert _verified(first) == (True, 2 * RECORDS, 0)

    # Nothing new: nothing read (no Spark job at all), and the run passes on what
    # earlier runs proved.
    second = verify(flow, store, results=tmp_path / "2")
    assert second.success, second.summary
    assert _verified(second) == (True, 0, 2 * RECORDS)
    assert not (second.directory / "parity").exists()
    assert second.summary["suites"]["parity"]["rows"] == 2

    # A copy of verified offset 5 written later, with other content: a duplicate that
    # the next run's new target window holds, found at once.
    remote = f"primary.{altered}"
    _copy_of(dr, remote, 5, _value_at(primary, altered, 5) + b" altered")
    third = verify(flow, store, results=tmp_path / "3")
    assert not third.success
    assert _faults(third) == {(altered, "duplicated", 5, 5)}

    # --full compares every retained record again: the copy's content differs too.
    # (The target's last copy is now offset 5's: what the flow acknowledged, as the
    # replicator would resume, ends there, and so does the window.)
    full = verify(flow, store, results=tmp_path / "4", full=True)
    assert not full.success
    assert _verified(full) == (False, RECORDS + 6, 0)
    assert _faults(full) == {(altered, "duplicated", 5, 5), (altered, "mismatched", 5, 5)}

    # The other topic's copy deleted and its remote topic created again: verified
    # whole at once (its earlier ranges no longer hold), every record missing.
    admin = AdminClient({"bootstrap.servers": dr})
    target = f"primary.{recreated}"
    admin.delete_topics([target])[target].result(timeout=30)
    wait_until(lambda: target not in admin.list_topics(timeout=10).topics, 30, "deleted")
    _create_again(dr, target)
    fifth = verify(flow, store, results=tmp_path / "5", topics=[recreated])
    assert not fifth.success
    assert fifth.summary["verified"]["reverified"] == {
        f"{recreated}[0]": f"{target} was deleted and created again since it was verified"
    }
    assert _faults(fifth) == {(recreated, "missing", 0, RECORDS - 1)}


def test_the_rotating_sample_finds_a_copy_changed_in_place(
    tmp_path: Path, primary: str, dr: str, store: StateStore
) -> None:
    """A copy changed where it lies (offsets and bounds as verified: only its content
    differs) is beyond what an incremental run reads; the sample re-reads it. Here the
    remote topic is written again by hand under the same offsets, and its stored
    ranges carry no topic id (as ranges a cluster told no id for), so only the
    content tells."""
    topic = unique_topic("sampled")
    create_topic(primary, topic, partitions=1)
    preload(primary, topic, RECORDS, 1)
    flow = flow_config(("primary", primary), ("dr", dr), topic)
    _replicate_all(flow)
    assert verify(flow, store, results=tmp_path / "1").success
    store.verified.replace(
        flow.name,
        {(topic, 0): [replace(r, target_topic_id=None) for r in store.verified.ranges(flow.name)]},
    )
    remote = f"primary.{topic}"
    admin = AdminClient({"bootstrap.servers": dr})
    admin.delete_topics([remote])[remote].result(timeout=30)
    wait_until(lambda: remote not in admin.list_topics(timeout=10).topics, 30, "deleted")
    _create_again(dr, remote)
    _copy_all(primary, topic, dr, remote, altered=5)

    # Right after the last run, nothing is due: nothing read, the change unseen.
    quiet = verify(flow, store, results=tmp_path / "2")
    assert quiet.success, quiet.summary
    assert quiet.summary["verified"]["sampled_ranges"] == 0

    # Every range due (a period shorter than the time since): re-read, found.
    sampled = verify(flow, store, results=tmp_path / "3", sample_period=timedelta(seconds=1))
    assert not sampled.success
    verified = sampled.summary["verified"]
    assert (verified["sampled_ranges"], verified["sampled_records"]) == (1, RECORDS)
    assert verified["sampled_differing"] == [f"{topic}[0] 0..{RECORDS - 1}"]
    assert _faults(sampled) == {(topic, "mismatched", 5, 5)}
    # The range no longer stands: the next run verifies the partition from there.
    assert store.verified.ranges(flow.name) == []


def _copy_all(source: str, topic: str, target: str, remote: str, *, altered: int) -> None:
    """Every record of `topic`[0] written to `remote`[0] as a flow writes its copies,
    the one at offset `altered` with another value."""
    consumer = Consumer({"bootstrap.servers": source, "group.id": "verify-incremental"})
    producer = Producer({"bootstrap.servers": target, "enable.idempotence": True})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        copied = 0
        while copied < RECORDS:
            message = consumer.poll(10)
            if message is None or message.error():
                continue
            value = message.value() + (b" altered" if message.offset() == altered else b"")
            headers = [
                (SOURCE_HEADER, b"primary"),
                (OFFSET_HEADER, encode_offset(message.offset())),
            ]
            producer.produce(
                remote, value=value, key=message.key(), partition=0,
                timestamp=message.timestamp()[1], headers=headers,
            )  # fmt: skip
            copied += 1
        assert producer.flush(30) == 0
    finally:
        consumer.close()


def _verified(result: Verification) -> tuple[bool, int, int]:
    verified = result.summary["verified"]
    return verified["incremental"], verified["records_now"], verified["records_before"]


def _table(result: Verification, name: str) -> list[dict]:
    return pq.read_table(result.directory / name).to_pylist()


def _faults(result: Verification) -> set[tuple[str, str, int, int]]:
    return {(f["topic"], f["kind"], f["first"], f["last"]) for f in _table(result, "faults")}


def _value_at(bootstrap: str, topic: str, offset: int) -> bytes:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify-incremental"})
    try:
        consumer.assign([TopicPartition(topic, 0, offset)])
        while (message := consumer.poll(10)) is None or message.error():
            pass
        return message.value()
    finally:
        consumer.close()


def _copy_of(bootstrap: str, remote: str, offset: int, value: bytes) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    headers = [(SOURCE_HEADER, b"primary"), (OFFSET_HEADER, encode_offset(offset))]
    producer.produce(remote, value=value, partition=0, headers=headers)
    assert producer.flush(30) == 0


def _create_again(bootstrap: str, topic: str) -> None:
    """The broker may still be removing the old topic's logs: try until it takes it."""
    deadline = time.monotonic() + 60
    while True:
        try:
            create_topic(bootstrap, topic, partitions=1)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def _replicate_all(flow: FlowConfig) -> None:
    """Run `flow` until every window holds all `RECORDS` records with none in flight."""
    with running(flow):
        wait_until(
            lambda: all(
                w.in_flight == 0 and w.source_end == RECORDS
                for w in plan_verification(flow).windows
            ),
            120,
            "everything replicated",
        )
