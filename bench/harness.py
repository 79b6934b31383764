"""What the benchmarks share: clusters, preloading, our replicator's process, measuring.

`replication_throughput.py` (our engine alone) and `compare_mm2.py` (ours against
MirrorMaker 2) measure a run the same way, so that their figures mean the same
thing: a replicator is started on a preloaded backlog, the target's high
watermarks are polled until they add up to the source's record count, and the
replicator's CPU time and peak memory are read from /proc before it is stopped.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import multiprocessing
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Protocol

import confluent_kafka
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)
from thread_cpu import ThreadCpu, read_stat

from replicator import allocator, logs
from replicator.config import FlowConfig, load_config
from replicator.engine.collector import pace_for_replication
from replicator.engine.task import ReplicationTask
from replicator_lab import ClusterSpec, LocalStack
from replicator_lab.jvm import find_java

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


# -- results ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Figures:
    """What one backlog replication measured; the median of several runs has the same shape."""

    wall_s: float  # replicator process start -> last record on the target
    records_per_s: float
    mb_per_s: float  # key + value bytes, MB = 10**6 bytes
    first_record_s: float  # process start -> first record on the target (startup, group join)
    steady_records_per_s: float  # first record on the target -> last
    steady_mb_per_s: float
    #: The backlog's second half (half of it on the target -> last record): a JVM's JIT
    #: is still compiling in the first seconds of a run, a long-running replicator is not.
    warm_records_per_s: float
    warm_cpu_s_per_million: float
    cpu_s: float  # replicator process(es), user + system, all threads, until the last record
    cpu_s_per_million: float
    cores: float  # cpu_s / wall_s: how much of the machine the replicator used
    peak_rss_mib: float  # VmHWM of the replicator process (summed over processes)
    broker_cpu_s: float  # both brokers' JVMs over the same wall time

    @classmethod
    def median(cls, runs: Sequence[Figures]) -> Figures:
        return cls(**median_fields(cls, runs))


def median_fields(cls: type, runs: Sequence[object]) -> dict[str, float]:
    """Each field's own median over `runs` (instances of the dataclass `cls`)."""
    return {f.name: statistics.median(getattr(r, f.name) for r in runs) for f in fields(cls)}


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
    java: str
    allocator: str  # LD_PRELOAD (and MALLOC_CONF) of our spawned processes ("": C library's)
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
        # `java -version` prints to stderr; its first line names the JDK and version.
        java = subprocess.run(
            [str(find_java()), "-version"], capture_output=True, text=True, check=True
        ).stderr.splitlines()[0]
        return cls(
            nproc=len(os.sched_getaffinity(0)),
            cpu_model=model,
            memory_gib=round(memory_kib / 2**20, 1),
            kernel=platform.release(),
            python=platform.python_version(),
            confluent_kafka=confluent_kafka.__version__,
            librdkafka=confluent_kafka.libversion()[0],
            java=java,
            allocator=_allocator_setting(allocator.environment() or os.environ),
            loadavg_at_start=os.getloadavg(),
        )


def _allocator_setting(preferred: Mapping[str, str]) -> str:
    """`LD_PRELOAD` and `MALLOC_CONF` as our spawned processes get them."""
    preload = preferred.get("LD_PRELOAD", "")
    conf = preferred.get("MALLOC_CONF")
    return f"{preload} (MALLOC_CONF={conf})" if preload and conf else preload


