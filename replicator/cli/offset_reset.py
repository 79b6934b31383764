"""`replicator offsets reset`: move a flow's position in one topic (replicate part of
it again, or skip part of it), as a resumable procedure; see
`replicator.procedures.offset_reset`."""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from pathlib import Path

from replicator.config import load_config
from replicator.procedures.offset_reset import OffsetReset
from replicator.procedures.reset_requests import ResetTo
from replicator.procedures.steps import ProcedureReport
from replicator.statestore import STATE_URL_ENV, StateStore


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    offsets = commands.add_parser("offsets", help="a flow's replication position (reset)")
    actions = offsets.add_subparsers(dest="offsets_command", required=True, metavar="ACTION")
    reset = actions.add_parser(
        "reset",
        help="replicate part of a topic again, or skip part of it (stops and restarts the flow)",
        description="Reset where a flow replicates a topic from. The flow is stopped through "
        "the state store, the reset is requested, and the flow is started again; each "
        "partition then resumes at the new offset. A rewind copies records again (the target "
        "holds them twice); a skip leaves records out for good.",
    )
    reset.add_argument("--config", type=Path, required=True, help="mm2.properties")
    reset.add_argument("--flow", required=True, metavar="A->B", help="the flow to reset")
    reset.add_argument("--topic", required=True, help="source topic the flow replicates")
    reset.add_argument(
        "--partition",
        type=int,
        action="append",
        metavar="P",
        help="only this partition (repeatable; default: all)",
    )
    where = reset.add_mutually_exclusive_group(required=True)
    where.add_argument("--to-earliest", action="store_true", help="the source log start")
    where.add_argument(
        "--to-latest", action="store_true", help="the source log end (skip what is there now)"
    )
    where.add_argument("--to-offset", type=int, metavar="N", help="this source offset")
    where.add_argument(
        "--to-datetime",
        type=_datetime,
        metavar="ISO",
        help="the first record at or after this time, e.g. 2024-05-01T12:00:00Z "
        "(without a zone: local time)",
    )
    reset.add_argument("--dry-run", action="store_true", help="check and say what it would do")
    reset.add_argument("--id", help="procedure id: the same id resumes and skips done steps")
    reset.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for a stop")
    reset.add_argument(
        "--state-url", help=f"SQLAlchemy URL of the state store (default ${STATE_URL_ENV})"
    )
    reset.set_defaults(handler=_reset)


def reset_to(args: argparse.Namespace) -> ResetTo:
    """The reset target the options name."""
    if args.to_earliest:
        return ResetTo.earliest()
    if args.to_latest:
        return ResetTo.latest()
    if args.to_offset is not None:
        return ResetTo.offset(args.to_offset)
    return ResetTo.at(args.to_datetime)


def _datetime(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO 8601 time (e.g. 2024-05-01T12:00:00Z)"
        ) from exc


def _reset(args: argparse.Namespace) -> int:
    store = StateStore(args.state_url)
    try:
        procedure = OffsetReset(
            load_config(args.config),
            args.flow,
            args.topic,
            reset_to(args),
            store,
            partitions=args.partition,
            dry_run=args.dry_run,
            timeout_s=args.timeout,
        )
        return print_reset_report(procedure.run(args.id))
    finally:
        store.close()


def print_reset_report(report: ProcedureReport) -> int:
    """Each step, each partition's move (from -> to, records copied again or
    skipped), then the outcome; the exit code."""
    print(f"{report.kind} {report.procedure_id}{' (dry run)' if report.dry_run else ''}")
    for step in report.steps:
        details = {k: v for k, v in step.report.items() if k != "partitions"}
        print(f"  {step.name:<12} {step.status:<8} {json.dumps(details, sort_keys=True)}")
        for partition in step.report.get("partitions", []):
            print(f"      {partition['effect']}")
    print(report.outcome)
    if report.error:
        print(f"error: {report.error}")
    return 0 if report.ok else 1
