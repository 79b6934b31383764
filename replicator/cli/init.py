"""`replicator init`: make your own clusters and state store ready for `replicator run`
(see `replicator.init`): check every cluster and the principal's ACLs, create the
internal topics, migrate the state store, register the applications. Safe to run
again; `--dry-run` changes nothing and says what it would do. Exit 1 when a cluster
does not answer, a step fails or the principal lacks an ACL of its plan."""

from __future__ import annotations

from typing import Annotated

import typer

from replicator.cli.app import ROOT, command, exit_statuses
from replicator.cli.options import (
    ConfigOption,
    DryRunOption,
    JsonOption,
    OutputOption,
    StateUrlOption,
)
from replicator.cli.output import Output, chosen, emit, print_table
from replicator.cli.state import state_url
from replicator.config import load_config
from replicator.init import initialize
from replicator.init.report import InitReport


@command(
    ROOT,
    "init",
    panel="Set-up",
    help_="check the clusters and ACLs, create the internal topics, migrate the state "
    "store and register the applications (safe to run again)",
    epilog=exit_statuses(
        "a cluster does not answer, a step fails or the principal lacks an ACL of its plan",
        zero="ready for `replicator run`",
    ),
)
def _init(
    *,
    config: ConfigOption,
    state_url_: StateUrlOption = None,
    home: Annotated[
        str | None,
        typer.Option(
            "--home",
            metavar="CLUSTER",
            help="the cluster the applications run on now: flows into it start stopped and "
            "the configuration's applications are registered there (needed when it names any)",
        ),
    ] = None,
    dry_run: DryRunOption = False,
    output: OutputOption = Output.table,
    json_: JsonOption = False,
) -> int:
    report = initialize(load_config(config), state_url(state_url_), home, dry_run=dry_run)
    emit(report.as_json(), chosen(output, json_), lambda: _print(report))
    return 0 if report.ready else 1


def _print(report: InitReport) -> None:
    print_table(
        ("STEP", "OUTCOME", "CLUSTER", "FINDING"),
        [(f.step, f.outcome, f.cluster or "-", f.text) for f in report.findings],
    )
    print(report.summary())
