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
See bench/README.md for how to read them.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import multiprocessing
import os
import platform
import signal
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime
from pathlib import Path

import confluent_kafka
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from replicator.config import FlowConfig, load_config
from replicator.localstack import ClusterSpec, LocalStack
from replicator.task import ReplicationTask

SOURCE = ClusterSpec("src", 17092)
TARGET = ClusterSpec("dst", 27092)
DATA_DIR = Path(".data/bench-stack")
RESULTS_DIR = Path(__file__).resolve().parent / "results"
BROKER_HEAP = "1g"
#: Keys are b"k000000042": ten bytes, like a short id.
KEY_FORMAT = b"k%09d"
KEY_BYTES = 10
#: Distinct random values cycled through the preload. Random bytes do not compress,
#: and with 1024 of them the same value recurs only ~100 KB later, beyond lz4's
#: 64 KB window, so the target producer's lz4 cannot cheat on repeated values.
VALUE_POOL = 1024
POLL_INTERVAL_S = 0.1
STOP_TIMEOUT_S = 90.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Figures:
    """What one run measured; the median of several runs has the same shape."""

    wall_s: float  # replicator process start -> last record on the target
    records_per_s: float
    mb_per_s: float  # key + value bytes, MB = 10**6 bytes
    first_record_s: float  # process start -> first record on the target (startup, group join)
    steady_records_per_s: float  # first record on the target -> last
    steady_mb_per_s: float
    cpu_s: float  # replicator process, user + system, all threads, until the last record
    cpu_s_per_million: float
    cores: float  # cpu_s / wall_s: how much of the machine the replicator used
    peak_rss_mib: float  # VmHWM of the replicator process
    broker_cpu_s: float  # both brokers' JVMs over the same wall time

    @classmethod
    def median(cls, runs: Sequence[Figures]) -> Figures:
        return cls(
            **{f.name: statistics.median(getattr(r, f.name) for r in runs) for f in fields(cls)}
        )


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


@dataclass(frozen=True)
class Machine:
    """Enough about the host to tell whether two result files are comparable."""

    nproc: int
    cpu_model: str
    memory_gib: float
    kernel: str
    python: str
    confluent_kafka: str
    librdkafka: str
    loadavg_at_start: tuple[float, float, float]

    @classmethod
    def describe(cls) -> Machine:
        cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8")
        model = next(
            (
                line.split(":", 1)[1].strip()
                for line in cpuinfo.splitlines()
                if "model name" in line
            ),
            platform.processor() or "unknown",
        )
        meminfo = Path("/proc/meminfo").read_text(encoding="utf-8").split()
        memory_kib = int(meminfo[meminfo.index("MemTotal:") + 1])
        return cls(
            nproc=len(os.sched_getaffinity(0)),
            cpu_model=model,
            memory_gib=round(memory_kib / 2**20, 1),
            kernel=platform.release(),
            python=platform.python_version(),
            confluent_kafka=confluent_kafka.__version__,
            librdkafka=confluent_kafka.libversion()[0],
            loadavg_at_start=os.getloadavg(),
        )


# -- the replicator process ----------------------------------------------------------------


def replicator_main(flow: FlowConfig) -> None:
    """Entry of the spawned replicator process: run the task until SIGTERM.

    SIGINT is ignored so that a Ctrl-C in the terminal reaches only the parent,
    which then stops this process the same way as after a run.
    """
    stop_event = threading.Event()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda _signum, _frame: stop_event.set())
    logging.basicConfig(level=logging.WARNING, format="replicator: %(levelname)s %(message)s")
    ReplicationTask(flow, stop_event=stop_event).run()


def flow_config(topic: str) -> FlowConfig:
    """The `src->dst` flow of exactly `topic`, as an MM2 user would write it.

    Everything else is left at MM2's defaults (heartbeats on, topic config
    sync on), so the benchmark measures the engine as it is deployed; only
    replication factors are 1 because each cluster has one broker.
    """
    properties = {
        "clusters": "src, dst",
        "src.bootstrap.servers": SOURCE.bootstrap,
        "dst.bootstrap.servers": TARGET.bootstrap,
        "src->dst.enabled": "true",
        "src->dst.topics": topic,
        "replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "status.topic.replication.factor": "1",
    }
    return load_config(properties).flow("src->dst")


