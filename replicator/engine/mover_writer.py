"""The compiled data path of the default (idempotent) mode: one flow's records moved
by `replicator._dataplane`'s Mover (docs/dataplane.md), behind the same parts as the
Python loop. (Exactly-once flows: `mover_transactions.TransactionalMoverWriter`, a
`MoverWriter` with a transactional Mover per partition.)

Python keeps every decision. The group consumer keeps the flow's group membership
and decides the assignment, but never fetches a record: `MoverFetch` stands in for
it before `Partitions` and `Rebalance`, keeps every assigned partition paused in it,
and assigns the Mover by hand at the positions they set (and unassigns it when they
pause or give up a partition). `MoverWriter` is the `ReplicaWriter` of this path:

- `move` is the round's data step: `move_records`, then each handed-back record
  settled (`RecordRewrite.headers` for records carrying our headers: `release` with
  its replica's headers, or skipped as a loop; records too large held for a config
  sync, skipped or stopped at, as `oversized.record.policy` says);
- `serve` feeds `progress()` to the partitions (positions, counters), the offset
  syncs (every `shifts` pair, then the newest pair) and logs `events()`;
- a `MoverError` stops the task as a fatal producer error does in the Python loop,
  but an offset out of range, which goes to the task's handler (the failure policies);
- records that did not reach the target (a partition given up as lost, a flush that
  timed out, the user's message timeout) drop the Mover with its queue (closing it
  purges) and rewind every partition to the target tail, as the Python loop's
  `rewind_all` does; a Mover is made anew for them.

The Mover's producer takes records up to the largest remote topic's limit; each
remote topic's own limit is told to the Mover (`Mover.limits`), which hands a record
above its partition's back as too large, so oversized.record.policy applies to that
partition alone, as on the Python loop.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from types import ModuleType
from typing import Any

from confluent_kafka import OFFSET_INVALID, KafkaError, KafkaException, TopicPartition

from replicator import metrics
from replicator.acls.principal import missing_acl
from replicator.config.model import FlowConfig
from replicator.engine.headers import OFFSET_HEADER, ORIGIN_HEADER, OURS, TOPIC_HEADER, Headers
from replicator.engine.held_records import HeldTopics
from replicator.engine.offset_syncs import OffsetSyncWriter
from replicator.engine.partition import PartitionTracker
from replicator.engine.partitions import Partitions
from replicator.engine.record_limits import RecordLimits
from replicator.engine.replica_producers import DeliveryBounds
from replicator.engine.replica_writer import ConsumedRecord
from replicator.engine.reporting import TaskReporter
from replicator.engine.rewrite import LOOP, RecordRewrite
from replicator.engine.size_limits import Oversized
from replicator.engine.source_consumer import source_consumer_config
from replicator.errors import ReplicatorError
from replicator.kafka.clients import Consumer, Producer, route_event
from replicator.kafka.errors import is_fatal, kafka_error

log = logging.getLogger(__name__)

#: How often the source's high watermarks are read from the Movers (for lag: status
#: and metrics ask per partition every second), at the most.
_HIGHS_EVERY_S = 0.5
#: ... and at most this share of the time goes to reading them: librdkafka finds each
#: partition by a search over the client's topics, so a read of 5,000 partitions over
#: 1,250 topics costs tens of milliseconds, and a read every 0.5 s most of a core.
_HIGHS_DUTY = 0.02

Key = tuple[str, int]

#: Records one `move_records` call moves at most.
MOVE_BATCH = 10_000
#: The group settings that concern only the group consumer (the Mover's consumer is
#: assigned by hand and never joins a group).
_GROUP_ONLY = (
    "group.id",
    "group.instance.id",
    "group.protocol",
    "group.remote.assignor",
    "partition.assignment.strategy",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    # Only for a member of a group; below the default session.timeout.ms (whose key is
    # dropped above) librdkafka refuses to make the Mover's consumer at all.
    "max.poll.interval.ms",
)
#: A consume error as the Mover words it: "consuming T partition p at offset o: NAME: ...".
_CONSUMING = re.compile(
    r"^consuming (?P<topic>.+) partition (?P<partition>\d+) at offset -?\d+: (?P<code>\w+):"
)
#: How the Mover names a record's remote topic, and the batch a fatal error names.
_TO_REMOTE = re.compile(r"\(to (?P<remote>[^)\s]+)\)")
_BATCH_OF = re.compile(r"ProduceRequest for (?P<remote>\S+) \[")
#: librdkafka's names of the authorization errors a consumer gets.
_AUTH_NAMES = frozenset(
    {"TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED"}
)


def _write_denied(text: str) -> str | None:
    """The remote topic the target refused the principal WRITE on, from a Mover's
    delivery failure or the fatal error a refused batch trips (the gapless guarantee:
    "ProduceRequest for T [p] ... failed: Broker: Topic authorization failed"); None
    for any other failure."""
    if "Topic authorization failed" not in text and "TopicAuthorizationFailed" not in text:
        return None
    named = _BATCH_OF.search(text) or _TO_REMOTE.search(text)
    return named["remote"] if named else None


def _setting(value: object) -> str:
    """A client setting as the Mover takes it (librdkafka's strings); a Python
    callback never gets here (`data_path.choose` keeps such flows on the Python loop)."""
    if callable(value):
        raise TypeError("a Python callback cannot be a setting of the compiled data plane")
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def mover_source_config(flow: FlowConfig) -> dict[str, str]:
    """The Mover's source consumer settings: the group consumer's, without the group."""
    config = source_consumer_config(flow)
    return {k: _setting(v) for k, v in config.items() if k not in _GROUP_ONLY}


#: Settings the Mover's producer is given by the engine, not by the operator, that
#: librdkafka calls experimental in a CONFWARN at every start: said at debug level,
#: since the operator can do nothing about them (docs/dataplane.md).
_FORCED_EXPERIMENTAL = ("enable.gapless.guarantee",)


def _forced_setting_warning(text: str) -> bool:
    """A librdkafka CONFWARN about a setting in `_FORCED_EXPERIMENTAL`."""
    return text.startswith("CONFWARN") and any(key in text for key in _FORCED_EXPERIMENTAL)


def mover_settings(config: dict[str, object]) -> dict[str, str]:
    """A producer's settings as the Mover takes them (`replica_producers`' for the
    flow's limits: the Python loop's, with the same guarantees)."""
    return {k: _setting(v) for k, v in config.items()}


class MoverFetch:
    """The source consumer as `Partitions` and `Rebalance` see it on the compiled
    path: the group consumer for membership, commits and watermarks (every other
    attribute is its own), every assigned partition kept paused in it; the Mover
    assigned by hand where they set a partition's position, unassigned where they
    pause or give it up."""

    def __init__(self, consumer: Consumer) -> None:
        self._consumer = consumer
        self._writer: MoverWriter | None = None

    def bind(self, writer: MoverWriter) -> None:
        """The writer whose Mover reads the partitions (it is made over `Partitions`,
        which is made over this)."""
        self._writer = writer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        self._consumer.incremental_assign(partitions)
        self._consumer.pause(partitions)
        # A logical offset (OFFSET_BEGINNING) marks a partition still waiting for its
        # position (Rebalance pauses it next): the Mover reads from known ones only.
        self._bound().assign(
            [(tp.topic, tp.partition, tp.offset) for tp in partitions if tp.offset >= 0]
        )

    def resume(self, partitions: list[TopicPartition]) -> None:
        """Nothing: the group consumer never fetches, and the Mover reads what it was assigned."""

    def pause(self, partitions: list[TopicPartition]) -> None:
        self._consumer.pause(partitions)
        self._bound().unassign([(tp.topic, tp.partition) for tp in partitions])

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        self._bound().unassign([(tp.topic, tp.partition) for tp in partitions])
        self._consumer.incremental_unassign(partitions)

    def _bound(self) -> MoverWriter:
        assert self._writer is not None, "MoverFetch.bind was not called"
        return self._writer

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float = -1, cached: bool = False
    ) -> tuple[int, int]:
        """The cached high watermark is the Mover's, unknown (OFFSET_INVALID) before
        it fetched the partition: the group consumer never fetches, so its own cache
        knows none, and asking it cost a search of librdkafka's topic list per partition
        (per second at 5,000 partitions over 1,250 topics, a tenth of the copy's
        thread). Uncached ones are asked of the cluster as the consumer does
        (`timeout` as the consumer's)."""
        if cached:
            assert self._writer is not None, "MoverFetch.bind was not called"
            high = self._writer.high_watermark((partition.topic, partition.partition))
            # The group consumer's own low is never known.
            return OFFSET_INVALID, OFFSET_INVALID if high is None else high
        return self._consumer.get_watermark_offsets(partition, timeout=timeout, cached=cached)

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """The Mover's consumer's positions (the group consumer never fetches), as
        the consumer's `position` gives them: OFFSET_INVALID where not known."""
        assert self._writer is not None, "MoverFetch.bind was not called"
        return [
            TopicPartition(tp.topic, tp.partition, known)
            if (known := self._writer.position((tp.topic, tp.partition))) is not None
            else TopicPartition(tp.topic, tp.partition, OFFSET_INVALID)
            for tp in partitions
        ]


class MoverWriter:
    """The `ReplicaWriter` of the compiled path (see the module's description)."""

    def __init__(
        self,
        flow: FlowConfig,
        partitions: Partitions,
        syncs: OffsetSyncWriter,
        reporter: TaskReporter,
        *,
        module: ModuleType,
        topics: HeldTopics,
        fail: Callable[..., None],
        out_of_range: Callable[[str, int, str], None],
        stopping: threading.Event,
        bounds: DeliveryBounds | None = None,
        make_producer: Callable[[dict[str, object]], Producer] = Producer,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.flow = flow
        #: The wall clock (tests pass their own: patching the `time` module would stop
        #: the clock of every thread).
        self._clock = clock
        self._module = module
        self._partitions = partitions
        self._syncs = syncs
        self._reporter = reporter
        self._topics = topics
        self._fail = fail
        #: The task's handler of a position outside the source log (topic, partition, why).
        self._out_of_range = out_of_range
        self._stopping = stopping
        self.bounds = bounds or DeliveryBounds.of(flow)
        self._rewrite = RecordRewrite(flow.source.alias, flow.target.alias, flow.policy)
        #: The remote topics' size limits, and the partitions held at an oversized record.
        self._limits = RecordLimits(flow, topics, partitions, reporter)
        self._new_producer = make_producer
        #: The Python producer to the target for the worker's status (the Mover writes
        #: the replicas).
        self._producer: Producer | None = None
        self._mover: Any = None
        #: The partitions the Mover reads.
        self._assigned: set[Key] = set()
        #: Per partition: the newest (source, target) pair given to the offset syncs.
        self._pairs: dict[Key, tuple[int, int]] = {}
        #: Per partition: records the target has not acknowledged yet (last `progress`).
        self._in_flight: dict[Key, int] = {}
        #: Movers dropped by a rewind whose records in flight have not settled yet:
        #: no partition reads the target tail until they have (`settled`).
        self._draining_movers: list[Any] = []
        #: Held records whose release found the producer's queue full, with the headers
        #: to release them with: released again at the next round (`move`).
        self._unreleased: dict[Key, Headers] = {}
        #: Since when records have been in flight with none acknowledged (the deadline).
        self._waiting_since: float | None = None
        #: Per partition: the source's high watermark as the Mover last fetched it, its
        #: consumer's position, and when the Movers were last asked (`high_watermark`,
        #: `position`).
        self._highs: dict[Key, int] = {}
        self._positions: dict[Key, int] = {}
        self._highs_read = float("-inf")
        #: How long the last read of the Movers took (it spaces the next: `_HIGHS_DUTY`).
        self._highs_took = 0.0

    # -- what the loop and rebalancing read -----------------------------------------------

    @property
    def exactly_once(self) -> Any:
        return None  # the default mode (exactly-once: mover_transactions)

    @property
    def spent(self) -> bool:
        return False

    @property
    def draining(self) -> bool:
        """True while a rewound Mover still has records in flight (see `rewind_all`)."""
        return bool(self._draining_movers)

    @property
    def producer(self) -> Producer:
        assert self._producer is not None, "MoverWriter.start was not called"
        return self._producer

    # -- the Mover's life ---------------------------------------------------------------

    def start(self, limits: dict[str, int], producer: Producer | None = None) -> None:
        """Make the Mover for the remote topics' `limits`, and the status producer."""
        if producer is not None:
            raise ValueError(
                "the compiled path makes its own clients; the Python loop takes a producer"
            )
        self._limits.update(limits)
        self._producer = self._new_producer(self._limits.producer_config())
        self._reporter.write_with(self._producer)
        self._mover = self._make_mover()

    def _make_mover(self) -> Any:
        self._limits.made()
        source = self.flow.source.alias.encode()
        return self._module.Mover(
            mover_source_config(self.flow),
            mover_settings(self._limits.gapless_config()),
            [("__dr_src", source)],
            offset_header=OFFSET_HEADER,
            topic_header=TOPIC_HEADER,
            reserved_headers=sorted(OURS),
        )

    def _replace_mover(self, *, flush: bool, drain: bool = False) -> None:
        """A new Mover: the old one flushed first (`flush`) or dropped with its queue.
        The partitions it read are read by the new one from where they stand: after
        a flush every record read is acknowledged, so that is right after the
        newest delivered one; without one every partition rewinds first. `drain`:
        the old one keeps what is in flight until it settles (`settled`)."""
        old = self._mover
        if flush:
            self._serve_progress()
        new = self._make_mover()
        # What the old one learnt of records carrying our header names (verdicts,
        # the order of our copies: `rewrite`) stays learnt.
        new.adopt(old)
        if drain:
            self._draining_movers.append(old)
        else:
            self._close(old)
        keys, self._assigned = self._assigned, set()
        self._in_flight.clear()
        self._unreleased.clear()  # their records are read again by the new Mover
        self._waiting_since = None
        self._mover = new
        again = []
        for key in keys:
            tracker = self._partitions.get(key)
            if tracker is not None and not (
                tracker.resuming or tracker.stopped or tracker.size.held
            ):
                again.append((key[0], key[1], tracker.next_offset))
        self.assign(again)

    def assign(self, partitions: list[tuple[str, int, int]]) -> None:
        """Have the Mover read (topic, partition) from offset (MoverFetch)."""
        wanted = []
        for topic, partition, offset in partitions:
            key = (topic, partition)
            tracker = self._partitions.get(key)
            if tracker is None:
                continue
            if key in self._assigned:  # fetched again from a new position
                self._mover.unassign([key])
            wanted.append((topic, partition, offset, tracker.remote))
            self._assigned.add(key)
            self._unreleased.pop(key, None)
            self._pairs.pop(key, None)
            self._positions.pop(key, None)
        if wanted:
            self._mover.limits({remote: self.record_limit(remote) for *_, remote in wanted})
            self._mover.assign(wanted)

    def unassign(self, keys: list[Key]) -> None:
        """Stop the Mover reading these partitions (MoverFetch)."""
        gone = [key for key in keys if key in self._assigned]
        if gone:
            self._mover.unassign(gone)
            self._assigned.difference_update(gone)
        for key in keys:
            self._positions.pop(key, None)
            self._unreleased.pop(key, None)

    # -- the round ----------------------------------------------------------------------

    def move(self, timeout: float) -> int:
        """The round's data step: move what the source has (waiting up to `timeout`
        for the first record), then settle every record handed back. Returns the
        records moved."""
        for key, headers in list(self._unreleased.items()):
            del self._unreleased[key]
            tracker = self._partitions.get(key)
            if tracker is not None:
                self._release(tracker, headers)
        if self._unreleased:
            return 0  # the target still takes nothing: the task polls its group meanwhile
        try:
            moved, handed = self._mover.move_records(MOVE_BATCH, timeout)
        except self._module.MoverError as exc:
            self._on_mover_error(exc)
            return 0
        for record in handed:
            self._settle(record)
        return int(moved)

    def _settle(self, record: tuple[Any, ...]) -> None:
        """A record the Mover handed back, (topic, partition, offset, key, value,
        timestamp type, timestamp, headers, reason): produce it with its replica's
        headers, skip it (a loop), or apply the size limits (the partition waits
        meanwhile)."""
        topic, partition, offset, key, value, _, _, own, reason = record
        tracker = self._partitions.get((topic, partition))
        if tracker is None or (topic, partition) not in self._assigned:
            return  # given up meanwhile: its next owner reads it
        headers, size = self._rewrite.headers(own, offset, topic, partition)
        if reason == "reserved_header":
            self._learn(tracker, own, headers)
        size += (len(key) if key else 0) + (len(value) if value else 0)
        if headers is None:
            self._mover_of(tracker.key).release(topic, partition, None)
            tracker.counters.skipped += 1
            self._reporter.skipped(tracker, offset, self._rewrite.skip)
        elif reason == "too_large" or size > tracker.size.limit:
            self._hold_or_refuse(tracker, offset, size)
        else:
            self._release(tracker, headers)

    def _learn(self, tracker: PartitionTracker, own: Headers, headers: Headers | None) -> None:
        """Teach the Mover the verdict `RecordRewrite` gave on a record carrying our
        header names: records of the same topic and provenance (an application
        forwarding a replica's headers, a record of an earlier hop) are then copied or
        skipped by the Mover itself, without being handed back one by one. A loop's
        provenance is learnt as one (`in_order`: its copies skipped in order, a re-drive
        out of order copied) even when this record was such a re-drive."""
        in_order = self._rewrite.loop_provenance
        extra: Headers
        if in_order:
            skip, extra = LOOP, []
        elif headers is None:
            skip, extra = self._rewrite.skip, []
        else:
            skip, extra = None, [h for h in headers if h[0] == ORIGIN_HEADER]
        try:
            self._mover_of(tracker.key).learn(tracker.topic, own, skip, extra, in_order)
        except self._module.MoverError as exc:
            self._on_mover_error(exc)

    def _serve_skips(self, mover: Any) -> None:
        """Records the Mover skipped on a verdict it learnt (loops): counted and shown
        as the ones settled here are."""
        try:
            skips = mover.skips()
        except self._module.MoverError:
            return  # closed: its partitions are read again by the next
        for topic, partition, reason, count, first in skips:
            tracker = self._partitions.get((topic, partition))
            if tracker is None:
                continue
            tracker.counters.skipped += count
            self._reporter.skipped(tracker, first, reason, count)

    def _release(self, tracker: PartitionTracker, headers: Headers | None) -> None:
        """Settle the partition's held record; if the target's queue stays full, it
        stays held and is released again next round (never a wait without end here:
        the task must keep polling its group, or it is evicted and its partitions'
        next owner writes what is still queued here a second time)."""
        try:
            released = self._mover_of(tracker.key).release(
                tracker.topic, tracker.partition, headers
            )
        except self._module.MoverError as exc:
            self._on_mover_error(exc)
            return
        if not released:
            self._unreleased[tracker.key] = headers  # type: ignore[assignment]

    def _hold_or_refuse(self, tracker: PartitionTracker, offset: int, size: int) -> None:
        """A record too large for its remote topic: hold the partition for a config
        sync of the topic, skip the record or stop at it (oversized.record.policy)."""
        verdict = self._limits.verdict(tracker, offset, size)
        tracker.next_offset = offset
        if verdict.action is Oversized.HOLD:
            self.unassign([tracker.key])  # read again from the record after the sync
        elif verdict.action is Oversized.SKIP:
            self._release(tracker, None)
            self._limits.skip(tracker, offset, verdict)
        else:
            self._partitions.halt(tracker, verdict.message)

    def serve(self) -> None:
        """What the Mover delivered since the last call, to the partitions and the
        offset syncs; its client events to the log."""
        self._serve_progress()
        self._serve_skips(self._mover)
        self._events(self._mover)
        self.producer.poll(0)

    def _mover_of(self, key: Key) -> Any:
        """The Mover that reads the partition `key` (one for all, in this mode)."""
        return self._mover

    def _serve_progress(self) -> None:
        try:
            progress = self._mover.progress()
        except self._module.MoverError as exc:
            self._on_mover_error(exc)
            return
        self._account(progress)

    def _account(self, progress: dict[Key, tuple[Any, ...]]) -> None:
        """A Mover's `progress()` to the partitions (positions, counters) and the
        offset syncs (each `shifts` pair, then the newest pair). It tells only the
        partitions with news; the others stand where their last report left them."""
        acked_any = False
        for key, report in progress.items():
            through, target, in_flight, records, size, shifts, stamp, newest = report
            tracker = self._partitions.get(key)
            if key not in self._assigned:
                self._in_flight.pop(key, None)
            else:
                self._in_flight[key] = in_flight
            if tracker is None or tracker.resuming or tracker.stopped:
                continue  # rewound or given up: the target tail tells
            if records:
                acked_any = True
                counters = tracker.counters
                counters.replicated += records
                counters.replicated_bytes += size
                # The record's own timestamp (its age), as the Python loop's acks give.
                counters.acked_timestamp_ms = stamp if stamp >= 0 else int(time.time() * 1000)
            if through < 0 or through + 1 <= tracker.acked_next:
                continue
            tracker.acked_next = through + 1
            tracker.next_offset = max(tracker.next_offset, through + 1)
            if records:
                self._acknowledge(tracker, shifts, (newest, target))
        if acked_any or not any(self._in_flight.values()):
            self._waiting_since = None
        elif self._waiting_since is None:
            self._waiting_since = self._clock()

    def _acknowledge(
        self, tracker: PartitionTracker, shifts: list[tuple[int, int]], newest: tuple[int, int]
    ) -> None:
        """Tell the offset syncs the acknowledged (source, target) pairs in order. Each
        shift (where the records stopped following one another on both sides) is a
        run of its own record (the records before it end the previous run somewhere
        the report does not say); the newest pair ends a run from the pair before
        it, every record between following one another (so the syncs publish the
        shifts, and the written runs know each run's records)."""
        key = tracker.key
        last_source, _ = self._pairs.get(key, (-1, -1))
        told = [(source, target, True) for source, target in shifts]
        for source, target, shift in [*told, (*newest, False)]:
            if source <= last_source:
                continue
            first = source if shift or last_source < 0 else last_source + 1
            self._syncs.acknowledged(
                key,
                first_source=first,
                last_source=source,
                count=source - first + 1,
                target_offset=target,
                timestamp_ms=tracker.counters.acked_timestamp_ms,
            )
            last_source = source
            self._pairs[key] = (source, target)

    def _events(self, mover: Any) -> None:
        """The Mover's client events, routed as the Python clients' logs and errors are
        (connection trouble to the cluster's reachability, the rest logged once)."""
        try:
            events = mover.events()
        except self._module.MoverError:
            return  # closed: its events went with it
        flow = self.flow
        for client, level, text in events:
            if _forced_setting_warning(text):
                log.debug("flow %s: data plane: %s", flow.name, text)
                continue
            cluster = flow.source if client == "source" else flow.target
            settings = flow.source.consumer if client == "source" else flow.target.producer
            route_event(settings, cluster.alias, level, text)

    def _on_mover_error(self, exc: Exception) -> None:
        """A consume error, a refused or failed delivery, a fatal client error: the
        task stops (as for a fatal producer error of the Python loop), but for an
        offset out of range, which the failure policies decide."""
        text = str(exc)
        consuming = _CONSUMING.match(text)
        if consuming is not None and consuming["code"] == "_AUTO_OFFSET_RESET":
            self._out_of_range(consuming["topic"], int(consuming["partition"]), text)
            return
        access = consuming is not None and consuming["code"] in _AUTH_NAMES
        remote = None if consuming else _write_denied(text)
        missing = ""
        if remote is not None:
            access = True
            missing = missing_acl(self.flow.target, "WRITE", f"TOPIC {remote}") + ": "
        metrics.ERRORS.labels(self.flow.name, "consume" if consuming else "delivery").inc()
        self._fail(
            f"flow {self.flow.name}: the data plane stopped: {missing}{text}. Replication of "
            "the flow is stopped; fix the cause and restart, it resumes from the target tail",
            access=access,
        )

    # -- ReplicaWriter ------------------------------------------------------------------

    def for_partition(self, tracker: PartitionTracker) -> Producer:
        """The partition's records go through the Mover; its producer is the status one."""
        tracker.producer = self.producer
        return tracker.producer

    def write_run(
        self, tracker: PartitionTracker, messages: Sequence[ConsumedRecord], start: int
    ) -> int:
        raise RuntimeError("the compiled path reads the source itself: the loop calls move()")

    def know(self, remotes: Iterable[str], timeout: float) -> None:
        """Have the Mover's producer learn the remote topics' partitions before their
        first record (a partition the remote topic just grew to included); raises
        ReplicatorError when the target does not answer within `timeout` seconds."""
        self._know(self._mover, remotes, timeout)

    def _know(self, mover: Any, remotes: Iterable[str], timeout: float) -> None:
        """`mover`'s producer refuses a record for a partition it does not know, and
        librdkafka refreshes its metadata only every topic.metadata.refresh.interval.ms:
        asked now, through its own handle (the status producer's metadata is its own)."""
        topics = sorted(set(remotes))
        if not topics:
            return
        try:
            mover.know(topics, timeout)
        except self._module.MoverError as exc:
            raise ReplicatorError(
                f"flow {self.flow.name}: the data plane's producer could not learn the "
                f"partitions of {', '.join(topics)} on {self.flow.target.alias!r}: {exc}"
            ) from exc

    def record_limit(self, remote: str) -> int:
        return self._limits.record_limit(remote)

    def update_size_limits(self, limits: dict[str, int]) -> None:
        """New max.message.bytes of remote topics: the partitions' limits follow, and
        the Mover is made anew when its producer's no longer fit."""
        outgrown = self._limits.update(limits)
        if self._mover is None:
            return
        self._mover.limits({remote: self.record_limit(remote) for remote in limits})
        if not outgrown:
            return
        if self.flush(self.bounds.flush):
            self.rewind_all("records still unacknowledged before the data plane's limits changed")
            return
        self._replace_mover(flush=True)
        log.info(
            "flow %s: the data plane's Mover made anew for the remote topics' limits "
            "(message.max.bytes=%d, batch.size=%d)",
            self.flow.name, *self._limits.made_for,
        )  # fmt: skip

    def resync_held(self) -> None:
        self._limits.resync(self.update_size_limits)

    def resumed_at(self, tracker: PartitionTracker, target_end: int) -> None:
        """Nothing to note: the Mover acknowledges record by record."""

    def settled(self) -> bool:
        """Whether a partition may resume from the target tail now: False while a
        rewound Mover still has records in flight (they may yet land, so no tail is
        final), as the Python loop waits for its producer."""
        for mover in list(self._draining_movers):
            try:
                outstanding = mover.outstanding()
            except self._module.MoverError:
                outstanding = 0  # closed: nothing of it can land any more
            if outstanding == 0:
                self._draining_movers.remove(mover)
                self._close(mover)
        return not self._draining_movers

    def _close(self, mover: Any) -> None:
        try:
            mover.close()
        except self._module.MoverError as exc:
            log.warning("flow %s: closing the data plane's Mover: %s", self.flow.name, exc)
        self._events(mover)

    def in_flight(self) -> set[Key]:
        return {key for key, count in self._in_flight.items() if count}

    def check_deadline(self) -> None:
        """Rewind every partition when records stayed unacknowledged for the user's
        message timeout (the Mover's producer never times a record out)."""
        deadline = self.bounds.deadline
        if deadline is None or self._waiting_since is None:
            return
        age = self._clock() - self._waiting_since
        if age >= deadline:
            self.rewind_all(
                f"records unacknowledged by {self.flow.target.alias!r} after {age:.0f} s "
                "(message.timeout.ms)"
            )

    def rewind_all(self, why: str) -> None:
        """Records did not reach the target: the Mover is dropped with its queue (none
        of it may land after the gap) and every partition resumes from the target tail."""
        metrics.ERRORS.labels(self.flow.name, "target_unavailable").inc()
        log.warning(
            "flow %s: %s; every partition resumes from the target tail once %r answers",
            self.flow.name, why, self.flow.target.alias,
        )  # fmt: skip
        self._partitions.rewind_all()  # pauses them: MoverFetch unassigns them
        self._mover.purge_queue()  # what never left is dropped; what is in flight settles
        self._replace_mover(flush=False, drain=True)

    def release(self, lost: bool) -> None:
        """Before partitions are given up the Mover holds no record of theirs: flushed
        (revoked), or dropped with its queue (lost, or a flush that timed out), every
        partition then rewinding."""
        if self._mover is None:
            return
        if lost:
            self.rewind_all("the assignment was lost; what the data plane held is dropped")
            return
        bound = self.bounds.flush
        remaining = self.flush(bound)
        if remaining:
            self.rewind_all(
                f"{remaining} records still unacknowledged by {self.flow.target.alias!r} "
                f"after {bound:.0f} s; dropped, so none lands after the partitions' next "
                "owner started"
            )

    def forget(self, key: Key) -> None:
        self._pairs.pop(key, None)
        self._in_flight.pop(key, None)
        self._highs.pop(key, None)
        self.unassign([key])

    # -- the source's high watermarks (each partition's lag) -----------------------------

    def _movers(self) -> list[Any]:
        """The Movers reading the partitions (one for all, in this mode)."""
        return [] if self._mover is None else [self._mover]

    def high_watermark(self, key: Key) -> int | None:
        """The source partition `key`'s high watermark as the Mover's consumer last
        learned it from its fetch responses (no request), the Movers asked at most every
        `_HIGHS_EVERY_S`; None before the partition was fetched. A partition the Mover
        no longer reads (stopped, held) keeps its last one, as a paused partition of
        the Python loop's consumer does."""
        self._read_movers()
        return self._highs.get(key)

    def position(self, key: Key) -> int | None:
        """Where the Mover's consumer stands in `key` past every record it handed out
        (control records and aborted records included), as last asked (at most
        `_HIGHS_EVERY_S` ago, and not before the partition was last assigned); None
        when it is not known."""
        self._read_movers()
        return self._positions.get(key)

    def _read_movers(self) -> None:
        now = self._clock()
        if now - self._highs_read < max(_HIGHS_EVERY_S, self._highs_took / _HIGHS_DUTY):
            return
        self._highs_read = now
        for mover in self._movers():
            try:
                self._highs.update(mover.watermarks())
                positions = mover.positions()
            except self._module.MoverError:
                continue  # closed (at shutdown): what it last told stands
            self._positions.update(
                (key, offset) for key, offset in positions.items() if key in self._assigned
            )
        self._highs_took = self._clock() - now

    def flush(self, timeout: float) -> int:
        """Wait for the Mover's records in flight (and the status producer's); the
        count still unacknowledged."""
        remaining = 0
        if self._mover is not None:
            try:
                remaining = self._mover.flush(timeout)
            except self._module.MoverError as exc:
                self._on_mover_error(exc)
            self._serve_progress()
        if self._producer is not None:
            try:
                self._producer.flush(timeout)
            except KafkaException as exc:
                if not is_fatal(kafka_error(exc)):
                    raise
                self.on_fatal(kafka_error(exc))
        return remaining

    def on_fatal(self, error: KafkaError) -> None:
        """The status producer failed fatally: replaced, and the task stops."""
        self.replace_spent()
        metrics.ERRORS.labels(self.flow.name, "delivery").inc()
        self._fail(
            f"flow {self.flow.name}: the producer to {self.flow.target.alias!r} failed "
            f"fatally: {error.str()}. Replication of the flow is stopped; fix the cause and restart"
        )

    def replace_spent(self) -> None:
        self._producer = self._new_producer(self._limits.producer_config())
        self._reporter.write_with(self._producer)

    def close_transactions(self) -> None:
        """Nothing: the compiled path is the default mode's."""

    def close(self) -> None:
        """Close the Mover (at shutdown, after `flush`)."""
        if self._mover is not None:
            self._events(self._mover)
            self._mover.close()
