"""Records verified per second: `replicator verify` (Spark, local mode) against a plain
single-process confluent-kafka reader doing the same comparison, on the same copy.

    .venv/bin/python bench/verify_throughput.py [--records 5000000] [--partitions 8]

A backlog is preloaded on a fresh source cluster and replicated by our engine;
then both verifiers read every source record and every copy, fingerprint them
(SHA-256 over key, value, timestamp and own headers) and compare per source
offset. "Records verified" counts the source records and their copies, so a
5 M-record flow is 10 M records read. The Spark figure is end to end, as an
operator waits for it: plan, spark-submit (JVM start included), the suites and
Data Docs. Writes bench/results/verify_throughput-<UTC>.json.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, TopicPartition
from harness import (
    BROKER_HEAP,
    Machine,
    bench_stack,
    markdown_table,
    replicated_backlog,
    write_report,
)

from replicator.engine.headers import OURS, replica_source_offset
from replicator.localstack import ClusterSpec
from replicator.statestore import StateStore
from replicator.verification.plan import PartitionWindow, plan_verification
from replicator.verification.run import verify

SOURCE = ClusterSpec("src", 37092)
TARGET = ClusterSpec("dst", 47092)
DATA_DIR = Path(".data/bench-verify")
TOPIC = "verify.bench"
VALUE_BYTES = 100


def single_reader(windows: list[PartitionWindow], source: str, target: str, alias: str) -> int:
    """The comparison in one process: every source record's fingerprint by offset,
    then every copy checked against it. Returns the faults found (0 expected)."""
    faults = 0
    for window in windows:
        expected = {
            message.offset(): _fingerprint(message)
            for message in _read(
                source, window.topic, window.partition, window.source_start, window.source_end
            )
        }
        seen: set[int] = set()
        for message in _read(
            target, window.remote_topic, window.partition, window.target_start, window.target_end
        ):
            offset = replica_source_offset(message.headers(), alias.encode())
            if offset is None or offset not in expected:
                continue
            faults += offset in seen or expected[offset] != _fingerprint(message)
            seen.add(offset)
        faults += len(expected) - len(seen)
    return faults


def _fingerprint(message: object) -> bytes:
    digest = hashlib.sha256()
    digest.update(message.key() or b"-")  # type: ignore[attr-defined]
    digest.update(message.value() or b"-")  # type: ignore[attr-defined]
    digest.update(str(message.timestamp()[1]).encode())  # type: ignore[attr-defined]
    for name, value in message.headers() or []:  # type: ignore[attr-defined]
        if name not in OURS:
            digest.update(name.encode())
            digest.update(value or b"-")
    return digest.digest()


def _read(bootstrap: str, topic: str, partition: int, start: int, end: int):  # noqa: ANN202
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "verify-bench",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition(topic, partition, start)])
    try:
        while True:
            # Wait for the first record only: consume(n, timeout) waits for all n.
            batch = consumer.consume(1, 30)
            if not batch:
                raise RuntimeError(f"{topic}[{partition}]: nothing to read for 30 s")
            for message in batch + consumer.consume(9_999, 0):
                if message.error():
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        return
                    raise RuntimeError(message.error().str())
                if message.offset() >= end:
                    return
                yield message
    finally:
        consumer.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)
    started = datetime.now(UTC)
    machine = Machine.describe()
    with bench_stack(SOURCE, TARGET, DATA_DIR) as stack:
        flow = replicated_backlog(stack, TOPIC, args.records, VALUE_BYTES, args.partitions)
        read = 2 * args.records
        with tempfile.TemporaryDirectory() as scratch:
            store = StateStore(f"sqlite:///{scratch}/state.db")
            print(f"replicator verify (Spark {args.master})")
            began = time.monotonic()
            result = verify(flow, store, master=args.master, results=Path(scratch))
            spark_s = time.monotonic() - began
            phases = result.summary["seconds"]
            print(f"  spark-submit {phases['spark']} s, suites and Data Docs {phases['suites']} s")
            if not result.success:
                raise RuntimeError(f"verification failed on a correct copy: {result.summary}")
        print("single-process reader")
        windows = plan_verification(flow).windows
        began = time.monotonic()
        faults = single_reader(windows, SOURCE.bootstrap, TARGET.bootstrap, SOURCE.name)
        single_s = time.monotonic() - began
        if faults:
            raise RuntimeError(f"the single reader found {faults} faults on a correct copy")
    figures = {
        "records": args.records,
        "records_read": read,
        "spark_seconds": round(spark_s, 1),
        "spark_submit_seconds": phases["spark"],
        "suites_seconds": phases["suites"],
        "spark_records_per_s": round(read / spark_s),
        "single_reader_seconds": round(single_s, 1),
        "single_reader_records_per_s": round(read / single_s),
        "spark_over_single": round(single_s / spark_s, 2),
    }
    print()
    print(
        markdown_table(
            ["verifier", "seconds", "records verified/s"],
            [
                [
                    f"replicator verify (Spark {args.master}, end to end)",
                    f"{spark_s:.1f}",
                    f"{read / spark_s:,.0f}",
                ],
                [
                    "single-process confluent-kafka reader",
                    f"{single_s:.1f}",
                    f"{read / single_s:,.0f}",
                ],
            ],
        )
    )
    path = write_report(
        "verify_throughput",
        started,
        machine,
        {
            "clusters": "one KRaft broker each, loopback, heap " + BROKER_HEAP,
            "partitions": args.partitions,
            "value_bytes": VALUE_BYTES,
            "master": args.master,
        },
        figures,
    )
    print(f"results written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
