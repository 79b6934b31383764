"""The DR state store: active cluster and fence of each client application, DR run
history, flow states, procedure steps and leases; and how clients discover where to
connect.

`StateStore` is the store (`store.py` lists its parts, one object and module per table
group, and where a new one goes), `where` the call client applications make, `check_ledgers`
the no-loss/no-duplicate proof of the demo applications, `flow_states` the desired
states of a flow that the runner and the procedures share; the read-only HTTP view
is the `http` subpackage, which only its hosts import (it brings FastAPI). Every
package may import this one; it imports only `config`, `kafka` and the foundation
modules, never the engine or anything above it.
"""

from replicator.statestore.applications import ROUTE_LEASE_S
from replicator.statestore.database import STATE_URL_ENV, STATE_URL_FILE_ENV, default_state_url
from replicator.statestore.discovery import Route, UnknownClusterError, where
from replicator.statestore.errors import (
    FenceNotAcknowledged,
    LeaseHeld,
    LeaseTaken,
    NotFoundError,
    StateStoreError,
    StoreUnavailable,
)
from replicator.statestore.leases import DEFAULT_LEASE_TTL_S
from replicator.statestore.ledger import LedgerCheck, LedgerEntry, check_ledgers, read_ledger
from replicator.statestore.records import (
    Application,
    ApprovalRecord,
    ClientState,
    ClientStatus,
    FlowSample,
    FlowState,
    Lease,
    RunRecord,
    StepRecord,
)
from replicator.statestore.store import StateStore

__all__ = [
    "DEFAULT_LEASE_TTL_S",
    "ROUTE_LEASE_S",
    "STATE_URL_ENV",
    "STATE_URL_FILE_ENV",
    "Application",
    "ApprovalRecord",
    "ClientState",
    "ClientStatus",
    "FenceNotAcknowledged",
    "FlowSample",
    "FlowState",
    "Lease",
    "LeaseHeld",
    "LeaseTaken",
    "LedgerCheck",
    "LedgerEntry",
    "NotFoundError",
    "Route",
    "RunRecord",
    "StateStore",
    "StateStoreError",
    "StepRecord",
    "StoreUnavailable",
    "UnknownClusterError",
    "check_ledgers",
    "default_state_url",
    "read_ledger",
    "where",
]
