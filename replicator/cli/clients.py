"""`replicator clients where|list|register` and `replicator history`: the DR state store."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from replicator.config import load_config
from replicator.statestore import STATE_URL_ENV, StateStore, where


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    clients = commands.add_parser(
        "clients", help="where client applications connect, and what their clients report"
    )
    actions = clients.add_subparsers(dest="action", required=True, metavar="ACTION")

    where_ = actions.add_parser("where", help="the cluster an application must connect to now")
    where_.add_argument("application")
    where_.add_argument(
        "--config", type=Path, required=True, help="mm2.properties-style configuration"
    )
    _add_state_url(where_)
    _add_json(where_)
    where_.set_defaults(handler=_where)

    list_ = actions.add_parser("list", help="applications, active clusters and their clients")
    _add_state_url(list_)
    _add_json(list_)
    list_.set_defaults(handler=_list)

    add = actions.add_parser(
        "register", help="register an application on its active cluster (kept if registered)"
    )
    add.add_argument("application")
    add.add_argument("--cluster", required=True, metavar="ALIAS", help="its active cluster")
    _add_state_url(add)
    add.set_defaults(handler=_register)

    history = commands.add_parser("history", help="failovers, failbacks, drills, verifications")
    history.add_argument("--kind", help="only runs of this kind (e.g. failover, drill)")
    history.add_argument("--limit", type=int, default=50, help="newest N runs (default 50)")
    _add_state_url(history)
    _add_json(history)
    history.set_defaults(handler=_history)


def _add_state_url(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state-url",
        metavar="URL",
        help=f"SQLAlchemy URL of the state store (default ${STATE_URL_ENV}, "
        "else sqlite:///.data/state/replicator.db)",
    )


def _add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")


def _print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, default=_jsonable)
    print()


def _jsonable(value: object) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _where(args: argparse.Namespace) -> int:
    route = where(args.application, load_config(args.config), StateStore(args.state_url))
    if args.json:
        _print_json(asdict(route))
        return 0
    fenced = "FENCED (clients must not run)" if route.fenced else "not fenced"
    print(
        f"{route.application}: cluster {route.cluster} ({route.bootstrap_servers}), "
        f"epoch {route.epoch}, {fenced}"
    )
    return 0


def _list(args: argparse.Namespace) -> int:
    store = StateStore(args.state_url)
    listing = [(app, store.clients(app.name)) for app in store.applications()]
    if args.json:
        _print_json([{**asdict(app), "clients": [asdict(c) for c in cs]} for app, cs in listing])
        return 0
    if not listing:
        print(f"no applications registered in {store}")
    now = datetime.now(UTC)
    for app, clients in listing:
        fenced = "FENCED" if app.fenced else "running"
        print(f"{app.name:<24} active on {app.active_cluster:<12} epoch {app.epoch:<5} {fenced}")
        for client in clients:
            seen = (now - client.last_seen).total_seconds()
            print(
                f"  {client.role:<10} {client.client_id:<36} on {client.cluster:<12} "
                f"{client.state} at epoch {client.epoch}, seen {seen:.1f}s ago"
            )
    return 0


def _register(args: argparse.Namespace) -> int:
    app = StateStore(args.state_url).register_application(args.application, args.cluster)
    if app.active_cluster == args.cluster:
        print(f"{app.name} is registered, active on {app.active_cluster} (epoch {app.epoch})")
    else:
        print(
            f"{app.name} was registered already and stays active on {app.active_cluster} "
            f"(epoch {app.epoch}); a failover procedure moves it, not registration"
        )
    return 0


def _history(args: argparse.Namespace) -> int:
    runs = StateStore(args.state_url).runs(kind=args.kind, limit=args.limit)
    if args.json:
        _print_json([asdict(run) for run in runs])
        return 0
    if not runs:
        print("no runs recorded" + (f" of kind {args.kind!r}" if args.kind else ""))
    for run in runs:
        rpo = "-" if run.rpo_records is None else f"{run.rpo_records} records"
        rto = "-" if run.rto_seconds is None else f"{run.rto_seconds:.1f}s"
        print(
            f"{run.started_at:%Y-%m-%d %H:%M:%SZ}  {run.run_id:<44} {run.flow or '-':<16} "
            f"{run.mode or '-':<10} {run.outcome or 'running':<10} RPO {rpo}, RTO {rto}"
        )
    return 0
