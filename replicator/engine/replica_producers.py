"""The settings of the producers that write replicas to the target, derived once from
the flow's configuration for every writer (the Python loop's `TargetWriter`, the
compiled path's `MoverWriter` and `TransactionalMoverWriter`), and how long they may
hold records (`DeliveryBounds`).

The user's client settings come first where they may tune (batching, timeouts,
security); what the guarantees rest on comes last, so no setting of theirs undoes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from replicator.config.model import FlowConfig
from replicator.engine.size_limits import SizeLimits

#: librdkafka's defaults of the timeouts the delivery bounds come from.
_MESSAGE_TIMEOUT_MS = 300_000
_MAX_POLL_INTERVAL_MS = 300_000
#: The share of max.poll.interval.ms the loop may spend waiting for the target (for
#: room in the producer's queue, or for a flush before partitions are given up):
#: the rest is margin for the batch around it and the rebalance that may follow.
_POLL_SHARE = 0.4
#: A flush before partitions are given up (or the producer is made anew) waits at
#: most this long, however long the poll interval.
FLUSH_MAX_S = 60.0


@dataclass(frozen=True)
class DeliveryBounds:
    """How long the default mode's target producer may hold records, in seconds.

    The producer itself never times a record out (`message.timeout.ms=0`): after a
    timeout librdkafka's idempotent producer bumps its epoch and goes on, leaving a
    gap that the gapless guarantee does not cover, and a run's one delivery report
    would then acknowledge past it. The engine keeps the user's timeout instead."""

    #: The user's `message.timeout.ms` (`delivery.timeout.ms`): a run unacknowledged
    #: for longer rewinds every partition to the target tail. None: 0, no deadline.
    deadline: float | None
    #: The longest wait for the target between two polls of the consumer: below
    #: `max.poll.interval.ms`, so the worker keeps its partitions while it waits.
    wait: float

    @classmethod
    def of(cls, flow: FlowConfig) -> DeliveryBounds:
        producer, consumer = flow.target.producer, flow.source.consumer
        timeout_ms = int(
            producer.get(
                "message.timeout.ms", producer.get("delivery.timeout.ms", _MESSAGE_TIMEOUT_MS)
            )
        )
        poll_ms = int(consumer.get("max.poll.interval.ms", _MAX_POLL_INTERVAL_MS))
        deadline = timeout_ms / 1000 if timeout_ms > 0 else None
        wait = poll_ms / 1000 * _POLL_SHARE
        return cls(deadline, wait if deadline is None else min(deadline, wait))

    @property
    def flush(self) -> float:
        """How long a flush before partitions are given up (or a producer is made
        anew) waits at most."""
        return min(FLUSH_MAX_S, self.wait)


def target_producer_config(flow: FlowConfig, size_limits: SizeLimits) -> dict[str, object]:
    """The settings of the flow's target producers for the remote topics' size limits:
    the user's, then what the guarantees rest on. The status producers and the
    transactional ones are made from them as they are."""
    message_max_bytes, batch_size = size_limits.producer_limits()
    # The user's batch.size, capped below the smallest remote topic's limit (a larger
    # batch would be refused whole); `batch_size` is that cap.
    wanted = flow.target.producer.get("batch.size")
    if wanted is not None:
        batch_size = min(batch_size, int(wanted))
    return {
        "linger.ms": 20,
        "compression.type": "lz4",
        **flow.target.producer,
        "enable.idempotence": True,
        "message.max.bytes": message_max_bytes,
        "batch.size": batch_size,
    }


def gapless_producer_config(flow: FlowConfig, size_limits: SizeLimits) -> dict[str, object]:
    """The settings of the default mode's replica producer (the Python loop's, the
    Mover's): `target_producer_config`, where no record times out and a refused batch
    never leaves a hole behind it (the user's timeout is the engine's own deadline:
    `DeliveryBounds`)."""
    config = target_producer_config(flow, size_limits)
    config.pop("delivery.timeout.ms", None)  # librdkafka's alias of message.timeout.ms
    config.update({"message.timeout.ms": 0, "enable.gapless.guarantee": True})
    return config
