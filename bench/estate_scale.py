"""Checkpoints and group sync at an estate's size: MirrorMaker 2 and ours on the same
source, each into a fresh target cluster of its own, one after the other (issue 41).

The source holds `--topics` x `--partitions` partitions of `--records` records each,
and `--groups` consumer groups that each committed half of every partition. Each
replicator runs on one mm2.properties with `sync.group.offsets.enabled` and checkpoints
every `--interval` seconds, as a user would run it (`replicator run` in a process of
its own; MM2 in dedicated mode), and the benchmark polls the target for:

- the first record on every partition, and every record (the copy);
- every group's offset on every partition committed on the target (synced), and how
  many of those are exact at the end (the record right after the group's position: half the
  partition, the copy being one to one); a replicator that stops short (no growth for
  `--settle-seconds`) is reported with the count it reached and when it last grew;
- the replicator's CPU seconds until then, its CPU at rest afterwards (share of one
  core over `--idle-seconds`), its peak RSS; ours' checkpoint round times (its log);
- at rest, ours' operations at this size: `replicator status` and `flows list`, the
  metric series served, the DR status page's snapshot, a supervisor run, and a
  failover's translation of every group.

    .venv/bin/python bench/estate_scale.py --topics 250 --partitions 4 --groups 20

With `--repeats N` each system is measured N times, the order turned round each time
and its target wiped before each run; the table shows each figure's median and a line
per figure gives ours / MM2 run by run (MM2's own time to synced varies by half between
runs on this machine: one pair of runs is no ratio).

Results go to bench/results/estate_scale-<UTC>.json (every run) and a table on stdout.
Goal: every group synced in at most half of MM2's time, with at most half its CPU.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from harness import (
    BROKER_HEAP,
    Machine,
    broker_pids,
    cpu_seconds,
    markdown_table,
    peak_rss_mib,
    wait_until_quiet,
    write_report,
)

from replicator import allocator
from replicator.config import load_config
from replicator.offsets.checkpoints import Checkpointer
from replicator.operations import CheckpointTallies
from replicator.operations.dr_status import dr_status
from replicator.operations.health import Bounds
from replicator.operations.supervision import check
from replicator.statestore import StateStore
from replicator_lab import ClusterSpec, LocalStack
from replicator_lab.mirrormaker import ONE_BROKER, MirrorMaker, mirror_maker_pids
from replicator_lab.mirrormaker_translation import connect_state_properties

SOURCE = ClusterSpec("src", 16092)
TARGETS = {"MM2": ClusterSpec("dstmm2", 26092), "ours": ClusterSpec("dstours", 36092)}
DATA_DIR = Path(".data/bench-estate")
GROUP_PREFIX = "estate-app-"
#: The watch's shortest pause between two looks (a look that took long is followed by a
#: longer one: `measure`).
POLL_S = 0.5
#: How often a watch prints where it stands.
PROGRESS_S = 30.0
_OFFSETS_PER_REQUEST = 500
METRICS_PORT = 19466
_CREATE_CHUNK = 500
_ROUND_LINE = re.compile(r"checkpoints of (\d+) groups on \d+ partitions in ([0-9.]+) s")


@dataclass
class Result:
    system: str
    first_record_every_partition_s: float | None
    every_record_s: float | None
    every_group_synced_s: float | None
    cpu_s_to_synced: float | None
    synced_group_partitions: int
    exact_group_partitions: int
    idle_cpu_share: float | None
    peak_rss_mib: float
    checkpoint_round_first_s: float | None = None
    checkpoint_round_median_s: float | None = None
    checkpoint_rounds: int = 0
    #: Ours only: `replicator status` and `replicator flows list` end to end, and the
    #: series its metrics endpoint serves.
    status_command_s: float | None = None
    flows_list_command_s: float | None = None
    metric_series: int | None = None
    #: Ours only: the DR status page's snapshot (`dr_status`), one supervisor run
    #: (which records the state store's sample), and a failover's exact translation
    #: of every group (a checkpointer made for it, as the failover makes one).
    status_page_s: float | None = None
    #: The page loaded again by the same server, which kept its checkpoint counts.
    status_page_refresh_s: float | None = None
    supervisor_run_s: float | None = None
    failover_translation_s: float | None = None
    failover_translation_exact: int | None = None
    #: How long the brokers took to quiet down before this system started.
    quiet_wait_s: float | None = None


def topic_names(count: int) -> list[str]:
    return [f"estate-{i:05d}" for i in range(count)]


def create_topics(bootstrap: str, topics: Sequence[str], partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for at in range(0, len(topics), _CREATE_CHUNK):
        futures = admin.create_topics(
            [NewTopic(t, partitions, 1) for t in topics[at : at + _CREATE_CHUNK]]
        )
        for future in futures.values():
            future.result(120)


def fill(bootstrap: str, topics: Sequence[str], partitions: int, records: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    value = b"v" * 100
    for topic in topics:
        for partition in range(partitions):
            for i in range(records):
                while True:
                    try:
                        producer.produce(topic, value=value, key=b"k%d" % i, partition=partition)
                        break
                    except BufferError:
                        producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(120) == 0


def commit_groups(bootstrap: str, groups: Sequence[str], partitions: list[TopicPartition]) -> None:
    for group in groups:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        try:
            for at in range(0, len(partitions), _OFFSETS_PER_REQUEST):
                chunk = partitions[at : at + _OFFSETS_PER_REQUEST]
                consumer.commit(offsets=chunk, asynchronous=False)
        finally:
            consumer.close()


class TargetView:
    """What one target cluster holds: high watermarks, and the groups' commits."""

    def __init__(self, bootstrap: str, remotes: list[tuple[str, int]], full: int) -> None:
        self.bootstrap = bootstrap
        self._admin = AdminClient({"bootstrap.servers": bootstrap})
        self.remotes = remotes
        #: Each remote partition's high watermark as last seen; a partition holding all
        #: `full` records of its source is not asked again (at 5,000 partitions, asking
        #: every one every look, with a new admin client while any was empty, took a
        #: third of a core from the replicator and brokers it watched).
        self._full = full
        self._highs = dict.fromkeys(remotes, 0)
        #: A consumer per group, kept from look to look (one made per look cost its
        #: connections, metadata and coordinator lookup every time: at 5,000 partitions
        #: and 50 groups a look took seconds, and the pause after it twice that).
        self._consumers: dict[str, Consumer] = {}

    def close(self) -> None:
        for consumer in self._consumers.values():
            consumer.close()
        self._consumers.clear()

    def highs(self) -> dict[tuple[str, int], int]:
        asked = [key for key, high in self._highs.items() if high < self._full]
        if not asked:
            return dict(self._highs)
        futures = self._admin.list_offsets(
            {TopicPartition(t, p): OffsetSpec.latest() for t, p in asked}, request_timeout=60
        )
        failed = False
        for tp, future in futures.items():
            try:
                self._highs[tp.topic, tp.partition] = future.result(60).offset
            except Exception:  # not created yet
                failed = True
        if failed:
            # An admin client that asked about a topic before it existed keeps failing
            # for it after it was created (at 5,000 partitions, created in two requests,
            # the watch saw 400,000 of 500,000 records for ever; a new client saw all).
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap})
        return dict(self._highs)

    def committed(
        self, group: str, partitions: Sequence[tuple[str, int]] | None = None
    ) -> dict[tuple[str, int], int]:
        """The group's committed offsets on `partitions` (default: every remote
        partition; {} if not readable yet). Called from one thread at a time per group."""
        consumer = self._consumers.get(group)
        if consumer is None:
            consumer = self._consumers[group] = Consumer(
                {"bootstrap.servers": self.bootstrap, "group.id": group}
            )
        try:
            keys = self.remotes if partitions is None else partitions
            wanted = [TopicPartition(t, p) for t, p in keys]
            # A request at a time of _OFFSETS_PER_REQUEST partitions: librdkafka matches
            # the answer to the request by a search, n * n / 2 comparisons a request.
            return {
                (tp.topic, tp.partition): tp.offset
                for at in range(0, len(wanted), _OFFSETS_PER_REQUEST)
                for tp in consumer.committed(wanted[at : at + _OFFSETS_PER_REQUEST], timeout=60)
                if tp.offset >= 0
            }
        except Exception:  # the coordinator or the topics are not there yet
            return {}


