"""The rows `replicator status` prints for a person: each flow's workers, then its
partitions; and which partitions a table lists (`partitions_shown`, `flows describe`
too).

A flow of more than `LISTED_PARTITIONS` partitions lists those that need a look (not
replicating, an error, records skipped or lost) and the `FURTHEST_BEHIND` with the most
lag, then one row for the rest, with their lag and records summed: at 5,000 partitions
the whole table was 5,000 rows that took rich 3 s to lay out, and the one partition that
mattered scrolled out of sight. `--all` lists every partition; `-o json` and `-o yaml`
always hold every row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from replicator.engine.status import PartitionStatus, StatusRecord, WorkerStatus

#: A flow with more partitions than this lists only some of them (see the module).
LISTED_PARTITIONS = 50

#: How many of the partitions furthest behind such a flow lists besides.
FURTHEST_BEHIND = 10

Row = tuple[str, str, str, str]

P = TypeVar("P")


def partitions_shown(
    partitions: Sequence[P],
    *,
    needs_a_look: Callable[[P], bool],
    lag: Callable[[P], int | None],
    every_partition: bool = False,
) -> tuple[list[P], list[P]]:
    """Of one flow's `partitions` (in the order to show them), those a table lists and
    the rest it sums up in one row: all listed up to `LISTED_PARTITIONS` (or with
    `every_partition`), else those that need a look and the `FURTHEST_BEHIND` with
    the most lag. `replicator status` and `flows describe` list partitions so."""
    if every_partition or len(partitions) <= LISTED_PARTITIONS:
        return list(partitions), []
    looks = {id(p) for p in partitions if needs_a_look(p)}
    behind = sorted(
        (p for p in partitions if id(p) not in looks and lag(p)), key=lambda p: -(lag(p) or 0)
    )
    chosen = looks | {id(p) for p in behind[:FURTHEST_BEHIND]}
    listed: list[P] = []
    others: list[P] = []
    for p in partitions:
        (listed if id(p) in chosen else others).append(p)
    return listed, others


def others_lag(lags: Iterable[int | None]) -> str:
    """The lag of partitions summed up in one row: `lag=<sum> (at most <max>)`."""
    known = [lag for lag in lags if lag is not None]
    text = f"lag={sum(known)}" if known else "lag=None"
    if known and max(known) > 0:
        text += f" (at most {max(known)})"
    return text


def status_table(rows: Iterable[StatusRecord], *, every_partition: bool = False) -> list[Row]:
    """FLOW, WHAT, STATE and DETAILS of each flow's workers, then of its partitions
    (`every_partition`: all of them, whatever their number)."""
    flows: dict[str, tuple[list[WorkerStatus], list[PartitionStatus]]] = {}
    for row in rows:
        workers, partitions = flows.setdefault(row.flow, ([], []))
        if isinstance(row, PartitionStatus):
            partitions.append(row)
        else:
            workers.append(row)
    table: list[Row] = []
    for flow in sorted(flows):
        workers, partitions = flows[flow]
        table += [_worker_row(w) for w in sorted(workers, key=lambda w: w.worker)]
        partitions.sort(key=lambda p: p.where)
        listed, others = partitions_shown(
            partitions,
            needs_a_look=_needs_a_look,
            lag=lambda p: p.lag,
            every_partition=every_partition,
        )
        table += [_partition_row(p) for p in listed]
        if others:
            table.append(_others_row(flow, others, more=bool(listed)))
    return table


def _needs_a_look(row: PartitionStatus) -> bool:
    return row.state != "replicating" or bool(row.error or row.skipped_by or row.lost)


def _worker_row(row: WorkerStatus) -> Row:
    figures = f"partitions={row.partitions}"
    if row.data_path:
        figures += f" {row.data_path}"
    return (row.flow, f"worker {row.worker}", row.state, _with_error(figures, row.error))


def _partition_row(row: PartitionStatus) -> Row:
    figures = f"next={row.next_offset} lag={row.lag} replicated={row.replicated} lost={row.lost}"
    if row.skip_note:
        figures += f" ({row.skip_note})"
    return (row.flow, f"partition {row.where}", row.state, _with_error(figures, row.error))


def _others_row(flow: str, rows: list[PartitionStatus], *, more: bool) -> Row:
    """One row for partitions that replicate with nothing to look at (`more`: after
    others of the flow, listed)."""
    lag = others_lag(r.lag for r in rows)
    unknown = sum(1 for r in rows if r.lag is None)
    if unknown and unknown < len(rows):
        lag += f", not known on {unknown}"
    replicated = sum(r.replicated for r in rows)
    return (
        flow,
        f"{len(rows)} {'more ' if more else ''}partitions",
        "replicating",
        f"{lag} replicated={replicated} lost=0; `--all` lists each",
    )


def _with_error(figures: str, error: str | None) -> str:
    return f"{figures}\nERROR: {error}" if error else figures
