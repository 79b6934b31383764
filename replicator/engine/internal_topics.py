"""The small compacted topics the replicator keeps its bookkeeping in.

Offset syncs, heartbeats, checkpoints, status and offset resets are each one compacted
partition: created once with the configured replication factor (-1: the
broker's default.replication.factor), and read back whole (latest value per key)
by whoever needs the current state.

Which topics a flow writes, on which cluster, with which replication factor is
declared once here (`flow_topics`): `replicator init` creates them all, and each
writer creates its own at its first start (the worker its status, offset syncs and
heartbeats; the checkpoint writer its checkpoints; a reset request the resets topic).
"""

from __future__ import annotations

import time
from typing import Literal, NamedTuple, cast

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import NewTopic

from replicator.config.model import ClusterConfig, FlowConfig
from replicator.errors import ReplicatorError
from replicator.kafka.clients import Consumer, admin_for
from replicator.kafka.errors import kafka_error
from replicator.kafka.range_reads import range_reader
from replicator.kafka.watermarks import watermarks

_TIMEOUT_S = 30.0
#: Where the workers publish their state (on each flow's target cluster).
STATUS_TOPIC = "replicator-status.internal"
#: Where `replicator offsets reset` leaves its requests (on each flow's target cluster).
RESETS_TOPIC = "replicator-resets.internal"
#: `consume` waits for a full batch or this long; compaction leaves holes, so the
#: batch is never full and 0.5 s here made every status read (a procedure's
#: "is the flow stopped yet?") cost half a second.
_POLL_S = 0.02
#: A topic's metadata errors that mean it does not exist (it is asked for by name).
_ABSENT = frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC})


class MissingTopic(ReplicatorError):
    """A compacted topic read with `required` does not exist: nothing has written it yet."""

    def __init__(self, cluster: ClusterConfig, topic: str) -> None:
        super().__init__(
            f"{topic} does not exist on cluster {cluster.alias!r} ({cluster.bootstrap_servers})"
        )
        self.cluster = cluster
        self.topic = topic


#: The segments of a topic read whole for its current state (status, checkpoints,
#: resets). A broker compacts only closed segments, and by default a segment closes at
#: 1 GiB or after 7 days: the status topic of 10,000 partitions, each published every
#: 10 s, grows by about 300 KB a second, all of which every `replicator status`, DR
#: status page and supervisor run read (17 s after ten minutes at that size, more with
#: every hour). With these, what a reader reads stays a few segments beyond the current
#: state however long the flows run.
CURRENT_STATE_SEGMENTS = {"segment.bytes": str(16 * 1024 * 1024), "segment.ms": str(600_000)}


def ensure_compacted_topic(
    cluster: ClusterConfig,
    topic: str,
    replication_factor: int,
    setting: str,
    *,
    history: bool = False,
) -> None:
    """Create `topic` (one compacted partition) on `cluster` unless it exists.
    `setting` names the configuration key of its replication factor, for the error.
    Its segments are `CURRENT_STATE_SEGMENTS`, unless its readers use its `history`
    (offset syncs: MM2 and `OffsetSyncStore` translate from the older pairs too,
    which compaction would take away): then the broker's defaults."""
    admin = admin_for(cluster)
    if topic in admin.list_topics(timeout=_TIMEOUT_S).topics:
        return
    config = {"cleanup.policy": "compact", **({} if history else CURRENT_STATE_SEGMENTS)}
    new = NewTopic(topic, 1, replication_factor, config=config)
    try:
        admin.create_topics([new])[topic].result(timeout=_TIMEOUT_S)
    except KafkaException as exc:
        error = kafka_error(exc)
        if error.code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise ReplicatorError(
                f"cannot create {topic} on {cluster.alias!r}: {error.str()}; check {setting} "
                "(at most the number of brokers) and the principal's CREATE permission"
            ) from exc


