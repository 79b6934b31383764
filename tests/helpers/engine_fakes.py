"""Stand-ins for the clients and collaborators of the engine's parts, for their unit
tests (tests/unit/engine/test_partitions.py, test_target_writer.py, test_rebalance.py,
test_deliveries.py, test_mover_writer.py). Each part is tested alone, without Kafka:
these record what the part asked of them. The parts working together over real clients
are the engine's integration suites (tests/integration/engine)."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError, Message, TopicPartition

from replicator.engine.partition import PartitionTracker
from replicator.engine.resume import ResumePoint
from replicator.engine.size_limits import SizeHold

from helpers.replication import flow_config


def flow(**properties: str) -> Any:
    """A flow primary->dr of topic `orders`, its clusters nowhere (nothing connects)."""
    return flow_config(("primary", "localhost:1"), ("dr", "localhost:2"), "orders", properties)


def tracker(
    partition: int = 0, *, topic: str = "orders", next_offset: int = 0, resuming: bool = False
) -> PartitionTracker:
    return PartitionTracker(
        "primary->dr", topic, partition, f"primary.{topic}", SizeHold(limit=1_000),
        next_offset=next_offset, resuming=resuming,
    )  # fmt: skip


def record(
    offset: int,
    partition: int = 0,
    *,
    topic: str = "orders",
    value: bytes | None = b"v",
    headers: list[tuple[str, bytes | None]] | None = None,
) -> Message:
    return Message(
        topic=topic, partition=partition, offset=offset, key=b"k", value=value,
        headers=headers, timestamp=(1, 1_700_000_000_000 + offset),
    )  # fmt: skip


def tps(partitions: list[TopicPartition]) -> list[tuple[str, int, int]]:
    return [(tp.topic, tp.partition, tp.offset) for tp in partitions]


class FakeConsumer:
    """The source consumer: what was paused, resumed, assigned and unassigned, in order."""

    def __init__(self, high: int = 100) -> None:
        self.calls: list[tuple[str, list[tuple[str, int, int]]]] = []
        self.high = high
        self.committed: list[list[TopicPartition]] = []
        #: Where the consumer stands per partition (past control records); unknown
        #: (OFFSET_INVALID) when not set.
        self.positions: dict[tuple[str, int], int] = {}

    def pause(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("pause", tps(partitions)))

    def resume(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("resume", tps(partitions)))

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("assign", tps(partitions)))

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("unassign", tps(partitions)))

    def commit(self, offsets: list[TopicPartition], asynchronous: bool) -> None:
        self.committed.append(offsets)

    def get_watermark_offsets(
        self, tp: TopicPartition, timeout: float = -1, cached: bool = False
    ) -> tuple[int, int]:
        self.calls.append(("watermarks", [(tp.topic, tp.partition, cached)]))
        return 0, self.high

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [
            TopicPartition(
                tp.topic, tp.partition, self.positions.get((tp.topic, tp.partition), -1001)
            )
            for tp in partitions
        ]

    def paused(self) -> list[tuple[str, int]]:
        return [(t, p) for name, parts in self.calls if name == "pause" for t, p, _ in parts]


class FakeSyncs:
    """The offset-sync writer: what it was told, per call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.acknowledged_runs: list[dict[str, Any]] = []

    def track(self, key: tuple[str, int]) -> None:
        self.calls.append(("track", key))

    def forget(self, key: tuple[str, int]) -> None:
        self.calls.append(("forget", key))

    def restart(self, key: tuple[str, int]) -> None:
        self.calls.append(("restart", key))

    def rolled_back(self, key: tuple[str, int]) -> None:
        self.calls.append(("rolled_back", key))

    def emit_due(self, force: bool) -> None:
        self.calls.append(("emit_due", force))

    def acknowledged(self, key: tuple[str, int], **run: Any) -> None:
        self.acknowledged_runs.append({"key": key, **run})

    def committed(self, key: tuple[str, int]) -> None:
        self.calls.append(("committed", key))


