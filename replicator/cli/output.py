"""What a command prints: `-o table` (the default: tables for a person), `-o json`
(for scripts; the deprecated `--json` is the same) or `-o yaml`. JSON and YAML hold the
same data, with times as ISO 8601 strings; progress bars never mix into them. Tables
are rich's (`print_table`): a long name wraps inside its column, so a table is never
wider than the terminal."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, is_dataclass
from datetime import date, datetime
from enum import Enum, StrEnum
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Column, Table
from rich.text import Text

from replicator.cli.app import usage_error

#: How wide a table is off a terminal (a pipe, a file, a test's capture) unless $COLUMNS
#: says otherwise: what a reader's window or an editor shows without scrolling.
PIPE_WIDTH = 100


class Output(StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"


def chosen(output: Output, json_flag: bool = False) -> Output:
    """The format `-o` and `--json` ask for together."""
    if json_flag and output not in (Output.table, Output.json):
        raise usage_error(f"--json and -o {output.value} ask for two formats; give one", "--json")
    return Output.json if json_flag else output


def plain(value: Any) -> Any:  # noqa: PLR0911 - one return per kind of value
    """`value` as JSON's types: dataclasses as dicts, times as ISO 8601, paths as text."""
    if is_dataclass(value) and not isinstance(value, type):
        return plain(asdict(value))
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [plain(v) for v in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    if isinstance(value, Enum):
        return value.value
    return value


def emit(data: Any, output: Output, table: Callable[[], object]) -> None:
    """Print `data` as JSON or YAML, or call `table` to print it for a person."""
    if output is Output.json:
        json.dump(plain(data), sys.stdout, indent=2)
        print()
    elif output is Output.yaml:
        yaml.safe_dump(plain(data), sys.stdout, sort_keys=False, allow_unicode=True)
    else:
        table()


def console() -> Console:
    """A rich console on stdout, as wide as the terminal; off a terminal `PIPE_WIDTH`
    columns unless $COLUMNS says. It prints text as given: names may hold brackets,
    colons and the like, which rich would otherwise read as markup, emoji or highlights."""
    out = Console(highlight=False, markup=False, emoji=False, soft_wrap=False)
    if not out.is_terminal and "COLUMNS" not in os.environ:
        out.width = PIPE_WIDTH
    return out


def print_table(
    columns: Sequence[str | Column],
    rows: Iterable[Sequence[str]],
    *,
    title: str | None = None,
) -> None:
    """Print `rows` under the headers `columns` on `console()`, `title` above them;
    nothing at all without rows. A cell too long for its column wraps at its spaces, and
    a word longer than the column (a topic or group name) folds, so no name is cut short
    and no line is wider than the console. A `Column` is taken as given (e.g. one that
    never wraps)."""
    listed = [list(row) for row in rows]
    if not listed:
        return
    out = console()
    if _print_plain(out, columns, listed, title):
        return
    cells = [[Text(cell) for cell in row] for row in listed]
    table = Table(
        *(Column(c, overflow="fold") if isinstance(c, str) else c for c in columns),
        box=None,
        header_style="bold",
        pad_edge=False,
        title=title,
        title_justify="left",
    )
    for row in cells:
        table.add_row(*row)
    out.print(table)


def _print_plain(
    out: Console, columns: Sequence[str | Column], rows: list[list[str]], title: str | None
) -> bool:
    """Print the table the way rich lays out one whose cells all fit (columns as wide
    as their widest cell, two spaces between), without rich, which measures every cell
    and took seconds for 10,000 partitions of `replicator status`; False when a cell
    must wrap (a line break, or the columns wider than the console) or on a terminal
    (rich's bold headers): rich prints it."""
    if out.is_terminal or any(not isinstance(c, str) for c in columns):
        return False
    headers = [str(c) for c in columns]
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            if "\n" in cell:
                return False
            widths[i] = max(widths[i], len(cell))
    if sum(widths) + 2 * (len(widths) - 1) > out.width:
        return False
    lines = [] if title is None else [title]
    for row in [headers, *rows]:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    sys.stdout.write("\n".join(lines) + "\n")
    return True
