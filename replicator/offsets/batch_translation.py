"""Exact translation of many positions at once: what a checkpoint round and a
failover translate, at a cost that follows what changed.

`translate` (`replicator.offsets.translation`) finds one position by bisecting its
target partition: a few dozen short reads, fine for one group, not for hundreds of
groups on thousands of partitions (0.12 s a position measured at 1,000 partitions:
a round of 20 groups never finished). Here a round's positions are translated
together:

1. Positions translated before and not moved are answered from memory (a found
   record does not move, unless the target partition was recreated or truncated:
   its high watermark going back clears what was known of it).
2. Positions inside what this process's writers wrote, one record after the other,
   are answered from that (`replicator.engine.written_runs`): the record's replica
   is where its run puts it, no read; the position right after the copy's end is
   where the next replica lands, and one past it is settled as in 4.
3. The rest start from the nearest known pair at or before them (`OffsetSyncStore`:
   the flow's offset syncs and what earlier rounds found), or from the partition's
   start when that is close: every partition is read forward from there at once, one
   consumer for all (`scan_partitions`: each fetch carries all of a broker's
   partitions), every position of a partition in one pass, sorted. The first record
   read must be the pair's own record (else the pair is stale, the partition falls
   back); the answer is the first replica whose source offset is `>= c`, exactly as
   the bisection defines it.
4. A position past everything replicated is exact only when the source holds no
   committed record between the last replica and it (transaction markers only): one
   record read per partition on the source, all partitions at once.
5. A target partition that does not exist yet holds its positions back (nothing is
   replicated; `absent`); an empty one is settled like 4.
6. What memory and pairs cannot answer (no pair near, a stale pair, MirrorMaker 2's
   copies before our first replica) goes to the bisection, one position at a time.
   How often each way answered is counted (`replicator_checkpoint_translations_total
   {how="cache|written|read|bisect|absent"}`).

The translations here carry no record counts (`missing` is None): checkpoints and
group moves need only where a position is and whether it is exact; the drill and
`replicator offsets translate`, which report counts, use `translate`.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import cast

from confluent_kafka import Message

from replicator import metrics
from replicator.config.model import FlowConfig
from replicator.engine.tail import Replica, replica_of
from replicator.engine.written_runs import WrittenRuns, written_runs
from replicator.kafka.bounds import partition_bounds
from replicator.kafka.clients import admin_for
from replicator.kafka.partition_scans import Scan, scan_partitions
from replicator.offsets.replica_reads import first_records
from replicator.offsets.sync_store import OffsetSyncStore
from replicator.offsets.translation import PartitionReader, TargetIndex, Translation, translate

log = logging.getLogger(__name__)

#: A pair farther ahead than this (in target offsets) is jumped to rather than read up to.
JUMP_OFFSETS = 2_000
#: A position with no pair at or before it is read from its partition's start when
#: the partition's start lies at most this far before the next pair (or its end).
NEAR_START_OFFSETS = 10_000
#: Exact translations kept per partition (the newest).
_CACHED_PER_PARTITION = 256
_TIMEOUT_S = 30.0
#: How long a source partition seen holding records counts as such (`not_started`).
_SOURCE_HOLDS_S = 30.0

Position = tuple[str, int, int]  # (source topic, partition, committed source offset)
Where = tuple[str, int]  # (remote topic, partition)


@dataclass
class _Wanted:
    """The positions of one target partition this round still asks for."""

    topic: str
    remote: str
    partition: int
    offsets: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class _Beyond:
    """A position past every replica of its partition: exact only if the source has no
    committed record from `source_from` up to it."""

    entry: _Wanted
    offset: int
    #: Where the next replica lands (the target offset after the last one).
    next_target: int
    #: The source offset after the last replica (None: nothing replicated).
    replicated_until: int | None
    source_from: int


class _TargetScan(Scan):
    """Reads one target partition forward from a known pair (checked first: it must
    be the record there) or from the partition's start, and finds each wanted
    position's first replica with source offset `>= c`."""

    def __init__(
        self,
        alias: bytes,
        wanted: list[int],
        start: tuple[int, int] | int,
        anchor_of: Callable[[int], tuple[int, int] | None],
    ) -> None:
        self._alias = alias
        self.wanted = wanted
        self._next = 0
        self._anchor_of = anchor_of
        #: The pair the next record must be (None: reading from the partition's start).
        self._expect = start if isinstance(start, tuple) else None
        self._start = start[1] if isinstance(start, tuple) else start
        self.found: dict[int, Replica] = {}
        self.last: Replica | None = None
        #: Why the scan's answers cannot be trusted (the rest go to the bisection).
        self.broken: str | None = None

    def start(self) -> int:
        return self._start

    def record(self, message: Message) -> int | None:
        replica = replica_of(message, self._alias)
        if self._expect is not None:
            source, target = self._expect
            self._expect = None
            if replica is None or message.offset() != target or replica.source_offset != source:
                self._break(f"the pair {source}->{target} is not the record there")
                return None
        if replica is None:
            if self.last is None:  # before our first replica: MM2's copies, or others'
                self._break("records without our header before the first replica")
            return None
        self.last = replica
        wanted = self.wanted
        while self._next < len(wanted) and replica.source_offset >= wanted[self._next]:
            self.found[wanted[self._next]] = replica
            self._next += 1
        if self._next == len(wanted):
            self.done = True
            return None
        anchor = self._anchor_of(wanted[self._next])
        if (
            anchor is not None
            and anchor[0] > replica.source_offset
            and anchor[1] > cast(int, message.offset()) + JUMP_OFFSETS
        ):
            self._expect = anchor
            return anchor[1]
        return None

    def end(self) -> None:
        """The rest are past the partition's end (answered from `last`)."""

    def _break(self, why: str) -> None:
        self.broken = why
        self.done = True