def mm2_properties(flow_target: str, groups_regex: str, interval: int) -> dict[str, str]:
    run_id = uuid.uuid4().hex[:8]
    return {
        "clusters": f"{SOURCE.name}, {flow_target}",
        f"{SOURCE.name}.bootstrap.servers": SOURCE.bootstrap,
        f"{flow_target}.bootstrap.servers": TARGETS_BY_NAME[flow_target].bootstrap,
        f"{SOURCE.name}->{flow_target}.enabled": "true",
        f"{SOURCE.name}->{flow_target}.topics": "estate-.*",
        f"{flow_target}->{SOURCE.name}.enabled": "false",
        f"{flow_target}->{SOURCE.name}.emit.heartbeats.enabled": "false",
        "groups": groups_regex,
        "emit.checkpoints.enabled": "true",
        "emit.checkpoints.interval.seconds": str(interval),
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": str(interval),
        "sync.topic.acls.enabled": "false",
        **ONE_BROKER,
        "status.topic.replication.factor": "1",
        **connect_state_properties(flow_target, run_id),
    }


TARGETS_BY_NAME = {spec.name: spec for spec in TARGETS.values()}


class Ours:
    """`replicator run` on the same mm2.properties, in a process of its own."""

    label = "ours"

    def __init__(self, properties: dict[str, str], workdir: Path) -> None:
        self.workdir = workdir
        self.log_file = workdir / "replicator.log"
        self._properties = {
            key: value
            for key, value in properties.items()
            if not key.endswith(("storage.topic", ".group.id"))  # Connect's own
        }
        self._properties["metrics.port"] = str(METRICS_PORT)
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Ours:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "mm2.properties"
        config.write_text("".join(f"{k} = {v}\n" for k, v in self._properties.items()))
        self._state_url = f"sqlite:///{(self.workdir / 'state.db').resolve()}"
        env = {**os.environ, **(allocator.environment() or {})}
        self._log = self.log_file.open("wb")
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "replicator",
                "run",
                "--config",
                str(config),
                "--state-url",
                self._state_url,
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._process is not None
        self._process.terminate()
        try:
            self._process.wait(120)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._log.close()

    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def failure(self) -> str | None:
        """Why the process ended on its own (its log says more), or None while it runs."""
        assert self._process is not None
        code = self._process.poll()
        return None if code is None else f"exited with {code}; see {self.log_file}"

    def commands(self) -> dict[str, float | int]:
        """How long `replicator status` and `flows list` take on this estate, and how
        many series the metrics endpoint serves."""
        config = str(self.workdir / "mm2.properties")
        timings: dict[str, float | int] = {}
        for name, command in (
            ("status_command_s", ["status"]),
            ("flows_list_command_s", ["flows", "list"]),
        ):
            started = time.monotonic()
            subprocess.run(
                [sys.executable, "-m", "replicator", *command, "--config", config],
                capture_output=True,
                check=False,
                env={**os.environ, "REPLICATOR_STATE_URL": self._state_url},
            )
            timings[name] = round(time.monotonic() - started, 2)
        with urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics") as page:
            lines = page.read().decode().splitlines()
        timings["metric_series"] = sum(1 for line in lines if line and not line.startswith("#"))
        return {**timings, **self._operations(config)}

    def _operations(self, config: str) -> dict[str, float | int]:
        """What the DR status page, a supervisor run (and the sample it records in the
        state store) and a failover's translation of every group take at this size."""
        replicator_config = load_config(config)
        [flow] = replicator_config.flows
        store = StateStore(self._state_url)
        try:
            tallies = CheckpointTallies()  # the page's server keeps them between loads
            started = time.monotonic()
            dr_status(replicator_config, store, tallies=tallies)
            page_s = time.monotonic() - started
            started = time.monotonic()
            dr_status(replicator_config, store, tallies=tallies)
            refresh_s = time.monotonic() - started
            started = time.monotonic()
            check(replicator_config, store, None, Bounds())
            supervisor_s = time.monotonic() - started
        finally:
            store.close()
        started = time.monotonic()
        with Checkpointer(flow) as checkpointer:  # cold, as a failover's is
            translated = checkpointer.translate_groups(checkpointer.groups())
        return {
            "status_page_s": round(page_s, 2),
            "status_page_refresh_s": round(refresh_s, 2),
            "supervisor_run_s": round(supervisor_s, 2),
            "failover_translation_s": round(time.monotonic() - started, 2),
            "failover_translation_exact": sum(
                1 for positions in translated.values() for p in positions if p.translation.exact
            ),
        }

    def rounds(self) -> list[float]:
        text = self.log_file.read_text(errors="replace")
        return [float(m.group(2)) for m in _ROUND_LINE.finditer(text)]


