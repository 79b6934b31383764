"""Progress on long work, on the terminal only.

A bar (done/total, rate, elapsed time, ETA) where the work comes in countable
pieces the command can see: flows verified or taken over, and a procedure's steps
(each is saved in the state store when it completes, which a thread here reads;
the step running is named). They draw on stderr, and only when stderr is a terminal
and the output is a table: never into JSON or YAML, a log file, a pipe or a CI log.
They vanish when done, leaving the command's own lines.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

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
from replicator.statestore import StateStoreError
from replicator.statestore.runs import RunStore

if TYPE_CHECKING:
    from replicator.procedures import Procedure

T = TypeVar("T")
#: How often the steps' bar reads the state store.
_POLL_S = 0.5


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


def _bar(unit: str) -> Progress:
    return Progress(
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


def tracked(
    items: Iterable[T], description: str, unit: str, output: Output = Output.table
) -> Iterator[T]:
    """`items`, one at a time, with a bar of how many are done, their rate and the ETA."""
    pieces = list(items)
    if not shown(output) or not pieces:
        yield from pieces
        return
    with _bar(unit) as progress:
        task = progress.add_task(description, total=len(pieces))
        for piece in pieces:
            yield piece
            progress.advance(task)


@contextmanager
def steps_of(
    procedure: Procedure, store: RunStore, description: str, output: Output = Output.table
) -> Iterator[None]:
    """A bar of `procedure`'s steps done while the body runs it, naming the next one
    (a dry run saves no step: its bar shows the time only)."""
    if not shown(output):
        yield
        return
    names = [step.name for step in procedure.steps()]
    stop = threading.Event()
    with _bar("steps") as progress:
        task = progress.add_task(description, total=len(names))

        def follow() -> None:
            while not stop.wait(_POLL_S):
                if not procedure.procedure_id or procedure.dry_run:
                    continue
                try:
                    saved = store.steps(procedure.procedure_id)
                except StateStoreError as exc:  # the procedure meets it too, and says so
                    progress.update(task, description=f"{description}: state store: {exc}")
                    continue
                done = {s.name for s in saved if s.state == "done"}
                left = [name for name in names if name not in done]
                now = f"{description}: {left[0]}" if left else description
                progress.update(task, completed=len(names) - len(left), description=now)

        follower = threading.Thread(target=follow, name="cli-progress", daemon=True)
        follower.start()
        try:
            yield
        finally:
            stop.set()
            follower.join()
