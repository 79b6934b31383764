"""The same source copied by the Python engine as it runs today (a `ReplicationTask`,
`helpers.replication.running`) and by the compiled data plane's Mover driven
directly, the two targets compared byte for byte: keys, values, headers (ours
included: both write the same), timestamps and their types, partitions, offsets and
order; and both compared with the source.

The source has every awkward shape: null and empty keys and values, records with
their own headers (duplicate names, null and empty values), 1 MiB values (topic
max.message.bytes raised), a transactional producer's committed and aborted
transactions, a compacted topic whose overwritten keys the cleaner has removed (gaps
in the offsets), and CreateTime and LogAppendTime topics. A LogAppendTime source is
copied twice: into the remote topic topic sync makes (CreateTime, as MM2 makes it:
`message.timestamp.type` is in MM2's config exclusions), and into a remote topic
created as LogAppendTime beforehand. In that last one the target broker stamps each
replica as it is written, so the two copies' timestamps are their own write times:
there, and only there, timestamps are compared by type (and as not earlier than the
source's) instead of by value (docs/dataplane.md, "Equivalence").
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import replace

from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource
from test_dataplane_mover import (
    MIB,
    OURS,
    Read,
    _dataplane,
    awkward,
    produce,
    provenance,
    read_all,
    transactional_batches,
)

from helpers.kafka import create_topic
from helpers.replication import end_offsets, flow_config, running, wait_until

BIG = {"max.message.bytes": str(3 * MIB)}
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.ms": "100",
    "min.cleanable.dirty.ratio": "0.01",
    "min.compaction.lag.ms": "0",
}
APPEND_TIME = {"message.timestamp.type": "LogAppendTime"}


def compacted_records(base: int) -> list[tuple]:
    """Keys k0..k9 written three times (the cleaner keeps the last of each), with own
    headers on some."""
    return [
        (0, b"k%d" % (i % 10), b"round %d of k%d" % (i // 10, i % 10),
         [("round", b"%d" % (i // 10))] if i % 3 == 0 else None, base + i)
        for i in range(30)
    ]  # fmt: skip


#: Produced after the others: its timestamp is past segment.ms, so its batch starts a
#: new segment and the first one can be cleaned.
ROLL = (0, b"roll", b"rolls the segment", None)


def appended(base: int) -> list[tuple]:
    return [
        (0, b"a", b"first", None, base),
        (0, None, b"no key", [("h", b"1"), ("h", None)], base + 1),
        (0, b"c", None, None, base + 2),
    ]


def non_default_configs(bootstrap: str, topic: str) -> dict[str, str]:
    """The topic's dynamic configs, as topic sync set them."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(timeout=30)
    return {
        name: entry.value
        for name, entry in entries.items()
        if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value and entry.value is not None
    }


def copied(
    expected: dict[tuple[str, int], list[Read]], target: Callable[[str], str], dr: str
) -> Callable[[], bool]:
    """Whether every partition's copy on `dr` has as many records as the source (its
    end offset: both writers are idempotent, not transactional, so the copy's offsets
    are contiguous from 0)."""

    def check() -> bool:
        return all(
            (end_offsets(dr, target(topic), p + 1) or [-1])[p] == len(records)
            for (topic, p), records in expected.items()
        )

    return check


