"""Worker and partition state, kept in a compacted topic on the target cluster.

Airflow, the UI and `replicator status` read it; nothing needs access to the
worker's host. Keys are `<flow>|worker|<worker id>` and
`<flow>|partition|<topic>|<partition>`; values are JSON. Messages hold topic,
partition and offsets, never client settings, so no secret can leak here.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict, dataclass, field

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from replicator.config.model import ClusterConfig
from replicator.errors import ReplicatorError
from replicator.watermarks import watermarks

STATUS_TOPIC = "replicator-status.internal"
_TIMEOUT_S = 30.0


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
    error: str | None = None
    updated_ms: int = field(default_factory=lambda: int(time.time() * 1000))

    @property
    def key(self) -> str:
        return f"{self.flow}|worker|{self.worker}"


def ensure_status_topic(target: ClusterConfig, replication_factor: int) -> None:
    admin = AdminClient(target.admin)
    if STATUS_TOPIC in admin.list_topics(timeout=_TIMEOUT_S).topics:
        return
    topic = NewTopic(
        STATUS_TOPIC,
        num_partitions=1,
        replication_factor=replication_factor,
        config={"cleanup.policy": "compact"},
    )
    try:
        admin.create_topics([topic])[STATUS_TOPIC].result(timeout=_TIMEOUT_S)
    except Exception as exc:
        error = exc.args[0] if exc.args else None
        if not (isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS):
            raise ReplicatorError(
                f"cannot create {STATUS_TOPIC} on {target.alias!r}: {exc}; "
                "check status.topic.replication.factor and the principal's CREATE permission"
            ) from exc


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
    consumer = Consumer(
        {
            **target.consumer,
            "group.id": f"replicator-status-reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    latest: dict[bytes, dict[str, object]] = {}
    try:
        if STATUS_TOPIC not in consumer.list_topics(timeout=_TIMEOUT_S).topics:
            return []  # no replicator has run against this target yet
        tp = TopicPartition(STATUS_TOPIC, 0)
        _, high = watermarks(consumer, STATUS_TOPIC, 0)
        if high == 0:
            return []
        consumer.assign([TopicPartition(STATUS_TOPIC, 0, 0)])
        deadline = time.monotonic() + _TIMEOUT_S
        while consumer.position([tp])[0].offset < high and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=10_000, timeout=0.5):
                if message.error() is None and message.value() is not None:
                    latest[message.key()] = json.loads(message.value())
    finally:
        consumer.close()
    records = list(latest.values())
    return [r for r in records if flow is None or r.get("flow") == flow]
