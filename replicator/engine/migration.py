"""Moving a flow between MirrorMaker 2 and the replicator, per partition.

- `takeover_plan`: for every partition of a flow's replicated topics, where MM2
  stopped, where `replicator run` will start and why (`replicator migrate
  --from-mm2 --dry-run` prints it; the run logs the same line at its first start).
- `hand_back`: after the replicator was stopped, where each partition stands (the
  target tail's provenance) written to MM2's Connect offsets topic in MM2's format,
  so MM2 started again continues there instead of copying again everything since
  its own last commit (`replicator migrate --to-mm2`).
"""

from __future__ import annotations

from dataclasses import dataclass

from replicator.config.model import FlowConfig
from replicator.engine.mm2_state import MirrorMakerState
from replicator.engine.tail import TailReader
from replicator.engine.takeover import TakeoverPlanner, TakeoverPoint, decide
from replicator.engine.topic_sync import TopicSync
from replicator.errors import ConfigError
from replicator.kafka.range_reads import RangeReader


@dataclass(frozen=True)
class PlanLine:
    """One partition of the plan: where it starts, and why."""

    flow: str
    topic: str
    partition: int
    remote: str
    #: The source offset `replicator run` starts at (None: it would refuse to start).
    start: int | None
    why: str
    takeover: TakeoverPoint | None = None

    def describe(self) -> str:
        if self.takeover is not None:
            line = self.takeover.describe()
            return line if self.start is not None else f"{line}\n  REFUSED: {self.why}"
        start = "REFUSED" if self.start is None else f"source offset {self.start}"
        return (
            f"{self.flow} {self.topic}[{self.partition}] -> {self.remote}[{self.partition}]\n"
            f"  we start at: {start}\n  why: {self.why}"
        )


def _partitions(flow: FlowConfig) -> list[tuple[str, int, str]]:
    topics = TopicSync(flow).replicated_topics()
    policy, alias = flow.policy, flow.source.alias
    return [
        (topic, partition, policy.format_remote_topic(alias, topic))
        for topic, count in sorted(topics.items())
        for partition in range(count)
    ]


def takeover_plan(flow: FlowConfig, offsets_topic: str | None = None) -> list[PlanLine]:
    """Where `replicator run` starts each partition of `flow`, and why; reads only."""
    lines = []
    tail = TailReader(flow.target.consumer, flow.source.alias)
    source = RangeReader(flow.source.consumer, "plan", repr(flow.source.alias))
    try:
        with TakeoverPlanner(flow, offsets_topic) as planner:
            for topic, partition, remote in _partitions(flow):
                lines.append(_line(flow, planner, tail, source, (topic, partition, remote)))
    finally:
        tail.close()
        source.close()
    return lines


def _line(
    flow: FlowConfig,
    planner: TakeoverPlanner,
    tail: TailReader,
    source: RangeReader,
    where: tuple[str, int, str],
) -> PlanLine:
    topic, partition, remote = where
    exists = tail.exists(remote, partition)
    position = tail.position(remote, partition) if exists else None
    if position is not None and position.last is not None:
        after = planner.point_after(topic, partition, remote, position.last)
        if after is not None:
            return _decided(flow, after)
        return PlanLine(
            flow.name,
            topic,
            partition,
            remote,
            position.last.source_offset + 1,
            "the target holds our replicas: continues after the last one (no takeover)",
        )
    low = source.bounds(topic, partition)[0]
    if position is None or position.target_end == 0:
        return PlanLine(
            flow.name, topic, partition, remote, low, "the target is empty: copied from the start"
        )
    point = planner.point(topic, partition, remote)
    if point is None:
        return PlanLine(
            flow.name,
            topic,
            partition,
            remote,
            low,
            f"the target holds {position.target_end} offsets of records that are not ours, and "
            "MirrorMaker 2 left no committed offset or offset sync for this partition: "
            "copied from the start of the source log",
        )
    return _decided(flow, point)


def _decided(flow: FlowConfig, point: TakeoverPoint) -> PlanLine:
    where = (flow.name, point.topic, point.partition, point.remote)
    try:
        return PlanLine(*where, decide(flow, point), "", point)
    except ConfigError as exc:
        return PlanLine(*where, None, str(exc), point)


@dataclass(frozen=True)
class HandBack:
    """What `hand_back` wrote (or would write): per partition, MM2's new committed
    offset (the last record we copied) and the one MM2 had before."""

    flow: str
    offsets_topic: str
    positions: dict[tuple[str, int], int]
    previous: dict[tuple[str, int], int | None]

    def describe(self) -> list[str]:
        lines = []
        for (topic, partition), last in sorted(self.positions.items()):
            before = self.previous[(topic, partition)]
            was = "none" if before is None else str(before)
            lines.append(
                f"{self.flow} {topic}[{partition}]: MM2 committed offset {was} -> {last} in "
                f"{self.offsets_topic} (MirrorMaker 2 continues at {last + 1})"
            )
        return lines


def hand_back(flow: FlowConfig, *, dry_run: bool, offsets_topic: str | None = None) -> HandBack:
    """Write our position of every partition we replicated into MM2's offsets topic
    (see the module); with `dry_run`, only say what would be written. Run it while
    neither the replicator nor MM2 runs the flow."""
    state = MirrorMakerState.read(flow, offsets_topic)
    tail = TailReader(flow.target.consumer, flow.source.alias)
    positions: dict[tuple[str, int], int] = {}
    try:
        for topic, partition, remote in _partitions(flow):
            if not tail.exists(remote, partition):
                continue
            position = tail.position(remote, partition)
            if position.next_source_offset is not None:
                positions[(topic, partition)] = position.next_source_offset
    finally:
        tail.close()
    previous = {
        key: (state.committed[key].offset if key in state.committed else None) for key in positions
    }
    written = {key: next_offset - 1 for key, next_offset in positions.items()}
    if not dry_run and positions:
        written = state.hand_back(positions)
    return HandBack(flow.name, state.offsets_topic, written, previous)
