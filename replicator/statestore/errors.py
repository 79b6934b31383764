"""What the state store raises: one base class, so callers can catch the store's
failures apart from Kafka's or the configuration's, and the few kinds a caller acts
on differently (an unknown name, an unreachable database, a lease someone else
holds, a fence not acknowledged in time)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from replicator.errors import ReplicatorError

if TYPE_CHECKING:
    from replicator.statestore.records import ClientState, Lease


class StateStoreError(ReplicatorError):
    """The state store cannot do what was asked; the message says why and what to do."""


class NotFoundError(StateStoreError):
    """An application, run or similar entry that does not exist was asked for."""


class StoreUnavailable(StateStoreError):
    """The database cannot be reached or stays locked; clients keep their last route."""


class LeaseHeld(StateStoreError):
    """A resource is leased to another owner; `holder` is that lease."""

    def __init__(self, message: str, holder: Lease) -> None:
        super().__init__(message)
        self.holder = holder


class LeaseTaken(StateStoreError):
    """A write or renewal made under a lease that is no longer the writer's: another
    owner took it (a larger fencing token), it was released, or it lapsed. Nothing
    was written."""


class FenceNotAcknowledged(StateStoreError):
    """Clients still running after a fence's deadline; `pending` lists them."""

    def __init__(self, message: str, pending: list[ClientState]) -> None:
        super().__init__(message)
        self.pending = pending
