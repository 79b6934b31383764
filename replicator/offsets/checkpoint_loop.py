"""Checkpoints on a schedule while `replicator run` runs, as MM2's checkpoint
connector emits them (`emit.checkpoints.interval.seconds`), with group offset
sync in the same round when `sync.group.offsets.enabled`.

An unplanned failover starts consumers from the last checkpoints, so they must
keep coming while the flow runs. One loop per runner process, in a thread of
its own: translating groups reads both clusters and must never stall
replication. A flow the state store has stopped is not checkpointed (its
final checkpoint is the procedure's). A round that fails (a cluster briefly
unreachable) is logged and counted, and the next round tries again: the
previous checkpoints stay valid meanwhile.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from contextlib import suppress

from confluent_kafka import KafkaError, KafkaException

from replicator import metrics
from replicator.acls.principal import principal_of
from replicator.config.model import FlowConfig
from replicator.engine.written_runs import written_runs
from replicator.errors import ReplicatorError
from replicator.flow_timer import FlowTimer
from replicator.kafka.errors import error_code, error_text
from replicator.offsets.checkpoint_share import CheckpointShare
from replicator.offsets.checkpoint_status import CheckpointRoundPublisher
from replicator.offsets.checkpoints import Checkpointer, CheckpointReport

log = logging.getLogger(__name__)

#: A round that left positions (their records were still being copied, or the copy had
#: not reached their partitions) is followed by a round that catches up on them this
#: soon, not a whole interval later: a copy under way reaches them any moment. The rest
#: is longer, up to the interval, when that round is expected to take more than four
#: times as long (the time of the round before, in proportion to the partitions left):
#: the loop rests a fifth of the time at least, and leaves the copy its share.
HELD_RECHECK_S = 1.0

#: While a round's leftovers wait, the loop looks this often whether this process's
#: copy has reached them (`CheckpointLoop.due_early`), rather than once a second.
EARLY_LOOK_S = 0.2

#: A catch-up is due before its rest once the copy has written this share of what the
#: round before left (all of it, when less is left), and reads those partitions alone;
#: the rest wait for the next. At 5,000 partitions, a catch-up that waited for all of
#: them came as the copy ended, with two thirds of the groups' positions still to
#: translate, write and sync after it.
EARLY_SHARE = 0.25

#: A round that left more than this share of its partitions is followed by a full
#: round, not a catch-up: it would cost as much (at 5,000 partitions, before the copy
#: reached any, a catch-up on 5,000 of the 5,001 was followed by a full round anyway,
#: once an interval had passed). Left with half of them, a catch-up takes half the time.
CATCH_UP_SHARE_AT_MOST = 0.9

#: The first round waits this long at most for the checkpoint group to give this
#: process its share of the partitions (joining takes a few seconds).
_FIRST_SHARE_S = 30.0

_REFUSED = frozenset(
    {
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    }
)


class CheckpointLoop(FlowTimer[FlowConfig]):
    """Emits the checkpoints of `flows` until `stop` is set, each flow every
    interval while `running()` says it runs."""

    thread_name = "checkpoints"

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        #: One checkpointer per flow, kept from round to round (what it learnt makes
        #: the next round cheap); dropped after a failed round, made anew for the next.
        self._checkpointers: dict[str, Checkpointer] = {}
        #: This process's share of each flow's partitions (`CheckpointShare`).
        self._shares: dict[str, CheckpointShare] = {}
        #: Flows whose target has answered about their groups (`Checkpointer.warm_up`).
        self._warm: set[str] = set()
        #: Per flow, what its last round left (`CheckpointReport.left`), how long that
        #: round took, and on how many partitions: the next round catches up on them.
        self._left: dict[str, tuple[set[tuple[str, int]], float, int]] = {}
        #: Per flow, what the copy must have written for a catch-up to be due at once
        #: (`due_early`): per partition left, the source offset before which every
        #: record must be written (its held positions' highest; 0 where the copy had
        #: not started: any record). A partition that a round began with already
        #: written, and left again, waits for something else: its rest applies.
        self._needs: dict[str, dict[tuple[str, int], int]] = {}
        #: Per flow, when its last full round (every partition of its share) ended and
        #: how long it took: catch-up rounds follow it for an interval, or that round's
        #: own time if longer, then a full round again.
        self._full: dict[str, tuple[float, float]] = {}
        #: Each round's outcome, to the status topic (`checkpoint_status`).
        self._rounds = CheckpointRoundPublisher()

    def tick(self) -> None:
        for name, share in self._shares.items():  # stay in the groups between rounds
            self.guarded(f"the checkpoint group of flow {name}", share.keep)
        running = self._running()
        # Before the first round, each apart (each takes seconds on a fresh estate):
        # join the flow's checkpoint group (its first rebalance waits the broker's
        # `group.initial.rebalance.delay.ms`), open the checkpoint writer and ask the
        # target about the groups.
        for flow in self._flows:
            if self._stop.is_set():  # each step may wait for a cluster that is away
                return
            if not running.get(flow.name, True):
                continue
            if flow.name not in self._shares:
                self.guarded(
                    f"the checkpoint group of flow {flow.name}",
                    functools.partial(self._join, flow),
                )
            if flow.name not in self._warm and not self._stop.is_set():
                self.guarded(
                    f"the checkpoint writer and the target's group coordinators of flow "
                    f"{flow.name}",
                    functools.partial(self._warm_up, flow),
                )
        super().tick()

    def _join(self, flow: FlowConfig) -> None:
        self._joined(flow, self._checkpointer(flow))

    def _warm_up(self, flow: FlowConfig) -> None:
        if self._checkpointer(flow).warm_up():
            self._warm.add(flow.name)

    def _checkpointer(self, flow: FlowConfig) -> Checkpointer:
        checkpointer = self._checkpointers.get(flow.name)
        if checkpointer is None:
            checkpointer = self._checkpointers[flow.name] = Checkpointer(flow)
        return checkpointer

    def next_round_in(self, flow: FlowConfig) -> float:
        left = self._left.get(flow.name)
        if left is None:
            return self.interval(flow)
        partitions, took, of = left
        expected = took * len(partitions) / max(1, of)
        return min(self.interval(flow), max(HELD_RECHECK_S, expected / 4))

    def due_early(self, flow: FlowConfig) -> bool:
        """The catch-up is due as soon as this process's writers have copied
        `EARLY_SHARE` of what the round before left (`WrittenRuns.copied`), not after a
        rest: at 1,000 partitions and 20 groups, the copy's last records came as a
        round ended, and its catch-up came a second later. Writers in other processes
        (`tasks.max` > 1) are not known here: their partitions' rounds keep their rest."""
        needs = self._needs.get(flow.name)
        return needs is not None and _enough(written_runs(flow).copied(needs), needs)

    def pause_s(self) -> float:
        return EARLY_LOOK_S if self._needs else self.tick_s

    def _catching_up(self, flow: FlowConfig, now: float) -> bool:
        """Whether catch-up rounds may still follow the last full round: for an interval
        after its end, or for as long as it took if longer (every group's positions on
        every partition are read at least once an interval and a round; a full round of
        20 s with an interval of 5 s would otherwise be followed by full rounds only)."""
        ended, took = self._full.get(flow.name, (-math.inf, 0.0))
        return now - ended < max(self.interval(flow), took)

    def paused(self, flow: FlowConfig) -> None:
        """A stopped flow (paused, or the standby direction after a failover) writes no
        checkpoints on purpose: its checkpoint age is not published, so the stalled-
        checkpoints alert stays quiet; the next round after it starts sets it again."""
        with suppress(KeyError):
            metrics.CHECKPOINT_TIMESTAMP.remove(flow.name)

    def enabled(self, flow: FlowConfig) -> bool:
        return flow.emit_checkpoints_enabled

    def interval(self, flow: FlowConfig) -> float:
        return _interval(flow)

    def round(self, flow: FlowConfig) -> None:
        """A full round, or one that catches up on the partitions the round before left
        (`_catching_up`), unless they are nearly all of them (the copy has reached few
        yet: `CATCH_UP_SHARE_AT_MOST`)."""
        started = time.monotonic()
        left = self._left.pop(flow.name, None)
        needs = self._needs.pop(flow.name, {})
        # Leftovers copied before the round began: read now. Left again, they wait for
        # something else than this process's copy, and the next round for its rest.
        copied = written_runs(flow).copied(needs)
        #: Leftovers this round does not read (a catch-up on what the copy has written
        #: so far): the next catch-up's, with what they wait for.
        later: set[tuple[str, int]] = set()
        try:
            checkpointer = self._checkpointer(flow)
            share = self._share_of(flow, checkpointer)
            only = None if left is None else left[0] & share
            if _enough(copied, needs) and only is not None:
                later, only = only - copied, only & copied
            if (
                only is not None
                and len(only) <= CATCH_UP_SHARE_AT_MOST * len(share)
                and self._catching_up(flow, started)
            ):
                report = checkpointer.emit(partitions=only, catch_up=True)
            else:
                later = set()
                report = checkpointer.emit(partitions=share)
                self._full[flow.name] = (time.monotonic(), time.monotonic() - started)
        except (ReplicatorError, KafkaException) as exc:
            self._drop(flow)
            metrics.CHECKPOINT_DURATION.labels(flow.name).observe(time.monotonic() - started)
            metrics.ERRORS.labels(flow.name, "checkpoint").inc()
            log.error(
                "flow %s: checkpoints not written this round (the previous ones stay): %s; "
                "next try in %gs",
                flow.name,
                _why(flow, exc),
                _interval(flow),
            )
            return
        took = time.monotonic() - started
        # Positions held, or partitions the copy has not reached: the copy is under way
        # (their source holds records), so the next round comes soon, for them. A round
        # that found none reached reads nothing but their bounds; at 5,000 partitions
        # the last such round ended as the copy did, and the next, an interval later,
        # was the one that synced every group (5 s of the 14 s from the copy's end).
        if report.left or later:
            self._left[flow.name] = (report.left | later, took, report.partitions)
            waiting = {key: n for key, n in _needs(report).items() if key not in copied}
            waiting.update((key, needs[key]) for key in later if key in needs)
            if waiting:
                self._needs[flow.name] = waiting
        metrics.CHECKPOINT_DURATION.labels(flow.name).observe(took)
        metrics.CHECKPOINT_TIMESTAMP.labels(flow.name).set(time.time())
        self._publish_round(flow, report, took)
        answered = report.translations
        log.info(
            "flow %s: checkpoints of %d groups on %d partitions%s in %.1f s: %d written, "
            "%d unchanged, %d held "
            "(records before them not replicated yet), %d partitions not copied to yet "
            "(nothing read), %d left for the next round (the "
            "group moved on); positions answered from earlier rounds %d, from what this "
            "process wrote %d, by a read %d, by bisection %d; groups synced: %s; active "
            "groups left alone: %s; seconds spent: %s",
            flow.name,
            report.groups_done,
            report.partitions,
            " (those the round before left)" if report.catch_up else "",
            took,
            len(report.emitted),
            report.unchanged,
            len(report.held),
            report.not_started,
            report.moved_on,
            answered["cache"],
            answered["written"],
            answered["read"],
            answered["bisect"],
            _first(report.synced_groups) or "none",
            ", ".join(report.active_groups[:_SHOWN]) or "none",
            ", ".join(f"{phase} {s:.1f}" for phase, s in report.seconds.items()) or "none",
        )
        if report.group_sync_errors:
            metrics.ERRORS.labels(flow.name, "group_sync").inc()
            log.warning(
                "flow %s: group offsets not synced to %r this round (%d chunks; the "
                "checkpoints were written): %s; the next round syncs them",
                flow.name,
                flow.target.alias,
                len(report.group_sync_errors),
                report.group_sync_errors[0],
            )
        if took > self.interval(flow):
            metrics.CHECKPOINT_OVERRUNS.labels(flow.name).inc()
            log.warning(
                "flow %s: the checkpoint round took %.1f s, longer than its interval of "
                "%g s; checkpoints lag by a round or more (the next round takes the groups "
                "checkpointed longest ago first)",
                flow.name,
                took,
                self.interval(flow),
            )

    def _publish_round(self, flow: FlowConfig, report: CheckpointReport, took: float) -> None:
        """Say in the status topic that the round ended (a round at rest writes no
        checkpoint, and the newest one ages while all stay current). Not written, the
        checkpoints still stand: counted and logged, and the next round says it."""
        try:
            self._rounds.publish(flow, report, took)
        except (ReplicatorError, KafkaException) as exc:
            metrics.ERRORS.labels(flow.name, "checkpoint_status").inc()
            log.warning(
                "flow %s: the checkpoint round's status was not published (the "
                "checkpoints stand; status pages may show them older than they are): %s",
                flow.name,
                error_text(exc),
            )

    def _joined(self, flow: FlowConfig, checkpointer: Checkpointer) -> CheckpointShare:
        """This process's member of the flow's checkpoint group, subscribed to the
        flow's replicated topics as listed now (joined at the first call)."""
        share = self._shares.get(flow.name)
        if share is None:
            share = self._shares[flow.name] = CheckpointShare(flow)
        share.keep(checkpointer.list_topics())
        return share

    def _share_of(self, flow: FlowConfig, checkpointer: Checkpointer) -> set[tuple[str, int]]:
        """The partitions of `flow` this process checkpoints (its share in the flow's
        checkpoint group; the first round waits for it)."""
        share = self._joined(flow, checkpointer)
        share.wait_assigned(_FIRST_SHARE_S, self._stop)
        return share.owned()

    def join(self, timeout: float) -> None:
        super().join(timeout)
        if self.alive():
            return  # still in a round: its clients go with the process
        for name in list(self._checkpointers):
            self._checkpointers.pop(name).close()
        for name in list(self._shares):
            self._shares.pop(name).close()

    def _drop(self, flow: FlowConfig) -> None:
        self._warm.discard(flow.name)
        checkpointer = self._checkpointers.pop(flow.name, None)
        if checkpointer is not None:
            try:
                checkpointer.close()
            except (ReplicatorError, KafkaException) as exc:  # the round's error says more
                log.debug("flow %s: closing the checkpointer: %s", flow.name, exc)


