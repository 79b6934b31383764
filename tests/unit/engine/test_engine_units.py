"""The engine's decisions, without brokers: which acknowledged pairs become offset
syncs (and when, in exactly-once mode), how a source record becomes its replica,
and what the retention and oversized-record policies decide. Nothing here talks to
Kafka (the clusters below are unreachable); the same behaviour against real clusters
is tests/integration/engine/test_replication.py, test_exactly_once.py and
test_failure_policies.py."""

from __future__ import annotations

import pytest

from replicator.config.model import FlowConfig
from replicator.engine.formats import OWN_SYNC_HEADER, Checkpoint, FormatError, OffsetSync
from replicator.engine.offset_syncs import OffsetSyncWriter
from replicator.engine.retention import outside_log
from replicator.engine.size_limits import (
    RECORD_OVERHEAD,
    RESYNC_EVERY_S,
    Oversized,
    OversizedRecords,
    SizeHold,
)

from helpers.replication import flow_config

SYNCS_TOPIC = "mm2-offset-syncs.dr.internal"
KEY = ("orders", 3)


def _flow(**overrides: object) -> FlowConfig:
    return flow_config(("primary", "localhost:1"), ("dr", "localhost:2"), "orders", **overrides)


class _SourceProducer:
    """Records what is produced, as the source cluster would receive it."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, bytes]] = []
        self.flushes = 0

    def produce(
        self, topic: str, *, key: bytes, value: bytes, headers: list[tuple[str, bytes]]
    ) -> None:
        assert headers == [OWN_SYNC_HEADER]  # what tells MM2's syncs from ours
        self.sent.append((topic, key, value))

    def poll(self, timeout: float) -> int:
        return 0

    def flush(self, timeout: float) -> int:
        self.flushes += 1
        return 0

    def syncs(self) -> list[tuple[int, int]]:
        """(upstream, downstream) of every sync sent, checked to be in MM2's format."""
        pairs = []
        for topic, key, value in self.sent:
            assert topic == SYNCS_TOPIC
            sync = OffsetSync.decode(key, value)
            assert (sync.topic, sync.partition) == KEY
            pairs.append((sync.upstream, sync.downstream))
        return pairs


def _writer(offset_lag_max: int = 100, transactional: bool = False) -> tuple:
    producer = _SourceProducer()
    writer = OffsetSyncWriter(
        producer, SYNCS_TOPIC, "primary->dr", offset_lag_max, transactional=transactional
    )
    writer.track(KEY)
    writer.restart(KEY)
    return writer, producer


def _run(writer: OffsetSyncWriter, first: int, last: int, target_last: int, count=None) -> None:
    """The target acknowledged source offsets first..last, the last at `target_last`."""
    writer.acknowledged(
        KEY,
        first_source=first,
        last_source=last,
        count=last - first + 1 if count is None else count,
        target_offset=target_last,
        timestamp_ms=1_700_000_000_000,
    )


# -- offset syncs ---------------------------------------------------------------------------


def test_runs_that_continue_on_both_sides_need_no_sync_until_the_timer() -> None:
    writer, producer = _writer()
    _run(writer, 0, 9, 9)
    _run(writer, 10, 19, 19)
    assert producer.syncs() == []
    writer.emit_due(force=False)
    assert producer.syncs() == [(19, 19)]
    writer.emit_due(force=False)  # nothing moved since
    assert producer.syncs() == [(19, 19)]


def test_a_gap_in_source_offsets_publishes_the_exact_pair() -> None:
    # Offset 10 is a transaction marker: the run 11..20 is 10 records.
    writer, producer = _writer()
    _run(writer, 0, 9, 9)
    _run(writer, 11, 20, 19, count=10)
    assert producer.syncs() == [(20, 19)]


def test_records_written_by_others_on_the_target_publish_the_exact_pair() -> None:
    writer, producer = _writer()
    _run(writer, 0, 9, 9)
    _run(writer, 10, 19, 24)  # five records of someone else's sit at target 10..14
    assert producer.syncs() == [(19, 24)]


def test_a_sync_every_offset_lag_max_records_of_contiguous_runs() -> None:
    writer, producer = _writer(offset_lag_max=25)
    for first in range(0, 100, 10):
        _run(writer, first, first + 9, first + 9)
    assert producer.syncs() == [(29, 29), (59, 59), (89, 89)]


def test_the_first_run_after_a_resume_publishes_its_pair() -> None:
    writer, producer = _writer()
    _run(writer, 0, 9, 9)
    writer.restart(KEY)  # the partition resumed from the target tail
    _run(writer, 10, 19, 19)
    assert producer.syncs() == [(19, 19)]


def test_giving_a_partition_up_flushes_and_then_forgets_it() -> None:
    writer, producer = _writer()
    _run(writer, 0, 9, 9)
    writer.emit_due(force=True)
    assert producer.syncs() == [(9, 9)]
    assert producer.flushes == 1
    writer.forget(KEY)
    writer.emit_due(force=False)
    assert producer.syncs() == [(9, 9)]


def test_exactly_once_holds_syncs_until_the_transaction_commits() -> None:
    writer, producer = _writer(transactional=True)
    _run(writer, 0, 9, 9)
    _run(writer, 11, 20, 20, count=10)  # a marker at 10 (source) and 10 (target)
    assert producer.syncs() == []
    writer.committed(KEY)
    assert producer.syncs() == [(20, 20)]
    writer.committed(KEY)  # published once
    assert producer.syncs() == [(20, 20)]


