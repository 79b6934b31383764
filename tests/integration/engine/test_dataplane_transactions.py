"""The Mover's transactional mode (`Mover(transactional_id=..., offsets_group=...)`)
against the real local clusters: committed transactions visible to read_committed
readers with the source offsets committed in them (to a group on the target), an
abort leaving nothing visible and the records moved again by the next transaction, a
crash mid-transaction (kill -9 of the process, or a close without commit) replayed
exactly once from the committed offsets, a zombie fenced by the next owner, and the
settings checked. Also the fact the design rests on: a source consumer's group
metadata means nothing to the target's group coordinator (docs/dataplane.md,
"Exactly-once").
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaException,
    Producer,
    TopicPartition,
)
from test_dataplane_mover import (
    _dataplane,
    new_mover,
    produce,
    provenance,
    read_all,
)

from replicator.engine.headers import OFFSET_HEADER, decode_offset

from helpers.kafka import create_topic, unique_topic

ROOT = Path(__file__).resolve().parents[3]


def transactional_mover(
    primary: str, dr: str, transactional_id: str, group: str | None
) -> _dataplane.Mover:
    return _dataplane.Mover(
        {"bootstrap.servers": primary, "auto.offset.reset": "error"},
        {"bootstrap.servers": dr, "linger.ms": "5"},
        [("__dr_src", b"primary")],
        offset_header="__dr_off",
        topic_header="__dr_topic",
        reserved_headers=["__dr_src", "__dr_off", "__dr_topic", "__dr_origin"],
        transactional_id=transactional_id,
        offsets_group=group,
    )


def move(mover: _dataplane.Mover, count: int, timeout: float = 60.0) -> list[tuple]:
    """Move exactly `count` records (moved or handed back); the handed-back ones."""
    moved, handed = 0, []
    deadline = time.monotonic() + timeout
    while moved + len(handed) < count:
        assert time.monotonic() < deadline, f"{moved} moved, {len(handed)} handed of {count}"
        n, back = mover.move_records(count - moved - len(handed), 0.2)
        moved += n
        handed += back
    return handed


def visible_now(bootstrap: str, topic: str, partition: int, seconds: float = 3.0) -> list:
    """What a read_committed reader sees of the partition within `seconds` (it stops at
    an open transaction: the last stable offset)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"peek-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        out = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.2):
                assert m.error() is None, m.error()
                out.append(m)
        return out
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[TopicPartition]:
    """The offsets `group` has committed on `bootstrap` for `topic`'s partitions."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        return consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
    finally:
        consumer.close()


def source_offsets(bootstrap: str, topic: str, partition: int) -> list[int]:
    """The source offsets the committed replicas of one partition carry, in order."""
    out = []
    for record in read_all(bootstrap, topic, partition):
        (value,) = [v for name, v in record.headers if name == OFFSET_HEADER]
        offset = decode_offset(value)
        assert offset is not None
        out.append(offset)
    return out


def numbered(partitions: int, per_partition: int) -> list[tuple]:
    base = int(time.time() * 1000) - 100_000
    return [
        (p, b"%d-%d" % (p, i), b"v%d" % i, None, base + i)
        for p in range(partitions)
        for i in range(per_partition)
    ]


def test_committed_transactions_are_visible_with_their_offsets(primary: str, dr: str) -> None:
    source, target = unique_topic("dpt-src"), unique_topic("dpt-dst")
    group = f"dpt-{uuid.uuid4().hex}"
    create_topic(primary, source, partitions=2)
    create_topic(dr, target, partitions=2)
    produce(primary, source, numbered(2, 10))
    mover = transactional_mover(primary, dr, f"dpt-{uuid.uuid4().hex}", group)
    try:
        assert "transactional" in repr(mover)
        mover.assign([(source, 0, 0, target), (source, 1, 0, target)])
        mover.init_transactions(30)
        mover.begin_transaction()
        assert move(mover, 12) == []
        assert mover.flush(30) == 0
        # Acked but not committed: not reported, not visible.
        progress = mover.progress()
        assert sum(p[2] for p in progress.values()) == 12, progress
        assert all(p[0] == -1 and p[3] == 0 for p in progress.values()), progress
        assert visible_now(dr, target, 0, 1.0) == []
        first = mover.commit_transaction(30)
        assert sum(first.values()) == 12 and set(first) == {(source, 0), (source, 1)}
        assert committed(dr, group, target, 2)[0].offset == first[(source, 0)]

        mover.begin_transaction()
        assert move(mover, 8) == []
        second = mover.commit_transaction(30)
        assert {**first, **second} == {(source, 0): 10, (source, 1): 10}
        progress = mover.progress()
    finally:
        mover.close()

    for p in (0, 1):
        got = read_all(dr, target, p)
        assert [(r.key, r.headers) for r in got] == [
            (b"%d-%d" % (p, i), provenance(source, i)) for i in range(10)
        ]
        through, target_offset, in_flight, records, _, shifts, _, _ = progress[(source, p)]
        assert (through, in_flight, records) == (9, 0, 10)
        assert target_offset == read_all(dr, target, p)[-1].offset
        assert shifts[0] == (0, 0)
    offsets = committed(dr, group, target, 2)
    assert [(tp.partition, tp.offset) for tp in offsets] == [(0, 10), (1, 10)]


def test_an_abort_leaves_nothing_visible_and_the_records_move_again(primary: str, dr: str) -> None:
    source, target = unique_topic("dpt-abort"), unique_topic("dpt-abort-dst")
    group = f"dpt-{uuid.uuid4().hex}"
    create_topic(primary, source)
    create_topic(dr, target)
    base = int(time.time() * 1000) - 1000
    produce(primary, source, [
        (0, b"a", b"0", None, base),
        (0, b"b", b"1", None, base + 1),
        (0, b"c", b"2 from another hop", [("__dr_src", b"elsewhere")], base + 2),
        (0, b"d", b"3", None, base + 3),
        (0, b"e", b"4", None, base + 4),
    ])  # fmt: skip
    mover = transactional_mover(primary, dr, f"dpt-{uuid.uuid4().hex}", group)
    try:
        mover.assign([(source, 0, 0, target)])
        mover.init_transactions(30)
        with pytest.raises(_dataplane.MoverError, match=r"begin_transaction\(\) first"):
            mover.move_records(10, 0.5)
        for attempt in ("aborted", "committed"):
            mover.begin_transaction()
            (handed,) = move(mover, 3)
            assert handed[2] == 2 and handed[8] == "reserved_header", attempt
            mover.release(source, 0, [("from", b"python")])
            assert move(mover, 2) == []
            assert mover.flush(30) == 0
            if attempt == "aborted":
                assert mover.progress()[(source, 0)][2] == 5
                assert mover.abort_transaction(30) == {(source, 0): 0}
                assert mover.progress()[(source, 0)][:4] == (-1, -1, 0, 0)
                assert visible_now(dr, target, 0, 1.0) == []
        assert mover.commit_transaction(30) == {(source, 0): 5}
        through, target_offset, in_flight, records, _, shifts, _, newest = mover.progress()[
            (source, 0)
        ]
    finally:
        mover.close()
    got = read_all(dr, target, 0)
    assert [r.key for r in got] == [b"a", b"b", b"c", b"d", b"e"]
    assert got[2].headers == (("from", b"python"),)
    # Target offsets 0-4 hold the aborted records, 5 the abort marker.
    assert [r.offset for r in got] == [6, 7, 8, 9, 10]
    assert (through, target_offset, in_flight, records, newest) == (4, 10, 0, 5, 4)
    assert shifts == [(0, 6)]
    assert [tp.offset for tp in committed(dr, group, target, 1)] == [5]


CHILD = """
import sys, time
from replicator import _dataplane