class Mm2:
    label = "MM2"

    def __init__(self, properties: dict[str, str], workdir: Path) -> None:
        self._mm2 = MirrorMaker(properties, workdir, heap="1g")
        self._workdir = workdir

    def __enter__(self) -> Mm2:
        self._mm2.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._mm2.stop()

    def pid(self) -> int:
        deadline = time.monotonic() + 30
        while not (found := mirror_maker_pids(self._workdir)) and time.monotonic() < deadline:
            time.sleep(0.2)  # the JVM's command line shows in /proc a moment after start
        (pid,) = found
        return pid

    def rounds(self) -> list[float]:
        return []

    def failure(self) -> str | None:
        return None  # MirrorMaker's launcher restarts nothing: its log says when it fails

    def commands(self) -> dict[str, float | int]:
        return {}


@contextmanager
def clusters() -> Iterator[LocalStack]:
    stack = LocalStack([SOURCE, *TARGETS.values()], data_dir=DATA_DIR, heap=BROKER_HEAP)
    stack.down(wipe=True)
    stack.up(timeout=180)
    try:
        yield stack
    finally:
        stack.down()


class SyncWatch:
    """How many (group, remote partition) pairs have an offset on the target. A
    partition synced stays so: a look asks each group only about its partitions without
    one (at 10,000 partitions and 200 groups, reading every group every look made the
    benchmark the busiest process on the machine; at 5,000 and 50 the last looks read
    250,000 offsets to find a few more)."""

    def __init__(self, view: TargetView, groups: Sequence[str]) -> None:
        self._view = view
        self._synced = 0
        #: Per group, the remote partitions it has no offset on yet: all a look asks.
        self._missing = {g: list(view.remotes) for g in groups}

    def look(self) -> int:
        groups = list(self._missing)
        with ThreadPoolExecutor(8) as pool:
            answers = pool.map(self._view.committed, groups, [self._missing[g] for g in groups])
            for group, found in zip(groups, answers, strict=True):
                left = [key for key in self._missing[group] if key not in found]
                self._synced += len(self._missing[group]) - len(left)
                self._missing[group] = left
                if not left:
                    del self._missing[group]
        return self._synced