class BatchTranslator:
    """Translates a flow's committed source positions to the target, many at once;
    keeps what it learnt (pairs, exact answers) from one call to the next."""

    def __init__(
        self, flow: FlowConfig, index: TargetIndex, source_reader: PartitionReader
    ) -> None:
        self.flow = flow
        self._alias = flow.source.alias.encode()
        self._index = index
        self._source_reader = source_reader
        self.syncs = OffsetSyncStore(flow)
        #: Where this process's writers put the flow's records (shared with them).
        self.written: WrittenRuns = written_runs(flow)
        #: Offsets of both clusters are read every round: with clients made once.
        self._target_admin = admin_for(flow.target)
        self._source_admin = admin_for(flow.source)
        self._cache: dict[Where, dict[int, Translation]] = {}
        self._highs: dict[Where, int] = {}
        #: Target partitions' (log start, end) read this round (`begin_round`).
        self._bounds: dict[Where, tuple[int, int] | None] = {}
        #: Source partitions' first committed record at or after an offset, found this
        #: round (`_check_source`): (that offset, the record's offset).
        self._source_firsts: dict[tuple[str, int], tuple[int, int]] = {}
        #: Source partitions seen holding records whose copy had not started then
        #: (`not_started`).
        self._source_holds: set[tuple[str, int]] = set()
        self._source_holds_since = time.monotonic()
        #: Every answer of this round, held ones too: a round's later chunks of groups
        #: that ask a position again get the same answer without a read (the round
        #: reads each target partition's bounds once; a held position is looked at
        #: again by the round's last pass, after `begin_round`).
        self._round: dict[Position, Translation] = {}
        #: How each position of the last call was answered: cache, read, bisect.
        self.answered: Counter[str] = Counter()

    def close(self) -> None:
        self.syncs.close()

    def begin_round(self) -> None:
        """A new checkpoint round: target offsets are read again (once a round, however
        many chunks of groups it translates), and so are the source's records past them."""
        self._bounds = {}
        self._source_firsts = {}
        self._round = {}

    def check_targets(self, partitions: Iterable[tuple[str, int]]) -> bool:
        """Read this round's bounds of the target partitions of the source `partitions`
        and forget what is known of those whose end went back (recreated or truncated);
        True when something was forgotten: answers kept elsewhere are stale too."""
        alias, policy = self.flow.source.alias, self.flow.policy
        remote: dict[str, str] = {}
        wheres = [
            (topic, (remote.get(topic) or remote.setdefault(
                topic, policy.format_remote_topic(alias, topic)), partition))
            for topic, partition in partitions
        ]  # fmt: skip
        unknown = [where for _, where in wheres if where not in self._bounds]
        if unknown:
            found = partition_bounds(self.flow.target, unknown, self._target_admin)
            self._bounds.update({where: found.get(where) for where in unknown})
        forgot = False
        for topic, where in wheres:
            forgot |= self._check_high(where, topic, self._bounds[where])
        return forgot

    def not_started(self, partitions: Iterable[tuple[str, int]]) -> set[tuple[str, int]]:
        """Of the source `partitions` whose bounds `check_targets` read this round, those
        the flow has not copied a record to yet while the source holds some: their
        target partition is not served yet (being created) or has never held a record
        (end 0). A position there is held whatever it is, so a round leaves them out
        and reads nothing of them: at 5,000 partitions being created, reading every
        group's positions on them (and each source partition's first record) took a
        round 10 s of a machine the target needed to create them. A target emptied by
        retention (end above 0) is not among them: its positions are exact."""
        alias, policy = self.flow.source.alias, self.flow.policy
        candidates = [
            (topic, partition)
            for topic, partition in partitions
            if (bounds := self._bounds.get((policy.format_remote_topic(alias, topic), partition)))
            is None
            or bounds[1] == 0
        ]
        # A source partition seen holding records is not read again while its copy
        # has not started (for `_SOURCE_HOLDS_S` at most: retention may empty it): at
        # 5,000 partitions being created, reading every source partition's bounds each
        # round took a third of the round.
        if time.monotonic() - self._source_holds_since > _SOURCE_HOLDS_S:
            self._source_holds.clear()
            self._source_holds_since = time.monotonic()
        unknown = [p for p in candidates if p not in self._source_holds]
        if unknown:
            source = partition_bounds(self.flow.source, unknown, self._source_admin)
            self._source_holds.update(
                p for p in unknown if (b := source.get(p)) is not None and b[1] > b[0]
            )
        waiting = {p for p in candidates if p in self._source_holds}
        self._source_holds.intersection_update(waiting)  # started since: forgotten
        return waiting

    def reached(self, waiting: Iterable[tuple[str, int]]) -> tuple[list[tuple[str, int]], bool]:
        """Of the source partitions `not_started` found `waiting` earlier this round,
        those the copy has reached since (their target bounds read again), and whether
        a target partition went back meanwhile (as `check_targets`)."""
        alias, policy = self.flow.source.alias, self.flow.policy
        waiting = list(waiting)
        for topic, partition in waiting:
            self._bounds.pop((policy.format_remote_topic(alias, topic), partition), None)
        went_back = self.check_targets(waiting)
        still = self.not_started(waiting)
        return [p for p in waiting if p not in still], went_back

    def translate(self, positions: Iterable[Position]) -> dict[Position, Translation]:
        """The exact translation of each position (see the module docstring)."""
        self.answered = Counter()
        results: dict[Position, Translation] = {}
        wanted = self._wanted(positions, results)
        if not wanted:
            return results
        self.syncs.refresh()
        unknown = [where for where in wanted if where not in self._bounds]
        unknown += self._behind_the_copy(wanted)
        if unknown:
            found = partition_bounds(self.flow.target, unknown, self._target_admin)
            self._bounds.update({where: found.get(where) for where in unknown})
        bounds = {w: b for w in wanted if (b := self._bounds[w]) is not None}
        scans: dict[Where, _TargetScan] = {}
        fallback: list[tuple[_Wanted, int]] = []
        beyond: list[_Beyond] = []
        for where, entry in wanted.items():
            entry.offsets.sort()
            self._check_high(where, entry.topic, bounds.get(where))
            todo = self._from_cache(where, entry, results)
            if not todo:
                continue
            if where not in bounds:  # not created yet: nothing is replicated, all held
                for offset in todo:
                    self._held(entry, offset, 0, None, results)
                self.answered["absent"] += len(todo)
                continue
            low, high = bounds[where]
            if low == high:  # empty: exact where the source has nothing before them
                beyond.extend(_Beyond(entry, o, high, None, 0) for o in todo)
                continue
            todo = self._from_written(entry, todo, high, results, beyond)
            if not todo:
                continue
            start = self._start(entry, todo[0], bounds[where])
            while start is None and todo:  # no pair near: bisected, one at a time
                fallback.append((entry, todo.pop(0)))
                start = self._start(entry, todo[0], bounds[where]) if todo else None
            if start is None:
                continue
            scans[where] = _TargetScan(
                self._alias,
                todo,
                start,
                functools.partial(self.syncs.anchor, entry.topic, entry.partition),
            )
        if scans:
            scan_partitions(
                self.flow.target.consumer,
                "translate",
                self.flow.target.alias,
                scans,
                **{"isolation.level": "read_committed"},
            )
        beyond += self._answers(wanted, scans, results, fallback)
        self._check_source(beyond, results)
        self._bisect(fallback, results)
        for how, count in self.answered.items():
            metrics.CHECKPOINT_TRANSLATIONS.labels(self.flow.name, how).inc(count)
        self._round.update(results)
        return results

    # -- steps ------------------------------------------------------------------------

    def _wanted(
        self, positions: Iterable[Position], results: dict[Position, Translation]
    ) -> dict[Where, _Wanted]:
        """The positions to translate, by target partition; those this round answered
        already go into `results`."""
        policy, alias = self.flow.policy, self.flow.source.alias
        wanted: dict[Where, _Wanted] = {}
        for position in set(positions):
            answered = self._round.get(position)
            if answered is not None:
                results[position] = answered
                self.answered["cache"] += 1
                continue
            topic, partition, offset = position
            remote = policy.format_remote_topic(alias, topic)
            entry = wanted.setdefault((remote, partition), _Wanted(topic, remote, partition))
            entry.offsets.append(offset)
        return wanted

    def _behind_the_copy(self, wanted: dict[Where, _Wanted]) -> list[Where]:
        """The target partitions whose end, as this round read it, is behind the newest
        record this process has written there since: read again, once per call.
        Memory answers nothing where the target ends before its newest record (that
        is how a truncated target shows), so a round's chunks that came after the
        copy went on read what memory knew: at 1,000 partitions and 20 groups, the
        catch-up after the copy read the target for nearly every position."""
        behind = []
        for where, entry in wanted.items():
            if where not in self._bounds:
                continue  # not read this round yet: read anyway
            bounds = self._bounds[where]
            newest = self.written.newest_target((entry.topic, entry.partition))
            if newest is not None and (bounds is None or newest >= bounds[1]):
                behind.append(where)
        return behind

    def _check_high(self, where: Where, topic: str, bounds: tuple[int, int] | None) -> bool:
        """Forget what is known of a target partition whose end went back (recreated
        or truncated): its records are not where they were. True when it did."""
        high = None if bounds is None else bounds[1]
        before = self._highs.get(where)
        went_back = before is not None and (high is None or high < before)
        if went_back:
            self._cache.pop(where, None)
            self.syncs.forget(topic, where[1])
        if high is not None:
            self._highs[where] = high
        return went_back

    def _from_cache(
        self, where: Where, entry: _Wanted, results: dict[Position, Translation]
    ) -> list[int]:
        """Answer what is known; the offsets still to find, ascending."""
        known = self._cache.get(where, {})
        todo = []
        for offset in entry.offsets:
            cached = known.get(offset)
            if cached is None:
                todo.append(offset)
            else:
                results[entry.topic, entry.partition, offset] = cached
                self.answered["cache"] += 1
        return todo

    def _from_written(
        self,
        entry: _Wanted,
        todo: list[int],
        high: int,
        results: dict[Position, Translation],
        beyond: list[_Beyond],
    ) -> list[int]:
        """Answer what this process's writers know (`WrittenRuns`); positions past the
        copy go to `beyond`, for the source to settle. The offsets still to find."""
        answers = self.written.answers((entry.topic, entry.partition), todo, high)
        rest = []
        for offset, answer in zip(todo, answers, strict=True):
            if answer is None:
                rest.append(offset)
            elif answer.exact:
                until = answer.replicated_until
                self._answer(entry, offset, answer.target_offset, until, results, how="written")
            else:
                until = answer.replicated_until
                beyond.append(_Beyond(entry, offset, answer.target_offset, until, until))
        return rest

    def _start(
        self, entry: _Wanted, offset: int, bounds: tuple[int, int]
    ) -> tuple[int, int] | int | None:
        """Where to read from for `offset`: a known pair still on the target, the
        partition's start when it is near, or None (bisect)."""
        low, high = bounds
        anchor = self.syncs.anchor(entry.topic, entry.partition, offset)
        if anchor is not None and low <= anchor[1] < high:
            return anchor
        if high == low:
            return None
        following = self.syncs.after(entry.topic, entry.partition, offset)
        bound = high if following is None else min(high, following[1])
        return low if bound - low <= NEAR_START_OFFSETS else None

    def _answers(
        self,
        wanted: dict[Where, _Wanted],
        scans: dict[Where, _TargetScan],
        results: dict[Position, Translation],
        fallback: list[tuple[_Wanted, int]],
    ) -> list[_Beyond]:
        """The scans' answers into `results` (and the cache); the positions past the
        last replica, for the source to settle."""
        beyond = []
        for where, scan in scans.items():
            entry = wanted[where]
            if scan.broken is not None:
                self.syncs.forget(entry.topic, entry.partition)
                log.debug("%s[%d]: %s; bisecting", entry.remote, entry.partition, scan.broken)
            for offset in scan.wanted:
                found = scan.found.get(offset)
                if found is not None:
                    until = (scan.last or found).source_offset + 1
                    self._answer(entry, offset, found.target_offset, until, results)
                    self.syncs.learn(entry.topic, entry.partition, *_pair(found))
                elif scan.broken is not None or scan.last is None:
                    fallback.append((entry, offset))
                elif offset <= scan.last.source_offset + 1:
                    last = scan.last  # everything before it replicated: the next lands there
                    self._answer(
                        entry, offset, last.target_offset + 1, last.source_offset + 1, results
                    )
                else:
                    last = scan.last
                    until = last.source_offset + 1
                    beyond.append(_Beyond(entry, offset, last.target_offset + 1, until, until))
            if scan.last is not None and scan.broken is None:
                self.syncs.learn(entry.topic, entry.partition, *_pair(scan.last))
        return beyond

    def _answer(
        self,
        entry: _Wanted,
        offset: int,
        target_offset: int,
        replicated_until: int | None,
        results: dict[Position, Translation],
        *,
        how: str = "read",
    ) -> None:
        translation = _translation(entry, offset, target_offset, replicated_until, exact=True)
        results[entry.topic, entry.partition, offset] = translation
        self.answered[how] += 1
        known = self._cache.setdefault((entry.remote, entry.partition), {})
        known[offset] = translation
        if len(known) > _CACHED_PER_PARTITION:
            del known[next(iter(known))]  # the oldest answer

    def _check_source(self, beyond: list[_Beyond], results: dict[Position, Translation]) -> None:
        """Positions past the last replica: exact when the source holds no committed
        record from there to them (markers only), else held. One record read per
        partition, all partitions at once."""
        if not beyond:
            return
        starts: dict[tuple[str, int], int] = {}
        for b in beyond:
            starts.setdefault((b.entry.topic, b.entry.partition), b.source_from)
        # A record found stays where it is: kept for the round's later chunks of groups,
        # which ask the same while the copy is under way. "None up to the end" is not
        # kept: a position committed later may lie past that end.
        firsts: dict[tuple[str, int], int | None] = {}
        unread = {}
        for where, start in starts.items():
            known = self._source_firsts.get(where)
            if known is not None and known[0] == start:
                firsts[where] = known[1]
            else:
                unread[where] = start
        for where, first in first_records(self.flow.source, unread).items():
            firsts[where] = first
            if first is not None:
                self._source_firsts[where] = (unread[where], first)
        for b in beyond:
            first = firsts[b.entry.topic, b.entry.partition]
            if first is None or first >= b.offset:  # only markers between: nothing missing
                self._answer(b.entry, b.offset, b.next_target, b.replicated_until, results)
            else:  # the source record at `first` is not on the target yet
                self._held(b.entry, b.offset, b.next_target, b.replicated_until, results)
                self.answered["read"] += 1

    def _held(
        self,
        entry: _Wanted,
        offset: int,
        target_offset: int,
        replicated_until: int | None,
        results: dict[Position, Translation],
    ) -> None:
        results[entry.topic, entry.partition, offset] = _translation(
            entry, offset, target_offset, replicated_until, exact=False
        )

    def _bisect(
        self, fallback: list[tuple[_Wanted, int]], results: dict[Position, Translation]
    ) -> None:
        """What the reads could not answer, one position at a time (`translate`)."""
        if not fallback:
            return
        ends = partition_bounds(
            self.flow.source,
            sorted({(e.topic, e.partition) for e, _ in fallback}),
            self._source_admin,
        )
        for entry, offset in fallback:
            end = ends.get((entry.topic, entry.partition), (0, offset))[1]
            translation = translate(
                self._index,
                entry.topic,
                entry.partition,
                entry.remote,
                offset,
                source=(self._source_reader, end),
            )
            results[entry.topic, entry.partition, offset] = translation
            self.answered["bisect"] += 1


def _translation(
    entry: _Wanted, offset: int, target_offset: int, replicated_until: int | None, *, exact: bool
) -> Translation:
    """A translation of the batch (no record counts): `exact` when nothing before the
    position is missing on the target, else held."""
    return Translation(
        topic=entry.topic,
        partition=entry.partition,
        source_offset=offset,
        remote_topic=entry.remote,
        target_offset=target_offset,
        replicated_until=replicated_until,
        missing=None,
        unreplicated_before=0 if exact else None,
    )


def _pair(replica: Replica) -> tuple[int, int]:
    return replica.source_offset, replica.target_offset
