"""The DR status page: a read-only FastAPI app that Airflow mounts at `/dr-status`.

One server-rendered page, made to be read in five seconds: at the top one verdict
per flow (healthy, degraded or failing, with the supervisor's reasons:
`replicator.operations.verdicts`) beside small charts of its lag and checkpoint
age over the last hours (the supervisor's samples, inline SVG); then clusters,
flows, partitions grouped per topic (worst lag, stopped and lost counts; the
partitions behind a `<details>`), the active cluster of each client application,
the last verification with its figures, Data Docs and trend across runs, and the
failovers, failbacks and drills with RPO, RTO, duration and downtime, their trend
and their reports for auditors. `/api/status` serves the same snapshot as JSON
(with the verdicts), `/api/state/...` the state store's own read-only API
(`replicator.statestore.http`); `/runs/{run_id}` renders one run's stored report;
the Data Docs of a verification run are served from its own site folder.

The HTML comes from the Jinja2 templates in `templates/` (autoescaped; the
charts' geometry from `status_charts`, the page's shape from `status_view`). It
fetches nothing: no CDN, no chart library; a few lines of script re-fetch it
every few seconds, keeping the topics the reader opened.

Airflow authenticates its own API but not the apps of plugins, which it mounts
as they are: the app Airflow mounts requires, on every route, a user signed in
to Airflow and allowed to use its UI, checked by Airflow's auth manager
(`airflow_user_required`: the UI's session cookie, or a bearer token from
`POST /auth/token`); anonymous requests get 401, invalid tokens 403. Nothing here
changes state either: every route is a GET that reads the clusters or the state
store. Links and the
refresh script use relative paths, so the page works under any base URL and
inside the Airflow UI's iframe. Where the configuration and the state store
are is asked of `ReplicatorHook` on every request (nothing at import: the
plugin is imported by every Airflow component, the DAG processor included).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

from airflow.api_fastapi.auth.managers.models.resource_details import AccessView
from airflow.api_fastapi.core_api.security import requires_access_view
from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from replicator.errors import ReplicatorError
from replicator.operations import CheckpointTallies, Overview, overview
from replicator.statestore import NotFoundError, RunRecord, StateStore
from replicator.statestore.http import create_app as create_state_app
from replicator_airflow import offline_docs, run_reports
from replicator_airflow.hooks import ReplicatorHook, ReplicatorSettings
from replicator_airflow.status_render import (
    WINDOW_H,
    docs_href,
    render_run,
    render_status,
    report_href,
)

Settings = Callable[[], ReplicatorSettings]
#: The most hours of samples the page's charts show (`?hours=`).
MAX_WINDOW_H = 48.0


def airflow_user_required() -> list[Any]:
    """Airflow's own check, as its UI's routes have it: a signed-in user whom the
    auth manager allows to use the Airflow UI (the "website" view)."""
    return [Depends(requires_access_view(AccessView.WEBSITE))]


def create_app(settings: Settings | None = None, dependencies: Sequence[Any] = ()) -> FastAPI:
    """The app; `settings` says where the configuration and the state store are
    (default: `ReplicatorHook`, i.e. the connection `replicator_default` or
    `$REPLICATOR_CONFIG` / `$REPLICATOR_STATE_URL`); `dependencies` run before every
    route, the mounted state store API's included (a mounted app inherits none)."""
    where = settings or (lambda: ReplicatorHook().settings())
    stores = _Stores()
    #: Each flow's checkpoints as counted at the last page load: a refresh reads only
    #: what was written since (2,000,000 of them take 20 s to read whole).
    tallies = CheckpointTallies()
    app = FastAPI(
        title="Kafka DR status",
        description="Read-only: clusters, flows, lag, checkpoints, applications, DR history.",
        dependencies=list(dependencies),
    )
    app.mount(
        "/api/state",
        create_state_app(
            lambda: stores.get(where().state_url),
            lambda: where().load_config(),
            dependencies,
        ),
    )

    @app.exception_handler(ReplicatorError)
    def _unavailable(_request: Request, exc: ReplicatorError) -> JSONResponse:
        # Configuration missing or unreadable, store unavailable: say which, plainly.
        status = 404 if isinstance(exc, NotFoundError) else 503
        return JSONResponse(status_code=status, content={"detail": str(exc)})

    def snapshot(hours: float) -> Overview:
        current = where()
        store = stores.get(current.state_url)
        return overview(current.load_config(), store, timedelta(hours=hours), tallies)

    @app.get("/", response_class=HTMLResponse)
    def page(hours: Window = WINDOW_H) -> HTMLResponse:
        return HTMLResponse(render_status(snapshot(hours), timedelta(hours=hours)))

    @app.get("/api/status")
    def status(hours: Window = WINDOW_H) -> dict[str, Any]:
        data = snapshot(hours).as_dict()
        runs = data["history"] + data["verifications"]
        runs += [data["verification"]] if data["verification"] else []
        for run in runs:
            run["report_url"] = report_href(run["run_id"])
            run["data_docs_url"] = docs_href(run["run_id"]) if run["data_docs"] else None
        return data

    @app.get("/runs/{run_id}", response_class=HTMLResponse)
    def run_report(run_id: str) -> HTMLResponse:
        return HTMLResponse(render_run(stores.get(where().state_url).runs.get(run_id)))

    @app.get("/runs/{run_id}/data-docs/{path:path}")
    def data_docs(run_id: str, path: str) -> Response:
        run = stores.get(where().state_url).runs.get(run_id)
        return offline_docs.data_docs_response(docs_file(run, path), path)

    app.include_router(offline_docs.router())
    app.include_router(run_reports.router(lambda: stores.get(where().state_url)))
    return app


def docs_file(run: RunRecord, path: str) -> Path:
    """The file `path` of `run`'s Data Docs site: only files inside the folder that
    holds its index.html (resolved, so neither `..` nor a symlink leads out)."""
    index = run.details.get("data_docs")
    if not isinstance(index, str):
        raise HTTPException(404, f"run {run.run_id} has no Data Docs")
    root = Path(index).resolve().parent
    wanted = (root / (path or "index.html")).resolve()
    if not wanted.is_relative_to(root) or not wanted.is_file():
        raise HTTPException(404, f"no file {path!r} in the Data Docs of run {run.run_id}")
    return wanted


class _Stores:
    """One `StateStore` (one connection pool) per state URL, made on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stores: dict[str | None, StateStore] = {}

    def get(self, url: str | None) -> StateStore:
        with self._lock:
            if url not in self._stores:
                self._stores[url] = StateStore(url)
            return self._stores[url]


#: The `hours` of the page's charts: a quarter of an hour to two days.
Window = Annotated[float, Query(ge=0.25, le=MAX_WINDOW_H, description="hours of the charts")]


#: The app Airflow mounts (see `dr_status_plugin.py`); building it reads nothing.
app = create_app(dependencies=airflow_user_required())
