"""Progress on long work, on the terminal only.

A bar (done/total, rate, elapsed time, ETA) where the work comes in countable
pieces the command can see (flows verified, flows taken over), a spinner with the
elapsed time where it cannot (a procedure's steps run inside the library). Both
draw on stderr, and only when stderr is a terminal and the output is a table:
never into JSON or YAML, a log file, a pipe or a CI log. They vanish when done,
leaving the command's own lines.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from replicator.cli.output import Output

T = TypeVar("T")


class RateColumn(ProgressColumn):
    """Pieces done per minute (flows are minutes of work each, not milliseconds)."""

    def __init__(self, unit: str) -> None:
        super().__init__()
        self.unit = unit

    def render(self, task: Task) -> Text:
        if task.speed is None:
            return Text(f"- {self.unit}/min", style="progress.data.speed")
        return Text(f"{task.speed * 60:.1f} {self.unit}/min", style="progress.data.speed")


def shown(output: Output = Output.table) -> bool:
    """Whether progress is drawn: a person watches stderr, and reads a table."""
    return output is Output.table and sys.stderr.isatty()


def tracked(
    items: Iterable[T], description: str, unit: str, output: Output = Output.table
) -> Iterator[T]:
    """`items`, one at a time, with a bar of how many are done, their rate and the ETA."""
    pieces = list(items)
    if not shown(output) or not pieces:
        yield from pieces
        return
    progress = Progress(
        SpinnerColumn(),
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(unit),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    with progress:
        task = progress.add_task(description, total=len(pieces))
        for piece in pieces:
            yield piece
            progress.advance(task)


@contextmanager
def activity(description: str, output: Output = Output.table) -> Iterator[None]:
    """A spinner with the elapsed time while the body runs."""
    if not shown(output):
        yield
        return
    progress = Progress(
        SpinnerColumn(),
        TextColumn("[progress.description]{task.description}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    with progress:
        progress.add_task(description, total=None)
        yield