def write_report(
    benchmark: str, started: datetime, machine: Machine, setup: dict[str, object], results: object
) -> Path:
    """Write `bench/results/<benchmark>-<UTC timestamp>.json`; return its path."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{benchmark}-{started:%Y%m%dT%H%M%SZ}.json"
    report = {
        "benchmark": benchmark,
        "started_utc": started.isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": asdict(machine),
        "setup": {
            "key_bytes": KEY_BYTES,
            "values": f"random bytes, {VALUE_POOL} distinct values cycled (incompressible)",
            "mb": "10**6 bytes of key + value",
            **setup,
        },
        "results": results,
    }
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return path


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Right-aligned Markdown table (pastes into an issue note and reads in a terminal)."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|"
    return "\n".join([line(header), rule, *(line(row) for row in rows)])


# -- clusters and topics -----------------------------------------------------------------------


@contextlib.contextmanager
def bench_stack(source: ClusterSpec, target: ClusterSpec, data_dir: Path) -> Iterator[LocalStack]:
    """Two fresh single-node clusters for the benchmark's lifetime, stopped on any exit."""
    stack = LocalStack([source, target], data_dir=data_dir, heap=BROKER_HEAP)
    stack.down(wipe=True)
    names = " and ".join(f"{c.name} ({c.bootstrap})" for c in (source, target))
    print(f"starting clusters {names}")
    stack.up()
    try:
        for spec in (source, target):
            delete_files_at_once(spec)
        yield stack
    finally:
        # Admin clients whose futures ended in an exception sit in reference cycles;
        # collect them now, or they log "connection refused" as the brokers stop.
        gc.collect()
        stack.down()


def broker_pids(stack: LocalStack) -> list[int]:
    return [pid for broker in stack.brokers.values() for pid in broker.pids()]


#: A pause line of the brokers' GC log (`-Xlog:gc`): "... Pause Young (Normal) ... 3.456ms".
_GC_PAUSE = re.compile(r"Pause .* (\d+(?:\.\d+)?)ms$")


class GcPauses:
    """The brokers' garbage-collection pauses logged from the moment it is made on: a
    stall that both brokers' clients see may be the JVM's, not a replicator's."""

    def __init__(self, stack: LocalStack) -> None:
        logs = [broker.gc_log for broker in stack.brokers.values()]
        self._start = {log: log.stat().st_size if log.exists() else 0 for log in logs}

    def longest_ms(self) -> float:
        """The longest pause of either broker since, in milliseconds (0 if none)."""
        pauses = [0.0]
        for log, start in self._start.items():
            with log.open("rb") as lines:
                lines.seek(start)
                for line in lines.read().decode(errors="replace").splitlines():
                    if found := _GC_PAUSE.search(line):
                        pauses.append(float(found.group(1)))
        return max(pauses)


def parse_cpus(text: str) -> frozenset[int]:
    """A CPU list as taskset writes it: "1", "0,1", "0-3"."""
    cpus: set[int] = set()
    for part in text.split(","):
        first, _, last = part.strip().partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return frozenset(cpus)


def pin(pids: Sequence[int], cpus: frozenset[int] | None) -> None:
    """Pin every thread of `pids` to `cpus` (as `taskset -a -p`); threads they start
    later inherit it. None leaves them where they are. Used to give two replicators
    the same core budget, apart from the brokers'."""
    if cpus is None:
        return
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(ProcessLookupError):  # a thread that just ended
                os.sched_setaffinity(int(task.name), cpus)


def create_topics(bootstrap: str, topics: Sequence[str], partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1) for topic in topics])
    for future in futures.values():
        future.result(timeout=30)


