"""`replicator verify` against the real clusters with real Spark (local) and GX: a
correct copy passes with counts equal to the source's; a faulty copy has every
fault named by topic, partition and offsets, and the run fails."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from replicator_spark.kafka_ranges import SMALL_RANGE_OFFSETS

from replicator.cli import main
from replicator.engine.formats import Checkpoint
from replicator.engine.headers import (
    OFFSET_HEADER,
    SOURCE_HEADER,
    TOPIC_HEADER,
    encode_offset,
)
from replicator.engine.internal_topics import ensure_compacted_topic
from replicator.statestore import StateStore
from replicator.verification.plan import plan_verification
from replicator.verification.run import Verification, verify

from helpers.kafka import create_topic, unique_topic
from helpers.procedures import cluster_config
from helpers.replication import flow_config, preload, running, wait_until, write_config
from helpers.verification_server import verification_server

# Spark and GX in subprocesses: on two loaded cores a run has taken over 300 s.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def test_a_correct_copy_passes(tmp_path: Path, primary: str, dr: str, store: StateStore) -> None:
    topics = [unique_topic("verified"), unique_topic("verified")]
    wanted = {}
    for topic in topics:
        create_topic(primary, topic, partitions=3)
        wanted[topic] = preload(primary, topic, 6_000, 3)
    flow = flow_config(("primary", primary), ("dr", dr), "|".join(topics))
    with running(flow):
        wait_until(
            lambda: all(
                w.in_flight == 0 and w.source_end == wanted[w.topic][w.partition]
                for w in plan_verification(flow).windows
            ),
            120,
            "everything replicated",
        )
    # Written after the replicator stopped: in flight, not missing.
    in_flight = preload(primary, topics[0], 300, 3)
    result = verify(flow, store, results=tmp_path)

    assert result.success, result.summary
    lag = pq.read_table(result.directory / "lag").to_pylist()
    assert {(r["topic"], r["partition"]): r["lag_records"] for r in lag if r["lag_records"]} == {
        (topics[0], p): n for p, n in enumerate(in_flight)
    }
    parity = pq.read_table(result.directory / "parity").to_pylist()
    assert {(r["topic"], r["partition"]): r["source_records"] for r in parity} == {
        (t, p): n for t in topics for p, n in enumerate(wanted[t])
    }
    assert all(r["copied"] == r["source_records"] for r in parity)
    assert Path(result.summary["data_docs"]).exists()
    [run] = store.runs.recent("verification")
    assert (run.outcome, run.rpo_records) == ("succeeded", 300)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A verification server (Spark Connect) for the module's tests that ask for it."""
    with verification_server(tmp_path_factory.mktemp("server") / "server.log") as url:
        yield url


@pytest.mark.parametrize(
    ("records", "on_server"),
    [
        pytest.param(100, False, id="read-by-the-driver"),
        # A window too large for the driver: the connector reads it.
        pytest.param(SMALL_RANGE_OFFSETS + 100, False, id="read-by-the-connector"),
        # The job as a client of a verification server: the same faults, and again
        # on the same server (what a run keeps in the server's memory it releases).
        pytest.param(SMALL_RANGE_OFFSETS + 100, True, id="on-a-verification-server"),
    ],
)
def test_faults_are_named_and_the_command_fails(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    primary: str,
    dr: str,
    state_url: str,
    store: StateStore,
    records: int,
    on_server: bool,
) -> None:
    topic = unique_topic("faulty")
    create_topic(primary, topic, partitions=1)
    preload(primary, topic, records, 1)
    remote = f"primary.{topic}"
    create_topic(dr, remote, partitions=1)
    # A copy written by hand: offsets 40..49 missing, 60 twice, 70 and 71 with another
    # value, and two records written on the target by someone else, one with headers of
    # its own (the job failed on such a record until 2026-12-06). Even offsets carry the
    # headers as today's replicator writes them (the job reads those in compiled code),
    # odd ones as a replicator older than the topic header did (read by a lambda).
    source = _records(primary, topic, records)
    producer = Producer({"bootstrap.servers": dr, "enable.idempotence": True})
    for offset, (key, value, timestamp) in enumerate(source):
        if 40 <= offset < 50:
            continue
        headers = [(SOURCE_HEADER, b"primary"), (OFFSET_HEADER, encode_offset(offset))]
        if offset % 2 == 0:
            headers.append((TOPIC_HEADER, topic.encode()))
        copies = 2 if offset == 60 else 1
        for _ in range(copies):
            producer.produce(
                remote,
                key=key,
                value=b"changed" if offset in (70, 71) else value,
                timestamp=timestamp,
                partition=0,
                headers=headers,
            )
    producer.produce(remote, value=b"local", partition=0)
    producer.produce(remote, value=b"local", partition=0, headers=[("trace-id", b"a1")])
    # A checkpoint that claims target offset 35 is where source offset 30 is.
    # (Other tests may have created the checkpoints topic already.)
    checkpoints = "primary.checkpoints.internal"
    ensure_compacted_topic(cluster_config("dr", dr), checkpoints, 1, "test")
    wrong = Checkpoint("orders", remote, 0, 30, 35)
    producer.produce(checkpoints, key=wrong.key(), value=wrong.value())
    assert producer.flush(30) == 0
    config = write_config(tmp_path, primary, dr, topic)

    command = ["verify", "--config", str(config), "--results", str(tmp_path)]
    command += ["--state-url", state_url]
    if on_server:
        command += ["--master", request.getfixturevalue("server")]
        assert main(command) == 1  # the server's first run of this flow
        command += ["--full"]  # everything again

    code = main(command)

    assert code == 1
    run = store.runs.recent("verification")[0]
    assert run.outcome == "failed"
    result = Verification(run.run_id, Path(run.details["results"]), False, run.details)
    faults = {
        (f["kind"], f["first"], f["last"])
        for f in pq.read_table(result.directory / "faults").to_pylist()
    }
    assert faults == {
        ("missing", 40, 49),
        ("duplicated", 60, 60),
        ("mismatched", 70, 71),
        ("no_provenance", records - 9, records - 8),  # the target offsets of the local records
    }
    named = result.summary["suites"]["faults"]["failed"][0]["rows"]
    assert {(r["kind"], r["topic"], r["partition"], r["first"]) for r in named} == {
        (kind, topic, 0, first) for kind, first, _ in faults
    }
    mappings = result.summary["suites"]["mappings"]["failed"]
    assert [
        (
            f["column"],
            [(r["group"], r["upstream"], r["downstream"], r["claimed"]) for r in f["rows"]],
        )
        for f in mappings
    ] == [("points_at_claimed", [("orders", 30, 35, 35)])]
    assert Path(result.summary["data_docs"]).exists()


def _records(
    bootstrap: str, topic: str, count: int
) -> list[tuple[bytes | None, bytes | None, int]]:
    """(key, value, timestamp) of the first `count` records of partition 0, in order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify-test"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    records: list[tuple[bytes | None, bytes | None, int]] = []
    while len(records) < count:
        for message in consumer.consume(1000, 10):
            records.append((message.key(), message.value(), message.timestamp()[1]))
    consumer.close()
    return records
