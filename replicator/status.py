"""Worker and partition state, kept in a compacted topic on the target cluster.

Airflow, the UI and `replicator status` read it; nothing needs access to the
worker's host. Keys are `<flow>|worker|<worker id>` and
`<flow>|partition|<topic>|<partition>`; values are JSON. Messages hold topic,
partition and offsets, never client settings, so no secret can leak here.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field

from confluent_kafka import Producer

from replicator.config.model import ClusterConfig
from replicator.internal_topics import read_compacted

STATUS_TOPIC = "replicator-status.internal"


@dataclass
class PartitionStatus:
    flow: str
    topic: str
    partition: int
    #: "replicating", "stopped" (by a failure policy: needs an operator; published as
    #: soon as it happens, and kept when the partition is revoked), or "revoked".
    state: str
    next_offset: int | None = None
    lag: int | None = None
    replicated: int = 0
    skipped: int = 0
    lost: int = 0
    error: str | None = None
    updated_ms: int = field(default_factory=lambda: int(time.time() * 1000))

    @property
    def key(self) -> str:
        return f"{self.flow}|partition|{self.topic}|{self.partition}"


@dataclass
class WorkerStatus:
    flow: str
    worker: str
    state: str  # "running", "stopped", "failed"
    host: str = ""
    pid: int = 0
    partitions: int = 0
    #: The source topics it replicates: tells its record from those of other
    #: deployments of the same flow name writing to the same target.
    topics: list[str] = field(default_factory=list)
    error: str | None = None
    #: When this worker started the flow: staleness bounds (checkpoints, heartbeats)
    #: count from it, since a flow that just started has written nothing yet.
    started_ms: int | None = None
    updated_ms: int = field(default_factory=lambda: int(time.time() * 1000))

    @property
    def key(self) -> str:
        return f"{self.flow}|worker|{self.worker}"


class StatusWriter:
    """Publishes status records; called from the task loop, never per record."""

    def __init__(self, producer: Producer) -> None:
        self._producer = producer

    def publish(self, status: PartitionStatus | WorkerStatus) -> None:
        self._producer.produce(
            STATUS_TOPIC, key=status.key.encode(), value=json.dumps(asdict(status)).encode()
        )


def read_status(target: ClusterConfig, flow: str | None = None) -> list[dict[str, object]]:
    """The latest status record of every key in the target's status topic."""
    records = [json.loads(value) for value in read_compacted(target, STATUS_TOPIC).values()]
    return [r for r in records if flow is None or r.get("flow") == flow]