def wait_for_leaders(
    bootstrap: str, topics: Sequence[str], partitions: int, timeout_s: float = 300
) -> None:
    """Until every partition of `topics` has a leader: a CreateTopics answer comes when
    the controller took the topics, before the broker serves them (thousands of
    partitions take it minutes, and records sent meanwhile fail as unknown)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout_s
    while True:
        listed = admin.list_topics(timeout=30).topics
        waiting = [
            t
            for t in topics
            if (meta := listed.get(t)) is None
            or len(meta.partitions) < partitions
            or any(p.leader < 0 for p in meta.partitions.values())
        ]
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(waiting)} topics without leaders after {timeout_s} s")
        time.sleep(1)


def delete_files_at_once(cluster: ClusterSpec) -> None:
    """Have the broker delete a deleted topic's files at once rather than a minute later
    (`log.segment.delete.delay.ms`, dynamic; set on the one broker, as confluent-kafka
    takes no empty name for the cluster-wide default), so the gigabytes a run leaves
    are removed while the next run is wiping, not while it is measured."""
    entry = ConfigEntry(
        "log.segment.delete.delay.ms", "0", incremental_operation=AlterConfigOpType.SET
    )
    broker = str(cluster.node_id)
    resource = ConfigResource(ResourceType.BROKER, broker, incremental_configs=[entry])
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def delete_topics(bootstrap: str, topics: Sequence[str]) -> None:
    """Free the disk between runs (a default run writes several GB per cluster)."""
    if not topics:
        return
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics(list(topics), operation_timeout=30).values():
        future.result()


def remote_topic(source_alias: str, topic: str) -> str:
    """Where a flow writes `topic` on the target (MM2's DefaultReplicationPolicy)."""
    return f"{source_alias}.{topic}"


def random_values(value_bytes: int) -> list[bytes]:
    return [os.urandom(value_bytes) for _ in range(VALUE_POOL)]


def preload(bootstrap: str, topic: str, records: int, value_bytes: int, partitions: int) -> float:
    """Produce `records` records round-robin over the partitions; return seconds taken.

    No delivery callback and no compression: the point is to have the backlog
    in place quickly, and flush() still fails loudly on any undelivered record.
    """
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


# -- our replicator ----------------------------------------------------------------------------


def flow_config(
    source: ClusterSpec,
    target: ClusterSpec,
    topics: Sequence[str],
    tasks: int = 1,
    source_consumer: Mapping[str, str] | None = None,
) -> FlowConfig:
    """The `source->target` flow of exactly `topics`, as an MM2 user would write it.

    Everything else is left at MM2's defaults (heartbeats on, topic config
    sync on), so the benchmark measures the engine as it is deployed; only
    replication factors are 1 because each cluster has one broker.
    `source_consumer`: settings of the source cluster's consumers (`A.consumer.*`).
    """
    flow = f"{source.name}->{target.name}"
    properties = {
        "clusters": f"{source.name}, {target.name}",
        f"{source.name}.bootstrap.servers": source.bootstrap,
        f"{target.name}.bootstrap.servers": target.bootstrap,
        f"{flow}.enabled": "true",
        f"{flow}.topics": ",".join(topics),
        "tasks.max": str(tasks),
        "replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "status.topic.replication.factor": "1",
        **{f"{source.name}.consumer.{k}": v for k, v in (source_consumer or {}).items()},
    }
    return load_config(properties).flow(flow)


def replicator_main(flow: FlowConfig) -> None:
    """Entry of a spawned replicator process: run the task until SIGTERM.

    SIGINT is ignored so that a Ctrl-C in the terminal reaches only the parent,
    which then stops this process the same way as after a run.
    """
    logs.crash_stacks()  # as `replicator run`: a crash in C code prints every stack
    stop_event = threading.Event()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda _signum, _frame: stop_event.set())
    logging.basicConfig(level=logging.WARNING, format="replicator: %(levelname)s %(message)s")
    pace_for_replication()  # as `replicator run` and its worker processes do
    ReplicationTask(flow, stop_event=stop_event).run()


class Replicator(Protocol):
    """A replicator under test, started by `with` and stopped (SIGTERM) when it ends."""

    label: str
    #: time.monotonic() just before the first process was started.
    started_at: float
    #: Exit codes after the stop, one per process (None while running).
    exit_codes: list[int | None]

    def pids(self) -> list[int]: ...

    def failure(self) -> str | None:
        """Why the replicator is no longer running, or None while it is."""
        ...


