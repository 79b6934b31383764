"""Reading a known offset range of a partition and stopping at its end: the
consumer every tool-side reader uses (`range_reader`: tails, translations,
progress, compacted topics), the one loop that reads a range with it
(`RangeReader.messages`) and the one backward scan for the last record of a kind
(`RangeReader.last`: the task's resume point and the translation's last replica).

Two settings make it fast, both measured:

- `fetch.wait.max.ms`. A reader that reached a partition's end leaves a fetch
  waiting at the broker for new records (500 ms by default), and the fetch for the
  next range it is assigned queues behind it: a bisection over a partition, or a
  scan of a dozen tails on a rebalance, paid half a second per step. With 10 ms it
  pays almost nothing (measured: 15 probes after reads to the end took 13.1 s with
  the default, 0.8 s with 10 ms; `bench/translation_latency.py`). Nothing here
  waits for new records.
- Waiting for one record, not a batch. `consume(n, timeout)` returns when it has
  `n` records or `timeout` has passed, and a range's batch is rarely full (markers
  and the partition end are not records): with a 1 s timeout, every partition's
  resume point took exactly 1 s, 22 s for the 22 partitions of `make run` before a
  restarted flow replicated again. So `RangeReader.messages` waits at most
  `POLL_S` for the first record and then takes what has arrived without waiting.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Self, TypeVar, cast

from confluent_kafka import KafkaError, Message, TopicPartition

from replicator.errors import ReplicatorError
from replicator.kafka.clients import Consumer
from replicator.kafka.watermarks import watermarks

#: Public so that bench/translation_latency.py can compare it with the default.
FETCH_WAIT_MS = 10
#: How long one wait for a record lasts before the reader checks whether its
#: position passed the range's end (markers and aborted records are not delivered).
POLL_S = 0.02
#: A range read that receives nothing for this long fails: the cluster is away.
READ_TIMEOUT_S = 30.0
#: Records taken at once after the first one arrived (never waited for).
_BATCH = 500
#: The backward scan's first window, in offsets; each next one is 8 times larger.
_FIRST_WINDOW = 16

T = TypeVar("T")


def range_reader(
    base: Mapping[str, object], purpose: str, cluster: str | None = None, **settings: object
) -> Consumer:
    """A consumer on `base` (a cluster's client settings) in a group of its own
    named for `purpose`, never committing, reporting partition ends; `settings`
    add to or override that (e.g. `isolation.level`). `cluster` (the alias) names
    the cluster in the lines about its reachability."""
    return Consumer(
        {
            **base,
            "group.id": f"replicator-{purpose}-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": FETCH_WAIT_MS,
            **settings,
        },
        cluster=cluster,
    )


class RangeReader:
    """Reads offset ranges of partitions of one cluster with one reusable consumer
    (see `range_reader`); `name` is how errors name the cluster."""

    def __init__(
        self, base: Mapping[str, object], purpose: str, name: str, **settings: object
    ) -> None:
        self.name = name
        self._consumer = range_reader(base, purpose, None, **settings)

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def bounds(self, topic: str, partition: int) -> tuple[int, int]:
        """(log start offset, high watermark) of `topic[partition]`."""
        return watermarks(self._consumer, topic, partition, READ_TIMEOUT_S)

    def exists(self, topic: str, partition: int) -> bool:
        """Whether the partition exists (a consumer's metadata request never creates it)."""
        metadata = self._consumer.list_topics(topic, timeout=READ_TIMEOUT_S).topics.get(topic)
        return metadata is not None and metadata.error is None and partition in metadata.partitions

    def offset_at(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        """The first offset of `topic[partition]` whose record's time is `timestamp_ms` or
        later, None when no record is that young."""
        found = self._consumer.offsets_for_times(
            [TopicPartition(topic, partition, timestamp_ms)], timeout=READ_TIMEOUT_S
        )[0]
        return None if found.offset < 0 else found.offset

    def partitions(self, topic: str) -> list[int]:
        """The partitions of `topic` (none: it does not exist)."""
        metadata = self._consumer.list_topics(topic, timeout=READ_TIMEOUT_S).topics.get(topic)
        if metadata is None or metadata.error is not None:
            return []
        return sorted(metadata.partitions)

    def messages(self, topic: str, partition: int, start: int, end: int) -> Iterator[Message]:
        """The records at offsets [start, end) the consumer delivers (with
        `isolation.level=read_committed`: committed records, no markers). Stops at
        `end`, at the partition's end, or when the position passed `end`; a
        ReplicatorError after `READ_TIMEOUT_S` without a record or progress."""
        if start >= end:
            return
        consumer = self._consumer
        consumer.assign([TopicPartition(topic, partition, start)])
        where = f"{topic}[{partition}]"
        deadline = time.monotonic() + READ_TIMEOUT_S
        while True:
            messages = consumer.consume(1, POLL_S)
            if not messages:
                position = consumer.position([TopicPartition(topic, partition)])[0].offset
                if position >= end:  # what remained of the range was markers or aborted
                    return
                if time.monotonic() > deadline:
                    raise ReplicatorError(
                        f"reading {where} on {self.name} ({start}..{end}) received nothing "
                        f"for {READ_TIMEOUT_S:.0f}s at offset {max(start, position)}; is "
                        f"{self.name} reachable?"
                    )
                continue
            messages += consumer.consume(_BATCH - 1, 0)  # what has arrived, without waiting
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        return
                    raise ReplicatorError(
                        f"reading {where} on {self.name} from offset {start}: {error.str()}"
                    )
                if cast(int, message.offset()) >= end:
                    return
                yield message
            deadline = time.monotonic() + READ_TIMEOUT_S

    def first(self, topic: str, partition: int, start: int, end: int) -> Message | None:
        """The first record at offsets [start, end) (see `messages`), or None."""
        return next(self.messages(topic, partition, start, end), None)

    def last(
        self,
        topic: str,
        partition: int,
        low: int,
        end: int,
        pick: Callable[[Message], T | None],
    ) -> T | None:
        """The last `pick(record)` that is not None among the records at offsets
        [low, end), read back from `end` in growing windows (the records wanted
        usually sit at the end, behind a few markers or records of others)."""
        window = _FIRST_WINDOW
        while end > low:
            start = max(low, end - window)
            found = None
            for message in self.messages(topic, partition, start, end):
                picked = pick(message)
                if picked is not None:
                    found = picked
            if found is not None:
                return found
            end = start
            window *= 8
        return None
