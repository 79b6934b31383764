"""Our replicator against MirrorMaker 2, on the same brokers, in the same run.

Starts its own two single-node clusters (`src` on 15092, `dst` on 25092) and, for
100 B and 1 KB values, alternates runs of the two systems (ours, MM2, ours, MM2,
...) so that whatever else the machine does falls on both alike. Each run:

1. creates a fresh 12-partition source topic and preloads it from Python (in 1 KB
   runs also an empty "latency" topic), and makes the flow's `topics` exactly these;
2. starts the replicator (ours: `ReplicationTask` in spawned processes; MM2: the
   dedicated-mode `MirrorMaker` JVM with a generated mm2.properties) and polls
   the remote topic's high watermarks every 0.1 s until the backlog is copied,
   then reads the replicator's CPU time and peak RSS from /proc; the ratios are read
   from the backlog's second half (`warm_*`), when MM2's JIT has compiled;
3. in 1 KB runs, with the replicator still running and idle, offers a fixed load
   below saturation to the latency topic and measures, per record, the time it
   became visible on the target minus its CreateTime, and the same on the source:
   their difference is what the replicator adds (`+p50`, `+p99`), without the
   source broker's own stalls;
4. stops the replicator with SIGTERM and deletes every topic on both clusters, so
   the next run starts from the same empty state.

After the runs of both sizes, the Kafka perf tools (ProducerPerformance,
ConsumerPerformance) from the same jars measure what the broker and a Java client
do alone on this machine: the ceiling both replicators work under. They go last, so
that what they leave behind (GBs written and deleted, three JVMs exiting) falls in no
replicator's run.

With `--record-headers N`, every source record (backlog and latency load) carries N
headers of its own, named and sized like an application's (`trace-id` 32 B,
`content-type` 16 B, ...: `HEADER_SHAPES`); both systems copy them, which each run
checks on a replica. Several shapes, comma-separated (`--record-headers 0,forwarded`),
run in the same run, interleaved per size, and their rates are compared.

With `--client-stats`, our clients' librdkafka statistics (where records waited, each
worker's share of the partitions) are printed after each run; their `stats_cb` is a
Python callback, which keeps our flow on the Python loop (`replicator.engine.data_path`),
so the figures are then the Python loop's, not the compiled path's.

Run: `.venv/bin/python bench/compare_mm2.py [--records-100b N] [--records-1k N]
[--runs 3] [--tasks 1] [--group-protocol classic] [--partitions 12]
[--record-headers 0] [--client-stats]`. One table per size is printed, and everything is written to
`bench/results/compare_mm2-<UTC timestamp>.json`. See bench/README.md for the method
and how to read the ratios.
"""

from __future__ import annotations

import argparse
import ctypes
import multiprocessing
import os
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields, replace
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event as EventType
from pathlib import Path
from types import TracebackType

from client_stats import (
    ClientWaits,
    WorkerShare,
    client_waits,
    with_statistics,
    worker_shares,
)
from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_CREATE_TIME,
    Consumer,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from harness import (
    BROKER_HEAP,
    KEY_BYTES,
    KEY_FORMAT,
    STOP_TIMEOUT_S,
    VALUE_POOL,
    Figures,
    GcPauses,
    Machine,
    OurReplicator,
    Replicator,
    TargetWatermarks,
    bench_stack,
    broker_pids,
    cpu_seconds,
    create_topics,
    default_records,
    delete_topics,
    flow_config,
    markdown_table,
    measure_backlog,
    median_fields,
    parse_cpus,
    pin,
    preload,
    random_values,
    remote_topic,
    write_report,
)
from thread_cpu import ThreadCpu, ThreadLoad, run_queue_seconds

from replicator_lab import ClusterSpec, LocalStack
from replicator_lab.mirrormaker import (
    JVM_SIGTERM_EXIT,
    MIRROR_MAKER_MAIN,
    ONE_BROKER,
    MirrorMaker,
    java_command,
    mirror_maker_pids,
)
from replicator_lab.mirrormaker_translation import connect_state_properties

SOURCE = ClusterSpec("src", 15092)
TARGET = ClusterSpec("dst", 25092)
FLOW = f"{SOURCE.name}->{TARGET.name}"
DATA_DIR = Path(".data/bench-mm2")
#: MM2's and the perf tools' configs and logs, one folder per run (kept until the next start).
JVM_DIR = DATA_DIR / "jvm"
#: librdkafka's statistics of our replicator's clients, one folder per run (client_stats.py).
STATS_DIR = DATA_DIR / "client-stats"
MM2_HEAP = "1g"
#: What Kafka's kafka-run-class.sh gives every tool and connect-mirror-maker.sh, so MM2
#: runs as an operator would start it.
JVM_PERFORMANCE_OPTS = (
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)
#: The perf tools' scripts (kafka-*-perf-test.sh) set this heap.
TOOL_HEAP = "512m"
SIZES = (100, 1024)
#: Records per run of each size: enough that MM2's JIT has compiled its hot path before
#: the backlog's second half, whose rate and CPU (`warm_*`) the ratios are read from. A
#: fresh MM2 JVM copies ever faster for its first 20 to 30 s (at 100 B from 230,000 to
#: 350,000 records/s, at 1 KB from 96,000 to 190,000; 2026-11-27), an operator's MM2
#: has long since compiled. 1 KB runs hold about 6.2 GB per cluster at a time.
RECORDS = {100: 15_000_000, 1024: 6_000_000}
#: Our target producer (replicator/engine/target_writer.py): lz4, linger 20 ms, batches up to
#: about the topic's max.message.bytes (1 MB), idempotent (so acks=all) with librdkafka's 5
#: requests in flight. MM2's task producer and ProducerPerformance get the same, in
#: Java's names; Connect's defaults (no compression, linger 0, 16 KB batches, one
#: request in flight) would compare defaults, not engines. Connect sets acks=all.
PRODUCER_SETTINGS = {
    "compression.type": "lz4",
    "linger.ms": "20",
    "batch.size": "1048576",
    "enable.idempotence": "true",
    "max.in.flight.requests.per.connection": "5",
}
#: Ours reads the source with read_committed; MM2 reads read_uncommitted by default.
CONSUMER_SETTINGS = {"isolation.level": "read_committed"}
#: Client ids of MM2's task producer (Connect's, per task) and replication consumer, whose
#: logged configs are checked against the settings above after every MM2 run.
MM2_TASK_PRODUCER = "connector-producer-MirrorSourceConnector-"
MM2_TASK_CONSUMER = "|replication-consumer"
#: ERROR lines MM2 4.x always logs with emit.checkpoints.enabled=false: since KAFKA-16254
#: the MirrorCheckpointConnector's config is rejected as having nothing to do, and MM2
#: goes on without it. Not counted as errors.
EXPECTED_MM2_ERRORS = ("Failed to configure MirrorCheckpointConnector",)
#: Payloads of the ProducerPerformance file: about 8 MB of distinct lines, so a payload
#: rarely recurs within lz4's 64 KB window (the tool picks lines at random).
PAYLOAD_FILE_BYTES = 8_000_000
SYSTEMS = ("ours", "MM2")
LATENCY_WAIT_S = 60.0
#: The discarded latency phase before the first measured one (see `warm_up`).
WARM_UP_S = 10.0
#: The latency phase runs in the runs of this value size (1 KB, as the issue asks):
#: once per run rather than once per size keeps the default run under 25 minutes.
LATENCY_VALUE_BYTES = 1024
#: The headers `--record-headers N` puts on every source record: the first N of these
#: (name, value bytes), as applications set them (W3C trace context, content type,
#: ids); past the list's end they repeat with a numbered name (`trace-id-1`, ...).
HEADER_SHAPES = (
    ("trace-id", 32),
    ("content-type", 16),
    ("correlation-id", 36),
    ("traceparent", 55),
    ("tenant", 8),
    ("event-type", 24),
    ("schema-version", 4),
    ("source-app", 12),
)


