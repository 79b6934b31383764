"""Offset reset of one topic of a flow: replicate part of it again, or skip part.

MirrorMaker 2 keeps its source position in Connect's offsets topic, and moving
it means writing records (or tombstones) there by hand, with the connector
stopped. The replicator has no stored position: a task resumes each partition
after the last record on the target that carries its source-offset header (the
target tail, `replicator.engine.tail`). A reset is therefore a durable *request* the
task honours when the partition is assigned to it:

- `request_reset` (with the flow's workers stopped: a running task holds its
  position in memory) resolves where to go (earliest, latest, an offset, or a
  time) against the source, validates it, and writes one record per partition
  to the compacted topic `replicator-resets.internal` on the target. Key
  `<flow>|reset|<topic>|<partition>`, JSON value with the source `offset` to
  resume at and the target tail when it was requested: `tail_target_offset`
  (target offset of the last replica of the partition, -1 when there is none)
  and `tail_source_offset` (its source offset).
- At assignment the task reads the requests once for the whole batch
  (`PendingResets.read`) and, per partition, honours a request only while the
  partition's last replica is still the one recorded in it, i.e. nothing was
  replicated for the partition since the request. Once the task has copied a
  record after applying it, the tail has moved and the request is ignored for
  ever after. This needs no "applied" marker (which could be lost between the
  first copy and writing the marker) and never applies a rewind twice: the
  records it copies again move the tail themselves. A request whose partition
  moves to another worker before anything was copied is applied by that worker,
  which is right. A later request for the same partition replaces an earlier
  one (same key).

Why not the status topic: every reader of `replicator-status.internal` (the
`replicator status` command, diagnose, the failover preflight, the UI) takes a
record with a `partition` field for a partition status and reads fields a
request does not have, and the status topic grows by a record per partition
every 10 s between compactions, which the task would read in its rebalance
callback. The resets topic holds one small record per requested partition and
is read in milliseconds; while it does not exist (no reset was ever requested)
reading it costs one metadata request.

What a reset does to the target, which is what the operator asked for:

- Rewind (reset to an offset before the tail): the records from there to the
  tail are copied again, so the remote partition holds those source offsets
  twice (the verification jobs report them as duplicated source offsets), and
  the offset syncs written after the rewind go back in source offsets.
- Skip (reset past the tail): the records in between are never replicated.
  They count as `skipped` in the partition's status and in the metric
  `replicator_records_skipped{reason="offset_reset"}`.

Counts are offset differences: transaction markers or compacted-away offsets
in the range make the real number of records smaller.

Translation caveats (`replicator.engine.translation`, unchanged): `TargetIndex.find`
bisects on the assumption that source offsets grow with target offsets.

- After a rewind to N of a partition replicated up to M, a committed source
  offset `c <= N` or `c > M` still translates exactly (to the original record
  of `c`, or after the copies). For `N < c <= M` the answer is a record whose
  source offset is `c`, either the original or its copy, depending on where
  the bisection lands: a consumer moved to the original reads the copies of
  `N..M` again after `M`; one moved to the copy does not.
  `last_replica` (resume point, `replicated_until`) is unaffected.
- After a skip, a committed offset inside the skipped range translates to the
  first record replicated after the skip, and the translation counts the
  skipped records neither as `missing` nor as `unreplicated_before`: they were
  left out on purpose.
"""

from __future__ import annotations

import getpass
import json
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from replicator import metrics
from replicator.config.model import FlowConfig
from replicator.engine.internal_topics import ensure_compacted_topic, read_compacted
from replicator.engine.status import live_workers
from replicator.engine.tail import TailPosition
from replicator.engine.topic_sync import TopicSync
from replicator.engine.translation import Replica, TargetIndex
from replicator.errors import ReplicatorError
from replicator.kafka.clients import Consumer, Producer
from replicator.kafka.watermarks import watermarks

log = logging.getLogger(__name__)

RESETS_TOPIC = "replicator-resets.internal"
_TIMEOUT_S = 30.0

ResetKind = Literal["earliest", "latest", "offset", "timestamp"]


