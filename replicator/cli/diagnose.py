"""`replicator diagnose`: why a topic is not replicated, or not fully."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from replicator.config import load_config
from replicator.operations.diagnose import DEFAULT_LAG_THRESHOLD, diagnose

_EXIT_STATUS = (
    "exit status: 0 when the verdict is 'replicated'; 1 when it is 'not replicated', "
    "'partially replicated' or 'unknown' (a check could not be made), or on an error"
)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "diagnose",
        help="why a topic is not replicated (or not fully), and the fix",
        description="Check a topic of one flow: topics filter, internal and cycle rules, "
        "source and remote topic, size limits, permissions, and per partition the "
        "replicator's status, resume offset and lag. Every check is listed, problems first.",
        epilog=_EXIT_STATUS,
    )
    parser.add_argument(
        "--config", type=Path, required=True, help="mm2.properties-style configuration"
    )
    parser.add_argument("--flow", required=True, metavar="A->B", help="the flow to check")
    parser.add_argument("topic", metavar="TOPIC", help="the topic's name on the source cluster")
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    parser.add_argument(
        "--lag-threshold",
        type=int,
        default=DEFAULT_LAG_THRESHOLD,
        metavar="RECORDS",
        help="warn about partitions more records behind than this (default: %(default)s)",
    )
    parser.set_defaults(handler=_diagnose)


def _diagnose(args: argparse.Namespace) -> int:
    flow = load_config(args.config).flow(args.flow)
    diagnosis = diagnose(flow, args.topic, args.lag_threshold)
    if args.json:
        json.dump(diagnosis.as_dict(), sys.stdout, indent=2)
        print()
    else:
        print(diagnosis.render())
    return 0 if diagnosis.verdict == "replicated" else 1
