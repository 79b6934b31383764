"""Consumers of consumer groups, kept from one call to the next.

A group's offsets are read and written through a consumer of the group that never
joins it (`GroupAdmin`). Made for one call and closed after it, each such consumer
connects to the cluster, reads its metadata and locates the group's coordinator
before its first request: a checkpoint round at 5,000 partitions and 50 groups made
and closed 100 of them (each group's positions read on the source, its offsets
committed on the target), and a round at rest, which only reads, made 50. A loop that
asks the same groups round after round lends them from here instead: each group's
consumer stays connected to its coordinator between rounds.

At most `bound` consumers are kept: once that many are, a consumer of another group
is closed after its call. Not the groups asked most recently: a round asks its groups
in the same cycle every time, and past the bound (200 groups and 64 kept) a cache of
the most recent would close each consumer before its group came round again, keeping
64 that were never lent twice. A kept consumer not lent for `idle_s` is closed (an
estate's groups come and go, and the round stops asking a group that went away; a
slot it frees goes to the next group given back). Each kept consumer holds
librdkafka's threads (one per broker of the cluster, and two of its own) and a
connection to each broker it talks to, and asks nothing while idle: at 5,000
partitions and 50 groups the 100 kept by a checkpointer (each group on both clusters)
added 105 to 112 MiB to its peak RSS.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from replicator.config.model import ClusterConfig
from replicator.kafka.clients import Consumer

#: How long a kept consumer may go unlent before it is closed: many checkpoint
#: intervals (5 s to a minute), so a group asked every round keeps its consumer.
IDLE_S = 600.0


class GroupConsumers:
    """Lends a consumer of a group to one call at a time, and keeps it for the next."""

    def __init__(self, cluster: ClusterConfig, bound: int, idle_s: float = IDLE_S) -> None:
        self.cluster = cluster
        self.bound = bound
        self.idle_s = idle_s
        self._lock = threading.Lock()
        #: The groups whose consumer is kept (at most `bound`), lent now or not.
        self._members: set[str] = set()
        #: The members' consumers not lent now, with when each was given back.
        self._idle: dict[str, tuple[Consumer, float]] = {}
        self._closed = False

    @contextmanager
    def lend(self, group: str) -> Iterator[Consumer]:
        """A consumer of `group` for the `with` block: the kept one if it is idle, else
        a new one (also while another call has it). Returned to be kept when the block
        ends without an error; a block that raised closes it (its state is not known)."""
        with self._lock:
            kept = self._idle.pop(group, None)
        consumer = self.make(self.cluster, group) if kept is None else kept[0]
        try:
            yield consumer
        except BaseException:
            with self._lock:
                if kept is not None:  # its place goes to the next group given back
                    self._members.discard(group)
            consumer.close()
            raise
        self._give_back(group, consumer)

    @staticmethod
    def make(cluster: ClusterConfig, group: str) -> Consumer:
        """A consumer of `group` that reads or writes its offsets only: it never
        subscribes, so it never joins the group or changes its members."""
        return Consumer(
            {**cluster.consumer, "group.id": group, "enable.auto.commit": False},
            cluster=cluster.alias,
        )

    def _give_back(self, group: str, consumer: Consumer) -> None:
        """Keep `consumer` if its group has a place (or one is free) and none of its
        consumers is kept already; close it otherwise, and with it any kept consumer not
        lent for `idle_s`."""
        now = time.monotonic()
        with self._lock:
            stale = [g for g, (_, at) in self._idle.items() if now - at > self.idle_s]
            closing = [self._idle.pop(g)[0] for g in stale]
            self._members.difference_update(stale)
            if group not in self._members and len(self._members) < self.bound:
                self._members.add(group)
            if self._closed or group not in self._members or group in self._idle:
                closing.append(consumer)
            else:
                self._idle[group] = (consumer, now)
        for spare in closing:
            spare.close()

    def kept(self) -> int:
        """How many consumers are kept now (not counting those lent)."""
        with self._lock:
            return len(self._idle)

    def close(self) -> None:
        """Close the kept consumers; those lent now are closed when given back."""
        with self._lock:
            self._closed = True
            idle, self._idle = list(self._idle.values()), {}
            self._members.clear()
        for consumer, _ in idle:
            consumer.close()
