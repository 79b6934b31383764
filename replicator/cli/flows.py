"""`replicator flows list | describe FLOW`: each flow of the configuration as the
engine sees it: where it goes, what it replicates, the state the state store asks
of it, its workers, lag and last checkpoint (read from its target, as the DR status
page reads them: `replicator.operations.dr_status`).

`replicator flows pause FLOW --reason TEXT | resume FLOW`: an operator's pause,
through the state store (`replicator.procedures.pause`)."""

from __future__ import annotations

import getpass
import socket
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from replicator.cli.app import command, exit_statuses, group
from replicator.cli.options import (
    AllPartitionsOption,
    ConfigOption,
    OutputOption,
    StateUrlOption,
    TimeoutOption,
)
from replicator.cli.output import Output, console, emit, plain, print_table
from replicator.cli.state import state_url
from replicator.cli.status_table import others_lag, partitions_shown
from replicator.config import load_config
from replicator.config.model import FlowConfig, NameFilter, shell_safe
from replicator.operations.dr_status import FlowStatus, PartitionLag, flow_status, probe_cluster
from replicator.procedures.pause import pause_flow, resume_flow
from replicator.statestore import StateStore, StateStoreError
from replicator.statestore.flow_states import RUNNING

#: The one flow a command acts on.
FlowArgument = Annotated[
    str | None,
    typer.Argument(metavar="[FLOW]", help="the flow, e.g. primary:dr or 'primary->dr' (or --flow)"),
]
OneFlowOption = Annotated[
    str | None,
    typer.Option("--flow", metavar="A:B", help="the flow, as every other command takes it"),
]


def _one_flow(config: Path, positional: str | None, option: str | None) -> FlowConfig:
    """The flow named first or with `--flow` (the same in every command), not both."""
    if (positional is None) == (option is None):
        raise typer.BadParameter("name the flow once: first (primary:dr) or with --flow")
    return load_config(config).flow(positional or option or "")


FLOWS = group("flows", "the configuration's flows: state, workers, lag, checkpoints", "Replication")


class _Read:
    """The flows' status and the state store's answer (or why it gave none)."""

    def __init__(self, flows: Sequence[FlowConfig], url: str, *, count: bool = True) -> None:
        self.store_error: str | None = None
        desired: dict[str, str] = {}
        store = StateStore(url)
        try:
            desired = {s.flow: s.state for s in store.flows.all()}
        except StateStoreError as exc:
            self.store_error = str(exc)
        finally:
            store.close()
        targets = {f.target.alias: f.target for f in flows}
        with ThreadPoolExecutor(max_workers=max(1, len(targets), len(flows))) as pool:
            probed = dict(zip(targets, pool.map(probe_cluster, targets.values()), strict=True))
            self.flows: list[tuple[FlowConfig, FlowStatus]] = list(
                zip(
                    flows,
                    pool.map(
                        lambda f: flow_status(
                            f,
                            desired.get(f.name, RUNNING),
                            probed[f.target.alias].reachable,
                            count=count,
                        ),
                        flows,
                    ),
                    strict=True,
                )
            )


def _patterns(names: NameFilter) -> dict[str, list[str]]:
    return {
        "include": [p.pattern for p in names.include],
        "exclude": [p.pattern for p in names.exclude],
    }


def _describe(flow: FlowConfig, status: FlowStatus) -> dict[str, Any]:
    data = plain(status)
    return {
        "name": flow.name,
        "source": {"alias": flow.source.alias, "bootstrap": flow.source.bootstrap_servers},
        "target": {"alias": flow.target.alias, "bootstrap": flow.target.bootstrap_servers},
        "topics": _patterns(flow.topics),
        "groups": _patterns(flow.groups),
        "tasks_max": flow.tasks_max,
        "exactly_once": flow.exactly_once,
        "desired_state": status.desired_state,
        "live_workers": status.live_workers,
        "dead_workers": status.dead_workers,
        "total_lag": status.total_lag,
        "workers": data["workers"],
        "partitions": data["partitions"],
        "checkpoint": data["checkpoint"],
        "acl_sync": data["acl_sync"],
        "background": data["background"],
        "error": status.error,
    }


def _findings(status: FlowStatus) -> list[str]:
    """What is wrong with the flow, as `describe` lists it (exit status 1)."""
    found = [status.error] if status.error else []
    found += [f"worker {w.worker} is not live ({w.state})" for w in status.workers if not w.live]
    found += [
        f"{p.topic}[{p.partition}]: {p.error}" for p in status.partitions if p.error is not None
    ]
    return found