class SpawnedReplicator:
    """A replicator in `processes` spawned processes, each running `main(*args)` until
    SIGTERM; each process is its own, so its CPU time and memory are not the
    benchmark's. They run on the allocator `replicator run` would choose on this
    machine (`replicator.allocator`: jemalloc when installed), the Java tools and
    brokers on their own."""

    def __init__(
        self, label: str, main: Callable[..., None], args: tuple[object, ...], processes: int = 1
    ) -> None:
        self.label = label
        context = multiprocessing.get_context("spawn")
        self._processes = [
            context.Process(target=main, args=args, name=f"{label}-{i}") for i in range(processes)
        ]
        self.started_at = 0.0
        self.exit_codes: list[int | None] = []

    def __enter__(self) -> SpawnedReplicator:
        self.started_at = time.monotonic()
        with _preloading(allocator.environment() or os.environ):
            for process in self._processes:
                process.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """SIGTERM (the task finishes in-flight work and exits), SIGKILL if it hangs."""
        for process in self._processes:
            if process.is_alive():
                process.terminate()
        for process in self._processes:
            process.join(STOP_TIMEOUT_S)
            if process.is_alive():
                print(
                    f"  WARNING: {process.name} ignored SIGTERM for {STOP_TIMEOUT_S} s; killing it"
                )
                process.kill()
                process.join()
        self.exit_codes = [process.exitcode for process in self._processes]

    def pids(self) -> list[int]:
        return [process.pid for process in self._processes if process.pid is not None]

    def failure(self) -> str | None:
        for process in self._processes:
            if not process.is_alive():
                return f"{process.name} exited with code {process.exitcode}; its traceback is above"
        return None


@contextlib.contextmanager
def _preloading(preferred: Mapping[str, str]) -> Iterator[None]:
    """The allocator's variables (`LD_PRELOAD`, `MALLOC_CONF`) as `preferred` has them
    while processes are spawned (they inherit the environment when they start), as
    they were afterwards."""
    before = {name: os.environ.get(name) for name in _ALLOCATOR_VARIABLES}
    for name in _ALLOCATOR_VARIABLES:
        if preferred.get(name):
            os.environ[name] = preferred[name]
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


_ALLOCATOR_VARIABLES = ("LD_PRELOAD", "MALLOC_CONF")


class OurReplicator(SpawnedReplicator):
    """`ReplicationTask` in `tasks` processes that share the flow's partitions through
    its consumer group, as `replicator run` processes on several machines would."""

    def __init__(self, flow: FlowConfig, tasks: int = 1) -> None:
        super().__init__("ours", replicator_main, (flow,), tasks)


# -- measuring ---------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User + system time of every thread of `pid` (librdkafka's and the JVM's included)."""
    return read_stat(Path(f"/proc/{pid}/stat"))[1]


def wait_until_quiet(
    pids: Sequence[int], share: float = 0.3, window_s: float = 3.0, timeout_s: float = 120.0
) -> float:
    """Wait until `pids` (the brokers) together use less than `share` of a core over
    `window_s`, at most `timeout_s`; the seconds waited. A fresh broker keeps working
    for a while after a benchmark's setup (its JIT compiler, the group coordinator's
    writes, log flushes): the system measured first would share the cores with that
    and the one after it would not."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        before = sum(cpu_seconds(pid) for pid in pids)
        time.sleep(window_s)
        if (sum(cpu_seconds(pid) for pid in pids) - before) / window_s < share:
            break
    return round(time.monotonic() - started, 1)


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM in /proc/{pid}/status")


class TargetWatermarks:
    """Sum of the remote topic's high watermarks: with an idempotent producer and
    no transactions, exactly the number of records the replicator wrote."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self._admin = AdminClient({"bootstrap.servers": bootstrap})
        self._request = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}

    def total(self) -> int:
        futures = self._admin.list_offsets(self._request, request_timeout=5)
        try:
            return sum(future.result().offset for future in futures.values())
        except KafkaException:
            return 0  # the replicator has not created the remote topic yet


