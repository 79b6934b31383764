"""Replication throughput of the engine between two real local Kafka clusters.

Starts its own two single-node clusters (`src` on 17092, `dst` on 27092, so the
`make run` stack on 19092/29092 and the test stack on 18092/28092 can stay up),
and for each value size and run:

1. creates a fresh source topic and preloads it as fast as Python can produce, so
   that the replicator is measured on a backlog, never waiting for a producer;
2. starts `ReplicationTask` in a separate (spawned) process, so its CPU time and
   memory are its own and not the benchmark's;
3. polls the remote topic's high watermarks until they add up to the source's
   record count, and reads the replicator's CPU time and peak RSS from /proc
   before stopping it (SIGTERM, as an operator would).

Run: `.venv/bin/python bench/replication_throughput.py [--records N] [--sizes 100,1024]
[--runs 3] [--partitions 12]`. Figures are printed per size (every run and the
median) and written to `bench/results/replication_throughput-<UTC timestamp>.json`.
See bench/README.md for how to read them. The helpers it shares with
`compare_mm2.py` are in `harness.py`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from harness import (
    BROKER_HEAP,
    KEY_BYTES,
    Figures,
    Machine,
    OurReplicator,
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

from replicator_lab import ClusterSpec, LocalStack

SOURCE = ClusterSpec("src", 17092)
TARGET = ClusterSpec("dst", 27092)
DATA_DIR = Path(".data/bench-stack")


@dataclass(frozen=True)
class Run:
    """One replication of a freshly preloaded topic."""

    run: int
    source_topic: str
    preload_s: float
    figures: Figures
    #: Exit code of the replicator after SIGTERM; anything but 0 is a failed clean stop.
    exit_code: int | None
    #: 1-minute load average right after the run: above nproc, something else competed.
    loadavg_1m: float


@dataclass(frozen=True)
class SizeResult:
    """Every run of one value size, and their median."""

    value_bytes: int
    records: int
    partitions: int
    runs: list[Run]
    median: Figures


def bench_size(
    stack: LocalStack, value_bytes: int, *, records: int, runs: int, partitions: int, timeout: float
) -> SizeResult:
    done = []
    for run in range(1, runs + 1):
        topic = f"bench-{value_bytes}b-run{run}"
        create_topics(SOURCE.bootstrap, [topic], partitions)
        print(f"{value_bytes} B run {run}/{runs}: preloading {records:,} records into {topic}")
        preload_s = preload(SOURCE.bootstrap, topic, records, value_bytes, partitions)
        print(
            f"  preloaded in {preload_s:.1f} s ({records / preload_s:,.0f} records/s); replicating"
        )
        remote = remote_topic(SOURCE.name, topic)
        replicator = OurReplicator(flow_config(SOURCE, TARGET, [topic]))
        with replicator:
            figures = measure_backlog(
                replicator,
                TargetWatermarks(TARGET.bootstrap, remote, partitions),
                records=records,
                record_bytes=KEY_BYTES + value_bytes,
                timeout=timeout,
                brokers=broker_pids(stack),
            )
        print(
            f"  replicated in {figures.wall_s:.1f} s: {figures.records_per_s:,.0f} records/s, "
            f"{figures.cpu_s:.1f} CPU s"
        )
        exit_code = replicator.exit_codes[0]
        if exit_code != 0:
            print(f"  WARNING: the replicator exited with code {exit_code} after SIGTERM")
        done.append(Run(run, topic, preload_s, figures, exit_code, os.getloadavg()[0]))
        delete_topics(SOURCE.bootstrap, [topic])
        delete_topics(TARGET.bootstrap, [remote])
    return SizeResult(
        value_bytes, records, partitions, done, Figures.median([r.figures for r in done])
    )


#: Printed columns: Figures field, header, format.
COLUMNS: tuple[tuple[str, str, Callable[[float], str]], ...] = (
    ("wall_s", "wall s", "{:.1f}".format),
    ("records_per_s", "rec/s", "{:,.0f}".format),
    ("mb_per_s", "MB/s", "{:.1f}".format),
    ("first_record_s", "1st rec s", "{:.1f}".format),
    ("steady_records_per_s", "steady rec/s", "{:,.0f}".format),
    ("steady_mb_per_s", "steady MB/s", "{:.1f}".format),
    ("cpu_s", "CPU s", "{:.1f}".format),
    ("cpu_s_per_million", "CPU s/M rec", "{:.1f}".format),
    ("cores", "cores", "{:.2f}".format),
    ("peak_rss_mib", "RSS MiB", "{:.0f}".format),
    ("broker_cpu_s", "broker CPU s", "{:.1f}".format),
)


def table(result: SizeResult) -> str:
    """Every run and the median as a Markdown table (pastes into an issue note); the
    last column, the load average after each run, shows which runs had company."""
    rows = [(f"run {r.run}", r.figures, f"{r.loadavg_1m:.1f}") for r in result.runs]
    rows.append(("median", result.median, ""))
    header = ["", *(title for _, title, _ in COLUMNS), "load 1m"]
    body = [
        [label, *(fmt(getattr(f, name)) for name, _, fmt in COLUMNS), load]
        for label, f, load in rows
    ]
    title = (
        f"{result.value_bytes} B values, {KEY_BYTES} B keys, {result.records:,} records, "
        f"{result.partitions} partitions"
    )
    return f"{title}\n\n{markdown_table(header, body)}"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--records",
        type=int,
        help="records per run for every size (default: 3,000,000 for 100 B values, "
        "2,000,000 for 1024 B; in general min(3 M, 2.048 GB / value size))",
    )
    parser.add_argument(
        "--sizes",
        type=lambda text: [int(size) for size in text.split(",")],
        default=[100, 1024],
        help="value sizes in bytes, comma-separated (default: 100,1024)",
    )
    parser.add_argument("--runs", type=int, default=3, help="runs per size (default: 3)")
    parser.add_argument(
        "--partitions", type=int, default=12, help="partitions of each topic (default: 12)"
    )
    parser.add_argument(
        "--timeout", type=float, default=900.0, help="give up on a run after S seconds (900)"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = datetime.now(UTC)
    machine = Machine.describe()
    with bench_stack(SOURCE, TARGET, DATA_DIR) as stack:
        results = [
            bench_size(
                stack,
                size,
                records=args.records or default_records(size),
                runs=args.runs,
                partitions=args.partitions,
                timeout=args.timeout,
            )
            for size in args.sizes
        ]
    print()
    for result in results:
        print(table(result))
        print()
    path = write_report(
        "replication_throughput",
        started,
        machine,
        {"clusters": "one KRaft broker each, loopback, heap " + BROKER_HEAP},
        [asdict(result) for result in results],
    )
    print(f"results written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
