"""The per-second metrics of a worker's partitions (`TaskReporter.publish_metrics`):
each series (a topic's, by default) gets its partitions' figures summed and its
metrics set once, with the metric children looked up once per series."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import TopicPartition
from prometheus_client import REGISTRY

from replicator import metrics
from replicator.engine.reporting import TaskReporter

from helpers.engine_fakes import tracker


class _Watermarks:
    """Every partition's high watermark is 100, and its position is where it stands."""

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float = -1, cached: bool = False
    ) -> tuple[int, int]:
        return -1001, 100

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, -1001) for tp in partitions]


def _sample(name: str, flow: str, topic: str) -> float | None:
    return REGISTRY.get_sample_value(name, {"flow": flow, "topic": topic, "partition": ""})


def test_a_topics_partitions_are_summed_into_its_series_looked_up_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    flow = f"flow-{uuid.uuid4().hex[:8]}"
    reporter = TaskReporter(flow, "w", 0)
    reporter.read_lag_with(_Watermarks())
    partitions = [tracker(p, topic="orders", next_offset=60) for p in range(4)]
    for made in partitions:
        made.flow = flow
        made.counters.replicated, made.counters.replicated_bytes = 10, 1_000
        made.counters.acked_timestamp_ms = 1_700_000_000_000
    looked_up: list[tuple[str, ...]] = []
    real = metrics.RECORDS.labels
    monkeypatch.setattr(
        metrics.RECORDS, "labels", lambda *values: looked_up.append(values) or real(*values)
    )

    reporter.publish_metrics(partitions)
    assert _sample("replicator_replicated_records_total", flow, "orders") == 40
    assert _sample("replicator_lag_records", flow, "orders") == 4 * 40
    for made in partitions:
        made.counters.replicated += 5
    reporter.publish_metrics(partitions)
    assert _sample("replicator_replicated_records_total", flow, "orders") == 60
    assert len(looked_up) == 1, "one lookup for the topic's series, not one a partition"


def test_a_series_removed_and_published_again_is_set_anew() -> None:
    flow = f"flow-{uuid.uuid4().hex[:8]}"
    reporter = TaskReporter(flow, "w", 0)
    reporter.read_lag_with(_Watermarks())
    orders = tracker(0, topic="orders", next_offset=70)
    orders.flow = flow
    reporter.publish_metrics([orders])
    assert _sample("replicator_lag_records", flow, "orders") == 30
    reporter.publish_metrics([])  # revoked: its series goes
    assert _sample("replicator_lag_records", flow, "orders") is None
    reporter.publish_metrics([orders])  # assigned again
    assert _sample("replicator_lag_records", flow, "orders") == 30


def test_records_sent_and_not_acknowledged_are_lag_asked_once_a_publish() -> None:
    # The Python loop sent each partition's records through 59 (its next offset 60);
    # the target acknowledged through 49 on one, everything on the other.
    flow = f"flow-{uuid.uuid4().hex[:8]}"
    asked: list[int] = []

    def in_flight() -> set[tuple[str, int]]:
        asked.append(1)
        return {("orders", 0)}

    reporter = TaskReporter(flow, "w", 0)
    reporter.read_lag_with(_Watermarks(), in_flight)
    sending, done = (tracker(p, topic="orders", next_offset=60) for p in range(2))
    sending.acked_next, done.acked_next = 50, 60
    for made in (sending, done):
        made.flow = flow
    reporter.publish_metrics([sending, done])
    assert _sample("replicator_lag_records", flow, "orders") == 50 + 40
    assert len(asked) == 1, "the writer is asked once a publish, not once a partition"
    assert (reporter.lag(sending), reporter.lag(done)) == (50, 40)
