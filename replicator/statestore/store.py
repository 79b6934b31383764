"""The DR state store: which cluster each client application uses, and what happened.

Failover, failback and drill procedures write here; client applications read
their route here and report here that they obey a fence; Airflow and the UI
read the history. `StateStore` owns one `Database` and one part per table group,
each a class of its own module that owns its statements:

- `store.applications` (`applications`): dr_applications and dr_clients; an
  application's active cluster, fence and epoch, its clients' reports, the wait for a
  fence's acknowledgement;
- `store.leases` (`leases`): dr_leases; which procedure holds a flow or an application;
- `store.flows` (`flow_states`): dr_flows; the desired state of each flow;
- `store.runs` (`runs`): dr_runs and dr_steps; the DR history and each procedure
  step's result;
- `store.incidents` (`incidents`): dr_incidents; what people were told about each
  problem, and when;
- `store.samples` (`samples`): dr_flow_samples; what each supervisor run measured;
- `store.approvals` (`approvals`): dr_approvals; the answer to each procedure run's
  approval question;
- `store.verified` (`verified`): dr_verified_ranges; the ranges of each flow's
  partitions verification proved copied, with their digests.

The parts share the `Database` (the engine, schema upgrade on first use, read/write
transactions, upsert, the clock), the tables of `schema` and the dataclasses of
`records`; none calls another. A caller that needs one part takes that part (e.g. a
fence step takes `store.applications`). A new table group is a new module of that
kind: its table in `schema.py` with a new revision under `migrations/versions/`, its
record in `records.py`, a class taking the `Database`, and an attribute below.
"""

from __future__ import annotations

from sqlalchemy.engine import URL

from replicator.statestore.applications import ApplicationStore
from replicator.statestore.approvals import ApprovalStore
from replicator.statestore.database import Database
from replicator.statestore.flow_states import FlowStateStore
from replicator.statestore.incidents import IncidentStore
from replicator.statestore.leases import LeaseStore
from replicator.statestore.runs import RunStore
from replicator.statestore.samples import SampleStore
from replicator.statestore.verified import VerifiedRangeStore


class StateStore:
    """The DR state store at a SQLAlchemy URL (default: `default_state_url`); its schema
    is created, or upgraded to this code's newest revision, on first use
    (replicator.statestore.migrate).

    One object per process is enough; it is safe to use from several threads.
    """

    def __init__(self, url: str | None = None) -> None:
        self.db = Database(url)
        self.applications = ApplicationStore(self.db)
        self.leases = LeaseStore(self.db)
        self.flows = FlowStateStore(self.db)
        self.runs = RunStore(self.db)
        self.incidents = IncidentStore(self.db)
        self.samples = SampleStore(self.db)
        self.approvals = ApprovalStore(self.db)
        self.verified = VerifiedRangeStore(self.db)

    @property
    def url(self) -> URL:
        return self.db.url

    def migrate(self) -> None:
        """Upgrade the schema to this code's newest revision now."""
        self.db.migrate()

    def close(self) -> None:
        """Release pooled connections (a later call reconnects)."""
        self.db.close()

    def __str__(self) -> str:
        return str(self.db)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"
