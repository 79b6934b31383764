"""The Spark parity job against the real clusters: a correct copy passes with counts
equal to the source's; a faulty copy has each fault named by partition and offsets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from pyspark.sql import SparkSession
from replication_helpers import flow_config, preload, running, source_offsets_on_target, wait_until

from replicator.verification.plan import plan_verification

from kafka_helpers import create_topic, unique_topic

pytestmark = pytest.mark.integration

_JARS = Path(__file__).resolve().parents[1] / ".cache" / "jvm" / "spark-kafka"


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    jars = ",".join(str(j) for j in sorted(_JARS.glob("*.jar")))
    session = (
        SparkSession.builder.master("local[2]")
        .appName("parity-test")
        .config("spark.jars", jars)
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    yield session
    session.stop()


def test_parity_of_a_copy_with_faults(spark: SparkSession, primary: str, dr: str) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "spark"))
    from parity import compare

    topic = unique_topic("parity")
    create_topic(primary, topic, partitions=2)
    wanted = preload(primary, topic, 2_000, 2)
    flow = flow_config(("primary", primary), ("dr", dr), topic)
    remote = f"primary.{topic}"
    with running(flow):
        wait_until(
            lambda: all(
                len(source_offsets_on_target(dr, remote, p, wanted[p])) == wanted[p]
                for p in range(2)
            ),
            90,
            "the copy",
        )
    # A record written on the target by someone else: no provenance.
    producer = Producer({"bootstrap.servers": dr})
    producer.produce(remote, value=b"local", partition=1)
    assert producer.flush(30) == 0

    parity, faults = compare(spark, plan_verification(flow))
    rows = {r["partition"]: r.asDict() for r in parity.collect()}
    assert {p: rows[p]["source_records"] for p in rows} == {0: wanted[0], 1: wanted[1]}
    assert {p: rows[p]["copied"] for p in rows} == {0: wanted[0], 1: wanted[1]}
    assert all(
        rows[p]["missing"] == rows[p]["duplicated"] == rows[p]["mismatched"] == 0 for p in rows
    )
    assert rows[1]["no_provenance"] == 1
    assert [(f["kind"], f["partition"]) for f in faults.collect()] == [("no_provenance", 1)]
