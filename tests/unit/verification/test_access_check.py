"""The verifier's pre-flight access check on a cluster that just started: its group
coordinator answers COORDINATOR_LOAD_IN_PROGRESS (or NOT_AVAILABLE) for a while,
which is a state that passes, not an error of the operator's. The check waits it out;
only a coordinator that never settles stops the run, saying so. The broker's answers
are faked here (no Kafka); on real clusters the check runs in
tests/integration/security/."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AclOperation
from tenacity import wait_fixed

from replicator.errors import ReplicatorError
from replicator.kafka import coordinator
from replicator.verification import access

from helpers.replication import flow_config


class _Admin:
    """Answers describe_consumer_groups with `loading` refusals, then with READ and
    DESCRIBE allowed."""

    def __init__(self, loading: int) -> None:
        self.loading = loading
        self.calls = 0

    def describe_consumer_groups(self, groups: list[str], **_: object) -> dict[str, Future]:
        self.calls += 1
        answers = {}
        for group in groups:
            future: Future = Future()
            if self.calls <= self.loading:
                future.set_exception(
                    KafkaException(KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS))
                )
            else:
                allowed = [AclOperation.READ, AclOperation.DESCRIBE]
                future.set_result(SimpleNamespace(authorized_operations=allowed))
            answers[group] = future
        return answers


@pytest.fixture
def cluster():
    return flow_config(("primary", "localhost:1"), ("dr", "localhost:2"), "orders").source


def test_a_coordinator_still_loading_is_waited_for(monkeypatch, cluster) -> None:
    admin = _Admin(loading=3)
    monkeypatch.setattr(access, "admin_for", lambda _cluster: admin)
    monkeypatch.setattr(coordinator, "WAIT", wait_fixed(0))
    assert access._group(cluster) == []
    assert admin.calls == 4


def test_a_coordinator_that_never_settles_stops_the_check_saying_so(monkeypatch, cluster) -> None:
    admin = _Admin(loading=10**6)
    monkeypatch.setattr(access, "admin_for", lambda _cluster: admin)
    monkeypatch.setattr(coordinator, "WAIT", wait_fixed(0.01))
    monkeypatch.setattr(access, "_TIMEOUT_S", 0.2)
    with pytest.raises(ReplicatorError, match="has not settled"):
        access._group(cluster)
    assert admin.calls >= 2
