"""Worker and partition state, kept in a compacted topic on the target cluster.

Airflow, the UI and `replicator status` read it; nothing needs access to the
worker's host. Keys are `<flow>|worker|<worker id>` and
`<flow>|partition|<topic>|<partition>`; values are JSON. Messages hold topic,
partition and offsets, never client settings, so no secret can leak here.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, fields

from confluent_kafka import KafkaError, Producer

from replicator.config.model import ClusterConfig, FlowConfig
from replicator.engine.internal_topics import (
    STATUS_TOPIC,
    MissingTopic,
    read_compacted,
    topic_of,
)
from replicator.errors import ReplicatorError
from replicator.kafka import clients

#: Workers publish their status every 10 s; one silent for longer than this is gone.
STALE_AFTER_S = 30.0


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
    #: Records this worker did not replicate, by reason (`loop`, `loop_legacy`; see
    #: `replicator.engine.rewrite`): [count, first source offset].
    skipped_by: dict[str, list[int]] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.flow}|partition|{self.topic}|{self.partition}"

    @property
    def skip_note(self) -> str | None:
        """`skipped_by` in words, for status lines; None when nothing was skipped."""
        if not self.skipped_by:
            return None
        return "; ".join(
            f"{count} skipped as {reason.replace('_', ' ')} from offset {first}"
            for reason, (count, first) in sorted(self.skipped_by.items())
        )

    @property
    def where(self) -> str:
        """`topic[partition]`, as messages name a partition."""
        return f"{self.topic}[{self.partition}]"


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
    #: Which data path the worker's records take (`replicator.engine.data_path`): the
    #: compiled data plane, or the Python loop and why. None: a worker older than it.
    data_path: str | None = None
    #: When this worker started the flow: staleness bounds (checkpoints, heartbeats)
    #: count from it, since a flow that just started has written nothing yet.
    started_ms: int | None = None
    updated_ms: int = field(default_factory=lambda: int(time.time() * 1000))

    @property
    def key(self) -> str:
        return f"{self.flow}|worker|{self.worker}"

    def is_live(self, stale_after_s: float | None = None) -> bool:
        """Reports "running" and has published within `stale_after_s` (default
        `STALE_AFTER_S`): a worker killed with `kill -9` leaves a stale record."""
        silent_s = STALE_AFTER_S if stale_after_s is None else stale_after_s
        return self.state == "running" and self.updated_ms >= (time.time() - silent_s) * 1000


class StatusWriter:
    """Publishes status records; called from the task loop, never per record."""

    def __init__(self, producer: Producer) -> None:
        self._producer = producer

    def publish(self, status: PartitionStatus | WorkerStatus) -> None:
        self._producer.produce(
            STATUS_TOPIC, key=status.key.encode(), value=json.dumps(asdict(status)).encode()
        )


def status_producer(flow: FlowConfig) -> clients.Producer:
    """A producer to the status topic on `flow`'s target, the topic created first if
    missing (compacted, `status.topic.replication.factor`): for the rounds that publish
    beside the engine (`deliver_status`)."""
    topic_of(flow, STATUS_TOPIC).ensure()
    return clients.Producer(flow.target.producer, cluster=flow.target.alias)


def deliver_status(
    producer: Producer, flow: FlowConfig, what: str, key: str, value: object, *, timeout_s: float
) -> None:
    """Write one status record (`value` as JSON) of `flow` and wait until the target
    has it; ReplicatorError naming `what` and the reason when it does not within
    `timeout_s`. For the rounds that publish beside the engine (ACL sync, thread
    health), not for the task loop."""
    errors: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: object) -> None:
        if error is not None:
            errors.append(error)

    body = json.dumps(value).encode()
    producer.produce(STATUS_TOPIC, key=key.encode(), value=body, on_delivery=delivered)
    if producer.flush(timeout_s) or errors:
        why = errors[0].str() if errors else f"not delivered in {timeout_s:.0f}s"
        raise ReplicatorError(
            f"the {what} of flow {flow.name} was not written to {STATUS_TOPIC} on "
            f"{flow.target.alias!r}: {why}"
        )


#: Any record of the status topic: each key holds the latest of a worker or a partition.
StatusRecord = PartitionStatus | WorkerStatus


def read_status(
    target: ClusterConfig,
    flow: str | None = None,
    *,
    required: bool = False,
    values: dict[bytes, bytes] | None = None,
) -> list[StatusRecord]:
    """The latest status record of every key in the target's status topic (of `flow`
    only, if given). With `required`, NoStatus when there is none: the status topic
    does not exist on `target`, or holds no record of `flow`. A caller that reads the
    topic's other records too (thread and ACL status) passes the topic as it read it
    once (`status_values`): at 10,000 partitions each read takes seconds."""
    if values is None:
        values = status_values(target, flow, required=required)
    records = [_record(target, key, value) for key, value in values.items() if _ours(key)]
    rows = [r for r in records if flow is None or r.flow == flow]
    if required and flow is not None and not rows:
        raise NoStatus(
            f"the status topic {STATUS_TOPIC} on cluster {target.alias!r} "
            f"({target.bootstrap_servers}) holds no status of flow {flow}: no replicator has "
            "run for the flow there; start one with `replicator run`"
        )
    return rows


def status_values(
    target: ClusterConfig, flow: str | None = None, *, required: bool = False
) -> dict[bytes, bytes]:
    """The status topic of `target` as it stands, every key's latest value (see
    `read_status` for `required`)."""
    try:
        return read_compacted(target, STATUS_TOPIC, required=required)
    except MissingTopic as exc:
        raise NoStatus(
            f"the status topic {exc}: no replicator has run"
            f"{f' for flow {flow}' if flow else ''} there; start one with `replicator run`"
        ) from exc


def _ours(key: bytes) -> bool:
    """A worker's or a partition's key; others (`<flow>|acls`, ACL sync's, see
    `replicator.acls.status`) have readers of their own."""
    return key.split(b"|", 2)[1:2] in ([b"worker"], [b"partition"])


def _record(target: ClusterConfig, key: bytes, value: bytes) -> StatusRecord:
    """The typed record of one value of the status topic. Fields a newer replicator
    added are left out, so an older reader still reads its records."""
    data = json.loads(value)
    kind = PartitionStatus if "partition" in data else WorkerStatus
    known = {f.name for f in fields(kind)}
    try:
        return kind(**{name: data[name] for name in known if name in data})
    except TypeError as exc:
        raise ReplicatorError(
            f"the record of key {key.decode(errors='replace')!r} in {STATUS_TOPIC} on cluster "
            f"{target.alias!r} is not a {kind.__name__} ({exc}); was it written by something "
            "other than the replicator? Delete the key (produce a null value for it)"
        ) from exc


def live_workers(flow: FlowConfig, values: dict[bytes, bytes] | None = None) -> list[WorkerStatus]:
    """Status records of the flow's workers that report "running" and are alive
    (published recently; a worker killed with `kill -9` leaves a stale record);
    `values`: the status topic as the caller read it (`status_values`).

    Another deployment may run a flow of the same name into the same target
    with other topics (another team, a test): a worker whose topics none match
    this flow's filter is not one of ours."""
    rows = read_status(flow.target, flow.name, values=values)
    return [w for w in flow_workers(flow, rows) if w.is_live()]


def flow_workers(flow: FlowConfig, records: list[StatusRecord]) -> list[WorkerStatus]:
    """The worker records of `records` that are `flow`'s (see `live_workers`)."""
    return [
        r for r in records if isinstance(r, WorkerStatus) and replicates_our_topics(flow, r.topics)
    ]


def replicates_our_topics(flow: FlowConfig, topics: list[str] | None) -> bool:
    """Whether a worker replicating `topics` is one of `flow`'s (see `live_workers`)."""
    # A worker that has not listed its topics yet may be ours.
    return not topics or any(flow.topics.matches(topic) for topic in topics)