# -- results ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class WarmUp:
    """The discarded latency phase: the source probe alone, no replicator running."""

    p50_ms: float
    p99_ms: float
    max_ms: float
    #: When, in seconds from the start of the load, the slowest record was offered.
    worst_at_s: float


@dataclass(frozen=True)
class Latency:
    """Replication latency at a fixed offered load: time a record became visible on the
    target (received by a consumer there) minus its CreateTime, in milliseconds."""

    records: int
    offered_per_s: float  # the rate actually produced
    p50_ms: float
    p99_ms: float
    max_ms: float
    #: The same probe on the source topic: producer linger, broker append, probe
    #: overhead. The part of the target's figures that is not the replicator's.
    source_p50_ms: float
    source_p99_ms: float
    #: When, in seconds from the start of the load, the record slowest on the source
    #: was offered, and its latency there: tells a stall at the start of the phase
    #: (warm-up) from one in its middle (something periodic).
    source_worst_at_s: float
    source_max_ms: float
    #: Per record, target latency minus source latency: what the replicator adds
    #: (consume, batch, produce, target append). A stall of the source broker delays
    #: a record on both probes, so it does not count here; it does in `p99_ms`.
    added_p50_ms: float
    added_p99_ms: float
    #: The longest GC pause of either broker while the load was offered.
    broker_gc_max_ms: float
    #: While the load was offered: how long the probes' threads waited for a CPU (the
    #: longer of the two; a starved probe inflates its own latencies) and how much CPU
    #: the replicator, idle but for this load, used.
    probe_cpu_wait_ms: float
    replicator_cores: float
    #: While the load was offered: how long every runnable task of the machine was
    #: stalled on I/O at once (the kernel's pressure stall information, "full").
    io_stall_ms: float

    @classmethod
    def median(cls, runs: Sequence[Latency]) -> Latency:
        return cls(**median_fields(cls, runs))


@dataclass(frozen=True)
class Run:
    """One run of one system on a freshly preloaded topic."""

    system: str
    run: int
    source_topic: str
    preload_s: float
    figures: Figures
    latency: Latency | None
    #: Exit codes after SIGTERM: 0 for ours (one per process), 143 (128 + SIGTERM) for
    #: a JVM that ran its shutdown hooks; anything else is a failed clean stop.
    exit_codes: list[int | None]
    #: ERROR lines in MM2's log (None for ours, whose warnings go to the terminal).
    log_errors: int | None
    #: 1-minute load average right after the run: above nproc, something else competed.
    loadavg_1m: float
    #: Ours: where records waited in the clients while the backlog was copied, and each
    #: process's share of the partitions (None for MM2).
    client_waits: ClientWaits | None = None
    workers: list[WorkerShare] | None = None
    #: The replicator's busiest threads while the backlog was copied (either system).
    busiest_threads: list[ThreadLoad] | None = None


@dataclass(frozen=True)
class Summary:
    """Medians of one system's runs."""

    system: str
    figures: Figures
    latency: Latency | None


@dataclass(frozen=True)
class RawLimits:
    """The Kafka perf tools, with the same record sizes: each alone against the `src`
    cluster, then both at once as a replicator uses the brokers (reading `src` while
    writing `dst`, on the same cores): a reference pace for either replicator."""

    #: ProducerPerformance with PRODUCER_SETTINGS (lz4 on near-incompressible payloads).
    produce_records_per_s: float
    produce_mb_per_s: float
    #: ConsumerPerformance reading an uncompressed topic preloaded as the runs' are;
    #: fetch rate (group join excluded).
    consume_records_per_s: float
    consume_mb_per_s: float
    #: The same two at once: ConsumerPerformance on `src`, ProducerPerformance to `dst`.
    copy_consume_records_per_s: float
    copy_produce_records_per_s: float

    @property
    def copy_records_per_s(self) -> float:
        """The rate a consume-produce pipe keeps up: the slower of the two at once."""
        return min(self.copy_consume_records_per_s, self.copy_produce_records_per_s)


@dataclass(frozen=True)
class SizeResult:
    """Every run of one value size, both systems' medians, their ratios and the limits."""

    value_bytes: int
    records: int
    partitions: int
    tasks: int
    runs: list[Run]
    ours: Summary
    mm2: Summary
    #: ours / MM2 of each median (Figures and Latency fields): above 1 is more of it.
    ratios: dict[str, float]
    limits: RawLimits
    #: The source alone at the latency phase's load, before the first measured phase.
    warm_up: WarmUp | None
    #: Headers of its own on every source record (`--record-headers`).
    record_headers: int | str = 0


# -- the JVM side: MirrorMaker 2 and the perf tools ---------------------------------------


def mm2_properties(topics: Sequence[str], tasks: int, run_id: str) -> dict[str, str]:
    """mm2.properties for one run: the flow of exactly `topics`, with ours' settings.

    Connect's internal topics and worker group are named after the run, so no run
    can resume from another's stored offsets or wait for another's worker to leave.
    """
    return {
        "clusters": f"{SOURCE.name}, {TARGET.name}",
        f"{SOURCE.name}.bootstrap.servers": SOURCE.bootstrap,
        f"{TARGET.name}.bootstrap.servers": TARGET.bootstrap,
        f"{FLOW}.enabled": "true",
        f"{FLOW}.topics": ",".join(topics),
        f"{TARGET.name}->{SOURCE.name}.enabled": "false",
        # MM2 runs a heartbeat herder even for a disabled flow; ours has no reverse flow.
        f"{TARGET.name}->{SOURCE.name}.emit.heartbeats.enabled": "false",
        "tasks.max": str(tasks),
        # Ours emits no checkpoints yet: MM2 does not either, for fairness.
        "emit.checkpoints.enabled": "false",
        "sync.topic.acls.enabled": "false",
        **ONE_BROKER,
        **connect_state_properties(TARGET.name, run_id),
        # The records go through the Connect worker's producer, configured per target
        # cluster: `src->dst.producer.*` would reach only the offset-syncs producer.
        **{f"{TARGET.name}.producer.{key}": value for key, value in PRODUCER_SETTINGS.items()},
        # The replication consumer takes the flow's `consumer.*`.
        **{f"{FLOW}.consumer.{key}": value for key, value in CONSUMER_SETTINGS.items()},
    }


