"""`replicator clients where|list|register` and `replicator history`: the DR state store."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.table import Column

from replicator.cli.app import ROOT, command, exit_statuses, group
from replicator.cli.options import ConfigOption, JsonOption, OutputOption, StateUrlOption
from replicator.cli.output import Output, chosen, emit, print_table
from replicator.cli.state import state_url
from replicator.config import load_config
from replicator.statestore import Application, ClientState, RunRecord, StateStore, where

CLIENTS = group(
    "clients",
    "where client applications connect, and what their clients report",
    "Client applications",
)

ApplicationArgument = Annotated[
    str, typer.Argument(metavar="APPLICATION", help="the application (= its consumer group)")
]


@command(
    CLIENTS,
    "where",
    help_="the cluster an application must connect to now",
    epilog=exit_statuses("the application is not registered, or an error"),
)
def _where(
    *,
    application: ApplicationArgument,
    config: ConfigOption,
    state_url_: StateUrlOption = None,
    output: OutputOption = Output.table,
    json_: JsonOption = False,
) -> int:
    route = where(application, load_config(config), StateStore(state_url(state_url_)).applications)
    fenced = "FENCED (clients must not run)" if route.fenced else "not fenced"
    emit(
        asdict(route),
        chosen(output, json_),
        lambda: print(
            f"{route.application}: cluster {route.cluster} ({route.bootstrap_servers}), "
            f"epoch {route.epoch}, {fenced}"
        ),
    )
    return 0


@command(CLIENTS, "list", help_="applications, active clusters and their clients")
def _list(
    *,
    state_url_: StateUrlOption = None,
    output: OutputOption = Output.table,
    json_: JsonOption = False,
) -> int:
    store = StateStore(state_url(state_url_))
    listing = [(app, store.applications.clients(app.name)) for app in store.applications.all()]
    data = [{**asdict(app), "clients": [asdict(c) for c in cs]} for app, cs in listing]
    emit(data, chosen(output, json_), lambda: _print_list(store, listing))
    return 0


def _print_list(store: StateStore, listing: list[tuple[Application, list[ClientState]]]) -> None:
    if not listing:
        print(f"no applications registered in {store}")
        return
    print_table(
        ("APPLICATION", "ACTIVE ON", "EPOCH", "STATE"),
        [
            (app.name, app.active_cluster, str(app.epoch), "FENCED" if app.fenced else "running")
            for app, _ in listing
        ],
    )
    now = datetime.now(UTC)
    reported = [
        (
            app.name,
            client.role,
            client.client_id,
            client.cluster,
            f"{client.state} at epoch {client.epoch}",
            f"{(now - client.last_seen).total_seconds():.1f}s ago",
        )
        for app, clients in listing
        for client in clients
    ]
    columns = ("APPLICATION", "ROLE", "CLIENT", "CLUSTER", "STATE", "SEEN")
    print_table(columns, reported, title="clients")


@command(
    CLIENTS, "register", help_="register an application on its active cluster (kept if registered)"
)
def _register(
    *,
    application: ApplicationArgument,
    cluster: Annotated[str, typer.Option("--cluster", metavar="ALIAS", help="its active cluster")],
    state_url_: StateUrlOption = None,
    output: OutputOption = Output.table,
) -> int:
    app = StateStore(state_url(state_url_)).applications.register(application, cluster)
    emit(asdict(app), output, lambda: _print_registered(app, cluster))
    return 0


def _print_registered(app: Application, cluster: str) -> None:
    if app.active_cluster == cluster:
        print(f"{app.name} is registered, active on {app.active_cluster} (epoch {app.epoch})")
    else:
        print(
            f"{app.name} was registered already and stays active on {app.active_cluster} "
            f"(epoch {app.epoch}); a failover procedure moves it, not registration"
        )


@command(
    ROOT, "history", panel="DR procedures", help_="failovers, failbacks, drills, verifications"
)
def _history(
    *,
    kind: Annotated[
        str | None,
        typer.Option(
            "--kind", metavar="KIND", help="only runs of this kind (e.g. failover, drill)"
        ),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", metavar="N", help="newest N runs")] = 50,
    state_url_: StateUrlOption = None,
    output: OutputOption = Output.table,
    json_: JsonOption = False,
) -> int:
    runs = StateStore(state_url(state_url_)).runs.recent(kind=kind, limit=limit)
    emit([asdict(run) for run in runs], chosen(output, json_), lambda: _print_runs(runs, kind))
    return 0


def _print_runs(runs: list[RunRecord], kind: str | None) -> None:
    if not runs:
        print("no runs recorded" + (f" of kind {kind!r}" if kind else ""))
        return
    rows = [
        (
            f"{run.started_at:%Y-%m-%d %H:%M:%SZ}",
            run.run_id,
            run.flow or "-",
            run.mode or "-",
            run.outcome or "running",
            "-" if run.rpo_records is None else f"{run.rpo_records} records",
            "-" if run.rto_seconds is None else f"{run.rto_seconds:.1f}s",
        )
        for run in runs
    ]
    # A run's id is what `replicator abort` and `replicator report` take: it stays on one
    # line, to be copied whole; the other columns wrap first.
    run_id = Column("RUN", no_wrap=True)
    print_table(("STARTED", run_id, "FLOW", "MODE", "OUTCOME", "RPO", "RTO"), rows)
