"""The DR state store: which cluster each client application uses, and what happened.

Failover, failback and drill procedures write here; client applications read
their route here and report here that they obey a fence; Airflow and the UI
read the history. `StateStore` is one object with one method per question, put
together from one class per table group, each in its own module:

- `applications`: dr_applications and dr_clients; an application's active cluster,
  fence and epoch, its clients' reports, the wait for a fence's acknowledgement;
- `leases`: dr_leases; which procedure holds a flow or an application;
- `flow_states`: dr_flows; the desired state of each flow;
- `runs`: dr_runs and dr_steps; the DR history and each procedure step's result;
- `incidents`: dr_incidents; what people were told about each problem, and when;
- `samples`: dr_flow_samples; what each supervisor run measured of each flow;
- `approvals`: dr_approvals; the answer to each procedure run's approval question;
- `verified`: dr_verified_ranges; the ranges of each flow's partitions verification
  proved copied, with their digests.

They share `database.Database` (the engine, schema upgrade on first use,
read/write transactions, upsert, the clock), the tables of `schema` and the
dataclasses of `records`. A new table group is a new module of that kind: its
table in `schema.py` with a new revision under `migrations/versions/`, its record
in `records.py`, a `Database` subclass with its statements, and that class added
to the bases of `StateStore` below.
"""

from __future__ import annotations

from replicator.statestore.applications import ApplicationStore
from replicator.statestore.approvals import ApprovalStore
from replicator.statestore.flow_states import FlowStateStore
from replicator.statestore.incidents import IncidentStore
from replicator.statestore.leases import LeaseStore
from replicator.statestore.runs import RunStore
from replicator.statestore.samples import SampleStore
from replicator.statestore.verified import VerifiedRangeStore


class StateStore(
    ApplicationStore,
    LeaseStore,
    FlowStateStore,
    RunStore,
    IncidentStore,
    SampleStore,
    ApprovalStore,
    VerifiedRangeStore,
):
    """The DR state store at a SQLAlchemy URL; its schema is created, or upgraded to
    this code's newest revision, on first use (replicator.statestore.migrate).

    One object per process is enough; it is safe to use from several threads.
    """
