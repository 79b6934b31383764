"""The compiled data plane's Mover (`replicator._dataplane`, dataplane/) against the
real local clusters: awkward records moved from `primary` to `dr` and compared byte
for byte with the source (keys, values, headers, timestamps and their types,
partitions, order; aborted records absent), records handed back to Python and
released or skipped, errors that name topic, partition and offset, settings refused
with the key named and no value leaked, the GIL released while it moves, and
confluent-kafka's own librdkafka working in the same process throughout (every
record here is produced and read back with confluent-kafka).

Skipped only where cargo is absent (the build then leaves the module out, loudly);
with cargo on PATH a missing module fails.
"""

from __future__ import annotations

import shutil
import struct
import threading
import time
import uuid
from dataclasses import dataclass
from itertools import pairwise

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from helpers.kafka import create_topic, unique_topic

try:
    from replicator import _dataplane
except ImportError as exc:  # pragma: no cover - depends on the machine
    if shutil.which("cargo") is not None:
        raise ImportError(
            f"replicator._dataplane is not built although cargo is on PATH ({exc}); "
            "run `make setup` (or `.venv/bin/pip install -e .`) and read its banner"
        ) from exc
    pytest.skip("cargo is absent: the data plane is not built here", allow_module_level=True)

OURS = ["__dr_src", "__dr_off", "__dr_topic", "__dr_origin"]
MIB = 1024 * 1024
BIG_TOPIC = {"max.message.bytes": str(3 * MIB)}


@dataclass(frozen=True)
class Read:
    """A record as read back, every field that must survive the move."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_type: int
    timestamp: int


def read_all(bootstrap: str, topic: str, partition: int, timeout: float = 60.0) -> list[Read]:
    """Every committed record of one partition, to the end it has now."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "fetch.max.bytes": str(4 * MIB),
            "max.partition.fetch.bytes": str(4 * MIB),
        }
    )
    try:
        tp = TopicPartition(topic, partition)
        _, end = consumer.get_watermark_offsets(tp, timeout=10)
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        out: list[Read] = []
        deadline = time.monotonic() + timeout
        while end > 0 and consumer.position([tp])[0].offset < end:
            assert time.monotonic() < deadline, f"{topic}[{partition}] not read to {end}"
            for m in consumer.consume(1000, 0.5):
                assert m.error() is None, f"{topic}[{partition}]: {m.error()}"
                kind, ts = m.timestamp()
                headers = tuple(m.headers() or ())
                out.append(Read(m.offset(), m.key(), m.value(), headers, kind, ts))
        return out
    finally:
        consumer.close()


def provenance(topic: str, offset: int) -> tuple[tuple[str, bytes], ...]:
    return (
        ("__dr_src", b"primary"),
        ("__dr_off", struct.pack(">q", offset)),
        ("__dr_topic", topic.encode()),
    )


def new_mover(primary: str, dr: str, **target: str) -> _dataplane.Mover:
    return _dataplane.Mover(
        {"bootstrap.servers": primary, "auto.offset.reset": "error"},
        {"bootstrap.servers": dr, "linger.ms": "5", **target},
        [("__dr_src", b"primary")],
        offset_header="__dr_off",
        topic_header="__dr_topic",
        reserved_headers=OURS,
    )


def move_until(mover: _dataplane.Mover, count: int, timeout: float = 60.0) -> list[tuple]:
    """Move until `count` records moved or were handed back; the handed-back ones."""
    moved, handed = 0, []
    deadline = time.monotonic() + timeout
    while moved + len(handed) < count:
        assert time.monotonic() < deadline, f"{moved} moved, {len(handed)} handed of {count}"
        n, back = mover.move_records(10_000, 0.2)
        moved += n
        handed += back
    return handed


def recent() -> int:
    """A timestamp of now (ms): the brokers' retention deletes a segment of records
    stamped in 1970 at its next check, and the partition's offset 0 with it."""
    return int(time.time() * 1000)


