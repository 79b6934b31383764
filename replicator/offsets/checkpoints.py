"""Checkpoints: consumer-group positions of the source, translated for the target.

Written to `<source>.checkpoints.internal` on the target in MirrorMaker 2's
format, so `RemoteClusterUtils.translateOffsets` and MM2-based tooling read them
unchanged; unlike MM2's, each one points at exactly the next record the group
has not processed (see `replicator.offsets.translation`).

MM2's rule holds: a checkpoint never moves backwards unless the group itself
rewound on the source. A position whose earlier records are not all replicated
yet is held back (the previous checkpoint stays) rather than guessed.

Reverse checkpoints run the other way while the DR side is active: groups that
consume a flow's remote topics on the target get their positions translated
back to the source topics (from the record's source-offset header), written to
`<target>.checkpoints.internal` on the source, so failback resumes exactly too.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Collection, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Self

from confluent_kafka import KafkaError, KafkaException, Message

from replicator.acls.principal import missing_acl
from replicator.config.model import ClusterConfig, FlowConfig
from replicator.engine.formats import Checkpoint
from replicator.engine.internal_topics import ensure_compacted_topic, read_compacted
from replicator.engine.tail import Replica
from replicator.engine.topic_sync import TopicSync
from replicator.errors import ReplicatorError
from replicator.kafka.clients import Producer
from replicator.kafka.errors import error_text
from replicator.offsets.batch_translation import BatchTranslator
from replicator.offsets.group_sync import GroupOffsetSync
from replicator.offsets.groups import Committed, GroupAdmin
from replicator.offsets.translation import (
    PartitionReader,
    TargetIndex,
    Translation,
    source_in_taken_over_copies,
    translate,
)

log = logging.getLogger(__name__)

_FLUSH_TIMEOUT_S = 30.0
#: Group-partitions a round translates and writes at a time (`Checkpointer.emit`)...
CHUNK_POSITIONS = 20_000
#: ... but never fewer groups than this: each step of a chunk reads or writes its groups'
#: offsets several at once, and two groups a chunk (at 10,000 partitions) left them
#: waiting on one another's round trips.
CHUNK_GROUPS_AT_LEAST = 8
#: Groups whose consumers a checkpointer keeps from round to round, on each cluster
#: (`GroupConsumers`): it reads the same groups' positions every round.
KEPT_GROUP_CONSUMERS = 64


class UnprovenPosition(ReplicatorError):
    """A group position in MirrorMaker 2's copies that cannot be checked by content."""


CheckpointKey = tuple[
    str, str, int
]  # group, topic (as named where the checkpoint applies), partition


@dataclass(frozen=True)
class GroupPosition:
    """One group's committed source position on one partition, translated."""

    group: str
    translation: Translation
    metadata: str = ""

    def checkpoint(self) -> Checkpoint:
        t = self.translation
        return Checkpoint(
            self.group, t.remote_topic, t.partition, t.source_offset, t.target_offset, self.metadata
        )


@dataclass
class CheckpointReport:
    """What one round of checkpointing did."""

    flow: str
    emitted: list[Checkpoint] = field(default_factory=list)
    #: Positions not checkpointed because records before them are not replicated yet.
    held: list[GroupPosition] = field(default_factory=list)
    #: Checkpoints left as they were (same position, or it would have moved backwards).
    unchanged: int = 0
    #: Positions behind the stored checkpoint although the group did not rewind: it
    #: moved on while the round translated them (see `Checkpointer._not_stale`).
    moved_on: int = 0
    #: sync.group.offsets: partitions committed per target group, and the groups left
    #: alone because they have active members there.
    synced_groups: dict[str, int] = field(default_factory=dict)
    active_groups: list[str] = field(default_factory=list)
    #: Why group offsets were not synced in a chunk (the checkpoints were written).
    group_sync_errors: list[str] = field(default_factory=list)
    #: Groups whose positions were translated and written this round.
    groups_done: int = 0
    #: Partitions the round checkpointed (this process's share of the flow's).
    partitions: int = 0
    #: Of those, partitions left out because nothing is copied to them yet
    #: (`BatchTranslator.not_started`): their positions wait for the copy.
    not_started: int = 0
    #: The source partitions whose positions this round could not checkpoint yet (held,
    #: or not reached by the copy): what the next round catches up on (`emit`).
    left: set[tuple[str, int]] = field(default_factory=set)
    #: Whether the round caught up on what the round before left, not a full round.
    catch_up: bool = False
    #: How the round's positions were translated (`BatchTranslator.answered`).
    translations: Counter[str] = field(default_factory=Counter)
    #: Where the round's time went, in seconds: `bounds` (the partitions' bounds on
    #: both clusters), `read` (the groups' committed positions), `translate`, `write`
    #: (queueing checkpoints, and the wait for their acknowledgement), `sync` (the
    #: group syncs, in a thread of their own beside the rest) and `sync_wait` (the
    #: round's wait for them at its end).
    seconds: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        """Count the time of the `with` block to `phase` (`seconds`)."""
        started = time.monotonic()
        try:
            yield
        finally:
            took = time.monotonic() - started
            self.seconds[phase] = self.seconds.get(phase, 0.0) + took


