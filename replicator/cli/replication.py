"""`replicator run | status | topics`: the replication engine from the shell."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from replicator.config import load_config
from replicator.engine.collector import pace_for_replication
from replicator.engine.status import NoStatus, PartitionStatus, StatusRecord, read_status
from replicator.engine.topic_sync import TopicSync
from replicator.kafka.access import check_access
from replicator.operations.runner import run_flows, select_flows
from replicator.operations.thread_status import RunnerThreads, read_thread_status
from replicator.statestore import STATE_URL_ENV, StateStore


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = commands.add_parser("run", help="replicate until stopped (SIGTERM/Ctrl-C flush first)")
    add_config(run)
    run.add_argument(
        "--state-url",
        help="SQLAlchemy URL of the DR state store whose flow states start and stop flows "
        f"(default ${STATE_URL_ENV}, else SQLite under .data/state)",
    )
    run.set_defaults(handler=_run)

    status = commands.add_parser("status", help="flows, partitions, lag and errors")
    add_config(status)
    status.add_argument("--json", action="store_true", help="print JSON for scripts")
    status.set_defaults(handler=_status)

    topics = commands.add_parser("topics", help="what each flow replicates, and why not")
    add_config(topics)
    topics.set_defaults(handler=_topics)


def add_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", type=Path, required=True, help="mm2.properties-style configuration"
    )
    parser.add_argument(
        "--flow", action="append", metavar="A->B", help="only this flow (repeatable)"
    )


def _run(args: argparse.Namespace) -> int:
    flows = select_flows(load_config(args.config), args.flow)
    # A wrong password or certificate stops here, in one line, instead of workers
    # retrying for ever; a cluster that is away does not (the workers wait for it).
    check_access({c.alias: c for f in flows for c in (f.source, f.target)}.values())
    pace_for_replication()  # this process replicates (a single worker runs in a thread)
    run_flows(flows, store=StateStore(args.state_url))
    return 0


def _status(args: argparse.Namespace) -> int:
    """Every status row of the selected flows; exit 1 when a flow has none (nothing
    to show is not "all is well": no replicator has run for it on its target)."""
    rows: list[StatusRecord] = []
    runners: list[RunnerThreads] = []
    missing: list[str] = []
    for flow in select_flows(load_config(args.config), args.flow):
        try:
            rows += read_status(flow.target, flow.name, required=True)
        except NoStatus as exc:
            missing.append(f"flow {flow.name}: {exc}")
            continue
        runners += read_thread_status(flow)
    if args.json:
        threads = [{**asdict(r), "state": r.state} for r in runners]
        json.dump([asdict(row) for row in rows] + threads, sys.stdout, indent=2)
        print()
    else:
        _print_status(rows)
        for r in runners:  # `replicator run`'s background threads (checkpoints, ...)
            print(f"{r.flow:<16} {'threads of ' + r.runner:<48} {r.state:<12} {r.summary()}")
    for problem in missing:
        print(f"replicator: error: {problem}", file=sys.stderr)
    return 1 if missing else 0


def _print_status(rows: list[StatusRecord]) -> None:
    for row in sorted(rows, key=lambda r: (r.flow, isinstance(r, PartitionStatus), _where(r))):
        if isinstance(row, PartitionStatus):
            kind = f"partition {row.where}"
            figures = (
                f"next={row.next_offset} lag={row.lag} replicated={row.replicated} lost={row.lost}"
            )
            if row.skip_note:
                figures += f" ({row.skip_note})"
        else:
            kind, figures = f"worker {row.worker}", f"partitions={row.partitions}"
            if row.python_reason:
                figures += f" loop in Python alone: {row.python_reason}"
        error = f"  ERROR: {row.error}" if row.error else ""
        print(f"{row.flow:<16} {kind:<48} {row.state:<12} {figures}{error}")


def _where(row: StatusRecord) -> str:
    return row.where if isinstance(row, PartitionStatus) else row.worker


def _topics(args: argparse.Namespace) -> int:
    for flow in select_flows(load_config(args.config), args.flow):
        print(f"flow {flow.name}:")
        for decision in TopicSync(flow).decisions():
            mark = "->" if decision.replicate else "  "
            target = decision.remote_topic if decision.replicate else decision.reason
            print(f"  {mark} {decision.source_topic:<40} {target}")
    return 0
