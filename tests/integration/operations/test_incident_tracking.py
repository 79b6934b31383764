"""Incidents kept in a real state store (SQLite and PostgreSQL): what one scheduler
told is known to another one and after a restart (a new store object), two runs at
once claim a notice once, a released notice is claimed again, and each source's
runs only resolve their own incidents."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from replicator.operations.health import Problem
from replicator.operations.incident_messages import problem_findings, verification_finding
from replicator.operations.incidents import IncidentPolicy, Notice, release, track
from replicator.statestore import StateStore

pytestmark = pytest.mark.integration

NOW = IncidentPolicy(remind_every=None, resolve_after=timedelta(0))
LAG = problem_findings(
    [Problem("primary->dr", "lag", "topic orders partition 3", "5234 behind", "wait")]
)
WRONG = {"success": False, "suites": {"parity": {"success": False, "rows": 2, "failed": []}}}


def _changes(notices: list[Notice]) -> list[tuple[str, str]]:
    return [(n.change, n.incident.key) for n in notices]


def test_another_scheduler_and_a_restart_know_what_was_told(backend_state_url: str) -> None:
    first, second = StateStore(backend_state_url), StateStore(backend_state_url)
    try:
        opened = track(first.incidents, "supervisor", None, LAG, policy=NOW)
        assert _changes(opened) == [("opened", "supervisor/primary->dr/lag")]
        assert track(second.incidents, "supervisor", None, LAG, policy=NOW) == []
        first.close()
        restarted = StateStore(backend_state_url)
        assert track(restarted.incidents, "supervisor", None, LAG, policy=NOW) == []
        [resolved] = track(restarted.incidents, "supervisor", None, [], policy=NOW)
        assert resolved.change == "resolved"
        assert resolved.incident.opened_at == opened[0].incident.opened_at
        assert track(second.incidents, "supervisor", None, [], policy=NOW) == []
        restarted.close()
    finally:
        second.close()


def test_two_runs_at_once_claim_a_notice_once(backend_state_url: str) -> None:
    stores = [StateStore(backend_state_url) for _ in range(4)]
    stores[0].incidents.all()  # the schema, before the race
    start = threading.Barrier(len(stores))
    claimed: list[list[Notice]] = []

    def run(store: StateStore) -> None:
        start.wait()
        claimed.append(track(store.incidents, "supervisor", None, LAG, policy=NOW))

    threads = [threading.Thread(target=run, args=(store,)) for store in stores]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        for store in stores:
            store.close()
    assert sorted(len(notices) for notices in claimed) == [0, 0, 0, 1]


def test_a_released_notice_is_claimed_again(backend_state_url: str) -> None:
    store = StateStore(backend_state_url)
    try:
        [opened] = track(store.incidents, "supervisor", None, LAG, policy=NOW)
        release(store.incidents, opened)  # the mail server was down
        [again] = track(store.incidents, "supervisor", None, LAG, policy=NOW)
        assert again.change == "opened"
        assert track(store.incidents, "supervisor", None, LAG, policy=NOW) == []
        # A release after another run claimed a newer notice leaves that one be.
        release(store.incidents, opened)
        assert track(store.incidents, "supervisor", None, LAG, policy=NOW) == []
    finally:
        store.close()


def test_each_source_and_scope_resolves_only_its_own(backend_state_url: str) -> None:
    store = StateStore(backend_state_url)
    try:
        wrong = verification_finding("primary->dr", "verify-1", WRONG, None)
        assert wrong is not None
        track(store.incidents, "verification", "primary->dr", [wrong], policy=NOW)
        # The same wrong copy found by a later run: the incident is open, nothing to tell.
        again = verification_finding("primary->dr", "verify-3", WRONG, None)
        assert track(store.incidents, "verification", "primary->dr", [again], policy=NOW) == []
        other = verification_finding("backup->dr", "verify-2", WRONG, None)
        assert other is not None
        track(store.incidents, "verification", "backup->dr", [other], policy=NOW)
        track(store.incidents, "supervisor", None, LAG, policy=NOW)
        # A clean supervisor run resolves the lag, not the verifications.
        assert _changes(track(store.incidents, "supervisor", None, [], policy=NOW)) == [
            ("resolved", "supervisor/primary->dr/lag")
        ]
        # A right copy of one flow resolves that flow's incident only.
        assert _changes(
            track(
                store.incidents, "verification", "primary->dr", [], policy=NOW, resolution="right"
            )
        ) == [("resolved", "verification/primary->dr/copy")]
        assert [i.key for i in store.incidents.all(open_only=True)] == [
            "verification/backup->dr/copy"
        ]
        with pytest.raises(ValueError, match="not of verification in scope 'backup->dr'"):
            track(store.incidents, "verification", "backup->dr", LAG, policy=NOW)
    finally:
        store.close()
