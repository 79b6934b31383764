"""Incremental verification against real clusters, Spark and GX: a run verifies what
is new since the flow's last run (nothing, when nothing came), a copy of a verified
record written later is found at once, `--full` verifies everything again, and a
remote topic created again since it was verified is verified whole and named."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

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
    with running(flow):
        wait_until(
            lambda: all(
                w.in_flight == 0 and w.source_end == RECORDS
                for w in plan_verification(flow).windows
            ),
            120,
            "everything replicated",
        )

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