def produce(bootstrap: str, topic: str, records: list[tuple], **settings: str) -> None:
    """(partition, key, value, headers, timestamp) each, idempotent, in order."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, **settings})
    errors: list[str] = []
    for partition, key, value, headers, timestamp in records:
        producer.produce(
            topic, value, key, partition, timestamp=timestamp, headers=headers,
            on_delivery=lambda e, _m: errors.append(str(e)) if e else None,
        )  # fmt: skip
    assert producer.flush(60) == 0
    assert not errors, errors


def awkward(base: int) -> list[tuple]:
    """Records for partition 0 and 1: null and empty keys and values, own headers
    with duplicate names and null values, a 1 MiB value."""
    big = bytes(range(256)) * (MIB // 256)
    rows = [
        (b"k", b"v", None),
        (None, b"null key", None),
        (b"", b"empty key", None),
        (b"tombstone", None, None),
        (b"empty value", b"", None),
        (None, None, None),
        (b"", b"", None),
        (b"hdr", b"own headers", [("trace", b"1"), ("trace", b"2"), ("n", None), ("e", b"")]),
        (b"big", big, [("size", b"1MiB")]),
        (b"\x00\xff", b"\x00" * 17 + b"\xff", [("bin", b"\x00\x01\xff")]),
        (b"after", b"the big one", None),
    ]
    return [
        (p, key, value, headers, base + 10 * i + p)
        for p in (0, 1)
        for i, (key, value, headers) in enumerate(rows)
    ]


def transactional_batches(bootstrap: str, topic: str, base: int) -> None:
    """Committed, aborted, committed, on partition 0 (markers and aborted data)."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex}"}
    )
    producer.init_transactions(30)
    for n, commit in enumerate((True, False, True)):
        producer.begin_transaction()
        for i in range(3):
            value = f"tx{n}-{i}-{'committed' if commit else 'ABORTED'}".encode()
            producer.produce(topic, value, b"tx", 0, timestamp=base + 1000 + 10 * n + i)
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)


def log_end(bootstrap: str, topic: str, partition: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "log-end"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), 10)[1]
    finally:
        consumer.close()


def test_awkward_records_are_moved_byte_for_byte(primary: str, dr: str) -> None:
    source, target = unique_topic("dp-src"), unique_topic("dp-dst")
    create_topic(primary, source, partitions=2, config=BIG_TOPIC)
    create_topic(dr, target, partitions=2, config=BIG_TOPIC)
    base = int(time.time() * 1000) - 100_000
    produce(primary, source, awkward(base), **{"message.max.bytes": str(3 * MIB)})
    transactional_batches(primary, source, base)
    produce(primary, source, [(0, b"last", b"after the transactions", None, base + 5000)])

    expected = {p: read_all(primary, source, p) for p in (0, 1)}
    assert not any(b"ABORTED" in (r.value or b"") for r in expected[0]), "read_committed"
    assert len(expected[0]) == 11 + 6 + 1 and len(expected[1]) == 11

    mover = new_mover(primary, dr, **{"message.max.bytes": str(3 * MIB)})
    try:
        mover.assign([(source, 0, 0, target), (source, 1, 0, target)])
        assert move_until(mover, len(expected[0]) + len(expected[1])) == []
        assert mover.flush(30) == 0
        progress = mover.progress()
        # Told once: with nothing new, no partition is reported again.
        assert mover.progress() == {}
        # The lag's measure: the log ends its fetches learned (no request of their own).
        assert mover.watermarks() == {(source, p): log_end(primary, source, p) for p in (0, 1)}
    finally:
        mover.close()

    for p in (0, 1):
        got = read_all(dr, target, p)
        want = [
            (r.key, r.value, r.headers + provenance(source, r.offset), r.timestamp_type,
             r.timestamp)
            for r in expected[p]
        ]  # fmt: skip
        assert [(r.key, r.value, r.headers, r.timestamp_type, r.timestamp) for r in got] == want
        assert [r.offset for r in got] == list(range(len(want)))
        through, target_offset, in_flight, records, size, shifts, _, newest = progress[(source, p)]
        assert (through, target_offset, in_flight) == (expected[p][-1].offset, len(want) - 1, 0)
        assert newest == through  # the last record read was written, none skipped
        assert records == len(want)
        assert size == sum(len(r.key or b"") + len(r.value or b"") for r in expected[p])
        # Where the mapping stopped being a plain shift: the first record, and after
        # each transaction marker or aborted batch.
        gaps = [r for prev, r in pairwise(expected[p]) if r.offset != prev.offset + 1]
        assert shifts == [(0, 0)] + [(r.offset, expected[p].index(r)) for r in gaps]
    # Partition 0: the first record; 19 after a marker, the aborted batch and its
    # marker; 23 after the last marker.
    assert progress[(source, 0)][5] == [(0, 0), (19, 14), (23, 17)]


