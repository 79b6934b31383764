"""The batch translation's parts alone: the pairs a flow knows per partition
(`replicator.offsets.sync_store`), the forward read of one target partition that
finds many positions at once (`_TargetScan`), and the routing of a batch of records
to the scans of many partitions (`replicator.kafka.partition_scans._route`). Records
are stand-ins carrying the headers a replica carries; the consumer is a stand-in
recording what it was asked; nothing connects."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, TopicPartition

from replicator.engine.headers import OFFSET_HEADER, SOURCE_HEADER, encode_offset
from replicator.engine.tail import Replica
from replicator.engine.written_runs import WrittenRuns
from replicator.errors import ReplicatorError
from replicator.kafka.partition_scans import Scan, _route
from replicator.offsets import batch_translation
from replicator.offsets.batch_translation import JUMP_OFFSETS, _TargetScan
from replicator.offsets.sync_store import MAX_PAIRS, OffsetSyncStore, PartitionPairs

from helpers.engine_fakes import flow

_ALIAS = b"primary"
_TOPIC = "primary.orders"


class _Record:
    """A record read from a target partition: a replica when `source` is given."""

    def __init__(
        self,
        offset: int,
        source: int | None = None,
        *,
        alias: bytes = _ALIAS,
        topic: str = _TOPIC,
        partition: int = 0,
        error: KafkaError | None = None,
    ) -> None:
        self._offset = offset
        self._headers = (
            None
            if source is None
            else [(SOURCE_HEADER, alias), (OFFSET_HEADER, encode_offset(source))]
        )
        self._topic = topic
        self._partition = partition
        self._error = error

    def offset(self) -> int:
        return self._offset

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return self._headers

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def error(self) -> KafkaError | None:
        return self._error


def _eof(partition: int = 0, offset: int = 0) -> _Record:
    return _Record(offset, partition=partition, error=KafkaError(KafkaError._PARTITION_EOF))


def _no_anchor(_offset: int) -> tuple[int, int] | None:
    return None


def _read(scan: _TargetScan, *records: _Record) -> list[int | None]:
    return [scan.record(record) for record in records]  # type: ignore[arg-type]


# -- the pairs ---------------------------------------------------------------------------


def test_pairs_answer_the_nearest_at_or_before_and_the_first_after() -> None:
    pairs = PartitionPairs()
    for source, target in ((10, 100), (30, 300), (20, 200)):
        pairs.add(source, target)
    assert pairs.sources == [10, 20, 30] and pairs.targets == [100, 200, 300]
    assert pairs.at_or_before(9) is None
    assert pairs.at_or_before(20) == (20, 200)
    assert pairs.at_or_before(29) == (20, 200)
    assert pairs.after(20) == (30, 300)
    assert pairs.after(30) is None


def test_a_pair_known_already_changes_nothing() -> None:
    pairs = PartitionPairs()
    pairs.add(10, 100)
    pairs.add(20, 200)
    pairs.add(10, 100)
    assert pairs.sources == [10, 20] and pairs.targets == [100, 200]


def test_a_pair_contradicting_the_known_order_replaces_them_all() -> None:
    pairs = PartitionPairs()
    pairs.add(10, 100)
    pairs.add(20, 200)
    pairs.add(15, 250)  # between 10 and 20 on the source, after 200 on the target
    assert (pairs.sources, pairs.targets) == ([15], [250])


def test_a_known_source_offset_at_another_target_offset_replaces_them_all() -> None:
    pairs = PartitionPairs()
    pairs.add(10, 100)
    pairs.add(20, 200)
    pairs.add(20, 7)  # the partition was recreated on the target
    assert (pairs.sources, pairs.targets) == ([20], [7])


def test_two_source_offsets_at_one_target_offset_contradict() -> None:
    pairs = PartitionPairs()
    pairs.add(10, 100)
    pairs.add(11, 100)
    assert (pairs.sources, pairs.targets) == ([11], [100])


def test_past_max_pairs_the_older_half_is_thinned_and_the_newer_kept() -> None:
    pairs = PartitionPairs()
    for source in range(MAX_PAIRS + 1):
        pairs.add(source, 10 * source)
    assert len(pairs.sources) < MAX_PAIRS
    assert pairs.sources == sorted(pairs.sources) and pairs.targets == sorted(pairs.targets)
    assert pairs.sources[-(MAX_PAIRS // 2) :] == list(range(MAX_PAIRS // 2 + 1, MAX_PAIRS + 1))
    assert pairs.at_or_before(1) == (0, 0)  # 1 thinned out: the nearest older one answers
    assert pairs.at_or_before(MAX_PAIRS) == (MAX_PAIRS, 10 * MAX_PAIRS)


def test_the_store_keeps_pairs_per_partition_and_forgets_one() -> None:
    store = OffsetSyncStore(flow())
    store.learn("orders", 0, 10, 100)
    store.learn("orders", 0, 20, 200)
    store.learn("orders", 1, 10, 5)
    assert store.anchor("orders", 0, 15) == (10, 100)
    assert store.after("orders", 0, 15) == (20, 200)
    assert store.anchor("orders", 1, 15) == (10, 5)
    assert store.anchor("orders", 2, 15) is None and store.after("orders", 2, 15) is None
    store.forget("orders", 0)
    store.forget("orders", 2)  # nothing known: nothing to forget
    assert store.anchor("orders", 0, 15) is None and store.after("orders", 0, 5) is None
    assert store.anchor("orders", 1, 15) == (10, 5)


# -- one target partition read forward ---------------------------------------------------


def test_reading_from_an_anchor_finds_the_first_replica_at_or_past_each_position() -> None:
    scan = _TargetScan(_ALIAS, [1, 2, 5], (0, 100), _no_anchor)
    assert scan.start() == 100
    _read(scan, *(_Record(100 + s, s) for s in range(4)))
    assert scan.found == {1: Replica(101, 1), 2: Replica(102, 2)}
    assert not scan.done and scan.broken is None
    _read(scan, _Record(104, 4), _Record(105, 5))
    assert scan.found[5] == Replica(105, 5)
    assert scan.done and scan.broken is None


def test_a_position_in_a_source_gap_maps_to_the_next_replica() -> None:
    scan = _TargetScan(_ALIAS, [3], (0, 10), _no_anchor)
    _read(scan, _Record(10, 0), _Record(11, 1), _Record(12, 2), _Record(13, 4))
    assert scan.found == {3: Replica(13, 4)}
    assert scan.done


def test_the_anchors_own_position_is_answered_by_the_anchor() -> None:
    scan = _TargetScan(_ALIAS, [7], (7, 70), _no_anchor)
    _read(scan, _Record(70, 7))
    assert scan.found == {7: Replica(70, 7)} and scan.done


def test_an_anchor_not_at_its_target_offset_breaks_the_scan() -> None:
    scan = _TargetScan(_ALIAS, [5], (3, 100), _no_anchor)
    assert _read(scan, _Record(101, 3)) == [None]
    assert scan.broken is not None and "3->100" in scan.broken
    assert scan.done and scan.found == {}


def test_an_anchor_whose_record_carries_another_source_offset_breaks_the_scan() -> None:
    scan = _TargetScan(_ALIAS, [5], (3, 100), _no_anchor)
    _read(scan, _Record(100, 4))
    assert scan.broken is not None and scan.done and scan.found == {}


def test_an_anchor_whose_record_is_not_a_replica_breaks_the_scan() -> None:
    scan = _TargetScan(_ALIAS, [5], (3, 100), _no_anchor)
    _read(scan, _Record(100))
    assert scan.broken is not None and scan.done


def test_a_partition_starting_with_records_without_our_header_breaks_the_scan() -> None:
    scan = _TargetScan(_ALIAS, [0], 0, _no_anchor)  # MM2's copies come first
    assert scan.start() == 0
    _read(scan, _Record(0))
    assert scan.broken is not None and "before the first replica" in scan.broken
    assert scan.done


def test_a_replica_of_another_flow_is_no_replica_of_ours() -> None:
    scan = _TargetScan(_ALIAS, [0], 0, _no_anchor)
    _read(scan, _Record(0, 0, alias=b"backup"))
    assert scan.broken is not None and scan.done


def test_reading_from_the_partition_start_finds_the_first_replica() -> None:
    scan = _TargetScan(_ALIAS, [0, 2], 5, _no_anchor)
    assert scan.start() == 5
    _read(scan, _Record(5, 1), _Record(6, 2))
    assert scan.found == {0: Replica(5, 1), 2: Replica(6, 2)}
    assert scan.done and scan.broken is None


def test_a_record_without_our_header_after_replicas_is_passed_over() -> None:
    scan = _TargetScan(_ALIAS, [1, 2], 0, _no_anchor)
    _read(scan, _Record(0, 0), _Record(1), _Record(2, 1))
    assert scan.broken is None and scan.found == {1: Replica(2, 1)}
    assert scan.last == Replica(2, 1) and not scan.done


def test_positions_past_the_last_replica_stay_unfound() -> None:
    scan = _TargetScan(_ALIAS, [1, 3, 9], (0, 0), _no_anchor)
    _read(scan, _Record(0, 0), _Record(1, 1), _Record(2, 2), _Record(3))
    scan.end()
    assert scan.found == {1: Replica(1, 1)}
    assert scan.last == Replica(2, 2)
    assert not scan.done and scan.broken is None


def test_an_anchor_far_ahead_is_jumped_to_and_checked_there() -> None:
    far = 11 + JUMP_OFFSETS + 1  # one past what is read up to from offset 11
    anchors = {500: (400, far)}
    scan = _TargetScan(_ALIAS, [1, 500], (0, 10), anchors.get)
    assert _read(scan, _Record(10, 0)) == [None]  # 1 is next: no anchor of its own
    assert _read(scan, _Record(11, 1)) == [far]  # 500 is next, its anchor far ahead
    assert scan.found == {1: Replica(11, 1)} and not scan.done
    _read(scan, _Record(far, 400))
    assert scan.broken is None and not scan.done
    _read(scan, _Record(far + 100, 500))
    assert scan.found[500] == Replica(far + 100, 500) and scan.done


def test_a_jump_that_lands_on_another_record_breaks_the_scan() -> None:
    far = 10 + JUMP_OFFSETS + 1
    scan = _TargetScan(_ALIAS, [500], (0, 10), {500: (400, far)}.get)
    assert _read(scan, _Record(10, 0)) == [far]
    _read(scan, _Record(far, 399))
    assert scan.broken is not None and scan.done and scan.found == {}


def test_an_anchor_near_enough_is_read_up_to_not_jumped_to() -> None:
    near = 10 + JUMP_OFFSETS
    scan = _TargetScan(_ALIAS, [500], (0, 10), {500: (400, near)}.get)
    assert _read(scan, _Record(10, 0)) == [None]


def test_an_anchor_behind_the_record_read_is_not_jumped_to() -> None:
    scan = _TargetScan(_ALIAS, [500], (0, 10), {500: (0, 10 + 2 * JUMP_OFFSETS)}.get)
    assert _read(scan, _Record(10, 0)) == [None]  # the anchor's source is no further on


# -- many partitions routed ----------------------------------------------------------------


class _Consumer:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[tuple[str, int, int | None]]]] = []

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("unassign", [(p.topic, p.partition, None) for p in partitions]))

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("assign", [(p.topic, p.partition, p.offset) for p in partitions]))


class _Scan(Scan):
    """Takes what it is given; jumps as told; done after `until` records."""

    def __init__(
        self, first: int = 0, jumps: dict[int, int] | None = None, until: int | None = None
    ) -> None:
        self._first = first
        self._jumps = jumps or {}
        self._until = until
        self.seen: list[int] = []
        self.ended = False

    def start(self) -> int:
        return self._first

    def record(self, message: object) -> int | None:
        self.seen.append(message.offset())  # type: ignore[attr-defined]
        if self._until is not None and len(self.seen) >= self._until:
            self.done = True
        return self._jumps.get(message.offset())  # type: ignore[attr-defined]

    def end(self) -> None:
        self.ended = True


def _scans(**by_partition: _Scan) -> dict[tuple[str, int], Scan]:
    return {(_TOPIC, int(p[1:])): scan for p, scan in by_partition.items()}


def test_each_record_goes_to_its_partitions_scan() -> None:
    zero, one = _Scan(), _Scan()
    pending = _scans(p0=zero, p1=one)
    floor = {key: 0 for key in pending}
    batch = [_Record(0, partition=0), _Record(0, partition=1), _Record(1, partition=0)]
    assert _route(batch, pending, floor, _Consumer(), "dr") == []
    assert zero.seen == [0, 1] and one.seen == [0]


def test_records_below_a_partitions_floor_are_dropped() -> None:
    scan = _Scan()
    pending = _scans(p0=scan)
    floor = {(_TOPIC, 0): 5}
    _route([_Record(3), _Record(4), _Record(5)], pending, floor, _Consumer(), "dr")
    assert scan.seen == [5]


def test_a_jump_reassigns_the_partition_at_the_new_offset_and_raises_its_floor() -> None:
    scan = _Scan(jumps={1: 5000})
    pending = _scans(p0=scan)
    floor = {(_TOPIC, 0): 0}
    consumer = _Consumer()
    batch = [_Record(0), _Record(1), _Record(2), _Record(3)]  # 2, 3: queued before the jump
    assert _route(batch, pending, floor, consumer, "dr") == []
    assert scan.seen == [0, 1]
    assert floor == {(_TOPIC, 0): 5000}
    assert consumer.calls == [
        ("unassign", [(_TOPIC, 0, None)]),
        ("assign", [(_TOPIC, 0, 5000)]),
    ]


def test_a_scan_done_on_a_record_finishes_and_takes_no_more() -> None:
    scan = _Scan(until=1, jumps={0: 5000})  # done: its jump is not followed
    pending = _scans(p0=scan)
    consumer = _Consumer()
    finished = _route([_Record(0), _Record(1)], pending, {(_TOPIC, 0): 0}, consumer, "dr")
    assert finished == [(_TOPIC, 0)] and pending == {}
    assert scan.seen == [0] and consumer.calls == []


def test_the_partition_end_ends_the_scan_and_finishes_it() -> None:
    zero, one = _Scan(), _Scan()
    pending = _scans(p0=zero, p1=one)
    floor = {key: 0 for key in pending}
    finished = _route(
        [_Record(0), _eof(0, 1), _Record(0, partition=1)], pending, floor, _Consumer(), "dr"
    )
    assert finished == [(_TOPIC, 0)]
    assert zero.ended and zero.done and not one.ended
    assert list(pending) == [(_TOPIC, 1)]


def test_another_read_error_names_the_partition() -> None:
    pending = _scans(p3=_Scan())
    error = KafkaError(KafkaError.OFFSET_OUT_OF_RANGE)
    with pytest.raises(ReplicatorError, match=r"primary\.orders\[3\] on 'dr' from offset 7"):
        _route([_Record(7, partition=3, error=error)], pending, {(_TOPIC, 3): 7}, _Consumer(), "dr")


def test_records_of_a_partition_not_pending_are_passed_over() -> None:
    scan = _Scan()
    pending = _scans(p0=scan)
    batch = [_Record(0, partition=9), _eof(9), _Record(0)]
    assert _route(batch, pending, {(_TOPIC, 0): 0}, _Consumer(), "dr") == []
    assert scan.seen == [0]


def test_after_a_jump_a_scan_sees_each_record_once() -> None:
    scan = _Scan(jumps={0: 3000})
    pending = _scans(p0=scan)
    floor = {(_TOPIC, 0): 0}
    consumer = _Consumer()
    _route([_Record(0), _Record(3000), _Record(3001)], pending, floor, consumer, "dr")
    _route([_Record(3000), _Record(3001), _Record(3002)], pending, floor, consumer, "dr")
    assert scan.seen == [0, 3000, 3001, 3002]


# -- a round's answers -------------------------------------------------------------------


class _NoPairs:
    """The flow's offset syncs, none known (the scans read from the partition's start)."""

    def refresh(self) -> None: ...

    def anchor(self, *_: object) -> None:
        return None

    def after(self, *_: object) -> None:
        return None

    def learn(self, *_: object) -> None: ...

    def forget(self, *_: object) -> None: ...


def test_a_held_position_asked_again_in_the_round_is_not_read_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A round's chunks of groups often ask the same positions (groups at the same
    offset of a partition whose copy is under way): the round answers each once."""
    reads: list[str] = []

    def scan(_base: object, _purpose: str, _cluster: str, scans: dict, **_: object) -> None:
        reads.append("target")
        for key, each in scans.items():
            assert key == (_TOPIC, 0)
            _read(each, *(_Record(o, o) for o in range(40)))  # 40 of 100 copied so far

    def firsts(_cluster: object, starts: dict) -> dict:
        reads.append("source")
        return dict.fromkeys(starts, 40)  # the source's record 40 is not on the target

    monkeypatch.setattr(batch_translation, "admin_for", lambda _cluster: None)
    monkeypatch.setattr(batch_translation, "partition_bounds", lambda *_: {(_TOPIC, 0): (0, 40)})
    monkeypatch.setattr(batch_translation, "scan_partitions", scan)
    monkeypatch.setattr(batch_translation, "first_records", firsts)
    monkeypatch.setattr(batch_translation, "OffsetSyncStore", lambda _flow: _NoPairs())
    translator = batch_translation.BatchTranslator(flow(), None, None)  # type: ignore[arg-type]

    translator.begin_round()
    first = translator.translate([("orders", 0, 50)])
    again = translator.translate([("orders", 0, 50)])
    assert reads == ["target", "source"]
    assert again == first and not first["orders", 0, 50].exact
    assert translator.answered["cache"] == 1

    translator.begin_round()  # the next round (or the round's last look) reads again
    translator.translate([("orders", 0, 50)])
    assert reads == ["target", "source", "target", "source"]