def read_checkpoints(cluster: ClusterConfig, topic: str) -> dict[CheckpointKey, Checkpoint]:
    """The latest checkpoint of every (group, topic, partition) in `topic` on `cluster`."""
    checkpoints = (Checkpoint.decode(k, v) for k, v in read_compacted(cluster, topic).items())
    return {(c.group, c.topic, c.partition): c for c in checkpoints}


def moves_forward(new: Checkpoint, previous: Checkpoint | None) -> bool:
    """MM2's rule: emit unless nothing changed or the checkpoint would go backwards
    without the group having rewound on the source.

    One addition: the same source position translated to another target offset is
    emitted. Translation is exact, so a source position has one right target offset;
    a stored checkpoint that disagrees was written wrong (e.g. by a version that
    raced with the flow) and must not be kept by the never-backwards rule."""
    if previous is None:
        return True
    if (new.upstream, new.downstream) == (previous.upstream, previous.downstream):
        return False
    if new.upstream == previous.upstream:
        return True
    return new.downstream >= previous.downstream or new.upstream < previous.upstream


class _CheckpointWriter:
    """Writes checkpoints to one checkpoints topic, never backwards."""

    def __init__(self, cluster: ClusterConfig, topic: str, replication_factor: int) -> None:
        ensure_compacted_topic(
            cluster, topic, replication_factor, "checkpoints.topic.replication.factor"
        )
        self.topic = topic
        self.cluster = cluster
        self.last = read_checkpoints(cluster, topic)
        # One delivery callback for every checkpoint, not one made per checkpoint: a
        # round of 250,000 spent a second making them.
        self._producer = Producer(
            {**cluster.idempotent_producer(), "on_delivery": self._delivered},
            cluster=cluster.alias,
        )
        #: Checkpoints queued and not acknowledged yet, by key as sent (oldest first:
        #: a key's records are acknowledged in the order they were sent), and the
        #: newest per key; the refusals since the last `settle`; the round's report.
        self._queued: dict[bytes, list[Checkpoint]] = {}
        self._sending: dict[CheckpointKey, Checkpoint] = {}
        self._refused: list[KafkaError] = []
        self._report: CheckpointReport | None = None

    def write(self, checkpoints: list[Checkpoint], report: CheckpointReport) -> None:
        """`queue` them and `settle`: written when this returns, else ReplicatorError."""
        self.queue(checkpoints, report)
        self.settle(report)

    def queue(self, checkpoints: list[Checkpoint], report: CheckpointReport) -> None:
        """Send what moves forward without waiting for the cluster; each counts as
        written (and as the latest) once acknowledged. A round queues chunk after chunk
        and settles once at its end: one wait a round, not one a chunk."""
        self._report = report
        for checkpoint in checkpoints:
            key = (checkpoint.group, checkpoint.topic, checkpoint.partition)
            if not moves_forward(checkpoint, self._latest(key)):
                report.unchanged += 1
                continue
            self._sending[key] = checkpoint
            self._produce(checkpoint)

    def settle(self, report: CheckpointReport) -> None:
        """Wait until every queued checkpoint is acknowledged (`_FLUSH_TIMEOUT_S` at
        most); ReplicatorError says how many were not, or why the cluster refused them."""
        if not self._sending and not self._refused:
            return
        remaining = self._producer.flush(_FLUSH_TIMEOUT_S)
        refused, self._refused = self._refused, []
        # Not acknowledged: sent again by the next round. `_queued` stays: the producer
        # reports on every record it was given (at its message timeout at the latest),
        # and a late report must match its own checkpoint, not a newer one of its key.
        self._sending = {}
        if remaining:
            raise ReplicatorError(
                f"{remaining} checkpoints to {self.topic} on {self.cluster.alias!r} were not "
                f"acknowledged within {_FLUSH_TIMEOUT_S:.0f}s; is the cluster reachable?"
            )
        if refused:
            raise ReplicatorError(self._refusal(refused[0], len(refused)))

    def _latest(self, key: CheckpointKey) -> Checkpoint | None:
        """The newest checkpoint of `key`: being sent, or acknowledged."""
        sending = self._sending.get(key)
        return sending if sending is not None else self.last.get(key)

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        """The producer's answer about one checkpoint (the oldest queued of its key)."""
        sent = message.key()
        if not isinstance(sent, bytes):
            return  # not a checkpoint: every one is sent with its key
        queued = self._queued[sent]
        checkpoint = queued.pop(0)
        if not queued:
            del self._queued[sent]
        key = (checkpoint.group, checkpoint.topic, checkpoint.partition)
        if self._sending.get(key) is checkpoint:
            del self._sending[key]
        if error is not None:
            self._refused.append(error)
            return
        self.last[key] = checkpoint
        if self._report is not None:
            self._report.emitted.append(checkpoint)

    def _produce(self, checkpoint: Checkpoint) -> None:
        """Queue one checkpoint; while the producer's queue is full (a round of hundreds
        of thousands), serve deliveries until it has room, for `_FLUSH_TIMEOUT_S` at most."""
        deadline = time.monotonic() + _FLUSH_TIMEOUT_S
        key = checkpoint.key()
        value = checkpoint.value()
        while True:
            try:
                self._producer.produce(self.topic, key=key, value=value)
                self._queued.setdefault(key, []).append(checkpoint)
                return
            except BufferError:
                if time.monotonic() > deadline:
                    raise ReplicatorError(
                        f"checkpoints to {self.topic} on {self.cluster.alias!r}: the producer's "
                        f"queue stayed full for {_FLUSH_TIMEOUT_S:.0f}s; is the cluster reachable?"
                    ) from None
                self._producer.poll(0.1)

    def _refusal(self, error: KafkaError, count: int) -> str:
        problem = f"{count} checkpoints to {self.topic} on {self.cluster.alias!r} were refused"
        if error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            return f"{problem}: " + missing_acl(self.cluster, "WRITE", f"TOPIC {self.topic}")
        return f"{problem}: {error.str()}"

    def close(self) -> None:
        self._producer.flush(_FLUSH_TIMEOUT_S)


