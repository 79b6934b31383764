"""Read-only HTTP view of the DR state store, for the Airflow UI page and scripts.

The app is plain FastAPI with no Airflow import, so it runs under uvicorn on
its own or mounted by an Airflow plugin at any prefix (routes are relative; the
DR status plugin mounts it at `/dr-status/api/state`). Airflow does not
authenticate the apps of plugins, so a host passes its own authentication as
`dependencies`, which every route requires (the plugin passes Airflow's auth
manager check); and no route here changes state.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.responses import JSONResponse

from replicator.config.model import ReplicatorConfig
from replicator.errors import ReplicatorError
from replicator.statestore.discovery import Route, where
from replicator.statestore.errors import NotFoundError
from replicator.statestore.records import Application, FlowState, RunRecord
from replicator.statestore.store import StateStore

_MAX_RUNS = 1000

#: A store, or what gives it on each request (a host that reads it from its settings).
StoreSource = StateStore | Callable[[], StateStore]
#: A configuration, or what gives it on each request; None: applications without routes.
ConfigSource = ReplicatorConfig | Callable[[], ReplicatorConfig | None] | None


def create_app(
    store: StoreSource, config: ConfigSource = None, dependencies: Sequence[Any] = ()
) -> FastAPI:
    """The API over `store`; with `config`, `/applications/{name}` answers with the
    route (bootstrap servers) as client applications would get it. `dependencies`
    (FastAPI `Depends(...)`) run before every route: a host's authentication."""
    current_store = store if callable(store) else lambda: store
    current_config = config if callable(config) else lambda: config
    app = FastAPI(
        title="Kafka DR state",
        description="Active cluster of each application, DR run history, flow states.",
        dependencies=list(dependencies),
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
        return current_store().applications.all()

    @app.get("/applications/{name}")
    def application(name: str) -> Route | Application:
        state, routes = current_store(), current_config()
        return (
            state.applications.get(name)
            if routes is None
            else where(name, routes, state.applications)
        )

    @app.get("/runs")
    def runs(
        kind: str | None = None, limit: int = Query(default=50, ge=1, le=_MAX_RUNS)
    ) -> list[RunRecord]:
        return current_store().runs.recent(kind=kind or None, limit=limit)

    @app.get("/runs/{run_id}")
    def run(run_id: str) -> RunRecord:
        return current_store().runs.get(run_id)

    @app.get("/flows")
    def flows() -> list[FlowState]:
        return current_store().flows.all()

    return app