def remote_topic(topic: str) -> str:
    """Where the flow writes `topic` on the target (MM2's DefaultReplicationPolicy)."""
    return f"{SOURCE.name}.{topic}"


# -- measuring -------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User + system time of every thread of `pid` (librdkafka's included)."""
    stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    after_name = stat.rsplit(")", 1)[1].split()  # the name in (...) may hold spaces
    utime, stime = int(after_name[11]), int(after_name[12])
    return (utime + stime) / CLOCK_TICKS


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM in /proc/{pid}/status")


class TargetWatermarks:
    """Sum of the remote topic's high watermarks: with an idempotent producer and
    no transactions, exactly the number of records the replicator wrote."""

    def __init__(self, topic: str, partitions: int) -> None:
        self._admin = AdminClient({"bootstrap.servers": TARGET.bootstrap})
        self._request = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}

    def total(self) -> int:
        futures = self._admin.list_offsets(self._request, request_timeout=5)
        try:
            return sum(future.result().offset for future in futures.values())
        except KafkaException:
            return 0  # the replicator has not created the remote topic yet


def broker_pids(stack: LocalStack) -> list[int]:
    return [pid for broker in stack.brokers.values() for pid in broker.pids()]


# -- one run ---------------------------------------------------------------------------------


def create_topic(admin: AdminClient, topic: str, partitions: int) -> None:
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)


