"""The Airflow API client against a real HTTP server that stalls the way a loaded
one-worker API server did in CI (`POST /auth/token` unanswered for longer than the
client's timeout): idempotent calls are sent again, a new DAG run never is."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from replicator_lab.airflow_client import AirflowClient

_TIMEOUT_S = 0.3


class _StallingApi(ThreadingHTTPServer):
    """Answers like Airflow's API, but the first `stalls[call]` requests of a call
    get no answer before the client gives up."""

    def __init__(self, stalls: dict[str, int]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.stalls = Counter(stalls)
        self.seen: Counter[str] = Counter()
        self.released = threading.Event()  # set at teardown: stalled handlers finish


class _Handler(BaseHTTPRequestHandler):
    server: _StallingApi

    def do_GET(self) -> None:
        self._answer({"import_errors": [], "total_entries": 0})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        if self.path == "/auth/token":
            self._answer({"access_token": "token"})
        else:
            self._answer({"dag_run_id": "manual__1"})

    def _answer(self, body: dict[str, object]) -> None:
        call = f"{self.command} {self.path}"
        self.server.seen[call] += 1
        if self.server.seen[call] <= self.server.stalls[call]:
            self.server.released.wait(10 * _TIMEOUT_S)
            return
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: pytest shows the client's own log."""


def _serve(stalls: dict[str, int]) -> Iterator[tuple[_StallingApi, AirflowClient]]:
    server = _StallingApi(stalls)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with AirflowClient(url, "admin", "secret", timeout_s=_TIMEOUT_S) as client:
            yield server, client
    finally:
        server.released.set()
        server.shutdown()
        server.server_close()


@pytest.fixture
def token_stalls_twice() -> Iterator[tuple[_StallingApi, AirflowClient]]:
    yield from _serve({"POST /auth/token": 2, "GET /api/v2/importErrors": 1})


@pytest.fixture
def trigger_stalls() -> Iterator[tuple[_StallingApi, AirflowClient]]:
    yield from _serve({"POST /api/v2/dags/failover/dagRuns": 1})


def test_calls_that_timed_out_are_sent_again(
    token_stalls_twice: tuple[_StallingApi, AirflowClient], caplog: pytest.LogCaptureFixture
) -> None:
    server, client = token_stalls_twice
    started = time.monotonic()
    assert client.import_errors() == []
    assert server.seen["POST /auth/token"] == 3
    assert server.seen["GET /api/v2/importErrors"] == 2
    assert time.monotonic() - started < 20 * _TIMEOUT_S
    retries = [r.getMessage() for r in caplog.records if "sending it again" in r.getMessage()]
    assert retries == [
        "Airflow API POST /auth/token: ReadTimeout (attempt 1 of 3); sending it again",
        "Airflow API POST /auth/token: ReadTimeout (attempt 2 of 3); sending it again",
        "Airflow API GET /api/v2/importErrors: ReadTimeout (attempt 1 of 3); sending it again",
    ]
    assert not any("secret" in message for message in retries)


def test_a_new_dag_run_is_never_sent_twice(
    trigger_stalls: tuple[_StallingApi, AirflowClient],
) -> None:
    server, client = trigger_stalls
    with pytest.raises(httpx.ReadTimeout):
        client.request("POST", "/api/v2/dags/failover/dagRuns", json={"conf": {}})
    assert server.seen["POST /api/v2/dags/failover/dagRuns"] == 1
