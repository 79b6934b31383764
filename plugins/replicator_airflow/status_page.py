"""The DR status page: a read-only FastAPI app that Airflow mounts at `/dr-status`.

One server-rendered page (no JS framework: a few lines of script re-fetch it
every few seconds) shows what `replicator.operations.dr_status` gathers: clusters, flows
with per-partition lag and checkpoint age, the active cluster of each client
application, the last verification with its Data Docs, and the history of
failovers, failbacks and drills with RPO, RTO, the procedure's duration and the
applications' downtime. `/api/status` serves the same
snapshot as JSON, `/api/state/...` the state store's own read-only API
(`replicator.statestore.http`); `/runs/{run_id}` renders one run's stored report;
the Data Docs of a verification run are served from its own site folder.

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

import html
import json
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from airflow.api_fastapi.auth.managers.models.resource_details import AccessView
from airflow.api_fastapi.core_api.security import requires_access_view
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from replicator.config import load_config
from replicator.errors import ReplicatorError
from replicator.operations import DrStatus, FlowStatus, RunSummary, dr_status
from replicator.statestore import NotFoundError, RunRecord, StateStore
from replicator.statestore.http import create_app as create_state_app
from replicator_airflow import offline_docs, run_reports
from replicator_airflow.hooks import ReplicatorHook, ReplicatorSettings

Settings = Callable[[], ReplicatorSettings]
#: Seconds between two refreshes of the page in the browser.
REFRESH_S = 10
#: Rows of one list shown in a run report; the JSON of the run has them all.
_MAX_ROWS = 2000

_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5rem;color:#1b1f24}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:1.8rem}
table{border-collapse:collapse;margin:.4rem 0}
th,td{border:1px solid #d0d7de;padding:.2rem .5rem;text-align:left;vertical-align:top}
th{background:#f3f5f7}td.num,td.lag,td.rpo,td.rto,td.duration,td.downtime{text-align:right}
.ok{color:#1a7f37}.bad{color:#cf222e;font-weight:600}.muted{color:#656d76}
.error{color:#cf222e}
"""

_REFRESH_SCRIPT = """
<script>
// Re-fetch this page (relative path) and swap its <main>, keeping the scroll position.
setInterval(async () => {
  try {
    const response = await fetch("./", {cache: "no-store"});
    if (!response.ok) return;
    const page = new DOMParser().parseFromString(await response.text(), "text/html");
    document.querySelector("main").replaceWith(page.querySelector("main"));
  } catch (e) { /* keep the last page until the server answers again */ }
}, %d);
</script>
"""


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

    def snapshot() -> DrStatus:
        current = where()
        return dr_status(load_config(current.config), stores.get(current.state_url))

    @app.get("/", response_class=HTMLResponse)
    def page() -> HTMLResponse:
        return HTMLResponse(render_status(snapshot()))

    @app.get("/api/status")
    def status() -> dict[str, Any]:
        data = snapshot().as_dict()
        runs = data["history"] + ([data["verification"]] if data["verification"] else [])
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


def render_status(status: DrStatus) -> str:
    """The whole page; the `data-*` attributes and cell classes are what browser
    tests and scrapers rely on (see plugins/README.md)."""
    sections = [
        f'<p class="muted">Snapshot at {_time(status.generated_at)}; '
        f"refreshes every {REFRESH_S} s. Read-only.</p>",
    ]
    if status.store_error:
        sections.append(f'<p class="error">DR state store: {_e(status.store_error)}</p>')
    sections += [
        _clusters(status),
        _flows(status.flows),
        _applications(status),
        _verification(status.verification),
        _history(status.history),
    ]
    return _document("DR status", "".join(sections), refresh=True)


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
    docs = (
        f'<p><a href="{_e(quote(run.run_id, safe=""))}/data-docs/index.html">Data Docs</a></p>'
        if summary.data_docs
        else ""
    )
    body = (
        '<p><a href="../">&larr; DR status</a></p>'
        f"{_value(figures)}{docs}"
        f"<h2>Parameters</h2>{_value(run.params)}"
        f"<h2>Details</h2>{_value(run.details)}"
    )
    return _document(f"{run.kind} {run.run_id}", body, refresh=False)


