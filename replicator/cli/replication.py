"""`replicator run | status | topics`: the replication engine from the shell."""

from __future__ import annotations

import logging
import sys
from dataclasses import asdict, replace
from typing import Annotated

from replicator import allocator, logs
from replicator.cli.app import ROOT, command, exit_statuses, own_process
from replicator.cli.options import (
    AllPartitionsOption,
    ConfigOption,
    FlowsOption,
    JsonOption,
    OutputOption,
    StateUrlOption,
    flag,
)
from replicator.cli.output import Output, chosen, emit, print_table
from replicator.cli.state import state_url
from replicator.cli.status_table import status_table
from replicator.config import load_config
from replicator.engine.collector import pace_for_replication
from replicator.engine.status import NoStatus, StatusRecord, read_status, status_values
from replicator.engine.topic_sync import TopicSync
from replicator.kafka.access import check_access
from replicator.operations.runner import run_flows, select_flows
from replicator.operations.thread_status import RunnerThreads, read_thread_status
from replicator.statestore import StateStore

log = logging.getLogger(__name__)


@command(
    ROOT,
    "run",
    panel="Replication",
    help_="replicate until stopped (SIGTERM/Ctrl-C flush first)",
    description="Run the selected flows in this process; flows stopped or paused in the "
    "state store wait until they are started again.",
    epilog=exit_statuses(
        "the configuration or the clusters' credentials are refused at start",
        zero="stopped on request",
    ),
)
def _run(
    config: ConfigOption,
    flow: FlowsOption = None,
    state_url_: StateUrlOption = None,
    force_takeover: Annotated[
        bool,
        flag(
            "--force-takeover",
            "take partitions over from MirrorMaker 2 even while it shows signs of life "
            "(replicator.takeover.force; logged)",
        ),
    ] = False,
) -> int:
    if own_process():  # before any client starts a thread; see replicator.allocator
        allocator.reexecute_with_preferred()
    logs.crash_stacks()  # a crash inside C code prints every thread's stack
    flows = select_flows(load_config(config), flow)
    if force_takeover:
        flows = [replace(f, takeover_force=True) for f in flows]
        log.warning(
            "--force-takeover: partitions are taken over from MirrorMaker 2 even while it "
            "shows signs of life (%s)",
            ", ".join(f.name for f in flows),
        )
    # A wrong password or certificate stops here, in one line, instead of workers
    # retrying for ever; a cluster that is away does not (the workers wait for it).
    check_access({c.alias: c for f in flows for c in (f.source, f.target)}.values())
    allocator.report()
    pace_for_replication()  # this process replicates (a single worker runs in a thread)
    run_flows(flows, store=StateStore(state_url(state_url_)))
    return 0


@command(
    ROOT,
    "status",
    panel="Replication",
    help_="flows, partitions, lag and errors",
    description="Every worker and partition status row the selected flows' replicators "
    "wrote to their target clusters, and the background threads of `replicator run`.",
    epilog=exit_statuses(
        "a flow has no status on its target (no replicator has run for it there), or an error",
        zero="every flow has status rows",
    ),
)
def _status(
    *,
    config: ConfigOption,
    flow: FlowsOption = None,
    output: OutputOption = Output.table,
    json_: JsonOption = False,
    every_partition: AllPartitionsOption = False,
) -> int:
    """Every status row of the selected flows; exit 1 when a flow has none (nothing
    to show is not "all is well": no replicator has run for it on its target)."""
    output = chosen(output, json_)
    rows: list[StatusRecord] = []
    runners: list[RunnerThreads] = []
    missing: list[str] = []
    for selected in select_flows(load_config(config), flow):
        try:  # the topic read once for the flow's rows and its runners' threads
            values = status_values(selected.target, selected.name, required=True)
            rows += read_status(selected.target, selected.name, required=True, values=values)
        except NoStatus as exc:
            missing.append(f"flow {selected.name}: {exc}")
            continue
        runners += read_thread_status(selected, values)
    threads = [{**asdict(r), "state": r.state} for r in runners]
    emit(
        [asdict(row) for row in rows] + threads,
        output,
        lambda: _print_all(rows, runners, every_partition=every_partition),
    )
    for problem in missing:
        print(f"replicator: error: {problem}", file=sys.stderr)
    return 1 if missing else 0


def _print_all(
    rows: list[StatusRecord], runners: list[RunnerThreads], *, every_partition: bool = False
) -> None:
    table = status_table(rows, every_partition=every_partition)
    for r in runners:  # `replicator run`'s background threads (checkpoints, ...)
        table.append((r.flow, f"threads of {r.runner}", r.state, r.summary()))
    print_table(("FLOW", "WHAT", "STATE", "DETAILS"), table)


def _print_status(rows: list[StatusRecord]) -> None:
    _print_all(rows, [])


@command(
    ROOT,
    "topics",
    panel="Replication",
    help_="what each flow replicates, and why not",
    description="Each topic of the selected flows' source clusters: its remote topic, or "
    "the rule that leaves it out.",
)
def _topics(
    *,
    config: ConfigOption,
    flow: FlowsOption = None,
    output: OutputOption = Output.table,
) -> int:
    decisions = {
        selected.name: TopicSync(selected).decisions()
        for selected in select_flows(load_config(config), flow)
    }
    data = [
        {
            "flow": name,
            "source_topic": d.source_topic,
            "replicate": d.replicate,
            "remote_topic": d.remote_topic if d.replicate else None,
            "reason": None if d.replicate else d.reason,
        }
        for name, listed in decisions.items()
        for d in listed
    ]
    emit(data, output, lambda: _print_topics(decisions))
    return 0


def _print_topics(decisions: dict) -> None:
    print_table(
        ("FLOW", "TOPIC", "REMOTE TOPIC", "WHY NOT"),
        [
            (
                name,
                d.source_topic,
                d.remote_topic if d.replicate else "-",
                "" if d.replicate else d.reason,
            )
            for name, listed in decisions.items()
            for d in listed
        ],
    )
