"""The runs in flight alone (`replicator.engine.deliveries`): what a run's one delivery
report acknowledges, and what it never does (past a gap, for a partition rewound or
revoked meanwhile), and what a failed delivery leads to. Reports are called by hand
with the outcome a producer would give; the partitions are the real part over a
fake consumer."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, Message

from replicator.engine.deliveries import Deliveries
from replicator.engine.partitions import Partitions

from helpers.engine_fakes import FakeConsumer, FakeReporter, FakeSyncs, flow, tracker


class _Runs:
    def __init__(self, **properties: str) -> None:
        self.flow = flow(**properties)
        self.consumer = FakeConsumer()
        self.syncs = FakeSyncs()
        self.partitions = Partitions(self.flow.name, self.consumer, self.syncs, FakeReporter())  # type: ignore[arg-type]
        self.rewound: list[str] = []
        self.refused: list[tuple[str, bool]] = []
        self.deliveries = Deliveries(
            self.flow,
            self.partitions,
            self.syncs,  # type: ignore[arg-type]
            rewind_all=self.rewound.append,
            refused=lambda message, access: self.refused.append((message, access)),
        )
        self.one = tracker(0, next_offset=10)
        self.partitions.add(self.one)
        self.deliveries.resumed_at(self.one, 500)

    def report(self, first: int, last: int, count: int) -> Any:
        report = self.deliveries.run(self.one, first, last, count)
        self.deliveries.sent(report)
        return report


def _landed(offset: int) -> Message:
    return Message(topic="primary.orders", partition=0, offset=offset, timestamp=(1, 7))


@pytest.fixture
def runs() -> _Runs:
    return _Runs()


def test_a_whole_run_is_acknowledged_and_the_next_is_checked_against_it(runs: _Runs) -> None:
    runs.report(10, 12, 3)(None, _landed(502))
    runs.report(13, 13, 1)(None, _landed(504))  # a transaction marker may come between
    assert [(r["first_source"], r["target_offset"]) for r in runs.syncs.acknowledged_runs] == [
        (10, 502),
        (13, 504),
    ]
    assert runs.one.counters.replicated == 4 and runs.one.acked_next == 14
    assert runs.deliveries.in_flight() == set()


def test_a_run_whose_last_replica_landed_too_close_is_never_acknowledged(runs: _Runs) -> None:
    runs.report(10, 12, 3)(None, _landed(501))  # 3 replicas cannot end at 501 from 500
    assert runs.syncs.acknowledged_runs == []
    assert runs.one.stopped is not None
    assert "orders[0] offsets 10..12" in runs.one.stopped and "1 or more did not land" in (
        runs.one.stopped
    )
    assert runs.consumer.paused() == [("orders", 0)]


def test_reports_of_a_rewound_or_revoked_partition_are_stale(runs: _Runs) -> None:
    report = runs.report(10, 12, 3)
    runs.partitions.rewind(runs.one)
    report(None, _landed(502))
    assert runs.syncs.acknowledged_runs == []

    again = tracker(0, next_offset=10)
    runs.partitions.add(again)  # the partition came back: a tracker of its own
    old = runs.deliveries.run(runs.one, 10, 10, 1)
    old(None, _landed(500))
    assert runs.syncs.acknowledged_runs == []


def test_records_the_target_did_not_take_rewind_every_partition(runs: _Runs) -> None:
    runs.report(10, 12, 3)(KafkaError(KafkaError._MSG_TIMED_OUT, "timed out"), _landed(-1))
    assert runs.rewound == ["orders[0] offsets 10..12 did not reach 'dr' (timed out)"]
    assert runs.refused == []


def test_records_the_target_rejects_stop_the_flow_naming_the_missing_grant(runs: _Runs) -> None:
    error = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "not authorized")
    runs.report(10, 12, 3)(error, _landed(-1))
    [(message, access)] = runs.refused
    assert access and "WRITE" in message and "primary.orders" in message
    assert runs.rewound == []


def test_in_exactly_once_mode_a_rejection_stops_only_its_partition() -> None:
    runs = _Runs(**{"exactly.once": "true"})
    other = tracker(1)
    runs.partitions.add(other)
    runs.report(10, 12, 3)(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "too large"), _landed(-1))
    assert runs.one.stopped is not None and other.stopped is None
    assert runs.refused == [] and runs.rewound == []
    # Not delivered for any other reason: the transaction's outcome settles it.
    runs.report(13, 13, 1)(KafkaError(KafkaError._MSG_TIMED_OUT, "timed out"), _landed(-1))
    assert runs.rewound == []


def test_a_run_past_the_deadline_rewinds(runs: _Runs) -> None:
    runs.report(10, 12, 3)
    runs.deliveries.check_deadline(None)  # message.timeout.ms=0: no deadline
    assert runs.rewound == []
    runs.deliveries.check_deadline(0.0)
    assert len(runs.rewound) == 1 and "unacknowledged by 'dr'" in runs.rewound[0]