def _topics_text(names: NameFilter) -> str:
    text = ",".join(p.pattern for p in names.include) or "-"
    if names.exclude:
        text += " except " + ",".join(p.pattern for p in names.exclude)
    return text


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f}s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f}min ago"
    return f"{seconds / 3600:.1f}h ago"


@command(
    FLOWS,
    "list",
    help_="each flow: source, target, topics, desired state, workers, lag, last checkpoint",
    epilog=exit_statuses(
        "a flow's status could not be read (its target is unreachable, ...) or the state "
        "store did not answer",
        zero="every flow was read",
    ),
)
def _list(
    *,
    config: ConfigOption,
    state_url_: StateUrlOption = None,
    output: OutputOption = Output.table,
) -> int:
    # The list shows each flow's newest checkpoint, not how many: `describe` counts them
    # (it reads the whole checkpoints topic, millions of records at an estate's size).
    read = _Read(load_config(config).flows, state_url(state_url_), count=False)
    data: dict[str, Any] = {
        "flows": [_describe(flow, status) for flow, status in read.flows],
        "store_error": read.store_error,
    }
    if output is not Output.table:
        for flow in data["flows"]:  # the list is a summary: `describe` has the rest
            del flow["partitions"], flow["background"]
    emit(data, output, lambda: _print_list(read))
    return 1 if read.store_error or any(s.error for _, s in read.flows) else 0


def _print_list(read: _Read) -> None:
    rows = []
    for flow, status in read.flows:
        lag = "-" if status.total_lag is None else str(status.total_lag)
        checkpoint = _age(status.checkpoint.age_seconds) if status.checkpoint else "-"
        workers = f"{status.live_workers}/{flow.tasks_max}"
        if status.dead_workers:
            workers += f" ({status.dead_workers} dead)"
        rows.append(
            (
                flow.name,
                flow.source.alias,
                flow.target.alias,
                _topics_text(flow.topics),
                status.desired_state,
                workers,
                lag,
                checkpoint,
            )
        )
    columns = ("FLOW", "SOURCE", "TARGET", "TOPICS", "STATE", "WORKERS", "LAG", "CHECKPOINT")
    print_table(columns, rows)
    out = console()
    for _, status in read.flows:
        if status.error:
            out.print(f"{status.name}: {status.error}")
    if read.store_error:
        out.print(f"state store: {read.store_error}")


@command(
    FLOWS,
    "describe",
    help_="one flow in detail: settings, workers, partitions, checkpoints, threads",
    epilog=exit_statuses(
        "the flow's status could not be read, a worker it wants is not live, or a "
        "partition reports an error",
        zero="all is well",
    ),
)
def _describe_command(
    *,
    flow: FlowArgument = None,
    flow_option: OneFlowOption = None,
    config: ConfigOption,
    state_url_: StateUrlOption = None,
    output: OutputOption = Output.table,
    every_partition: AllPartitionsOption = False,
) -> int:
    chosen_flow = _one_flow(config, flow, flow_option)
    read = _Read([chosen_flow], state_url(state_url_))
    [(flow_config, status)] = read.flows
    data = {**_describe(flow_config, status), "store_error": read.store_error}
    findings = _findings(status) + (
        [f"state store: {read.store_error}"] if read.store_error else []
    )
    emit(
        data,
        output,
        lambda: _print_describe(flow_config, status, findings, every_partition=every_partition),
    )
    return 1 if findings else 0


