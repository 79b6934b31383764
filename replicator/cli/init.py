"""`replicator init`: make your own clusters and state store ready for `replicator run`
(see `replicator.init`): check every cluster and the principal's ACLs, create the
internal topics, migrate the state store, register the applications. Safe to run
again; `--dry-run` changes nothing and says what it would do.

Exit statuses: 0 ready; 1 a real problem (a cluster refuses the client, a step fails,
the principal lacks an ACL of its plan, a configuration or state store error); 3
partial: some clusters did not answer, everything that answered is ready (0 with
`--allow-unreachable`, for a start-up step that must not keep the workers from starting
during an outage: docker-compose.yml, the Helm chart's init Job)."""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from replicator.cli.app import ROOT, command
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
from replicator.init.report import EXIT_PARTIAL, UNREACHABLE, InitReport

log = logging.getLogger(__name__)

_EXITS = (
    "Exit status: 0 ready for `replicator run`; 1 a real problem: a cluster refuses the "
    "client (authentication, TLS), a step fails, the principal lacks an ACL of its plan; "
    f"{EXIT_PARTIAL} partial: some clusters did not answer (each is named with the fix), "
    "everything on the clusters that answered is ready (0 with --allow-unreachable); 2 a "
    "usage error (unknown option, missing or invalid value)."
)


@command(
    ROOT,
    "init",
    panel="Set-up",
    help_="check the clusters and ACLs, create the internal topics, migrate the state "
    "store and register the applications (safe to run again)",
    epilog=_EXITS,
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
    allow_unreachable: Annotated[
        bool,
        typer.Option(
            "--allow-unreachable",
            metavar="",
            help=f"exit 0 instead of {EXIT_PARTIAL} when the only problem is clusters that "
            "did not answer (they are still named, with the fix): for a start-up step "
            "that must let the workers start during an outage",
        ),
    ] = False,
    dry_run: DryRunOption = False,
    output: OutputOption = Output.table,
    json_: JsonOption = False,
) -> int:
    report = initialize(load_config(config), state_url(state_url_), home, dry_run=dry_run)
    emit(report.as_json(), chosen(output, json_), lambda: _print(report))
    _warn_unreachable(report, allow_unreachable=allow_unreachable)
    return report.exit_status(allow_unreachable=allow_unreachable)


def _warn_unreachable(report: InitReport, *, allow_unreachable: bool) -> None:
    """One warning per cluster that did not answer, on stderr (whatever the output
    format), so that a start-up step's log says it even when it exits 0."""
    for finding in report.findings:
        if finding.outcome == UNREACHABLE:
            log.warning("cluster %s: %s", finding.cluster, finding.text)
    if report.partial:
        status = 0 if allow_unreachable else EXIT_PARTIAL
        log.warning(
            "init is PARTIAL (exit status %d): did not answer: %s",
            status, ", ".join(report.unreachable),
        )  # fmt: skip


def _print(report: InitReport) -> None:
    print_table(
        ("STEP", "OUTCOME", "CLUSTER", "FINDING"),
        [(f.step, f.outcome, f.cluster or "-", f.text) for f in report.findings],
    )
    print(report.summary())