def _clusters(status: DrStatus) -> str:
    rows = [
        f'<tr data-cluster="{_e(c.alias)}"><td>{_e(c.alias)}</td><td>{_e(c.bootstrap)}</td>'
        + (
            f'<td class="reachable ok">reachable ({c.brokers} brokers)</td>'
            if c.reachable
            else f'<td class="reachable bad">unreachable: {_e(c.error)}</td>'
        )
        + "</tr>"
        for c in status.clusters
    ]
    return _table("Clusters", ["cluster", "bootstrap servers", "state"], rows)


def _acl_sync(flow: FlowStatus) -> str:
    """`12 ACLs synced 40 s ago`, `off`, or the last round's error."""
    acls = flow.acl_sync
    if acls is None or not acls.enabled:
        return "off"
    synced = (
        "not synced yet"
        if acls.age_seconds is None
        else f"{acls.synced} ACLs synced {acls.age_seconds:.0f} s ago"
    )
    problem = acls.error or acls.note
    return f"{synced}; {problem}" if problem else synced


def _flows(flows: list[FlowStatus]) -> str:
    rows = []
    for f in flows:
        checkpoint = f.checkpoint
        age = (
            "none yet"
            if checkpoint is None or checkpoint.age_seconds is None
            else f"{checkpoint.age_seconds:.0f} s ago ({checkpoint.checkpoints} checkpoints, "
            f"{len(checkpoint.groups)} groups)"
        )
        rows.append(
            f'<tr data-flow-summary="{_e(f.name)}"><td>{_e(f.name)}</td>'
            f'<td class="desired-state">{_e(f.desired_state)}</td>'
            f"{_workers(f)}"
            f'<td class="total-lag num">{_n(f.total_lag)}</td>'
            f'<td class="checkpoint-age">{"" if f.error else _e(age)}</td>'
            f'<td class="acl-sync">{"" if f.error else _e(_acl_sync(f))}</td>'
            f'<td class="error">{_e(f.error or "")}</td></tr>'
        )
    section = _table(
        "Flows",
        [
            "flow",
            "desired state",
            "workers",
            "lag (records)",
            "last checkpoint",
            "ACL sync",
            "problem",
        ],
        rows,
    )
    for f in flows:
        partitions = [
            f'<tr data-flow="{_e(f.name)}" data-topic="{_e(p.topic)}" '
            f'data-partition="{p.partition}"><td>{_e(p.topic)}</td>'
            f'<td class="num">{p.partition}</td><td>{_e(p.state)}</td>'
            f'<td class="lag">{_n(p.lag)}</td><td class="num">{_n(p.next_offset)}</td>'
            f'<td class="num">{p.replicated}</td><td class="num">{p.lost}</td>'
            f'<td class="reported{" stale bad" if p.stale else ""}">{_time(p.updated_at)}'
            f"{' (stale: worker gone?)' if p.stale else ''}</td>"
            f'<td class="error">{_e(p.error or "")}</td></tr>'
            for p in f.partitions
        ]
        section += _table(
            f"Partitions of {f.name}",
            [
                "topic",
                "partition",
                "state",
                "lag",
                "next offset",
                "replicated",
                "lost",
                "reported",
                "error",
            ],
            partitions,
            level=3,
        )
    return section


def _workers(flow: FlowStatus) -> str:
    """The workers cell: how many are live, and the dead ones the flow still wants
    (none replaced them), named in the cell's title."""
    dead = [w for w in flow.workers if not w.live]
    if not dead:
        return f'<td class="workers num">{flow.live_workers} live</td>'
    silent = "; ".join(f"{w.worker} ({w.state}, last report {_time(w.updated_at)})" for w in dead)
    return (
        f'<td class="workers num bad" title="{_e(silent)}">'
        f"{flow.live_workers} live, {len(dead)} dead</td>"
    )


def _applications(status: DrStatus) -> str:
    rows = [
        f'<tr data-app="{_e(a.name)}"><td>{_e(a.name)}</td>'
        f'<td class="active-cluster">{_e(a.active_cluster)}</td>'
        f'<td class="fenced{" bad" if a.fenced else ""}">{"fenced" if a.fenced else "no"}</td>'
        f'<td class="epoch num">{a.epoch}</td><td>{_time(a.updated_at)}</td></tr>'
        for a in status.applications
    ]
    return _table(
        "Applications", ["application", "active cluster", "fenced", "epoch", "changed"], rows
    )


