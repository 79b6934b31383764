"""The DR status page's download of a failover, failback or drill report for
auditors: one self-contained HTML file (`replicator.reports`), the same document
`replicator report RUN_ID --out FILE` writes, made from the history on request."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter, HTTPException
from fastapi.responses import HTMLResponse

from replicator.reports import PROCEDURES, build_report, find_run, render
from replicator.statestore import StateStore

#: Where a run's report is, relative to the page (`runs/<run id>/<REPORT>`).
REPORT = "report.html"


def router(store: Callable[[], StateStore]) -> APIRouter:
    """The route, for the status page's app to include; `store` gives the state store."""
    routes = APIRouter()

    @routes.get(f"/runs/{{run_id}}/{REPORT}", response_class=HTMLResponse)
    def audit_report(run_id: str) -> HTMLResponse:
        history = store()
        run = find_run(history.runs, run_id)
        if run.kind not in PROCEDURES:
            raise HTTPException(
                404, f"run {run_id} is a {run.kind}: reports are made for {', '.join(PROCEDURES)}"
            )
        name = f"{run.kind}-{run.run_id}.html"
        return HTMLResponse(
            render(build_report(history, run.run_id)),
            headers={"Content-Disposition": f'inline; filename="{name}"'},
        )

    return routes
