"""Offset reset requests, the procedure's side: where to reset a partition to
(`ResetTo`), what a reset would do (`plan_reset`, the preview), and writing the
requests the flow's tasks honour when they next take the partitions
(`request_reset`). The request record and the task's decision to honour it are
the engine's (`replicator.engine.resets`); docs/offset_resets.md says why a reset
is a request and what it does to the target.
"""

from __future__ import annotations

import getpass
import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, cast

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from replicator.config.model import FlowConfig
from replicator.engine.internal_topics import RESETS_TOPIC, topic_of
from replicator.engine.resets import ResetRequest, utc_iso
from replicator.engine.status import live_workers
from replicator.engine.tail import Replica
from replicator.engine.topic_sync import TopicSync
from replicator.errors import ReplicatorError
from replicator.kafka.clients import Consumer, Producer
from replicator.kafka.errors import error_text
from replicator.kafka.watermarks import watermarks
from replicator.offsets.translation import TargetIndex

log = logging.getLogger(__name__)

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
            return f"timestamp {utc_iso(self.value)} ({self.value} ms)"
        return self.kind


ResetTarget = ResetTo | Literal["earliest", "latest"] | int | datetime


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
    with TargetIndex(flow.target, flow.source.alias) as index:
        return [
            plan_partition(
                flow.name,
                topic,
                partition,
                source=bounds[partition],
                last=index.last_replica(remote, partition)
                if partition < remote_partitions
                else None,
                requested_ms=now_ms,
                requested_by=by,
            )
            for partition in wanted
        ]


def plan_partition(
    flow: str,
    topic: str,
    partition: int,
    *,
    source: tuple[int, int, int],
    last: Replica | None,
    requested_ms: int,
    requested_by: str,
) -> ResetRequest:
    """The request that resets `topic[partition]` of `flow`: `source` is the source
    partition's (log start, end, offset to reset to), `last` its last replica on the
    target now (None: nothing replicated), where the flow would resume without it."""
    low, high, offset = source
    resume = low if last is None else last.source_offset + 1
    return ResetRequest(
        flow=flow,
        topic=topic,
        partition=partition,
        offset=offset,
        tail_target_offset=-1 if last is None else last.target_offset,
        tail_source_offset=-1 if last is None else last.source_offset,
        from_offset=resume,
        # Within the source log: a tail beyond its end (topic recreated) or before
        # its start (retention gap) is not what the reset changes.
        copied_again=max(0, min(resume, high) - offset),
        skipped=max(0, offset - max(resume, low)),
        requested_ms=requested_ms,
        requested_by=requested_by,
    )


def request_reset(
    flow: FlowConfig,
    topic: str,
    to: ResetTarget,
    partitions: Iterable[int] | None = None,
    requested_by: str | None = None,
) -> list[ResetRequest]:
    """Reset `topic` (all its partitions, or `partitions`) of `flow` to `to`: write
    the requests the flow's tasks honour when they next start (see
    docs/offset_resets.md). The flow's workers must be stopped (`replicator offsets
    reset` stops and restarts the flow through the state store). Returns the requests
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
    topic_of(flow, RESETS_TOPIC).ensure()
    _write(flow, requests)
    for request in requests:
        log.info(
            "flow %s: offset reset requested by %s: %s",
            flow.name,
            request.requested_by,
            request.effect(),
        )
    return requests


def _whoami() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def _partition_count(flow: FlowConfig, topic: str) -> int:
    decisions = {d.source_topic: d for d in TopicSync(flow).decisions()}
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
            asked = [TopicPartition(topic, p, cast(int, to.value)) for p in partitions]
            try:
                found = consumer.offsets_for_times(asked, timeout=_TIMEOUT_S)
            except KafkaException as exc:
                raise ReplicatorError(
                    f"cannot look up {topic} at {to} on {flow.source.alias!r}: {error_text(exc)}"
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
            f"cannot list the topics of {flow.target.alias!r}: {error_text(exc)}"
        ) from exc
    finally:
        consumer.close()
    if metadata is None or metadata.error is not None:
        return 0
    return len(metadata.partitions)


def _write(flow: FlowConfig, requests: list[ResetRequest]) -> None:
    producer = Producer(flow.target.idempotent_producer())
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
