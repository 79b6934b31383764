"""The DR status page, Data Docs and a report for auditors in Chromium, through
Airflow's own API server app with our plugin, and nothing else of the system (issue
16 items 1 to 3): the page shows its flow's verdict with the supervisor's reason and
draws the lag chart from the supervisor's samples; a verification's Data Docs,
opened from the DR status page's link, fill their
validation results tables (bootstrap-table, jQuery, Bootstrap, Font Awesome: the
plugin's pinned copies), and a failover's report shows its figures and the
verification that followed; no page made a request outside the Airflow host.
The end-to-end browser test does the same on the whole system after a real
failover; this one needs no Kafka, scheduler or triggerer, so it stays quick and
dependable on a loaded machine. Screenshots go to
`.data/test-artifacts/browser/offline/`."""

from __future__ import annotations

import json
import math
import secrets
import threading
from collections.abc import Iterator
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
import uvicorn
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from replicator.operations import Bounds
from replicator.statestore import STATE_URL_ENV, FlowSample, StateStore

from helpers.browser import (
    ARTIFACTS,
    Screenshots,
    chromium,
    offline_pages,
    outside,
    requests_made,
    wait_for,
)
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


def _supervisor_samples(store: StateStore) -> None:
    """Three hours of the supervisor's samples of FLOW: a lag spike that recovered."""
    now = datetime.now(UTC)
    samples = []
    for minute in range(180, 0, -1):
        spike = math.exp(-(((minute - 100) / 15) ** 2))
        samples.append(
            FlowSample(
                FLOW,
                now - timedelta(minutes=minute),
                live_workers=1,
                total_lag=int(40 + 9000 * spike),
                max_lag=int(10 + 2500 * spike),
                checkpoint_age_s=20.0 + 200 * spike,
                heartbeat_age_s=1.0,
                bounds=asdict(Bounds()),
            )
        )
    store.samples.record(samples, keep=timedelta(hours=6))


def _status_page(browser: WebDriver, page: str, shots: Screenshots) -> list[str]:
    """The page's verdict for FLOW (its clusters do not answer: failing, with the
    supervisor's 'unreadable' reason) and its lag chart drawn from the samples; the
    requests the page made."""
    requests_made(browser)  # the requests before are not this page's
    browser.get(page)
    verdict = f'section[data-verdict-flow="{FLOW}"]'
    wait_for(browser, f'{verdict} li[data-check="unreadable"]', "the verdict's reason")
    section = browser.find_element(By.CSS_SELECTOR, verdict)
    assert section.get_attribute("data-verdict") == "failing"
    assert "target cluster 'dr' is unreachable" in section.text
    lag = section.find_element(By.CSS_SELECTOR, 'figure[data-chart="lag"]')
    assert "180 samples" in lag.text
    shots.take(browser, "dr-status-page")
    # Two lines (total, worst partition) over the last half of the 6 h window's width.
    drawn = lag.find_elements(By.CSS_SELECTOR, "svg polyline")
    assert len(drawn) == 2 and all(line.size["width"] > 100 for line in drawn), [
        line.size for line in drawn
    ]
    return requests_made(browser)


@pytest.mark.timeout(600)
def test_status_page_data_docs_and_report_render_with_no_request_outside_airflow(
    airflow_url: str, airflow_home: Path, store: StateStore, tmp_path: Path
) -> None:
    procedure_id = recorded_failover(store)
    failover = store.runs.recent("failover")[0].run_id
    verification = verification_with_data_docs(store, tmp_path, FLOW, "orders")
    _supervisor_samples(store)
    shots = Screenshots(ARTIFACTS / "offline")
    with chromium(tmp_path) as browser:
        # Signed in as the UI is: its session cookie holds the token.
        browser.get(f"{airflow_url}/api/v2/monitor/health")
        browser.add_cookie({"name": "_token", "value": _token(airflow_url, airflow_home)})
        page = f"{airflow_url}/dr-status/"
        status_requests = _status_page(browser, page, shots)
        offline = offline_pages(browser, page, verification, failover, shots)
    shots.report()
    assert outside(status_requests, airflow_url) == [], status_requests
    assert outside(offline.requests, airflow_url) == [], offline.requests
    assert any("/data-docs-assets/" in url for url in offline.requests), offline.requests
    assert offline.started_by == "alice (Airflow user)"
    assert procedure_id.startswith("failover/")
