"""Heartbeats: MM2's proof of life of a flow, written to the source's `heartbeats`
topic. Replicated like any topic, they tell on the target that the flow is alive
and how far behind it is, and tools that read MM2's heartbeats work unchanged."""

from __future__ import annotations

import time

from replicator import metrics
from replicator.engine.formats import Heartbeat
from replicator.engine.offset_syncs import SourceProducer


class HeartbeatWriter:
    """Writes the heartbeats of the flow `source` -> `target` (cluster aliases)."""

    def __init__(self, producer: SourceProducer, topic: str, source: str, target: str) -> None:
        self._producer = producer
        self.topic = topic
        self.source = source
        self.target = target

    def emit(self) -> None:
        now = time.time()
        beat = Heartbeat(self.source, self.target, int(now * 1000))
        self._producer.produce(self.topic, key=beat.key(), value=beat.value())
        metrics.HEARTBEAT_TIMESTAMP.labels(f"{self.source}->{self.target}").set(now)
