"""`replicator verify`: is the copy right? Spark job, GX suites, summary in the store."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Annotated

import typer

from replicator.cli.app import ROOT, command, exit_statuses, usage_error
from replicator.cli.options import ConfigOption, FlowsOption, OutputOption, StateUrlOption
from replicator.cli.output import Output, emit, print_table
from replicator.cli.progress import tracked
from replicator.cli.state import state_url
from replicator.config import load_config
from replicator.operations.runner import select_flows
from replicator.statestore import StateStore
from replicator.verification.host import serve
from replicator.verification.incremental import SAMPLE_PERIOD
from replicator.verification.run import DEFAULT_RESULTS, Verification, verify
from replicator.verification.server import DEFAULT_PORT, LOOPBACK, REMOTE_SCHEME, suites_port

_SHOWN = 20


@command(
    ROOT,
    "verify",
    panel="DR procedures",
    help_="prove the copy: record parity, lag and retention risk, Data Docs",
    description="Runs the Spark verification job and the GX suites for each selected "
    "flow and records the result in the state store. Each partition is verified from "
    "where the flow's earlier runs left it (what they verified is kept in the state "
    "store); `--full` verifies everything the source retains again. `--topics` takes "
    "one or more topics (`--topics a b`), and may be repeated.",
    epilog=exit_statuses("a flow's copy failed a suite, or an error", zero="every flow passed"),
    # `--topics a b c`: the topics after the first arrive as extra arguments.
    context_settings={"allow_extra_args": True},
)
def _verify(
    *,
    ctx: typer.Context,
    config: ConfigOption,
    flow: FlowsOption = None,
    topics: Annotated[
        list[str] | None,
        typer.Option("--topics", metavar="TOPIC...", help="only these source topics"),
    ] = None,
    master: Annotated[
        str,
        typer.Option(
            "--master",
            metavar="URL",
            help="Spark master URL, or a verification server's sc://HOST:PORT",
        ),
    ] = "local[2]",
    results: Annotated[
        Path, typer.Option("--results", metavar="PATH", help="results folder")
    ] = DEFAULT_RESULTS,
    thresholds: Annotated[
        Path | None,
        typer.Option(
            "--thresholds", metavar="PATH", help="JSON thresholds (lag, retention margin)"
        ),
    ] = None,
    sample_days: Annotated[
        float,
        typer.Option(
            "--sample-period",
            metavar="DAYS",
            min=0.001,
            help="re-read what earlier runs verified so that all of it is re-checked "
            "within this many days",
        ),
    ] = SAMPLE_PERIOD / timedelta(days=1),
    full: Annotated[
        bool,
        typer.Option("--full", help="verify every retained record again, not only what is new"),
    ] = False,
    state_url_: StateUrlOption = None,
    output: OutputOption = Output.table,
) -> int:
    if ctx.args and not topics:
        raise usage_error(f"unexpected arguments {' '.join(ctx.args)}", "--topics")
    chosen_topics = [*topics, *ctx.args] if topics else None
    store = StateStore(state_url(state_url_))
    verified: list[tuple[str, Verification]] = []
    for selected in tracked(select_flows(load_config(config), flow), "verifying", "flows", output):
        result = verify(
            selected,
            store,
            topics=chosen_topics,
            master=master,
            results=results,
            thresholds=thresholds,
            config_file=config,
            full=full,
            sample_period=timedelta(days=sample_days),
        )
        verified.append((selected.name, result))
        if output is Output.table:  # as each flow is done: a flow takes minutes
            _print([(selected.name, result)])
    data = [
        {
            "flow": name,
            "run_id": r.run_id,
            "success": r.success,
            "directory": r.directory,
            "summary": r.summary,
        }
        for name, r in verified
    ]
    emit(data, output, lambda: None)
    return 1 if any(not r.success for _, r in verified) else 0


@command(
    ROOT,
    "verification-server",
    panel="DR procedures",
    help_="keep Spark and the suites warm for verification runs (a Spark Connect server)",
    description="Runs a local Spark Connect server with the Kafka connector in the "
    "foreground until stopped: `replicator verify --master sc://HOST:PORT` then runs "
    "its job there, without starting, loading and compiling Spark for every run, and "
    "its GX suites in a process kept ready on the next port (PORT + 1). The "
    "server reads the flows' clusters itself (their key and trust stores at the "
    "configuration's paths). Whoever reaches it runs code as its user: it listens on "
    "loopback unless `--host` says otherwise (then keep it on a private network), and "
    "with `$SPARK_CONNECT_AUTHENTICATE_TOKEN` set it answers only clients holding that "
    "token (`replicator verify` sends it from the same variable; localhost clients only). "
    "Its clients share the results folder with it, at the same path.",
    epilog=exit_statuses("the server could not start or stopped with an error"),
)
def _verification_server(
    *,
    port: Annotated[
        int,
        typer.Option(
            "--port", min=1, max=65534, help="the port it listens on (its suites on the next)"
        ),
    ] = DEFAULT_PORT,
    cores: Annotated[
        int, typer.Option("--cores", min=1, help="cores its jobs run on (local[N])")
    ] = 2,
    host: Annotated[
        str,
        typer.Option("--host", help="the interface it listens on (0.0.0.0: every interface)"),
    ] = LOOPBACK,
) -> int:
    shown = "localhost" if host == LOOPBACK else host
    print(
        f"verification server on {REMOTE_SCHEME}{shown}:{port} (local[{cores}]); "
        f"warm suites on port {suites_port(port)}",
        flush=True,
    )
    return serve(port, cores, host)


def _print(verified: list[tuple[str, Verification]]) -> None:
    for name, result in verified:
        print(f"{name}: {'passed' if result.success else 'FAILED'} ({result.run_id})")
        summary = result.summary.get("verified")
        if summary is not None:
            kind = "incremental" if summary["incremental"] else "full"
            print(
                f"  {kind}: {summary['records_now']:,} records verified now, "
                f"{summary['records_before']:,} by earlier runs"
            )
            if summary.get("sampled_ranges"):
                print(
                    f"  re-read {summary['sampled_ranges']} ranges verified before "
                    f"({summary['sampled_records']:,} records)"
                )
            for where in summary.get("sampled_differing", []):
                print(f"  {where} no longer holds what was verified")
            for partition, why in summary["reverified"].items():
                print(f"  {partition} verified whole again: {why}")
        suites = result.summary["suites"].items()
        print_table(("SUITE", "RESULT", "ROWS", "FAILED"), [_suite_row(*s) for s in suites])
        print(f"  tables and plan: {result.directory}")
        print(f"  Data Docs: {result.summary['data_docs']}")


def _suite_row(name: str, suite: dict) -> tuple[str, str, str, str]:
    """The suite's outcome, and what it failed: each expectation, with its failing rows
    (the first `_SHOWN`)."""
    failed = []
    for failure in suite["failed"]:
        rows = failure["rows"]
        failed.append(f"{failure['expectation']} {failure['column'] or ''}: {len(rows)} rows")
        failed += [f"  {row}" for row in rows[:_SHOWN]]
    return name, "ok" if suite["success"] else "FAILED", str(suite["rows"]), "\n".join(failed)
