"""`replicator verify`: is the copy right? Spark job, GX suites, summary in the store."""

from __future__ import annotations

import argparse
from pathlib import Path

from replicator.cli.replication import add_config
from replicator.config import load_config
from replicator.operations.runner import select_flows
from replicator.statestore import STATE_URL_ENV, StateStore
from replicator.verification.run import DEFAULT_RESULTS, verify

_SHOWN = 20


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "verify", help="prove the copy: record parity, lag and retention risk, Data Docs"
    )
    add_config(parser)
    parser.add_argument("--topics", nargs="+", help="only these source topics")
    parser.add_argument("--master", default="local[2]", help="Spark master URL")
    parser.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="results folder")
    parser.add_argument("--thresholds", type=Path, help="JSON thresholds (lag, retention margin)")
    parser.add_argument(
        "--state-url", help=f"SQLAlchemy URL of the state store (default ${STATE_URL_ENV})"
    )
    parser.set_defaults(handler=_verify)


def _verify(args: argparse.Namespace) -> int:
    store = StateStore(args.state_url)
    failed = 0
    for flow in select_flows(load_config(args.config), args.flow):
        result = verify(
            flow,
            store,
            topics=args.topics,
            master=args.master,
            results=args.results,
            thresholds=args.thresholds,
            config_file=args.config,
        )
        print(f"{flow.name}: {'passed' if result.success else 'FAILED'} ({result.run_id})")
        for name, suite in result.summary["suites"].items():
            print(f"  {name:<8} {'ok' if suite['success'] else 'FAILED'} ({suite['rows']} rows)")
            for failure in suite["failed"]:
                rows = failure["rows"]
                print(f"    {failure['expectation']} {failure['column'] or ''}: {len(rows)} rows")
                for row in rows[:_SHOWN]:
                    print(f"      {row}")
        print(f"  tables and plan: {result.directory}")
        print(f"  Data Docs: {result.summary['data_docs']}")
        failed += not result.success
    return 1 if failed else 0
