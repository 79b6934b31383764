"""Fencing tokens on a real SQLite store (no Kafka): a lease's token grows with each
taking and not with a renewal, never repeats after a release, and a write made under
a lease that is no longer the writer's changes nothing (`replicator.statestore.fencing`).
The same rule with a real step frozen by SIGSTOP, on real clusters and PostgreSQL too,
is tests/integration/procedures/test_frozen_step.py."""

from __future__ import annotations

import pytest

from replicator.statestore import LeaseTaken, StateStore
from replicator.statestore.fencing import Guard, guarded


def _guard(store: StateStore, resource: str, owner: str) -> Guard:
    [lease] = store.leases.acquire([resource], owner, 60)
    return Guard(resource, owner, lease.token)


def test_a_token_grows_with_each_taking_and_not_with_a_renewal(store: StateStore) -> None:
    [first] = store.leases.acquire(["run fo-1"], "step A", 60)
    [renewed] = store.leases.acquire(["run fo-1"], "step A", 60)
    assert (first.token, renewed.token) == (1, 1)
    store.leases.release("step A")
    [again] = store.leases.acquire(["run fo-1"], "step A", 60)
    assert again.token == 2, "a token repeated after the release"
    store.leases.release("step A")
    [other] = store.leases.acquire(["run fo-1"], "abort of fo-1", 60)
    assert other.token == 3
    [elsewhere] = store.leases.acquire(["run fo-2"], "step B", 60)
    assert elsewhere.token == 1, "tokens are per resource"


def test_a_write_under_a_lease_taken_since_changes_nothing(store: StateStore) -> None:
    store.applications.register("orders", "primary")
    step = _guard(store, "run fo-1", "fo-1 step switch")
    store.applications.fence("orders")
    store.leases.release("fo-1 step switch")  # lapsed, say; an abort takes the run
    _guard(store, "run fo-1", "abort of fo-1")
    store.applications.unfence("orders")  # the abort's undoing (outside any step here)
    before = store.applications.get("orders")

    with guarded([step]), pytest.raises(LeaseTaken) as taken:
        store.applications.switch("orders", "dr")
    assert str(taken.value).startswith(
        "switching application 'orders' to 'dr' refused, nothing was written: the lease on "
        "'run fo-1' that fo-1 step switch (fencing token 1) took is now held by abort of "
        "fo-1 (fencing token 2)"
    )
    with guarded([step]), pytest.raises(LeaseTaken, match="setting flow 'a->b' stopped"):
        store.flows.set("a->b", "stopped")
    assert store.applications.get("orders") == before
    assert store.flows.get("a->b") is None


def test_a_write_under_a_released_or_lapsed_lease_changes_nothing(store: StateStore) -> None:
    store.applications.register("orders", "primary")
    step = _guard(store, "application orders", "fo-1")
    store.leases.release("fo-1")
    with guarded([step]), pytest.raises(LeaseTaken, match="was released"):
        store.applications.fence("orders")
    [lapsed] = store.leases.acquire(["application orders"], "fo-2", 0.0)
    lapsed_guard = Guard("application orders", "fo-2", lapsed.token)
    with guarded([lapsed_guard]), pytest.raises(LeaseTaken, match="lapsed at"):
        store.applications.fence("orders")
    assert not store.applications.get("orders").fenced


def test_writes_under_the_writers_own_lease_go_through(store: StateStore) -> None:
    store.applications.register("orders", "primary")
    guards = [_guard(store, "run fo-1", "fo-1 step"), _guard(store, "application orders", "fo-1")]
    with guarded(guards):
        epoch = store.applications.fence("orders")
        app = store.applications.switch("orders", "dr")
        store.flows.set("a->b", "stopped")
        store.leases.check_guards("moving group 'g'")
    assert (app.active_cluster, app.fenced, app.epoch) == ("dr", False, epoch + 1)


def test_a_renewal_never_takes_back_a_lease_released_or_taken(store: StateStore) -> None:
    step = _guard(store, "run fo-1", "fo-1 step")
    store.leases.release("fo-1 step")
    with pytest.raises(LeaseTaken, match="was released"):
        store.leases.renew([step], 60)
    assert store.leases.all() == [], "the renewal took the released lease back"
