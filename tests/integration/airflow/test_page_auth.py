"""The DR status page, its JSON API and the state store's API as Airflow serves them:
Airflow's own API server app (its auth manager, its mounting of plugin apps, its
middleware), in this process, with our plugin loaded from the plugins folder.
Anonymous requests get 401 and an invalid token 403 on every route; a user signed
in through Airflow (a token from `POST /auth/token`, or the UI's session cookie)
gets the pages.

Airflow is imported only after the `airflow_home` fixture has set its environment.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from replicator.statestore import STATE_URL_ENV, StateStore

from helpers.kafka import unique_topic
from helpers.replication import write_config

pytestmark = pytest.mark.integration

#: Every route of the page's app, and of the state store's API mounted in it.
ROUTES = (
    "/dr-status/",
    "/dr-status/api/status",
    "/dr-status/runs/{run_id}",
    "/dr-status/runs/{run_id}/data-docs/index.html",
    "/dr-status/runs/{run_id}/report.html",
    "/dr-status/data-docs-assets/jquery/dist/jquery.min.js",
    "/dr-status/api/state/applications",
    "/dr-status/api/state/applications/orders",
    "/dr-status/api/state/runs",
    "/dr-status/api/state/runs/{run_id}",
    "/dr-status/api/state/flows",
)


@pytest.fixture(scope="module")
def airflow_api(airflow_home: Path) -> Iterator[TestClient]:
    """Airflow's API server app, as `airflow api-server` builds it (with the secret that
    signs its tokens, which `airflow standalone` writes into its configuration)."""
    from airflow.api_fastapi.app import create_app  # noqa: PLC0415 - after `airflow_home`

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", secrets.token_urlsafe(64))
        with TestClient(create_app(), base_url="http://localhost") as client:
            yield client


@pytest.fixture
def replicator_env(
    tmp_path: Path, primary: str, dr: str, store: StateStore, monkeypatch: pytest.MonkeyPatch
) -> str:
    """What the page reads (no `replicator_default` connection: the environment, as
    `make run` sets it), with an application and a finished run; returns the run id."""
    config = write_config(tmp_path, primary, dr, unique_topic("auth"))
    monkeypatch.setenv("REPLICATOR_CONFIG", str(config))
    monkeypatch.setenv(STATE_URL_ENV, str(store.url.render_as_string(hide_password=False)))
    store.applications.register("orders", "primary")
    run_id = store.runs.start("drill", "primary->dr", "non-disruptive", {})
    store.runs.finish(run_id, "succeeded", 0, 1.5, {})
    return run_id


def _admin_password(airflow_home: Path) -> str:
    """The simple auth manager's generated password of `admin` (written when the API
    server app starts)."""
    generated = airflow_home / "simple_auth_manager_passwords.json.generated"
    return json.loads(generated.read_text())["admin"]


def test_anonymous_requests_are_refused_on_every_route(
    airflow_api: TestClient, replicator_env: str
) -> None:
    for route in ROUTES:
        path = route.format(run_id=replicator_env)
        response = airflow_api.get(path)
        assert response.status_code == 401, (path, response.status_code, response.text)
        assert response.json() == {"detail": "Not authenticated"}
        forged = airflow_api.get(path, headers={"Authorization": "Bearer not-a-jwt"})
        assert forged.status_code == 403, (path, forged.status_code, forged.text)
        # Not even the run's data leaks in an error.
        assert "orders" not in response.text + forged.text


def test_a_signed_in_user_gets_the_pages(
    airflow_api: TestClient, airflow_home: Path, replicator_env: str, primary: str
) -> None:
    login = airflow_api.post(
        "/auth/token", json={"username": "admin", "password": _admin_password(airflow_home)}
    )
    assert login.status_code in (200, 201), login.text
    bearer = {"Authorization": f"Bearer {login.json()['access_token']}"}

    status = airflow_api.get("/dr-status/api/status", headers=bearer)
    assert status.status_code == 200, status.text
    assert [a["name"] for a in status.json()["applications"]] == ["orders"]
    page = airflow_api.get("/dr-status/", headers=bearer)
    assert page.status_code == 200
    assert 'data-app="orders"' in page.text
    report = airflow_api.get(f"/dr-status/runs/{replicator_env}", headers=bearer)
    assert report.status_code == 200
    assert replicator_env in report.text
    apps = airflow_api.get("/dr-status/api/state/applications", headers=bearer)
    assert [a["name"] for a in apps.json()] == ["orders"]
    route = airflow_api.get("/dr-status/api/state/applications/orders", headers=bearer)
    assert route.status_code == 200, route.text
    assert (route.json()["cluster"], route.json()["bootstrap_servers"]) == ("primary", primary)
    runs = airflow_api.get("/dr-status/api/state/runs", headers=bearer).json()
    assert [r["run_id"] for r in runs] == [replicator_env]

    # The browser's way: the UI's session cookie, as after signing in to the UI.
    from airflow.api_fastapi.auth.managers.base_auth_manager import (  # noqa: PLC0415
        COOKIE_NAME_JWT_TOKEN,
    )

    airflow_api.cookies.set(COOKIE_NAME_JWT_TOKEN, login.json()["access_token"])
    try:
        assert airflow_api.get("/dr-status/api/state/flows").status_code == 200
    finally:
        airflow_api.cookies.clear()
