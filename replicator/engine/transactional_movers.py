"""The transactional Movers of one worker (`replicator._dataplane`'s `Mover` with a
`transactional_id`, docs/dataplane.md): one per source partition, with the engine's
per-partition transactional id, and their transactions. Each failed transactional
call comes back as a `transactions.Settled` outcome (its Mover dropped), decided by
the same code as the Python loop's producers (`transactions.failed`,
`init_retriable`) on the Mover's `TransactionError` turned into confluent-kafka's
`KafkaError` (`transaction_error`). What an outcome does to its partition is
`mover_transactions.TransactionalMoverWriter`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError

from replicator.engine.transactions import (
    Outcome,
    Settled,
    TransactionsRefused,
    failed,
    init_retriable,
    is_away,
)
from replicator.errors import ConfigError, ReplicatorError

log = logging.getLogger(__name__)

Key = tuple[str, int]

#: How long a transactional call (init, commit, abort) waits, as on the Python loop.
_TIMEOUT_S = 30.0


class TransactionsUnavailable(ReplicatorError):
    """The target did not answer `init_transactions` (away, or busy settling the
    previous owner's transaction): the partition waits and tries again."""


def transaction_error(exc: Exception) -> KafkaError:
    """A Mover's `TransactionError` as confluent-kafka's `KafkaError` (the code by
    librdkafka's name, the flags as librdkafka gave them), so the engine's outcomes
    are decided by the same code for both paths."""
    code = getattr(KafkaError, str(getattr(exc, "code", "")), KafkaError._FAIL)
    return KafkaError(
        code,
        str(exc),
        fatal=bool(getattr(exc, "fatal", False)),
        retriable=bool(getattr(exc, "retriable", False)),
        txn_requires_abort=bool(getattr(exc, "txn_requires_abort", False)),
    )


@dataclass
class _Entry:
    mover: Any
    #: A transaction is open ...
    open: bool = False
    #: ... and it took records (produced, skipped or handed back).
    took: bool = False


class TransactionalMovers:
    """The transactional Movers of the partitions one worker owns, one per source
    partition, and their transactions. It knows nothing of partitions' state: each
    failed call comes back as a `Settled` outcome, its Mover dropped."""

    def __init__(
        self,
        module: Any,
        make: Callable[[str], Any],
        transactional_id: Callable[[str, int], str],
        before_close: Callable[[Any], None],
    ) -> None:
        self._module = module
        self._make = make
        self.transactional_id = transactional_id
        #: Called with a Mover before it is closed (its client events are logged).
        self._before_close = before_close
        self._entries: dict[Key, _Entry] = {}
        #: The last transactional call failed because the target is away: closing a
        #: partition then does not wait to abort (the next owner settles it), or a
        #: revocation of N partitions would take N x _TIMEOUT_S with the target down.
        self._away = False

    def open(self, topic: str, partition: int) -> Any:
        """A new Mover for the partition, every earlier owner fenced first (its open
        transaction settled), so the target tail read next is final. Raises
        TransactionsUnavailable (try again later) or TransactionsRefused."""
        key = (topic, partition)
        self.discard(key)
        transactional_id = self.transactional_id(topic, partition)
        try:
            mover = self._make(transactional_id)
        except ValueError as exc:  # the Mover names the setting; values are redacted
            raise ConfigError(f"{topic}[{partition}]: the data plane refuses: {exc}") from exc
        try:
            mover.init_transactions(_TIMEOUT_S)
        except self._module.TransactionError as exc:
            self._close(mover)
            error = transaction_error(exc)
            if init_retriable(error):
                raise TransactionsUnavailable(
                    f"{topic}[{partition}]: initialising transactions with id "
                    f"{transactional_id!r}: {exc}"
                ) from exc
            raise TransactionsRefused(
                f"{topic}[{partition}]: cannot initialise transactions with id "
                f"{transactional_id!r}: {error.str()}; the target cluster must allow "
                "transactions (and the principal WRITE on the transactional id)"
            ) from exc
        self._entries[key] = _Entry(mover)
        self._away = False
        return mover

    def get(self, key: Key) -> Any | None:
        entry = self._entries.get(key)
        return None if entry is None else entry.mover

    def partitions(self) -> list[Key]:
        return list(self._entries)

    def movers(self) -> list[Any]:
        return [entry.mover for entry in self._entries.values()]

    def begin(self, key: Key) -> Settled:
        """Open the partition's transaction (kept open if it is): OPEN, or why not."""
        entry = self._entries[key]
        if not entry.open:
            try:
                entry.mover.begin_transaction()
            except self._module.TransactionError as exc:
                return self._failed(key, exc)
            entry.open = True
        return Settled(Outcome.OPEN)

    def took(self, key: Key) -> None:
        """The partition's open transaction took records: it is committed this round."""
        self._entries[key].took = True

    def taking(self, key: Key) -> bool:
        entry = self._entries.get(key)
        return entry is not None and entry.open and entry.took

    def commit(self, key: Key) -> Settled | None:
        """Commit the partition's transaction if it took records (None: it took
        nothing and stays open); COMMITTED, or why not (its Mover dropped)."""
        entry = self._entries[key]
        if not (entry.open and entry.took):
            return None
        entry.open = entry.took = False
        try:
            entry.mover.commit_transaction(_TIMEOUT_S)
        except self._module.TransactionError as exc:
            return self._failed(key, exc)
        self._away = False
        return Settled(Outcome.COMMITTED)

    def _failed(self, key: Key, exc: Exception) -> Settled:
        self.discard(key)
        error = transaction_error(exc)
        self._away = is_away(error)
        settled = failed(error)
        if settled.outcome is Outcome.FENCED:
            log.warning(
                "%s[%d]: producer fenced (%s): another worker owns the partition now",
                key[0], key[1], exc,
            )  # fmt: skip
        return settled

    def discard(self, key: Key) -> None:
        """Drop the partition's Mover without waiting: its queue is purged, and its
        open transaction is settled by the next `open` of the same id."""
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._close(entry.mover)

    def close(self, key: Key) -> None:
        """Done with the partition (revoked, or the task stops): an open transaction
        that took records is aborted (what cannot be now, the next owner settles)."""
        entry = self._entries.pop(key, None)
        if entry is None:
            return
        if entry.open and entry.took and self._away:
            log.info(
                "%s[%d]: its transaction is not aborted now (the target is away); the "
                "partition's next owner settles it",
                key[0], key[1],
            )  # fmt: skip
        elif entry.open and entry.took:
            try:
                entry.mover.abort_transaction(_TIMEOUT_S)
            except self._module.MoverError as exc:
                if isinstance(exc, self._module.TransactionError):
                    self._away = is_away(transaction_error(exc))
                log.info(
                    "%s[%d]: aborting its transaction: %s; the partition's next owner "
                    "settles it",
                    key[0], key[1], exc,
                )  # fmt: skip
        self._close(entry.mover)

    def close_all(self) -> None:
        for key in self.partitions():
            self.close(key)

    def discard_all(self) -> None:
        for key in self.partitions():
            self.discard(key)

    def _close(self, mover: Any) -> None:
        self._before_close(mover)
        try:
            mover.close()
        except self._module.MoverError as exc:
            log.warning("closing a transactional Mover: %s", exc)
