"""The engine's two data paths side by side, on the same brokers, in one run.

Alternates runs of `replicator.data.path = python` and `compiled` (or the order
`--paths` gives) over a freshly preloaded 12-partition topic of 100 B records, one
worker each (`ReplicationTask` in a spawned process, as `compare_mm2.py` runs ours),
and prints each run's steady and warm rates and its CPU per million records. With
`--mover-alone`, it also drives a bare `Mover` (no engine around it) over the same
backlog, for what the compiled part costs by itself.

Made for the data plane's performance work (docs/dataplane.md, "Performance"): the
ratios between the paths, not the absolute figures, are what it is for. Run it on a
quiet machine. The spawned processes run on the allocator `replicator run` chooses
(`replicator.allocator`: jemalloc when installed); `REPLICATOR_ALLOCATOR=system` before
the command measures both on the C library's malloc. The bare Mover runs in this
process, on the allocator the command started with (`LD_PRELOAD=libjemalloc.so.2
MALLOC_CONF=oversize_threshold:0` before it for jemalloc as `replicator run` tunes it).

Run: `.venv/bin/python bench/data_paths.py [--records 1000000]
[--paths python,compiled,python,compiled] [--mover-alone]`.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic
from harness import (
    KEY_BYTES,
    OurReplicator,
    TargetWatermarks,
    bench_stack,
    broker_pids,
    create_topics,
    delete_topics,
    measure_backlog,
    preload,
    remote_topic,
)

from replicator import allocator
from replicator.config import load_config
from replicator.config.model import FlowConfig
from replicator.engine.headers import OFFSET_HEADER, OURS, TOPIC_HEADER
from replicator.engine.mover_writer import mover_settings, mover_source_config
from replicator.engine.replica_producers import gapless_producer_config
from replicator.engine.size_limits import SizeLimits
from replicator_lab import ClusterSpec, LocalStack

SOURCE = ClusterSpec("src", 37092)
TARGET = ClusterSpec("dst", 47092)
DATA_DIR = Path(".data/bench-data-paths")
PARTITIONS = 12
VALUE_BYTES = 100


def flow_config(topic: str, path: str) -> FlowConfig:
    flow = f"{SOURCE.name}->{TARGET.name}"
    return load_config(
        {
            "clusters": f"{SOURCE.name}, {TARGET.name}",
            f"{SOURCE.name}.bootstrap.servers": SOURCE.bootstrap,
            f"{TARGET.name}.bootstrap.servers": TARGET.bootstrap,
            f"{flow}.enabled": "true",
            f"{flow}.topics": topic,
            "tasks.max": "1",
            "replication.factor": "1",
            "heartbeats.topic.replication.factor": "1",
            "checkpoints.topic.replication.factor": "1",
            "offset-syncs.topic.replication.factor": "1",
            "status.topic.replication.factor": "1",
            "replicator.data.path": path,
        }
    ).flow(flow)


def engine_run(stack: LocalStack, topic: str, path: str, records: int) -> str:
    with OurReplicator(flow_config(topic, path)) as replicator:
        figures = measure_backlog(
            replicator,
            TargetWatermarks(TARGET.bootstrap, remote_topic(SOURCE.name, topic), PARTITIONS),
            records=records,
            record_bytes=KEY_BYTES + VALUE_BYTES,
            timeout=900,
            brokers=broker_pids(stack),
        )
    return (
        f"{path:9s} steady {figures.steady_records_per_s:9,.0f} rec/s, warm "
        f"{figures.warm_records_per_s:9,.0f} rec/s, CPU {figures.cpu_s:5.1f} s, warm "
        f"{figures.warm_cpu_s_per_million:4.1f} CPU-s/M"
    )


def mover_run(topic: str, records: int) -> str:
    from replicator import _dataplane  # noqa: PLC0415 - only for this mode

    remote = remote_topic(SOURCE.name, topic)
    admin = AdminClient({"bootstrap.servers": TARGET.bootstrap})
    admin.create_topics([NewTopic(remote, PARTITIONS, 1)])[remote].result()
    flow = flow_config(topic, "compiled")
    mover = _dataplane.Mover(
        mover_source_config(flow),
        mover_settings(gapless_producer_config(flow, SizeLimits())),
        [("__dr_src", SOURCE.name.encode())],
        offset_header=OFFSET_HEADER,
        topic_header=TOPIC_HEADER,
        reserved_headers=sorted(OURS),
    )
    mover.assign([(topic, p, 0, remote) for p in range(PARTITIONS)])
    before, started, done = resource.getrusage(resource.RUSAGE_SELF), time.monotonic(), 0
    while done < records:
        mover.move_records(10_000, 0.2)
        done += sum(report[3] for report in mover.progress().values())
    mover.flush(30)
    after, wall = resource.getrusage(resource.RUSAGE_SELF), time.monotonic() - started
    mover.close()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return (
        f"Mover alone {records / wall:9,.0f} rec/s, CPU {cpu:5.1f} s, "
        f"{cpu / (records / 1e6):4.1f} CPU-s/M"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--paths", default="python,compiled,python,compiled")
    parser.add_argument("--mover-alone", action="store_true")
    args = parser.parse_args()
    preferred = allocator.environment() or os.environ
    print(f"{allocator.ENV}={allocator.choice()}: LD_PRELOAD={preferred.get('LD_PRELOAD', '')!r}")
    with bench_stack(SOURCE, TARGET, DATA_DIR) as stack:
        runs = args.paths.split(",") + (["mover", "mover"] if args.mover_alone else [])
        for number, path in enumerate(runs):
            topic = f"paths-{number}"
            create_topics(SOURCE.bootstrap, [topic], PARTITIONS)
            preload(SOURCE.bootstrap, topic, args.records, VALUE_BYTES, PARTITIONS)
            if path == "mover":
                line = mover_run(topic, args.records)
            else:
                line = engine_run(stack, topic, path, args.records)
            print(f"run {number + 1}: {line}; load {os.getloadavg()[0]:.1f}", flush=True)
            delete_topics(SOURCE.bootstrap, [topic])
            delete_topics(TARGET.bootstrap, [remote_topic(SOURCE.name, topic)])


if __name__ == "__main__":
    main()
