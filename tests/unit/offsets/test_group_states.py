"""`GroupAdmin.idle`: which groups have no active members, from one ListGroups request
per broker. On a target of several brokers, one that does not answer may be the
coordinator of a group it did not list: that group's state is not known, and group
sync must not take it for one the cluster does not know (and write its offsets while
its members may be active). A fake admin client answers ListGroups; the brokers' side
is in tests/integration/offsets/test_group_offsets_coordinator.py."""

from __future__ import annotations

from concurrent.futures import Future

import pytest
from confluent_kafka import ConsumerGroupState, KafkaError, KafkaException
from confluent_kafka.admin import ConsumerGroupListing, ListConsumerGroupsResult

from replicator.config.model import ClusterConfig
from replicator.errors import ReplicatorError
from replicator.offsets.groups import GroupAdmin


class _Admin:
    """Answers ListGroups with `listed` and the errors of the brokers that did not answer."""

    def __init__(self, listed: dict[str, ConsumerGroupState], errors: int = 0) -> None:
        self._result = ListConsumerGroupsResult(
            valid=[ConsumerGroupListing(g, False, state) for g, state in listed.items()],
            errors=[
                KafkaException(KafkaError(KafkaError._TRANSPORT, "broker 2: Connection refused"))
                for _ in range(errors)
            ],
        )
        self.asked = 0

    def list_consumer_groups(self, request_timeout: float) -> Future[ListConsumerGroupsResult]:
        self.asked += 1
        answer: Future[ListConsumerGroupsResult] = Future()
        answer.set_result(self._result)
        return answer


def _groups(admin: _Admin) -> GroupAdmin:
    return GroupAdmin(ClusterConfig("dr", "127.0.0.1:1"), admin)  # type: ignore[arg-type]


def test_idle_groups_are_named_with_whether_the_cluster_knows_them() -> None:
    """Empty: known and idle; not listed while every broker answered: unknown (nothing
    committed there), idle; stable: active, left out. One request for all of them."""
    admin = _Admin({"orders": ConsumerGroupState.EMPTY, "billing": ConsumerGroupState.STABLE})
    assert _groups(admin).idle(["orders", "billing", "audit"]) == {
        "orders": True,
        "audit": False,
    }
    assert admin.asked == 1


def test_a_group_a_silent_broker_may_coordinate_is_not_taken_for_unknown() -> None:
    """A broker did not answer and `audit` was not listed: it may be that broker's, with
    members. Not known: an error naming the group and the broker's error, for the next
    round to ask again; never `audit` as unknown and idle."""
    admin = _Admin({"orders": ConsumerGroupState.EMPTY}, errors=1)
    with pytest.raises(ReplicatorError) as raised:
        _groups(admin).idle(["orders", "audit"])
    message = str(raised.value)
    assert "'audit'" in message and "'orders'" not in message
    assert "1 broker(s) did not list their groups" in message
    assert "Connection refused" in message
    assert "the next round asks again" in message


def test_a_silent_broker_does_not_matter_when_every_group_was_listed() -> None:
    """Every group asked about was listed by the brokers that answered: their states
    are known, whatever the silent broker holds."""
    admin = _Admin(
        {"orders": ConsumerGroupState.EMPTY, "billing": ConsumerGroupState.STABLE}, errors=1
    )
    assert _groups(admin).idle(["orders", "billing"]) == {"orders": True}