def preload(topic: str, records: int, value_bytes: int, partitions: int) -> float:
    """Produce `records` records round-robin over the partitions; return seconds taken.

    No delivery callback and no compression: the point is to have the backlog
    in place quickly, and flush() still fails loudly on any undelivered record.
    """
    producer = Producer(
        {
            "bootstrap.servers": SOURCE.bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "compression.type": "none",
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
        }
    )
    values = [os.urandom(value_bytes) for _ in range(VALUE_POOL)]
    produce = producer.produce
    started = time.monotonic()
    for i in range(records):
        while True:
            try:
                produce(topic, values[i % VALUE_POOL], KEY_FORMAT % i, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    remaining = producer.flush(120)
    if remaining:
        raise RuntimeError(f"preload of {topic}: {remaining} records not delivered in 120 s")
    return time.monotonic() - started


def replicate(
    stack: LocalStack,
    topic: str,
    *,
    records: int,
    record_bytes: int,
    partitions: int,
    timeout: float,
) -> tuple[Figures, int | None]:
    """Run the replicator on `topic` until the target holds every record; measure it."""
    flow = flow_config(topic)
    watermarks = TargetWatermarks(remote_topic(topic), partitions)
    brokers = broker_pids(stack)
    brokers_cpu_before = sum(cpu_seconds(pid) for pid in brokers)
    process = multiprocessing.get_context("spawn").Process(
        target=replicator_main, args=(flow,), name="replicator"
    )
    started = time.monotonic()
    process.start()
    try:
        first_at, first_count = None, 0
        while True:
            if not process.is_alive():
                raise RuntimeError(
                    f"the replicator exited with code {process.exitcode} before replicating "
                    f"{topic}; its traceback is above"
                )
            count = watermarks.total()
            now = time.monotonic()
            if count and first_at is None:
                first_at, first_count = now, count
            if count >= records:
                break
            if now - started > timeout:
                raise RuntimeError(f"{topic}: only {count} of {records} records after {timeout} s")
            time.sleep(POLL_INTERVAL_S)
        cpu = cpu_seconds(process.pid)
        rss = peak_rss_mib(process.pid)
        brokers_cpu = sum(cpu_seconds(pid) for pid in brokers) - brokers_cpu_before
    finally:
        exit_code = stop(process)
    if count > records:
        print(f"  WARNING: the target holds {count} records, the source {records}: duplicates")
    if first_count >= records:
        raise RuntimeError(
            f"{topic}: all {records} records arrived within one {POLL_INTERVAL_S} s poll; "
            "use more --records to measure a steady state"
        )
    wall = now - started
    steady = now - first_at
    return (
        Figures(
            wall_s=wall,
            records_per_s=records / wall,
            mb_per_s=records * record_bytes / wall / 1e6,
            first_record_s=first_at - started,
            steady_records_per_s=(records - first_count) / steady,
            steady_mb_per_s=(records - first_count) * record_bytes / steady / 1e6,
            cpu_s=cpu,
            cpu_s_per_million=cpu / records * 1e6,
            cores=cpu / wall,
            peak_rss_mib=rss,
            broker_cpu_s=brokers_cpu,
        ),
        exit_code,
    )


def stop(process: multiprocessing.process.BaseProcess) -> int | None:
    """SIGTERM (the task finishes in-flight work and exits), SIGKILL if it hangs."""
    if process.is_alive():
        process.terminate()
        process.join(STOP_TIMEOUT_S)
        if process.is_alive():
            print(f"  WARNING: the replicator ignored SIGTERM for {STOP_TIMEOUT_S} s; killing it")
            process.kill()
            process.join()
    return process.exitcode


def delete_topics(admin: AdminClient, topics: list[str]) -> None:
    """Free the disk between runs (a default run writes several GB per cluster)."""
    for future in admin.delete_topics(topics, operation_timeout=30).values():
        future.result()


# -- the benchmark ----------------------------------------------------------------------------


def bench_size(
    stack: LocalStack, value_bytes: int, *, records: int, runs: int, partitions: int, timeout: float
) -> SizeResult:
    source_admin = AdminClient({"bootstrap.servers": SOURCE.bootstrap})
    target_admin = AdminClient({"bootstrap.servers": TARGET.bootstrap})
    done = []
    for run in range(1, runs + 1):
        topic = f"bench-{value_bytes}b-run{run}"
        create_topic(source_admin, topic, partitions)
        print(f"{value_bytes} B run {run}/{runs}: preloading {records:,} records into {topic}")
        preload_s = preload(topic, records, value_bytes, partitions)
        print(
            f"  preloaded in {preload_s:.1f} s ({records / preload_s:,.0f} records/s); replicating"
        )
        figures, exit_code = replicate(
            stack,
            topic,
            records=records,
            record_bytes=KEY_BYTES + value_bytes,
            partitions=partitions,
            timeout=timeout,
        )
        print(
            f"  replicated in {figures.wall_s:.1f} s: {figures.records_per_s:,.0f} records/s, "
            f"{figures.cpu_s:.1f} CPU s"
        )
        if exit_code != 0:
            print(f"  WARNING: the replicator exited with code {exit_code} after SIGTERM")
        done.append(Run(run, topic, preload_s, figures, exit_code, os.getloadavg()[0]))
        delete_topics(source_admin, [topic])
        delete_topics(target_admin, [remote_topic(topic)])
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
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|"
    title = (
        f"{result.value_bytes} B values, {KEY_BYTES} B keys, {result.records:,} records, "
        f"{result.partitions} partitions"
    )
    return "\n".join([title, "", line(header), rule, *(line(row) for row in body)])


def default_records(value_bytes: int) -> int:
    """3 M records or about 2 GB of values, whichever is fewer: a run of 30 s or more
    on 2 cores for the default sizes (the engine did 2 M x 100 B in ~28 s and
    1 M x 1 KB in ~18 s there), without filling the disk for large values."""
    return min(3_000_000, 2_048_000_000 // value_bytes)


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
    stack = LocalStack([SOURCE, TARGET], data_dir=DATA_DIR, heap=BROKER_HEAP)
    stack.down(wipe=True)
    print(f"starting clusters src ({SOURCE.bootstrap}) and dst ({TARGET.bootstrap})")
    stack.up()
    try:
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
    finally:
        # Admin clients whose futures ended in an exception sit in reference cycles;
        # collect them now, or they log "connection refused" as the brokers stop.
        gc.collect()
        stack.down()
    print()
    for result in results:
        print(table(result))
        print()
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"replication_throughput-{started:%Y%m%dT%H%M%SZ}.json"
    report = {
        "benchmark": "replication_throughput",
        "started_utc": started.isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": asdict(machine),
        "setup": {
            "clusters": "one KRaft broker each, loopback, heap " + BROKER_HEAP,
            "key_bytes": KEY_BYTES,
            "values": f"random bytes, {VALUE_POOL} distinct values cycled (incompressible)",
            "mb": "10**6 bytes of key + value",
        },
        "results": [asdict(result) for result in results],
    }
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"results written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
