"""The artifact sets `make setup` resolved hold what later parts start from them."""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from replicator.verification import driver_jvm
from replicator.verification.jars import jvm_dir
from replicator.verification.run import run_spark
from replicator.verification.submit import SparkSubmit
from replicator_lab import LocalStack
from replicator_lab.jvm import artifact_classpath, class_archive

from helpers.kafka import create_topic, make_records, produce_records, unique_topic

#: Entry points the project runs from the `kafka` set: broker, storage tool,
#: perf tools (benchmarks), MirrorMaker 2 and its client utilities (compatibility tests).
KAFKA_MAIN_CLASSES = [
    "kafka/Kafka.class",
    "kafka/tools/StorageTool.class",
    "org/apache/kafka/tools/ProducerPerformance.class",
    "org/apache/kafka/tools/ConsumerPerformance.class",
    "org/apache/kafka/connect/mirror/MirrorMaker.class",
    "org/apache/kafka/connect/mirror/RemoteClusterUtils.class",
]


def _classes_in(artifact_set: str) -> set[str]:
    names: set[str] = set()
    for jar in artifact_classpath(artifact_set).split(":"):
        with zipfile.ZipFile(jar) as archive:
            names.update(archive.namelist())
    return names


def test_kafka_set_has_broker_tools_and_mirrormaker() -> None:
    classes = _classes_in("kafka")
    missing = [c for c in KAFKA_MAIN_CLASSES if c not in classes]
    assert not missing, f"not in {jvm_dir() / 'kafka'}: {missing}"


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = (
        SparkSession.builder.master("local[2]")
        .appName("jvm-artifacts-test")
        .config("spark.jars", artifact_classpath("spark-kafka").replace(":", ","))
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    yield session
    session.stop()


@pytest.mark.integration
def test_spark_kafka_connector_reads_headers_and_offsets(spark: SparkSession, primary: str) -> None:
    topic = unique_topic("spark")
    create_topic(primary, topic, partitions=3)
    produce_records(primary, topic, make_records(300))

    frame = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", primary)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .option("kafka.isolation.level", "read_committed")
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    rows = frame.groupBy("partition").count().collect()

    assert sum(row["count"] for row in rows) == 300
    assert {row["partition"] for row in rows} == {0, 1, 2}
    first = frame.where("offset = 0").select("headers").first()
    assert first["headers"][0]["key"] == "seq"


def test_the_brokers_map_the_class_archive_make_setup_wrote(kafka_stack: LocalStack) -> None:
    """`make setup` writes the Kafka class-data archive; the session's brokers map it
    (a broker that ignored it would start in about 40% more CPU, silently)."""
    archive = class_archive("kafka")
    assert archive.is_file(), f"no {archive}: run `make setup`"
    pids = [pid for broker in kafka_stack.brokers.values() for pid in broker.pids()]
    assert pids, "the session's brokers are not running"
    for pid in pids:
        maps = Path(f"/proc/{pid}/maps").read_text()
        assert str(archive) in maps, f"broker {pid} does not map {archive}"


#: A job that says whether its driver's JVM (its parent: spark-submit runs a Python
#: application as the JVM's child) maps `archive`.
_MAPS_JOB = """
import os, sys
from pathlib import Path
from pyspark.sql import SparkSession
out = Path(sys.argv[sys.argv.index("--out") + 1])
spark = SparkSession.builder.getOrCreate()
spark.range(10).count()
maps = Path(f"/proc/{os.getppid()}/maps").read_text()
(out / "mapped").write_text(str(sys.argv[sys.argv.index("--archive") + 1] in maps))
spark.stop()
"""


def test_a_local_verification_driver_maps_the_class_archive_make_setup_wrote(
    tmp_path: Path,
) -> None:
    """`make setup` writes the verification driver's class-data archive and a local job
    maps it (a job that ignored it would start about 3.5 s slower, silently)."""
    archive = driver_jvm.class_archive()
    assert archive.is_file(), f"no {archive}: run `make setup`"
    job = tmp_path / "maps.py"
    job.write_text(_MAPS_JOB, encoding="utf-8")
    submit = SparkSubmit(
        job,
        ["--out", str(tmp_path), "--archive", str(archive)],
        conf={"spark.ui.enabled": "false", **driver_jvm.driver_conf("local[2]", 1)},
    )
    run_spark(submit)
    assert (tmp_path / "mapped").read_text() == "True", (tmp_path / "spark.log").read_text()
