"""The step runner's lease renewer on a real SQLite store (no Kafka): it keeps a
lease past its length while it runs, stops for good when stopped, and a lease taken
by another owner is noticed within one renewal and stops the step (`ensure_held`)."""

from __future__ import annotations

import threading
import time

import pytest

from replicator.procedures.renewal import Hold, LeaseLost, LeaseRenewer, ensure_held, renewing
from replicator.statestore import LeaseHeld, LeaseTaken, StateStore

_TTL_S = 1.5  # renewed every 0.5 s


def _renewer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("lease ")]


def test_a_lease_is_kept_past_its_length_while_renewed_and_no_longer_once_stopped(
    store: StateStore,
) -> None:
    hold = Hold.take(store.leases, ["flow a->b"], "fo-1", _TTL_S)
    [first] = store.leases.all()
    renewer = LeaseRenewer(store, [hold], "fo-1 step fence")
    with renewing(renewer):
        time.sleep(3 * _TTL_S)  # three times the lease
        with pytest.raises(LeaseHeld, match="flow a->b is leased to fo-1"):
            store.leases.acquire(["flow a->b"], "fo-2")
        ensure_held()  # held: nothing raised
    assert renewer.renewals >= 5
    [renewed] = store.leases.all()
    assert renewed.expires_at > first.expires_at
    assert renewed.token == first.token, "a renewal is no new taking of the lease"
    assert _renewer_threads() == [], "the renewer thread did not stop"
    time.sleep(2 * _TTL_S)  # stopped: the lease lapses, another owner takes it
    [taken] = store.leases.acquire(["flow a->b"], "fo-2")
    assert (taken.owner, taken.token) == ("fo-2", first.token + 1)
    ensure_held()  # outside a step: nothing to check


def test_a_lease_taken_by_another_owner_stops_the_step(store: StateStore) -> None:
    hold = Hold.take(store.leases, ["application orders"], "fo-1", _TTL_S)
    renewer = LeaseRenewer(store, [hold], "fo-1 fence")
    with pytest.raises(LeaseLost) as lost, renewing(renewer):
        store.leases.release("fo-1")  # freed by hand, and taken
        store.leases.acquire(["application orders"], "fo-2", 60)
        deadline = time.monotonic() + 10 * _TTL_S
        while time.monotonic() < deadline:
            ensure_held()  # the step's look at its lease, as the fence's wait does
            time.sleep(0.05)
    message = str(lost.value)
    assert message.startswith(
        "fo-1 fence lost its lease: renewing the leases refused, nothing was written: the "
        "lease on 'application orders' that fo-1 (fencing token 1) took is now held by fo-2 "
        "(fencing token 2)"
    )
    assert "it stopped so as not to act beside another procedure" in message
    assert isinstance(lost.value.__cause__, LeaseTaken)
    assert _renewer_threads() == []
    [lease] = store.leases.all()
    assert lease.owner == "fo-2", "the lost lease was taken back"
