"""The task's start (`ReplicationTask._prepare`): it joins the source group before it
makes the remote topics, so the group's join (on a group with no member the broker
waits `group.initial.rebalance.delay.ms`, 3 s by default) goes on while the target
creates them; a start that fails leaves the group at once. The brokers' side (every
test that runs a flow) is in the integration tests."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import TopicPartition

from replicator.engine import task

from helpers.replication import flow_config


class _Consumer:
    def __init__(self, events: list[str]) -> None:
        self.events = events
        self.callbacks: dict[str, Any] = {}

    def subscribe(self, topics: list[str], **callbacks: Any) -> None:
        self.events.append(f"subscribe {','.join(topics)}")
        self.callbacks = callbacks

    def close(self) -> None:
        self.events.append("close")


class _Topics:
    """The replicated topics; the target refuses to make their remote topics."""

    def __init__(self, events: list[str]) -> None:
        self.events = events

    def find(self) -> list[str]:
        self.events.append("find")
        return self.names()

    def names(self) -> list[str]:
        return ["orders"]

    def make_remotes(self) -> dict[str, int]:
        self.events.append("make remote topics")
        raise RuntimeError("the target refused")


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> tuple[task.ReplicationTask, list[str]]:
    events: list[str] = []
    monkeypatch.setattr(task, "Consumer", lambda _config: _Consumer(events))
    monkeypatch.setattr(task, "written_by", lambda _flow, _who: [])
    flow = flow_config(("src", "127.0.0.1:1"), ("dst", "127.0.0.1:2"), "orders")
    replication = task.ReplicationTask(flow)
    replication._topics = _Topics(events)  # type: ignore[assignment]
    return replication, events


def test_the_group_is_joined_before_the_remote_topics_are_made(
    started: tuple[task.ReplicationTask, list[str]],
) -> None:
    replication, events = started
    with pytest.raises(RuntimeError, match="the target refused"):
        replication._prepare()
    # ... and a start that failed leaves the group, its share going to the others.
    assert events == ["find", "subscribe orders", "make remote topics", "close"]


def test_the_groups_callbacks_before_the_parts_are_made_leave_it_to_librdkafka(
    started: tuple[task.ReplicationTask, list[str]],
) -> None:
    """Only the consumer's close can serve them then (the loop polls once the parts
    are made); confluent-kafka assigns and unassigns itself when a callback did not."""
    replication, _ = started
    consumer = _Consumer([])
    replication._subscribe(consumer)  # type: ignore[arg-type]
    for event in ("on_assign", "on_revoke", "on_lost"):
        consumer.callbacks[event](consumer, [TopicPartition("orders", 0)])
    assert replication._parts is None
