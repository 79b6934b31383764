"""Taking a flow over from MirrorMaker 2 exactly where MM2's copy ends.

A target partition that holds records but no replica of ours, while MM2's state
(`mm2_state`) knows the source partition, was filled by MM2. We continue after the
last source record MM2 copied, found by content (`alignment`): from the best
anchor, a recent MM2 offset sync whose target record is the source record's copy,
else the copy of the record MM2 committed, every target record to the partition's
end is matched with the source records. That point is exact even when MM2 wrote
past the offset it committed (killed rather than stopped). Where the proof stops
short, the partition and the number of uncertain target records are named and
`replicator.takeover.uncertain` decides: `refuse` (the default) stops with that
message, `at-least-once` continues after the last proven copy (the uncertain
records may be copied again).

`TakeoverPlanner` finds the points; `TakeoverPoint.describe` is the line that
`replicator migrate --from-mm2 --dry-run` prints and the first start logs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

from confluent_kafka import Message

from replicator.config.model import ClusterConfig, FlowConfig
from replicator.engine.alignment import Alignment, Content, align
from replicator.engine.mm2_state import MirrorMakerState
from replicator.engine.tail import Replica
from replicator.errors import ConfigError
from replicator.kafka.range_reads import RangeReader

log = logging.getLogger(__name__)

#: MM2's newest offset syncs tried as anchors, newest first, before its committed offset.
_SYNC_ANCHORS = 3
SETTING = "replicator.takeover.uncertain"


@dataclass(frozen=True)
class TakeoverPoint:
    """Where one partition continues after MM2, and why."""

    flow: str
    topic: str
    partition: int
    remote: str
    #: Where MM2 itself would resume (its committed offset + 1), None: never committed.
    mm2_resume: int | None
    #: The source offset after the last record proven copied (None: nothing proven).
    copied_until: int | None
    #: The target partition's end when read.
    target_end: int
    #: Where we start.
    start: int
    #: Target records after the last proven copy (0: the point is exact).
    uncertain: int
    #: How the point was found, or why it could not be proven.
    reason: str

    @property
    def exact(self) -> bool:
        return self.uncertain == 0 and self.copied_until is not None

    def describe(self) -> str:
        """Where MM2 stopped, where we start and why: a header line and three more."""
        mm2 = (
            "never committed an offset"
            if self.mm2_resume is None
            else f"committed source offset {self.mm2_resume - 1} (it would resume at "
            f"{self.mm2_resume})"
        )
        copied = (
            "no copy proven"
            if self.copied_until is None
            else f"its copies end with source offset {self.copied_until - 1}"
        )
        verdict = "exact" if self.exact else f"{self.uncertain} target records UNCERTAIN"
        return (
            f"{self.flow} {self.topic}[{self.partition}] -> {self.remote}[{self.partition}]\n"
            f"  MM2 stopped: {mm2}; {copied} (target end {self.target_end})\n"
            f"  we start at: source offset {self.start} ({verdict})\n"
            f"  why: {self.reason}"
        )


class _Records:
    """Committed records of one cluster's partition ranges, as `Content`."""

    def __init__(self, cluster: ClusterConfig, purpose: str) -> None:
        self._reader = RangeReader(
            cluster.consumer, purpose, repr(cluster.alias), **{"isolation.level": "read_committed"}
        )

    def close(self) -> None:
        self._reader.close()

    def bounds(self, topic: str, partition: int) -> tuple[int, int]:
        return self._reader.bounds(topic, partition)

    def contents(self, topic: str, partition: int, start: int, end: int) -> Iterator[Content]:
        for message in self._reader.messages(topic, partition, start, end):
            yield Content.of(message)

    def at(self, topic: str, partition: int, offset: int, end: int) -> Message | None:
        """The committed record at `offset`, None if that offset holds none."""
        message = self._reader.first(topic, partition, offset, end)
        return message if message is not None and message.offset() == offset else None


