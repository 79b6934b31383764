"""docs/cli.md and its group pages, the command-line reference: every command's
`--help`, as the command prints it, one section per command, one page per help panel of
`replicator --help` (docs/cli-set-up.md, docs/cli-replication.md, ...), and docs/cli.md
the index: the groups and their commands, the conventions and `replicator --help`.

    python -m replicator.cli.reference --write docs/cli.md   # regenerate them all
    python -m replicator.cli.reference --check docs/cli.md   # exit 1 if one is stale

The group pages are written beside docs/cli.md. The help is rendered at a fixed width
without colours, so the pages are the same on every machine;
tests/unit/cli/test_reference.py fails when a page and the commands' help differ.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import textwrap
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

#: The index page; the group pages are named after their panel (`page_of`).
INDEX = "cli.md"

_HEAD = """\
# Command-line reference

Every command of `replicator`, with its options and exit statuses, as `replicator
COMMAND --help` prints them, on one page per group of `replicator --help`; this page
lists the groups and their commands, then the conventions they share. These pages are
generated from the commands themselves (`python -m replicator.cli.reference --write
docs/cli.md` writes this page and the group pages); a unit test fails when one differs
from what they say.
"""

_CONVENTIONS = f"""\
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
    started from its own command line re-executes itself once (same pid, same arguments),
    before it imports its command line's modules,
    with jemalloc in `LD_PRELOAD` and `MALLOC_CONF=oversize_threshold:0` (unless
    `MALLOC_CONF` is set: then it is used as given), and logs `memory allocator: ...` at
    start. librdkafka allocates and frees several blocks per record on different threads;
    on glibc's malloc that is about a third of the compiled data path's CPU
    ([Data plane tuning](dataplane-tuning.md#performance-where-it-stands)). `make setup`
    and both images install `libjemalloc2`.
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


def page_of(panel: str) -> str:
    """The file name of a help panel's page: `Set-up` -> `cli-set-up.md`."""
    return "cli-" + re.sub(r"[^a-z0-9]+", "-", panel.lower()).strip("-") + ".md"


def _panel(path: list[str]) -> str:
    """The help panel of a command: its top-level command's."""
    command = command_line()
    return getattr(command.commands[path[0]], "rich_help_panel", None) or "Commands"


def _title(path: list[str]) -> str:
    return " ".join(["replicator", *path])


def _anchor(path: list[str]) -> str:
    """The anchor mkdocs gives a command's heading (`## \\`replicator flows list\\``)."""
    return "-".join(["replicator", *path])


def _section(path: list[str]) -> str:
    return f"## `{_title(path)}`\n\n```text\n{help_text(path)}```\n"


def _summary(path: list[str]) -> str:
    """The command's line in `replicator --help` (or its group's)."""
    command: Any = command_line()
    for name in path:
        command = command.commands[name]
    return " ".join(command.get_short_help_str(limit=1000).split())


def _groups() -> dict[str, list[list[str]]]:
    """The commands of each help panel, in the order `replicator --help` lists them."""
    groups: dict[str, list[list[str]]] = {}
    for path in command_paths():
        if path:
            groups.setdefault(_panel(path), []).append(path)
    return groups


def _index(groups: dict[str, list[list[str]]]) -> str:
    lines = [_HEAD, "## The commands, by group\n"]
    for panel, paths in groups.items():
        page = page_of(panel)
        lines.append(f"### [{panel}]({page})\n")
        for path in paths:
            indent = "    " * (len(path) - 1)
            link = f"[`{_title(path)}`]({page}#{_anchor(path)})"
            lines.append(f"{indent}- {link}: {_summary(path)}")
        lines.append("")
    return "\n".join([*lines, _CONVENTIONS, _section([])])


def _group_page(panel: str, paths: list[list[str]]) -> str:
    intro = (
        f"The commands of the **{panel}** group of `replicator --help`, each with its "
        "options and exit statuses as `replicator COMMAND --help` prints them. Exit "
        "statuses, output formats, the environment and the global options they share: "
        "[Command-line reference](cli.md#conventions). Generated like the rest of the "
        "reference (`python -m replicator.cli.reference --write docs/cli.md`)."
    )
    head = f"# Command line: {panel}\n\n{textwrap.fill(intro, width=88)}\n"
    return "\n".join([head, *(_section(path) for path in paths)])


def pages() -> dict[str, str]:
    """Every page of the reference, by file name: the index (`INDEX`) and one page per
    help panel."""
    groups = _groups()
    written = {INDEX: _index(groups)}
    for panel, paths in groups.items():
        written[page_of(panel)] = _group_page(panel, paths)
    return written


def reference() -> str:
    """The index page, docs/cli.md."""
    return pages()[INDEX]


def _usage() -> int:
    print("usage: python -m replicator.cli.reference --write|--check docs/cli.md", file=sys.stderr)
    return 2


def run(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("--write", "--check"):
        return _usage()
    index = Path(argv[1])
    written = {
        (index if name == INDEX else index.with_name(name)): text for name, text in pages().items()
    }
    if argv[0] == "--write":
        for path, text in written.items():
            path.write_text(text, encoding="utf-8")
            print(f"written: {path}")
        return 0
    stale = [
        path
        for path, text in written.items()
        if not path.exists() or path.read_text(encoding="utf-8") != text
    ]
    for path in stale:
        print(f"{path} is stale: run python -m replicator.cli.reference --write {index}")
    if stale:
        return 1
    print(f"{', '.join(map(str, written))} match the commands' help")
    return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
