"""The checkpointers a cutover's steps use, made ready while the applications stop.

A planned failover and a failback translate their applications' groups and commit
their positions on the other side (`commit_offsets`), inside the applications'
downtime, and write MM2-format checkpoints of them after the switch (`checkpoint`).
Made at the step, a checkpointer spent most of its time getting ready: clients to
both clusters, and a checkpoint writer whose new idempotent producer waits for its
producer id and the topic's metadata before its first write is acknowledged (0.5 to
0.6 s a writer on `make run`). So the `fence` step starts making them in a thread of
their own (`warm`), and by the time the clients are fenced, replication drained and
the flow stopped they are ready; `get` takes them (making them now if nothing warmed
them: a run resumed at a later step, in another process), and `close` ends them (a
later step that needs them again makes new ones). Nothing here writes to the state
store or to a group: warming changes nothing a procedure decides on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

from replicator.offsets.checkpoints import Checkpointing

log = logging.getLogger(__name__)

Parts = TypeVar("Parts", bound=tuple[Checkpointing, ...])


class CutoverCheckpointers(Generic[Parts]):
    """Checkpointers `make` returns, with their writers open, made once per run."""

    def __init__(self, make: Callable[[], Parts]) -> None:
        self._make = make
        self._warming: Future[Parts] | None = None
        self._ready: Parts | None = None

    def warm(self) -> None:
        """Start making them in the background (once)."""
        if self._warming is None and self._ready is None:
            pool = ThreadPoolExecutor(1, thread_name_prefix="cutover-checkpointers")
            self._warming = pool.submit(self._open)
            pool.shutdown(wait=False)

    def get(self) -> Parts:
        """The checkpointers, ready: warmed, or made now. What went wrong making them
        is raised here, and the next `get` tries again."""
        if self._ready is None:
            warming, self._warming = self._warming, None
            self._ready = self._open() if warming is None else warming.result()
        return self._ready

    def close(self) -> None:
        """Close them (waiting for a warm-up under way); the next `get` makes new ones."""
        warming, self._warming = self._warming, None
        ready, self._ready = self._ready, None
        if ready is None and warming is not None:
            try:
                ready = warming.result()
            except Exception as exc:
                log.warning("the cutover's checkpointers could not be made ahead: %s", exc)
        for part in ready or ():
            part.close()

    def _open(self) -> Parts:
        parts = self._make()
        try:
            for part in parts:
                part.open_writer()
        except BaseException:
            for part in parts:
                part.close()
            raise
        return parts
