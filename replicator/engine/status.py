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
from typing import Any

from confluent_kafka import Producer

from replicator.config.model import ClusterConfig
from replicator.errors import ReplicatorError
from replicator.internal_topics import MissingTopic, read_compacted

STATUS_TOPIC = "replicator-status.internal"


class NoStatus(ReplicatorError):
    """No replicator has published the status of a flow on its target: nothing can
    be said of its workers, which is not the same as "none running"."""


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


def read_status(
    target: ClusterConfig, flow: str | None = None, *, required: bool = False
) -> list[dict[str, Any]]:
    """The latest status record of every key in the target's status topic (of `flow`
    only, if given). With `required`, NoStatus when there is none: the status topic
    does not exist on `target`, or holds no record of `flow`."""
    try:
        values = read_compacted(target, STATUS_TOPIC, required=required).values()
    except MissingTopic as exc:
        raise NoStatus(
            f"the status topic {exc}: no replicator has run"
            f"{f' for flow {flow}' if flow else ''} there; start one with `replicator run`"
        ) from exc
    records = [json.loads(value) for value in values]
    rows = [r for r in records if flow is None or r.get("flow") == flow]
    if required and flow is not None and not rows:
        raise NoStatus(
            f"the status topic {STATUS_TOPIC} on cluster {target.alias!r} "
            f"({target.bootstrap_servers}) holds no status of flow {flow}: no replicator has "
            "run for the flow there; start one with `replicator run`"
        )
    return rows