def read_compacted(
    cluster: ClusterConfig,
    topic: str,
    *,
    required: bool = False,
    reader: Consumer | None = None,
) -> dict[bytes, bytes]:
    """The latest value of every key of `topic[0]`, read to its current end
    (tombstones remove their key). Empty when the topic does not exist yet, or
    MissingTopic with `required` (a reader that must tell "nothing written" apart).
    A caller that reads often passes its own `reader` (a `range_reader` of `cluster`,
    left open and unassigned); otherwise one is made and closed."""
    consumer = reader or range_reader(cluster.consumer, "reader", cluster.alias)
    latest: dict[bytes, bytes] = {}
    try:
        found = consumer.list_topics(topic, timeout=_TIMEOUT_S).topics.get(topic)
        if found is None or (found.error is not None and found.error.code() in _ABSENT):
            if required:
                raise MissingTopic(cluster, topic)
            return latest
        tp = TopicPartition(topic, 0)
        _, high = watermarks(consumer, topic, 0)
        if high == 0:
            return latest
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + _TIMEOUT_S
        while consumer.position([tp])[0].offset < high:
            if time.monotonic() > deadline:
                raise ReplicatorError(
                    f"reading {topic} on {cluster.alias!r} took over {_TIMEOUT_S:.0f}s; "
                    "is the cluster reachable?"
                )
            for message in consumer.consume(num_messages=10_000, timeout=_POLL_S):
                if message.error() is not None or message.key() is None:
                    continue
                if message.value() is None:
                    latest.pop(cast(bytes, message.key()), None)
                else:
                    latest[cast(bytes, message.key())] = cast(bytes, message.value())
    finally:
        if reader is None:
            consumer.close()
        else:
            consumer.unassign()
    return latest


class InternalTopic(NamedTuple):
    """One compacted topic a flow writes, and who creates it at its first write."""

    cluster: ClusterConfig
    name: str
    replication_factor: int
    setting: str  # the configuration key of its replication factor
    writer: Literal["worker", "checkpoints", "resets"]
    #: Its readers use its older records (`ensure_compacted_topic`): offset syncs.
    history: bool = False

    def ensure(self) -> None:
        """Create it unless it exists (`ensure_compacted_topic`)."""
        ensure_compacted_topic(
            self.cluster, self.name, self.replication_factor, self.setting, history=self.history
        )


def flow_topics(flow: FlowConfig) -> list[InternalTopic]:
    """The compacted topics `flow` writes: its status and the offset-reset requests on
    the target; its offset syncs (on the cluster `offset-syncs.topic.location` names)
    and heartbeats (on the source) when it emits them, as MM2 creates them (a flow with
    `emit.offset-syncs.enabled = false` needs no offset-syncs topic, nor a replication
    factor for it); its checkpoints when it checkpoints or syncs groups."""
    status_rf = (flow.status_topic_replication_factor, "status.topic.replication.factor")
    topics = [
        InternalTopic(flow.target, STATUS_TOPIC, *status_rf, "worker"),
        InternalTopic(flow.target, RESETS_TOPIC, *status_rf, "resets"),
    ]
    if flow.emit_offset_syncs_enabled:
        topics.append(
            InternalTopic(
                flow.offset_syncs_cluster, flow.offset_syncs_topic,
                flow.offset_syncs_topic_replication_factor,
                "offset-syncs.topic.replication.factor", "worker", history=True,
            )
        )  # fmt: skip
    if flow.emit_heartbeats_enabled:
        topics.append(
            InternalTopic(
                flow.source, flow.heartbeats_topic, flow.heartbeats_topic_replication_factor,
                "heartbeats.topic.replication.factor", "worker",
            )
        )  # fmt: skip
    if flow.emit_checkpoints_enabled or flow.sync_group_offsets_enabled:
        topics.append(
            InternalTopic(
                flow.target, flow.checkpoints_topic,
                flow.checkpoints_topic_replication_factor,
                "checkpoints.topic.replication.factor", "checkpoints",
            )
        )  # fmt: skip
    return topics


def written_by(flow: FlowConfig, writer: str) -> list[InternalTopic]:
    """The topics of `flow` that `writer` creates (`flow_topics`)."""
    return [topic for topic in flow_topics(flow) if topic.writer == writer]


def topic_of(flow: FlowConfig, name: str) -> InternalTopic:
    """The declaration of the internal topic `name` of `flow` (`flow_topics`)."""
    for topic in flow_topics(flow):
        if topic.name == name:
            return topic
    raise ReplicatorError(f"flow {flow.name} writes no internal topic {name}")
