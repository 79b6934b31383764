"""The options several commands share, declared once so that they mean the same
everywhere: `--config` (default `$REPLICATOR_CONFIG`), `--flow`, `--state-url`,
`-o/--output` (and `--json`, deprecated), `--dry-run`, `--id`, `--timeout`, `--all`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from replicator.cli.app import CONFIG_ENV
from replicator.cli.output import Output
from replicator.cli.status_table import FURTHEST_BEHIND, LISTED_PARTITIONS
from replicator.statestore import STATE_URL_ENV, STATE_URL_FILE_ENV

ConfigOption = Annotated[
    Path,
    typer.Option(
        "--config",
        envvar=CONFIG_ENV,
        metavar="PATH",
        help="the replicator's mm2.properties-style configuration",
        show_default=False,
    ),
]
FlowsOption = Annotated[
    list[str] | None,
    typer.Option("--flow", metavar="A:B", help="only this flow (repeatable; default: all)"),
]
StateUrlOption = Annotated[
    str | None,
    typer.Option(
        "--state-url",
        metavar="URL",
        help=f"SQLAlchemy URL of the DR state store (default ${STATE_URL_ENV}, or the file "
        f"${STATE_URL_FILE_ENV} names; in a checkout of the project or a folder with a "
        ".data folder, sqlite:///.data/state/replicator.db)",
        show_default=False,
    ),
]
OutputOption = Annotated[
    Output,
    typer.Option(
        "-o",
        "--output",
        metavar="table|json|yaml",
        help="output format (default: table)",
        show_default=False,
    ),
]


def _deprecated_json(value: bool) -> bool:
    """`--json` came before `-o json`: scripts that pass it keep working, and stderr (never
    the JSON on stdout) says what replaces it."""
    if value:
        print("replicator: warning: --json is deprecated: use -o json", file=sys.stderr)
    return value


#: Hidden from the help: `-o json` is the one way to ask for JSON that it lists.
JsonOption = Annotated[
    bool,
    typer.Option(
        "--json",
        metavar="",
        help="the same as -o json (deprecated)",
        show_default=False,
        hidden=True,
        callback=_deprecated_json,
    ),
]
DryRunOption = Annotated[
    bool,
    typer.Option("--dry-run", metavar="", help="check and say what it would do; change nothing"),
]
ProcedureIdOption = Annotated[
    str | None,
    typer.Option(
        "--id", metavar="ID", help="procedure id: the same id resumes and skips done steps"
    ),
]
TimeoutOption = Annotated[
    float, typer.Option("--timeout", metavar="SECONDS", help="seconds per wait")
]


def flag(name: str, help_: str) -> Any:
    """A boolean option that is set by being given (`--force`)."""
    return typer.Option(name, metavar="", help=help_)


#: `replicator status` and `flows describe`: every partition in the table
#: (`replicator.cli.status_table`).
AllPartitionsOption = Annotated[
    bool,
    flag(
        "--all",
        f"list every partition in the table (by default a flow of more than "
        f"{LISTED_PARTITIONS} lists those that need a look, the {FURTHEST_BEHIND} furthest "
        "behind, and a row for the rest; -o json and -o yaml hold every one)",
    ),
]
