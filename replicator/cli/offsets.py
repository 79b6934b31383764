"""`replicator translate | checkpoints`: exact offset translation from the shell."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from replicator.cli.replication import add_config
from replicator.config import load_config
from replicator.offsets.checkpoints import Checkpointer, CheckpointReport, ReverseCheckpointer
from replicator.operations.runner import select_flows


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    translate = commands.add_parser(
        "translate", help="where a source consumer group would resume on the target"
    )
    add_config(translate)
    translate.add_argument("--group", required=True, help="consumer group on the source")
    translate.add_argument("--json", action="store_true", help="print JSON for scripts")
    translate.set_defaults(handler=_translate)

    checkpoints = commands.add_parser(
        "checkpoints", help="write checkpoints now (and sync group offsets if enabled)"
    )
    add_config(checkpoints)
    checkpoints.add_argument("--group", action="append", help="only this group (repeatable)")
    checkpoints.add_argument(
        "--reverse",
        action="store_true",
        help="translate the target's group progress back to the source (while DR is active)",
    )
    checkpoints.set_defaults(handler=_checkpoints)


def _translate(args: argparse.Namespace) -> int:
    rows = []
    for flow in select_flows(load_config(args.config), args.flow):
        with Checkpointer(flow) as checkpointer:
            for position in checkpointer.translate_group(args.group):
                rows.append({"flow": flow.name, **asdict(position.translation)})
    if args.json:
        json.dump(rows, sys.stdout, indent=2)
        print()
        return 0
    for row in rows:
        verdict = "exact" if row["unreplicated_before"] == 0 else "RECORDS BEFORE IT NOT REPLICATED"
        print(
            f"{row['flow']:<16} {row['topic']}[{row['partition']}]@{row['source_offset']} -> "
            f"{row['remote_topic']}[{row['partition']}]@{row['target_offset']}  "
            f"missing={row['missing']} {verdict}"
        )
    return 0


def _checkpoints(args: argparse.Namespace) -> int:
    for flow in select_flows(load_config(args.config), args.flow):
        kind = ReverseCheckpointer if args.reverse else Checkpointer
        with kind(flow) as checkpointer:
            _print_report(checkpointer.emit(args.group))
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
