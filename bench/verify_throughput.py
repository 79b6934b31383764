"""Records verified per second: `replicator verify` (Spark, local mode) against a plain
single-process confluent-kafka reader doing the same comparison, on the same copy.

    .venv/bin/python bench/verify_throughput.py [--records 5000000] [--partitions 8]
    .venv/bin/python bench/verify_throughput.py --records 1000000 --value-bytes 1000
    .venv/bin/python bench/verify_throughput.py --plan-only 10000

A backlog is preloaded on a fresh source cluster and replicated by our engine;
then both verifiers read every source record and every copy, fingerprint them
(SHA-256 over key, value, timestamp and own headers) and compare per source
offset. "Records verified" counts the source records and their copies, so a
5 M-record flow is 10 M records read. The Spark figure is end to end, as an
operator waits for it: plan, spark-submit (JVM start included), the suites and
Data Docs. Runs with nothing new follow (incremental: what the first proved is not
read again), three, each after 10 s at rest, their median timed against the first.
Last, the clusters' floor: both sides read with nothing done per record
(`bare_reads`), one after the other and at once.
`--server` adds the same first run on a verification server (`replicator
verification-server`, Spark Connect, local[2]) warmed by five runs before it, and
runs there with nothing new, whose suites run in the processes the server keeps
ready (`on_server`).

`--plan-only N` measures planning alone on N partitions (N/4 topics of 4, ten records
each, and on the target their copies as the replicator writes them): the offsets, the
last copy and the oldest record in flight of every partition.

Writes bench/results/verify_throughput-<UTC>.json.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from harness import (
    BROKER_HEAP,
    Machine,
    bench_stack,
    create_topics,
    flow_config,
    markdown_table,
    remote_topic,
    replicated_backlog,
    wait_for_leaders,
    write_report,
)

from replicator.config.model import FlowConfig
from replicator.engine.headers import (
    OFFSET_HEADER,
    OURS,
    SOURCE_HEADER,
    encode_offset,
    replica_source_offset,
)
from replicator.statestore import StateStore
from replicator.verification.host import local_server
from replicator.verification.plan import PartitionWindow, plan_verification
from replicator.verification.run import verify
from replicator_lab import ClusterSpec

SOURCE = ClusterSpec("src", 37092)
TARGET = ClusterSpec("dst", 47092)
DATA_DIR = Path(".data/bench-verify")
TOPIC = "verify.bench"
VALUE_BYTES = 100
#: Runs that warm a verification server before the one measured (`on_server`): its JIT
#: compilers and planner warm over several (1 KB, 2026-12-06, the first four runs of a
#: server: 36.4, 27.0, 25.4, 23.6 s; later ones 19-22 s).
WARM_UPS = 5
#: Runs with nothing new after a first run (the median is reported), and the seconds
#: at rest before each.
AGAIN_RUNS = 3
REST_S = 10


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


def on_server(flow: FlowConfig) -> dict[str, float]:
    """The flow's first verification on a verification server (`replicator
    verification-server`, local[2]) kept warm by `WARM_UPS` runs before it, as a server
    that verifies flows hour after hour is: every run is the flow's first (a state store
    of its own each), so each reads everything."""
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        with local_server(folder / "server.log") as url:
            seconds = []
            for run in [*(f"warm-up {n}" for n in range(1, WARM_UPS + 1)), "measured"]:
                print(f"replicator verify on a verification server ({run})")
                store = StateStore(f"sqlite:///{folder}/{run}.db")
                began = time.monotonic()
                result = verify(flow, store, master=url, results=folder)
                seconds.append((time.monotonic() - began, result.summary["seconds"]["spark"]))
                if not result.success:
                    raise RuntimeError(f"verification failed on a correct copy: {result.summary}")
                if run == "measured":
                    again_s, again_runs, again_phases = _again(
                        flow, store, url, folder, "on the verification server"
                    )
    *warm_ups, (measured, job) = seconds
    return {
        "server_warmup_seconds": [round(w, 1) for w, _ in warm_ups],
        "server_seconds": round(measured, 1),
        "server_job_seconds": job,
        "server_second_run_seconds": again_s,
        "server_second_runs": again_runs,
        "server_second_run_phases": again_phases,
    }


def _again(
    flow: FlowConfig, store: StateStore, master: str, results: Path, where: str
) -> tuple[float, list[float], dict]:
    """The flow verified again with nothing new, `AGAIN_RUNS` times, each after
    `REST_S` seconds at rest (as an hourly run finds the machine, not in the wake of
    the run before): the median seconds, each run's, and the last one's phases (where
    its suites ran). Each must pass and verify nothing anew."""
    seconds = []
    for _ in range(AGAIN_RUNS):
        time.sleep(REST_S)
        print(f"replicator verify again, nothing new ({where})")
        began = time.monotonic()
        again = verify(flow, store, master=master, results=results)
        seconds.append(round(time.monotonic() - began, 2))
        if not again.success or again.summary["verified"]["records_now"]:
            raise RuntimeError(f"the second run verified anew: {again.summary}")
        phases = {**again.summary["seconds"], "suites_ran": again.summary["suites_ran"]}
        print(f"  {seconds[-1]:.2f} s: {phases}")
    return statistics.median(seconds), seconds, phases


def bare_reads(windows: list[PartitionWindow], source: str, target: str) -> tuple[float, float]:
    """The clusters' floor: seconds to read every record of both sides with nothing done
    per record (librdkafka, whole batches), the two sides one after the other, then both
    at once. No verifier reads faster on this machine."""

    def side(bootstrap: str, ranges: list[tuple[str, int, int, int]]) -> None:
        for topic, partition, start, end in ranges:
            for _ in _read(bootstrap, topic, partition, start, end):
                pass

    sides = [
        (source, [(w.topic, w.partition, w.source_start, w.source_end) for w in windows]),
        (target, [(w.remote_topic, w.partition, w.target_start, w.target_end) for w in windows]),
    ]
    began = time.monotonic()
    for bootstrap, ranges in sides:
        side(bootstrap, ranges)
    one_after_other = time.monotonic() - began
    began = time.monotonic()
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda s: side(*s), sides))
    return one_after_other, time.monotonic() - began


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
    parser.add_argument("--value-bytes", type=int, default=VALUE_BYTES)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--server",
        action="store_true",
        help="also verify on a verification server (Spark Connect, local[2]) kept warm "
        "by runs before the one measured",
    )
    parser.add_argument(
        "--plan-only",
        type=int,
        metavar="PARTITIONS",
        help="measure planning alone on this many partitions (in topics of 4)",
    )
    args = parser.parse_args(argv)
    started = datetime.now(UTC)
    machine = Machine.describe()
    if args.plan_only:
        return plan_only(args.plan_only, started, machine)
    with bench_stack(SOURCE, TARGET, DATA_DIR) as stack:
        flow = replicated_backlog(stack, TOPIC, args.records, args.value_bytes, args.partitions)
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
            again_s, again_runs, _ = _again(flow, store, args.master, Path(scratch), args.master)
        served = on_server(flow) if args.server else {}
        print("single-process reader")
        windows = plan_verification(flow).windows
        began = time.monotonic()
        faults = single_reader(windows, SOURCE.bootstrap, TARGET.bootstrap, SOURCE.name)
        single_s = time.monotonic() - began
        if faults:
            raise RuntimeError(f"the single reader found {faults} faults on a correct copy")
        print("bare reads (nothing done per record)")
        bare_s, bare_parallel_s = bare_reads(windows, SOURCE.bootstrap, TARGET.bootstrap)
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
        "spark_job_records_per_s": round(read / phases["spark"]),
        "spark_job_over_single": round(single_s / phases["spark"], 2),
        "bare_read_seconds": round(bare_s, 1),
        "bare_read_parallel_seconds": round(bare_parallel_s, 1),
        "second_run_seconds": again_s,
        "second_runs": again_runs,
        "second_over_first": round(again_s / spark_s, 3),
        **served,
    }
    rows = []
    if served:
        figures["server_over_single"] = round(single_s / served["server_seconds"], 2)
        figures["server_job_over_single"] = round(single_s / served["server_job_seconds"], 2)
        again_served = served["server_second_run_seconds"]
        figures["server_second_over_first"] = round(again_served / served["server_seconds"], 3)
        figures["server_second_over_spark_submit_first"] = round(again_served / spark_s, 3)
        rows = [
            [
                "replicator verify on a warm verification server (end to end)",
                f"{served['server_seconds']:.1f}",
                f"{read / served['server_seconds']:,.0f}",
            ],
            [
                "the Spark job alone on that server",
                f"{served['server_job_seconds']:.1f}",
                f"{read / served['server_job_seconds']:,.0f}",
            ],
            [
                "again on that server, nothing new (warm suites, median of 3)",
                f"{served['server_second_run_seconds']:.2f}",
                "-",
            ],
        ]
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
                    "the Spark job alone (spark-submit)",
                    f"{phases['spark']:.1f}",
                    f"{read / phases['spark']:,.0f}",
                ],
                [
                    "single-process confluent-kafka reader",
                    f"{single_s:.1f}",
                    f"{read / single_s:,.0f}",
                ],
                [
                    "bare reads, both sides one after the other (the floor)",
                    f"{bare_s:.1f}",
                    f"{read / bare_s:,.0f}",
                ],
                [
                    "bare reads, both sides at once (the floor)",
                    f"{bare_parallel_s:.1f}",
                    f"{read / bare_parallel_s:,.0f}",
                ],
                *rows,
                ["replicator verify again, nothing new (median of 3)", f"{again_s:.2f}", "-"],
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
            "value_bytes": args.value_bytes,
            "master": args.master,
        },
        figures,
    )
    print(f"results written to {path}")
    return 0


def plan_only(partitions: int, started: datetime, machine: Machine) -> int:
    """Plan a verification of `partitions` partitions (topics of 4, ten records each,
    their copies on the target), and time it."""
    topics = [f"plan.bench.{i:05d}" for i in range(max(1, partitions // 4))]
    with bench_stack(SOURCE, TARGET, DATA_DIR):
        print(f"creating {len(topics) * 4:,} partitions on each cluster")
        for first in range(0, len(topics), 500):  # the controller's batch bound
            chunk = topics[first : first + 500]
            create_topics(SOURCE.bootstrap, chunk, 4)
            create_topics(TARGET.bootstrap, [remote_topic(SOURCE.name, t) for t in chunk], 4)
        wait_for_leaders(SOURCE.bootstrap, topics, 4)
        wait_for_leaders(TARGET.bootstrap, [remote_topic(SOURCE.name, t) for t in topics], 4)
        print("writing ten records to each, and their copies")
        _ten_each(topics)
        flow = flow_config(SOURCE, TARGET, topics)
        timings = []
        for _ in range(3):
            began = time.monotonic()
            plan = plan_verification(flow)
            timings.append(time.monotonic() - began)
        assert len(plan.windows) == len(topics) * 4, len(plan.windows)
        short = [w for w in plan.windows if w.source_end - w.source_start != 10]
        if short:
            raise RuntimeError(f"{len(short)} windows are not ten records, e.g. {short[0]}")
    figures = {
        "partitions": len(topics) * 4,
        "plan_seconds": [round(t, 2) for t in timings],
        "plan_seconds_median": round(sorted(timings)[1], 2),
    }
    print(markdown_table(["partitions", "plan, s (three runs)"], [
        [f"{len(topics) * 4:,}", ", ".join(f"{t:.1f}" for t in timings)]
    ]))  # fmt: skip
    path = write_report(
        "verify_throughput",
        started,
        machine,
        {"clusters": "one KRaft broker each, loopback, heap " + BROKER_HEAP, "plan_only": True},
        figures,
    )
    print(f"results written to {path}")
    return 0


def _ten_each(topics: list[str]) -> None:
    """Ten records in each partition of `topics`, and their copies on the target (with
    the provenance a flow writes), so that the plan finds a last copy everywhere."""
    failed: list[str] = []

    def delivered(error: object, _message: object) -> None:
        if error is not None:
            failed.append(str(error))

    settings = {"linger.ms": 20, "enable.idempotence": True}
    source = Producer({"bootstrap.servers": SOURCE.bootstrap, **settings})
    target = Producer({"bootstrap.servers": TARGET.bootstrap, **settings})
    alias = SOURCE.name.encode()

    def produce(producer: Producer, topic: str, partition: int, headers: list) -> None:
        while True:
            try:
                producer.produce(
                    topic, b"v", partition=partition, headers=headers, on_delivery=delivered
                )
                return
            except BufferError:  # the local queue is full (100,000 records): wait
                producer.poll(1)

    for topic in topics:
        for partition in range(4):
            for offset in range(10):
                produce(source, topic, partition, [])
                headers = [(SOURCE_HEADER, alias), (OFFSET_HEADER, encode_offset(offset))]
                produce(target, remote_topic(SOURCE.name, topic), partition, headers)
        source.poll(0)
        target.poll(0)
    for producer in (source, target):
        if producer.flush(300):
            raise RuntimeError("records not written within 300 s")
    if failed:
        raise RuntimeError(f"{len(failed)} records not written, e.g. {failed[0]}")


if __name__ == "__main__":
    sys.exit(main())
