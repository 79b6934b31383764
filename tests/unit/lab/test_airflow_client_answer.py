"""`AirflowClient.answer`: a task's human-in-the-loop question answered through the
REST API once the task waits for it (an Airflow API answering from a script)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from types import SimpleNamespace

import httpx
import pytest

from replicator_lab import airflow_client
from replicator_lab.airflow_client import AirflowClient
from replicator_lab.errors import StackError

_RUN = "/api/v2/dags/failover/dagRuns/manual__1"
_HITL = f"{_RUN}/taskInstances/approval/-1/hitlDetails"
_ADMIN = {"id": "admin", "name": "admin"}


def _client(
    states: Iterator[tuple[str, str]], patch: Callable[[httpx.Request], httpx.Response]
) -> tuple[AirflowClient, list[str]]:
    """A client whose API reports (task state, run state) from `states` per poll."""
    calls: list[str] = []
    current = {"task": "queued", "run": "running"}

    def handle(request: httpx.Request) -> httpx.Response:
        calls.append(f"{request.method} {request.url.path}")
        path = request.url.path
        if path == "/auth/token":
            return httpx.Response(200, json={"access_token": "t"})
        if path == f"{_RUN}/taskInstances":
            current["task"], current["run"] = next(states, (current["task"], current["run"]))
            tasks = [{"task_id": "plan", "state": "success"}]
            return httpx.Response(
                200,
                json={
                    "task_instances": [*tasks, {"task_id": "approval", "state": current["task"]}]
                },
            )
        if path == _RUN:
            return httpx.Response(200, json={"state": current["run"]})
        if path == _HITL and request.method == "PATCH":
            return patch(request)
        if path == _HITL:
            return httpx.Response(
                200, json={"chosen_options": ["Approve"], "responded_by_user": _ADMIN}
            )
        return httpx.Response(404, json={"detail": path})

    client = AirflowClient("http://airflow", "admin", "pw")
    client._http = httpx.Client(base_url=client.url, transport=httpx.MockTransport(handle))
    return client, calls


def _no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """The client's retries without their pauses."""
    retrying = functools.partial(airflow_client.Retrying, sleep=lambda seconds: None)
    monkeypatch.setattr(airflow_client, "Retrying", retrying)


@pytest.fixture(autouse=True)
def _no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(airflow_client, "POLL_S", 0.0)


def test_answered_once_the_task_has_waited_for_it_a_while(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The client's clock moves one second per poll.
    now = [0.0]
    clock = SimpleNamespace(
        monotonic=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + 1)
    )
    monkeypatch.setattr(airflow_client, "time", clock)

    def patch(request: httpx.Request) -> httpx.Response:
        assert json.loads(request.content) == {"chosen_options": ["Approve"]}
        return httpx.Response(200, json={"chosen_options": ["Approve"], "responded_by": _ADMIN})

    states = iter([("queued", "running"), ("running", "running"), ("awaiting_input", "running")])
    client, calls = _client(states, patch)
    answer = client.answer("failover", "manual__1", "approval", "Approve", timeout=100, settle_s=5)
    assert answer["responded_by"] == _ADMIN
    assert calls.count(f"PATCH {_HITL}") == 1
    # Asked at the third poll (second 2); answered at second 7, the eighth poll.
    assert calls.count(f"GET {_RUN}/taskInstances") == 8


def test_an_answer_sent_again_finds_itself_recorded() -> None:
    client, _ = _client(
        iter([("awaiting_input", "running")]),
        lambda request: httpx.Response(409, json={"detail": "already updated"}),
    )
    answer = client.answer("failover", "manual__1", "approval", "Approve", timeout=10, settle_s=0)
    assert answer["responded_by"] == _ADMIN


def test_someone_not_assigned_is_refused() -> None:
    client, _ = _client(
        iter([("awaiting_input", "running")]),
        lambda request: httpx.Response(403, json={"detail": "not a respondent"}),
    )
    with pytest.raises(StackError, match="HTTP 403"):
        client.answer("failover", "manual__1", "approval", "Approve", timeout=10, settle_s=0)


def test_a_run_that_ends_before_asking_is_reported() -> None:
    client, _ = _client(
        iter([("queued", "running"), ("upstream_failed", "failed")]),
        lambda request: pytest.fail("answered a question never asked"),
    )
    with pytest.raises(StackError, match=r"never asked its question.*upstream_failed, run failed"):
        client.answer("failover", "manual__1", "approval", "Approve", timeout=10, settle_s=0)


def test_an_answer_the_metadata_database_failed_is_sent_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The browser test's case: Airflow's SQLite held a lock past its 5 s busy timeout,
    and the PATCH answered HTTP 500 "Database error", its transaction rolled back."""
    _no_backoff(monkeypatch)
    answers = iter(
        [
            httpx.Response(
                500, json={"detail": {"reason": "Database error", "statement": "hidden"}}
            ),
            httpx.Response(200, json={"chosen_options": ["Approve"], "responded_by": _ADMIN}),
        ]
    )
    client, calls = _client(iter([("awaiting_input", "running")]), lambda request: next(answers))
    answer = client.answer("failover", "manual__1", "approval", "Approve", timeout=10, settle_s=0)
    assert answer["responded_by"] == _ADMIN
    assert calls.count(f"PATCH {_HITL}") == 2


def test_a_database_error_that_lasts_is_raised_with_airflows_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _no_backoff(monkeypatch)
    failed = {"detail": {"reason": "Database error", "message": "look for ID A7QWOckQ"}}
    client, calls = _client(
        iter([("awaiting_input", "running")]), lambda request: httpx.Response(500, json=failed)
    )
    with pytest.raises(StackError, match=r"HTTP 500.*A7QWOckQ"):
        client.answer("failover", "manual__1", "approval", "Approve", timeout=10, settle_s=0)
    assert calls.count(f"PATCH {_HITL}") == airflow_client._ATTEMPTS