class Checkpointing:
    """What forward and reverse checkpointing share: the index of the flow's records
    on its target, and a writer for one checkpoints topic."""

    def __init__(self, flow: FlowConfig, cluster: ClusterConfig, topic: str) -> None:
        self.flow = flow
        self.policy = flow.policy
        self._index = TargetIndex(flow.target, flow.source.alias)
        self._where = (cluster, topic)
        self._writer: _CheckpointWriter | None = None

    def close(self) -> None:
        self._index.close()
        if self._writer is not None:
            self._writer.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open_writer(self) -> None:
        """Open the checkpoint writer now (it reads the stored checkpoints and starts a
        producer), rather than at the first write."""
        self._open_writer()

    def _open_writer(self) -> _CheckpointWriter:
        if self._writer is None:
            cluster, topic = self._where
            self._writer = _CheckpointWriter(
                cluster, topic, self.flow.checkpoints_topic_replication_factor
            )
        return self._writer

    def _stored(self) -> dict[CheckpointKey, Checkpoint]:
        """The latest checkpoints in the topic (read when first asked, then kept up
        to date by this writer)."""
        return self._open_writer().last

    def _write(self, checkpoints: list[Checkpoint], report: CheckpointReport) -> None:
        self._open_writer().write(checkpoints, report)

    def _queue(self, checkpoints: list[Checkpoint], report: CheckpointReport) -> None:
        self._open_writer().queue(checkpoints, report)

    def _settle(self, report: CheckpointReport) -> None:
        self._open_writer().settle(report)


