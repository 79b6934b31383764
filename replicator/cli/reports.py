"""`replicator report RUN_ID --out FILE`: one failover, failback or drill as a
self-contained HTML document for auditors (see `replicator.reports`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from replicator.cli.app import ROOT, command, exit_statuses
from replicator.cli.options import OutputOption, StateUrlOption
from replicator.cli.output import Output, emit
from replicator.cli.state import state_url
from replicator.reports import build_report, render
from replicator.statestore import StateStore


@command(
    ROOT,
    "report",
    panel="DR procedures",
    help_="a failover, failback or drill as one self-contained, printable HTML file",
    epilog=exit_statuses("no such run, or the file cannot be written", zero="written"),
)
def _report(
    *,
    run_id: Annotated[
        str,
        typer.Argument(
            metavar="RUN_ID",
            help="the run's id, or its procedure id (`replicator history` lists them)",
        ),
    ],
    out: Annotated[Path, typer.Option("--out", metavar="FILE", help="the HTML file to write")],
    state_url_: StateUrlOption = None,
    output: OutputOption = Output.table,
) -> int:
    made = build_report(StateStore(state_url(state_url_)), run_id)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(made), encoding="utf-8")
    outcome = made.run.outcome or "in progress"
    data = {"title": made.title, "run_id": made.run.run_id, "outcome": outcome, "file": out}
    emit(data, output, lambda: print(f"{made.title}, run {made.run.run_id} ({outcome}): {out}"))
    return 0
