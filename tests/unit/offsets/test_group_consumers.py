"""`GroupConsumers`: a consumer per group lent to one call at a time and kept for the
next, for at most `bound` groups (the first given back, each until it goes unlent for
`idle_s`), closed when a call fails or the holder closes. Fake consumers count what is
made and closed; the brokers' side (a checkpoint round reading and committing through
kept consumers) is in the checkpoint integration tests."""

from __future__ import annotations

import pytest

from replicator.config.model import ClusterConfig
from replicator.offsets import group_consumers
from replicator.offsets.group_consumers import GroupConsumers


class _Consumer:
    def __init__(self, group: str) -> None:
        self.group = group
        self.closed = False

    def close(self) -> None:
        assert not self.closed, "closed twice"
        self.closed = True


class _Counting(GroupConsumers):
    def __init__(self, bound: int) -> None:
        super().__init__(ClusterConfig("src", "127.0.0.1:1"), bound)
        self.made: list[_Consumer] = []

    def make(self, cluster: ClusterConfig, group: str) -> _Consumer:  # type: ignore[override]
        consumer = _Consumer(group)
        self.made.append(consumer)
        return consumer


def _use(consumers: GroupConsumers, *groups: str) -> list[object]:
    lent: list[object] = []
    for group in groups:
        with consumers.lend(group) as consumer:
            lent.append(consumer)
    return lent


def test_a_group_asked_again_gets_the_consumer_it_had() -> None:
    consumers = _Counting(bound=4)
    first = _use(consumers, "orders", "billing")
    again = _use(consumers, "orders", "billing")
    assert again == first
    assert len(consumers.made) == 2
    assert consumers.kept() == 2


def test_without_a_bound_every_call_makes_and_closes_its_own() -> None:
    """`GroupAdmin`'s default (short-lived callers that never close it): nothing kept."""
    consumers = _Counting(bound=0)
    _use(consumers, "orders", "orders")
    assert len(consumers.made) == 2
    assert all(c.closed for c in consumers.made)
    assert consumers.kept() == 0


def test_rounds_of_more_groups_than_the_bound_reuse_the_kept_ones() -> None:
    """A checkpoint round asks its groups in the same cycle every time: past the bound,
    the first groups keep their consumers round after round and the others make and
    close one per call. (Keeping the groups asked most recently instead closed each
    consumer before its group came round again: 200 groups, 64 kept, none lent twice.)"""
    consumers = _Counting(bound=3)
    groups = [f"g{i}" for i in range(5)]
    first = _use(consumers, *groups)
    second = _use(consumers, *groups)
    assert second[:3] == first[:3]
    assert len(consumers.made) == 5 + 2
    assert [c.closed for c in consumers.made] == [False] * 3 + [True] * 4
    assert consumers.kept() == 3


def test_a_group_no_longer_asked_gives_its_place_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """An estate's groups come and go: a consumer not lent for `idle_s` is closed when
    another is given back, and its place goes to the next group."""
    now = [1000.0]
    monkeypatch.setattr(group_consumers.time, "monotonic", lambda: now[0])
    consumers = _Counting(bound=2)
    gone, staying = _use(consumers, "gone", "staying")
    now[0] += consumers.idle_s / 2
    _use(consumers, "staying")
    now[0] += consumers.idle_s / 2 + 1
    (new,) = _use(consumers, "new")
    assert gone.closed and not staying.closed and not new.closed  # type: ignore[attr-defined]
    assert _use(consumers, "staying", "new") == [staying, new]


def test_a_failed_call_frees_its_groups_place() -> None:
    consumers = _Counting(bound=1)
    _use(consumers, "orders")
    with pytest.raises(RuntimeError), consumers.lend("orders"):
        raise RuntimeError("coordinator not available")
    (billing,) = _use(consumers, "billing")
    assert not billing.closed  # type: ignore[attr-defined]
    assert consumers.kept() == 1


def test_two_calls_for_one_group_at_once_each_have_a_consumer_and_one_is_kept() -> None:
    consumers = _Counting(bound=4)
    with consumers.lend("orders") as first, consumers.lend("orders") as second:
        assert first is not second
    assert consumers.kept() == 1
    assert sum(c.closed for c in consumers.made) == 1


def test_a_call_that_fails_closes_its_consumer_and_the_next_gets_a_new_one() -> None:
    """Its state after an error (a coordinator moved, a request half answered) is not
    known: never lent again."""
    consumers = _Counting(bound=4)
    with pytest.raises(RuntimeError), consumers.lend("orders"):
        raise RuntimeError("coordinator not available")
    assert consumers.made[0].closed
    (fresh,) = _use(consumers, "orders")
    assert fresh is consumers.made[1]


def test_close_closes_the_kept_and_those_lent_are_closed_when_given_back() -> None:
    consumers = _Counting(bound=4)
    _use(consumers, "orders")
    with consumers.lend("billing") as lent:
        consumers.close()
        assert consumers.made[0].closed
        assert not lent.closed  # type: ignore[attr-defined]
    assert lent.closed  # type: ignore[attr-defined]
    assert consumers.kept() == 0
