"""The replicated topics alone (`replicator.engine.replicated_topics`): the topic map
loaded, refreshed and synced through a stand-in for `TopicSync` that answers (or
fails) as told; what each sync returns is the remote topics' max.message.bytes."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from replicator.engine.replicated_topics import ReplicatedTopics
from replicator.engine.topic_sync import SyncReport
from replicator.errors import ConfigError

from helpers.engine_fakes import flow, tracker


class _TopicSync:
    """Answers with `topics` and `limits`, or raises `error`; notes each sync."""

    def __init__(self) -> None:
        self.topics = {"orders": 2}
        self.limits = {"primary.orders": 1_000_000}
        self.error: Exception | None = None
        self.synced: list[tuple[str, dict[str, int]]] = []

    def replicated_topics(self) -> dict[str, int]:
        if self.error is not None:
            raise self.error
        return dict(self.topics)

    def sync(self, topics: dict[str, int], sync_configs: bool = True) -> SyncReport:
        self.synced.append(("sync" if sync_configs else "sync-no-configs", dict(topics)))
        return SyncReport(max_message_bytes=dict(self.limits))

    def sync_configs(self, topics: dict[str, int]) -> SyncReport:
        if self.error is not None:
            raise self.error
        self.synced.append(("configs", dict(topics)))
        return SyncReport(max_message_bytes=dict(self.limits))


@pytest.fixture
def sync() -> _TopicSync:
    return _TopicSync()


@pytest.fixture
def topics(sync: _TopicSync) -> ReplicatedTopics:
    made = ReplicatedTopics(flow(), sync)  # type: ignore[arg-type]
    assert made.load() == {"primary.orders": 1_000_000}
    return made


def test_load_syncs_every_replicated_topic(topics: ReplicatedTopics, sync: _TopicSync) -> None:
    assert topics.topics == {"orders": 2} and topics.names() == ["orders"]
    assert sync.synced == [("sync", {"orders": 2})]


def test_a_refresh_picks_up_new_topics_and_partitions(
    topics: ReplicatedTopics, sync: _TopicSync
) -> None:
    assert topics.refresh(sync_configs=False) == ({"primary.orders": 1_000_000}, False)
    sync.topics = {"orders": 4, "payments": 1}
    limits, changed = topics.refresh(sync_configs=False)
    assert changed and limits == {"primary.orders": 1_000_000}
    assert topics.names() == ["orders", "payments"]
    assert sync.synced[-1] == ("sync-no-configs", {"orders": 4, "payments": 1})


def test_a_cluster_that_does_not_answer_puts_the_refresh_off(
    topics: ReplicatedTopics, sync: _TopicSync, caplog: pytest.LogCaptureFixture
) -> None:
    sync.error = KafkaException(KafkaError(KafkaError._TRANSPORT, "primary is away"))
    assert topics.refresh(sync_configs=False) == (None, False)
    assert topics.sync_configs() is None
    assert topics.topics == {"orders": 2}
    assert "topics not refreshed this time (primary is away)" in caplog.text
    assert "topic configs not synced this time" in caplog.text


def test_a_configuration_error_is_not_put_off(topics: ReplicatedTopics, sync: _TopicSync) -> None:
    sync.error = ConfigError("topics: bad pattern; fix the regex")
    with pytest.raises(ConfigError, match="fix the regex"):
        topics.refresh(sync_configs=False)


def test_partitions_assigned_before_the_map_knew_them_get_remote_topics(
    topics: ReplicatedTopics, sync: _TopicSync
) -> None:
    assert topics.add_missing([tracker(1)]) is None  # known: nothing to make
    made = topics.add_missing([tracker(1), tracker(0, topic="payments")])
    assert made == {"primary.orders": 1_000_000}
    assert sync.synced[-1] == ("sync", {"payments": 1})
    assert topics.topics == {"orders": 2, "payments": 1}
    assert topics.counts([tracker(0), tracker(0, topic="audit")]) == {"orders": 2, "audit": 1}


def test_partitions_added_to_a_known_topic_grow_its_remote_topic(
    topics: ReplicatedTopics, sync: _TopicSync
) -> None:
    # orders has 2 partitions; 4 and 5 were added and assigned before the refresh saw them.
    topics.add_missing([tracker(5), tracker(0), tracker(4)])
    assert sync.synced[-1] == ("sync", {"orders": 6})
    assert topics.topics["orders"] == 6
    assert topics.counts([tracker(3)]) == {"orders": 6}


def test_a_new_topic_gets_as_many_partitions_as_its_highest_assigned_one(
    topics: ReplicatedTopics, sync: _TopicSync
) -> None:
    topics.add_missing([tracker(2, topic="payments"), tracker(0, topic="payments")])
    assert sync.synced[-1] == ("sync", {"payments": 3})
    assert topics.counts([tracker(1, topic="audit"), tracker(0, topic="audit")]) == {"audit": 2}
