"""docs/cli.md, the command-line reference: every command's `--help`, as the command
prints it, one section per command.

    python -m replicator.cli.reference --write docs/cli.md   # regenerate it
    python -m replicator.cli.reference --check docs/cli.md   # exit 1 if it is stale

The help is rendered at a fixed width without colours, so the page is the same on
every machine; tests/unit/cli/test_reference.py fails when the page and the
commands' help differ.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from replicator.allocator import ENV as ALLOCATOR_ENV
from replicator.cli import command_line, main
from replicator.cli.app import CONFIG_ENV, PANELS
from replicator.cli.output import PIPE_WIDTH
from replicator.logs import ENV as LOG_FORMAT_ENV
from replicator.statestore import STATE_URL_ENV, STATE_URL_FILE_ENV

#: The width the help is rendered at on the page.
WIDTH = 100
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

_HEAD = f"""\
# Command-line reference

Every command of `replicator`, with its options and exit statuses, as `replicator
COMMAND --help` prints them. This page is generated from the commands themselves
(`python -m replicator.cli.reference --write docs/cli.md`); a unit test fails when it
differs from what they say.

## Conventions

- **Exit status**: `0` done (or all is well), `1` a finding or a failure (the line on
  stderr says which, and how to fix it), `2` a usage error (an unknown option, a missing
  or invalid value, options that exclude each other). Each command's help says what `1`
  means for it.
- **Output**: the commands that read or report take `-o table|json|yaml` (`--json`, where
  it was there before, still works as `-o json` but is deprecated: stderr says so, and
  the help no longer lists it). JSON and YAML hold the same data; times are ISO 8601.
  Tables fit the terminal's width, a long name wrapping inside its column; off a
  terminal (a pipe, a file) they are {PIPE_WIDTH} columns wide, or `$COLUMNS`. Progress
  bars with rate, elapsed time and ETA (flows for verify, migrate and checkpoints; steps,
  and the one running, for failover, failback, drill and offsets reset) are drawn on
  stderr only when it is a terminal and the output is a table: never in JSON, YAML,
  pipes or logs. `replicator import strimzi` keeps `-o` as `--output FILE`.
- **Environment**:
  - `{CONFIG_ENV}`: the default of `--config`.
  - `{STATE_URL_ENV}`: the default of `--state-url` (a SQLAlchemy URL, e.g.
    `postgresql+psycopg://replicator@db:5432/replicator`), or `{STATE_URL_FILE_ENV}`: a
    file holding that URL (keeps a password out of the environment). Without either, a
    command uses `sqlite:///.data/state/replicator.db` only in a checkout of the project
    or in a folder that has a `.data` folder already (the Helm chart mounts one for a
    pod's own store); anywhere else it stops with exit status 2 and says where it looked
    and how to name the store: no empty store is created silently.
  - `{LOG_FORMAT_ENV}`: the default of `--log-format` (`text` or `json`).
  - `{ALLOCATOR_ENV}`: the memory allocator of `replicator run` (`auto`, the
    default: jemalloc when the machine has `libjemalloc`, else the C library's malloc;
    `jemalloc`: jemalloc or an error at start; `system`: never jemalloc). `replicator run`
    started from its own command line re-executes itself once (same pid, same arguments)
    with jemalloc in `LD_PRELOAD` and `MALLOC_CONF=oversize_threshold:0` (unless
    `MALLOC_CONF` is set: then it is used as given), and logs `memory allocator: ...` at
    start. librdkafka allocates and frees several blocks per record on different threads;
    on glibc's malloc that is about a third of the compiled data path's CPU
    (docs/dataplane.md, "Performance"). `make setup` and both images install
    `libjemalloc2`.
- **Global options** `-v/--verbose` and `--log-format` go before or after the command.
- **Shell completion**: `replicator --install-completion` installs it for the current
  shell (bash, zsh, fish, PowerShell); `replicator --show-completion` prints the script.
"""


def command_paths() -> Iterator[list[str]]:
    """Every command and group, as the words after `replicator`, in the order
    `replicator --help` lists them (by panel, then as registered)."""

    def walk(group: Any, path: list[str]) -> Iterator[list[str]]:
        yield path
        children = list(getattr(group, "commands", {}).items())
        children.sort(key=lambda item: _panel_rank(item[1]))
        for name, child in children:
            yield from walk(child, [*path, name])

    yield from walk(command_line(), [])


def _panel_rank(command: Any) -> int:
    panel = getattr(command, "rich_help_panel", None)
    return PANELS.index(panel) if panel in PANELS else len(PANELS)


@contextlib.contextmanager
def _fixed_width() -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in ("COLUMNS", "NO_COLOR")}
    os.environ["COLUMNS"], os.environ["NO_COLOR"] = str(WIDTH), "1"
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def help_text(path: list[str]) -> str:
    """What `replicator PATH --help` prints, at the page's width, without colours."""
    out = io.StringIO()
    with _fixed_width(), contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main([*path, "--help"])
    lines = [line.rstrip() for line in _ANSI.sub("", out.getvalue()).splitlines()]
    return "\n".join(lines).strip("\n") + "\n"


def reference() -> str:
    """The whole page."""
    sections = [_HEAD]
    for path in command_paths():
        title = " ".join(["replicator", *path])
        sections.append(f"## `{title}`\n\n```text\n{help_text(path)}```\n")
    return "\n".join(sections)


def _usage() -> int:
    print("usage: python -m replicator.cli.reference --write|--check docs/cli.md", file=sys.stderr)
    return 2


def run(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("--write", "--check"):
        return _usage()
    page, path = reference(), Path(argv[1])
    if argv[0] == "--write":
        path.write_text(page, encoding="utf-8")
        print(f"written: {path}")
        return 0
    if path.read_text(encoding="utf-8") != page:
        print(f"{path} is stale: run python -m replicator.cli.reference --write {path}")
        return 1
    print(f"{path} matches the commands' help")
    return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
