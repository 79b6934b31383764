"""Where a record waits inside our replicator's Kafka clients, from librdkafka's own
statistics (`statistics.interval.ms`, STATISTICS.md in librdkafka).

The benchmark turns them on for the two clients of the data path, the source consumer
and the target producer, in every replicator process; each sample goes as one JSON line
to a file of the run's folder. `client_waits` reduces the samples taken while records
moved to medians an engineer can read:

- consumer: how many fetched records wait in the consumer's queue for the Python loop
  (`fetchq_cnt`; near zero means the loop waits for fetches, high means the fetcher is
  ahead; every partition's fetch queue forwards to the one queue `consume` reads, and
  librdkafka reports that queue's length for each, so the figure is their maximum,
  not their sum), and the fetch round trip to the source broker;
- producer: how long a record waits in the producer's queue before it is sent
  (`int_latency`: linger, batching and a full in-flight window), in the output buffer
  (`outbuf_latency`), and the produce round trip (`rtt`: the target broker's append);
  how many requests wait for an answer (`waitresp_cnt`, at most
  `max.in.flight.requests.per.connection`), and the size of the batches sent.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from replicator.config import FlowConfig

STATS_INTERVAL_MS = 1000


class StatsFile:
    """librdkafka's `stats_cb`: each sample as one line of `<folder>/<kind>-<pid>.jsonl`.
    A class (not a closure) so that the flow carrying it pickles into a spawned process."""

    def __init__(self, folder: Path, kind: str) -> None:
        self.folder = folder
        self.kind = kind

    def __call__(self, sample: str) -> None:
        path = self.folder / f"{self.kind}-{os.getpid()}.jsonl"
        with path.open("a", encoding="utf-8") as out:
            out.write(sample.replace("\n", " ") + "\n")


def with_statistics(flow: FlowConfig, folder: Path) -> FlowConfig:
    """`flow` with statistics of its source consumer and target producer written to
    `folder` every STATS_INTERVAL_MS."""
    folder.mkdir(parents=True, exist_ok=True)

    def stats(kind: str) -> dict[str, Any]:
        return {"statistics.interval.ms": STATS_INTERVAL_MS, "stats_cb": StatsFile(folder, kind)}

    source = replace(flow.source, consumer={**flow.source.consumer, **stats("consumer")})
    target = replace(flow.target, producer={**flow.target.producer, **stats("producer")})
    return replace(flow, source=source, target=target)


@dataclass(frozen=True)
class ClientWaits:
    """Medians over the samples taken while records moved (milliseconds, counts, bytes)."""

    samples: int
    consumer_queued_records: float  # fetched, waiting for the Python loop (the shared queue)
    fetch_rtt_ms: float
    producer_queued_records: float  # handed to the producer, not yet acknowledged
    producer_queue_ms: float  # int_latency: produce() until the record is in a request
    producer_outbuf_ms: float  # a request waiting to be sent
    produce_rtt_ms: float  # request sent until the target broker answered
    produce_rtt_p99_ms: float
    requests_in_flight: float  # waitresp_cnt
    batch_bytes: float  # batchsize avg per topic
    batch_records: float  # batchcnt avg per topic


def _clients(folder: Path, kind: str, until: float) -> Iterator[list[dict[str, Any]]]:
    """Each client's samples up to the wall-clock time `until`, in order: a file per
    process, a name per client in it."""
    for path in sorted(folder.glob(f"{kind}-*.jsonl")):
        by_name: dict[str, list[dict[str, Any]]] = {}
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                sample = json.loads(line)
                if sample["time"] > until:
                    break
                by_name.setdefault(sample["name"], []).append(sample)
        yield from by_name.values()


def _moving(samples: Iterable[dict[str, Any]], counter: str) -> list[dict[str, Any]]:
    """The samples of one client in which `counter` (txmsgs, rxmsgs) grew."""
    moving, last = [], None
    for sample in samples:
        if last is not None and sample[counter] > last:
            moving.append(sample)
        last = sample[counter]
    return moving


def _brokers(sample: dict[str, Any]) -> list[dict[str, Any]]:
    """The sample's real brokers (not the bootstrap entries, nodeid -1)."""
    return [b for b in sample["brokers"].values() if b.get("nodeid", -1) >= 0]


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _per_client(folder: Path, kind: str, counter: str, until: float) -> list[dict[str, Any]]:
    return [s for samples in _clients(folder, kind, until) for s in _moving(samples, counter)]


def _partitions(sample: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for topic in sample["topics"].values():
        yield from (p for p in topic["partitions"].values() if p["partition"] >= 0)


@dataclass(frozen=True)
class WorkerShare:
    """What one replicator process's consumer did while records moved."""

    partitions: int  # partitions it fetched records of
    records: int
    records_per_s: float


def worker_shares(folder: Path, topic: str, until: float) -> list[WorkerShare]:
    """One entry per replicator process (its source consumer): with `--tasks N`, how
    evenly the group protocol shared `topic`'s partitions, and each worker's rate."""
    shares = []
    for samples in _clients(folder, "consumer", until):
        moving = _moving(samples, "rxmsgs")
        if not moving:
            shares.append(WorkerShare(0, 0, 0.0))
            continue
        before = samples[samples.index(moving[0]) - 1]
        records = moving[-1]["rxmsgs"] - before["rxmsgs"]
        seconds = (moving[-1]["ts"] - before["ts"]) / 1e6
        partitions = moving[-1]["topics"].get(topic, {}).get("partitions", {}).values()
        fetched = [p for p in partitions if p["partition"] >= 0 and p["rxmsgs"] > 0]
        shares.append(WorkerShare(len(fetched), records, records / seconds if seconds else 0.0))
    return shares


def client_waits(folder: Path, until: float, remote: str) -> ClientWaits | None:
    """The medians of the samples in `folder` taken up to `until` (wall clock, s: the
    end of the backlog, before the latency phase); None without samples. Batch sizes
    are those of the `remote` topic's: the heartbeats' and status' one-record batches
    would otherwise weigh as much."""
    consumed = _per_client(folder, "consumer", "rxmsgs", until)
    produced = _per_client(folder, "producer", "txmsgs", until)
    if not consumed or not produced:
        return None
    ms = 1 / 1000  # librdkafka's window statistics are in microseconds

    def topic_avg(sample: dict[str, Any], window: str) -> list[float]:
        stats = sample["topics"].get(remote)
        return [stats[window]["avg"]] if stats and stats[window]["cnt"] else []

    def broker_window(samples: list[dict[str, Any]], window: str, stat: str) -> float:
        return _median(
            [b[window][stat] * ms for s in samples for b in _brokers(s) if b[window]["cnt"]]
        )

    return ClientWaits(
        samples=len(produced),
        consumer_queued_records=_median(
            [max((p["fetchq_cnt"] for p in _partitions(s)), default=0) for s in consumed]
        ),
        fetch_rtt_ms=broker_window(consumed, "rtt", "avg"),
        producer_queued_records=_median([s["msg_cnt"] for s in produced]),
        producer_queue_ms=broker_window(produced, "int_latency", "avg"),
        producer_outbuf_ms=broker_window(produced, "outbuf_latency", "avg"),
        produce_rtt_ms=broker_window(produced, "rtt", "avg"),
        produce_rtt_p99_ms=broker_window(produced, "rtt", "p99"),
        requests_in_flight=_median([b["waitresp_cnt"] for s in produced for b in _brokers(s)]),
        batch_bytes=_median([v for s in produced for v in topic_avg(s, "batchsize")]),
        batch_records=_median([v for s in produced for v in topic_avg(s, "batchcnt")]),
    )
