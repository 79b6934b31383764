"""Exactly-once mode: one transactional producer per source partition.

The transactional id is stable per source partition
(`replicator-<source>-<target>-<topic>-<partition>`), so whichever worker owns
the partition next calls `init_transactions` with the same id. That aborts
the previous owner's open transaction and fences its producer: a worker that
was stalled (a long GC, SIGSTOP, a network partition) and wakes up after its
partitions moved cannot write a single visible record more. Records only
become visible to `read_committed` readers when their transaction commits,
and the target tail read back on assignment is the last committed record.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from confluent_kafka import KafkaError, KafkaException

from replicator.errors import ReplicatorError
from replicator.kafka_clients import Producer

log = logging.getLogger(__name__)

_TIMEOUT_S = 30.0
_FENCED = frozenset(
    {
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    }
)
_PURGED = frozenset({KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT})

Key = tuple[str, int]


class Outcome(Enum):
    COMMITTED = "committed"
    ABORTED = "aborted"  # the transaction's records were discarded: rewind and retry
    FENCED = "fenced"  # another worker owns the partition now: stop writing it


@dataclass
class _Writer:
    producer: Producer
    in_transaction: bool = False


class TransactionalWriters:
    """The transactional producers of the partitions one worker owns."""

    def __init__(self, flow_name: str, make_config: Callable[[str], dict[str, object]]) -> None:
        self._id_prefix = "replicator-" + flow_name.replace("->", "-")
        self._make_config = make_config
        self._writers: dict[Key, _Writer] = {}

    def transactional_id(self, topic: str, partition: int) -> str:
        return f"{self._id_prefix}-{topic}-{partition}"

    def open(self, topic: str, partition: int) -> Producer:
        """Create the partition's producer and fence every earlier owner. Must run
        before the target tail is read, so the tail is final."""
        self.close(topic, partition)
        producer = Producer(self._make_config(self.transactional_id(topic, partition)))
        try:
            producer.init_transactions(_TIMEOUT_S)
        except KafkaException as exc:
            raise ReplicatorError(
                f"{topic}[{partition}]: cannot initialise transactions with id "
                f"{self.transactional_id(topic, partition)!r}: {exc.args[0].str()}; the "
                "target cluster must allow transactions (and the principal WRITE on the "
                "transactional id)"
            ) from exc
        self._writers[(topic, partition)] = _Writer(producer)
        return producer

    def begin(self, topic: str, partition: int) -> bool:
        """Open the partition's transaction; False if the producer was fenced (the
        partition has a new owner, which this worker hears of at its next rebalance)."""
        writer = self._writers[(topic, partition)]
        if not writer.in_transaction:
            try:
                writer.producer.begin_transaction()
            except KafkaException as exc:
                if not is_fenced(exc.args[0]):
                    raise
                _log_fenced((topic, partition), exc.args[0])
                return False
            writer.in_transaction = True
        return True

    def commit_open(self) -> dict[Key, Outcome]:
        """Commit every open transaction; the outcome per partition."""
        outcomes = {}
        for key, writer in self._writers.items():
            if writer.in_transaction:
                outcomes[key] = self._commit(key, writer)
        return outcomes

    def _commit(self, key: Key, writer: _Writer) -> Outcome:
        writer.in_transaction = False
        try:
            writer.producer.commit_transaction(_TIMEOUT_S)
            return Outcome.COMMITTED
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if is_fenced(error):
                _log_fenced(key, error)
                return Outcome.FENCED
            if error.txn_requires_abort():
                log.warning(
                    "%s[%d]: transaction aborted (%s); its records are replicated again",
                    key[0], key[1], error.str(),
                )  # fmt: skip
                writer.producer.abort_transaction(_TIMEOUT_S)
                return Outcome.ABORTED
            raise ReplicatorError(
                f"{key[0]}[{key[1]}]: committing a transaction failed: {error.str()}"
            ) from exc

    def close(self, topic: str, partition: int) -> None:
        writer = self._writers.pop((topic, partition), None)
        if writer is None:
            return
        if writer.in_transaction:
            try:
                writer.producer.abort_transaction(_TIMEOUT_S)
            except KafkaException as exc:
                log.info("%s[%d]: abort on close: %s", topic, partition, exc.args[0].str())
        try:
            writer.producer.flush(_TIMEOUT_S)
        except KafkaException as exc:
            # A fenced producer's open transaction was aborted by the next owner: its
            # unsent records are discarded by design and the next owner copies them.
            if not is_fenced(exc.args[0]):
                raise

    def close_all(self) -> None:
        for topic, partition in list(self._writers):
            self.close(topic, partition)

    def keys(self) -> list[Key]:
        return list(self._writers)


def is_fenced(error: KafkaError) -> bool:
    # Any fatal error of a transactional producer ends its ownership the same way.
    return error.code() in _FENCED or error.fatal()


def settled_by_commit(error: KafkaError) -> bool:
    """A delivery error the transaction's outcome already accounts for: the producer
    was fenced (the commit says FENCED and the partition is let go) or the record was
    purged by an abort (rewound and copied again)."""
    return is_fenced(error) or error.code() in _PURGED


def _log_fenced(key: Key, error: KafkaError) -> None:
    log.warning(
        "%s[%d]: producer fenced (%s): another worker owns the partition now",
        key[0], key[1], error.str(),
    )  # fmt: skip