class MirrorMaker2(MirrorMaker):
    """MM2 as the benchmark runs it: the heap and JVM options of Kafka's start scripts,
    the benchmark's stop timeout, and the checks made after each run."""

    label = "MM2"

    def __init__(self, properties: dict[str, str], workdir: Path) -> None:
        super().__init__(
            properties,
            workdir,
            heap=MM2_HEAP,
            jvm_options=JVM_PERFORMANCE_OPTS,
            stop_timeout_s=STOP_TIMEOUT_S,
        )

    @property
    def exit_codes(self) -> list[int | None]:
        return [] if self.exit_code is None else [self.exit_code]

    def log_errors(self) -> list[str]:
        """ERROR lines of the log, less those MM2 always logs in this setup."""
        return self.error_lines(EXPECTED_MM2_ERRORS)

    def check_client_settings(self) -> None:
        """Fail unless MM2's task producers and replication consumers ran with our
        settings (read from the configs Kafka clients log when they are created):
        a wrong key in mm2.properties is silently ignored, and would skew every figure."""
        lines = self.log_lines()
        checks = (
            ("ProducerConfig", MM2_TASK_PRODUCER, PRODUCER_SETTINGS),
            ("ConsumerConfig", MM2_TASK_CONSUMER, CONSUMER_SETTINGS),
        )
        for kind, client, wanted in checks:
            logged = [
                config
                for config in logged_client_configs(lines, kind)
                if client in config.get("client.id", "")
            ]
            wrong = [
                f"{config['client.id']}: {key} = {config.get(key)}, not {value}"
                for config in logged
                for key, value in wanted.items()
                if config.get(key) != value
            ]
            if not logged or wrong:
                raise RuntimeError(
                    f"MM2 did not run its {client!r} clients with the benchmark's settings "
                    f"({'; '.join(wrong) or 'no such client in the log'}); see {self.log_file}"
                )


def logged_client_configs(lines: Sequence[str], kind: str) -> list[dict[str, str]]:
    """The `<kind> values:` blocks a Kafka client logs when it is created: one line
    with the header, then one tab-indented `key = value` line per setting."""
    configs: list[dict[str, str]] = []
    current: dict[str, str] | None = None
    for line in lines:
        if current is not None and line.startswith("\t"):
            key, _, value = line.strip().partition(" = ")
            current[key] = value
            continue
        current = None
        if f" {kind} values:" in line:
            current = {}
            configs.append(current)
    return configs


@dataclass(frozen=True)
class Tool:
    """One run of a Kafka tool: its main class, arguments and working folder."""

    main_class: str
    args: Sequence[str]
    workdir: Path


def run_tools(*tools: Tool) -> list[str]:
    """Run Kafka tools side by side to completion; return their standard outputs."""
    started = []
    for tool in tools:
        tool.workdir.mkdir(parents=True, exist_ok=True)
        command = [
            *java_command(
                tool.main_class,
                heap=TOOL_HEAP,
                log_file=tool.workdir / "tool.log",
                log_level="warn",
                jvm_options=JVM_PERFORMANCE_OPTS,
            ),
            *tool.args,
        ]
        with (tool.workdir / "stderr.log").open("wb") as stderr:
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True)
        started.append(process)
    outputs = []
    try:
        for tool, process in zip(tools, started, strict=True):
            stdout, _ = process.communicate(timeout=900)
            (tool.workdir / "stdout.log").write_text(stdout, encoding="utf-8")
            if process.returncode != 0:
                raise RuntimeError(
                    f"{tool.main_class} exited with code {process.returncode}; "
                    f"see {tool.workdir}/stderr.log"
                )
            outputs.append(stdout)
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
                process.wait()
    return outputs


