"""Is MirrorMaker 2 still writing a flow? Asked before a partition is taken over from
it (`takeover`): with MM2 and the replicator both writing one target partition, every
record after the takeover point is copied twice, and the takeover's proof of where
MM2's copy ends no longer holds.

What a running MM2 shows on the flow's target cluster, each read here:

- **Its heartbeats.** MM2's heartbeat connector writes a heartbeat of (A, B) to B's
  `heartbeats` topic every `emit.heartbeats.interval.seconds` (1 s by default), in
  dedicated mode and on any Connect cluster (Strimzi's) alike. The replicator writes
  its own heartbeats on the source (`engine.heartbeats`), so a heartbeat of (A, B) on
  B is MM2's. One younger than `FRESH_HEARTBEATS` intervals (at least
  `FRESH_AT_LEAST_S`) says MM2 ran a moment ago.
- **Its copies landing.** A partition to be taken over holds no replica of ours, and
  nothing of ours writes to it until the takeover: if its end moves while the takeover
  is planned (`TakeoverPlanner.end_moved`), another writer is at work. This sees a node
  that copies even when another node holds the heartbeat task (Connect reassigns a
  killed node's tasks only after `scheduled.rebalance.max.delay.ms`).

MM2's Connect group (`A-mm2` on B in dedicated mode) would say more, but Kafka's
consumer-group APIs refuse to describe or list a group of Connect's protocol, so it
is not read. A node that neither copies nor emits heartbeats is not seen: stop every
node before a takeover (docs/migrating-from-mm2.md).

`TakeoverGate` lets a takeover through only without such evidence (or when the flow
forces it: `replicator.takeover.force`, logged each time); `MirrorMakerRunning`
carries the evidence and how to go on.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from confluent_kafka import Message

from replicator.config.model import FlowConfig
from replicator.engine.formats import FormatError, Heartbeat
from replicator.errors import ReplicatorError
from replicator.kafka.range_reads import RangeReader

log = logging.getLogger(__name__)

#: A heartbeat of the flow younger than this many of its intervals says MM2 runs.
FRESH_HEARTBEATS = 5
FRESH_AT_LEAST_S = 10.0
#: How long a verdict that MM2 is gone stands before it is asked again.
GONE_FOR_S = 5.0
FORCE_SETTING = "replicator.takeover.force"


class MirrorMakerRunning(ReplicatorError):
    """MirrorMaker 2 still writes the flow: no partition is taken over from it."""

    def __init__(self, flow: FlowConfig, evidence: list[str]) -> None:
        self.evidence = evidence
        super().__init__(
            f"flow {flow.name}: MirrorMaker 2 still writes this flow ({'; '.join(evidence)}): "
            f"no partition is taken over from it while it does, or both would copy the same "
            f"records. Stop every MirrorMaker 2 node of {flow.source.alias}->"
            f"{flow.target.alias}; the partitions wait and go on once it is gone. If it is "
            f"gone and this is stale, set {FORCE_SETTING} = true (`replicator run "
            f"--force-takeover`), which is logged"
        )


@dataclass
class MirrorMakerWatch:
    """Reads MM2's signs of life for one flow on its target."""

    flow: FlowConfig

    def evidence(self, now_ms: int | None = None) -> list[str]:
        """What says MM2 still runs the flow; empty when nothing does."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        found = []
        fresh_ms = int(
            1000
            * max(FRESH_AT_LEAST_S, FRESH_HEARTBEATS * self.flow.emit_heartbeats_interval_seconds)
        )
        beat = self._newest_heartbeat(since_ms=now_ms - fresh_ms)
        if beat is not None:
            found.append(
                f"its heartbeat of {self.flow.source.alias}->{self.flow.target.alias} in "
                f"{self.flow.heartbeats_topic!r} on {self.flow.target.alias!r} is "
                f"{max(0, now_ms - beat) / 1000:.1f} s old"
            )
        return found

    def _newest_heartbeat(self, since_ms: int) -> int | None:
        """The newest time (ms) of a heartbeat of the flow on its target written at
        `since_ms` or later: only the records since then are read."""
        topic = self.flow.heartbeats_topic
        source, target = self.flow.source.alias, self.flow.target.alias
        reader = RangeReader(self.flow.target.consumer, "mm2-liveness", repr(target))
        newest = None
        try:
            for partition in reader.partitions(topic):
                start = reader.offset_at(topic, partition, since_ms)
                if start is None:
                    continue
                _, end = reader.bounds(topic, partition)
                for message in reader.messages(topic, partition, start, end):
                    stamp = _flow_beat(message, source, target)
                    if stamp is not None and stamp >= since_ms:
                        newest = stamp if newest is None else max(newest, stamp)
        finally:
            reader.close()
        return newest


def _flow_beat(message: Message, source: str, target: str) -> int | None:
    """The record's time if it is a heartbeat of `source`->`target`, else None."""
    key, value = message.key(), message.value()
    if key is None or value is None:
        return None
    try:
        beat = Heartbeat.decode(key, value)
    except FormatError:
        return None  # not a heartbeat in MM2's format: not MM2's sign of life
    if (beat.source, beat.target) != (source, target):
        return None
    return max(beat.timestamp, message.timestamp()[1])


class TakeoverGate:
    """Lets takeovers of one flow through only while MM2 shows no sign of life (or the
    flow forces them, `replicator.takeover.force`, logged each time), asking the
    target at most every `GONE_FOR_S`."""

    def __init__(self, flow: FlowConfig) -> None:
        self.flow = flow
        self._watch = MirrorMakerWatch(flow)
        self._passed_at: float | None = None

    def check(self, moved: str | None = None) -> None:
        """Returns when a partition may be taken over; MirrorMakerRunning otherwise.
        `moved`: the partition's end moved while its takeover was planned (how, in
        words; `TakeoverPlanner.end_moved`)."""
        now = time.monotonic()
        evidence = [moved] if moved else []
        if self._passed_at is None or now - self._passed_at >= GONE_FOR_S:
            evidence += self._watch.evidence()
        if evidence and not self.flow.takeover_force:
            self._passed_at = None
            raise MirrorMakerRunning(self.flow, evidence)
        if evidence:
            log.warning(
                "flow %s: taking over from MirrorMaker 2 although it shows signs of life "
                "(%s), because %s = true: if it still runs, both copy the same records",
                self.flow.name, "; ".join(evidence), FORCE_SETTING,
            )  # fmt: skip
        if self._passed_at is None or now - self._passed_at >= GONE_FOR_S:
            self._passed_at = now
