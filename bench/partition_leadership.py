"""How long one broker takes to lead an estate's new partitions, with no replicator
running: the floor under every replicator's time to its first records on a fresh
target (issue 41's "say what limited it").

A fresh single-node cluster (the benchmarks' broker, heap `harness.BROKER_HEAP`) is
given `--topics` x `--partitions` partitions in CreateTopics requests of at most
`--per-request` partitions (our topic sync's `CREATE_PARTITIONS_PER_REQUEST`; MM2 sends
one request), and the benchmark polls, twice a second:

- the metadata: every partition has a leader there (what a client waits for);
- ListOffsets of every partition: every one answers (the broker has made itself its
  leader and created its log; until then it answers NOT_LEADER_OR_FOLLOWER, and a
  producer's records for it wait).

    .venv/bin/python bench/partition_leadership.py --topics 1250 --partitions 4

Results go to bench/results/partition_leadership-<UTC>.json and a table on stdout.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from harness import BROKER_HEAP, Machine, markdown_table, write_report

from replicator.engine.topic_sync import CREATE_PARTITIONS_PER_REQUEST
from replicator_lab import ClusterSpec, LocalStack

CLUSTER = ClusterSpec("leaders", 39192)
DATA_DIR = Path(".data/bench-leadership")
POLL_S = 0.5


def create(admin: AdminClient, names: list[str], partitions: int, per_request: int) -> None:
    per = max(1, per_request // partitions)
    for first in range(0, len(names), per):
        batch = [NewTopic(name, partitions, 1) for name in names[first : first + per]]
        for future in admin.create_topics(batch, request_timeout=120).values():
            future.result(timeout=120)


def led_in_metadata(admin: AdminClient, names: list[str], partitions: int) -> bool:
    listed = admin.list_topics(timeout=30).topics
    return all(
        (meta := listed.get(name)) is not None
        and len(meta.partitions) == partitions
        and all(p.leader >= 0 for p in meta.partitions.values())
        for name in names
    )


def answering(admin: AdminClient, names: list[str], partitions: int) -> int:
    """How many of the partitions answer ListOffsets."""
    wanted = {
        TopicPartition(name, p): OffsetSpec.latest() for name in names for p in range(partitions)
    }
    answered = 0
    for future in admin.list_offsets(wanted, request_timeout=30).values():
        try:
            future.result(timeout=60)
            answered += 1
        except KafkaException:
            pass
    return answered


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1250)
    parser.add_argument("--partitions", type=int, default=4, help="per topic")
    parser.add_argument("--per-request", type=int, default=CREATE_PARTITIONS_PER_REQUEST)
    args = parser.parse_args(argv)
    started = datetime.now(UTC)
    machine = Machine.describe()
    names = [f"src.estate-{i:05d}" for i in range(args.topics)]
    total = args.topics * args.partitions
    stack = LocalStack([CLUSTER], data_dir=DATA_DIR, heap=BROKER_HEAP)
    stack.down(wipe=True)
    stack.up()
    try:
        admin = AdminClient({"bootstrap.servers": CLUSTER.bootstrap})
        began = time.monotonic()
        create(admin, names, args.partitions, args.per_request)
        created_s = time.monotonic() - began
        metadata_s = None
        while True:
            if metadata_s is None and led_in_metadata(admin, names, args.partitions):
                metadata_s = time.monotonic() - began
            if metadata_s is not None and answering(admin, names, args.partitions) == total:
                break
            time.sleep(POLL_S)
        served_s = time.monotonic() - began
    finally:
        stack.down(wipe=True)
    figures = {
        "partitions": total,
        "per_request": args.per_request,
        "created_s": round(created_s, 2),
        "led_in_metadata_s": round(metadata_s, 2),
        "every_partition_answering_s": round(served_s, 2),
        "ms_per_partition": round(1000 * served_s / total, 2),
    }
    print(
        markdown_table(
            ["partitions", "created, s", "leaders in metadata, s", "all answering, s", "ms each"],
            [
                [
                    f"{total:,}",
                    f"{created_s:.1f}",
                    f"{metadata_s:.1f}",
                    f"{served_s:.1f}",
                    f"{figures['ms_per_partition']:.2f}",
                ]
            ],
        )
    )
    setup = {"cluster": "one KRaft broker, loopback, heap " + BROKER_HEAP}
    path = write_report("partition_leadership", started, machine, setup, figures)
    print(f"results written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
