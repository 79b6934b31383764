"""Seconds to translate a consumer group's positions exactly: what a failover's
`checkpoint` and `commit_offsets` steps spend, while applications wait (RTO).

    .venv/bin/python bench/translation_latency.py [--partitions 6] [--records 60000] [--runs 3]

A backlog is preloaded and replicated by our engine; a group commits a position
in the middle of every partition; then `Checkpointer.translate_group` runs with
the range readers' `fetch.wait.max.ms` at librdkafka's default (500 ms, how it was)
and at ours (10 ms), alternating on the same brokers. Medians and their ratio are
printed; bench/results/translation_latency-<UTC>.json has every run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from confluent_kafka import TopicPartition
from harness import (
    Machine,
    bench_stack,
    markdown_table,
    replicated_backlog,
    write_report,
)

from replicator.config import FlowConfig
from replicator.kafka import range_reads
from replicator.offsets.checkpoints import Checkpointer
from replicator.offsets.groups import GroupAdmin
from replicator_lab import ClusterSpec

SOURCE = ClusterSpec("src", 36092)
TARGET = ClusterSpec("dst", 46092)
TOPIC = "translation.bench"
GROUP = "translation-bench"
VALUE_BYTES = 100
SETTINGS_MS = {"librdkafka default": 500, "ours": 10}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--records", type=int, default=60_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    started = datetime.now(UTC)
    data_dir = Path(tempfile.mkdtemp(prefix="bench-translation-"))
    with bench_stack(SOURCE, TARGET, data_dir) as stack:
        flow = replicated_backlog(stack, TOPIC, args.records, VALUE_BYTES, args.partitions)
        per_partition = args.records // args.partitions
        GroupAdmin(flow.source).commit(
            GROUP, [TopicPartition(TOPIC, p, per_partition // 2) for p in range(args.partitions)]
        )
        seconds: dict[str, list[float]] = {label: [] for label in SETTINGS_MS}
        for _ in range(args.runs):
            for label, wait_ms in SETTINGS_MS.items():
                seconds[label].append(_translate(flow, wait_ms, args.partitions))
    medians = {label: statistics.median(runs) for label, runs in seconds.items()}
    ratio = medians["ours"] / medians["librdkafka default"]
    rows = [[label, f"{medians[label]:.2f}", " ".join(f"{s:.2f}" for s in runs)]
            for label, runs in seconds.items()]  # fmt: skip
    print(markdown_table(["fetch.wait.max.ms", "median s", "runs s"], rows))
    print(f"ours / default: {ratio:.2f}x the time ({args.partitions} partitions, one group)")
    path = write_report(
        "translation_latency",
        started,
        Machine.describe(),
        {"partitions": args.partitions, "records": args.records, "runs": args.runs},
        {"seconds": seconds, "medians": medians, "ratio": ratio},
    )
    print(f"results: {path}")
    return 0


def _translate(flow: FlowConfig, wait_ms: int, partitions: int) -> float:
    range_reads.FETCH_WAIT_MS = wait_ms  # the setting under test
    with Checkpointer(flow) as checkpointer:
        began = time.monotonic()
        positions = checkpointer.translate_group(GROUP)
        elapsed = time.monotonic() - began
    exact = sum(p.translation.exact for p in positions)
    if exact != partitions:
        raise RuntimeError(f"{exact} of {partitions} positions translated exactly")
    return elapsed


if __name__ == "__main__":
    sys.exit(main())
