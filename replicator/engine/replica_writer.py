"""`ReplicaWriter`: what the replication loop and rebalancing ask of whatever writes
replicas to the target, whichever data path writes them (`target_writer.TargetWriter`,
the Python loop; `mover_writer.MoverWriter`, the compiled data plane)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from confluent_kafka import KafkaError

    from replicator.engine.exactly_once import ExactlyOnce
    from replicator.engine.headers import Headers
    from replicator.engine.partition import PartitionTracker
    from replicator.kafka.clients import Producer


class ConsumedRecord(Protocol):
    """A record as the Python loop reads it: confluent-kafka's `Message`, described as
    what it is once consumed. Its type stubs allow what no consumed record has (no
    offset, topic or partition, a timestamp without a value, headers as a dict); the
    loop hands a batch over as these once (`ReplicationTask._replicate`), so the hot
    path checks nothing per record that the client already guarantees. An error in
    the batch answers `error()` and is never read further here."""

    def topic(self) -> str: ...
    def partition(self) -> int: ...
    def offset(self) -> int: ...
    def timestamp(self) -> tuple[int, int]: ...
    def headers(self) -> Headers | None: ...
    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...
    def error(self) -> KafkaError | None: ...


class ReplicaWriter(Protocol):
    """What the loop and rebalancing ask of whatever writes replicas to the target.

    `TargetWriter` is the implementation of the Python loop, the reference and the
    fallback where the compiled module is absent. `mover_writer.MoverWriter` is the compiled
    path's (docs/dataplane.md, "Proposed interface for the engine (part 2), as built",
    maps each method to the Mover's calls)."""

    @property
    def exactly_once(self) -> ExactlyOnce | None: ...
    @property
    def spent(self) -> bool: ...
    @property
    def draining(self) -> bool: ...

    def start(self, limits: dict[str, int], producer: Producer | None = None) -> None:
        """Make the target producer for the remote topics' max.message.bytes."""

    def for_partition(self, tracker: PartitionTracker) -> Producer:
        """Open the partition for writing (exactly-once: fence its earlier owners)."""

    def write_run(
        self, tracker: PartitionTracker, messages: Sequence[ConsumedRecord], start: int
    ) -> int:
        """Write the run of `tracker`'s records from `messages[start]`; the next index."""

    def serve(self) -> None:
        """Serve the delivery reports that are due."""

    def know(self, remotes: Iterable[str], timeout: float) -> None:
        """Learn the remote topics' partitions before their first record."""

    def record_limit(self, remote: str) -> int:
        """What one record's key, value and headers may add up to on `remote`."""

    def update_size_limits(self, limits: dict[str, int]) -> None:
        """New max.message.bytes of remote topics (a new producer when they need it)."""

    def resync_held(self) -> None:
        """Sync the topics of records held as oversized, and fetch them again."""

    def resumed_at(self, tracker: PartitionTracker, target_end: int) -> None:
        """The partition resumes; its next replica lands at `target_end` or later."""

    def settled(self) -> bool:
        """Whether partitions may resume now (nothing in flight after a rewind)."""

    def in_flight(self) -> set[tuple[str, int]]:
        """The partitions with records the target has not acknowledged yet."""

    def check_deadline(self) -> None:
        """Rewind every partition when a run outlived the user's message timeout."""

    def release(self, lost: bool) -> None:
        """Before partitions are given up: flush (revoked) or drop (lost) what is held."""

    def forget(self, key: tuple[str, int]) -> None:
        """The partition was given up."""

    def flush(self, timeout: float) -> int:
        """Wait for what is in flight; the count still unacknowledged."""

    def on_fatal(self, error: KafkaError) -> None:
        """The producer failed fatally: replace it and stop the task."""

    def replace_spent(self) -> None:
        """A new producer after a refused batch spent the old one."""

    def close_transactions(self) -> None:
        """Close the transactional producers (exactly-once mode), at shutdown."""
