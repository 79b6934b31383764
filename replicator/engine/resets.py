"""Offset resets, the engine's side: the request record and the task's decision.

The replicator keeps no source position: a task resumes each partition after its
last replica on the target (`replicator.engine.tail`). An operator's reset is
therefore a durable request, one record per partition in the compacted topic
`replicator-resets.internal` on the target (written by
`replicator.procedures.reset_requests`), that the task honours when the partition
is assigned to it, and only while the partition's last replica is still the one
the request recorded (`applies`): nothing to mark as applied, and a rewind, whose
copies move the tail, is never applied twice. docs/offset_resets.md has the
design and what a reset does to the target.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import TopicPartition

from replicator import metrics
from replicator.config.model import FlowConfig
from replicator.engine.internal_topics import RESETS_TOPIC, read_compacted
from replicator.engine.tail import TailPosition
from replicator.kafka.clients import Consumer

log = logging.getLogger(__name__)


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


def read_resets(
    flow: FlowConfig, reader: Consumer | None = None
) -> dict[tuple[str, int], ResetRequest]:
    """The latest reset request of every partition of `flow` (applied or not: a
    request has no state; see the module docstring), with `reader` when given (see
    `read_compacted`)."""
    prefix = f"{flow.name}|reset|".encode()
    requests = {}
    for key, value in read_compacted(flow.target, RESETS_TOPIC, reader=reader).items():
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


def applies(request: ResetRequest, tail: TailPosition) -> bool:
    """The reset decision: `request` applies to a partition whose target tail is
    `tail` only while that tail's last replica is the one the request recorded
    (nothing was replicated for the partition since it was requested). Both its
    source and its target offset: a rewind that copied records again up to the
    same source offset leaves another record at the tail."""
    last = tail.last
    now = (-1, -1) if last is None else (last.source_offset, last.target_offset)
    return now == (request.tail_source_offset, request.tail_target_offset)


class PendingResets:
    """The reset requests of the partitions of one assignment, read once for the batch
    (`read`), and what the task does with them (`honoured`)."""

    def __init__(self, flow: FlowConfig, requests: dict[tuple[str, int], ResetRequest]) -> None:
        self.flow = flow
        self.requests = requests

    @classmethod
    def read(
        cls,
        flow: FlowConfig,
        partitions: Iterable[TopicPartition],
        reader: Consumer | None = None,
    ) -> PendingResets:
        """The requests for `partitions`: one read of the resets topic (with `reader`,
        a reader the caller keeps, when given)."""
        wanted = {(tp.topic, tp.partition) for tp in partitions}
        if not wanted:  # a cooperative rebalance that gave this worker nothing new
            return cls(flow, {})
        return cls(flow, {k: r for k, r in read_resets(flow, reader).items() if k in wanted})

    def honoured(
        self, topic: str, partition: int, tail: TailPosition, resume: int
    ) -> ResetRequest | None:
        """The request to apply to `topic[partition]` now (see `applies`), or None.
        `tail` is the task's resume point, the one read of the partition's tail,
        `resume` the source offset it would start at without a reset. Logs either way
        (and counts the offsets a skip leaves out)."""
        request = self.requests.get((topic, partition))
        if request is None:
            return None
        if applies(request, tail):
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
            utc_iso(request.requested_ms),
            resume,
        )
        return None

    def _applied(self, request: ResetRequest, resume: int) -> None:
        skipped = max(0, request.offset - resume)
        again = max(0, resume - request.offset)
        if skipped:
            partition = metrics.partition_label(
                request.partition, self.flow.metrics_partition_labels
            )
            metrics.SKIPPED.labels(self.flow.name, request.topic, partition, "offset_reset").inc(
                skipped
            )
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
            utc_iso(request.requested_ms),
            request.offset,
            resume,
            effect,
        )


def utc_iso(ms: int) -> str:
    """`ms` since the epoch as an ISO 8601 UTC time, to the second."""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")