class TakeoverPlanner:
    """Finds the takeover points of one flow's partitions (MM2's state read once)."""

    def __init__(self, flow: FlowConfig, offsets_topic: str | None = None) -> None:
        self.flow = flow
        self._offsets_topic = offsets_topic
        self._state: MirrorMakerState | None = None
        self._source = _Records(flow.source, "takeover-source")
        self._target = _Records(flow.target, "takeover-target")

    def close(self) -> None:
        self._source.close()
        self._target.close()

    def __enter__(self) -> TakeoverPlanner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def state(self) -> MirrorMakerState:
        if self._state is None:
            self._state = MirrorMakerState.read(self.flow, self._offsets_topic)
        return self._state

    def point(self, topic: str, partition: int, remote: str) -> TakeoverPoint | None:
        """The takeover point of `topic[partition]`, or None when MM2 left nothing
        about it (no committed offset, no offset sync): nothing to take over."""
        state = self.state
        if not state.has_evidence(topic, partition):
            return None
        committed = state.committed.get((topic, partition))
        mm2_resume = None if committed is None else committed.offset + 1
        target_low, target_end = self._target.bounds(remote, partition)
        source_low, source_end = self._source.bounds(topic, partition)
        tried: list[str] = []
        best: Alignment | None = None
        by_content: list[tuple[Alignment, str]] = []
        anchors = self._anchors(topic, partition, remote, mm2_resume, target_low)
        for anchor, how, factual in anchors:
            alignment = align(
                anchor,
                self._source.contents(topic, partition, anchor[0], source_end),
                self._target.contents(remote, partition, anchor[1], target_end),
                target_end,
            )
            if alignment.proven and factual:
                return self._point(
                    topic=topic, partition=partition, remote=remote, mm2_resume=mm2_resume,
                    alignment=alignment, how=how,
                )  # fmt: skip
            if alignment.proven:
                by_content.append((alignment, how))
                if len(by_content) > 1:
                    break  # two target records could be the copy: neither is proven
                continue
            tried.append(f"{how}: {alignment.mismatch or 'nothing to compare'}")
            # A partial proof from a content match may start at a record that only looks
            # like the copy: it must not decide where at-least-once starts.
            if (
                factual
                and alignment.last is not None
                and (best is None or alignment.uncertain < best.uncertain)
            ):
                best = alignment
        if len(by_content) == 1:
            alignment, how = by_content[0]
            return self._point(
                topic=topic, partition=partition, remote=remote, mm2_resume=mm2_resume,
                alignment=alignment, how=how,
            )  # fmt: skip
        if by_content:
            (first, _), (second, _) = by_content
            tried.append(
                f"MM2's committed record {mm2_resume - 1 if mm2_resume else '?'} has the same "
                f"content as several target records, and the copy can be proven from more "
                f"than one of them (to source {first.last[0] if first.last else '?'} and to "
                f"{second.last[0] if second.last else '?'}): records alike, so which one is "
                "its copy, and where MM2's copy ends, cannot be told"
            )
        return self._unproven(
            topic=topic,
            partition=partition,
            remote=remote,
            mm2_resume=mm2_resume,
            target=(target_low, target_end),
            source_low=source_low,
            best=best,
            tried=tried,
        )

    def end_moved(self, remote: str, partition: int, end: int) -> str | None:
        """How `remote[partition]`'s end moved past `end` (read before its takeover was
        planned), or None: the partition holds no replica of ours and nothing of ours
        writes to it yet, so a moving end is another writer (MM2 still copying)."""
        now = self._target.bounds(remote, partition)[1]
        if now <= end:
            return None
        return (
            f"{remote}[{partition}] on {self.flow.target.alias!r} grew from {end} to {now} "
            "records while its takeover was planned, and nothing of ours writes to it yet"
        )

    def point_after(
        self, topic: str, partition: int, remote: str, last: Replica
    ) -> TakeoverPoint | None:
        """The takeover point of a partition that holds replicas of ours, `last` the
        last of them, when MM2 committed past it since (the flow was handed back to
        MM2, which copied more): MM2's copies are proven from our last replica on.
        None when MM2 did not copy past our last replica."""
        committed = self.state.committed.get((topic, partition))
        if committed is None or committed.offset <= last.source_offset:
            return None
        anchor = (last.source_offset, last.target_offset)
        target_low, target_end = self._target.bounds(remote, partition)
        source_low, source_end = self._source.bounds(topic, partition)
        alignment = align(
            anchor,
            self._source.contents(topic, partition, anchor[0], source_end),
            self._target.contents(remote, partition, anchor[1], target_end),
            target_end,
            anchor_proven=True,
        )
        how = f"our last replica (source {anchor[0]} at target {anchor[1]})"
        if alignment.proven:
            return self._point(
                topic=topic, partition=partition, remote=remote, mm2_resume=committed.offset + 1,
                alignment=alignment, how=how,
            )  # fmt: skip
        return self._unproven(
            topic=topic, partition=partition, remote=remote, mm2_resume=committed.offset + 1,
            target=(target_low, target_end), source_low=source_low,
            best=alignment if alignment.last is not None else None,
            tried=[f"{how}: {alignment.mismatch}"],
        )  # fmt: skip

    def _anchors(
        self, topic: str, partition: int, remote: str, mm2_resume: int | None, target_low: int
    ) -> Iterator[tuple[tuple[int, int], str, bool]]:
        """Anchors to prove the copy from, best first, each (anchor, how, factual): MM2's
        newest offset syncs (facts MM2 recorded), then every target record with the
        content of the record MM2 committed (found after the newest sync before it): a
        content match is only a candidate, proven when it alone explains the target."""
        syncs = [s for s in self.state.syncs.get((topic, partition), []) if s[1] >= target_low]
        for upstream, downstream in reversed(syncs[-_SYNC_ANCHORS:]):
            yield (upstream, downstream), f"MM2's offset sync {upstream}->{downstream}", True
        if mm2_resume is None:
            return
        found = self._copies_of(
            topic=topic,
            partition=partition,
            remote=remote,
            source_offset=mm2_resume - 1,
            syncs=syncs,
            target_low=target_low,
        )
        for anchor in found:
            how = (
                f"MM2's committed record {anchor[0]} found at target offset {anchor[1]} "
                f"(one of {len(found)} target records with its content)"
                if len(found) > 1
                else f"MM2's committed record {anchor[0]} found at target offset {anchor[1]}"
            )
            yield anchor, how, False

    def _copies_of(
        self,
        *,
        topic: str,
        partition: int,
        remote: str,
        source_offset: int,
        syncs: list[tuple[int, int]],
        target_low: int,
    ) -> list[tuple[int, int]]:
        """Every (source_offset, target offset) whose target record has the content of the
        source record at `source_offset`, searched from the newest sync at or before it
        (records alike, e.g. heartbeats or counters, give several)."""
        _, source_end = self._source.bounds(topic, partition)
        original = self._source.at(topic, partition, source_offset, source_end)
        if original is None:
            return []
        wanted = Content.of(original)
        start = max([d for u, d in syncs if u <= source_offset], default=target_low)
        _, target_end = self._target.bounds(remote, partition)
        return [
            (source_offset, copy.offset)
            for copy in self._target.contents(remote, partition, start, target_end)
            if wanted.copied_as(copy)
        ]

    def _point(
        self,
        *,
        topic: str,
        partition: int,
        remote: str,
        mm2_resume: int | None,
        alignment: Alignment,
        how: str,
    ) -> TakeoverPoint:
        assert alignment.last is not None and alignment.next_source is not None
        start = alignment.next_source
        past = ""
        if mm2_resume is not None and start > mm2_resume:
            past = f"; MM2 wrote {start - mm2_resume} source offsets past its committed offset"
        return TakeoverPoint(
            flow=self.flow.name,
            topic=topic,
            partition=partition,
            remote=remote,
            mm2_resume=mm2_resume,
            copied_until=start,
            target_end=alignment.target_end,
            start=start,
            uncertain=0,
            reason=(
                f"every target record from {how} to the end matches the source by key, value, "
                f"headers and timestamp (last copy: source {alignment.last[0]} at target "
                f"{alignment.last[1]}){past}"
            ),
        )

    def _unproven(
        self,
        *,
        topic: str,
        partition: int,
        remote: str,
        mm2_resume: int | None,
        target: tuple[int, int],
        source_low: int,
        best: Alignment | None,
        tried: list[str],
    ) -> TakeoverPoint:
        target_low, target_end = target
        why = "; ".join(tried) or "no anchor: no offset sync of MM2 and no committed offset"
        if best is not None and best.next_source is not None:
            start, uncertain = best.next_source, best.uncertain
            reason = f"proven only up to source {best.last[0]}; " + why  # type: ignore[index]
        else:
            start = mm2_resume if mm2_resume is not None else source_low
            uncertain = target_end - target_low
            reason = f"no copy proven; {why}"
        return TakeoverPoint(
            flow=self.flow.name,
            topic=topic,
            partition=partition,
            remote=remote,
            mm2_resume=mm2_resume,
            copied_until=None if best is None else best.next_source,
            target_end=target_end,
            start=start,
            uncertain=uncertain,
            reason=reason,
        )


