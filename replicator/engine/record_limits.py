"""`RecordLimits`: the remote topics' size limits as a writer applies them, the one part
every writer owns (the Python loop's `TargetWriter`, the compiled path's `MoverWriter`
and `TransactionalMoverWriter`): each partition's record limit, whether the producers
made for the last limits still fit new ones, and the partitions held at an oversized
record until their topic's config sync (`HeldRecords`). How a writer holds a partition
and makes its producers anew stays the writer's."""

from __future__ import annotations

from collections.abc import Callable

from replicator.config.model import FlowConfig
from replicator.engine.held_records import HeldRecords, HeldTopics
from replicator.engine.partition import PartitionTracker
from replicator.engine.partitions import Partitions
from replicator.engine.replica_producers import gapless_producer_config, target_producer_config
from replicator.engine.reporting import TaskReporter
from replicator.engine.size_limits import OversizedVerdict, SizeLimits


class RecordLimits:
    """One flow's remote topics' limits, its partitions' record limits and its held
    partitions (see the module's description)."""

    def __init__(
        self, flow: FlowConfig, topics: HeldTopics, partitions: Partitions, reporter: TaskReporter
    ) -> None:
        self._flow = flow
        self._partitions = partitions
        self._sizes = SizeLimits()
        self._held = HeldRecords(flow, topics, partitions, reporter)
        #: (message.max.bytes, batch.size) of the replica producers made last.
        self.made_for: tuple[int, int] = (0, 0)

    def record_limit(self, remote: str) -> int:
        """What key, value and headers of one record may add up to on `remote`."""
        return self._sizes.record_limit(remote)

    def update(self, limits: dict[str, int]) -> bool:
        """New max.message.bytes of remote topics (by topic): every partition's record
        limit follows. True when the replica producers made last no longer fit them (a
        topic with a larger limit appeared, or one with a smaller limit): the writer
        makes them anew, then calls `made`."""
        self._sizes.update(limits)
        for tracker in self._partitions.values():
            tracker.size.limit = self._sizes.record_limit(tracker.remote)
        message_max_bytes, batch_size = self._sizes.producer_limits()
        have_max, have_batch = self.made_for
        return not (message_max_bytes <= have_max and batch_size >= have_batch)

    def made(self) -> tuple[int, int]:
        """The replica producers are made for the limits as they are now; those."""
        self.made_for = self._sizes.producer_limits()
        return self.made_for

    def producer_config(self) -> dict[str, object]:
        """The settings of a target producer for the limits as they are now."""
        return target_producer_config(self._flow, self._sizes)

    def gapless_config(self) -> dict[str, object]:
        """The settings of the default mode's replica producer for them."""
        return gapless_producer_config(self._flow, self._sizes)

    # -- records too large for their remote topic ----------------------------------------

    def verdict(self, tracker: PartitionTracker, offset: int, size: int) -> OversizedVerdict:
        """What to do with `tracker`'s record at `offset` of `size` bytes (`HeldRecords`)."""
        return self._held.verdict(tracker, offset, size)

    def skip(self, tracker: PartitionTracker, offset: int, verdict: OversizedVerdict) -> None:
        """oversized.record.policy=skip: the partition goes on after the record."""
        self._held.skip(tracker, offset, verdict)

    def resync(self, update_size_limits: Callable[[dict[str, int]], None]) -> None:
        """Sync the held partitions' topics, their limits to `update_size_limits`, and
        read those partitions again from the held record."""
        self._held.resync(update_size_limits)