@dataclass(frozen=True)
class ResetTo:
    """Where to reset a partition: the source partition's earliest offset (its log
    start), its latest (its end: only records produced after the reset are
    replicated), an `offset`, or the first offset whose record timestamp is at or
    after `value` (ms since the epoch; the end when there is none)."""

    kind: ResetKind
    value: int | None = None

    def __post_init__(self) -> None:
        if self.kind in ("earliest", "latest"):
            if self.value is not None:
                raise ReplicatorError(f"reset to {self.kind} takes no value (got {self.value})")
        elif self.kind in ("offset", "timestamp"):
            if isinstance(self.value, bool) or not isinstance(self.value, int) or self.value < 0:
                raise ReplicatorError(
                    f"reset to an {self.kind} needs a non-negative integer, got {self.value!r}"
                )
        else:
            raise ReplicatorError(
                f"unknown reset target {self.kind!r}; use earliest, latest, offset or timestamp"
            )

    @classmethod
    def earliest(cls) -> ResetTo:
        return cls("earliest")

    @classmethod
    def latest(cls) -> ResetTo:
        return cls("latest")

    @classmethod
    def offset(cls, offset: int) -> ResetTo:
        return cls("offset", offset)

    @classmethod
    def timestamp(cls, ms: int) -> ResetTo:
        return cls("timestamp", ms)

    @classmethod
    def at(cls, when: datetime) -> ResetTo:
        """The first record at or after `when` (a naive datetime is local time, as in
        `kafka-consumer-groups --to-datetime`)."""
        return cls("timestamp", int(when.timestamp() * 1000))

    @classmethod
    def parse(cls, to: ResetTarget) -> ResetTo:
        """`"earliest"`, `"latest"`, an int offset, a datetime, or a ResetTo."""
        if isinstance(to, ResetTo):
            return to
        if isinstance(to, datetime):
            return cls.at(to)
        if isinstance(to, int) and not isinstance(to, bool):
            return cls.offset(to)
        if to in ("earliest", "latest"):
            return cls(to)
        raise ReplicatorError(
            f"cannot reset to {to!r}: use 'earliest', 'latest', an offset (int) or a datetime"
        )

    def __str__(self) -> str:
        if self.kind == "offset":
            return f"offset {self.value}"
        if self.kind == "timestamp":
            assert self.value is not None
            return f"timestamp {_iso(self.value)} ({self.value} ms)"
        return self.kind


ResetTarget = ResetTo | Literal["earliest", "latest"] | int | datetime


@dataclass(frozen=True)
class ResetRequest:
    """A reset of one partition, as written to the resets topic.

    `offset` is the source offset to resume at. `tail_target_offset` and
    `tail_source_offset` identify the partition's last replica on the target when
    the reset was requested (-1: none); the task honours the request only while
    that is still the last replica. `from_offset` is where the flow would have
    resumed without the reset; `copied_again` and `skipped` count the source
    offsets the reset replicates a second time or leaves out."""

    flow: str
    topic: str
    partition: int
    offset: int
    tail_target_offset: int
    tail_source_offset: int
    from_offset: int
    copied_again: int
    skipped: int
    requested_ms: int
    requested_by: str

    @property
    def key(self) -> str:
        return reset_key(self.flow, self.topic, self.partition)

    @property
    def where(self) -> str:
        return f"{self.topic}[{self.partition}]"

    def value(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, value: bytes) -> ResetRequest:
        data = json.loads(value)
        return cls(
            flow=str(data["flow"]),
            topic=str(data["topic"]),
            partition=int(data["partition"]),
            offset=int(data["offset"]),
            tail_target_offset=int(data["tail_target_offset"]),
            tail_source_offset=int(data.get("tail_source_offset", -1)),
            from_offset=int(data.get("from_offset", -1)),
            copied_again=int(data.get("copied_again", 0)),
            skipped=int(data.get("skipped", 0)),
            requested_ms=int(data.get("requested_ms", 0)),
            requested_by=str(data.get("requested_by", "")),
        )

    def effect(self) -> str:
        """What the reset does, in words (the preview and the log say this)."""
        move = f"{self.where}: {self.from_offset} -> {self.offset}"
        if self.copied_again:
            return (
                f"{move}: {self.copied_again} records will be copied again (the target then "
                f"holds source offsets {self.offset}..{self.offset + self.copied_again - 1} twice)"
            )
        if self.skipped:
            return (
                f"{move}: {self.skipped} records will be skipped (source offsets "
                f"{self.offset - self.skipped}..{self.offset - 1} are never replicated)"
            )
        return f"{move}: no change"

    def report(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "from_offset": self.from_offset,
            "to_offset": self.offset,
            "copied_again": self.copied_again,
            "skipped": self.skipped,
            "tail_target_offset": self.tail_target_offset,
            "effect": self.effect(),
        }


