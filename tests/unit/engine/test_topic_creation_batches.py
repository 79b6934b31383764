"""Remote topics are created in requests of at most `CREATE_PARTITIONS_PER_REQUEST`
partitions and `CREATE_RECORDS_PER_REQUEST` records (issue 41): a KRaft controller refuses
a CreateTopics request of more than 10,000 records as a whole ("Unable to perform
excessively large batch operation"), which is what MirrorMaker 2 met at 2,500 topics x 4
partitions, retrying forever."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic

from replicator.engine import topic_sync
from replicator.engine.topic_sync import (
    COORDINATORS_WAIT_S,
    CREATE_PARTITIONS_PER_REQUEST,
    CREATE_RECORDS_PER_REQUEST,
    OFFSETS_TOPIC,
    TopicSync,
    _batches,
)
from replicator.errors import ReplicatorError

from helpers.replication import flow_config


def test_an_estate_of_topics_is_created_in_requests_the_controller_accepts() -> None:
    topics = [NewTopic(f"src.estate-{i:05d}", 4) for i in range(2_501)]
    batches = _batches(topics)
    assert [t.topic for batch in batches for t in batch] == [t.topic for t in topics]
    sizes = [sum(t.num_partitions for t in batch) for batch in batches]
    assert sizes == [4_000, 4_000, 2_004]
    assert max(sizes) + len(batches[0]) < 10_000  # a record per partition and per topic


def test_topics_of_one_partition_with_configs_stay_under_the_controllers_records() -> None:
    """Each topic is a record, each partition one, each config entry one: 4,000 topics of
    one partition and three configs are 20,000 records, which the controller refuses."""
    config = {"cleanup.policy": "compact", "retention.ms": "-1", "segment.bytes": "16777216"}
    topics = [NewTopic(f"src.t-{i:05d}", 1, config=config) for i in range(4_000)]
    batches = _batches(topics)
    assert [t.topic for batch in batches for t in batch] == [t.topic for t in topics]
    records = [sum(2 + len(config) for _ in batch) for batch in batches]
    assert max(records) <= CREATE_RECORDS_PER_REQUEST < 10_000
    assert len(batches) == 3  # 1,800 topics a request


def test_a_topic_larger_than_a_request_goes_alone() -> None:
    topics = [NewTopic("small", 10), NewTopic("huge", CREATE_PARTITIONS_PER_REQUEST + 1)]
    assert [[t.topic for t in batch] for batch in _batches(topics)] == [["small"], ["huge"]]


class _FreshTarget:
    """An admin of a target that has no offsets topic until it is asked for a group
    coordinator, and lists it `after` looks at its metadata from then on."""

    def __init__(self, after: int | None) -> None:
        self.after = after
        self.calls: list[str] = []
        self.asked = threading.Event()  # set: the question ends

    def ask_coordinator(self, _cluster: object, group: str, timeout_s: float) -> None:
        """`replicator.kafka.coordinator.ask_coordinator`: the cluster asked about `group`,
        and no answer comes for as long as the caller waits (it runs in a thread)."""
        self.calls.append("ask")
        self.asked.wait(timeout_s)

    def list_topics(self, **_: object) -> SimpleNamespace:
        self.calls.append("list")
        looks = self.calls.count("list")
        ready = "ask" in self.calls and self.after is not None and looks >= self.after
        return SimpleNamespace(topics={OFFSETS_TOPIC: object()} if ready else {})


def _topic_sync(admin: _FreshTarget, monkeypatch: pytest.MonkeyPatch) -> TopicSync:
    """A topic sync whose clients are `admin` (no client connects anywhere)."""
    monkeypatch.setattr(topic_sync, "admin_for", lambda _cluster: admin)
    monkeypatch.setattr(topic_sync, "ask_coordinator", admin.ask_coordinator)
    flow = flow_config(("src", "127.0.0.1:1"), ("dst", "127.0.0.1:2"), "estate-.*")
    return TopicSync(flow)


def test_the_partitions_are_created_once_the_offsets_topic_is_ahead_of_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fresh target creates its offsets topic when first asked for a coordinator:
    the creation of thousands of partitions waits for that topic to be in its
    metadata (so it is created first), not for the coordinator's answer (a second
    on a fresh target)."""
    admin = _FreshTarget(after=3)
    began = time.monotonic()
    _topic_sync(admin, monkeypatch)._coordinators_first()
    admin.asked.set()
    assert admin.calls == ["ask", "list", "list", "list"]
    assert time.monotonic() - began < COORDINATORS_WAIT_S / 2