def test_the_mover_and_the_python_engine_make_the_same_copy(primary: str, dr: str) -> None:
    run = uuid.uuid4().hex[:8]
    awkward_t, compacted_t = f"eq{run}-awkward", f"eq{run}-compacted"
    lat_t, lat_to_lat_t = f"eq{run}-appendtime", f"eq{run}-appendtime-kept"
    create_topic(primary, awkward_t, partitions=2, config=BIG)
    create_topic(primary, compacted_t, config=COMPACTED)
    create_topic(primary, lat_t, config=APPEND_TIME)
    create_topic(primary, lat_to_lat_t, config=APPEND_TIME)
    # The engine keeps a remote topic's message.timestamp.type (MM2's exclusions):
    # this one is LogAppendTime on the target too.
    create_topic(dr, f"primary.{lat_to_lat_t}", config=APPEND_TIME)

    base = int(time.time() * 1000) - 100_000
    produce(primary, awkward_t, awkward(base), **{"message.max.bytes": str(3 * MIB)})
    transactional_batches(primary, awkward_t, base)
    produce(primary, awkward_t, [(0, b"last", b"after the transactions", None, base + 5000)])
    produce(primary, compacted_t, compacted_records(base))
    produce(primary, compacted_t, [(*ROLL, base + 10_000)])
    produce(primary, lat_t, appended(base))
    produce(primary, lat_to_lat_t, appended(base))

    topics = {awkward_t: 2, compacted_t: 1, lat_t: 1, lat_to_lat_t: 1}
    compacted_now: list[Read] = []

    def cleaned() -> bool:
        compacted_now[:] = read_all(primary, compacted_t, 0)
        return len(compacted_now) == 11

    wait_until(cleaned, 120, f"the cleaner to compact {compacted_t} (31 records to 11)")
    assert [r.offset for r in compacted_now] == [*range(20, 30), 30]
    expected = {(t, p): read_all(primary, t, p) for t, n in topics.items() for p in range(n)}
    assert not any(b"ABORTED" in (r.value or b"") for r in expected[(awkward_t, 0)])
    assert {r.timestamp_type for t in (lat_t, lat_to_lat_t) for r in expected[(t, 0)]} == {2}

    # (a) The Python engine, as `replicator run` runs it.
    flow = flow_config(("primary", primary), ("dr", dr), f"eq{run}-.*")
    with running(flow):
        wait_until(copied(expected, lambda t: f"primary.{t}", dr), 180, "the engine's copy")

    # (b) The Mover, into topics made like the engine's remote topics.
    for topic, partitions in topics.items():
        configs = non_default_configs(dr, f"primary.{topic}")
        create_topic(dr, f"mover.{topic}", partitions=partitions, config=configs)
    mover = _dataplane.Mover(
        {"bootstrap.servers": primary, "auto.offset.reset": "error"},
        {"bootstrap.servers": dr, "linger.ms": "5", "message.max.bytes": str(3 * MIB)},
        [("__dr_src", b"primary")],
        offset_header="__dr_off",
        topic_header="__dr_topic",
        reserved_headers=OURS,
    )
    try:
        mover.assign([(t, p, -2, f"mover.{t}") for t, p in expected])
        total, moved = sum(len(r) for r in expected.values()), 0
        deadline = time.monotonic() + 120
        while moved < total:
            assert time.monotonic() < deadline, f"{moved} of {total} moved"
            n, handed = mover.move_records(10_000, 0.2)
            assert handed == [], handed
            moved += n
        assert mover.flush(30) == 0
    finally:
        mover.close()
    wait_until(copied(expected, lambda t: f"mover.{t}", dr), 60, "the mover's copy")

    for (topic, partition), source in expected.items():
        engine = read_all(dr, f"primary.{topic}", partition)
        ours = read_all(dr, f"mover.{topic}", partition)
        where = f"{topic}[{partition}]"
        want = [r.headers + provenance(topic, r.offset) for r in source]
        assert [r.headers for r in engine] == want, where
        assert [(r.key, r.value) for r in engine] == [(r.key, r.value) for r in source], where
        assert [r.offset for r in engine] == list(range(len(source))), where
        if topic == lat_to_lat_t:
            # Stamped by the target broker as each copy was written.
            for copy in (engine, ours):
                assert {r.timestamp_type for r in copy} == {2}, where
                assert all(c.timestamp >= s.timestamp for c, s in zip(copy, source, strict=True))
            engine = [replace(r, timestamp=0) for r in engine]
            ours = [replace(r, timestamp=0) for r in ours]
        else:
            # CreateTime replicas carrying the source's timestamp (LogAppendTime ones
            # too: the time the source broker stamped).
            assert [(r.timestamp_type, r.timestamp) for r in engine] == [
                (1, r.timestamp) for r in source
            ], where
        assert ours == engine, where
