"""The replication loop's own cost per record, with no broker: what one Python
thread spends to rewrite and hand over each record.

With one task, that thread is the limit at 100 B (a full core while brokers and
librdkafka's threads have room), so its cost per record is the figure to lower;
`compare_mm2.py` then says what a change is worth end to end. Here the loop
(`ReplicationTask._replicate`) gets batches of real `confluent_kafka.Message`
objects, 12 partitions in runs of 500 records as fetch responses deliver them, and
its producer is a real `confluent_kafka.Producer` whose broker never answers, so
`produce()` does all its work (headers, queueing) but nothing is sent. This is the
Python loop (`replicator.data.path = python`, and what runs where the compiled data
plane is absent; the compiled path is measured end to end by `compare_mm2.py`). For
reference, the same `produce()` calls alone from Python, with the replicas' three
headers (source cluster, offset and topic): the floor of any loop that hands each
record to confluent-kafka.

Run: `.venv/bin/python bench/hot_loop.py [--records N] [--sizes 100,1024] [--repeats 7]`.
Prints nanoseconds per record (median and best of the repeats) and writes
`bench/results/hot_loop-<UTC timestamp>.json`.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

from confluent_kafka import Message, Producer
from harness import KEY_BYTES, Machine, flow_config, markdown_table, write_report

from replicator.engine.collector import pace_for_replication
from replicator.engine.headers import OFFSET_HEADER, SOURCE_HEADER, TOPIC_HEADER, encode_offset
from replicator.engine.partition import PartitionTracker
from replicator.engine.size_limits import SizeHold
from replicator.engine.task import ReplicationTask
from replicator_lab import ClusterSpec

PARTITIONS = 12
RUN_LENGTH = 500  # records of one partition in a row, as a fetch response holds them
BATCH = 10_000  # what one consume() returns at most (the task's batch)
REMOTE = "src.bench"


@dataclass(frozen=True)
class LoopCost:
    """Nanoseconds per record at one value size."""

    value_bytes: int
    records: int
    loop_ns_median: float  # the Python loop
    loop_ns_best: float
    produce_ns_median: float  # produce() alone, with the replicas' headers
    produce_ns_best: float


def _producer() -> Producer:
    """Queues everything, sends nothing: no broker listens on port 1."""
    return Producer(
        {
            "bootstrap.servers": "127.0.0.1:1",
            "enable.idempotence": True,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 4_000_000,
            "log_level": 0,
        }
    )


def _batches(records: int, value_bytes: int) -> list[list[Message]]:
    offsets = [0] * PARTITIONS
    messages = []
    for index in range(records):
        partition = (index // RUN_LENGTH) % PARTITIONS
        messages.append(
            Message(
                topic="bench",
                partition=partition,
                offset=offsets[partition],
                key=b"%0*d" % (KEY_BYTES, index),
                value=b"v" * value_bytes,
                headers=None,
                timestamp=(1, 1_700_000_000_000 + index),
            )
        )
        offsets[partition] += 1
    return [messages[i : i + BATCH] for i in range(0, records, BATCH)]


def _per_record_ns(work: Callable[[], None], records: int) -> float:
    started = time.perf_counter()
    work()
    return (time.perf_counter() - started) / records * 1e9


def _task(producer: Producer) -> ReplicationTask:
    # A flow as users write it; nothing connects to its clusters here.
    flow = flow_config(ClusterSpec("src", 17092), ClusterSpec("dst", 27092), ["bench"])
    task = ReplicationTask(flow)
    task._compose(_NoConsumer(), _NoSyncs(), {}, producer, resume_points=None)  # type: ignore[arg-type]
    for partition in range(PARTITIONS):
        tracker = PartitionTracker(
            task.flow.name, "bench", partition, REMOTE, SizeHold(limit=1 << 30),
            next_offset=0, resuming=False, producer=producer,
        )  # fmt: skip
        task._parts.partitions.add(tracker)
    return task


class _NoConsumer:
    """The source consumer of a task that is handed its batches: never paused here."""

    def pause(self, partitions: object) -> None:
        raise AssertionError("the benchmark's records all fit: nothing pauses")


class _NoSyncs:
    """The offset-sync writer of a task whose reports are measured, not published."""

    def acknowledged(self, key: object, **run: object) -> None:
        pass


def measure(records: int, value_bytes: int, repeats: int) -> LoopCost:
    producer = _producer()
    task = _task(producer)
    batches = _batches(records, value_bytes)

    def replicate() -> None:
        for batch in batches:
            task._replicate(task._parts, batch)

    def produce_only() -> None:
        produce, source = producer.produce, (SOURCE_HEADER, b"src")
        topic = (TOPIC_HEADER, b"bench")
        for batch in batches:
            for m in batch:
                headers = [source, (OFFSET_HEADER, encode_offset(m.offset())), topic]
                produce(REMOTE, m.value(), m.key(), m.partition(), timestamp=0, headers=headers)

    def reset() -> None:
        """Drop what was queued; the purged runs' reports are stale (epoch moved on)."""
        producer.purge(in_queue=True, in_flight=True)
        for tracker in task._parts.partitions.values():
            tracker.epoch += 1
        producer.poll(0)

    # Alternated, so that both see the same heap and producer state.
    works = [replicate, produce_only]
    times: list[list[float]] = [[], []]
    for _ in range(repeats):
        for work, series in zip(works, times, strict=True):
            series.append(_per_record_ns(work, records))
            reset()
    return LoopCost(
        value_bytes, records,
        *(figure for series in times for figure in (statistics.median(series), min(series))),
    )  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000, help="per size (200000)")
    parser.add_argument("--sizes", default="100,1024", help="value bytes (100,1024)")
    parser.add_argument("--repeats", type=int, default=7, help="timed passes per size (7)")
    args = parser.parse_args(argv)
    pace_for_replication()  # as in a replicating process
    started, machine = datetime.now(UTC), Machine.describe()
    sizes = [int(size) for size in args.sizes.split(",")]
    results = [measure(args.records, size, args.repeats) for size in sizes]
    header = ["value B", "Python loop ns/record (median, best)", "produce() alone"]
    rows = [
        [
            str(r.value_bytes),
            f"{r.loop_ns_median:,.0f}, {r.loop_ns_best:,.0f}",
            f"{r.produce_ns_median:,.0f}, {r.produce_ns_best:,.0f}",
        ]
        for r in results
    ]
    print(markdown_table(header, rows))
    setup = {"partitions": PARTITIONS, "run_length": RUN_LENGTH, "batch": BATCH}
    path = write_report("hot_loop", started, machine, setup, [asdict(r) for r in results])
    print(f"\nwritten to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
