"""`replicator diagnose`: why a topic is not replicated, or not fully."""

from __future__ import annotations

from typing import Annotated

import typer

from replicator.cli.app import ROOT, command, exit_statuses
from replicator.cli.options import ConfigOption, JsonOption, OutputOption
from replicator.cli.output import Output, chosen, emit, print_table
from replicator.config import load_config
from replicator.operations.diagnose import DEFAULT_LAG_THRESHOLD, Diagnosis, diagnose


@command(
    ROOT,
    "diagnose",
    panel="Replication",
    help_="why a topic is not replicated (or not fully), and the fix",
    description="Check a topic of one flow: topics filter, internal and cycle rules, "
    "source and remote topic, size limits, permissions, and per partition the "
    "replicator's status, resume offset and lag. Every check is listed, problems first.",
    epilog=exit_statuses(
        "the verdict is 'not replicated', 'partially replicated' or 'unknown' (a check "
        "could not be made), or an error",
        zero="the verdict is 'replicated'",
    ),
)
def _diagnose(
    *,
    topic: Annotated[
        str, typer.Argument(metavar="TOPIC", help="the topic's name on the source cluster")
    ],
    config: ConfigOption,
    flow: Annotated[str, typer.Option("--flow", metavar="A:B", help="the flow to check")],
    lag_threshold: Annotated[
        int,
        typer.Option(
            "--lag-threshold",
            metavar="RECORDS",
            help="warn about partitions more records behind than this",
        ),
    ] = DEFAULT_LAG_THRESHOLD,
    output: OutputOption = Output.table,
    json_: JsonOption = False,
) -> int:
    diagnosis = diagnose(load_config(config).flow(flow), topic, lag_threshold)
    emit(diagnosis.as_dict(), chosen(output, json_), lambda: _print(diagnosis))
    return 0 if diagnosis.verdict == "replicated" else 1


def _print(diagnosis: Diagnosis) -> None:
    print(diagnosis.headline())  # one line, however long: it is grepped for
    print_table(
        ("STATUS", "CHECK", "DETAIL", "FIX"),
        [(f.status.upper(), f.check, f.detail, f.fix or "") for f in diagnosis.by_severity()],
    )