def measure(
    system: str,
    runner: Ours | Mm2,
    view: TargetView,
    *,
    groups: list[str],
    total_records: int,
    half: int,
    args: argparse.Namespace,
) -> Result:
    remotes = len(view.remotes)
    wanted_pairs = len(groups) * remotes
    started = time.monotonic()
    first_all = every = synced_at = cpu_synced = None
    synced = 0
    shown = 0.0
    watch = SyncWatch(view, groups)
    with runner:
        pid = runner.pid()
        deadline = started + args.timeout
        while time.monotonic() < deadline:
            if (died := runner.failure()) is not None:
                raise RuntimeError(f"{system} stopped while measured: {died}")
            # Each figure is the middle of the look that saw it: what a look finds was
            # there by its end, and may have been since its start. (Until 2026-12-05 a
            # figure was the end of its look, the groups' read included, and looks came
            # a second apart at the least: a granularity of seconds on figures of ten.)
            looked = time.monotonic()
            if every is None:  # every record there stays there: not asked again
                highs = view.highs()
            read = time.monotonic()
            now = (looked + read) / 2 - started
            if first_all is None and all(h > 0 for h in highs.values()):
                first_all = now
            if every is None and sum(highs.values()) >= total_records:
                every = now
            if every is not None:
                # A partition synced stays so: only a group's other partitions are read
                # again (at 10,000 partitions and 200 groups, reading every group every
                # poll made the benchmark itself the busiest process on the machine; at
                # 5,000 and 50 the last looks read 250,000 offsets to find a few more).
                asked = time.monotonic()
                count = watch.look()
                if count > synced or synced_at is None:  # the last time the count grew
                    seen = (asked + time.monotonic()) / 2 - started
                    synced_at, cpu_synced = seen, cpu_seconds(pid)
                synced = count
                if synced >= wanted_pairs:
                    break
                if now - synced_at > args.settle_seconds:  # no more to come
                    break
            if now - shown >= PROGRESS_S:  # a long watch says where it stands
                shown = now
                print(
                    f"{system} at {now:.0f} s: {sum(highs.values()):,} of {total_records:,} "
                    f"records on the target, {synced:,} of {wanted_pairs:,} group offsets",
                    flush=True,
                )
            # A poll that took long is followed by a pause twice as long: the watch
            # takes at most a third of the time it shares with what it watches.
            time.sleep(max(POLL_S, 2 * (time.monotonic() - read)))
        # The offsets as they stand at the end, every one read again (a look asks
        # only about partitions without one, and a replicator may move them later).
        with ThreadPoolExecutor(8) as pool:
            final = list(pool.map(view.committed, groups))
        exact = sum(1 for found in final for offset in found.values() if offset == half)
        idle = None
        if synced_at is not None:
            before, t0 = cpu_seconds(pid), time.monotonic()
            time.sleep(args.idle_seconds)
            idle = (cpu_seconds(pid) - before) / (time.monotonic() - t0)
        rss = peak_rss_mib(pid)
        rounds = runner.rounds()
        commands = runner.commands()
    print(
        f"{system}: first record everywhere {first_all}, every record {every}, "
        f"synced {synced}/{wanted_pairs} at {synced_at} (exact {exact})"
    )
    return Result(
        system=system,
        first_record_every_partition_s=_round(first_all),
        every_record_s=_round(every),
        every_group_synced_s=_round(synced_at),
        cpu_s_to_synced=_round(cpu_synced),
        synced_group_partitions=synced,
        exact_group_partitions=exact,
        idle_cpu_share=_round(idle, 3),
        peak_rss_mib=round(rss),
        checkpoint_round_first_s=rounds[0] if rounds else None,
        checkpoint_round_median_s=round(statistics.median(rounds), 2) if rounds else None,
        checkpoint_rounds=len(rounds),
        **commands,  # type: ignore[arg-type]
    )