def write_payload_file(path: Path, record_bytes: int) -> None:
    """Lines of random printable ASCII (no newline), each `record_bytes` long."""
    count = max(VALUE_POOL, PAYLOAD_FILE_BYTES // record_bytes)
    raw = os.urandom(count * record_bytes)
    printable = bytes(33 + b % 94 for b in raw)  # "!" .. "~"
    lines = [printable[i : i + record_bytes] for i in range(0, len(printable), record_bytes)]
    path.write_bytes(b"\n".join(lines))


def raw_limits(records: int, value_bytes: int, partitions: int) -> RawLimits:
    """ProducerPerformance and ConsumerPerformance, same record sizes: each alone
    against `src`, then reading `src` and writing `dst` at once."""
    record_bytes = KEY_BYTES + value_bytes
    read_topic, write_topic = f"limit-read-{value_bytes}b", f"limit-write-{value_bytes}b"
    workdir = JVM_DIR / f"limits-{value_bytes}b"
    payloads = workdir / "payloads.txt"
    workdir.mkdir(parents=True, exist_ok=True)
    write_payload_file(payloads, record_bytes)

    def consume(folder: str) -> Tool:
        args = ["--bootstrap-server", SOURCE.bootstrap, "--topic", read_topic]
        args += ["--messages", str(records), "--group", f"limit-{uuid.uuid4().hex}"]
        return Tool("org.apache.kafka.tools.ConsumerPerformance", args, workdir / folder)

    def produce(cluster: ClusterSpec, folder: str) -> Tool:
        args = ["--topic", write_topic, "--num-records", str(records), "--throughput", "-1"]
        args += ["--payload-file", str(payloads.resolve()), "--producer-props"]
        args += [f"bootstrap.servers={cluster.bootstrap}"]
        args += [f"{key}={value}" for key, value in PRODUCER_SETTINGS.items()]
        return Tool("org.apache.kafka.tools.ProducerPerformance", args, workdir / folder)

    create_topics(SOURCE.bootstrap, [read_topic, write_topic], partitions)
    create_topics(TARGET.bootstrap, [write_topic], partitions)
    try:
        preload(SOURCE.bootstrap, read_topic, records, value_bytes, partitions)
        (consumed,) = run_tools(consume("consumer"))
        (produced,) = run_tools(produce(SOURCE, "producer"))
        copy_consumed, copy_produced = run_tools(
            consume("copy-consumer"), produce(TARGET, "copy-producer")
        )
    finally:
        delete_topics(SOURCE.bootstrap, [read_topic, write_topic])
        delete_topics(TARGET.bootstrap, [write_topic])
    produce_rate = producer_performance_rate(produced, records)
    consume_rate = consumer_performance_rate(consumed, records)
    return RawLimits(
        produce_records_per_s=produce_rate,
        produce_mb_per_s=produce_rate * record_bytes / 1e6,
        consume_records_per_s=consume_rate,
        consume_mb_per_s=consume_rate * record_bytes / 1e6,
        copy_consume_records_per_s=consumer_performance_rate(copy_consumed, records),
        copy_produce_records_per_s=producer_performance_rate(copy_produced, records),
    )


def producer_performance_rate(output: str, records: int) -> float:
    """records/s from the summary line `N records sent, R records/sec (...)`."""
    # Progress lines look the same; the summary is the last one.
    found = re.findall(r"^(\d+) records sent, ([\d.]+) records/sec", output, re.MULTILINE)
    if not found or int(found[-1][0]) != records:
        raise RuntimeError(f"ProducerPerformance did not send {records} records:\n{output}")
    return float(found[-1][1])


def consumer_performance_rate(output: str, records: int) -> float:
    """fetch.nMsg.sec from the header and data lines of ConsumerPerformance's output."""
    lines = [line for line in output.splitlines() if line.strip()]
    header_index = next(i for i, line in enumerate(lines) if line.startswith("start.time"))
    header = [cell.strip() for cell in lines[header_index].split(",")]
    values = [cell.strip() for cell in lines[header_index + 1].split(",")]
    row = dict(zip(header, values, strict=True))
    if int(row["data.consumed.in.nMsg"]) != records:
        raise RuntimeError(f"ConsumerPerformance did not read {records} records:\n{output}")
    return float(row["fetch.nMsg.sec"])


# -- latency ---------------------------------------------------------------------------------


def probe_main(
    bootstrap: str,
    topic: str,
    partitions: int,
    *,
    ready: EventType,
    stop: EventType,
    expected: ctypes.c_longlong,
    results: Connection,
) -> None:
    """Entry of a spawned latency probe: read `topic` from its beginning and record, per
    record (by key), the time it was received minus its CreateTime (ms), until
    `expected` records are in or `stop` is set; send back (latencies, error).

    read_uncommitted and a 5 ms fetch.wait.max.ms, so a record is fetched as soon
    as the broker has it; poll() returns each record as soon as it is there (a
    batch consume would wait out its timeout).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-latency-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
            "fetch.wait.max.ms": 5,
        }
    )
    assigned = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)]
    consumer.assign(assigned)
    latencies: dict[bytes, float] = {}
    error = None
    try:
        while not stop.is_set() and not 0 <= expected.value <= len(latencies):
            message = consumer.poll(0.1)
            if message is None:
                if not ready.is_set() and fetching(consumer, assigned):
                    ready.set()
                continue
            received_ms = time.time() * 1000
            if message.error() is not None:
                error = message.error().str()
                break
            kind, timestamp_ms = message.timestamp()
            if kind != TIMESTAMP_CREATE_TIME:
                error = f"record {message.offset()} has no CreateTime"
                break
            latencies[message.key()] = received_ms - timestamp_ms
    finally:
        consumer.close()
        results.send((latencies, error))


def fetching(consumer: Consumer, assigned: list[TopicPartition]) -> bool:
    """Whether every partition has had a fetch response (which carries its high
    watermark): from then on a new record is fetched within fetch.wait.max.ms.
    Records produced before that would be measured with the probe's start-up."""
    for partition in assigned:
        _low, high = consumer.get_watermark_offsets(partition, cached=True)
        if high < 0:
            return False
    return True


class LatencyProbe:
    """A consumer of `topic` in its own process, so that it shares no interpreter lock
    with the load producer or the other probe: in one process, three busy threads
    delayed each other by seconds and the probes measured themselves."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        context = multiprocessing.get_context("spawn")
        self._ready, self._stop = context.Event(), context.Event()
        self._expected = context.RawValue("q", -1)
        self._results, child_end = context.Pipe(duplex=False)
        self._process = context.Process(
            target=probe_main,
            args=(bootstrap, topic, partitions),
            kwargs={
                "ready": self._ready,
                "stop": self._stop,
                "expected": self._expected,
                "results": child_end,
            },
            name=f"latency probe on {topic}",
            daemon=True,
        )

    def __enter__(self) -> LatencyProbe:
        self._process.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._process.join(10)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()

    @property
    def pid(self) -> int:
        assert self._process.pid is not None, "started by __enter__"
        return self._process.pid

    def wait_ready(self) -> None:
        if not self._ready.wait(60):
            raise RuntimeError(f"{self._process.name} did not start within 60 s")

    def collect(self, expected: int, timeout: float) -> dict[bytes, float]:
        """The latencies of the first `expected` records, or of those received within
        `timeout`, by record key."""
        self._expected.value = expected
        if not self._results.poll(timeout):
            self._stop.set()
        latencies, error = self._results.recv()
        if error is not None:
            raise RuntimeError(f"{self._process.name}: {error}")
        return latencies


def wait_for_topic(bootstrap: str, topic: str, timeout: float) -> None:
    """Until `topic` exists with partitions (the replicator creates remote topics)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = admin.list_topics(topic, timeout=5).topics.get(topic)
        if found is not None and found.error is None and found.partitions:
            return
        time.sleep(0.5)
    raise RuntimeError(f"{topic} did not appear on {bootstrap} within {timeout} s")


def offer_load(
    topic: str,
    rate: int,
    seconds: float,
    value_bytes: int,
    partitions: int,
    *,
    headers: int | str = 0,
) -> tuple[int, float]:
    """Produce `rate` records/s to `topic` on the source for `seconds` (each with
    `headers` of its own); return the count and the rate achieved.

    librdkafka stamps each record's CreateTime when produce() is called; linger
    stays at librdkafka's default of 5 ms, acks=all.
    """
    producer = Producer({"bootstrap.servers": SOURCE.bootstrap, "linger.ms": 5, "acks": "all"})
    values = random_values(value_bytes)
    own = header_lists(headers) or [None] * VALUE_POOL
    started = time.monotonic()
    sent = 0
    while (elapsed := time.monotonic() - started) < seconds:
        due = int(elapsed * rate)
        while sent < due:
            producer.produce(
                topic, values[sent % VALUE_POOL], KEY_FORMAT % sent, partition=sent % partitions,
                headers=own[sent % VALUE_POOL],
            )  # fmt: skip
            sent += 1
        producer.poll(0)
        time.sleep(0.002)
    achieved = sent / (time.monotonic() - started)
    remaining = producer.flush(30)
    if remaining:
        raise RuntimeError(f"{remaining} latency records to {topic} not delivered in 30 s")
    return sent, achieved


def percentiles(latencies: list[float]) -> tuple[float, float]:
    """p50 and p99."""
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    return cuts[49], cuts[98]


def io_stall_seconds() -> float:
    """Seconds so far that all non-idle tasks of the machine were stalled on I/O."""
    full = Path("/proc/pressure/io").read_text(encoding="utf-8").splitlines()[1]
    return int(full.rsplit("total=", 1)[1]) / 1e6


def slowest(latencies: dict[bytes, float], offered_per_s: float) -> tuple[float, float]:
    """When the slowest record was offered (seconds into the load: keys count the
    records) and its latency."""
    worst = max(latencies, key=latencies.__getitem__)
    return int(worst.removeprefix(b"k")) / offered_per_s, latencies[worst]


def warm_up(settings: Settings) -> WarmUp:
    """A latency phase on the source alone, before the first measured one, not counted.

    The first latency phase of a benchmark had the worst source p99 in almost every
    result file (102 to 2,254 ms, the other phases' median 49 ms), a figure no
    replicator is part of. Whatever warms up there (the brokers' code paths for small
    acks=all batches of 1 KB, page cache, the probes), it should not fall on the
    system that happens to run first.
    """
    topic = "latency-warm-up"
    create_topics(SOURCE.bootstrap, [topic], settings.partitions)
    with LatencyProbe(SOURCE.bootstrap, topic, settings.partitions) as probe:
        probe.wait_ready()
        sent, offered_per_s = offer_load(
            topic, settings.latency_rate, WARM_UP_S, LATENCY_VALUE_BYTES, settings.partitions,
            headers=settings.record_headers,
        )  # fmt: skip
        source = probe.collect(sent, LATENCY_WAIT_S)
    if len(source) != sent:
        raise RuntimeError(f"warm-up: {sent} records offered to {topic}, {len(source)} read")
    wipe_topics(SOURCE.bootstrap)
    p50, p99 = percentiles(list(source.values()))
    worst_at_s, worst_ms = slowest(source, offered_per_s)
    print(
        f"warm-up, {WARM_UP_S:.0f} s at {offered_per_s:,.0f} records/s on the source alone "
        f"(not counted): p50 {p50:.0f} ms, p99 {p99:.0f} ms, slowest {worst_ms:.0f} ms "
        f"{worst_at_s:.1f} s into the load"
    )
    return WarmUp(p50, p99, worst_ms, worst_at_s)


def measure_latency(
    stack: LocalStack,
    replicator: Replicator,
    topic: str,
    *,
    rate: int,
    seconds: float,
    value_bytes: int,
    partitions: int,
    headers: int | str = 0,
) -> Latency:
    """Offer the load to `topic` while probes read it on both clusters (`headers`: of
    their own on every record)."""
    remote = remote_topic(SOURCE.name, topic)
    wait_for_topic(TARGET.bootstrap, remote, timeout=60)
    with (
        LatencyProbe(SOURCE.bootstrap, topic, partitions) as source_probe,
        LatencyProbe(TARGET.bootstrap, remote, partitions) as target_probe,
    ):
        source_probe.wait_ready()
        target_probe.wait_ready()
        gc_pauses = GcPauses(stack)
        probes = [Path(f"/proc/{probe.pid}") for probe in (source_probe, target_probe)]
        waited = [run_queue_seconds(probe) for probe in probes]
        replicator_cpu = sum(map(cpu_seconds, replicator.pids()))
        io_stalled = io_stall_seconds()
        started = time.monotonic()
        sent, offered_per_s = offer_load(
            topic, rate, seconds, value_bytes, partitions, headers=headers
        )
        source = source_probe.collect(sent, LATENCY_WAIT_S)
        target = target_probe.collect(sent, LATENCY_WAIT_S)
        elapsed = time.monotonic() - started
        replicator_cores = (sum(map(cpu_seconds, replicator.pids())) - replicator_cpu) / elapsed
        waited = [run_queue_seconds(probe) - was for probe, was in zip(probes, waited, strict=True)]
    if len(target) != sent or len(source) != sent:
        raise RuntimeError(
            f"latency: {sent} records offered to {topic}, {len(source)} read on the source "
            f"and {len(target)} on the target within {LATENCY_WAIT_S} s"
        )
    p50, p99 = percentiles(list(target.values()))
    source_p50, source_p99 = percentiles(list(source.values()))
    worst_at_s, source_max = slowest(source, offered_per_s)
    added_p50, added_p99 = percentiles([target[key] - source[key] for key in target])
    return Latency(
        sent, offered_per_s, p50, p99, max(target.values()), source_p50, source_p99,
        worst_at_s, source_max, added_p50, added_p99, gc_pauses.longest_ms(),
        max(waited) * 1000, replicator_cores, (io_stall_seconds() - io_stalled) * 1000,
    )  # fmt: skip


# -- records with headers of their own ---------------------------------------------------------


def header_names(count: int) -> list[str]:
    """The names of the first `count` headers of `HEADER_SHAPES` (numbered past its end)."""
    return [
        name if i < len(HEADER_SHAPES) else f"{name}-{i // len(HEADER_SHAPES)}"
        for i in range(count)
        for name in [HEADER_SHAPES[i % len(HEADER_SHAPES)][0]]
    ]


#: `--record-headers forwarded`: every record carries another flow's provenance, as an
#: application forwarding a replica's headers writes it (Kafka Streams' default):
#: cluster `elsewhere`, topic `orders` there, and an offset that differs per record.
FORWARDED = "forwarded"
_FORWARDED_FROM = ((b"__dr_src", b"elsewhere"), (b"__dr_topic", b"orders"))


def forwarded_lists() -> list[list[tuple[str, bytes]]]:
    """VALUE_POOL lists of forwarded provenance headers (`FORWARDED`)."""
    return [
        [
            ("__dr_src", _FORWARDED_FROM[0][1]),
            ("__dr_off", struct.pack(">q", 1_000_000 + i)),
            ("__dr_topic", _FORWARDED_FROM[1][1]),
        ]
        for i in range(VALUE_POOL)
    ]


def header_lists(count: int | str) -> list[list[tuple[str, bytes]]] | None:
    """VALUE_POOL lists of `count` headers each, values of random printable ASCII at
    their shapes' sizes (as a trace id differs per record); None for none; forwarded
    provenance for `FORWARDED`."""
    if count == FORWARDED:
        return forwarded_lists()
    assert isinstance(count, int)
    if count == 0:
        return None
    sizes = [HEADER_SHAPES[i % len(HEADER_SHAPES)][1] for i in range(count)]
    names = header_names(count)
    return [
        [
            (name, bytes(33 + b % 94 for b in os.urandom(size)))
            for name, size in zip(names, sizes, strict=True)
        ]
        for _ in range(VALUE_POOL)
    ]


def header_bytes(count: int | str) -> int:
    """Bytes of names and values `count` headers add to a record."""
    if count == FORWARDED:
        return sum(len(name) + len(value) for name, value in forwarded_lists()[0])
    assert isinstance(count, int)
    names = header_names(count)
    return sum(len(name) + HEADER_SHAPES[i % len(HEADER_SHAPES)][1] for i, name in enumerate(names))


def preload_with_headers(
    bootstrap: str, topic: str, records: int, value_bytes: int, partitions: int, *, count: int
) -> float:
    """`harness.preload` with `count` headers on every record (harness.preload itself
    when there are none); seconds taken."""
    headers = header_lists(count)
    if headers is None:
        return preload(bootstrap, topic, records, value_bytes, partitions)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "compression.type": "none",
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
        }
    )
    values = random_values(value_bytes)
    produce = producer.produce
    started = time.monotonic()
    for i in range(records):
        while True:
            try:
                produce(
                    topic, values[i % VALUE_POOL], KEY_FORMAT % i, partition=i % partitions,
                    headers=headers[i % VALUE_POOL],
                )  # fmt: skip
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    remaining = producer.flush(120)
    if remaining:
        raise RuntimeError(f"preload of {topic}: {remaining} records not delivered in 120 s")
    return time.monotonic() - started


