"""Which partitions this process checkpoints: a flow's checkpoint work split between
every `replicator run` process that runs the flow, through Kafka's own group protocol.

An estate runs a flow in several processes (Helm replicas, compose workers, machines).
Each used to checkpoint every group on every partition: the work did not shrink as
processes were added, and they all wrote the same checkpoints. Now each process's
checkpoint loop is a member of the flow's checkpoint group
(`<engine group>-checkpoints`, on the source, never checkpointed itself) subscribed
to the flow's replicated topics, and translates and writes the checkpoints of the
partitions the group assigns it: N processes, a share each; one that leaves hands its
share over within a session timeout (cooperative rebalancing, or the broker's
assignor with `group.protocol=consumer`, as the replication group).

The member never reads a record: every partition it is given is paused at once. Its
rebalance callbacks run in `poll`, which the checkpoint loop calls every tick.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable

from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import TopicPartition

from replicator.config.model import FlowConfig
from replicator.engine.source_consumer import group_membership
from replicator.kafka.clients import Consumer

log = logging.getLogger(__name__)

#: A checkpoint round may take long: the member stays in the group meanwhile (its
#: heartbeats go on in librdkafka's thread; only `poll` waits for the round).
_MAX_POLL_INTERVAL_MS = 3_600_000

Key = tuple[str, int]


def checkpoint_group(flow: FlowConfig) -> str:
    """The consumer group whose members share the flow's checkpoint work."""
    return f"{flow.engine_group}-checkpoints"


class CheckpointShare:
    """This process's share of one flow's partitions, for checkpoints."""

    def __init__(self, flow: FlowConfig) -> None:
        self.flow = flow
        defaults, fixed = group_membership(flow.source.consumer)
        self._consumer = Consumer(
            {
                **defaults,
                **flow.source.consumer,
                "group.id": checkpoint_group(flow),
                "enable.auto.commit": False,
                "max.poll.interval.ms": _MAX_POLL_INTERVAL_MS,
                **fixed,
            },
            cluster=flow.source.alias,
        )
        self._topics: tuple[str, ...] = ()
        self._owned: set[Key] = set()
        self._lock = threading.Lock()
        #: Set once the group has answered (an assignment, even an empty one).
        self.assigned = threading.Event()

    def close(self) -> None:
        self._consumer.close()

    def keep(self, topics: Iterable[str] | None = None) -> None:
        """Stay in the group (serve its callbacks), with `topics` subscribed when given
        (the flow's replicated topics: new ones are shared as they appear)."""
        wanted = self._topics if topics is None else tuple(sorted(topics))
        if wanted != self._topics and wanted:
            self._consumer.subscribe(
                list(wanted), on_assign=self._assign, on_revoke=self._revoke, on_lost=self._revoke
            )
            self._topics = wanted
        if self._topics:
            self._consumer.poll(0)

    def wait_assigned(self, timeout_s: float, stop: threading.Event) -> bool:
        """Serve the group until it has given this member its share (True), `timeout_s`
        passed or `stop` is set (the first round after joining; later rounds never
        wait)."""
        deadline = time.monotonic() + timeout_s
        while not self.assigned.is_set() and time.monotonic() < deadline and not stop.is_set():
            self._consumer.poll(0.1)
        return self.assigned.is_set()

    def owned(self) -> set[Key]:
        """The partitions this process checkpoints now."""
        with self._lock:
            return set(self._owned)

    def _assign(self, consumer: KafkaConsumer, partitions: list[TopicPartition]) -> None:
        consumer.incremental_assign(partitions)
        if partitions:
            consumer.pause(partitions)  # a member of the share, never a reader
        with self._lock:
            self._owned.update((tp.topic, tp.partition) for tp in partitions)
        if partitions:
            log.info(
                "flow %s: checkpointing %d more partitions here (%d in all)",
                self.flow.name,
                len(partitions),
                len(self._owned),
            )
        self.assigned.set()

    def _revoke(self, consumer: KafkaConsumer, partitions: list[TopicPartition]) -> None:
        with self._lock:
            self._owned.difference_update((tp.topic, tp.partition) for tp in partitions)
        consumer.incremental_unassign(partitions)