def test_log_append_time_is_kept_as_the_topic_says(primary: str, dr: str) -> None:
    """A LogAppendTime topic replicated into one configured the same way (as topic
    sync makes it): the replicas are LogAppendTime too, stamped by the target."""
    source, target = unique_topic("dp-lat"), unique_topic("dp-lat-dst")
    config = {"message.timestamp.type": "LogAppendTime"}
    create_topic(primary, source, config=config)
    create_topic(dr, target, config=config)
    produce(primary, source, [(0, b"k", b"v", None, 1_000)])
    (original,) = read_all(primary, source, 0)
    assert original.timestamp_type == 2 and original.timestamp != 1_000
    mover = new_mover(primary, dr)
    try:
        mover.assign([(source, 0, 0, target)])
        move_until(mover, 1)
        assert mover.flush(30) == 0
    finally:
        mover.close()
    (replica,) = read_all(dr, target, 0)
    assert replica.timestamp_type == 2
    assert (replica.key, replica.value) == (b"k", b"v")


def test_records_with_our_headers_are_handed_back(primary: str, dr: str) -> None:
    source, target = unique_topic("dp-back"), unique_topic("dp-back-dst")
    create_topic(primary, source)
    create_topic(dr, target)
    base = int(time.time() * 1000) - 1000
    produce(primary, source, [
        (0, b"a", b"plain", None, base),
        (0, b"b", b"from elsewhere", [("app", b"x"), ("__dr_src", b"other")], base + 1),
        (0, b"c", b"plain again", None, base + 2),
        (0, b"d", b"a loop", [("__dr_src", b"dr")], base + 3),
        (0, b"e", b"last", None, base + 4),
    ])  # fmt: skip
    mover = new_mover(primary, dr)
    try:
        mover.assign([(source, 0, 0, target)])
        handed = move_until(mover, 2)
        assert len(handed) == 1, "the partition waits while its record is handed back"
        topic, partition, offset, key, value, kind, ts, headers, reason = handed[0]
        assert (topic, partition, offset, key, value) == (source, 0, 1, b"b", b"from elsewhere")
        assert (kind, ts, reason) == (1, base + 1, "reserved_header")
        assert headers == [("app", b"x"), ("__dr_src", b"other")]
        # Released with the headers Python made: read on from offset 2.
        mover.release(source, 0, [("app", b"x")])
        with pytest.raises(_dataplane.MoverError, match=rf"{source} partition 0 holds no"):
            mover.release(source, 0, None)
        handed = move_until(mover, 2)
        assert [(h[2], h[8]) for h in handed] == [(3, "reserved_header")]
        mover.release(source, 0, None)  # a loop: skipped
        move_until(mover, 1)
        assert mover.flush(30) == 0
        through, target_offset, in_flight, records, _, shifts, stamp, newest = mover.progress()[
            (source, 0)
        ]
    finally:
        mover.close()
    got = read_all(dr, target, 0)
    assert [(r.key, r.headers) for r in got] == [
        (b"a", provenance(source, 0)),
        (b"b", (("app", b"x"),)),
        (b"c", provenance(source, 2)),
        (b"e", provenance(source, 4)),
    ]
    assert (through, target_offset, in_flight, records, newest) == (4, 3, 0, 4, 4)
    assert shifts == [(0, 0), (4, 3)]
    assert stamp == base + 4, "the last acked record's own timestamp (its age)"


