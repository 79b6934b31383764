"""Record sizes against the target: the remote topics' max.message.bytes, the target
producer's limits that follow from them, and `oversized.record.policy` for a record
too large for its remote topic.

A record is measured before it is produced (key, value and its own headers; ours
fit in the headroom topic sync adds), because the broker would reject it with the
whole batch: in the default mode that stops the flow, not just the partition.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum

from replicator.config.model import FlowConfig
from replicator.engine.topic_sync import HEADER_HEADROOM_BYTES

#: The brokers' default max.message.bytes, assumed for a remote topic not described yet.
DEFAULT_LIMIT = 1_048_588
#: Fixed bytes a single record adds to a batch beyond key, value and headers.
RECORD_OVERHEAD = 61 + 5 * 6
#: An oversized record makes its topic's configs sync at once, at most this often.
RESYNC_EVERY_S = 10.0


@dataclass
class SizeHold:
    """One partition's size limit on the target, and its oversized record waiting
    for a config sync of the topic (the partition is paused meanwhile)."""

    #: Bytes of key, value and own headers a record may have on the remote topic.
    limit: int
    held: bool = False
    #: Offset of the oversized record a config sync was already tried for.
    resynced_at: int = -1


class SizeLimits:
    """max.message.bytes of the remote topics, as topic sync reports them."""

    def __init__(self) -> None:
        self._limits: dict[str, int] = {}

    def update(self, limits: dict[str, int]) -> None:
        self._limits.update(limits)

    def record_limit(self, remote: str) -> int:
        """What key, value and headers of one record may add up to on `remote`."""
        return self._limits.get(remote, DEFAULT_LIMIT) - RECORD_OVERHEAD

    def producer_limits(self) -> tuple[int, int]:
        """(message.max.bytes, batch.size) for the target producer: room for a record
        as large as the largest remote topic takes, and batches no remote rejects."""
        largest = max(self._limits.values(), default=DEFAULT_LIMIT)
        smallest = min(self._limits.values(), default=DEFAULT_LIMIT)
        return largest + HEADER_HEADROOM_BYTES, max(16_384, smallest - HEADER_HEADROOM_BYTES)


class Oversized(Enum):
    #: Sync the topic's configs first: its limit may have been raised at the source.
    HOLD = "hold"
    SKIP = "skip"  # oversized.record.policy=skip
    STOP = "stop"  # oversized.record.policy=fail: the partition stops at the record


@dataclass(frozen=True)
class OversizedVerdict:
    action: Oversized
    #: What is wrong (SKIP) or the partition's stop message with the fix (STOP).
    message: str = ""


class OversizedRecords:
    """`oversized.record.policy`, after one config sync of the topic: the source
    topic's limit may have been raised since the last sync, and the record then fits."""

    def __init__(self, flow: FlowConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.flow = flow
        self._clock = clock
        self._resynced: dict[str, float] = {}  # topic -> when an oversized record synced it

    def verdict(
        self, topic: str, partition: int, remote: str, hold: SizeHold, *, offset: int, size: int
    ) -> OversizedVerdict:
        """What to do with the record at `offset` of `size` bytes; a HOLD marks `hold`."""
        flow = self.flow
        if (
            flow.sync_topic_configs_enabled
            and hold.resynced_at != offset
            and self._clock() - self._resynced.get(topic, -RESYNC_EVERY_S) >= RESYNC_EVERY_S
        ):
            hold.held = True
            hold.resynced_at = offset
            return OversizedVerdict(Oversized.HOLD)
        target = flow.target.alias
        problem = (
            f"{topic}[{partition}] offset {offset}: record of about {size} bytes exceeds "
            f"max.message.bytes={hold.limit + RECORD_OVERHEAD} of {remote} on {target!r}"
        )
        if flow.oversized_record_policy == "skip":
            return OversizedVerdict(Oversized.SKIP, problem)
        wanted = size + RECORD_OVERHEAD + HEADER_HEADROOM_BYTES
        raise_it = f"raise max.message.bytes of {remote} on {target!r} to at least {wanted}"
        if flow.sync_topic_configs_enabled:
            how = f"{raise_it} (topic sync did not: is max.message.bytes set there by hand?)"
        else:
            how = f"set sync.topic.configs.enabled=true to have topic sync raise it, or {raise_it}"
        return OversizedVerdict(
            Oversized.STOP,
            f"{problem}. The partition is stopped at this offset "
            f"(oversized.record.policy=fail). To replicate the record, {how}, and restart; "
            "to skip records too large for the target instead, set "
            "oversized.record.policy=skip and restart",
        )

    def resynced(self, topics: Iterable[str]) -> None:
        """The configs of `topics` were synced for their held records just now."""
        self._resynced.update(dict.fromkeys(topics, self._clock()))
