"""The pace of CPython's cyclic garbage collector in a replicating process.

The loop makes a few container objects per record (the replica, its headers, the
offset header) that live for one batch and are freed by reference counting: none
of them is ever part of a cycle. At CPython's default pace (a young collection every
700 new containers) the collector ran every couple of hundred records and walked
the batch's records still alive each time: a third of the loop's time at 100 B
values (200,276 -> 320,841 records/s, 5.8 -> 3.6 CPU s per million records; the
dated runs are in git history). Collecting less often frees the same garbage: what is
cyclic waits a little longer, and at most this many containers of it.

The entry points of a replicating process set it (`replicator run`, its worker
processes), never the task itself: a process that only hosts a task (a test, an
application embedding the engine) keeps its own pace.
"""

from __future__ import annotations

import gc

#: New containers between young collections (CPython's default: 700).
YOUNG_COLLECTION_EVERY = 50_000


def pace_for_replication() -> None:
    """Collect young objects every `YOUNG_COLLECTION_EVERY` new containers, unless the
    process already collects less often; the older generations keep their pace
    relative to it. Process-wide: the entry point calls it once."""
    young, middle, old = gc.get_threshold()
    if 0 < young < YOUNG_COLLECTION_EVERY:
        gc.set_threshold(YOUNG_COLLECTION_EVERY, middle, old)
