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
    [lease] = store.acquire_leases([resource], owner, 60)
    return Guard(resource, owner, lease.token)


def test_a_token_grows_with_each_taking_and_not_with_a_renewal(store: StateStore) -> None:
    [first] = store.acquire_leases(["run fo-1"], "step A", 60)
    [renewed] = store.acquire_leases(["run fo-1"], "step A", 60)
    assert (first.token, renewed.token) == (1, 1)
    store.release_leases("step A")
    [again] = store.acquire_leases(["run fo-1"], "step A", 60)
    assert again.token == 2, "a token repeated after the release"
    store.release_leases("step A")
    [other] = store.acquire_leases(["run fo-1"], "abort of fo-1", 60)
    assert other.token == 3
    [elsewhere] = store.acquire_leases(["run fo-2"], "step B", 60)
    assert elsewhere.token == 1, "tokens are per resource"


def test_a_write_under_a_lease_taken_since_changes_nothing(store: StateStore) -> None:
    store.register_application("orders", "primary")
    step = _guard(store, "run fo-1", "fo-1 step switch")
    store.fence("orders")
    store.release_leases("fo-1 step switch")  # lapsed, say; an abort takes the run
    _guard(store, "run fo-1", "abort of fo-1")
    store.unfence("orders")  # the abort's undoing (outside any step here)
    before = store.application("orders")

    with guarded([step]), pytest.raises(LeaseTaken) as taken:
        store.switch("orders", "dr")
    assert str(taken.value).startswith(
        "switching application 'orders' to 'dr' refused, nothing was written: the lease on "
        "'run fo-1' that fo-1 step switch (fencing token 1) took is now held by abort of "
        "fo-1 (fencing token 2)"
    )
    with guarded([step]), pytest.raises(LeaseTaken, match="setting flow 'a->b' stopped"):
        store.set_flow_state("a->b", "stopped")
    assert store.application("orders") == before
    assert store.flow_state("a->b") is None


def test_a_write_under_a_released_or_lapsed_lease_changes_nothing(store: StateStore) -> None:
    store.register_application("orders", "primary")
    step = _guard(store, "application orders", "fo-1")
    store.release_leases("fo-1")
    with guarded([step]), pytest.raises(LeaseTaken, match="was released"):
        store.fence("orders")
    [lapsed] = store.acquire_leases(["application orders"], "fo-2", 0.0)
    lapsed_guard = Guard("application orders", "fo-2", lapsed.token)
    with guarded([lapsed_guard]), pytest.raises(LeaseTaken, match="lapsed at"):
        store.fence("orders")
    assert not store.application("orders").fenced


def test_writes_under_the_writers_own_lease_go_through(store: StateStore) -> None:
    store.register_application("orders", "primary")
    guards = [_guard(store, "run fo-1", "fo-1 step"), _guard(store, "application orders", "fo-1")]
    with guarded(guards):
        epoch = store.fence("orders")
        app = store.switch("orders", "dr")
        store.set_flow_state("a->b", "stopped")
        store.check_guards("moving group 'g'")
    assert (app.active_cluster, app.fenced, app.epoch) == ("dr", False, epoch + 1)


def test_a_renewal_never_takes_back_a_lease_released_or_taken(store: StateStore) -> None:
    step = _guard(store, "run fo-1", "fo-1 step")
    store.release_leases("fo-1 step")
    with pytest.raises(LeaseTaken, match="was released"):
        store.renew_leases([step], 60)
    assert store.leases() == [], "the renewal took the released lease back"