class FakeReporter:
    """The status and metrics reporter: what it published."""

    def __init__(self) -> None:
        self.published: list[tuple[str, Any]] = []
        self.writers: list[Any] = []

    def lag(self, tracker: PartitionTracker) -> int | None:
        return 0

    def partition(self, tracker: PartitionTracker, lag: int | None) -> None:
        self.published.append(("partition", tracker.key))

    def revoked(self, tracker: PartitionTracker) -> None:
        self.published.append(("revoked", tracker.key))

    def publish_metrics(self, trackers: Any) -> None:
        self.published.append(("metrics", len(list(trackers))))

    def skipped(self, tracker: PartitionTracker, offset: int, reason: str, count: int = 1) -> None:
        self.published.append(("skipped", (tracker.key, offset, reason)))

    def write_with(self, producer: Any) -> None:
        self.writers.append(producer)


class FakeProducer:
    """The target producer: the records it took, by (topic, partition, source offset);
    `held` records are in flight until `deliver` or `flush` settles them. `room`
    records fit in its queue (BufferError beyond); `flush_leaves` records stay
    unacknowledged by a flush (the target away)."""

    def __init__(self, config: dict[str, object] | None = None, *, room: int = 1_000) -> None:
        self.config = config or {}
        self.room = room
        self.produced: list[tuple[str, int, bytes | None, Any]] = []
        self.held: list[tuple[Any, Message]] = []
        self.flushes: list[float] = []
        self.purges: list[tuple[bool, bool]] = []
        self.flush_leaves = 0
        self.fatal: KafkaError | None = None

    def produce(
        self, topic: str, value: Any, key: Any, partition: int, *,
        on_delivery: Any = None, timestamp: int = 0, headers: Any = None,
    ) -> None:  # fmt: skip
        # As confluent-kafka documents it: the first four by position, the rest by keyword.
        if len(self.held) >= self.room:
            raise BufferError("queue full")
        self.produced.append((topic, partition, value, headers))
        self.held.append((on_delivery, Message(topic=topic, partition=partition)))

    def __len__(self) -> int:
        return len(self.held)

    def deliver(self, error: KafkaError | None = None, first_offset: int = 0) -> None:
        """Settle every record in flight: landed one after another from
        `first_offset`, or failed with `error`; each run's report is called."""
        held, self.held = self.held, []
        for index, (report, message) in enumerate(held):
            if report is not None:
                landed = Message(
                    topic=message.topic(), partition=message.partition(),
                    offset=first_offset + index, timestamp=(1, 1_700_000_000_000),
                )  # fmt: skip
                report(error, landed)

    def poll(self, timeout: float = 0) -> int:
        return 0

    def flush(self, timeout: float = 0) -> int:
        self.flushes.append(timeout)
        if self.flush_leaves:
            return self.flush_leaves
        self.deliver()
        return 0

    def purge(self, in_queue: bool = True, in_flight: bool = False) -> None:
        """Every record it holds counts as sent: only `in_flight` drops them."""
        self.purges.append((in_queue, in_flight))
        if in_flight:
            self.held = []

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> None:
        return None


class FakeTopics:
    """The replicated topics, as the target writer and rebalancing use them."""

    def __init__(self, limits: dict[str, int] | None = None) -> None:
        self.limits = limits or {}
        self.synced: list[dict[str, int]] = []
        self.missing: list[list[tuple[str, int]]] = []

    def counts(self, trackers: list[PartitionTracker]) -> dict[str, int]:
        return {t.topic: 1 for t in trackers}

    def sync(self, topics: dict[str, int]) -> dict[str, int]:
        self.synced.append(topics)
        return self.limits

    def add_missing(self, trackers: list[PartitionTracker]) -> dict[str, int] | None:
        self.missing.append([t.key for t in trackers])
        return None