def reset_key(flow: str, topic: str, partition: int) -> str:
    return f"{flow}|reset|{topic}|{partition}"


# -- requesting ------------------------------------------------------------------------


def plan_reset(
    flow: FlowConfig,
    topic: str,
    to: ResetTarget,
    partitions: Iterable[int] | None = None,
    requested_by: str | None = None,
) -> list[ResetRequest]:
    """The requests `request_reset` would write now, without writing anything.
    ReplicatorError, naming what is wrong and the fix, when the flow does not
    replicate `topic`, a partition does not exist, or the offset is outside the
    source partition's log."""
    target = ResetTo.parse(to)
    count = _partition_count(flow, topic)
    wanted = _partitions(flow, topic, count, partitions)
    policy = flow.policy
    remote = policy.format_remote_topic(flow.source.alias, topic)
    by = requested_by or _whoami()
    now_ms = int(time.time() * 1000)
    bounds = _source_positions(flow, topic, wanted, target)
    remote_partitions = _remote_partitions(flow, remote)
    requests = []
    with TargetIndex(flow.target, flow.source.alias) as index:
        for partition in wanted:
            low, high, offset = bounds[partition]
            last = index.last_replica(remote, partition) if partition < remote_partitions else None
            resume = low if last is None else last.source_offset + 1
            requests.append(
                ResetRequest(
                    flow=flow.name,
                    topic=topic,
                    partition=partition,
                    offset=offset,
                    tail_target_offset=-1 if last is None else last.target_offset,
                    tail_source_offset=-1 if last is None else last.source_offset,
                    from_offset=resume,
                    # Within the source log: a tail beyond its end (topic recreated) or
                    # before its start (retention gap) is not what the reset changes.
                    copied_again=max(0, min(resume, high) - offset),
                    skipped=max(0, offset - max(resume, low)),
                    requested_ms=now_ms,
                    requested_by=by,
                )
            )
    return requests


def request_reset(
    flow: FlowConfig,
    topic: str,
    to: ResetTarget,
    partitions: Iterable[int] | None = None,
    requested_by: str | None = None,
) -> list[ResetRequest]:
    """Reset `topic` (all its partitions, or `partitions`) of `flow` to `to`: write
    the requests the flow's tasks honour when they next start (see the module
    docstring). The flow's workers must be stopped (`replicator offsets reset`
    stops and restarts the flow through the state store). Returns the requests
    written; ReplicatorError on bad input, running workers, or a write failure."""
    running = live_workers(flow)
    if running:
        names = ", ".join(f"{w.worker} (pid {w.pid} on {w.host})" for w in running)
        raise ReplicatorError(
            f"flow {flow.name} has running workers ({names}); a running task keeps its "
            f"position in memory, so the reset of {topic} would not apply. Stop the flow "
            "first: `replicator offsets reset` stops and restarts it through the state store"
        )
    requests = plan_reset(flow, topic, to, partitions, requested_by)
    ensure_compacted_topic(
        flow.target,
        RESETS_TOPIC,
        flow.status_topic_replication_factor,
        "status.topic.replication.factor",
    )
    _write(flow, requests)
    for request in requests:
        log.info(
            "flow %s: offset reset requested by %s: %s",
            flow.name,
            request.requested_by,
            request.effect(),
        )
    return requests


def read_resets(flow: FlowConfig) -> dict[tuple[str, int], ResetRequest]:
    """The latest reset request of every partition of `flow` (applied or not: a
    request has no state; see the module docstring)."""
    prefix = f"{flow.name}|reset|".encode()
    requests = {}
    for key, value in read_compacted(flow.target, RESETS_TOPIC).items():
        if not key.startswith(prefix):
            continue
        try:
            request = ResetRequest.decode(value)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning(
                "flow %s: ignoring an unreadable record %r in %s on %r: %s",
                flow.name,
                key.decode(errors="replace"),
                RESETS_TOPIC,
                flow.target.alias,
                exc,
            )
            continue
        if request.flow == flow.name:
            requests[(request.topic, request.partition)] = request
    return requests


