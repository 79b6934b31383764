"""`replicator failover|failback|drill|abort`: DR procedures from the shell, a line per step."""

from __future__ import annotations

import getpass
import json
import socket
from dataclasses import asdict
from enum import StrEnum
from typing import Annotated

import typer

from replicator.cli.app import ROOT, command, exit_statuses
from replicator.cli.offset_reset import PROCEDURE_EXITS
from replicator.cli.options import (
    ConfigOption,
    DryRunOption,
    OutputOption,
    ProcedureIdOption,
    StateUrlOption,
    TimeoutOption,
    flag,
)
from replicator.cli.output import Output, emit, print_table
from replicator.cli.progress import steps_of
from replicator.cli.state import state_url
from replicator.config import load_config
from replicator.errors import ReplicatorError
from replicator.procedures import Drill, Failback, Failover, FullDrill, Procedure, ProcedureReport
from replicator.procedures.abort import AbortReport, abort
from replicator.procedures.phases import phases_line
from replicator.statestore import StateStore


class FailoverMode(StrEnum):
    planned = "planned"
    unplanned = "unplanned"


class Reconcile(StrEnum):
    replicate = "replicate"
    report = "report"


class DrillMode(StrEnum):
    non_disruptive = "non-disruptive"
    full = "full"


AppsOption = Annotated[
    list[str],
    typer.Option("--app", metavar="APP", help="application (= consumer group); repeatable"),
]


@command(
    ROOT,
    "failover",
    panel="DR procedures",
    help_="move applications to a flow's target cluster (resumable steps)",
    epilog=PROCEDURE_EXITS,
)
def _failover(
    *,
    config: ConfigOption,
    flow: Annotated[str, typer.Option("--flow", metavar="A:B", help="from A to B")],
    app: AppsOption,
    mode: Annotated[
        FailoverMode,
        typer.Option(
            "--mode",
            metavar="planned|unplanned",
            help="planned waits for the lag; unplanned does not",
        ),
    ] = FailoverMode.planned,
    reverse: Annotated[bool, flag("--reverse", "then start the flow B->A")] = False,
    max_lag: Annotated[
        int, typer.Option("--max-lag", metavar="RECORDS", help="planned: lag bound")
    ] = 100_000,
    grant_write: Annotated[
        bool,
        flag(
            "--grant-write",
            "before the switch, give the applications' producers WRITE on B's topics "
            "(applications.<name>.producer.principals); the failback removes it",
        ),
    ] = False,
    dry_run: DryRunOption = False,
    id_: ProcedureIdOption = None,
    timeout: TimeoutOption = 120.0,
    state_url_: StateUrlOption = None,
    output: OutputOption = Output.table,
) -> int:
    procedure = Failover(
        load_config(config),
        flow,
        app,
        StateStore(state_url(state_url_)),
        mode=mode.value,
        reverse=reverse,
        dry_run=dry_run,
        max_lag=max_lag,
        timeout_s=timeout,
        grant_write=grant_write,
    )
    return _run(procedure, id_, output)


@command(
    ROOT,
    "failback",
    panel="DR procedures",
    help_="move applications back to a flow's source after a failover (resumable steps)",
    epilog=PROCEDURE_EXITS,
)
def _failback(
    *,
    config: ConfigOption,
    flow: Annotated[
        str,
        typer.Option(
            "--flow", metavar="A:B", help="the flow they failed over with (they go back to A)"
        ),
    ],
    app: AppsOption,
    reconcile: Annotated[
        Reconcile,
        typer.Option(
            "--reconcile",
            metavar="replicate|report",
            help="records A holds that never reached B: copy them to B first (replicate), or "
            "list them and let the groups skip them (report)",
        ),
    ] = Reconcile.replicate,
    keep_write: Annotated[
        bool,
        flag(
            "--keep-write",
            "keep the WRITE the failover's --grant-write gave the producers on B "
            "(default: remove exactly what it created)",
        ),
    ] = False,
    dry_run: DryRunOption = False,
    id_: ProcedureIdOption = None,
    timeout: TimeoutOption = 120.0,
    state_url_: StateUrlOption = None,
    output: OutputOption = Output.table,
) -> int:
    procedure = Failback(
        load_config(config),
        flow,
        app,
        StateStore(state_url(state_url_)),
        reconcile=reconcile.value,
        dry_run=dry_run,
        timeout_s=timeout,
        revoke_write=not keep_write,
    )
    return _run(procedure, id_, output)