class FakeResumePoints:
    """Where partitions resume: `offsets` by key (target_end = offset), or `error` raised;
    the keys in `settling` are not answered by `prefetch` (their target leaders settle)."""

    def __init__(self, offsets: dict[tuple[str, int], int] | None = None) -> None:
        self.offsets = offsets or {}
        self.error: Exception | None = None
        self.settling: set[tuple[str, int]] = set()

    def resets(self, partitions: list[TopicPartition]) -> None:
        if self.error is not None:
            raise self.error

    def prefetch(self, partitions: list[tuple[str, int, str]]) -> set[tuple[str, int]]:
        self.prefetched = list(partitions)
        return {(t, p) for t, p, _ in partitions} - self.settling

    def forget_prefetched(self) -> None:
        pass

    def point(
        self, resets: Any, consumer: Any, topic: str, partition: int, remote: str
    ) -> ResumePoint:
        offset = self.offsets.get((topic, partition), 0)
        return ResumePoint(offset, 0, 0, 100, offset, outside_possible=False)


class FakeSourceCommits:
    def __init__(self) -> None:
        self.commits: list[tuple[list[tuple[str, int]], set[tuple[str, int]], bool]] = []
        self.forgotten: list[tuple[str, int]] = []

    def commit_due(
        self, consumer: Any, trackers: Any, in_flight: Any, *, force: bool = False
    ) -> None:
        self.commits.append(([t.key for t in trackers], set(in_flight), force))

    def forget(self, keys: Any) -> None:
        self.forgotten += list(keys)


class FakeMoverError(Exception):
    """`replicator._dataplane.MoverError`'s stand-in."""


class FakeTransactionError(FakeMoverError):
    """`replicator._dataplane.TransactionError`'s stand-in: librdkafka's verdict as
    attributes (`code` by librdkafka's name)."""

    def __init__(
        self,
        code: str,
        *,
        fatal: bool = False,
        retriable: bool = False,
        txn_requires_abort: bool = False,
    ) -> None:
        super().__init__(f"{code}: failed")
        self.code, self.fatal = code, fatal
        self.retriable, self.txn_requires_abort = retriable, txn_requires_abort