def check_copied_headers(topic: str, count: int | str) -> None:
    """The first replica of `topic` on the target carries the source's `count` headers
    first, in order (either system may add its own after them). Forwarded provenance is
    the replicators' to rewrite (ours replaces it with its own; MM2 copies it): not
    checked."""
    if count in (0, FORWARDED):
        return
    consumer = Consumer(
        {
            "bootstrap.servers": TARGET.bootstrap,
            "group.id": f"bench-headers-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        message = consumer.poll(30)
    finally:
        consumer.close()
    if message is None or message.error() is not None:
        raise RuntimeError(f"no replica of {topic} read back to check its headers: {message}")
    names = [name for name, _ in (message.headers() or [])]
    if names[:count] != header_names(count):
        raise RuntimeError(
            f"{topic}: a replica carries headers {names}, not the source's "
            f"{header_names(count)} first"
        )


# -- runs --------------------------------------------------------------------------------------


def wipe_topics(bootstrap: str) -> None:
    """Delete every topic but Kafka's own (`__*`): the run's, the replicators' internal
    topics (heartbeats, offset syncs, status, Connect's), so runs cannot interfere."""
    topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).topics
    delete_topics(bootstrap, [topic for topic in topics if not topic.startswith("__")])


@dataclass(frozen=True)
class Settings:
    """The command line, as the runs need it."""

    runs: int
    tasks: int
    partitions: int
    latency_rate: int
    latency_seconds: float
    timeout: float
    #: CPUs the replicator (either system) and the brokers are pinned to; None: anywhere.
    replicator_cpus: frozenset[int] | None = None
    broker_cpus: frozenset[int] | None = None
    #: Our source consumer's group protocol: classic (cooperative-sticky, the
    #: default) or consumer (KIP-848, the broker's range assignor).
    group_protocol: str = "classic"
    #: Headers of its own on every source record (`HEADER_SHAPES`); 0: none.
    record_headers: int | str = 0
    #: Our clients' librdkafka statistics (a Python callback: the Python loop).
    client_stats: bool = False


def make_replicator(system: str, topics: list[str], run_id: str, settings: Settings) -> Replicator:
    tasks = settings.tasks
    if system == "ours":
        consumer = {"group.protocol": settings.group_protocol}
        flow = flow_config(SOURCE, TARGET, topics, tasks, source_consumer=consumer)
        if settings.client_stats:
            flow = with_statistics(flow, STATS_DIR / run_id)
        return OurReplicator(flow, tasks)
    return MirrorMaker2(mm2_properties(topics, tasks, run_id), JVM_DIR / f"mm2-{run_id}")


def one_run(
    stack: LocalStack, system: str, run: int, *, value_bytes: int, records: int, settings: Settings
) -> Run:
    key = system.lower()
    topic = f"bench-{value_bytes}b-{key}-{run}"
    latency_topic = f"latency-{value_bytes}b-{key}-{run}"
    with_latency = measures_latency(value_bytes, settings)
    topics = [topic, latency_topic] if with_latency else [topic]
    create_topics(SOURCE.bootstrap, topics, settings.partitions)
    print(f"{value_bytes} B, {system} run {run}/{settings.runs}: preloading {records:,} records")
    preload_s = preload_with_headers(
        SOURCE.bootstrap, topic, records, value_bytes, settings.partitions,
        count=settings.record_headers,
    )  # fmt: skip
    run_id = f"{value_bytes}b-{run}"
    replicator = make_replicator(system, topics, run_id, settings)
    latency = waits = workers = None
    threads = ThreadCpu()
    with replicator:
        pin(replicator.pids(), settings.replicator_cpus)
        figures = measure_backlog(
            replicator,
            TargetWatermarks(
                TARGET.bootstrap, remote_topic(SOURCE.name, topic), settings.partitions
            ),
            records=records,
            record_bytes=KEY_BYTES + value_bytes + header_bytes(settings.record_headers),
            timeout=settings.timeout,
            brokers=broker_pids(stack),
            threads=threads,
        )
        print(
            f"  copied in {figures.wall_s:.1f} s (first record after "
            f"{figures.first_record_s:.1f} s): steady {figures.steady_records_per_s:,.0f} "
            f"records/s, {figures.cpu_s_per_million:.1f} CPU s per million; second half "
            f"(warm) {figures.warm_records_per_s:,.0f} records/s, "
            f"{figures.warm_cpu_s_per_million:.2f} CPU s per million"
        )
        if system == "ours" and settings.client_stats:
            copied_at = time.time()
            waits = client_waits(STATS_DIR / run_id, copied_at, remote_topic(SOURCE.name, topic))
            workers = worker_shares(STATS_DIR / run_id, topic, copied_at)
            print(f"  {describe_waits(waits, workers)}")
        check_copied_headers(remote_topic(SOURCE.name, topic), settings.record_headers)
        busiest = ", ".join(f"{t.name} {t.cores:.2f} (+{t.waiting:.2f})" for t in threads.busiest)
        print(
            f"  busiest threads (cores used, +waiting for a CPU; first record to last): {busiest}"
        )
        if with_latency:
            # The backlog's writes still sit in the page cache; their writeback would
            # stall the brokers' appends in the middle of the latency phase.
            os.sync()
            latency = measure_latency(
                stack,
                replicator,
                latency_topic,
                rate=settings.latency_rate,
                seconds=settings.latency_seconds,
                value_bytes=value_bytes,
                partitions=settings.partitions,
                headers=settings.record_headers,
            )
            print(
                f"  latency at {latency.offered_per_s:,.0f} records/s: p50 "
                f"{latency.p50_ms:.0f} ms, p99 {latency.p99_ms:.0f} ms "
                f"(source alone: p50 {latency.source_p50_ms:.0f} ms, p99 "
                f"{latency.source_p99_ms:.0f} ms, slowest {latency.source_max_ms:.0f} ms "
                f"{latency.source_worst_at_s:.1f} s into the load; longest broker GC pause "
                f"{latency.broker_gc_max_ms:.0f} ms; probes waited up to "
                f"{latency.probe_cpu_wait_ms:.0f} ms for a CPU; replicator used "
                f"{latency.replicator_cores:.2f} cores; all tasks stalled on I/O for "
                f"{latency.io_stall_ms:.0f} ms)"
            )
    log_errors = None
    clean_exit = 0
    if isinstance(replicator, MirrorMaker2):
        replicator.check_client_settings()
        errors = replicator.log_errors()
        log_errors = len(errors)
        if errors:
            print(f"  WARNING: {len(errors)} ERROR lines in {replicator.log_file}: {errors[0]}")
        clean_exit = JVM_SIGTERM_EXIT
    if any(code != clean_exit for code in replicator.exit_codes):
        print(f"  WARNING: {system} exited with {replicator.exit_codes} after SIGTERM")
    loadavg = os.getloadavg()[0]
    wipe_topics(SOURCE.bootstrap)
    wipe_topics(TARGET.bootstrap)
    return Run(
        system,
        run,
        topic,
        preload_s,
        figures,
        latency,
        replicator.exit_codes,
        log_errors,
        loadavg,
        waits,
        workers,
        threads.busiest,
    )


def describe_waits(waits: ClientWaits | None, workers: list[WorkerShare]) -> str:
    """One line: where records waited in our clients, and each worker's share."""
    shares = "; ".join(
        f"{w.partitions} partitions at {w.records_per_s:,.0f} rec/s" for w in workers
    )
    if waits is None:
        return f"no client statistics; workers: {shares}"
    return (
        f"waits: {waits.consumer_queued_records:,.0f} records fetched and waiting for the "
        f"loop, fetch rtt {waits.fetch_rtt_ms:.1f} ms; producer queue "
        f"{waits.producer_queued_records:,.0f} records, {waits.producer_queue_ms:.1f} ms "
        f"in queue, {waits.producer_outbuf_ms:.1f} ms in outbuf, produce rtt "
        f"{waits.produce_rtt_ms:.1f} ms (p99 {waits.produce_rtt_p99_ms:.1f}), "
        f"{waits.requests_in_flight:.0f} requests in flight, batches of "
        f"{waits.batch_records:,.0f} records / {waits.batch_bytes / 1024:,.0f} KiB; "
        f"workers: {shares}"
    )


def summarize(system: str, runs: Sequence[Run]) -> Summary:
    mine = [r for r in runs if r.system == system]
    latencies = [r.latency for r in mine if r.latency is not None]
    return Summary(
        system,
        Figures.median([r.figures for r in mine]),
        Latency.median(latencies) if latencies else None,
    )


def ratios(ours: Summary, mm2: Summary) -> dict[str, float]:
    """ours / MM2 for every median field both have (a zero MM2 figure is left out)."""
    pairs = [(ours.figures, mm2.figures)]
    if ours.latency is not None and mm2.latency is not None:
        pairs.append((ours.latency, mm2.latency))
    return {
        f.name: getattr(a, f.name) / getattr(b, f.name)
        for a, b in pairs
        for f in fields(a)
        if getattr(b, f.name)
    }


def measures_latency(value_bytes: int, settings: Settings) -> bool:
    return settings.latency_seconds > 0 and value_bytes == LATENCY_VALUE_BYTES


def size_runs(stack: LocalStack, value_bytes: int, records: int, settings: Settings) -> list[Run]:
    return [
        one_run(stack, system, run, value_bytes=value_bytes, records=records, settings=settings)
        for run in range(1, settings.runs + 1)
        for system in SYSTEMS
    ]


def size_result(
    value_bytes: int,
    records: int,
    settings: Settings,
    done: list[Run],
    warmed_up: WarmUp | None,
    *,
    limits: RawLimits | None = None,
) -> SizeResult:
    if limits is None:
        print(f"{value_bytes} B: raw limits with the Kafka perf tools")
        # Three copies of the backlog at once would not fit on the disk at 1 KB.
        limits = raw_limits(
            min(records, default_records(value_bytes)), value_bytes, settings.partitions
        )
    ours, mm2 = summarize("ours", done), summarize("MM2", done)
    return SizeResult(
        value_bytes,
        records,
        settings.partitions,
        settings.tasks,
        done,
        ours,
        mm2,
        ratios(ours, mm2),
        limits,
        warmed_up,
        settings.record_headers,
    )


# -- output ------------------------------------------------------------------------------------


def fixed(digits: int) -> Callable[[float], str]:
    return f"{{:,.{digits}f}}".format


#: Printed columns: field (of Figures, or of Latency), header, format.
COLUMNS: tuple[tuple[str, str, Callable[[float], str]], ...] = (
    ("wall_s", "wall s", fixed(1)),
    ("records_per_s", "rec/s", fixed(0)),
    ("first_record_s", "1st rec s", fixed(1)),
    ("steady_records_per_s", "steady rec/s", fixed(0)),
    ("steady_mb_per_s", "steady MB/s", fixed(1)),
    ("cpu_s_per_million", "CPU s/M rec", fixed(1)),
    ("warm_records_per_s", "warm rec/s", fixed(0)),
    ("warm_cpu_s_per_million", "warm CPU s/M", fixed(2)),
    ("cores", "cores", fixed(2)),
    ("peak_rss_mib", "RSS MiB", fixed(0)),
    ("p50_ms", "p50 ms", fixed(0)),
    ("p99_ms", "p99 ms", fixed(0)),
    ("added_p50_ms", "+p50 ms", fixed(0)),
    ("added_p99_ms", "+p99 ms", fixed(0)),
    ("source_p99_ms", "src p99 ms", fixed(0)),
    ("broker_gc_max_ms", "GC max ms", fixed(0)),
)


def cells(figures: Figures, latency: Latency | None) -> list[str]:
    values = {**asdict(figures), **(asdict(latency) if latency is not None else {})}
    return [fmt(values[name]) if name in values else "-" for name, _, fmt in COLUMNS]


def table(result: SizeResult) -> str:
    """Every run, both medians, the ratios ours/MM2 and the raw limits as one Markdown
    table; the last column, the load average after each run, shows which runs had
    company."""
    header = ["", *(title for _, title, _ in COLUMNS), "load 1m"]
    body = [
        [f"{r.system} {r.run}", *cells(r.figures, r.latency), f"{r.loadavg_1m:.1f}"]
        for r in result.runs
    ]
    for summary in (result.ours, result.mm2):
        body.append([f"{summary.system} median", *cells(summary.figures, summary.latency), ""])
    body.append(
        [
            "ours/MM2",
            *(
                f"{result.ratios[name]:.2f}" if name in result.ratios else "-"
                for name, _, _ in COLUMNS
            ),
            "",
        ]
    )
    limits = result.limits
    record_mb = (KEY_BYTES + result.value_bytes) / 1e6
    limit_rows = {
        "limit: produce": (limits.produce_records_per_s, limits.produce_mb_per_s),
        "limit: consume": (limits.consume_records_per_s, limits.consume_mb_per_s),
        "limit: both at once": (
            limits.copy_records_per_s,
            limits.copy_records_per_s * record_mb,
        ),
    }
    titles = [name for name, _, _ in COLUMNS]
    for label, (rate, mb) in limit_rows.items():
        row = ["-"] * len(COLUMNS)
        row[titles.index("steady_records_per_s")] = fixed(0)(rate)
        row[titles.index("warm_records_per_s")] = fixed(0)(rate)
        row[titles.index("steady_mb_per_s")] = fixed(1)(mb)
        body.append([label, *row, ""])
    if result.ours.latency is not None:
        floor = ["-"] * len(COLUMNS)
        floor[titles.index("p50_ms")] = fixed(0)(result.ours.latency.source_p50_ms)
        floor[titles.index("p99_ms")] = fixed(0)(result.ours.latency.source_p99_ms)
        body.append(["floor: on source", *floor, ""])
    ceiling = limits.copy_records_per_s
    share = ", ".join(
        f"{s.system} {s.figures.warm_records_per_s / ceiling:.0%}"
        for s in (result.ours, result.mm2)
    )
    what = (
        "another flow's provenance headers, forwarded"
        if result.record_headers == FORWARDED
        else f"{result.record_headers} headers of their own"
    )
    own = (
        f"{what} ({header_bytes(result.record_headers)} B; not on the perf tools' records), "
        if result.record_headers
        else ""
    )
    title = (
        f"{result.value_bytes} B values, {KEY_BYTES} B keys, {own}{result.records:,} records, "
        f"{result.partitions} partitions, {result.tasks} task(s); warm rate as a share of "
        f"the raw limit with both at once: {share}"
    )
    return f"{title}\n\n{markdown_table(header, body)}"


def shape_table(results: list[SizeResult]) -> str:
    """Each record shape's median warm rate as a share of the first shape's, per size
    and system (the shapes ran in the same run, interleaved)."""
    header = ["values", "record headers", "ours warm rec/s", "ours ratio", "MM2 warm rec/s",
              "MM2 ratio", "ours / MM2"]  # fmt: skip
    body = []
    for size in SIZES:
        of_size = [r for r in results if r.value_bytes == size]
        if not of_size:
            continue
        base = of_size[0]
        for result in of_size:
            ours = result.ours.figures.warm_records_per_s
            mm2 = result.mm2.figures.warm_records_per_s
            body.append([
                f"{size} B",
                str(result.record_headers),
                f"{ours:,.0f}",
                f"{ours / base.ours.figures.warm_records_per_s:.2f}x",
                f"{mm2:,.0f}",
                f"{mm2 / base.mm2.figures.warm_records_per_s:.2f}x",
                f"{ours / mm2:.2f}x",
            ])  # fmt: skip
    return markdown_table(header, body)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--records-100b",
        type=int,
        default=RECORDS[100],
        help="records per run with 100 B values (default: %(default)s)",
    )
    parser.add_argument(
        "--records-1k",
        type=int,
        default=RECORDS[1024],
        help="records per run with 1024 B values (default: %(default)s)",
    )
    parser.add_argument("--runs", type=int, default=3, help="runs per system and size (3)")
    parser.add_argument(
        "--tasks",
        type=int,
        default=1,
        help="MM2's tasks.max, and the number of our replicator processes (1)",
    )
    parser.add_argument("--partitions", type=int, default=12, help="partitions per topic (12)")
    parser.add_argument(
        "--latency-rate", type=int, default=5000, help="offered load, records/s (5000)"
    )
    parser.add_argument(
        "--latency-seconds",
        type=float,
        default=30.0,
        help="how long the load is offered in each 1 KB run; 0 skips the latency phase (30)",
    )
    parser.add_argument(
        "--timeout", type=float, default=900.0, help="give up on a run after S seconds (900)"
    )
    parser.add_argument(
        "--replicator-cpus",
        type=parse_cpus,
        help="pin either replicator to these CPUs (taskset syntax: 1, 0-1); default: anywhere",
    )
    parser.add_argument(
        "--broker-cpus", type=parse_cpus, help="pin the brokers to these CPUs; default: anywhere"
    )
    parser.add_argument(
        "--group-protocol",
        choices=("classic", "consumer"),
        default="classic",
        help="our source consumer's group protocol; consumer (KIP-848) spreads every topic "
        "over the tasks (classic)",
    )
    parser.add_argument(
        "--record-headers",
        type=_record_headers,
        default=[0],
        metavar="N|forwarded[,...]",
        help="headers of its own on every source record, named and sized like an "
        "application's (trace-id 32 B, content-type 16 B, ...), or `forwarded`: another "
        "flow's provenance headers (__dr_src, __dr_off, __dr_topic), as an application "
        "forwarding a replica's headers writes them; several, comma-separated, run in "
        "the same run and are compared (0)",
    )
    parser.add_argument(
        "--client-stats",
        action="store_true",
        help="print our clients' librdkafka statistics after each run (their Python "
        "callback keeps our flow on the Python loop)",
    )
    return parser.parse_args(argv)


