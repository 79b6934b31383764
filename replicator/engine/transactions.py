"""Exactly-once mode: one transactional producer per source partition.

The transactional id is stable per source partition
(`replicator-<source>-<target>-<topic>-<partition>`), so whichever worker owns
the partition next calls `init_transactions` with the same id. That aborts
the previous owner's open transaction and fences its producer: a worker that
was stalled (a long GC, SIGSTOP, a network partition) and wakes up after its
partitions moved cannot write a single visible record more. Records only
become visible to `read_committed` readers when their transaction commits,
and the target tail read back on assignment is the last committed record.

The same mechanism settles a transaction that failed for any other reason
(the target went away, its coordinator moved, a flush or commit timed out,
an abortable error): the partition's producer is dropped and a new one with
the same id is initialised once the target answers. That aborts the open
transaction, or waits for a commit the coordinator had already taken to
complete, so the committed tail read next is the truth either way; calling
`abort_transaction` instead would need the very cluster that is away, and
after a commit timeout would not know whether the records are in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from confluent_kafka import KafkaError, KafkaException

from replicator.errors import ReplicatorError
from replicator.kafka.clients import Producer
from replicator.kafka.errors import error_text, kafka_error

log = logging.getLogger(__name__)

_TIMEOUT_S = 30.0
#: How long a commit that failed with a retriable error is resumed for (`_resumed`).
_RESUME_S = 0.5
_FENCED = frozenset(
    {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
)
#: The principal may not use transactions (or the topic): retrying cannot help.
_REFUSED = frozenset(
    {
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError._AUTHENTICATION,
    }
)
#: The target did not answer in time: the other open transactions of the round
#: would wait just as long, so they are settled the same way without waiting.
_AWAY = frozenset(
    {
        KafkaError._TIMED_OUT,
        KafkaError._MSG_TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
    }
)

Key = tuple[str, int]


class Outcome(Enum):
    OPEN = "open"  # begin: the transaction is open
    COMMITTED = "committed"
    #: Not committed, or not known to be (the target went away): the producer was
    #: dropped; the partition resumes from the target's committed tail.
    RETRY = "retry"
    FENCED = "fenced"  # another worker owns the partition now: stop writing it
    REFUSED = "refused"  # not allowed (authorization): stop the partition


@dataclass(frozen=True)
class Settled:
    """How one partition's transaction ended, and the error when it did not commit."""

    outcome: Outcome
    error: KafkaError | None = None


