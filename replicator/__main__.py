"""`python -m replicator` and the `replicator` command's entry point (`main`).

`replicator run` runs on its preferred memory allocator, which a process can only get
by re-executing itself (`replicator.allocator`). It does so here, before the command
line's modules are imported: re-executed from inside the `run` command, the process
imported them twice (about 0.8 s of CPU each time, 1 to 2 s of wall time on a busy
machine), and a worker's remote topics were created that much later. The `run`
command re-executes the process itself too when it was not done here (a
`replicator.cli.main()` called by a program), and says what is wrong with the choice.
"""

from __future__ import annotations

import contextlib
import sys

from replicator import allocator
from replicator.errors import ReplicatorError

#: The command that replicates (`replicator.cli.replication`).
RUN = "run"
#: The root command's options that take a value: the command name follows it.
VALUED_ROOT_OPTIONS = ("--log-format",)


def command_name(args: list[str]) -> str | None:
    """The command `args` (the arguments after the program's name) run, if any."""
    value_next = False
    for arg in args:
        if value_next:
            value_next = False
        elif arg in VALUED_ROOT_OPTIONS:
            value_next = True
        elif not arg.startswith("-"):
            return arg
    return None


def main() -> int:
    """Run `replicator` with this process's arguments; the exit status."""
    if command_name(sys.argv[1:]) == RUN:
        # A wrong choice is not lost: `run` meets it again and reports it, its logging
        # set up (exit status 1, the variable and the choices named).
        with contextlib.suppress(ReplicatorError):
            allocator.reexecute_with_preferred()
    from replicator.cli import main as cli_main  # noqa: PLC0415 - after the re-execution

    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