def measure_backlog(
    replicator: Replicator,
    watermarks: TargetWatermarks,
    *,
    records: int,
    record_bytes: int,
    timeout: float,
    brokers: Sequence[int],
    threads: ThreadCpu | None = None,
) -> Figures:
    """Poll the target until it holds every record of the backlog; measure the running
    `replicator` up to that moment (it is left running: the caller stops it).
    `threads`: also measure its threads' CPU from the first record to the last."""
    started = replicator.started_at
    brokers_cpu_before = sum(cpu_seconds(pid) for pid in brokers)
    first_at, first_count = None, 0
    half_at, half_count, half_cpu = None, 0, 0.0
    while True:
        failure = replicator.failure()
        if failure is not None:
            raise RuntimeError(
                f"{replicator.label} stopped before the backlog was copied: {failure}"
            )
        count = watermarks.total()
        now = time.monotonic()
        if count and first_at is None:
            first_at, first_count = now, count
            if threads is not None:
                threads.start(replicator.pids())
        if count >= records:
            break
        if half_at is None and count >= records / 2:
            half_at, half_count = now, count
            half_cpu = sum(cpu_seconds(pid) for pid in replicator.pids())
        if now - started > timeout:
            raise RuntimeError(
                f"{replicator.label}: only {count} of {records} records after {timeout} s"
            )
        time.sleep(POLL_INTERVAL_S)
    pids = replicator.pids()
    cpu = sum(cpu_seconds(pid) for pid in pids)
    rss = sum(peak_rss_mib(pid) for pid in pids)
    brokers_cpu = sum(cpu_seconds(pid) for pid in brokers) - brokers_cpu_before
    if count > records:
        print(f"  WARNING: the target holds {count} records, the source {records}: duplicates")
    if first_at is None or half_at is None:
        raise RuntimeError(
            f"the second half of {records} records arrived within one {POLL_INTERVAL_S} s "
            "poll; use more records to measure a steady state"
        )
    wall = now - started
    steady = now - first_at
    if threads is not None:
        threads.finish(pids, steady)
    return Figures(
        wall_s=wall,
        records_per_s=records / wall,
        mb_per_s=records * record_bytes / wall / 1e6,
        first_record_s=first_at - started,
        steady_records_per_s=(records - first_count) / steady,
        steady_mb_per_s=(records - first_count) * record_bytes / steady / 1e6,
        warm_records_per_s=(records - half_count) / (now - half_at),
        warm_cpu_s_per_million=(cpu - half_cpu) / (records - half_count) * 1e6,
        cpu_s=cpu,
        cpu_s_per_million=cpu / records * 1e6,
        cores=cpu / wall,
        peak_rss_mib=rss,
        broker_cpu_s=brokers_cpu,
    )


def default_records(value_bytes: int) -> int:
    """3 M records or about 2 GB of values, whichever is fewer: a run of 30 s or more
    on 2 cores for the default sizes (the engine did 2 M x 100 B in ~28 s and
    1 M x 1 KB in ~18 s there), without filling the disk for large values."""
    return min(3_000_000, 2_048_000_000 // value_bytes)


def replicated_backlog(
    stack: LocalStack, topic: str, records: int, value_bytes: int, partitions: int
) -> FlowConfig:
    """`topic` created on the stack's first cluster, preloaded and copied to the second
    by our engine (stopped once the copy is complete): the starting point of the
    benchmarks that measure what comes after replication. Returns the flow."""
    source, target = stack.clusters
    create_topics(source.bootstrap, [topic], partitions)
    print(f"preloading {records:,} records of {value_bytes} B")
    preload(source.bootstrap, topic, records, value_bytes, partitions)
    flow = flow_config(source, target, [topic])
    print("replicating")
    with OurReplicator(flow) as replicator:
        measure_backlog(
            replicator,
            TargetWatermarks(target.bootstrap, remote_topic(source.name, topic), partitions),
            records=records,
            record_bytes=value_bytes,
            timeout=1800,
            brokers=broker_pids(stack),
        )
    return flow