def _print_describe(
    flow: FlowConfig, status: FlowStatus, findings: list[str], *, every_partition: bool = False
) -> None:
    out = console()
    lag = "-" if status.total_lag is None else str(status.total_lag)
    about = Table.grid(padding=(0, 2))
    about.add_column(style="bold")
    about.add_column(overflow="fold")
    for name, value in (
        ("flow", flow.name),
        ("source", f"{flow.source.alias} ({flow.source.bootstrap_servers})"),
        ("target", f"{flow.target.alias} ({flow.target.bootstrap_servers})"),
        ("topics", _topics_text(flow.topics)),
        ("groups", _topics_text(flow.groups)),
        ("tasks.max", str(flow.tasks_max)),
        ("exactly once", "yes" if flow.exactly_once else "no"),
        ("desired state", status.desired_state),
        ("workers", f"{status.live_workers} live, {status.dead_workers} not live"),
        ("total lag", lag),
    ):
        about.add_row(name, value)
    out.print(about)
    if status.workers:
        print_table(
            ("WORKER", "STATE", "HOST", "PID", "PARTITIONS", "LIVE", "UPDATED"),
            [
                (
                    w.worker, w.state, w.host, str(w.pid), str(w.partitions),
                    "yes" if w.live else "NO", f"{w.updated_at:%Y-%m-%d %H:%M:%SZ}",
                )
                for w in status.workers
            ],
            title="workers",
        )  # fmt: skip
    if status.partitions:
        listed, others = partitions_shown(
            status.partitions,
            needs_a_look=_needs_a_look,
            lag=lambda p: p.lag,
            every_partition=every_partition,
        )
        rows = [
            (
                f"{p.topic}[{p.partition}]", p.state, _text(p.next_offset), _text(p.lag),
                str(p.replicated), str(p.lost),
                p.error or p.skipped or ("stale: its worker is silent" if p.stale else ""),
            )
            for p in listed
        ]  # fmt: skip
        if others:
            rows.append(
                (
                    f"{len(others)} {'more ' if listed else ''}partitions", "replicating", "",
                    others_lag(p.lag for p in others).removeprefix("lag="),
                    str(sum(p.replicated for p in others)), "0", "`--all` lists each",
                )
            )  # fmt: skip
        print_table(
            ("PARTITION", "STATE", "NEXT", "LAG", "REPLICATED", "LOST", "NOTE"),
            rows,
            title="partitions",
        )
    if status.checkpoint is not None:
        c = status.checkpoint
        groups = ", ".join(c.groups) or "none"
        out.print(
            f"checkpoints: {c.checkpoints} in {c.topic}, last {_age(c.age_seconds)}; "
            f"groups {groups}"
        )
    if status.acl_sync is not None and status.acl_sync.enabled:
        a = status.acl_sync
        synced = "never synced" if a.synced is None else f"{a.synced} ACLs, {_age(a.age_seconds)}"
        out.print(f"ACL sync: {synced}" + (f"; error: {a.error}" if a.error else ""))
    for b in status.background:
        out.print(f"threads of {b.runner}: {b.state}: {b.summary}")
    for finding in findings:
        out.print(f"FINDING: {finding}")


def _needs_a_look(p: PartitionLag) -> bool:
    return p.state != "replicating" or bool(p.error or p.skipped or p.lost or p.stale)


def _text(value: int | None) -> str:
    return "-" if value is None else str(value)


def _operator() -> str:
    """Who pauses or resumes: this shell's user and host, as procedures record it."""
    return f"{getpass.getuser()}@{socket.gethostname()} (replicator CLI)"


@command(
    FLOWS,
    "pause",
    help_="stop a flow's replication until an operator resumes it (the workers stay up; "
    "the status page shows it paused, the supervisor raises no alarm for it)",
    epilog=exit_statuses(
        "refused: a procedure holds the flow, or stopped it (a failover: its own steps "
        "start it again); or its workers did not stop within --timeout",
        zero="the flow is paused (or already was: who paused it is shown)",
    ),
)
def _pause(
    *,
    flow: FlowArgument = None,
    flow_option: OneFlowOption = None,
    reason: Annotated[
        str, typer.Option("--reason", metavar="TEXT", help="why, for the next operator")
    ],
    config: ConfigOption,
    state_url_: StateUrlOption = None,
    timeout: TimeoutOption = 60.0,
    output: OutputOption = Output.table,
) -> int:
    chosen = _one_flow(config, flow, flow_option)
    store = StateStore(state_url(state_url_))
    try:
        result = pause_flow(store, chosen, _operator(), reason, timeout)
    finally:
        store.close()

    def text() -> None:
        if result.get("already"):
            print(
                f"flow {chosen.name} was already paused by {result['by']} at {result['at']}: "
                f"{result['reason']}"
            )
        else:
            print(
                f"flow {chosen.name} paused; its workers stopped. "
                f"`replicator flows resume {shell_safe(chosen.name)}`"
            )

    emit(result, output, text)
    return 0


@command(
    FLOWS,
    "resume",
    help_="start a paused flow again, from where it stopped",
    epilog=exit_statuses(
        "refused: the flow is not paused (it runs, or a procedure stopped it), or a "
        "procedure holds it",
        zero="the flow runs again (workers start it within about a second)",
    ),
)
def _resume(
    *,
    flow: FlowArgument = None,
    flow_option: OneFlowOption = None,
    config: ConfigOption,
    state_url_: StateUrlOption = None,
    output: OutputOption = Output.table,
) -> int:
    chosen = _one_flow(config, flow, flow_option)
    store = StateStore(state_url(state_url_))
    try:
        result = resume_flow(store, chosen, _operator())
    finally:
        store.close()
    paused = result["paused"]
    emit(
        result,
        output,
        lambda: print(
            f"flow {chosen.name} resumed (paused by {paused.get('by')} at {paused.get('at')}: "
            f"{paused.get('reason')})"
        ),
    )
    return 0