def test_exactly_once_drops_the_syncs_of_a_transaction_rolled_back() -> None:
    writer, producer = _writer(transactional=True)
    _run(writer, 5, 9, 9)
    writer.rolled_back(KEY)
    writer.committed(KEY)
    assert producer.syncs() == []


def test_exactly_once_the_timer_syncs_only_committed_records() -> None:
    writer, producer = _writer(transactional=True)
    _run(writer, 0, 9, 9)
    writer.committed(KEY)
    writer.emit_due(force=False)
    _run(writer, 10, 19, 19)  # contiguous, in the next transaction, not committed yet
    writer.emit_due(force=False)
    assert producer.syncs() == [(9, 9)]  # not (19, 19): its transaction is still open
    writer.committed(KEY)
    writer.emit_due(force=False)
    assert producer.syncs() == [(9, 9), (19, 19)]


def test_exactly_once_the_timer_never_points_at_a_rolled_back_record() -> None:
    writer, producer = _writer(transactional=True)
    _run(writer, 0, 9, 9)
    writer.committed(KEY)
    writer.emit_due(force=False)
    _run(writer, 10, 19, 19)
    writer.rolled_back(KEY)  # records 10..19 are aborted on the target
    writer.emit_due(force=True)
    assert producer.syncs() == [(9, 9)]


# -- retention and oversized-record policies ------------------------------------------------


def _outside(flow: FlowConfig, position: int):
    return outside_log(flow, "orders", 3, "primary.orders", position=position, low=100, high=200)


def test_a_resume_point_inside_the_source_log_needs_no_policy() -> None:
    assert _outside(_flow(), 100) is None
    assert _outside(_flow(), 200) is None


def test_a_resume_point_below_the_log_start_is_a_retention_gap() -> None:
    stop = _outside(_flow(), 40)
    assert (stop.setting, stop.skip, stop.lost, stop.new_position) == (
        "retention.gap.policy",
        False,
        60,
        100,
    )
    assert "offsets 40..99 (60 records) were deleted" in stop.stop_message
    assert "retention.gap.policy=fail" in stop.stop_message
    assert _outside(_flow(retention_gap_policy="skip"), 40).skip


def test_a_resume_point_beyond_the_log_end_is_a_topic_reset() -> None:
    stop = _outside(_flow(), 250)
    assert (stop.setting, stop.skip, stop.lost, stop.new_position) == (
        "topic.reset.policy",
        False,
        0,
        100,
    )
    assert "delete it on 'dr'" in stop.fix
    assert _outside(_flow(topic_reset_policy="skip"), 250).skip


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _verdict(records: OversizedRecords, hold: SizeHold, offset: int = 7):
    return records.verdict("orders", 3, "primary.orders", hold, offset=offset, size=5_000)


def test_an_oversized_record_waits_for_one_config_sync_of_its_topic_first() -> None:
    clock = _Clock()
    records = OversizedRecords(_flow(), clock)
    hold = SizeHold(limit=1_000)
    assert _verdict(records, hold).action is Oversized.HOLD
    assert (hold.held, hold.resynced_at) == (True, 7)
    records.resynced(["orders"])
    hold.held = False
    # Still too large after the sync: the policy applies (fail by default).
    stop = _verdict(records, hold)
    assert stop.action is Oversized.STOP
    assert f"max.message.bytes={1_000 + RECORD_OVERHEAD}" in stop.message
    assert "oversized.record.policy=skip" in stop.message
    # Another oversized record of the topic within RESYNC_EVERY_S: no sync again.
    assert _verdict(records, hold, offset=8).action is Oversized.STOP
    clock.now += RESYNC_EVERY_S
    assert _verdict(records, hold, offset=9).action is Oversized.HOLD


def test_without_config_sync_the_policy_applies_at_once() -> None:
    records = OversizedRecords(_flow(sync_topic_configs_enabled=False), _Clock())
    stop = _verdict(records, SizeHold(limit=1_000))
    assert stop.action is Oversized.STOP
    assert "set sync.topic.configs.enabled=true" in stop.message
    skipping = OversizedRecords(
        _flow(sync_topic_configs_enabled=False, oversized_record_policy="skip"), _Clock()
    )
    assert _verdict(skipping, SizeHold(limit=1_000)).action is Oversized.SKIP


def test_a_checkpoint_key_reads_back_and_a_malformed_one_says_why() -> None:
    checkpoint = Checkpoint("app-é", "primary.orders", 7, 10, 12, "meta")
    assert Checkpoint.decode_key(checkpoint.key()) == ("app-é", "primary.orders", 7)
    assert Checkpoint.decode(checkpoint.key(), checkpoint.value()) == checkpoint
    assert Checkpoint.decode_key(b"\x00\x00\x00\x00\x00\x00\x00\x01") == ("", "", 1)
    for broken in (b"", b"\x00\x05app", checkpoint.key()[:-1], b"\x7f\xff" + b"g" * 10):
        with pytest.raises(FormatError, match="checkpoint key: truncated at byte"):
            Checkpoint.decode_key(broken)