def test_a_target_that_creates_no_offsets_topic_is_waited_for_a_second_at_most(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    admin = _FreshTarget(after=None)
    began = time.monotonic()
    _topic_sync(admin, monkeypatch)._coordinators_first()
    admin.asked.set()
    assert COORDINATORS_WAIT_S <= time.monotonic() - began < COORDINATORS_WAIT_S + 0.5


class _Cluster:
    """An admin client of one cluster holding `topics` (name -> max.message.bytes),
    recording which topics' configs were described; a topic named in `raced` is
    created by someone else just before this client asks."""

    def __init__(self, topics: dict[str, int], raced: frozenset[str] = frozenset()) -> None:
        self.topics = dict(topics)
        self.raced = raced
        self.described: list[str] = []

    def list_topics(self, **_: object) -> SimpleNamespace:
        leader = SimpleNamespace(leader=1)
        return SimpleNamespace(
            topics={t: SimpleNamespace(error=None, partitions={0: leader}) for t in self.topics}
        )

    def describe_configs(self, resources: list[object], **_: object) -> dict[object, Future]:
        answers: dict[object, Future] = {}
        for resource in resources:
            name = resource.name  # type: ignore[attr-defined]
            self.described.append(name)
            entry = SimpleNamespace(value=str(self.topics[name]), source=5)  # the default
            answers[resource] = _done({topic_sync.MAX_MESSAGE_BYTES: entry})
        return answers

    def incremental_alter_configs(self, resources: list[object]) -> dict[object, Future]:
        return {resource: _done(None) for resource in resources}  # not what is measured

    def create_topics(self, new: list[NewTopic], **_: object) -> dict[str, Future]:
        answers: dict[str, Future] = {}
        for topic in new:
            if topic.topic in self.raced:
                self.topics[topic.topic] = 999  # the other creator's setting
                answers[topic.topic] = _failed(KafkaError.TOPIC_ALREADY_EXISTS)
                continue
            self.topics[topic.topic] = int((topic.config or {})[topic_sync.MAX_MESSAGE_BYTES])
            answers[topic.topic] = _done(None)
        return answers


def _done(value: object) -> Future:
    future: Future = Future()
    future.set_result(value)
    return future


def _failed(code: int) -> Future:
    future: Future = Future()
    future.set_exception(KafkaException(KafkaError(code)))
    return future


def test_the_limits_of_topics_created_now_are_known_without_describing_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A remote topic created with max.message.bytes has exactly that: at 1,250 topics
    describing them again right after took 1.1 s of the start. The topics that were
    there, and one another worker created first, are described."""
    source = _Cluster({"estate-0": 1000, "estate-1": 2000, "estate-2": 3000})
    target = _Cluster({"src.estate-0": 5000}, raced=frozenset({"src.estate-2"}))
    admins = iter([source, target])
    monkeypatch.setattr(topic_sync, "admin_for", lambda _cluster: next(admins))
    sync = TopicSync(flow_config(("src", "127.0.0.1:1"), ("dst", "127.0.0.1:2"), "estate-.*"))
    report = sync.sync({"estate-0": 1, "estate-1": 1, "estate-2": 1})
    headroom = topic_sync.HEADER_HEADROOM_BYTES
    assert report.max_message_bytes == {
        "src.estate-0": 5000,
        "src.estate-1": 2000 + headroom,
        "src.estate-2": 999,
    }
    # The topic that was there: for its configs' sync, then for its limit.
    assert sorted(target.described) == ["src.estate-0", "src.estate-0", "src.estate-2"]


def test_the_remote_topics_created_are_one_line_a_request(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    source = _Cluster({f"estate-{i:04d}": 1000 for i in range(1_250)})
    target = _Cluster({})
    admins = iter([source, target])
    monkeypatch.setattr(topic_sync, "admin_for", lambda _cluster: next(admins))
    monkeypatch.setattr(TopicSync, "_coordinators_first", lambda self: None)
    sync = TopicSync(flow_config(("src", "127.0.0.1:1"), ("dst", "127.0.0.1:2"), "estate-.*"))
    with caplog.at_level(logging.INFO, logger=topic_sync.__name__):
        sync.sync({f"estate-{i:04d}": 4 for i in range(1_250)})
    lines = [r.getMessage() for r in caplog.records if "created" in r.getMessage()]
    assert lines == [  # two requests of 4,000 partitions and one of the rest
        "created 1,000 remote topics (4,000 partitions) on dst: src.estate-0000, "
        "src.estate-0001, src.estate-0002, src.estate-0003, src.estate-0004 and 995 more topics",
        "created 250 remote topics (1,000 partitions) on dst: src.estate-1000, "
        "src.estate-1001, src.estate-1002, src.estate-1003, src.estate-1004 and 245 more topics",
    ]


def test_a_refusal_still_says_which_topics_were_created(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The request's topics before the refused one were created: the line says so
    before the error names the refused topic."""
    target = _Cluster({})
    answers = {
        "src.a": _done(None),
        "src.b": _failed(KafkaError.POLICY_VIOLATION),
        "src.c": _done(None),
    }
    monkeypatch.setattr(target, "create_topics", lambda _new, **_: answers, raising=False)
    monkeypatch.setattr(topic_sync, "admin_for", lambda _cluster: target)
    sync = TopicSync(flow_config(("src", "127.0.0.1:1"), ("dst", "127.0.0.1:2"), ".*"))
    refused = pytest.raises(ReplicatorError, match=r"cannot create remote topic src\.b on 'dst'")
    with caplog.at_level(logging.INFO, logger=topic_sync.__name__), refused:
        sync._create_batch([NewTopic("src.a", 1), NewTopic("src.b", 2), NewTopic("src.c", 1)])
    assert "created 1 remote topic (1 partition) on dst: src.a" in caplog.text
