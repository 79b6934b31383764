"""`replicator migrate`: moving flows from MirrorMaker 2 to the replicator and back.

`--from-mm2 --dry-run` prints, per flow and partition, where MM2 stopped, where
`replicator run` will start and why (the takeover itself happens when `replicator
run` first starts on the same file, which logs the same plan). `--to-mm2` hands the
flows back: it writes where the stopped replicator got to into MM2's Connect offsets
topic, in MM2's format, so MM2 started again continues there.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from replicator.cli.app import ROOT, command, exit_statuses, usage_error
from replicator.cli.options import ConfigOption, DryRunOption, FlowsOption, OutputOption, flag
from replicator.cli.output import Output, emit
from replicator.cli.progress import tracked
from replicator.config import load_config
from replicator.engine.migration import HandBack, PlanLine, hand_back, takeover_plan
from replicator.engine.mm2_liveness import MirrorMakerWatch
from replicator.errors import ReplicatorError
from replicator.operations.runner import select_flows


@command(
    ROOT,
    "migrate",
    panel="Set-up",
    help_="take flows over from MirrorMaker 2 (or hand them back) without a re-copy",
    description="Give exactly one of --from-mm2 (with --dry-run: the takeover plan) and --to-mm2.",
    epilog=exit_statuses(
        "--from-mm2: a partition would refuse to start (REFUSED); or an error",
        zero="the plan holds no refusal, or the offsets were handed back",
    ),
)
def _migrate(
    *,
    config: ConfigOption,
    flow: FlowsOption = None,
    from_mm2: Annotated[
        bool,
        flag(
            "--from-mm2",
            "show where `replicator run` takes each partition over from MirrorMaker 2",
        ),
    ] = False,
    to_mm2: Annotated[
        bool,
        flag(
            "--to-mm2",
            "write where the (stopped) replicator got to into MirrorMaker 2's offsets topic",
        ),
    ] = False,
    dry_run: DryRunOption = False,
    offsets_topic: Annotated[
        str | None,
        typer.Option(
            "--offsets-topic",
            metavar="TOPIC",
            help="MirrorMaker 2's Connect offsets topic on the target (default: the file's "
            "offset.storage.topic, as `replicator run` reads it, else "
            "mm2-offsets.<source alias>.internal)",
        ),
    ] = None,
    output: OutputOption = Output.table,
) -> int:
    if from_mm2 == to_mm2:
        raise usage_error("give exactly one of --from-mm2 and --to-mm2", "--from-mm2")
    flows = select_flows(load_config(config), flow)
    if from_mm2:
        if not dry_run:
            raise ReplicatorError(
                "migrate --from-mm2 only shows the plan: add --dry-run; the takeover itself "
                "happens when `replicator run` first starts on this configuration (stop "
                "MirrorMaker 2 first)"
            )
        lines: list[PlanLine] = []
        running: dict[str, list[str]] = {}
        for selected in tracked(flows, "reading MirrorMaker 2's offsets", "flows", output):
            lines += takeover_plan(selected, offsets_topic)
            running[selected.name] = MirrorMakerWatch(selected).evidence()
        refused = sum(line.start is None for line in lines)
        data = [{**_plan_line(line), "mm2_running": running[line.flow]} for line in lines]
        emit(data, output, lambda: _print_plan(lines, refused, running))
        return 1 if refused else 0
    results: list[HandBack] = []
    for selected in tracked(flows, "handing back to MirrorMaker 2", "flows", output):
        results.append(hand_back(selected, dry_run=dry_run, offsets_topic=offsets_topic))
    data = [_handed(result, dry_run) for result in results]
    emit(data, output, lambda: _print_hand_back(results, dry_run))
    return 0


def _plan_line(line: PlanLine) -> dict[str, Any]:
    return {
        "flow": line.flow,
        "topic": line.topic,
        "partition": line.partition,
        "remote": line.remote,
        "start": line.start,
        "why": line.why,
        "line": line.describe(),
    }


def _handed(result: HandBack, dry_run: bool) -> dict[str, Any]:
    return {
        "flow": result.flow,
        "offsets_topic": result.offsets_topic,
        "dry_run": dry_run,
        "positions": [
            {"topic": t, "partition": p, "offset": o, "previous": result.previous[(t, p)]}
            for (t, p), o in sorted(result.positions.items())
        ],
    }


def _print_plan(lines: list[PlanLine], refused: int, running: dict[str, list[str]]) -> None:
    for line in lines:
        print(line.describe())
    if refused:
        print(f"{refused} partitions would refuse to start (see REFUSED above)")
    for flow, evidence in running.items():
        if evidence:
            print(
                f"{flow}: MirrorMaker 2 still runs ({'; '.join(evidence)}): `replicator run` "
                "takes no partition over until it is gone (stop every node)"
            )
        else:
            print(f"{flow}: MirrorMaker 2 writes no heartbeat of this flow on its target")


def _print_hand_back(results: list[HandBack], dry_run: bool) -> None:
    for result in results:
        for text in result.describe():
            print(("would write: " if dry_run else "written: ") + text)
        if not result.positions:
            print(f"{result.flow}: no partition holds replicas of ours; nothing to hand back")
