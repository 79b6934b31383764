"""The `replicator` command: one sub-command group per module in this package.

The top layer: it may import every package of `replicator`, and nothing but
`python -m replicator` (`__main__`) imports it.
"""

from __future__ import annotations

import argparse
import logging
import sys
import traceback

from confluent_kafka import KafkaException

from replicator import __version__, logs
from replicator.cli import (
    acls,
    clients,
    diagnose,
    imports,
    init,
    migrate,
    offset_reset,
    offsets,
    procedures,
    replication,
    reports,
    stack,
    verify,
)
from replicator.cli.kafka_errors import kafka_error_line
from replicator.errors import ReplicatorError
from replicator.localstack import StackError

_LOG_FORMAT = ("--log-format",)
_LOG_FORMAT_OPTIONS: dict = {
    "choices": logs.FORMATS,
    "help": f"text (default) or json: one JSON object a line (also ${logs.ENV})",
}

#: Errors whose message is already a complete, actionable line for the user.
_USER_ERRORS = (StackError, ReplicatorError)


def _version() -> str:
    """`replicator 0.1.0 (confluent-kafka 2.16.1, librdkafka 2.x.y)`: what a bug report needs."""
    import confluent_kafka  # noqa: PLC0415 - already loaded by the commands' imports

    librdkafka, _ = confluent_kafka.libversion()
    return (
        f"replicator {__version__} "
        f"(confluent-kafka {confluent_kafka.__version__}, librdkafka {librdkafka})"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="replicator",
        description="Kafka disaster recovery: replication, offsets, failover and drills.",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=_version(),
        help="the replicator's version and the Kafka client libraries it runs on",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    parser.add_argument(*_LOG_FORMAT, **_LOG_FORMAT_OPTIONS, default=None)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    stack.register(commands)
    init.register(commands)
    replication.register(commands)
    offsets.register(commands)
    offset_reset.register(commands)
    clients.register(commands)
    diagnose.register(commands)
    procedures.register(commands)
    verify.register(commands)
    acls.register(commands)
    reports.register(commands)
    migrate.register(commands)
    imports.register(commands)
    # Also after the command (`replicator run --log-format json`); not given there, the
    # value before it (or its default) stands.
    for command in commands.choices.values():
        command.add_argument(*_LOG_FORMAT, **_LOG_FORMAT_OPTIONS, default=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        chosen = logs.configure(logging.DEBUG if args.verbose else logging.INFO, args.log_format)
    except ValueError as exc:  # $REPLICATOR_LOG_FORMAT names no format
        parser.error(str(exc))
    logs.pass_to_workers(chosen)
    # One INFO line per HTTP request (Airflow's REST API, polled) would drown the rest.
    logging.getLogger("httpx").setLevel(logging.DEBUG if args.verbose else logging.WARNING)
    try:
        return int(args.handler(args) or 0)
    except _USER_ERRORS as exc:
        print(f"replicator: error: {exc}", file=sys.stderr)
        return 1
    except KafkaException as exc:
        # A cluster that is away or refuses us: the user's to fix, not a crash.
        if args.verbose:
            traceback.print_exc()
        line = kafka_error_line(exc, getattr(args, "config", None))
        print(f"replicator: error: {line}", file=sys.stderr)
        return 1