class Checkpointer(Checkpointing):
    """Translates a flow's source consumer groups and checkpoints them on the target;
    with `sync.group.offsets.enabled`, also commits them to idle target groups.

    One checkpointer lives as long as the loop that uses it: what it learnt (offset
    pairs, exact translations, the stored checkpoints, when each group was last
    done) makes the next round cost what changed (`BatchTranslator`). A round goes
    through the groups in chunks, checkpointed longest ago first, and queues each
    chunk's checkpoints before translating the next; a chunk's groups are synced on
    the target (`sync.group.offsets.enabled`) in a thread of their own meanwhile, the
    next chunk read from the source as the target commits, and the round ends when
    every checkpoint is acknowledged and every sync done.
    """

    def __init__(self, flow: FlowConfig) -> None:
        super().__init__(flow, flow.target, flow.checkpoints_topic)
        self.source = GroupAdmin(flow.source, keep_consumers=KEPT_GROUP_CONSUMERS)
        self._source_reader = PartitionReader(flow.source)
        self._topics = TopicSync(flow)
        self._batch = BatchTranslator(flow, self._index, self._source_reader)
        #: When each group's checkpoints were last written (monotonic), for the order.
        self._done_at: dict[str, float] = {}
        #: Groups whose every position was checkpointed exactly, with the committed
        #: positions that was of: while a group commits nothing new, its round costs
        #: one read of its offsets, nothing per position.
        self._settled: dict[str, list[Committed]] = {}
        #: The flow's replicated topics and their partition counts, as last listed.
        self.topics: dict[str, int] = {}
        self._group_sync = (
            GroupOffsetSync(GroupAdmin(flow.target, keep_consumers=KEPT_GROUP_CONSUMERS))
            if flow.sync_group_offsets_enabled
            else None
        )
        #: The thread that syncs a chunk's groups on the target while the next chunk's
        #: are read from the source and translated (`_emit_chunk`), and its jobs of
        #: this round: a round waits for them before it ends.
        self._sync_behind: ThreadPoolExecutor | None = None
        self._syncing: list[Future[None]] = []
        #: The groups `warm_up` asks the target about (listed once).
        self._warm_groups: list[str] | None = None

    def close(self) -> None:
        if self._sync_behind is not None:
            self._sync_behind.shutdown(wait=True)  # a failed round's syncs still running
        super().close()
        self._batch.close()
        self._source_reader.close()
        self.source.close()
        if self._group_sync is not None:
            self._group_sync.close()

    def warm_up(self) -> bool:
        """Before the first round and between rounds until it answers, ask the target
        about the source's groups (`GroupOffsetSync.prepare`), so the first sync finds
        their coordinators ready; True when there is nothing left to ask.

        The checkpoint writer is opened here too. Its idempotent producer asks the
        target for a producer id, which a fresh target gives only once its transaction
        coordinator has created and loaded its topic: opened by the first write, at
        5,000 partitions the round's 250,000 checkpoints filled the producer's queue
        and waited tens of seconds for it; opened at the start, that wait overlaps the
        copy."""
        if self.flow.emit_checkpoints_enabled:
            self._open_writer()
        if self._group_sync is None:
            return True
        if self._warm_groups is None:
            self._warm_groups = self.groups()
        return self._group_sync.prepare(self._warm_groups)

    def groups(self) -> list[str]:
        """The source groups the flow checkpoints (`groups`, `groups.exclude`), less the
        replicator's own engine groups (`FlowConfig.is_engine_group`): they commit the
        replicator's positions, which no application resumes from."""
        groups = self.source.groups(self.flow.groups)
        return [g for g in groups if not self.flow.is_engine_group(g)]

    def translate_group(self, group: str) -> list[GroupPosition]:
        """`group`'s committed positions on the flow's topics, translated exactly, one
        at a time with record counts (`Translation.missing`): for reports that show them
        (the drill, `replicator offsets translate`); many groups at once without counts:
        `translate_groups`."""
        partitions = self._partitions()
        committed = self.source.committed(group, partitions=partitions)
        ends = self.source.end_offsets([(c.topic, c.partition) for c in committed])
        return [self._translate(group, c, ends[c.topic, c.partition]) for c in committed]

    def translate_groups(self, groups: list[str]) -> dict[str, list[GroupPosition]]:
        """Every group's committed positions on the flow's topics, translated exactly and
        together (`BatchTranslator`: no record counts)."""
        self._batch.begin_round()
        return self._translated(groups, self._partitions())

    def emit(
        self,
        groups: list[str] | None = None,
        chunk: int | None = None,
        partitions: Collection[tuple[str, int]] | None = None,
        *,
        catch_up: bool = False,
    ) -> CheckpointReport:
        """One round: translate every group (or `groups`) and write what moved forward,
        `chunk` group-partitions at a time (default `CHUNK_POSITIONS`), on every
        partition of the flow (or on those of `partitions` only: this process's share,
        `CheckpointShare`). The report's `left` names the partitions whose positions
        it could not checkpoint yet (held, or not reached by the copy).

        `catch_up`: `partitions` are only what the round before left, looked at again
        soon after it (the checkpoint loop does so while the copy is under way). Such a
        round reads the groups' positions on those partitions alone: at 5,000
        partitions and 50 groups, the full round that followed a round during the copy
        read and translated all 250,000 positions again for the 1,118 partitions the
        copy had reached since, 8 s of the 21 s from the copy's end to every group
        synced. A group that committed elsewhere meanwhile is read by the next full
        round, an interval after the last one at most, as with any round."""
        report = CheckpointReport(self.flow.name, catch_up=catch_up)
        try:
            self._emit_round(report, groups, chunk, partitions)
        finally:
            with report.timed("sync_wait"):
                self._synced_behind()
        with report.timed("write"):
            self._settle(report)
        return report

    def _emit_round(
        self,
        report: CheckpointReport,
        groups: list[str] | None,
        chunk: int | None,
        partitions: Collection[tuple[str, int]] | None,
    ) -> None:
        """The round of `emit`, its checkpoints queued and its group syncs started.
        A catch-up round's chunks are each a part of the flow's partitions
        (`_emit_chunk`'s `part`)."""
        part = report.catch_up
        self._batch.begin_round()
        wanted = self.groups() if groups is None else list(groups)
        wanted.sort(key=lambda g: self._done_at.get(g, 0.0))  # longest ago first
        every = self._partitions()
        share = None if partitions is None else set(partitions)
        partitions = every if share is None else [p for p in every if p in share]
        report.partitions = len(partitions)
        if not partitions:
            return
        with report.timed("bounds"):
            if self._batch.check_targets(partitions):  # a target partition went back
                self._settled.clear()
            waiting = self._batch.not_started(partitions)
        if waiting:
            report.not_started = len(waiting)
            report.left = set(waiting)
            partitions = [p for p in partitions if p not in waiting]
            if not partitions:
                return
        if self._group_sync is not None:
            try:
                self._group_sync.prepare(wanted)
            except (ReplicatorError, KafkaException) as exc:
                report.group_sync_errors.append(error_text(exc))
        per_chunk = max(
            1 if chunk else CHUNK_GROUPS_AT_LEAST,
            (chunk or CHUNK_POSITIONS) // max(1, len(partitions)),
        )
        for at in range(0, len(wanted), per_chunk):
            self._emit_chunk(wanted[at : at + per_chunk], partitions, report, part=part)
        if part:
            report.groups_done = len(wanted)
        if waiting:
            waiting = self._emit_reached(wanted, waiting, report, chunk)
        # Positions held because their records were still being copied when the round
        # began: the round took a while, so many are there now. One more look at those
        # groups (their other positions come from memory) rather than a round later.
        held = sorted({p.group for p in report.held})
        if held:
            report.held = []
            self._batch.begin_round()  # their records were being copied: read the ends again
            for at in range(0, len(held), per_chunk):
                self._emit_chunk(
                    held[at : at + per_chunk], partitions, report, again=True, part=part
                )
        if waiting:
            # And the partitions still not reached then: the copy went on meanwhile. At
            # 5,000 partitions and 50 groups, 776 were reached in the seconds the held
            # positions took, and the next round (8 s, every group read again) synced
            # them 13 s after the copy's end.
            waiting = self._emit_reached(wanted, waiting, report, chunk)
        report.left = waiting | {
            (p.translation.topic, p.translation.partition) for p in report.held
        }

    def _synced_behind(self) -> None:
        """Wait for the group syncs this round started (each catches what the target
        refuses: an error here is a bug, and ends the round)."""
        syncing, self._syncing = self._syncing, []
        for job in wait(syncing).done:
            job.result()

    def _emit_reached(
        self,
        groups: list[str],
        waiting: set[tuple[str, int]],
        report: CheckpointReport,
        chunk: int | None,
    ) -> set[tuple[str, int]]:
        """The partitions the copy had not reached when the round began and has
        reached since, for every group, in this round: a round at thousands of
        partitions lasts long enough for the copy to reach its last partitions (at
        5,000 partitions and 50 groups the next round came 4 s later and took 12 s).
        Returns those still not reached."""
        with report.timed("bounds"):
            reached, went_back = self._batch.reached(waiting)
        if went_back:
            self._settled.clear()
        if not reached:
            return waiting
        report.not_started -= len(reached)
        per_chunk = max(
            1 if chunk else CHUNK_GROUPS_AT_LEAST,
            (chunk or CHUNK_POSITIONS) // len(reached),
        )
        for at in range(0, len(groups), per_chunk):
            self._emit_chunk(groups[at : at + per_chunk], reached, report, part=True)
        return waiting.difference(reached)

    def _emit_chunk(
        self,
        groups: list[str],
        partitions: list[tuple[str, int]],
        report: CheckpointReport,
        *,
        again: bool = False,
        part: bool = False,
    ) -> None:
        """Translate and write the checkpoints of `groups` on `partitions`. `again`:
        a second look in the same round (the groups are counted once); `part`: a part
        of the flow's partitions only (what is settled, and when each group was done,
        stay the full rounds')."""
        with report.timed("read"):
            committed = self.source.committed_many(groups, partitions)
        # The same partitions are asked in the same order every round, so a group that
        # committed nothing new answers an equal list (compared as tuples, in C).
        settled = {group for group in groups if self._settled.get(group) == committed[group]}
        for group in settled:  # nothing committed since: its checkpoints stand
            report.unchanged += len(committed[group])
            report.translations["cache"] += len(committed[group])
        fresh = {g: found for g, found in committed.items() if g not in settled}
        with report.timed("translate"):
            exact, unsettled = self._exact_checkpoints(fresh, report)
            checkpoints = self._not_stale(exact, report, unsettled)
        with report.timed("write"):
            self._queue(checkpoints, report)
        for group in fresh:
            if group in unsettled:
                self._settled.pop(group, None)
            elif not part:
                self._settled[group] = committed[group]
        if self._group_sync is not None:
            # Synced on the target while the next chunk is read from the source.
            if self._sync_behind is None:
                self._sync_behind = ThreadPoolExecutor(1, thread_name_prefix="group-sync")
            self._syncing.append(
                self._sync_behind.submit(
                    self._sync_groups,
                    self._group_sync,
                    checkpoints,
                    {g: committed[g] for g in settled},
                    report,
                )
            )
        if not part:
            done = time.monotonic()
            for group in groups:
                self._done_at[group] = done
        if not again and not part:
            report.groups_done += len(groups)
        report.translations.update(self._batch.answered)

    def _exact_checkpoints(
        self, committed: dict[str, list[Committed]], report: CheckpointReport
    ) -> tuple[dict[str, list[Checkpoint]], set[str]]:
        """The checkpoints of the positions translated exactly, per group, and the
        groups with a position held back (in `report.held`). Made straight from the
        translations: a round that writes 2,000,000 checkpoints made a position object
        and a checkpoint of each, and a position object per group and partition was a
        third of the round's own time."""
        translations = self._batch.translate(
            (c.topic, c.partition, c.offset) for found in committed.values() for c in found
        )
        exact: dict[str, list[Checkpoint]] = {}
        unsettled: set[str] = set()
        for group, found in committed.items():
            mine = exact.setdefault(group, [])
            for topic, partition, offset, metadata in found:
                t = translations[topic, partition, offset]
                if t.exact:
                    mine.append(
                        Checkpoint(
                            group, t.remote_topic, partition, offset, t.target_offset, metadata
                        )
                    )
                else:
                    report.held.append(GroupPosition(group, t, metadata))
                    unsettled.add(group)
        return exact, unsettled

    def _sync_groups(
        self,
        group_sync: GroupOffsetSync,
        checkpoints: list[Checkpoint],
        settled: dict[str, list[Committed]],
        report: CheckpointReport,
    ) -> None:
        """sync.group.offsets for the chunk: the `checkpoints` translated, and the stored
        ones of the `settled` groups due to be looked at again."""
        for group, positions in settled.items():
            if not group_sync.unchanged(group):
                checkpoints = [*checkpoints, *self._stored_of(group, positions)]
        try:
            with report.timed("sync"):
                synced, active = group_sync.sync(checkpoints)
        except (ReplicatorError, KafkaException) as exc:
            # The checkpoints stand (an unplanned failover resumes from them); the
            # groups not synced stay due and the next round syncs them. A target just
            # started answers group calls only once its coordinator has loaded.
            report.group_sync_errors.append(error_text(exc))
            return
        report.synced_groups.update(synced)
        report.active_groups.extend(active)

    def _stored_of(self, group: str, positions: list[Committed]) -> list[Checkpoint]:
        """The stored checkpoints of `group` on the partitions of `positions`."""
        stored, policy, alias = self._stored(), self.policy, self.flow.source.alias
        remote: dict[str, str] = {}
        found = []
        for topic, partition, _, _ in positions:
            name = remote.get(topic) or remote.setdefault(
                topic, policy.format_remote_topic(alias, topic)
            )
            checkpoint = stored.get((group, name, partition))
            if checkpoint is not None:
                found.append(checkpoint)
        return found

    def list_topics(self) -> list[str]:
        """The flow's replicated source topics (one metadata request)."""
        self.topics = self._topics.replicated_topics()
        return sorted(self.topics)

    def _partitions(self) -> list[tuple[str, int]]:
        """The source partitions the flow replicates (one metadata request)."""
        self.list_topics()
        return [
            (topic, partition)
            for topic, count in sorted(self.topics.items())
            for partition in range(count)
        ]

    def _translated(
        self, groups: list[str], partitions: list[tuple[str, int]]
    ) -> dict[str, list[GroupPosition]]:
        return self._translate_committed(self.source.committed_many(groups, partitions))

    def _translate_committed(
        self, committed: dict[str, list[Committed]]
    ) -> dict[str, list[GroupPosition]]:
        translations = self._batch.translate(
            (c.topic, c.partition, c.offset) for found in committed.values() for c in found
        )
        return {
            group: [
                GroupPosition(group, translations[c.topic, c.partition, c.offset], c.metadata)
                for c in found
            ]
            for group, found in committed.items()
        }

    def _not_stale(
        self,
        exact: dict[str, list[Checkpoint]],
        report: CheckpointReport,
        unsettled: set[str],
    ) -> list[Checkpoint]:
        """The `exact` checkpoints of each group, less those that only look like a rewind.

        A round takes seconds. If the group moved on meanwhile and a newer checkpoint
        was written (a failover's final one, written while this round ran), this
        round's older position would pass the never-backwards rule as a rewind and
        stay the latest checkpoint. So a position behind the stored checkpoint is
        written only if the group really rewound: it has committed an offset before
        the stored one now. (A group that merely moved on gets a forward checkpoint
        a little behind it, as always; the next round catches up.)"""
        stored = self._stored()
        policy, alias = self.policy, self.flow.source.alias
        checkpoints = []
        for group, found in exact.items():
            now: dict[tuple[str, int], int] | None = None
            for checkpoint in found:
                previous = stored.get((group, checkpoint.topic, checkpoint.partition))
                if previous is not None and checkpoint.upstream < previous.upstream:
                    if now is None:  # by remote topic, as checkpoints name them
                        now = {
                            (policy.format_remote_topic(alias, c.topic), c.partition): c.offset
                            for c in self.source.committed(group)
                        }
                    where = (checkpoint.topic, checkpoint.partition)
                    if now.get(where, checkpoint.upstream) >= previous.upstream:
                        report.moved_on += 1
                        unsettled.add(group)  # looked at again next round
                        continue
                checkpoints.append(checkpoint)
        return checkpoints

    def _translate(self, group: str, committed: Committed, source_end: int) -> GroupPosition:
        remote = self.policy.format_remote_topic(self.flow.source.alias, committed.topic)
        translation = translate(
            self._index,
            committed.topic,
            committed.partition,
            remote,
            committed.offset,
            source=(self._source_reader, source_end),
        )
        return GroupPosition(group, translation, committed.metadata)


