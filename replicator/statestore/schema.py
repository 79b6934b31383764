"""The state store's tables, as this code expects them after the newest migration.

Alembic's autogenerate compares `metadata` with a database (the migrations'
`env.py`, and the schema test), so every table is declared here, on one
`metadata`; the revisions under `migrations/versions/` create and alter them. A
new table goes here, with a new revision, a record in `records.py` and its
statements in a table-group module (see `store.py`).
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Dialect,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
)


class UTCDateTime(TypeDecorator[datetime]):
    """Timestamps stored as naive UTC, read back as aware UTC, on every backend.

    SQLite has no time zones and PostgreSQL's would convert to the session's;
    storing naive UTC everywhere keeps the two identical.
    """

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else value.replace(tzinfo=UTC)


metadata = MetaData()
_NAME = 255

applications = Table(
    "dr_applications",
    metadata,
    Column("name", String(_NAME), primary_key=True),
    Column("active_cluster", String(_NAME), nullable=False),
    Column("fenced", Boolean, nullable=False),
    Column("epoch", Integer, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)

clients = Table(
    "dr_clients",
    metadata,
    Column("application", String(_NAME), primary_key=True),
    Column("client_id", String(_NAME), primary_key=True),
    Column("role", String(64), nullable=False),
    Column("cluster", String(_NAME), nullable=False),
    Column("epoch", Integer, nullable=False),
    Column("state", String(16), nullable=False),
    Column("last_seen", UTCDateTime, nullable=False),
    # When it first reported this cluster, epoch and state: a cutover's "first client
    # resumed" phase (`replicator.procedures.phases`).
    Column("since", UTCDateTime),
)

flows = Table(
    "dr_flows",
    metadata,
    Column("flow", String(_NAME), primary_key=True),
    Column("state", String(64), nullable=False),
    Column("detail", JSON, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)

# `seq` orders runs newest first even when two start within the clock's resolution.
runs = Table(
    "dr_runs",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(_NAME), nullable=False, unique=True),
    Column("kind", String(64), nullable=False, index=True),
    Column("flow", String(_NAME)),
    Column("mode", String(64)),
    Column("params", JSON, nullable=False),
    Column("started_at", UTCDateTime, nullable=False),
    Column("finished_at", UTCDateTime),
    Column("outcome", String(64)),
    Column("rpo_records", BigInteger),
    Column("rto_seconds", Float),
    Column("details", JSON, nullable=False),
)

# `seq` keeps the order of first save: an upsert updates the row in place.
steps = Table(
    "dr_steps",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("procedure_id", String(_NAME), nullable=False),
    Column("name", String(_NAME), nullable=False),
    Column("state", String(16), nullable=False),
    Column("result", JSON, nullable=False),
    Column("first_saved_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    UniqueConstraint("procedure_id", "name"),
)

# One row per leased resource: the primary key makes a resource's lease unique.
leases = Table(
    "dr_leases",
    metadata,
    Column("resource", String(_NAME), primary_key=True),
    Column("owner", String(_NAME), nullable=False),
    Column("acquired_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
    # The fencing token of this taking of the lease (`replicator.statestore.fencing`).
    Column("token", BigInteger, nullable=False, server_default="0"),
)

# One row per resource ever leased: the last fencing token given for it. Kept when
# the lease is released, so a token never repeats.
lease_tokens = Table(
    "dr_lease_tokens",
    metadata,
    Column("resource", String(_NAME), primary_key=True),
    Column("token", BigInteger, nullable=False),
)

# One row per incident key (source/scope/kind): the open incident, or the last one
# resolved; a problem that comes back reopens the row as a new incident.
incidents = Table(
    "dr_incidents",
    metadata,
    Column("key", String(_NAME * 2 + 64), primary_key=True),
    Column("source", String(64), nullable=False),
    Column("scope", String(_NAME), nullable=False),
    Column("kind", String(64), nullable=False),
    Column("title", Text, nullable=False),
    Column("lines", JSON, nullable=False),
    Column("opened_at", UTCDateTime, nullable=False),
    Column("last_seen_at", UTCDateTime, nullable=False),
    Column("resolved_at", UTCDateTime),
    Column("resolution", Text),
    Column("notified", String(16)),
    Column("notified_at", UTCDateTime),
)

# One row per flow per supervisor run, pruned beyond a retention by whoever records
# (`SampleStore.record`); read by time window for the DR status page's charts.
flow_samples = Table(
    "dr_flow_samples",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("flow", String(_NAME), nullable=False),
    Column("sampled_at", UTCDateTime, nullable=False, index=True),
    Column("live_workers", Integer),
    Column("total_lag", BigInteger),
    Column("max_lag", BigInteger),
    Column("checkpoint_age_s", Float),
    Column("heartbeat_age_s", Float),
    Column("problems", JSON, nullable=False),
    Column("bounds", JSON, nullable=False),
)

# One row per procedure run that asked a person: the answer, written once by the
# approval task and read by the run's first changing step (`approvals`).
approvals = Table(
    "dr_approvals",
    metadata,
    Column("procedure_id", String(_NAME), primary_key=True),
    Column("kind", String(64), nullable=False),
    Column("decision", String(32), nullable=False),
    Column("approver", String(_NAME)),
    Column("approver_name", String(_NAME)),
    Column("approver_roles", JSON, nullable=False),
    Column("triggered_by", String(_NAME)),
    Column("answered_at", UTCDateTime, nullable=False),
    Column("recorded_at", UTCDateTime, nullable=False),
    Column("preflight_rechecked_at", UTCDateTime),
    Column("details", JSON, nullable=False),
)

# One row per verified range of source offsets of a flow's partition: where its copies
# lie on the target and the digest both sides summed to, written by the verification
# run that proved it and re-read by the runs after it (`verified`).
verified_ranges = Table(
    "dr_verified_ranges",
    metadata,
    Column("flow", String(_NAME), primary_key=True),
    Column("topic", String(_NAME), primary_key=True),
    Column("partition", Integer, primary_key=True),
    Column("source_first", BigInteger, primary_key=True),
    Column("source_end", BigInteger, nullable=False),
    Column("target_topic", String(_NAME), nullable=False),
    Column("target_topic_id", String(32)),
    Column("target_first", BigInteger),
    Column("target_end", BigInteger),
    Column("records", BigInteger, nullable=False),
    Column("digest", String(16), nullable=False),
    Column("verified_at", UTCDateTime, nullable=False),
    Column("checked_at", UTCDateTime, nullable=False),
    Column("run_id", String(_NAME)),
)
