"""`replicator translate | checkpoints`: exact offset translation from the shell."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

import typer

from replicator.cli.app import ROOT, command
from replicator.cli.options import ConfigOption, FlowsOption, JsonOption, OutputOption, flag
from replicator.cli.output import Output, chosen, emit, print_table
from replicator.cli.progress import tracked
from replicator.config import load_config
from replicator.offsets.checkpoints import Checkpointer, CheckpointReport, ReverseCheckpointer
from replicator.operations.runner import select_flows


@command(
    ROOT,
    "translate",
    panel="Replication",
    help_="where a source consumer group would resume on the target",
)
def _translate(
    *,
    config: ConfigOption,
    group: Annotated[
        str, typer.Option("--group", metavar="GROUP", help="consumer group on the source")
    ],
    flow: FlowsOption = None,
    output: OutputOption = Output.table,
    json_: JsonOption = False,
) -> int:
    output = chosen(output, json_)
    rows = []
    for selected in select_flows(load_config(config), flow):
        with Checkpointer(selected) as checkpointer:
            for position in checkpointer.translate_group(group):
                rows.append({"flow": selected.name, **asdict(position.translation)})
    emit(rows, output, lambda: _print_translations(rows))
    return 0


def _print_translations(rows: list[dict]) -> None:
    print_table(
        ("FLOW", "SOURCE", "TARGET", "MISSING", "VERDICT"),
        [
            (
                row["flow"],
                f"{row['topic']}[{row['partition']}]@{row['source_offset']}",
                f"{row['remote_topic']}[{row['partition']}]@{row['target_offset']}",
                "unknown" if row["missing"] is None else str(row["missing"]),
                "exact" if row["unreplicated_before"] == 0 else "RECORDS BEFORE IT NOT REPLICATED",
            )
            for row in rows
        ],
    )


@command(
    ROOT,
    "checkpoints",
    panel="Replication",
    help_="write checkpoints now (and sync group offsets if enabled)",
)
def _checkpoints(
    *,
    config: ConfigOption,
    flow: FlowsOption = None,
    group: Annotated[
        list[str] | None,
        typer.Option("--group", metavar="GROUP", help="only this group (repeatable)"),
    ] = None,
    reverse: Annotated[
        bool,
        flag(
            "--reverse",
            "translate the target's group progress back to the source (while DR is active)",
        ),
    ] = False,
    output: OutputOption = Output.table,
) -> int:
    reports = []
    kind = ReverseCheckpointer if reverse else Checkpointer
    for selected in tracked(
        select_flows(load_config(config), flow), "checkpoints", "flows", output
    ):
        with kind(selected) as checkpointer:
            reports.append(checkpointer.emit(group))
    emit(reports, output, lambda: [_print_report(r) for r in reports])  # type: ignore[func-returns-value]
    return 0


def _print_report(report: CheckpointReport) -> None:
    print(
        f"{report.flow}: {len(report.emitted)} checkpoints written, {report.unchanged} "
        f"unchanged, {len(report.held)} held (records before them not replicated yet)"
    )
    for group, partitions in report.synced_groups.items():
        print(f"  group {group}: offsets of {partitions} partitions committed on the target")
    for group in report.active_groups:
        print(f"  group {group}: not synced, it has active members on the target")