class ReverseCheckpointer(Checkpointing):
    """While the target side is active, translates the positions its groups reached
    on the flow's remote topics back to the source topics, into
    `<target>.checkpoints.internal` on the source: failback then resumes them
    exactly (the record at a group's position carries its source offset)."""

    def __init__(self, flow: FlowConfig) -> None:
        super().__init__(flow, flow.source, flow.policy.checkpoints_topic(flow.target.alias))
        self.target = GroupAdmin(flow.target)
        self._source_reader: PartitionReader | None = None

    def close(self) -> None:
        super().close()
        if self._source_reader is not None:
            self._source_reader.close()

    def _in_mm2_copies(
        self, group: str, where: tuple[str, str, int], first: Replica, target_offset: int
    ) -> int | None:
        """The source offset of a position before our first replica, in MirrorMaker 2's
        copies of a partition taken over (`replicator.engine.takeover`): None when it
        is not there; UnprovenPosition when it is there and cannot be checked."""
        if self._source_reader is None:  # read only for positions in MM2's copies
            self._source_reader = PartitionReader(self.flow.source)
        found, unproven = source_in_taken_over_copies(
            self._index, self._source_reader, where, first=first, target_offset=target_offset
        )
        if unproven is not None:
            raise UnprovenPosition(f"group {group!r}: {unproven}")
        return found

    def translate_group(self, group: str) -> list[Checkpoint]:
        """`group`'s positions on the flow's remote topics (target), as source positions:
        `upstream` is the target offset, `downstream` the source offset."""
        alias = self.flow.source.alias
        checkpoints = []
        for committed in self.target.committed(group):
            topic, partition = committed.topic, committed.partition
            if self.policy.is_internal_topic(topic) or self.policy.topic_source(topic) != alias:
                continue  # not a remote topic of this flow
            # One look at the partition (see `translate`): a record replicated in between
            # must not move the answer past it.
            _, end = self._index.bounds(topic, partition)
            replica = self._index.first_replica(topic, partition, committed.offset, end)
            if replica is not None and replica.target_offset > committed.offset:
                upstream = self.policy.upstream_topic(topic) or topic
                try:
                    in_copies = self._in_mm2_copies(
                        group, (upstream, topic, partition), replica, committed.offset
                    )
                except UnprovenPosition as exc:
                    log.warning("reverse checkpoint held back (the previous one stays): %s", exc)
                    continue
                source_offset = replica.source_offset if in_copies is None else in_copies
            elif replica is not None:
                source_offset = replica.source_offset
            else:  # at the end: the group has read everything replicated
                last = self._index.last_replica(topic, partition, end)
                if last is None:
                    continue
                source_offset = last.source_offset + 1
            checkpoints.append(
                Checkpoint(
                    group,
                    self.policy.upstream_topic(topic) or topic,
                    partition,
                    committed.offset,
                    source_offset,
                    committed.metadata,
                )
            )
        return checkpoints

    def emit(self, groups: list[str] | None = None) -> CheckpointReport:
        report = CheckpointReport(f"{self.flow.target.alias}->{self.flow.source.alias} (reverse)")
        if groups is None:
            groups = self.target.groups(self.flow.groups)
        wanted = [g for g in groups if not self.flow.is_engine_group(g)]
        self._write([c for group in wanted for c in self.translate_group(group)], report)
        return report