class FakeMover:
    """The compiled Mover (`replicator._dataplane.Mover`): what it was assigned,
    released and closed, in order. `handed` is what the next `move_records` hands
    back (`moved` records moved), `raises` what it raises instead; `reports` what the
    next `progress` returns; `flush_leaves` records stay in flight after a flush.
    Transactional (`transactional_id`): `init_transactions`, `begin_transaction`,
    `commit_transaction` and `abort_transaction` are recorded in `calls`, and
    `txn_raises[name]` is what the next call of that name raises."""

    made: list[FakeMover]

    def __init__(self, source: dict[str, str], target: dict[str, str], provenance: Any,
                 **options: Any) -> None:  # fmt: skip
        self.source, self.target, self.provenance, self.options = (
            source, target, provenance, options,
        )  # fmt: skip
        self.calls: list[tuple[str, Any]] = []
        self.handed: list[tuple[Any, ...]] = []
        self.moved = 0
        self.raises: Exception | None = None
        self.reports: dict[tuple[str, int], tuple[Any, ...]] = {}
        #: What `events()` returns next: (client, level, text), as the module's.
        self.pending_events: list[tuple[str, str, str]] = []
        self.flush_leaves = 0
        self.closed = False
        self.txn_raises: dict[str, Exception] = {}
        #: Each `know` call's topics (kept apart from `calls`), and what the next raises.
        self.known: list[list[str]] = []
        self.know_raises: Exception | None = None
        #: `limits`: the largest record of each target topic, as last told.
        self.record_limits: dict[str, int] = {}
        #: What `watermarks()` returns: the high watermarks its fetches learned.
        self.highs: dict[tuple[str, int], int] = {}
        #: Where its consumer stands per partition (past control records).
        self.positions_read: dict[tuple[str, int], int] = {}
        #: Records in flight after a rewind's `purge_queue` (`outstanding`).
        self.in_flight_left = 0
        #: `release` finds the producer's queue full (returns False) while set.
        self.queue_full = False
        #: What `skips()` returns next: (topic, partition, reason, count, first offset).
        self.skipped: list[tuple[str, int, str, int, int]] = []
        FakeMover.made.append(self)

    def _txn(self, name: str) -> None:
        self.calls.append((name, None))
        raised = self.txn_raises.pop(name, None)
        if raised is not None:
            raise raised

    def init_transactions(self, timeout: float) -> None:
        self._txn("init_transactions")

    def begin_transaction(self) -> None:
        self._txn("begin_transaction")

    def commit_transaction(self, timeout: float) -> dict[tuple[str, int], int]:
        self._txn("commit_transaction")
        return {}

    def abort_transaction(self, timeout: float) -> dict[tuple[str, int], int]:
        self._txn("abort_transaction")
        return {}

    def named(self, name: str) -> int:
        """How many times `name` was called."""
        return sum(1 for call, _ in self.calls if call == name)

    def limits(self, limits: dict[str, int]) -> None:
        self.record_limits.update(limits)

    def know(self, topics: list[str], timeout: float) -> dict[str, int]:
        raised, self.know_raises = self.know_raises, None
        if raised is not None:
            raise raised
        self.known.append(topics)
        return dict.fromkeys(topics, 1)

    def assign(self, partitions: list[tuple[str, int, int, str]]) -> None:
        self.calls.append(("assign", partitions))

    def unassign(self, partitions: list[tuple[str, int]]) -> None:
        self.calls.append(("unassign", partitions))

    def move_records(self, max_records: int, timeout: float) -> tuple[int, list[Any]]:
        if self.raises is not None:
            raise self.raises
        handed, self.handed = self.handed, []
        return self.moved, handed

    def release(self, topic: str, partition: int, headers: Any) -> bool:
        self.calls.append(("release", (topic, partition, headers)))
        # False: held still, as the module's when its queue stays full.
        return not (self.queue_full and headers is not None)

    def learn(
        self, topic: str, headers: Any, skip: str | None, extra: Any, in_order: bool = False
    ) -> None:
        self.calls.append(("learn", (topic, headers, skip, extra, in_order)))

    def adopt(self, old: Any) -> None:
        self.calls.append(("adopt", (old,)))

    def skips(self) -> list[tuple[str, int, str, int, int]]:
        skipped, self.skipped = self.skipped, []
        return skipped

    def progress(self) -> dict[tuple[str, int], tuple[Any, ...]]:
        reports, self.reports = self.reports, {}
        return reports

    def watermarks(self) -> dict[tuple[str, int], int]:
        if self.closed:
            raise FakeMoverError("the mover is closed")
        return dict(self.highs)

    def positions(self) -> dict[tuple[str, int], int]:
        if self.closed:
            raise FakeMoverError("the mover is closed")
        return dict(self.positions_read)

    def flush(self, timeout: float) -> int:
        self.calls.append(("flush", timeout))
        return self.flush_leaves

    def events(self) -> list[tuple[str, str, str]]:
        events, self.pending_events = self.pending_events, []
        return events

    def purge_queue(self) -> int:
        self.calls.append(("purge_queue", None))
        return self.in_flight_left

    def outstanding(self) -> int:
        if self.closed:
            raise FakeMoverError("the mover is closed")
        return self.in_flight_left

    def close(self) -> None:
        self.closed = True


class FakeDataplane:
    """The module `replicator._dataplane` as the compiled path uses it."""

    Mover = FakeMover
    MoverError = FakeMoverError
    TransactionError = FakeTransactionError
    LIBRDKAFKA_VERSION = "2.12.1"

    def __init__(self) -> None:
        FakeMover.made = []

    @staticmethod
    def check_client(kind: str, settings: dict[str, str]) -> None:
        """Builds every client (the real one's refusals: test_config_clients.py)."""