def _round(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=250)
    parser.add_argument("--partitions", type=int, default=4, help="per topic")
    parser.add_argument("--groups", type=int, default=20)
    parser.add_argument("--records", type=int, default=100, help="per partition")
    parser.add_argument("--interval", type=int, default=5, help="checkpoint interval, s")
    parser.add_argument("--timeout", type=float, default=900.0, help="per system, s")
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument(
        "--settle-seconds",
        type=float,
        default=90.0,
        help="stop watching a replicator whose synced count has not grown for this long "
        "(its figure is then the time of the last growth, and the count stays short)",
    )
    parser.add_argument("--systems", default="MM2,ours", help="which, in order")
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="measure every system this many times, the order turned round each time and "
        "every target wiped before its system starts; the table shows each figure's median "
        "(MM2's own time varies by half between runs on one machine)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started_utc = datetime.now(UTC)
    machine = Machine.describe()
    topics = topic_names(args.topics)
    half = args.records // 2
    groups = [f"{GROUP_PREFIX}{i:04d}" for i in range(args.groups)]
    results: list[Result] = []
    with clusters() as stack:
        print(f"creating {len(topics)} topics x {args.partitions} partitions and filling them")
        create_topics(SOURCE.bootstrap, topics, args.partitions)
        fill(SOURCE.bootstrap, topics, args.partitions, args.records)
        commit_groups(
            SOURCE.bootstrap,
            groups,
            [TopicPartition(t, p, half) for t in topics for p in range(args.partitions)],
        )
        total = len(topics) * args.partitions * args.records
        for system in run_order(args.systems.split(","), args.repeats):
            target = TARGETS[system]
            if any(r.system == system for r in results):  # measured before: a fresh target
                stack.down([target.name], wipe=True)
                stack.up(timeout=180, keep_running=True)
            remotes = [(f"{SOURCE.name}.{t}", p) for t in topics for p in range(args.partitions)]
            properties = mm2_properties(target.name, f"{GROUP_PREFIX}.*", args.interval)
            workdir = DATA_DIR / "runs" / system
            runner = Ours(properties, workdir) if system == "ours" else Mm2(properties, workdir)
            view = TargetView(target.bootstrap, remotes, args.records)
            # Each system starts on brokers at rest (the setup, or the system before it,
            # leaves them busy for a while): the order of the systems must not matter.
            quiet = wait_until_quiet(broker_pids(stack))
            try:
                result = measure(
                    system, runner, view, groups=groups, total_records=total, half=half, args=args
                )
            finally:
                view.close()
            results.append(replace(result, quiet_wait_s=quiet))
    setup = {
        "topics": args.topics,
        "partitions_per_topic": args.partitions,
        "partitions": args.topics * args.partitions,
        "groups": args.groups,
        "records_per_partition": args.records,
        "checkpoint_interval_s": args.interval,
        "broker_heap": BROKER_HEAP,
        "repeats": args.repeats,
    }
    path = write_report("estate_scale", started_utc, machine, setup, [asdict(r) for r in results])
    print(table(medians(results)))
    if args.repeats > 1:
        print(ratios(results))
    print(f"results: {path}")
    return 0