def _whoami() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def _partition_count(flow: FlowConfig, topic: str) -> int:
    policy = flow.policy
    decisions = {d.source_topic: d for d in TopicSync(flow, policy).decisions()}
    decision = decisions.get(topic)
    if decision is None:
        replicated = sorted(name for name, d in decisions.items() if d.replicate)
        shown = ", ".join(replicated[:10]) + (", ..." if len(replicated) > 10 else "")
        raise ReplicatorError(
            f"topic {topic!r} does not exist on {flow.source.alias!r}, so flow {flow.name} "
            f"cannot reset it; check the name (the flow replicates: {shown or 'nothing'})"
        )
    if not decision.replicate:
        raise ReplicatorError(
            f"topic {topic!r} is not replicated by flow {flow.name} ({decision.reason}); "
            f"reset only topics the flow replicates (see `replicator topics`)"
        )
    return decision.partitions


def _partitions(
    flow: FlowConfig, topic: str, count: int, partitions: Iterable[int] | None
) -> list[int]:
    if partitions is None:
        return list(range(count))
    wanted = sorted(set(partitions))
    outside = [p for p in wanted if p < 0 or p >= count]
    if outside:
        raise ReplicatorError(
            f"topic {topic!r} on {flow.source.alias!r} has partitions 0..{count - 1}; "
            f"partition {', '.join(map(str, outside))} does not exist (choose partitions "
            f"in 0..{count - 1}, or name none to reset all)"
        )
    if not wanted:
        raise ReplicatorError(f"reset of {topic!r}: name at least one partition, or none for all")
    return wanted


