"""Lists in one line of a log or a message, bounded at any estate's size.

A line that names every partition of an assignment is 17 KB at 1,000 partitions and
170 KB at 10,000: log shippers split or cut such lines (Docker's json-file driver at
16 KB, journald at 48 KB), and nobody reads them. These helpers name the first few
and count the rest; the full list, where it matters, is in `replicator status`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import groupby

#: How many items a line names before it counts the rest.
SHOWN = 5
#: How many topics a line of partitions names (each with all its partitions).
SHOWN_TOPICS = 10


def first_of(items: Sequence[str], shown: int = SHOWN, noun: str = "", sep: str = ", ") -> str:
    """'a, b, c and 7 more <noun>': the first `shown` items, then a count of the rest."""
    listed = sep.join(items[:shown])
    rest = len(items) - shown
    return f"{listed} and {rest} more{f' {noun}' if noun else ''}" if rest > 0 else listed


def partitions_text(partitions: Iterable[tuple[str, int]], shown: int = SHOWN_TOPICS) -> str:
    """Partitions as topics with their partition numbers in runs, the first `shown`
    topics named: 'orders[0-3], payments[1,4] (6 partitions of 2 topics)' or
    'a[0-3], b[0-3] and 248 more topics (1,000 partitions of 250 topics)'."""
    pairs = sorted(set(partitions))
    topics = [
        f"{topic}[{_runs([p for _, p in group])}]"
        for topic, group in groupby(pairs, key=lambda pair: pair[0])
    ]
    if not topics:
        return "no partitions"
    counts = f"{counted(len(pairs), 'partition')} of {counted(len(topics), 'topic')}"
    return f"{first_of(topics, shown, 'topics')} ({counts})"


def counted(n: int, noun: str) -> str:
    """'1 topic', '1,000 topics'."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _runs(numbers: list[int]) -> str:
    """Sorted numbers as runs: [0, 1, 2, 3, 5] -> '0-3,5'."""
    runs: list[str] = []
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        runs.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ",".join(runs)
