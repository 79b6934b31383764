"""The Python loop's transactional producers (`replicator.engine.transactions`): a
commit that failed with a retriable error is resumed once, briefly, as librdkafka asks,
and settled on what that says: committed after all, the producer's fatal error (a
fenced producer's commit said only `_TIMED_OUT`: librdkafka #3079, seen as a partition
resumed by a new producer of its id that fenced its new owner in turn), or the first
failure. The compiled path's Movers do the same in Rust (`transactions.rs`,
`refused`)."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from confluent_kafka import KafkaError, KafkaException

from replicator.engine import transactions
from replicator.engine.transactions import Outcome, TransactionalWriters

KEY = ("orders", 0)
TIMED_OUT = KafkaError(KafkaError._TIMED_OUT, "flush timed out", retriable=True)
FENCED = KafkaError(KafkaError._FENCED, "fenced by a newer instance", fatal=True)


class _Producer:
    """A transactional producer whose commits fail as scripted, one per call."""

    commits: ClassVar[list[KafkaError | None]] = []
    made: ClassVar[list[_Producer]] = []

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.calls: list[tuple[str, float | None]] = []
        self.purged = False
        _Producer.made.append(self)

    def init_transactions(self, timeout: float) -> None:
        self.calls.append(("init_transactions", timeout))

    def begin_transaction(self) -> None:
        self.calls.append(("begin_transaction", None))

    def commit_transaction(self, timeout: float) -> None:
        self.calls.append(("commit_transaction", timeout))
        error = _Producer.commits.pop(0)
        if error is not None:
            raise KafkaException(error)

    def purge(self) -> None:
        self.purged = True


@pytest.fixture
def writers(monkeypatch: pytest.MonkeyPatch) -> TransactionalWriters:
    monkeypatch.setattr(transactions, "Producer", _Producer)
    _Producer.made = []
    made = TransactionalWriters("primary->dr", lambda tid: {"transactional.id": tid})
    made.open(*KEY)
    assert made.begin(*KEY).outcome is Outcome.OPEN
    return made


def _commits(producer: _Producer) -> list[float | None]:
    return [timeout for name, timeout in producer.calls if name == "commit_transaction"]


def test_a_commit_that_timed_out_on_a_fenced_producer_is_settled_as_fenced(
    writers: TransactionalWriters,
) -> None:
    _Producer.commits = [TIMED_OUT, FENCED]
    settled = writers.commit_open()[KEY]
    assert settled.outcome is Outcome.FENCED and settled.error is FENCED
    producer = _Producer.made[-1]
    assert _commits(producer) == [30.0, 0.5] and producer.purged  # dropped


def test_a_commit_that_completes_when_resumed_is_committed(writers: TransactionalWriters) -> None:
    _Producer.commits = [TIMED_OUT, None]
    assert writers.commit_open()[KEY].outcome is Outcome.COMMITTED
    assert not _Producer.made[-1].purged  # kept: the partition goes on with it


def test_a_commit_still_failing_when_resumed_resumes_from_the_tail(
    writers: TransactionalWriters,
) -> None:
    _Producer.commits = [TIMED_OUT, TIMED_OUT]
    settled = writers.commit_open()[KEY]
    assert settled.outcome is Outcome.RETRY and settled.error is TIMED_OUT


def test_a_fenced_or_refused_commit_is_not_resumed(writers: TransactionalWriters) -> None:
    _Producer.commits = [FENCED]
    assert writers.commit_open()[KEY].outcome is Outcome.FENCED
    assert _commits(_Producer.made[-1]) == [30.0]