class TakeoverRefused(ConfigError):
    """Where MirrorMaker 2's copy of one partition ends cannot be proven, and
    `replicator.takeover.uncertain = refuse`: that partition stops, the others go on."""


def decide(flow: FlowConfig, point: TakeoverPoint) -> int:
    """Where the partition starts under `replicator.takeover.uncertain`: the point's
    start when exact or allowed; TakeoverRefused naming the partition, the uncertain
    records and the setting otherwise."""
    if point.exact:
        return point.start
    if flow.takeover_uncertain == "at-least-once":
        log.warning(
            "flow %s: %s[%d]: taking over from MirrorMaker 2 at source offset %d although "
            "%d target records after it are not proven copies (%s = at-least-once): they "
            "may be copied again",
            flow.name, point.topic, point.partition, point.start, point.uncertain, SETTING,
        )  # fmt: skip
        return point.start
    raise TakeoverRefused(
        f"flow {flow.name}: {point.topic}[{point.partition}]: where MirrorMaker 2's copy ends "
        f"cannot be proven: {point.uncertain} records of {point.remote}[{point.partition}] "
        f"are uncertain ({point.reason}). Set {SETTING} = at-least-once to start at source "
        f"offset {point.start} (those records may be copied twice), or find MM2's offsets "
        "topic (offset.storage.topic) if it has another name; `replicator migrate --from-mm2 "
        "--dry-run` shows the plan"
    )
