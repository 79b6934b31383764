"""`replicator report RUN_ID --out FILE`: one failover, failback or drill as a
self-contained HTML document for auditors (see `replicator.reports`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from replicator.reports import build_report, render
from replicator.statestore import STATE_URL_ENV, StateStore


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    report = commands.add_parser(
        "report",
        help="a failover, failback or drill as one self-contained, printable HTML file",
    )
    report.add_argument(
        "run_id", help="the run's id, or its procedure id (`replicator history` lists them)"
    )
    report.add_argument("--out", type=Path, required=True, help="the HTML file to write")
    report.add_argument(
        "--state-url", help=f"SQLAlchemy URL of the state store (default ${STATE_URL_ENV})"
    )
    report.set_defaults(handler=_report)


def _report(args: argparse.Namespace) -> int:
    made = build_report(StateStore(args.state_url), args.run_id)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(made), encoding="utf-8")
    print(f"{made.title}, run {made.run.run_id} ({made.run.outcome or 'in progress'}): {args.out}")
    return 0