def test_a_record_the_producer_refuses_is_handed_back_with_its_own_headers(
    primary: str, dr: str
) -> None:
    """The Mover sends a record's own headers on as the producer's (taken from the
    consumed record, our provenance added to them): one the producer refuses as too
    large (above its message.max.bytes, no topic limit given) comes back with exactly
    its own headers, in order, null values kept, and none of ours."""
    source, target = unique_topic("dp-big"), unique_topic("dp-big-dst")
    create_topic(primary, source)
    create_topic(dr, target)
    stamp = recent()
    own = [("trace-id", b"t" * 32), ("empty", b""), ("null", None), ("trace-id", b"again")]
    produce(primary, source, [
        (0, b"small", b"fits", own, stamp),
        (0, b"big", b"x" * 5000, own, stamp + 1),
        (0, b"after", b"fits too", None, stamp + 2),
    ])  # fmt: skip
    mover = new_mover(primary, dr, **{"message.max.bytes": "2000"})
    try:
        mover.assign([(source, 0, 0, target)])
        handed = move_until(mover, 2)
        assert [(h[2], h[3], h[8]) for h in handed] == [(1, b"big", "too_large")]
        assert handed[0][7] == own
        mover.release(source, 0, None)  # skipped, as oversized.record.policy=skip would
        move_until(mover, 1)
        assert mover.flush(30) == 0
    finally:
        mover.close()
    got = read_all(dr, target, 0)
    assert [(r.key, r.headers) for r in got] == [
        (b"small", (*own, *provenance(source, 0))),
        (b"after", provenance(source, 2)),
    ]


def test_errors_name_topic_partition_and_offset(primary: str, dr: str) -> None:
    source, target = unique_topic("dp-err"), unique_topic("dp-err-dst")
    create_topic(primary, source)
    create_topic(dr, target, config={"max.message.bytes": "2000"})
    produce(primary, source, [(0, b"k", b"x" * 5000, None, recent())])
    # The target refuses the record (larger than its topic allows).
    mover = new_mover(primary, dr)
    try:
        mover.assign([(source, 0, 0, target)])
        with pytest.raises(_dataplane.MoverError) as refused:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                mover.move_records(100, 0.2)
                mover.flush(1)
        assert f"{source} partition 0 offset 0 (to {target})" in str(refused.value)
        assert "too large" in str(refused.value).lower()
    finally:
        mover.close()
    # An offset the source does not have, with auto.offset.reset=error.
    mover = new_mover(primary, dr)
    try:
        mover.assign([(source, 0, 50, target)])
        with pytest.raises(_dataplane.MoverError) as out_of_range:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                mover.move_records(100, 0.2)
        message = str(out_of_range.value)
        assert f"consuming {source} partition 0 at offset" in message, message
    finally:
        mover.close()


def test_records_handed_back_before_an_error_in_the_same_call_are_returned(
    primary: str, dr: str
) -> None:
    """Partition 0's record carries our header (handed back); partition 1's next, in
    the same call, has no partition on the target. The call returns the hand-back
    and the next raises: raised at once, the hand-back was never seen and partition 0
    waited, unseen, until assigned again."""
    source, target = unique_topic("dp-defer"), unique_topic("dp-defer-dst")
    create_topic(primary, source, partitions=2)
    create_topic(dr, target, partitions=1)
    produce(primary, source, [
        (0, b"a", b"forwarded", [("__dr_src", b"east")], recent()),
        (0, b"b", b"after it", None, recent()),
        (1, b"c", b"no partition 1 on the target", None, recent()),
    ])  # fmt: skip
    mover = new_mover(primary, dr)
    try:
        assert mover.know([target], 10) == {target: 1}
        mover.assign([(source, 0, 0, target)])
        time.sleep(2)  # partition 0's records fetched first: they come first
        mover.assign([(source, 1, 0, target)])
        time.sleep(2)
        moved, handed = mover.move_records(100, 5)
        assert (moved, [(h[0], h[1], h[2], h[8]) for h in handed]) == (
            0, [(source, 0, 0, "reserved_header")],
        )  # fmt: skip
        with pytest.raises(_dataplane.MoverError, match=rf"{source} partition 1 offset 0"):
            mover.move_records(100, 0.5)
    finally:
        mover.close()