def run_order(systems: Sequence[str], repeats: int) -> list[str]:
    """Each system `repeats` times, the order turned round every time (MM2, ours, ours,
    MM2, ...): neither system always runs on brokers the other has just left."""
    order: list[str] = []
    for repeat in range(repeats):
        order.extend(systems if repeat % 2 == 0 else reversed(systems))
    return order


#: The figures whose median the table shows over the repeats.
_MEDIAN_FIELDS = (
    "first_record_every_partition_s",
    "every_record_s",
    "every_group_synced_s",
    "cpu_s_to_synced",
    "idle_cpu_share",
    "peak_rss_mib",
)


def medians(results: Sequence[Result]) -> list[Result]:
    """One result per system: each figure of `_MEDIAN_FIELDS` the median of its runs,
    the rest (counts, commands) those of its median run by time to every group synced
    (a single run is its own median)."""
    merged = []
    for system in dict.fromkeys(r.system for r in results):
        runs = [r for r in results if r.system == system]
        by_synced = sorted(runs, key=lambda r: _or_inf(r.every_group_synced_s))
        middle = by_synced[(len(by_synced) - 1) // 2]
        figures: dict[str, Any] = {}
        for field in _MEDIAN_FIELDS:
            values = [getattr(r, field) for r in runs if getattr(r, field) is not None]
            figures[field] = round(statistics.median(values), 3) if values else None
        merged.append(replace(middle, **figures))
    return merged


def ratios(results: Sequence[Result]) -> str:
    """Ours over MM2 for each pair of runs (the n-th run of each), and of the medians."""
    ours = [r for r in results if r.system == "ours"]
    mm2 = [r for r in results if r.system == "MM2"]
    lines = []
    for field in ("every_group_synced_s", "cpu_s_to_synced", "every_record_s"):
        pairs = [
            _ratio(getattr(o, field), getattr(m, field)) for o, m in zip(ours, mm2, strict=False)
        ]
        shown = ", ".join("-" if r is None else f"{r:.2f}" for r in pairs)
        lines.append(f"ours / MM2, {field}: runs {shown}")
    return "\n".join(lines)


def _ratio(ours: float | None, theirs: float | None) -> float | None:
    return None if ours is None or not theirs else ours / theirs


def _or_inf(value: float | None) -> float:
    return float("inf") if value is None else value


def table(results: Sequence[Result]) -> str:
    header = ["", *(r.system for r in results)]
    rows = [
        [name, *(str(getattr(r, field)) for r in results)]
        for name, field in (
            ("first record on every partition, s", "first_record_every_partition_s"),
            ("every record on the target, s", "every_record_s"),
            ("group offsets synced (last growth), s", "every_group_synced_s"),
            ("CPU seconds to get there", "cpu_s_to_synced"),
            ("group-partitions synced", "synced_group_partitions"),
            ("of which exact", "exact_group_partitions"),
            ("CPU at rest, share of a core", "idle_cpu_share"),
            ("peak RSS, MiB", "peak_rss_mib"),
            ("first checkpoint round, s", "checkpoint_round_first_s"),
            ("median checkpoint round, s", "checkpoint_round_median_s"),
            ("`replicator status`, s", "status_command_s"),
            ("`replicator flows list`, s", "flows_list_command_s"),
            ("metric series served", "metric_series"),
            ("DR status page snapshot, first load, s", "status_page_s"),
            ("DR status page snapshot, a refresh, s", "status_page_refresh_s"),
            ("supervisor run (with its state-store sample), s", "supervisor_run_s"),
            ("failover translation of every group, s", "failover_translation_s"),
            ("... positions translated exactly", "failover_translation_exact"),
            ("brokers at rest before the start after, s", "quiet_wait_s"),
        )
    ]
    return markdown_table(header, rows)


if __name__ == "__main__":
    sys.exit(main())