primary, dr, source, target, txid, group, first, total = sys.argv[1:]
first, total = int(first), int(total)
mover = _dataplane.Mover(
    {"bootstrap.servers": primary, "auto.offset.reset": "error"},
    {"bootstrap.servers": dr, "linger.ms": "5"},
    [("__dr_src", b"primary")], offset_header="__dr_off",
    transactional_id=txid, offsets_group=group,
)
mover.assign([(source, p, 0, target) for p in (0, 1)])
mover.init_transactions(30)

def move(count):
    moved = 0
    deadline = time.monotonic() + 60
    while moved < count:
        assert time.monotonic() < deadline, moved
        n, handed = mover.move_records(count - moved, 0.2)
        assert not handed, handed
        moved += n

mover.begin_transaction()
move(first)
print("committed", mover.commit_transaction(30), flush=True)
mover.begin_transaction()
move(total - first)
assert mover.flush(30) == 0
print("mid-transaction", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("crash", ["kill -9", "close without commit"])
def test_a_crash_mid_transaction_replays_exactly_once(
    primary: str, dr: str, crash: str, tmp_path: Path
) -> None:
    source, target = unique_topic("dpt-crash"), unique_topic("dpt-crash-dst")
    group, txid = f"dpt-{uuid.uuid4().hex}", f"dpt-{uuid.uuid4().hex}"
    create_topic(primary, source, partitions=2)
    create_topic(dr, target, partitions=2)
    per_partition, first = 300, 250
    produce(primary, source, numbered(2, per_partition))
    total = 2 * per_partition - 100  # the crash leaves 100 records unmoved
    args = [primary, dr, source, target, txid, group, str(first), str(total)]

    if crash == "kill -9":
        script = tmp_path / "child.py"
        script.write_text(textwrap.dedent(CHILD))
        log = tmp_path / "child.log"
        with log.open("w") as out:
            child = subprocess.Popen(
                [sys.executable, str(script), *args], stdout=out, stderr=subprocess.STDOUT,
                cwd=ROOT,
            )  # fmt: skip
        try:
            deadline = time.monotonic() + 120
            while "mid-transaction" not in log.read_text():
                assert child.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
            child.send_signal(signal.SIGKILL)
            child.wait(10)
        finally:
            if child.poll() is None:
                child.kill()
    else:
        zombie = transactional_mover(primary, dr, txid, group)
        zombie.assign([(source, p, 0, target) for p in (0, 1)])
        zombie.init_transactions(30)
        zombie.begin_transaction()
        move(zombie, first)
        zombie.commit_transaction(30)
        zombie.begin_transaction()
        move(zombie, total - first)
        assert zombie.flush(30) == 0
        zombie.close()

    # Only the first transaction is visible, and its offsets committed (a partition
    # it took nothing of has none: OFFSET_INVALID, below 0).
    before = committed(dr, group, target, 2)
    assert sum(max(tp.offset, 0) for tp in before) == first, before
    assert sum(len(visible_now(dr, target, p, 1.0)) for p in (0, 1)) == first

    # The restart: fence (which aborts the open transaction), then resume from the
    # committed offsets.
    mover = transactional_mover(primary, dr, txid, group)
    try:
        mover.init_transactions(30)
        resume = committed(dr, group, target, 2)
        mover.assign([(source, tp.partition, max(tp.offset, 0), target) for tp in resume])
        mover.begin_transaction()
        assert move(mover, 2 * per_partition - first) == []
        assert mover.commit_transaction(30) == {(source, 0): 300, (source, 1): 300}
    finally:
        mover.close()
    for p in (0, 1):
        assert source_offsets(dr, target, p) == list(range(per_partition)), f"partition {p}"
    assert [tp.offset for tp in committed(dr, group, target, 2)] == [300, 300]


def test_a_zombie_is_fenced_by_the_next_owner(primary: str, dr: str) -> None:
    source, target = unique_topic("dpt-zombie"), unique_topic("dpt-zombie-dst")
    txid = f"dpt-{uuid.uuid4().hex}"
    create_topic(primary, source)
    create_topic(dr, target)
    produce(primary, source, numbered(1, 6))
    zombie = transactional_mover(primary, dr, txid, None)
    successor = transactional_mover(primary, dr, txid, None)
    try:
        zombie.assign([(source, 0, 0, target)])
        zombie.init_transactions(30)
        zombie.begin_transaction()
        move(zombie, 3)
        assert zombie.flush(30) == 0
        successor.init_transactions(30)  # same id: the zombie is fenced
        with pytest.raises(_dataplane.TransactionError) as fenced:
            zombie.commit_transaction(30)
        error = fenced.value
        assert isinstance(error, _dataplane.MoverError)
        fenced_codes = {"_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"}
        assert error.fatal or error.code in fenced_codes, (error.code, str(error))
        assert not error.retriable
        successor.assign([(source, 0, 0, target)])
        successor.begin_transaction()
        move(successor, 6)
        assert successor.commit_transaction(30) == {(source, 0): 6}
    finally:
        zombie.close()
        successor.close()
    assert source_offsets(dr, target, 0) == list(range(6))


def test_transactional_settings_are_checked(primary: str, dr: str) -> None:
    with pytest.raises(ValueError, match=r"transactional\.id.*Mover\(\.\.\., transactional_id"):
        _dataplane.Mover(
            {"bootstrap.servers": primary},
            {"bootstrap.servers": dr, "transactional.id": "x"},
            [],
        )
    with pytest.raises(ValueError, match=r'offsets_group="g".*give transactional_id too'):
        _dataplane.Mover({"bootstrap.servers": primary}, {"bootstrap.servers": dr}, [],
                         offsets_group="g")  # fmt: skip
    plain = new_mover(primary, dr)
    try:
        with pytest.raises(_dataplane.TransactionError, match="not transactional"):
            plain.begin_transaction()
    finally:
        plain.close()
    mover = transactional_mover(primary, dr, f"dpt-{uuid.uuid4().hex}", None)
    try:
        with pytest.raises(_dataplane.TransactionError, match=r"init_transactions\(\) before"):
            mover.begin_transaction()
        mover.init_transactions(30)
        with pytest.raises(_dataplane.TransactionError, match="no transaction is open"):
            mover.commit_transaction(5)
    finally:
        mover.close()


def test_a_source_groups_metadata_means_nothing_on_the_target(primary: str, dr: str) -> None:
    """Why the mover makes the group's metadata from a group id (docs/dataplane.md):
    the offsets of a transaction go to the group coordinator of the producer's
    cluster (the target), and a source consumer's metadata (its generation and member
    id, KIP-447's zombie fencing) names a member that group does not have there."""
    source, target = unique_topic("dpt-cgm"), unique_topic("dpt-cgm-dst")
    group = f"dpt-{uuid.uuid4().hex}"
    create_topic(primary, source)
    create_topic(dr, target)
    produce(primary, source, numbered(1, 1))
    consumer = Consumer(
        {"bootstrap.servers": primary, "group.id": group, "auto.offset.reset": "earliest"}
    )
    producer = Producer({"bootstrap.servers": dr, "transactional.id": f"dpt-{uuid.uuid4().hex}"})
    try:
        consumer.subscribe([source])
        deadline = time.monotonic() + 60
        while not consumer.assignment():
            assert time.monotonic() < deadline, "no assignment"
            consumer.poll(0.5)
        metadata = consumer.consumer_group_metadata()
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(target, b"v", partition=0)
        with pytest.raises(KafkaException) as refused:
            producer.send_offsets_to_transaction([TopicPartition(target, 0, 1)], metadata, 30)
        error = refused.value.args[0]
        assert error.name() in {"UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION"}, error
        producer.abort_transaction(30)
    finally:
        consumer.close()
