"""The fence decides on the database server's clock, never on a process's: a client
whose host clock is 5 s behind the procedure's is still seen as live right after
its report, and when it goes silent the fence waits out its whole route lease (it
may act on its route that long) instead of counting it stopped 5 s early; and an
orchestrator whose clock is 5 s ahead cannot take a procedure lease that has not
lapsed. Real state stores (SQLite, PostgreSQL), a real client process; no Kafka
needed."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from replicator.procedures import applications
from replicator.statestore import ROUTE_LEASE_S, LeaseHeld, StateStore, database

pytestmark = pytest.mark.integration

_SKEWED_CLIENT = Path(__file__).resolve().parents[2] / "helpers" / "skewed_clock_client.py"
_BEHIND_S = 5.0


@pytest.fixture
def state_url(backend_state_url: str) -> str:
    """The state store of each test: a SQLite file, then a PostgreSQL database."""
    return backend_state_url


def test_a_client_with_a_clock_5s_behind_is_waited_out_for_its_whole_route_lease(
    state_url: str, store: StateStore
) -> None:
    app = f"orders-{uuid.uuid4().hex[:8]}"
    store.applications.register(app, "primary")
    client = [sys.executable, str(_SKEWED_CLIENT), state_url, app, "lagging-1", str(_BEHIND_S)]
    done = subprocess.run(client, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    reported_at = float(done.stdout.split("reported at ")[1])

    # Just after its report, the client is one a fence must wait for.
    assert time.time() - reported_at < ROUTE_LEASE_S - 1, "the client process took too long"
    assert applications.preview_fence(store.applications, [app]) == {
        "would_fence": {app: ["lagging-1"]}
    }

    # It is silent from now on (cut off from the store), but may act on its route for
    # ROUTE_LEASE_S after its report: the fence may not count it stopped before then.
    report = applications.fence(store.applications, [app], timeout_s=60)
    fenced_at = time.time()

    assert report["fenced"][app]["silent"] == ["lagging-1"]
    assert fenced_at >= reported_at + ROUTE_LEASE_S, (
        f"the fence counted the silent client stopped {fenced_at - reported_at:.1f}s after "
        f"its report, within its {ROUTE_LEASE_S:g}s route lease"
    )


def test_an_orchestrator_with_a_clock_5s_ahead_cannot_take_a_lease_that_has_not_lapsed(
    state_url: str, store: StateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = StateStore(state_url)  # another orchestrator, on a host whose clock is ahead
    try:
        other.leases.all()  # connected, the schema read: the next call is quick
        store.leases.acquire(["application orders"], "fo-1", ttl_s=_BEHIND_S - 1)
        ahead = timedelta(seconds=_BEHIND_S)
        monkeypatch.setattr(database, "now", lambda: datetime.now(UTC) + ahead)
        with pytest.raises(LeaseHeld, match=r"application orders is leased to fo-1 until"):
            other.leases.acquire(["application orders"], "fo-2")
    finally:
        other.close()
    [lease] = store.leases.all()
    assert lease.owner == "fo-1"
