"""`replicator failover|failback|drill|abort`: DR procedures from the shell, a line per step."""

from __future__ import annotations

import argparse
import getpass
import json
import socket
from pathlib import Path

from replicator.config import load_config
from replicator.errors import ReplicatorError
from replicator.procedures import Drill, Failback, Failover, FullDrill, Procedure, ProcedureReport
from replicator.procedures.abort import abort
from replicator.statestore import STATE_URL_ENV, StateStore


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    failover = _procedure_parser(
        commands, "failover", "move applications to a flow's target cluster", "from A to B"
    )
    failover.add_argument("--mode", choices=("planned", "unplanned"), default="planned")
    failover.add_argument("--reverse", action="store_true", help="then start the flow B->A")
    failover.add_argument("--max-lag", type=int, default=100_000, help="planned: lag bound")
    failover.add_argument(
        "--grant-write",
        action="store_true",
        help="before the switch, give the applications' producers WRITE on B's topics "
        "(applications.<name>.producer.principals); the failback removes it",
    )
    failover.set_defaults(handler=_failover)

    failback = _procedure_parser(
        commands,
        "failback",
        "move applications back to a flow's source after a failover",
        "the flow they failed over with (they go back to A)",
    )
    failback.add_argument(
        "--reconcile",
        choices=("replicate", "report"),
        default="replicate",
        help="records A holds that never reached B: copy them to B first (replicate), or "
        "list them and let the groups skip them (report)",
    )
    failback.add_argument(
        "--keep-write",
        action="store_true",
        help="keep the WRITE the failover's --grant-write gave the producers on B "
        "(default: remove exactly what it created)",
    )
    failback.set_defaults(handler=_failback)

    drill = _procedure_parser(
        commands,
        "drill",
        "non-disruptive DR drill: shadow groups on the target checked record by record",
        "the flow to drill",
        groups_help="consumer group; repeatable (default: every group the flow checkpoints)",
    )
    drill.add_argument("--shadow-prefix", default="drill-", help="shadow groups: <prefix><group>")
    drill.add_argument("--keep-shadow", action="store_true", help="keep the shadow groups")
    drill.add_argument(
        "--mode",
        choices=("non-disruptive", "full"),
        default="non-disruptive",
        help="full: fail the drill applications (--app) over and back for real",
    )
    drill.add_argument(
        "--app", action="append", default=[], help="full mode: drill application; repeatable"
    )
    drill.set_defaults(handler=_drill)

    aborting = commands.add_parser(
        "abort",
        help="undo a failover or failback that stopped before its switch: unfence its "
        "applications, restart the flows it stopped",
    )
    aborting.add_argument("procedure_id", help="the run's id (`replicator history` lists them)")
    aborting.add_argument("--reason", default="", help="why, for the history")
    aborting.add_argument(
        "--state-url", help=f"SQLAlchemy URL of the state store (default ${STATE_URL_ENV})"
    )
    aborting.set_defaults(handler=_abort)


def _procedure_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    summary: str,
    flow_help: str,
    groups_help: str | None = None,
) -> argparse.ArgumentParser:
    """A procedure's command with the options every procedure has: the applications
    it moves (`--app`, required), or with `groups_help` the groups it reads (`--group`)."""
    parser = commands.add_parser(name, help=f"{summary} (resumable steps)")
    parser.add_argument("--config", type=Path, required=True, help="mm2.properties")
    parser.add_argument("--flow", required=True, metavar="A->B", help=flow_help)
    if groups_help is None:
        parser.add_argument(
            "--app",
            action="append",
            required=True,
            help="application (= consumer group); repeatable",
        )
    else:
        parser.add_argument("--group", action="append", default=[], help=groups_help)
    parser.add_argument("--dry-run", action="store_true", help="check and say what it would do")
    parser.add_argument("--id", help="procedure id: the same id resumes and skips done steps")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per wait")
    parser.add_argument(
        "--state-url", help=f"SQLAlchemy URL of the state store (default ${STATE_URL_ENV})"
    )
    return parser


def _failover(args: argparse.Namespace) -> int:
    procedure = Failover(
        load_config(args.config),
        args.flow,
        args.app,
        StateStore(args.state_url),
        mode=args.mode,
        reverse=args.reverse,
        dry_run=args.dry_run,
        max_lag=args.max_lag,
        timeout_s=args.timeout,
        grant_write=args.grant_write,
    )
    return _run(procedure, args.id)


def _failback(args: argparse.Namespace) -> int:
    procedure = Failback(
        load_config(args.config),
        args.flow,
        args.app,
        StateStore(args.state_url),
        reconcile=args.reconcile,
        dry_run=args.dry_run,
        timeout_s=args.timeout,
        revoke_write=not args.keep_write,
    )
    return _run(procedure, args.id)


def _run(procedure: Procedure, procedure_id: str | None) -> int:
    """Run it (recorded as started by this shell's user, for the run's report) and
    print its report; the exit code."""
    procedure.started_by = f"{getpass.getuser()}@{socket.gethostname()} (replicator CLI)"
    return print_report(procedure.run(procedure_id))


def print_report(report: ProcedureReport) -> int:
    """Each step's status and report, then the outcome with RPO, RTO, the procedure's
    duration and the applications' downtime; the exit code."""
    title = f"{report.kind} {report.procedure_id}{' (dry run)' if report.dry_run else ''}"
    print(title)
    for step in report.steps:
        print(f"  {step.name:<16} {step.status:<8} {json.dumps(step.report, sort_keys=True)}")
    rto = "-" if report.rto_seconds is None else f"{report.rto_seconds:.1f}s"
    rpo = "-" if report.rpo_records is None else str(report.rpo_records)
    duration, down = _seconds(report.duration_seconds), _seconds(report.downtime_seconds)
    print(f"{report.outcome}: RPO {rpo} records, RTO {rto}, duration {duration}, downtime {down}")
    if report.error:
        print(f"error: {report.error}")
    return 0 if report.ok else 1


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"


def _abort(args: argparse.Namespace) -> int:
    undone = abort(StateStore(args.state_url), args.procedure_id, reason=args.reason)
    print(f"{undone.kind} {undone.procedure_id} {undone.outcome}")
    print(f"  unfenced         {json.dumps(undone.unfenced, sort_keys=True)}")
    print(f"  restarted flows  {json.dumps(undone.restarted_flows)}")
    print(f"  applications were down {_seconds(undone.downtime_seconds)}")
    return 0


def _drill(args: argparse.Namespace) -> int:
    config, store = load_config(args.config), StateStore(args.state_url)
    procedure: Procedure
    if args.mode == "full":
        if not args.app:
            raise ReplicatorError("a full drill moves applications: name them with --app")
        procedure = FullDrill(
            config, args.flow, args.app, store, dry_run=args.dry_run, timeout_s=args.timeout
        )
    else:
        procedure = Drill(
            config,
            args.flow,
            args.group,
            store,
            shadow_prefix=args.shadow_prefix,
            keep_shadow=args.keep_shadow,
            dry_run=args.dry_run,
            timeout_s=args.timeout,
        )
    return _run(procedure, args.id)
