"""`replicator offsets reset`: move a flow's position in one topic (replicate part of
it again, or skip part of it), as a resumable procedure; see
`replicator.procedures.offset_reset`."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated

import typer

from replicator.cli.app import command, exit_statuses, group, usage_error
from replicator.cli.options import (
    ConfigOption,
    DryRunOption,
    OutputOption,
    ProcedureIdOption,
    StateUrlOption,
    flag,
)
from replicator.cli.output import Output, emit, print_table
from replicator.cli.progress import steps_of
from replicator.cli.state import state_url
from replicator.config import load_config
from replicator.procedures.offset_reset import OffsetReset
from replicator.procedures.reset_requests import ResetTo
from replicator.procedures.steps import ProcedureReport
from replicator.statestore import StateStore

OFFSETS = group("offsets", "a flow's replication position (reset)", "Replication")

PROCEDURE_EXITS = exit_statuses(
    "a step failed (the report names it; the same --id resumes)",
    zero="the procedure succeeded, or the dry run planned it",
)


def _datetime(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise usage_error(
            f"{text!r} is not an ISO 8601 time (e.g. 2024-05-01T12:00:00Z)", "--to-datetime"
        ) from None


def reset_to(
    to_earliest: bool, to_latest: bool, to_offset: int | None, to_datetime: datetime | None
) -> ResetTo:
    """The reset target the options name: exactly one of them."""
    given = [to_earliest, to_latest, to_offset is not None, to_datetime is not None]
    if sum(given) != 1:
        raise usage_error(
            "give exactly one of --to-earliest, --to-latest, --to-offset N, --to-datetime ISO",
            "--to-*",
        )
    if to_earliest:
        return ResetTo.earliest()
    if to_latest:
        return ResetTo.latest()
    if to_offset is not None:
        return ResetTo.offset(to_offset)
    assert to_datetime is not None
    return ResetTo.at(to_datetime)


@command(
    OFFSETS,
    "reset",
    help_="replicate part of a topic again, or skip part of it (stops and restarts the flow)",
    description="Reset where a flow replicates a topic from. The flow is stopped through "
    "the state store, the reset is requested, and the flow is started again; each "
    "partition then resumes at the new offset. A rewind copies records again (the target "
    "holds them twice); a skip leaves records out for good.",
    epilog=PROCEDURE_EXITS,
)
def _reset(
    *,
    config: ConfigOption,
    flow: Annotated[str, typer.Option("--flow", metavar="A:B", help="the flow to reset")],
    topic: Annotated[
        str, typer.Option("--topic", metavar="TOPIC", help="source topic the flow replicates")
    ],
    partition: Annotated[
        list[int] | None,
        typer.Option(
            "--partition", metavar="P", help="only this partition (repeatable; default: all)"
        ),
    ] = None,
    to_earliest: Annotated[bool, flag("--to-earliest", "the source log start")] = False,
    to_latest: Annotated[
        bool, flag("--to-latest", "the source log end (skip what is there now)")
    ] = False,
    to_offset: Annotated[
        int | None, typer.Option("--to-offset", metavar="N", help="this source offset")
    ] = None,
    to_datetime: Annotated[
        datetime | None,
        typer.Option(
            "--to-datetime",
            parser=_datetime,
            metavar="ISO",
            help="the first record at or after this time, e.g. 2024-05-01T12:00:00Z "
            "(without a zone: local time)",
        ),
    ] = None,
    dry_run: DryRunOption = False,
    id_: ProcedureIdOption = None,
    timeout: Annotated[
        float, typer.Option("--timeout", metavar="SECONDS", help="seconds to wait for a stop")
    ] = 120.0,
    state_url_: StateUrlOption = None,
    output: OutputOption = Output.table,
) -> int:
    target = reset_to(to_earliest, to_latest, to_offset, to_datetime)
    store = StateStore(state_url(state_url_))
    try:
        procedure = OffsetReset(
            load_config(config),
            flow,
            topic,
            target,
            store,
            partitions=partition,
            dry_run=dry_run,
            timeout_s=timeout,
        )
        with steps_of(procedure, store.runs, f"offset reset of {topic} on {flow}", output):
            report = procedure.run(id_)
    finally:
        store.close()
    emit(report, output, lambda: print_reset_report(report))
    return 0 if report.ok else 1


def print_reset_report(report: ProcedureReport) -> int:
    """Each step, each partition's move (from -> to, records copied again or
    skipped), then the outcome; the exit code."""
    print(f"{report.kind} {report.procedure_id}{' (dry run)' if report.dry_run else ''}")
    rows, effects = [], []
    for step in report.steps:
        details = {k: v for k, v in step.report.items() if k != "partitions"}
        effects += [partition["effect"] for partition in step.report.get("partitions", [])]
        rows.append((step.name, step.status, json.dumps(details, sort_keys=True)))
    print_table(("STEP", "STATUS", "REPORT"), rows)
    for effect in effects:  # whole lines: each names a partition and its move
        print(f"  {effect}")
    print(report.outcome)
    if report.error:
        print(f"error: {report.error}")
    return 0 if report.ok else 1
