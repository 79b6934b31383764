"""Verification of a wide flow: 2,000 partitions over 500 topics, planned (every
partition's offsets, last copy and oldest record in flight read at once) and verified
end to end with real Spark and GX, on two clusters of the module's own (500 topics
would weigh on every other test's metadata on the shared ones)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from replicator.statestore import StateStore
from replicator.verification.plan import plan_verification
from replicator.verification.run import verify
from replicator_lab import ClusterSpec, LocalStack

from helpers.kafka import free_port_pair
from helpers.replication import flow_config, running, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]
TOPICS, PARTITIONS, RECORDS = 500, 4, 5


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    stack = LocalStack(
        [ClusterSpec("east", free_port_pair()), ClusterSpec("far", free_port_pair())],
        data_dir=tmp_path_factory.mktemp("wide"),
    )
    stack.up(timeout=180)
    yield stack.bootstrap("east"), stack.bootstrap("far")
    stack.down(wipe=True)


def test_2000_partitions_over_500_topics_are_planned_and_verified(
    tmp_path: Path, wide: tuple[str, str], store: StateStore
) -> None:
    east, far = wide
    topics = [f"wide.{i:03d}" for i in range(TOPICS)]
    admin = AdminClient({"bootstrap.servers": east})
    for first in range(0, TOPICS, 250):
        futures = admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics[first:][:250]])
        for future in futures.values():
            future.result(timeout=60)
    producer = Producer({"bootstrap.servers": east, "linger.ms": 20})
    for topic in topics:
        for partition in range(PARTITIONS):
            for i in range(RECORDS):
                producer.produce(topic, f"{topic}-{partition}-{i}".encode(), partition=partition)
        producer.poll(0)
    assert producer.flush(60) == 0
    flow = flow_config(("east", east), ("far", far), r"wide\..*")

    with running(flow):
        wait_until(
            lambda: (
                len(windows := plan_verification(flow).windows) == TOPICS * PARTITIONS
                and all(w.in_flight == 0 and w.source_end == RECORDS for w in windows)
            ),
            600,
            "every partition replicated",
        )
    plan = plan_verification(flow)  # its time is the benchmark's (`--plan-only`)
    result = verify(flow, store, results=tmp_path)

    assert result.success, result.summary
    assert len(plan.windows) == TOPICS * PARTITIONS
    parity = pq.read_table(result.directory / "parity").to_pylist()
    assert len(parity) == TOPICS * PARTITIONS
    assert {(r["source_records"], r["copied"], r["missing"]) for r in parity} == {
        (RECORDS, RECORDS, 0)
    }
    assert result.summary["verified"]["records_now"] == TOPICS * PARTITIONS * RECORDS