def _record_headers(text: str) -> list[int | str]:
    shapes: list[int | str] = []
    for given in text.split(","):
        shape = given.strip()
        if shape == FORWARDED:
            shapes.append(FORWARDED)
        elif shape.isdigit():
            shapes.append(int(shape))
        else:
            raise argparse.ArgumentTypeError(
                f"{shape!r}: give a count (0 or more) or {FORWARDED}, or several, comma-separated"
            )
    if len(set(shapes)) != len(shapes):
        raise argparse.ArgumentTypeError(f"{text!r}: a shape is given twice")
    return shapes


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    settings = Settings(
        runs=args.runs,
        tasks=args.tasks,
        partitions=args.partitions,
        latency_rate=args.latency_rate,
        latency_seconds=args.latency_seconds,
        timeout=args.timeout,
        replicator_cpus=args.replicator_cpus,
        broker_cpus=args.broker_cpus,
        group_protocol=args.group_protocol,
        record_headers=args.record_headers[0],
        client_stats=args.client_stats,
    )
    shapes = [replace(settings, record_headers=shape) for shape in args.record_headers]
    records = {100: args.records_100b, 1024: args.records_1k}
    stray = mirror_maker_pids(JVM_DIR)
    if stray:
        raise SystemExit(
            f"MirrorMaker 2 JVMs from an earlier run are still running (pids {stray}); "
            f"stop them with kill {' '.join(map(str, stray))}"
        )
    started = datetime.now(UTC)
    clock = time.monotonic()
    machine = Machine.describe()
    for folder in (JVM_DIR, STATS_DIR):
        shutil.rmtree(folder, ignore_errors=True)
    with bench_stack(SOURCE, TARGET, DATA_DIR) as stack:
        pin(broker_pids(stack), settings.broker_cpus)
        JVM_DIR.mkdir(parents=True)
        runs, warm_ups = {}, {}
        for size in SIZES:
            warm_ups[size] = warm_up(settings) if measures_latency(size, settings) else None
            for shape in shapes:  # every shape of a size in the same stretch of the run
                runs[size, shape.record_headers] = size_runs(stack, size, records[size], shape)
        results: list[SizeResult] = []
        for size in SIZES:
            limits = None  # measured once a size, shared by its shapes
            for shape in shapes:
                result = size_result(
                    size,
                    records[size],
                    shape,
                    runs[size, shape.record_headers],
                    warm_ups[size],
                    limits=limits,
                )
                limits = result.limits
                results.append(result)
    left = mirror_maker_pids(JVM_DIR)
    if left:
        print(f"WARNING: MM2 JVMs still running after the benchmark: pids {left}")
    print()
    for result in results:
        print(table(result))
        print()
    if len(shapes) > 1:
        print(shape_table(results))
        print()
    path = write_report(
        "compare_mm2",
        started,
        machine,
        {
            "clusters": "one KRaft broker each, loopback, heap " + BROKER_HEAP,
            "settings": {
                key: sorted(value) if isinstance(value, frozenset) else value
                for key, value in asdict(settings).items()
            },
            "mm2_command": (
                f"java -Xmx{MM2_HEAP} {' '.join(JVM_PERFORMANCE_OPTS)} {MIRROR_MAKER_MAIN}"
            ),
            "mm2_properties": mm2_properties(["<topic>", "<latency topic>"], args.tasks, "<run>"),
            "producer_settings": PRODUCER_SETTINGS,
            "consumer_settings": CONSUMER_SETTINGS,
            "duration_s": round(time.monotonic() - clock),
        },
        [asdict(result) for result in results],
    )
    print(f"total {time.monotonic() - clock:.0f} s; results written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