@command(
    ROOT,
    "drill",
    panel="DR procedures",
    help_="non-disruptive DR drill: shadow groups on the target checked record by record "
    "(resumable steps)",
    epilog=exit_statuses(
        "a step failed or the drill found records that do not match (the report names them)",
        zero="the drill passed, or the dry run planned it",
    ),
)
def _drill(
    *,
    config: ConfigOption,
    flow: Annotated[str, typer.Option("--flow", metavar="A:B", help="the flow to drill")],
    group: Annotated[
        list[str] | None,
        typer.Option(
            "--group",
            metavar="GROUP",
            help="consumer group; repeatable (default: every group the flow checkpoints)",
        ),
    ] = None,
    shadow_prefix: Annotated[
        str,
        typer.Option("--shadow-prefix", metavar="PREFIX", help="shadow groups: <prefix><group>"),
    ] = "drill-",
    keep_shadow: Annotated[bool, flag("--keep-shadow", "keep the shadow groups")] = False,
    mode: Annotated[
        DrillMode,
        typer.Option(
            "--mode",
            metavar="non-disruptive|full",
            help="full: fail the drill applications (--app) over and back for real",
        ),
    ] = DrillMode.non_disruptive,
    app: Annotated[
        list[str] | None,
        typer.Option("--app", metavar="APP", help="full mode: drill application; repeatable"),
    ] = None,
    dry_run: DryRunOption = False,
    id_: ProcedureIdOption = None,
    timeout: TimeoutOption = 120.0,
    state_url_: StateUrlOption = None,
    output: OutputOption = Output.table,
) -> int:
    loaded, store = load_config(config), StateStore(state_url(state_url_))
    procedure: Procedure
    if mode is DrillMode.full:
        if not app:
            raise ReplicatorError("a full drill moves applications: name them with --app")
        procedure = FullDrill(loaded, flow, app, store, dry_run=dry_run, timeout_s=timeout)
    else:
        procedure = Drill(
            loaded,
            flow,
            group or [],
            store,
            shadow_prefix=shadow_prefix,
            keep_shadow=keep_shadow,
            dry_run=dry_run,
            timeout_s=timeout,
        )
    return _run(procedure, id_, output)


def _run(procedure: Procedure, procedure_id: str | None, output: Output) -> int:
    """Run it (recorded as started by this shell's user, for the run's report) and
    print its report; the exit code."""
    procedure.started_by = f"{getpass.getuser()}@{socket.gethostname()} (replicator CLI)"
    with steps_of(
        procedure, procedure.store.runs, f"{procedure.kind} {procedure.flow_name()}", output
    ):
        report = procedure.run(procedure_id)
    emit(report, output, lambda: print_report(report))
    return 0 if report.ok else 1


def print_report(report: ProcedureReport) -> int:
    """Each step's status and report, then the outcome with RPO, RTO, the procedure's
    duration and the applications' downtime; the exit code."""
    print(f"{report.kind} {report.procedure_id}{' (dry run)' if report.dry_run else ''}")
    rows = [(s.name, s.status, json.dumps(s.report, sort_keys=True)) for s in report.steps]
    print_table(("STEP", "STATUS", "REPORT"), rows)
    rto = "-" if report.rto_seconds is None else f"{report.rto_seconds:.1f}s"
    rpo = "-" if report.rpo_records is None else str(report.rpo_records)
    duration, down = _seconds(report.duration_seconds), _seconds(report.downtime_seconds)
    print(f"{report.outcome}: RPO {rpo} records, RTO {rto}, duration {duration}, downtime {down}")
    if report.phases:
        print(f"cutover phases (s after the fence): {phases_line(report.phases)}")
    if report.error:
        print(f"error: {report.error}")
    return 0 if report.ok else 1


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"


@command(
    ROOT,
    "abort",
    panel="DR procedures",
    help_="undo a failover or failback that stopped before its switch: unfence its "
    "applications, restart the flows it stopped",
    epilog=exit_statuses(
        "no such procedure, or it cannot be aborted (it switched or ended already)",
        zero="aborted",
    ),
)
def _abort(
    *,
    procedure_id: Annotated[
        str,
        typer.Argument(
            metavar="PROCEDURE_ID", help="the run's id (`replicator history` lists them)"
        ),
    ],
    reason: Annotated[
        str, typer.Option("--reason", metavar="TEXT", help="why, for the history")
    ] = "",
    state_url_: StateUrlOption = None,
    output: OutputOption = Output.table,
) -> int:
    undone = abort(StateStore(state_url(state_url_)), procedure_id, reason=reason)
    emit(asdict(undone), output, lambda: _print_abort(undone))
    return 0


def _print_abort(undone: AbortReport) -> None:
    print(f"{undone.kind} {undone.procedure_id} {undone.outcome}")
    print(f"  unfenced         {json.dumps(undone.unfenced, sort_keys=True)}")
    print(f"  restarted flows  {json.dumps(undone.restarted_flows)}")
    print(f"  applications were down {_seconds(undone.downtime_seconds)}")