def _source_positions(
    flow: FlowConfig, topic: str, partitions: list[int], to: ResetTo
) -> dict[int, tuple[int, int, int]]:
    """partition -> (log start, end, offset to reset to) on the source."""
    consumer = Consumer(
        {
            **flow.source.consumer,
            "group.id": f"replicator-reset-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        bounds = {p: watermarks(consumer, topic, p, _TIMEOUT_S) for p in partitions}
        times: dict[int, int] = {}
        if to.kind == "timestamp":
            asked = [TopicPartition(topic, p, to.value) for p in partitions]
            try:
                found = consumer.offsets_for_times(asked, timeout=_TIMEOUT_S)
            except KafkaException as exc:
                raise ReplicatorError(
                    f"cannot look up {topic} at {to} on {flow.source.alias!r}: {exc.args[0].str()}"
                ) from exc
            for tp in found:
                if tp.error is not None:
                    raise ReplicatorError(
                        f"cannot look up {topic}[{tp.partition}] at {to} on "
                        f"{flow.source.alias!r}: {tp.error.str()}"
                    )
                times[tp.partition] = tp.offset
    finally:
        consumer.close()
    result = {}
    for partition, (low, high) in bounds.items():
        if to.kind == "earliest":
            offset = low
        elif to.kind == "latest":
            offset = high
        elif to.kind == "timestamp":
            found_offset = times.get(partition, -1)
            # No record at or after that time: the end, like kafka-consumer-groups.
            offset = high if found_offset < 0 else max(low, found_offset)
        else:
            assert to.value is not None
            offset = to.value
            if not low <= offset <= high:
                raise ReplicatorError(
                    f"{topic}[{partition}]: offset {offset} is outside the source partition's "
                    f"log on {flow.source.alias!r}: valid offsets are {low}..{high} ({high} is "
                    f"its end: only records produced from now on); choose one in that range, "
                    "or reset to earliest or latest"
                )
        result[partition] = (low, high, offset)
    return result


def _remote_partitions(flow: FlowConfig, remote: str) -> int:
    """Partitions of the remote topic on the target (0: not created yet)."""
    consumer = Consumer(
        {**flow.target.consumer, "group.id": f"replicator-reset-{uuid.uuid4().hex}"}
    )
    try:
        metadata = consumer.list_topics(timeout=_TIMEOUT_S).topics.get(remote)
    except KafkaException as exc:
        raise ReplicatorError(
            f"cannot list the topics of {flow.target.alias!r}: {exc.args[0].str()}"
        ) from exc
    finally:
        consumer.close()
    if metadata is None or metadata.error is not None:
        return 0
    return len(metadata.partitions)


def _write(flow: FlowConfig, requests: list[ResetRequest]) -> None:
    producer = Producer({**flow.target.producer, "enable.idempotence": True})
    failures: list[str] = []

    def delivered(error: KafkaError | None, _message: object) -> None:
        if error is not None:
            failures.append(error.str())

    for request in requests:
        producer.produce(
            RESETS_TOPIC, key=request.key.encode(), value=request.value(), on_delivery=delivered
        )
    remaining = producer.flush(_TIMEOUT_S)
    if failures or remaining:
        raise ReplicatorError(
            f"writing the reset requests of flow {flow.name} to {RESETS_TOPIC} on "
            f"{flow.target.alias!r} failed: {'; '.join(failures) or f'{remaining} unacknowledged'}"
            "; nothing is applied until they are written: request the reset again"
        )


# -- honouring (the replication task) -------------------------------------------------------


class PendingResets:
    """The reset requests of the partitions of one assignment, read once for the batch
    (`read`), and the rule that decides whether a request applies (`honoured`)."""

    def __init__(
        self,
        flow: FlowConfig,
        requests: dict[tuple[str, int], ResetRequest],
        last_replica: Callable[[str, int], Replica | None] | None = None,
    ) -> None:
        self.flow = flow
        self.requests = requests
        self._last_replica = last_replica
        self._index: TargetIndex | None = None

    @classmethod
    def read(cls, flow: FlowConfig, partitions: Iterable[TopicPartition]) -> PendingResets:
        """The requests for `partitions`: one read of the resets topic."""
        wanted = {(tp.topic, tp.partition) for tp in partitions}
        if not wanted:  # a cooperative rebalance that gave this worker nothing new
            return cls(flow, {})
        return cls(flow, {k: r for k, r in read_resets(flow).items() if k in wanted})

    def __enter__(self) -> PendingResets:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None

    def honoured(
        self, topic: str, partition: int, remote: str, tail: TailPosition, resume: int
    ) -> ResetRequest | None:
        """The request to apply to `topic[partition]` now, or None. A request applies
        only while the partition's last replica on the target is the one it recorded
        (nothing replicated since). `tail` is the task's resume point, `resume` the
        source offset it would start at without a reset. Logs either way."""
        request = self.requests.get((topic, partition))
        if request is None:
            return None
        tail_source = -1 if tail.next_source_offset is None else tail.next_source_offset - 1
        # The source offset of the tail tells most moves apart without another read; the
        # target offset is needed when a rewind re-copied up to the same source offset.
        if tail_source == request.tail_source_offset:
            last = self._replica(remote, partition)
            if (-1 if last is None else last.target_offset) == request.tail_target_offset:
                self._applied(request, resume)
                return request
        log.info(
            "flow %s: %s: offset reset to %d (requested by %s at %s) ignored: records were "
            "replicated since it was requested (it was applied then, or replication went on "
            "before it was read); resuming from the target tail at %d",
            self.flow.name,
            request.where,
            request.offset,
            request.requested_by,
            _iso(request.requested_ms),
            resume,
        )
        return None

    def _replica(self, remote: str, partition: int) -> Replica | None:
        if self._last_replica is not None:
            return self._last_replica(remote, partition)
        if self._index is None:
            self._index = TargetIndex(self.flow.target, self.flow.source.alias)
        return self._index.last_replica(remote, partition)

    def _applied(self, request: ResetRequest, resume: int) -> None:
        skipped = max(0, request.offset - resume)
        again = max(0, resume - request.offset)
        if skipped:
            metrics.SKIPPED.labels(
                self.flow.name, request.topic, request.partition, "offset_reset"
            ).inc(skipped)
            effect = f"source offsets {resume}..{request.offset - 1} ({skipped}) are skipped"
        elif again:
            effect = (
                f"source offsets {request.offset}..{resume - 1} ({again} records) are copied "
                "again: the target will hold them twice"
            )
        else:
            effect = "the position is unchanged"
        log.warning(
            "flow %s: %s: offset reset applied (requested by %s at %s): resuming at source "
            "offset %d instead of %d; %s",
            self.flow.name,
            request.where,
            request.requested_by,
            _iso(request.requested_ms),
            request.offset,
            resume,
            effect,
        )


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")