def test_a_partition_assigned_again_keeps_its_earlier_readings_counts(
    primary: str, dr: str
) -> None:
    """Unassigned with records in flight and assigned again (a held record read
    again, a fetch restarted): `progress` reports both readings as one, so neither
    the earlier records nor those still in flight are lost."""
    source, target = unique_topic("dp-again"), unique_topic("dp-again-dst")
    create_topic(primary, source)
    create_topic(dr, target)
    produce(primary, source, [(0, b"k", b"first %d" % i, None, recent()) for i in range(10)])
    mover = new_mover(primary, dr)
    try:
        mover.assign([(source, 0, 0, target)])
        move_until(mover, 10)
        mover.unassign([(source, 0)])
        mover.assign([(source, 0, 10, target)])
        produce(primary, source, [(0, b"k", b"then %d" % i, None, recent()) for i in range(5)])
        move_until(mover, 5)
        assert mover.flush(30) == 0
        through, target_offset, in_flight, records, *_ = mover.progress()[(source, 0)]
    finally:
        mover.close()
    assert (through, target_offset, in_flight, records) == (14, 14, 0, 15)
    assert len(read_all(dr, target, 0)) == 15


def test_partitions_added_to_a_target_topic_are_learnt_before_their_records(
    primary: str, dr: str
) -> None:
    """A target topic grown while the mover runs (topic sync grows a remote topic to a
    source topic's new partitions): librdkafka refreshes a producer's metadata only
    every topic.metadata.refresh.interval.ms (5 minutes) and refuses a record for a
    partition it does not know (`_UNKNOWN_PARTITION`; the engine's flow stopped on
    it). `know` asks the target through the mover's own producer; a record refused so
    anyway makes the mover ask once itself before it gives up."""
    source, target = unique_topic("dp-grow"), unique_topic("dp-grow-dst")
    create_topic(primary, source, partitions=3)
    create_topic(dr, target, partitions=1)
    records = [(p, f"k{i}".encode(), f"{p}-{i}".encode(), None, recent())
               for p in range(3) for i in range(5)]  # fmt: skip
    produce(primary, source, records)
    admin = AdminClient({"bootstrap.servers": dr})
    mover = new_mover(primary, dr)
    try:
        assert mover.know([target], 10) == {target: 1}
        mover.assign([(source, 0, 0, target)])
        move_until(mover, 5)
        assert mover.flush(30) == 0  # its producer knows the topic: 1 partition
        admin.create_partitions([NewPartitions(target, 2)])[target].result(timeout=10)
        assert mover.know([target], 10) == {target: 2}
        mover.assign([(source, 1, 0, target)])
        move_until(mover, 5)
        assert mover.flush(30) == 0
        # Grown again and not asked: the refused record makes the mover ask.
        admin.create_partitions([NewPartitions(target, 3)])[target].result(timeout=10)
        mover.assign([(source, 2, 0, target)])
        move_until(mover, 5)
        assert mover.flush(30) == 0
        through = {key: report[0] for key, report in mover.progress().items()}
        assert through == {(source, p): 4 for p in range(3)}
        missing = unique_topic("dp-grow-missing")
        with pytest.raises(_dataplane.MoverError, match=f"learning the partitions of {missing}"):
            mover.know([missing], 10)
    finally:
        mover.close()
    for partition in range(3):
        copied = read_all(dr, target, partition)
        assert [r.value for r in copied] == [f"{partition}-{i}".encode() for i in range(5)]
        assert [r.headers[-3:] for r in copied] == [provenance(source, i) for i in range(5)]


def _holds_one_each(bootstrap: str, topic: str, partitions: range) -> bool:
    """Whether each of `partitions` of `topic` holds a record; False while a partition of
    a topic just created has no leader yet (its log end cannot be read)."""
    try:
        return all(log_end(bootstrap, topic, p) >= 1 for p in partitions)
    except KafkaException:
        return False


