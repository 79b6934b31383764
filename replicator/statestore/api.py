"""Read-only HTTP view of the DR state store, for the Airflow UI page and scripts.

The app is plain FastAPI with no Airflow import, so it runs under uvicorn on
its own or mounted by an Airflow plugin at any prefix (routes are relative).
Airflow does not authenticate plugin routes, hence no route here changes state.
"""

from __future__ import annotations

from fastapi import FastAPI, Query, Request
from fastapi.responses import JSONResponse

from replicator.config.model import ReplicatorConfig
from replicator.errors import ReplicatorError
from replicator.statestore.discovery import Route, where
from replicator.statestore.store import (
    Application,
    FlowState,
    NotFoundError,
    RunRecord,
    StateStore,
)

_MAX_RUNS = 1000


def create_app(store: StateStore, config: ReplicatorConfig | None = None) -> FastAPI:
    """The API over `store`; with `config`, `/applications/{name}` answers with the
    route (bootstrap servers) as client applications would get it."""
    app = FastAPI(
        title="Kafka DR state",
        description="Active cluster of each application, DR run history, flow states.",
    )

    @app.exception_handler(NotFoundError)
    def _not_found(_request: Request, exc: NotFoundError) -> JSONResponse:
        return JSONResponse(status_code=404, content={"detail": str(exc)})

    @app.exception_handler(ReplicatorError)
    def _conflict(_request: Request, exc: ReplicatorError) -> JSONResponse:
        # The store and the configuration disagree (e.g. an unknown active cluster).
        return JSONResponse(status_code=409, content={"detail": str(exc)})

    @app.get("/applications")
    def applications() -> list[Application]:
        return store.applications()

    @app.get("/applications/{name}")
    def application(name: str) -> Route | Application:
        return store.application(name) if config is None else where(name, config, store)

    @app.get("/runs")
    def runs(
        kind: str | None = None, limit: int = Query(default=50, ge=1, le=_MAX_RUNS)
    ) -> list[RunRecord]:
        return store.runs(kind=kind or None, limit=limit)

    @app.get("/runs/{run_id}")
    def run(run_id: str) -> RunRecord:
        return store.run(run_id)

    @app.get("/flows")
    def flows() -> list[FlowState]:
        return store.flow_states()

    return app
