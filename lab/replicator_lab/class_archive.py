"""The class-data archives (AppCDS) of the Kafka JVMs and of the verification job's
Spark driver, made once by `make setup`:

    python -m replicator_lab.class_archive [kafka|spark]

`kafka` (the default) starts a throwaway one-node cluster with
`-XX:ArchiveClassesAtExit`, waits until it serves, and stops it; the JVM writes the
classes it loaded to the archive as it exits. Every later broker and storage tool of
the local stack maps them from it (`jvm.archive_options`). `spark` runs the
verification job once (`replicator_spark.verify`, through the same `spark-submit`
command as every local run) on a small plan over a throwaway cluster, with
`-XX:ArchiveClassesAtExit`; every later local job's driver maps its classes
(`replicator.verification.driver_jvm`). Safe to run again: an existing archive is
kept; delete it (or `make clean`) after the jars or the JDK change. An archive is
written under a temporary name and renamed, so no JVM ever maps half of one.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from replicator.verification import driver_jvm
from replicator.verification.plan import PartitionWindow, VerificationPlan
from replicator.verification.run import VerificationRun, run_spark, spark_job
from replicator_lab.broker import ClusterSpec, port_in_use
from replicator_lab.errors import StackError
from replicator_lab.jvm import JVM_OPTIONS_ENV, class_archive
from replicator_lab.stack import LocalStack

#: The records of the Spark archive's job: more than a driver-read range
#: (`replicator_spark.kafka_ranges.SMALL_RANGE_OFFSETS`), so the connector's classes load.
_SPARK_RECORDS = 20_000
_TOPIC = "class-archive"


def _free_port_pair() -> int:
    """A port whose next one is free too (the controller listens on port + 1)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port < 65534 and not port_in_use(port + 1):
            return port
    raise StackError(
        "no two consecutive free ports on 127.0.0.1 after 50 tries; "
        "free some and run `make setup` again"
    )


def build(timeout: float = 180.0) -> Path:
    """The Kafka archive, made if it is not there yet; its path."""
    archive = class_archive("kafka")
    if archive.is_file():
        return archive
    partial = archive.with_name(f"{archive.name}.{os.getpid()}.partial")
    saved = os.environ.get(JVM_OPTIONS_ENV)
    os.environ[JVM_OPTIONS_ENV] = f"{saved or ''} -XX:ArchiveClassesAtExit={partial}".strip()
    try:
        with _throwaway_cluster(timeout):
            pass
    finally:
        if saved is None:
            os.environ.pop(JVM_OPTIONS_ENV, None)
        else:
            os.environ[JVM_OPTIONS_ENV] = saved
    if not partial.is_file():
        raise StackError(
            f"the broker stopped without writing its class archive {partial}: its JVM "
            "needs -XX:ArchiveClassesAtExit (JDK 13 or later); brokers start without it"
        )
    partial.replace(archive)
    return archive


def build_spark(timeout: float = 180.0) -> Path:
    """The verification driver's archive, made if it is not there yet; its path."""
    archive = driver_jvm.class_archive()
    if archive.is_file():
        return archive
    partial = archive.with_name(f"{archive.name}.{os.getpid()}.partial")
    with _throwaway_cluster(timeout) as bootstrap, tempfile.TemporaryDirectory() as scratch:
        _fill(bootstrap)
        run = VerificationRun("class-archive", Path(scratch), "archive->archive", 0)
        window = PartitionWindow(_TOPIC, 0, _TOPIC, 0, _SPARK_RECORDS, 0, _SPARK_RECORDS, 0)
        VerificationPlan("archive->archive", "archive", bootstrap, bootstrap, [window]).write(
            run.plan
        )
        job = spark_job(run)
        options = job.conf.get(driver_jvm.DEFAULT_JAVA_OPTIONS, "")
        dumping = f"{options} -XX:ArchiveClassesAtExit={partial}".strip()
        try:
            run_spark(
                dataclasses.replace(
                    job, conf={**job.conf, driver_jvm.DEFAULT_JAVA_OPTIONS: dumping}
                )
            )
        except BaseException:
            partial.unlink(missing_ok=True)  # a JVM that failed still writes one
            raise
    if not partial.is_file():
        raise StackError(
            f"the verification job ended without writing its class archive {partial}; "
            "local jobs start without it"
        )
    partial.replace(archive)
    return archive


@contextmanager
def _throwaway_cluster(timeout: float) -> Iterator[str]:
    """A one-node cluster of its own for the block; its bootstrap address."""
    with tempfile.TemporaryDirectory(prefix="class-archive-") as data_dir:
        spec = ClusterSpec("archive", _free_port_pair())
        stack = LocalStack([spec], Path(data_dir))
        try:
            stack.up(timeout=timeout)
            yield spec.bootstrap
        finally:
            stack.down(wipe=True)


def _fill(bootstrap: str) -> None:
    """`_TOPIC`, one partition of `_SPARK_RECORDS` records with a header each."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(_TOPIC, 1, 1)])[_TOPIC].result(timeout=60)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for at in range(_SPARK_RECORDS):
        producer.produce(_TOPIC, key=b"%d" % at, value=b"v" * 100, headers=[("h", b"1")])
        producer.poll(0)
    if producer.flush(60):
        raise StackError(f"records for the class archive's job were not written to {bootstrap}")


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "kafka"
    builders = {"kafka": build, "spark": build_spark}
    if which not in builders:
        sys.exit(f"usage: python -m replicator_lab.class_archive [{'|'.join(builders)}]")
    sys.stdout.write(f"class archive: {builders[which]()}\n")