def _verification(run: RunSummary | None) -> str:
    if run is None:
        return '<h2>Last verification</h2><p class="muted">none yet</p>'
    verdict = {"succeeded": "ok", "failed": "bad"}.get(run.outcome or "", "muted")
    failed = f" (failing: {_e(', '.join(run.failed_suites))})" if run.failed_suites else ""
    docs = (
        f' &middot; <a class="data-docs" href="{_docs_href(run.run_id)}">Data Docs</a>'
        if run.data_docs
        else ""
    )
    return (
        f'<h2>Last verification</h2><p data-verification="{_e(run.run_id)}">'
        f'<span class="verdict {verdict}">{_e(run.outcome or "in progress")}</span>{failed}, '
        f"flow {_e(run.flow)}, {_time(run.finished_at or run.started_at)} &middot; "
        f'<a href="{_report_href(run.run_id)}">report</a>{docs}</p>'
    )


def _history(runs: list[RunSummary]) -> str:
    rows = [
        f'<tr data-run="{_e(r.run_id)}"><td>{_time(r.started_at)}</td><td>{_e(r.kind)}</td>'
        f"<td>{_e(r.mode)}</td><td>{_e(r.flow)}</td>"
        f'<td class="outcome">{_e(r.outcome or "in progress")}</td>'
        f'<td class="rpo">{_n(r.rpo_records)}</td><td class="rto">{_n(r.rto_seconds)}</td>'
        f'<td class="duration">{_n(r.duration_seconds)}</td>'
        f'<td class="downtime">{_n(r.downtime_seconds)}</td>'
        f'<td><a href="{_report_href(r.run_id)}">report</a> &middot; <a class="audit-report" '
        f'href="{_report_href(r.run_id)}/{run_reports.REPORT}" download>for auditors</a></td></tr>'
        for r in runs
    ]
    headers = ["started", "kind", "mode", "flow", "outcome", "RPO (records)", "RTO (s)"]
    return _table(
        "Failovers, failbacks and drills",
        [*headers, "duration (s)", "downtime (s)", "report"],
        rows,
    )


def _table(title: str, headers: list[str], rows: list[str], level: int = 2) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    if not rows:
        return f'<h{level}>{_e(title)}</h{level}><p class="muted">none</p>'
    return f"<h{level}>{_e(title)}</h{level}><table><tr>{head}</tr>{''.join(rows)}</table>"


def _value(value: Any) -> str:
    """Stored JSON as HTML: objects as key/value tables, lists of objects (per-partition
    results) as tables with a column per key, anything else as text."""
    if isinstance(value, dict):
        rows = "".join(f"<tr><th>{_e(k)}</th><td>{_value(v)}</td></tr>" for k, v in value.items())
        return f"<table>{rows}</table>" if rows else '<span class="muted">none</span>'
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return _records(value)
    if isinstance(value, list):
        return _e(", ".join(_scalar(v) for v in value)) or '<span class="muted">none</span>'
    return _e(_scalar(value))


def _records(records: list[dict[str, Any]]) -> str:
    columns = list(dict.fromkeys(key for record in records for key in record))
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    rows = "".join(
        "<tr>" + "".join(f"<td>{_e(_scalar(r.get(c)))}</td>" for c in columns) + "</tr>"
        for r in records[:_MAX_ROWS]
    )
    more = (
        f'<p class="muted">{len(records) - _MAX_ROWS} more rows not shown</p>'
        if len(records) > _MAX_ROWS
        else ""
    )
    return f"<table><tr>{head}</tr>{rows}</table>{more}"


def _scalar(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _document(title: str, body: str, refresh: bool) -> str:
    script = _REFRESH_SCRIPT % (REFRESH_S * 1000) if refresh else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head>"
        f"<body><h1>{_e(title)}</h1><main>{body}</main>{script}</body></html>"
    )


def _report_href(run_id: str) -> str:
    return f"runs/{quote(run_id, safe='')}"


def _docs_href(run_id: str) -> str:
    return f"{_report_href(run_id)}/data-docs/index.html"


def _time(value: datetime | None) -> str:
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M:%S UTC")


def _n(value: float | None) -> str:
    return "&mdash;" if value is None else _e(str(value))


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value))


#: The app Airflow mounts (see `dr_status_plugin.py`); building it reads nothing.
app = create_app(dependencies=airflow_user_required())
