"""What one Python thread can copy with confluent-kafka at all, next to our engine.

At tasks 1 and 100 B our engine's one Python thread is the limit (docs/benchmarks.md).
This says how much of that thread is the engine and how much is the client library:
a bare forwarder, in its own spawned process, consumes each batch and produces every
record to the same partition of the remote topic, with the clients configured as the
engine's (idempotent lz4 producer, `linger.ms=20`, fetch backoff 10 ms) and nothing
else: no run tracking, size limits, loop prevention, delivery tracking or offset
syncs. It runs twice, with the two provenance headers every replica carries
(`replicator/engine/headers.py`) and without headers, alternating with our engine on
the same brokers, so the three rates compare within one run.

Run: `.venv/bin/python bench/forwarder_floor.py [--records N] [--sizes 100] [--runs 3]`.
Prints every run (steady records/s, CPU per million records, the busiest thread and
its wait for a CPU), the medians and ours as a share of each forwarder, and writes
`bench/results/forwarder_floor-<UTC timestamp>.json`.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from confluent_kafka import Consumer, Producer
from harness import (
    KEY_BYTES,
    Figures,
    Machine,
    OurReplicator,
    Replicator,
    SpawnedReplicator,
    TargetWatermarks,
    bench_stack,
    broker_pids,
    create_topics,
    default_records,
    delete_topics,
    flow_config,
    markdown_table,
    measure_backlog,
    preload,
    remote_topic,
    write_report,
)
from thread_cpu import ThreadCpu

from replicator.engine.collector import pace_for_replication
from replicator.engine.headers import OFFSET_HEADER, SOURCE_HEADER, encode_offset
from replicator_lab import ClusterSpec, LocalStack

SOURCE = ClusterSpec("src", 38092)
TARGET = ClusterSpec("dst", 48092)
DATA_DIR = Path(".data/bench-floor")
PARTITIONS = 12
SYSTEMS = ("ours", "forwarder, two headers", "forwarder, no headers")


def forward(topic: str, with_headers: bool) -> None:
    """Entry of a spawned forwarder: copy `topic` to its remote topic until SIGTERM."""
    stopped: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _frame: stopped.append(signum))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    pace_for_replication()
    consumer = Consumer(
        {
            "bootstrap.servers": SOURCE.bootstrap,
            "group.id": f"forwarder-{topic}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.queue.backoff.ms": 10,
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": TARGET.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 20,
            "compression.type": "lz4",
            "batch.size": 1_000_000,
        }
    )
    consumer.subscribe([topic])
    remote, produce = remote_topic(SOURCE.name, topic), producer.produce
    source = (SOURCE_HEADER, SOURCE.name.encode())
    while not stopped:
        for message in consumer.consume(10_000, 0.2):
            if message.error() is not None:
                raise RuntimeError(f"consuming {topic}: {message.error()}")
            value, key, partition = message.value(), message.key(), message.partition()
            timestamp = message.timestamp()[1]
            if with_headers:
                headers = [source, (OFFSET_HEADER, encode_offset(message.offset()))]
                produce(remote, value, key, partition, None, None, timestamp, headers)
            else:
                produce(remote, value, key, partition, None, None, timestamp)
        producer.poll(0)
    producer.flush(30)
    consumer.close()


@dataclass(frozen=True)
class Run:
    system: str
    run: int
    figures: Figures
    busiest_thread: str
    busiest_cores: float
    busiest_waiting: float  # cores' worth of time it was ready to run but had no CPU
    loadavg_1m: float


def make(system: str, topic: str) -> Replicator:
    if system == "ours":
        return OurReplicator(flow_config(SOURCE, TARGET, [topic]))
    return SpawnedReplicator("forwarder", forward, (topic, system == "forwarder, two headers"))


def one_run(stack: LocalStack, system: str, run: int, *, value_bytes: int, records: int) -> Run:
    topic = f"floor-{value_bytes}b-{SYSTEMS.index(system)}-{run}"
    remote = remote_topic(SOURCE.name, topic)
    create_topics(SOURCE.bootstrap, [topic], PARTITIONS)
    create_topics(TARGET.bootstrap, [remote], PARTITIONS)  # ours would; a forwarder does not
    preload(SOURCE.bootstrap, topic, records, value_bytes, PARTITIONS)
    threads = ThreadCpu()
    with make(system, topic) as replicator:
        figures = measure_backlog(
            replicator,
            TargetWatermarks(TARGET.bootstrap, remote, PARTITIONS),
            records=records,
            record_bytes=KEY_BYTES + value_bytes,
            timeout=900,
            brokers=broker_pids(stack),
            threads=threads,
        )
    busiest = threads.busiest[0]
    print(
        f"{value_bytes} B, {system}, run {run}: steady {figures.steady_records_per_s:,.0f} "
        f"records/s, {figures.cpu_s_per_million:.2f} CPU s per million; busiest thread "
        f"{busiest.name} {busiest.cores:.2f} cores (+{busiest.waiting:.2f} waiting for a CPU)"
    )
    delete_topics(SOURCE.bootstrap, [topic])
    delete_topics(TARGET.bootstrap, [remote])
    return Run(
        system, run, figures, busiest.name, busiest.cores, busiest.waiting, os.getloadavg()[0]
    )


def summary(value_bytes: int, runs: Sequence[Run]) -> str:
    """Medians per system, and ours as a share of each."""

    def median(system: str, field: str) -> float:
        return statistics.median(getattr(r.figures, field) for r in runs if r.system == system)

    ours = median("ours", "steady_records_per_s")
    rows = [
        [
            system,
            f"{median(system, 'steady_records_per_s'):,.0f}",
            f"{median(system, 'cpu_s_per_million'):.2f}",
            f"{ours / median(system, 'steady_records_per_s'):.2f}",
        ]
        for system in SYSTEMS
    ]
    header = ["", "steady rec/s (median)", "CPU s per M", "ours / this"]
    title = f"{value_bytes} B values, {len(runs) // len(SYSTEMS)} runs"
    return f"{title}\n\n{markdown_table(header, rows)}"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, help="records per run (default: as compare_mm2)")
    parser.add_argument(
        "--sizes",
        type=lambda text: [int(size) for size in text.split(",")],
        default=[100],
        help="value sizes in bytes, comma-separated (default: 100)",
    )
    parser.add_argument("--runs", type=int, default=3, help="runs per system and size (3)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = datetime.now(UTC)
    machine = Machine.describe()
    results: dict[int, list[Run]] = {}
    with bench_stack(SOURCE, TARGET, DATA_DIR) as stack:
        for size in args.sizes:
            records = args.records or default_records(size)
            results[size] = [
                one_run(stack, system, run, value_bytes=size, records=records)
                for run in range(1, args.runs + 1)
                for system in SYSTEMS
            ]
    print()
    for size, runs in results.items():
        print(summary(size, runs))
        print()
    path = write_report(
        "forwarder_floor",
        started,
        machine,
        {"partitions": PARTITIONS, "runs": args.runs, "key_bytes": KEY_BYTES},
        {str(size): [asdict(run) for run in runs] for size, runs in results.items()},
    )
    print(f"written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
