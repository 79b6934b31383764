"""The two local clusters are real, independent Apache Kafka clusters."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from replicator_lab import LocalStack

from helpers.kafka import create_topic, make_records, produce_records, read_partition, unique_topic
from helpers.session import TEST_DATA_DIR

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("cluster", ["primary", "dr"])
def test_records_read_back_complete_and_in_order(kafka_stack: LocalStack, cluster: str) -> None:
    bootstrap = kafka_stack.bootstrap(cluster)
    topic = unique_topic("roundtrip")
    create_topic(bootstrap, topic, partitions=6)
    records = make_records(10_000)

    produced = produce_records(bootstrap, topic, records)

    assert sum(len(pairs) for pairs in produced.values()) == 10_000
    assert len(produced) == 6, "keys and null keys spread over every partition"
    for partition in range(6):
        assert read_partition(bootstrap, topic, partition) == produced[partition]
    read_back = [r for p in range(6) for _, r in read_partition(bootstrap, topic, p)]
    assert sorted(read_back, key=lambda r: r.timestamp) == records
    assert any(r.key is None for r in read_back)


def test_clusters_are_distinct(kafka_stack: LocalStack) -> None:
    statuses = {s.name: s for s in kafka_stack.status()}

    assert {s.state for s in statuses.values()} == {"running"}
    assert statuses["primary"].cluster_id != statuses["dr"].cluster_id
    topic = unique_topic("only-on-primary")
    create_topic(kafka_stack.bootstrap("primary"), topic)
    statuses = {s.name: s for s in kafka_stack.status()}
    assert topic in statuses["primary"].topics
    assert topic not in statuses["dr"].topics


def test_each_broker_logs_its_gc_pauses(kafka_stack: LocalStack) -> None:
    # A stall both probes see may be a broker's pause; its GC log tells.
    for broker in kafka_stack.brokers.values():
        first = broker.gc_log.read_text(encoding="utf-8").splitlines()[0]
        assert first.endswith("Using G1"), first


def test_status_json_for_scripts(kafka_stack: LocalStack) -> None:
    topic = unique_topic("status")
    create_topic(kafka_stack.bootstrap("dr"), topic)

    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "replicator",
            "stack",
            "status",
            "--json",
            "--data-dir",
            str(TEST_DATA_DIR),
        ],
        capture_output=True,
        text=True,
        check=True,
    )

    clusters = {c["name"]: c for c in json.loads(result.stdout)}
    assert clusters["primary"]["bootstrap"] == kafka_stack.bootstrap("primary")
    assert clusters["dr"]["bootstrap"] == kafka_stack.bootstrap("dr")
    assert clusters["primary"]["state"] == clusters["dr"]["state"] == "running"
    assert topic in clusters["dr"]["topics"]
