"""The last checkpoint round of each flow, in the status topic on its target (key
`<flow>|checkpoints|<filters>`: the digest of its topic and group filters, since other
deployments may run a flow of the same name into the same target).

A round writes only the checkpoints that moved: on an estate at rest it writes none,
and the newest checkpoint record ages while every checkpoint stays current. So the
checkpoint loop says here when its last round ended and what it did; how old a
flow's checkpoints are (`replicator.operations.dr_status.checkpoint_age_s`: the
supervisor, the health check, the DR status page, `flows list`) is the younger of
that and the newest record. Without it, an idle estate's checkpoints looked stale,
and the supervisor then read every group and checkpoint to find out why (164 s at
10,000 partitions and 200 groups). With the checkpoint work shared between
processes (`CheckpointShare`) the record is the newest round of any of them; each
process's checkpoint thread says whether it fails (`thread_status`).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, fields

from replicator.config.model import FlowConfig, NameFilter
from replicator.engine.status import deliver_status, status_producer
from replicator.kafka.clients import Producer
from replicator.offsets.checkpoints import CheckpointReport

_FLUSH_S = 10.0


@dataclass(frozen=True)
class CheckpointRound:
    """What the last checkpoint round of `flow` did, and when it ended."""

    flow: str
    ended_ms: int
    took_s: float
    groups: int
    partitions: int
    written: int
    unchanged: int
    held: int

    @property
    def age_seconds(self) -> float:
        return round(max(0.0, time.time() - self.ended_ms / 1000), 1)


def checkpoint_round_key(flow: FlowConfig) -> str:
    filters = "|".join(_patterns(f) for f in (flow.topics, flow.groups))
    return f"{flow.name}|checkpoints|{hashlib.sha256(filters.encode()).hexdigest()[:16]}"


def _patterns(names: NameFilter) -> str:
    ported = getattr(names, "class_name", "")  # a custom filter's class (`PortedFilter`)
    return repr(([p.pattern for p in names.include], [p.pattern for p in names.exclude], ported))


def read_checkpoint_round(values: dict[bytes, bytes], flow: FlowConfig) -> CheckpointRound | None:
    """The last round `flow`'s loop published, from the status topic as read
    (`replicator.engine.status.status_values`); None when none did (an older
    replicator, or no round has ended yet). Fields a newer replicator added are left
    out, so an older reader still reads the record."""
    value = values.get(checkpoint_round_key(flow).encode())
    if value is None:
        return None
    data = json.loads(value)
    return CheckpointRound(**{f.name: data[f.name] for f in fields(CheckpointRound)})


class CheckpointRoundPublisher:
    """Publishes each flow's rounds, with one producer per target kept for the loop's
    life (a round every few seconds)."""

    def __init__(self) -> None:
        self._producers: dict[str, Producer] = {}

    def publish(self, flow: FlowConfig, report: CheckpointReport, took_s: float) -> None:
        """The round of `report` ended now; ReplicatorError when the target does not
        take the record (the checkpoints themselves stand)."""
        record = CheckpointRound(
            flow.name,
            int(time.time() * 1000),
            round(took_s, 2),
            report.groups_done,
            report.partitions,
            len(report.emitted),
            report.unchanged,
            len(report.held),
        )
        deliver_status(
            self._producer(flow),
            flow,
            "checkpoint round status",
            checkpoint_round_key(flow),
            asdict(record),
            timeout_s=_FLUSH_S,
        )

    def _producer(self, flow: FlowConfig) -> Producer:
        producer = self._producers.get(flow.target.alias)
        if producer is None:
            producer = self._producers[flow.target.alias] = status_producer(flow)
        return producer