class TransactionsRefused(ReplicatorError):
    """The target refuses transactions for a partition; retrying cannot help."""


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
        """Create the partition's producer and fence every earlier owner (settling
        its open transaction). Must run before the target tail is read, so the tail
        is final. Raises KafkaException when the target does not answer (try again
        later) and TransactionsRefused when it refuses."""
        self.close(topic, partition)
        producer = Producer(self._make_config(self.transactional_id(topic, partition)))
        try:
            producer.init_transactions(_TIMEOUT_S)
        except KafkaException as exc:
            error = kafka_error(exc)
            if init_retriable(error):
                raise
            raise TransactionsRefused(
                f"{topic}[{partition}]: cannot initialise transactions with id "
                f"{self.transactional_id(topic, partition)!r}: {error.str()}; the "
                "target cluster must allow transactions (and the principal WRITE on the "
                "transactional id)"
            ) from exc
        self._writers[(topic, partition)] = _Writer(producer)
        return producer

    def begin(self, topic: str, partition: int) -> Settled:
        """Open the partition's transaction: OPEN, or why it cannot be (FENCED: the
        partition has a new owner, which this worker hears of at its next rebalance)."""
        key = (topic, partition)
        writer = self._writers[key]
        if not writer.in_transaction:
            try:
                writer.producer.begin_transaction()
            except KafkaException as exc:
                return self._failed(key, kafka_error(exc))
            writer.in_transaction = True
        return Settled(Outcome.OPEN)

    def commit_open(self) -> dict[Key, Settled]:
        """Commit every open transaction; how each ended. Once the target did not
        answer a commit in time, the round's other open transactions are settled
        as RETRY at once instead of each waiting as long."""
        settled: dict[Key, Settled] = {}
        away: KafkaError | None = None
        for key, writer in list(self._writers.items()):
            if not writer.in_transaction:
                continue
            if away is not None:
                self.discard(*key)
                settled[key] = Settled(Outcome.RETRY, away)
                continue
            settled[key] = result = self._commit(key, writer)
            if result.error is not None and is_away(result.error):
                away = result.error
        return settled

    def _commit(self, key: Key, writer: _Writer) -> Settled:
        writer.in_transaction = False
        try:
            writer.producer.commit_transaction(_TIMEOUT_S)
        except KafkaException as exc:
            first = kafka_error(exc)
            resumable = first.retriable() and not is_fenced(first)
            error = _resumed(writer.producer, first) if resumable else first
            if error is not None:
                return self._failed(key, error)
        return Settled(Outcome.COMMITTED)

    def _failed(self, key: Key, error: KafkaError) -> Settled:
        """A transactional call failed: the producer is dropped either way (a new one
        with the same id settles its transaction); what the partition does next."""
        self.discard(*key)
        settled = failed(error)
        if settled.outcome is Outcome.FENCED:
            _log_fenced(key, error)
        return settled

    def discard(self, topic: str, partition: int) -> None:
        """Drop the partition's producer without waiting for anything: what it still
        queues is purged, and its open transaction is settled by the next `open`."""
        writer = self._writers.pop((topic, partition), None)
        if writer is not None:
            writer.producer.purge()

    def close(self, topic: str, partition: int) -> None:
        """Done with the partition (revoked, or the task stops): abort its open
        transaction and deliver what is queued. What cannot be settled now (the
        producer was fenced, the target is away) the next `open` settles."""
        writer = self._writers.pop((topic, partition), None)
        if writer is None:
            return
        try:
            if writer.in_transaction:
                writer.producer.abort_transaction(_TIMEOUT_S)
            writer.producer.flush(_TIMEOUT_S)
        except KafkaException as exc:
            log.info(
                "%s[%d]: closing its producer: %s; the partition's next owner settles "
                "its transaction",
                topic, partition, error_text(exc),
            )  # fmt: skip
        writer.producer.purge()

    def close_all(self) -> None:
        for topic, partition in list(self._writers):
            self.close(topic, partition)

    def keys(self) -> list[Key]:
        return list(self._writers)


def _resumed(producer: Producer, error: KafkaError) -> KafkaError | None:
    """A commit that failed with a retriable `error`, called again briefly, as librdkafka
    asks (it resumes where the first call stopped): None when it completes now; the
    producer's fatal error when it has one, which is what ended the transaction (a
    commit's flush outlives a fatal error raised while it waits, librdkafka #3079: a
    fenced producer's commit said only `_TIMED_OUT` after its whole timeout); else
    `error`."""
    try:
        producer.commit_transaction(_RESUME_S)
    except KafkaException as exc:
        again = kafka_error(exc)
        return again if again.fatal() else error
    return None


def is_fenced(error: KafkaError) -> bool:
    """A newer producer with the same transactional id took over."""
    return error.code() in _FENCED


def is_away(error: KafkaError) -> bool:
    """The target did not answer in time (the round's other transactions would wait
    just as long)."""
    return error.code() in _AWAY


def failed(error: KafkaError) -> Settled:
    """What a failed transactional call (begin, commit) means for its partition: the
    producer is dropped either way, by the caller. Fenced: another worker owns it.
    Refused: stop it. Anything else: resume from the committed tail."""
    if is_fenced(error):
        return Settled(Outcome.FENCED, error)
    if error.code() in _REFUSED:
        return Settled(Outcome.REFUSED, error)
    # Retriable, abortable, or fatal for another reason (a producer whose epoch
    # the coordinator bumped after a timeout): none is a reason to stop.
    return Settled(Outcome.RETRY, error)


def init_retriable(error: KafkaError) -> bool:
    """Whether a failed `init_transactions` is worth trying again later (the target
    is away or busy); otherwise the target refuses transactions for the partition."""
    return error.code() in _AWAY or (error.retriable() and error.code() not in _REFUSED)


def _log_fenced(key: Key, error: KafkaError) -> None:
    log.warning(
        "%s[%d]: producer fenced (%s): another worker owns the partition now",
        key[0], key[1], error.str(),
    )  # fmt: skip
