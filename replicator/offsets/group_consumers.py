"""Consumers of consumer groups, kept from one call to the next.

A group's offsets are read and written through a consumer of the group that never
joins it (`GroupAdmin`). Made for one call and closed after it, each such consumer
connects to the cluster, reads its metadata and locates the group's coordinator
before its first request: a checkpoint round at 5,000 partitions and 50 groups made
and closed 100 of them (each group's positions read on the source, its offsets
committed on the target), and a round at rest, which only reads, made 50. A loop that
asks the same groups round after round lends them from here instead: each group's
consumer stays connected to its coordinator between rounds.

At most `bound` consumers are kept, the groups asked most recently; one more returned
closes the one whose group was asked longest ago (an estate's groups come and go, so
consumers of groups no longer asked do not stay). Each kept consumer holds librdkafka's
threads (one per broker of the cluster, and two of its own) and a connection to each
broker it talks to, and asks nothing while idle.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

from replicator.config.model import ClusterConfig
from replicator.kafka.clients import Consumer


class GroupConsumers:
    """Lends a consumer of a group to one call at a time, and keeps it for the next."""

    def __init__(self, cluster: ClusterConfig, bound: int) -> None:
        self.cluster = cluster
        self.bound = bound
        self._lock = threading.Lock()
        #: Consumers not lent now, by group, the group asked longest ago first.
        self._idle: OrderedDict[str, Consumer] = OrderedDict()
        self._closed = False

    @contextmanager
    def lend(self, group: str) -> Iterator[Consumer]:
        """A consumer of `group` for the `with` block: the kept one if it is idle, else
        a new one (also while another call has it). Returned to be kept when the block
        ends without an error; a block that raised closes it (its state is not known)."""
        with self._lock:
            consumer = self._idle.pop(group, None)
        if consumer is None:
            consumer = self.make(self.cluster, group)
        try:
            yield consumer
        except BaseException:
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
        closing = [consumer]
        with self._lock:
            if not self._closed and self.bound > 0 and group not in self._idle:
                self._idle[group] = consumer
                closing = []
                while len(self._idle) > self.bound:
                    closing.append(self._idle.popitem(last=False)[1])
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
            idle, self._idle = list(self._idle.values()), OrderedDict()
        for consumer in idle:
            consumer.close()
