"""Low and high watermarks of a partition, asked again while leadership settles.

Right after a topic is created or a broker restarts, a watermark request can
fail with a retriable error (no leader yet). That is not a reason to stop a
replication task; anything else, or the same error past the timeout, is.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from replicator.errors import ReplicatorError
from replicator.kafka.errors import kafka_error

_RETRY_PAUSE_S = 0.2
#: Errors that only mean "ask again in a moment", although not all are flagged retriable.
_SETTLING = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
    }
)


class WatermarkSource(Protocol):
    """What `watermarks` asks of a consumer (a confluent-kafka Consumer, or the
    compiled path's `MoverFetch`)."""

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float = -1, cached: bool = False
    ) -> tuple[int, int]: ...
    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any: ...


def watermarks(
    consumer: WatermarkSource, topic: str, partition: int, timeout: float = 30.0
) -> tuple[int, int]:
    """(log start offset, high watermark) of `topic[partition]`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=max(1.0, deadline - time.monotonic())
            )
        except KafkaException as exc:
            error = kafka_error(exc)
            settling = error.retriable() or error.code() in _SETTLING
            if not settling or time.monotonic() > deadline:
                raise ReplicatorError(
                    f"cannot read the offsets of {topic}[{partition}]: {error.str()}"
                ) from exc
            time.sleep(_RETRY_PAUSE_S)
            # The client's metadata may predate new partitions: ask the cluster again.
            consumer.list_topics(topic, timeout=max(1.0, deadline - time.monotonic()))
