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

import json
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from airflow.api_fastapi.auth.managers.models.resource_details import AccessView
from airflow.api_fastapi.core_api.security import requires_access_view
from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from jinja2 import Environment, PackageLoader, StrictUndefined

from replicator.config import load_config
from replicator.errors import ReplicatorError
from replicator.operations import RunSummary
from replicator.operations.verdicts import Overview, overview
from replicator.statestore import NotFoundError, RunRecord, StateStore
from replicator.statestore.http import create_app as create_state_app
from replicator_airflow import offline_docs, run_reports, status_charts
from replicator_airflow.hooks import ReplicatorHook, ReplicatorSettings
from replicator_airflow.status_view import page_view

Settings = Callable[[], ReplicatorSettings]
#: Seconds between two refreshes of the page in the browser.
REFRESH_S = 10
#: Rows of one list shown in a run report; the JSON of the run has them all.
_MAX_ROWS = 2000

#: Hours of samples the page's charts show by default, and at most (`?hours=`).
WINDOW_H = 6.0
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
    app = FastAPI(
        title="Kafka DR status",
        description="Read-only: clusters, flows, lag, checkpoints, applications, DR history.",
        dependencies=list(dependencies),
    )
    app.mount(
        "/api/state",
        create_state_app(
            lambda: stores.get(where().state_url),
            lambda: load_config(where().config),
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
        return overview(load_config(current.config), store, timedelta(hours=hours))

    @app.get("/", response_class=HTMLResponse)
    def page(hours: Window = WINDOW_H) -> HTMLResponse:
        return HTMLResponse(render_status(snapshot(hours), timedelta(hours=hours)))

    @app.get("/api/status")
    def status(hours: Window = WINDOW_H) -> dict[str, Any]:
        data = snapshot(hours).as_dict()
        runs = data["history"] + data["verifications"]
        runs += [data["verification"]] if data["verification"] else []
        for run in runs:
            run["report_url"] = _report_href(run["run_id"])
            run["data_docs_url"] = _docs_href(run["run_id"]) if run["data_docs"] else None
        return data

    @app.get("/runs/{run_id}", response_class=HTMLResponse)
    def run_report(run_id: str) -> HTMLResponse:
        return HTMLResponse(render_run(stores.get(where().state_url).run(run_id)))

    @app.get("/runs/{run_id}/data-docs/{path:path}")
    def data_docs(run_id: str, path: str) -> Response:
        run = stores.get(where().state_url).run(run_id)
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


# --- rendering ----------------------------------------------------------------------

#: The `hours` of the page's charts: a quarter of an hour to two days.
Window = Annotated[float, Query(gt=0.24, le=MAX_WINDOW_H, description="hours of the charts")]


def render_status(data: Overview, window: timedelta = timedelta(hours=WINDOW_H)) -> str:
    """The whole page; the `data-*` attributes and cell classes are what browser
    tests and scrapers rely on (see plugins/README.md)."""
    view = page_view(data.status, data.verdicts, data.samples, window, REFRESH_S)
    return _TEMPLATES.get_template("status.html.j2").render(
        title="DR status", page=view, samples_error=data.samples_error
    )


def render_run(run: RunRecord) -> str:
    """One run's report: its figures, parameters and stored details (per-partition
    results of a drill, steps of a failover, suites of a verification)."""
    summary = RunSummary.of(run)
    figures = {
        "kind": run.kind,
        "flow": run.flow,
        "mode": run.mode,
        "outcome": run.outcome or "in progress",
        "RPO (records)": run.rpo_records,
        "RTO (s)": run.rto_seconds,
        "duration (s)": summary.duration_seconds,
        "downtime (s)": summary.downtime_seconds,
        "started": _time(run.started_at),
        "finished": _time(run.finished_at),
    }
    return _TEMPLATES.get_template("run.html.j2").render(
        title=f"{run.kind} {run.run_id}",
        run=run,
        figures=figures,
        data_docs=bool(summary.data_docs),
        max_rows=_MAX_ROWS,
    )


def _environment() -> Environment:
    """The page's templates, shipped with the plugin package; autoescaped."""
    env = Environment(
        loader=PackageLoader("replicator_airflow", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        time=_time,
        figure=_figure,
        scalar=_scalar,
        columns=_columns,
        hours=_hours,
        short=_short,
        report_href=_report_href,
        docs_href=_docs_href,
        urlpart=lambda value: quote(str(value), safe=""),
    )
    env.tests.update(records=_is_records, datetime=lambda value: isinstance(value, datetime))
    env.globals.update(
        width=status_charts.WIDTH,
        height=status_charts.HEIGHT,
        audit_report=run_reports.REPORT,
    )
    return env


def _is_records(value: Any) -> bool:
    """A list of objects (per-partition results): shown as a table, a column per key."""
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _columns(records: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(key for record in records for key in record))


def _scalar(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _figure(value: float | None, unit: str = "") -> str:
    """A figure as stored (the JSON API's value), an em dash when unknown."""
    return "\u2014" if value is None else f"{value}{unit}"


def _short(value: float | None) -> str:
    """A chart's figure: 5,000 for 5000.0, 12.5 for 12.5, an em dash when unknown."""
    if value is None:
        return "\u2014"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _hours(window: timedelta) -> str:
    minutes = window.total_seconds() / 60
    return f"{minutes:.0f} min" if minutes < 120 else f"{minutes / 60:g} h"


def _report_href(run_id: str) -> str:
    return f"runs/{quote(run_id, safe='')}"


def _docs_href(run_id: str) -> str:
    return f"{_report_href(run_id)}/data-docs/index.html"


def _time(value: datetime | None) -> str:
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M:%S UTC")


_TEMPLATES = _environment()

#: The app Airflow mounts (see `dr_status_plugin.py`); building it reads nothing.
app = create_app(dependencies=airflow_user_required())
