"""The `replicator` command: typer commands, one module per command group, on the
shared application of `replicator.cli.app`.

The top layer: it may import every package of `replicator`, and nothing but
`python -m replicator` (`__main__`) imports it.

`main(argv)` keeps the contract the command had under argparse: it returns the
command's exit status (0 ok, 1 a finding or a failure); `--help`, `--version`, shell
completion and usage errors (status 2) leave by SystemExit, as they did.
"""

from __future__ import annotations

import functools
from importlib.metadata import entry_points
from typing import cast

import typer

# Imported in the order `replicator --help` lists their commands.
# isort: off
from replicator.cli import (  # noqa: F401 - each module adds its commands to ROOT
    init,
    acls,
    imports,
    migrate,
    replication,
    offsets,
    diagnose,
    flows,
    offset_reset,
    procedures,
    verify,
    reports,
    clients,
)

# isort: on
from replicator.cli.app import ROOT, exit_status, start

#: Command groups other installed distributions add (`replicator stack`: the local
#: stack, lab/replicator_lab, installed beside the product by `make setup`, not in the
#: wheel or the images' product): each entry point names a module that adds its
#: commands to ROOT when imported.
EXTENSIONS = "replicator.cli"
for _extension in sorted(entry_points(group=EXTENSIONS), key=lambda e: e.name):
    _extension.load()

__all__ = ["ROOT", "command_line", "main"]


@functools.cache
def command_line() -> typer.main.TyperGroup:
    """The whole command tree, built once (for `main` and the reference page)."""
    return cast(typer.main.TyperGroup, typer.main.get_command(ROOT))


def main(argv: list[str] | None = None) -> int:
    """Run `replicator` with `argv` (default: the process's arguments); the exit status."""
    start(own_process=argv is None)
    try:
        command_line().main(args=argv, prog_name="replicator", standalone_mode=True)
    except SystemExit:
        status = exit_status()
        if status is None:  # help, version, completion or a usage error: as it was
            raise
        return status
    raise AssertionError("typer's standalone mode always exits")  # pragma: no cover
