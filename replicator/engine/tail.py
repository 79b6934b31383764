"""Where a replication task resumes: the record after the last one it wrote.

The target partition's tail is the truth. Reading back from the high
watermark to the last record carrying our source header for this flow gives
the last source offset that was durably replicated, so a crash neither loses
nor duplicates, and no separate offset store can drift from the data.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import KafkaError, TopicPartition

from replicator.engine.headers import replica_source_offset
from replicator.errors import ReplicatorError
from replicator.kafka.range_reads import range_reader
from replicator.kafka.watermarks import watermarks

_FIRST_WINDOW = 16
_READ_TIMEOUT_S = 30.0
#: `consume` returns when its batch is full or this has passed, and a window's
#: batch is rarely full (markers and the partition end are not records): with 1 s
#: here, every partition's resume point took exactly 1 s, 22 s for the 22
#: partitions of `make run` before a restarted flow replicated again.
_POLL_S = 0.02


@dataclass(frozen=True)
class TailPosition:
    """Resume point of one target partition."""

    next_source_offset: int | None  # None: nothing replicated yet
    target_end: int  # the target partition's high watermark when read


class TailReader:
    """Reads resume points from the target cluster with one reusable consumer."""

    def __init__(self, consumer_config: dict[str, str], source_alias: str) -> None:
        self._alias = source_alias.encode()
        self._consumer = range_reader(
            consumer_config, "tail", **{"isolation.level": "read_committed"}
        )

    def close(self) -> None:
        self._consumer.close()

    def position(self, topic: str, partition: int) -> TailPosition:
        """Scan back from the end of `topic[partition]` in growing windows (control
        records and records written by others may sit at the end) until a record
        replicated from our source is found, or the log start is reached."""
        low, high = watermarks(self._consumer, topic, partition, _READ_TIMEOUT_S)
        window = _FIRST_WINDOW
        end = high
        while end > low:
            start = max(low, end - window)
            found = self._last_replicated(topic, partition, start, end)
            if found is not None:
                return TailPosition(found + 1, high)
            end = start
            window *= 8
        return TailPosition(None, high)

    def _last_replicated(self, topic: str, partition: int, start: int, end: int) -> int | None:
        consumer = self._consumer
        consumer.assign([TopicPartition(topic, partition, start)])
        last = None
        deadline = time.monotonic() + _READ_TIMEOUT_S
        while True:
            for message in consumer.consume(num_messages=10_000, timeout=_POLL_S):
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        return last
                    raise ReplicatorError(
                        f"reading the tail of {topic}[{partition}] from offset {start}: "
                        f"{error.str()}"
                    )
                if message.offset() >= end:
                    return last
                found = replica_source_offset(message.headers(), self._alias)
                if found is not None:
                    last = found
            if consumer.position([TopicPartition(topic, partition)])[0].offset >= end:
                return last
            if time.monotonic() > deadline:
                raise ReplicatorError(
                    f"reading the tail of {topic}[{partition}] ({start}..{end}) took over "
                    f"{_READ_TIMEOUT_S:.0f}s; is the target cluster reachable?"
                )
