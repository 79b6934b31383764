"""Data Docs and a report for auditors in Chromium, through Airflow's own API server
app with our plugin, and nothing else of the system (issue 16 items 1 and 3): a
verification's Data Docs, opened from the DR status page's link, fill their
validation results tables (bootstrap-table, jQuery, Bootstrap, Font Awesome: the
plugin's pinned copies), and a failover's report shows its figures and the
verification that followed; no page made a request outside the Airflow host.
The end-to-end browser test does the same on the whole system after a real
failover; this one needs no Kafka, scheduler or triggerer, so it stays quick and
dependable on a loaded machine. Screenshots go to
`.data/test-artifacts/browser/offline/`."""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from replicator.statestore import STATE_URL_ENV, StateStore

from helpers.browser import ARTIFACTS, Screenshots, chromium, offline_pages, outside
from helpers.data_docs import verification_with_data_docs
from helpers.kafka import free_port_pair
from helpers.replication import wait_until, write_config
from helpers.reports import FLOW, recorded_failover

pytestmark = pytest.mark.integration


@pytest.fixture
def airflow_url(
    airflow_home: Path, tmp_path: Path, state_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """Airflow's API server app (UI, REST API, plugins) served on a port of its own;
    the page reads the environment (clusters that do not answer: no Kafka here)."""
    from airflow.api_fastapi.app import create_app  # noqa: PLC0415 - after `airflow_home`

    port = free_port_pair()
    url = f"http://127.0.0.1:{port}"
    monkeypatch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", secrets.token_urlsafe(64))
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", url)
    config = write_config(tmp_path, "127.0.0.1:1", "127.0.0.1:2", "orders")
    monkeypatch.setenv("REPLICATOR_CONFIG", str(config))
    monkeypatch.setenv(STATE_URL_ENV, state_url)
    server = uvicorn.Server(
        uvicorn.Config(create_app(), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, name="airflow-api", daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, 120.0, "Airflow's API server")
        yield url
    finally:
        server.should_exit = True
        thread.join(30)


def _token(url: str, airflow_home: Path) -> str:
    """A token for `admin` (the simple auth manager's generated password)."""
    generated = airflow_home / "simple_auth_manager_passwords.json.generated"
    password = json.loads(generated.read_text())["admin"]
    answer = httpx.post(f"{url}/auth/token", json={"username": "admin", "password": password})
    answer.raise_for_status()
    return str(answer.json()["access_token"])


@pytest.mark.timeout(600)
def test_data_docs_and_report_render_with_no_request_outside_airflow(
    airflow_url: str, airflow_home: Path, store: StateStore, tmp_path: Path
) -> None:
    procedure_id = recorded_failover(store)
    failover = store.runs("failover")[0].run_id
    verification = verification_with_data_docs(store, tmp_path, FLOW, "orders")
    shots = Screenshots(ARTIFACTS / "offline")
    with chromium(tmp_path) as browser:
        # Signed in as the UI is: its session cookie holds the token.
        browser.get(f"{airflow_url}/api/v2/monitor/health")
        browser.add_cookie({"name": "_token", "value": _token(airflow_url, airflow_home)})
        offline = offline_pages(browser, f"{airflow_url}/dr-status/", verification, failover, shots)
    shots.report()
    assert outside(offline.requests, airflow_url) == [], offline.requests
    assert any("/data-docs-assets/" in url for url in offline.requests), offline.requests
    assert offline.started_by == "alice (Airflow user)"
    assert procedure_id.startswith("failover/")
