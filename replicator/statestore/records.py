"""What the state store returns: one frozen dataclass per kind of row.

The store reads rows into these and never hands out SQLAlchemy rows, so callers
(procedures, the status page, the HTTP API, reports) get typed fields and the
same objects on SQLite and PostgreSQL. A new table group adds its record here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

#: What a client process reports: working, or stopped for a fence.
ClientStatus = Literal["running", "fenced"]
#: How a procedure step ended.
StepStatus = Literal["done", "failed"]


@dataclass(frozen=True)
class Application:
    """Where one client application runs, and whether it may run at all."""

    name: str
    active_cluster: str
    fenced: bool
    epoch: int
    updated_at: datetime


@dataclass(frozen=True)
class ClientState:
    """What one client process of an application last reported."""

    application: str
    client_id: str
    role: str
    cluster: str
    epoch: int
    state: str
    last_seen: datetime
    #: When it first reported this cluster, epoch and state (None: before it was kept).
    since: datetime | None = None


@dataclass(frozen=True)
class FlowState:
    flow: str
    state: str
    detail: dict[str, Any]
    updated_at: datetime


@dataclass(frozen=True)
class RunRecord:
    """One failover, failback, drill or verification; `outcome` is None while it runs."""

    run_id: str
    kind: str
    flow: str | None
    mode: str | None
    params: dict[str, Any]
    started_at: datetime
    finished_at: datetime | None
    outcome: str | None
    rpo_records: int | None
    rto_seconds: float | None
    details: dict[str, Any]

    @property
    def duration_seconds(self) -> float | None:
        """A procedure's length, from its start to its end (None while it runs)."""
        value = self.details.get("duration_seconds")
        return None if value is None else float(value)

    @property
    def downtime_seconds(self) -> float | None:
        """How long the applications' clients were stopped: from the start of the
        fence to the end of the switch (None: not known, or still stopped)."""
        value = self.details.get("downtime_seconds")
        return None if value is None else float(value)


@dataclass(frozen=True)
class Lease:
    """`owner` (a procedure id) holds `resource` (e.g. "flow A->B", "application
    orders") until `expires_at`, unless it renews the lease before."""

    resource: str
    owner: str
    acquired_at: datetime
    expires_at: datetime
    #: Grows each time the lease is taken (not when renewed): the fencing token that
    #: the owner's writes are conditional on (`replicator.statestore.fencing`).
    token: int = 0


@dataclass(frozen=True)
class StepRecord:
    """The saved result of one step of a procedure run, so a retry can skip it."""

    procedure_id: str
    name: str
    state: str
    result: dict[str, Any]
    first_saved_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Incident:
    """One problem as people are told about it (`replicator.operations.incidents`):
    open from `opened_at` until `resolved_at`, with what was last said about it
    (`notified`: "opened", "reminder" or "resolved", at `notified_at`; None while
    nothing was delivered, so the next run says it again)."""

    key: str
    source: str
    scope: str
    kind: str
    title: str
    lines: tuple[str, ...]
    opened_at: datetime
    last_seen_at: datetime
    resolved_at: datetime | None
    resolution: str | None
    notified: str | None
    notified_at: datetime | None

    @property
    def open(self) -> bool:
        return self.resolved_at is None


@dataclass(frozen=True)
class FlowSample:
    """One flow as one supervisor run saw it (`replicator.operations.samples`): the
    figures the DR status page charts, and the problems and bounds its verdict
    takes from the supervisor. Figures the run could not take are None."""

    flow: str
    sampled_at: datetime
    live_workers: int | None = None
    total_lag: int | None = None
    max_lag: int | None = None
    checkpoint_age_s: float | None = None
    heartbeat_age_s: float | None = None
    #: The supervisor's problems of the flow in that run: check, where, detail, fix.
    problems: tuple[dict[str, str], ...] = ()
    #: The bounds it judged by (`replicator.operations.health.Bounds`).
    bounds: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ApprovalRecord:
    """The answer to one procedure run's approval question, as the approval task
    recorded it (`replicator.procedures.approval`): `decision` "approved",
    "rejected", "no answer" or "refused" (an answer the deployment's policy does not
    accept, e.g. the run's own triggerer under the two-person rule); `approver` the
    Airflow user id who answered (None: nobody), with the name and roles Airflow
    gave; `triggered_by` who triggered the run; `details` what the policy said
    (allowed approvers, two-person rule, the reason of a refusal)."""

    procedure_id: str
    kind: str
    decision: str
    approver: str | None
    approver_name: str | None
    approver_roles: tuple[str, ...]
    triggered_by: str | None
    answered_at: datetime
    recorded_at: datetime
    preflight_rechecked_at: datetime | None = None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class VerifiedRange:
    """Source offsets [source_first, source_end) of a flow's partition, proved copied:
    its `records` and their copies (at target offsets [target_first, target_end) of
    `target_topic`) summed to the same `digest` (16 hex digits) when verified, and
    last re-read at `checked_at`."""

    flow: str
    topic: str
    partition: int
    source_first: int
    source_end: int
    target_topic: str
    #: The remote topic's id when verified (a topic deleted and created again under
    #: the same name has another): None where the cluster did not tell.
    target_topic_id: str | None
    target_first: int | None
    target_end: int | None
    records: int
    digest: str
    verified_at: datetime
    checked_at: datetime
    run_id: str | None = None