def test_partitions_not_copied_to_yet_are_left_out_of_the_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Thousands of remote partitions being created: a round reads no group position
    on those the copy has not reached (not served yet, or never written while the
    source holds records), and keeps those a position there may be exact on: an
    empty source partition, a target emptied by retention (end above 0)."""
    target = {
        ("primary.orders", 0): (0, 40),  # copied to
        ("primary.orders", 1): (0, 0),  # created, nothing copied; the source has records
        ("primary.orders", 2): (0, 0),  # created; its source partition is empty
        ("primary.orders", 3): (70, 70),  # emptied by retention
        # primary.orders[4] not served yet
    }
    source = {("orders", p): (0, 100) for p in range(5)} | {("orders", 2): (0, 0)}
    asked: list[list[tuple[str, int]]] = []

    def bounds(cluster: object, partitions: list, _admin: object) -> dict:
        if cluster is flow_config.target:
            return {p: target[p] for p in partitions if p in target}
        asked.append(sorted(partitions))
        return {p: source[p] for p in partitions}

    flow_config = flow()
    monkeypatch.setattr(batch_translation, "admin_for", lambda _cluster: None)
    monkeypatch.setattr(batch_translation, "partition_bounds", bounds)
    monkeypatch.setattr(batch_translation, "OffsetSyncStore", lambda _flow: _NoPairs())
    translator = batch_translation.BatchTranslator(flow_config, None, None)  # type: ignore[arg-type]
    partitions = [("orders", p) for p in range(5)]
    translator.begin_round()
    translator.check_targets(partitions)
    assert translator.not_started(partitions) == {("orders", 1), ("orders", 4)}
    assert asked == [[("orders", 1), ("orders", 2), ("orders", 4)]]  # the candidates only

    # The next round: a source partition seen holding records is not read again (at
    # 5,000 partitions being created that read was a third of every round); the
    # empty one is (it may have records now).
    translator.begin_round()
    translator.check_targets(partitions)
    assert translator.not_started(partitions) == {("orders", 1), ("orders", 4)}
    assert asked[1:] == [[("orders", 2)]]

    # Later in the round the copy reached orders[4]: `reached` reads its target again.
    target[("primary.orders", 4)] = (0, 12)
    assert translator.reached({("orders", 1), ("orders", 4)}) == ([("orders", 4)], False)


def test_a_target_end_read_before_the_copy_went_on_is_read_again_not_scanned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The round read the target's end when the copy had written 40 records; the
    writers have written all 100 since. Memory answers nothing past a target end
    older than its newest record (that is how a truncated target shows), so the end
    is read again, once, and the position is answered from what was written, with
    no read of the records (at 1,000 partitions the catch-up after the copy read
    the target for nearly every position)."""
    ends = iter([(0, 40), (0, 100)])
    asked: list[list[tuple[str, int]]] = []
    scanned: list[object] = []

    def bounds(_cluster: object, partitions: list, _admin: object) -> dict:
        asked.append(list(partitions))
        return {(_TOPIC, 0): next(ends)}

    monkeypatch.setattr(batch_translation, "admin_for", lambda _cluster: None)
    monkeypatch.setattr(batch_translation, "partition_bounds", bounds)
    monkeypatch.setattr(batch_translation, "scan_partitions", lambda *a, **k: scanned.append(a))
    monkeypatch.setattr(batch_translation, "OffsetSyncStore", lambda _flow: _NoPairs())
    translator = batch_translation.BatchTranslator(flow(), None, None)  # type: ignore[arg-type]
    translator.written = WrittenRuns()
    translator.begin_round()
    translator.check_targets([("orders", 0)])  # the round's read: 40 records then

    translator.written.track(("orders", 0))
    translator.written.acknowledged(("orders", 0), 0, 0, 1, 0, committed=True)
    translator.written.acknowledged(("orders", 0), 1, 99, 99, 99, committed=True)
    found = translator.translate([("orders", 0, 50)])
    assert found["orders", 0, 50].exact and found["orders", 0, 50].target_offset == 50
    assert translator.answered == {"written": 1}
    assert asked == [[(_TOPIC, 0)], [(_TOPIC, 0)]] and scanned == []