def _why(flow: FlowConfig, exc: Exception) -> str:
    """What went wrong. Our errors name the ACL and principal where they know the
    call; a refusal from anywhere else names the principals and where to look."""
    if isinstance(exc, ReplicatorError) or error_code(exc) not in _REFUSED:
        return error_text(exc)
    return (
        f"{error_text(exc)}: {principal_of(flow.source)} on {flow.source.alias!r} and "
        f"{principal_of(flow.target)} on {flow.target.alias!r} lack an ACL checkpoints need; "
        "`replicator acls plan --config <this configuration>` lists them, "
        "`replicator acls apply` grants them"
    )


def _needs(report: CheckpointReport) -> dict[tuple[str, int], int]:
    """Per partition the round left, the source offset before which the copy must
    have written every record for its positions to translate (`_needs`)."""
    needs = dict.fromkeys(report.left, 0)
    for position in report.held:
        t = position.translation
        key = (t.topic, t.partition)
        needs[key] = max(needs.get(key, 0), t.source_offset)
    return needs


def _enough(copied: set[tuple[str, int]], needs: dict[tuple[str, int], int]) -> bool:
    """Whether the copy has written enough of what a round left for a catch-up now."""
    return bool(copied) and len(copied) >= EARLY_SHARE * len(needs)


def _interval(flow: FlowConfig) -> float:
    if flow.sync_group_offsets_enabled:
        return min(flow.emit_checkpoints_interval_seconds, flow.sync_group_offsets_interval_seconds)
    return flow.emit_checkpoints_interval_seconds


#: Groups a round's line names at most (an estate has hundreds).
_SHOWN = 10


def _first(synced: dict[str, int]) -> str:
    """The first `_SHOWN` groups synced, with how many partitions each, and how many more."""
    shown = dict(list(synced.items())[:_SHOWN])
    more = len(synced) - len(shown)
    return f"{shown}{f' and {more} more groups' if more > 0 else ''}" if shown else ""