def test_one_progress_call_tells_every_partition_delivered_since(primary: str, dr: str) -> None:
    """A worker writes hundreds of partitions, a batch each. The producer's `poll`
    serves one event a call, one partition's delivery reports: `progress` told a
    few partitions a call, and at 1,000 partitions what Python knew was written (the
    offset syncs, the checkpoint rounds' memory) trailed the target by 14 s. Once
    the target holds every record and its answers have come back, one call tells
    every partition."""
    partitions = 200
    source, target = unique_topic("dp-many"), unique_topic("dp-many-dst")
    create_topic(primary, source, partitions=partitions)
    create_topic(dr, target, partitions=partitions)
    produce(primary, source, [(p, b"k", b"v%d" % p, None, recent()) for p in range(partitions)])
    mover = new_mover(primary, dr)
    try:
        mover.assign([(source, p, 0, target) for p in range(partitions)])
        move_until(mover, partitions)
        deadline = time.monotonic() + 60
        while not _holds_one_each(dr, target, range(0, partitions, 20)):
            assert time.monotonic() < deadline, "the target never held the records"
            time.sleep(0.2)
        time.sleep(2.0)  # the target's answers reach the producer's queue
        told = mover.progress()
    finally:
        mover.close()
    delivered = {key for key, report in told.items() if report[3]}
    assert len(delivered) == partitions, f"{len(delivered)} of {partitions} told"
    assert all(told[source, p][:2] == (0, 0) for p in range(partitions))


def test_settings_are_refused_by_key_without_their_values(primary: str, dr: str) -> None:
    secret = "hunter2-" + uuid.uuid4().hex
    with pytest.raises(ValueError, match=r"no\.such\.setting") as unknown:
        _dataplane.Mover(
            {"bootstrap.servers": primary, "sasl.password": secret, "no.such.setting": secret},
            {"bootstrap.servers": dr},
            [],
        )
    assert secret not in str(unknown.value)
    with pytest.raises(ValueError, match=r"source setting enable\.auto\.commit=true") as forced:
        _dataplane.Mover(
            {"bootstrap.servers": primary, "enable.auto.commit": "true"},
            {"bootstrap.servers": dr},
            [],
        )
    assert "leave enable.auto.commit out" in str(forced.value)
    with pytest.raises(ValueError, match=r"target setting enable\.idempotence=false"):
        _dataplane.Mover(
            {"bootstrap.servers": primary},
            {"bootstrap.servers": dr, "enable.idempotence": "false"},
            [],
        )
    mover = new_mover(primary, dr, **{"sasl.password": secret})
    try:
        assert secret not in repr(mover)
    finally:
        mover.close()


def test_only_secrets_are_redacted_and_short_ones_only_as_whole_tokens(
    primary: str, dr: str
) -> None:
    """librdkafka refuses the consumer (max.poll.interval.ms below session.timeout.ms).
    Its message keeps its words although `auto.offset.reset` is "error" (not a secret)
    and the password is "err" (a secret, but short: replaced only as a whole token):
    the redaction once turned it into "Client creation ***"."""
    with pytest.raises(ValueError, match=r"max\.poll\.interval\.ms") as refused:
        _dataplane.Mover(
            {
                "bootstrap.servers": primary,
                "auto.offset.reset": "error",
                "max.poll.interval.ms": "1000",
                "sasl.password": "err",
            },
            {"bootstrap.servers": dr},
            [],
        )
    message = str(refused.value)
    assert message.startswith("source settings: Client creation error"), message
    assert "***" not in message, message


def test_the_gil_is_released_while_it_moves(primary: str, dr: str) -> None:
    """Two movers wait for records in two threads while this thread counts: with the
    GIL held, the count would stand still for the whole wait."""
    source, target = unique_topic("dp-gil"), unique_topic("dp-gil-dst")
    create_topic(primary, source)
    create_topic(dr, target)
    movers = [new_mover(primary, dr) for _ in range(2)]
    try:
        for mover in movers:
            mover.assign([(source, 0, 0, target)])
        threads = [threading.Thread(target=m.move_records, args=(10, 2.0)) for m in movers]
        for thread in threads:
            thread.start()
        time.sleep(0.2)
        count, start = 0, time.monotonic()
        while time.monotonic() - start < 1.0:
            count += 1
        assert all(thread.is_alive() for thread in threads), "they wait 2 s for records"
        assert count > 100_000, f"this thread ran {count} loops in 1 s beside the movers"
        for thread in threads:
            thread.join(10)
    finally:
        for mover in movers:
            mover.close()
