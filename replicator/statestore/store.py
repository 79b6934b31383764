"""The DR state store: which cluster each client application uses, and what happened.

Failover, failback and drill procedures write here; client applications read
their route here and report here that they obey a fence; Airflow and the UI
read the history. It is a small SQL database (SQLite by default; PostgreSQL,
`postgresql+psycopg://...`, in production) reached through SQLAlchemy Core, so the
same statements run on both; its schema is managed by Alembic migrations
(`migrate`). Several processes share one SQLite file safely: WAL mode lets readers
run beside a writer, every write transaction takes the write lock up front
(`BEGIN IMMEDIATE`, so two read-modify-write transactions cannot deadlock on
lock upgrade), and a busy timeout makes writers queue instead of failing.

Nothing here holds client configurations: callers pass aliases, names and
figures. JSON fields (run params and details, flow details, step results) are
passed through `redact` anyway, so a secret handed over by mistake is stored
as `******`.

Epochs: an application's epoch grows by one on every change of its active
cluster or fence state, never otherwise. A client that reports state "fenced"
at epoch E has therefore acknowledged exactly the fence that E stands for.

Route lease: a client acts on its route for at most `ROUTE_LEASE_S` after it
last confirmed it (read it here and reported itself), so a client cut off from
the store stops on its own; a fence waits that long for a client gone silent
instead of taking silence for obedience.

Procedure leases: a DR procedure holds a lease on its flow and on each
application it moves (`acquire_leases`), so two procedures never interleave
their steps on the same thing; a lease lapses unless renewed, so an
orchestrator that died does not lock a flow forever.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Connection,
    DateTime,
    Dialect,
    Float,
    Integer,
    MetaData,
    Row,
    String,
    Table,
    TypeDecorator,
    UniqueConstraint,
    create_engine,
    delete,
    event,
    insert,
    select,
    update,
)
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, NoSuchModuleError, OperationalError

from replicator.config.redact import redact, redact_url
from replicator.errors import ReplicatorError
from replicator.statestore import migrate

log = logging.getLogger(__name__)

#: Environment variable with the SQLAlchemy URL of the state store.
STATE_URL_ENV = "REPLICATOR_STATE_URL"
#: Where the SQLite file goes when nothing else is configured (relative to the cwd).
DEFAULT_STATE_PATH = Path(".data/state/replicator.db")

ClientStatus = Literal["running", "fenced"]
StepStatus = Literal["done", "failed"]
_CLIENT_STATES = ("running", "fenced")
_STEP_STATES = ("done", "failed")
_SQLITE_BUSY_TIMEOUT_S = 30.0
_WAIT_POLL_S = 0.2
_WRITE = "replicator_write"  # execution option: this transaction writes

#: How long a client application may act on its route after it last confirmed it
#: (read it and reported itself to the store); see include/demo/fenced_client.py.
#: A fence waits this long for a client that went silent.
ROUTE_LEASE_S = 5.0
#: Added to the route lease when waiting out a silent client: the client's and the
#: procedure's clocks (each stamps its own times) and the client's last unit of work.
ROUTE_LEASE_GRACE_S = 1.0
#: How long a procedure's lease lasts unless renewed (each step of it renews it).
DEFAULT_LEASE_TTL_S = 3600.0


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


class FenceNotAcknowledged(StateStoreError):
    """Clients still running after a fence's deadline; `pending` lists them."""

    def __init__(self, message: str, pending: list[ClientState]) -> None:
        super().__init__(message)
        self.pending = pending


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


@dataclass(frozen=True)
class StepRecord:
    """The saved result of one step of a procedure run, so a retry can skip it."""

    procedure_id: str
    name: str
    state: str
    result: dict[str, Any]
    first_saved_at: datetime
    updated_at: datetime


class _UTCDateTime(TypeDecorator[datetime]):
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


_metadata = MetaData()
_NAME = 255

_applications = Table(
    "dr_applications",
    _metadata,
    Column("name", String(_NAME), primary_key=True),
    Column("active_cluster", String(_NAME), nullable=False),
    Column("fenced", Boolean, nullable=False),
    Column("epoch", Integer, nullable=False),
    Column("updated_at", _UTCDateTime, nullable=False),
)

_clients = Table(
    "dr_clients",
    _metadata,
    Column("application", String(_NAME), primary_key=True),
    Column("client_id", String(_NAME), primary_key=True),
    Column("role", String(64), nullable=False),
    Column("cluster", String(_NAME), nullable=False),
    Column("epoch", Integer, nullable=False),
    Column("state", String(16), nullable=False),
    Column("last_seen", _UTCDateTime, nullable=False),
)

_flows = Table(
    "dr_flows",
    _metadata,
    Column("flow", String(_NAME), primary_key=True),
    Column("state", String(64), nullable=False),
    Column("detail", JSON, nullable=False),
    Column("updated_at", _UTCDateTime, nullable=False),
)

# `seq` orders runs newest first even when two start within the clock's resolution.
_runs = Table(
    "dr_runs",
    _metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(_NAME), nullable=False, unique=True),
    Column("kind", String(64), nullable=False, index=True),
    Column("flow", String(_NAME)),
    Column("mode", String(64)),
    Column("params", JSON, nullable=False),
    Column("started_at", _UTCDateTime, nullable=False),
    Column("finished_at", _UTCDateTime),
    Column("outcome", String(64)),
    Column("rpo_records", BigInteger),
    Column("rto_seconds", Float),
    Column("details", JSON, nullable=False),
)

# `seq` keeps the order of first save: an upsert updates the row in place.
_steps = Table(
    "dr_steps",
    _metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("procedure_id", String(_NAME), nullable=False),
    Column("name", String(_NAME), nullable=False),
    Column("state", String(16), nullable=False),
    Column("result", JSON, nullable=False),
    Column("first_saved_at", _UTCDateTime, nullable=False),
    Column("updated_at", _UTCDateTime, nullable=False),
    UniqueConstraint("procedure_id", "name"),
)


# One row per leased resource: the primary key makes a resource's lease unique.
_leases = Table(
    "dr_leases",
    _metadata,
    Column("resource", String(_NAME), primary_key=True),
    Column("owner", String(_NAME), nullable=False),
    Column("acquired_at", _UTCDateTime, nullable=False),
    Column("expires_at", _UTCDateTime, nullable=False),
)


def default_state_url() -> str:
    """`$REPLICATOR_STATE_URL`, else a SQLite file under `.data/state/` of the cwd."""
    return os.environ.get(STATE_URL_ENV) or f"sqlite:///{Path.cwd() / DEFAULT_STATE_PATH}"


def _now() -> datetime:
    return datetime.now(UTC)


class StateStore:
    """The DR state store at a SQLAlchemy URL; its schema is created, or upgraded to
    this code's newest revision, on first use (replicator.statestore.migrate).

    One object per process is enough; it is safe to use from several threads.
    """

    def __init__(self, url: str | None = None) -> None:
        try:
            self.url: URL = make_url(url or default_state_url())
        except (ArgumentError, ValueError):  # ValueError: a port that is no number
            # The parser's message may quote a part of the URL: only the redacted URL is shown.
            raise StateStoreError(
                f"state store URL {redact_url(url or default_state_url())!r} is not a "
                "SQLAlchemy URL (dialect+driver://user:password@host:port/database); "
                "use e.g. sqlite:////path/to/replicator.db or postgresql+psycopg://user@host/db"
            ) from None
        self._sqlite = self.url.get_backend_name() == "sqlite"
        if self._sqlite and self.url.database not in (None, "", ":memory:"):
            Path(self.url.database).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._engine = self._create_engine()
        except (NoSuchModuleError, ModuleNotFoundError) as exc:
            raise StateStoreError(
                f"no database driver for state store {self}: {exc}; install the driver "
                "named in the URL (e.g. psycopg for postgresql+psycopg://) into the venv"
            ) from None
        self._schema_lock = threading.Lock()
        self._schema_ready = False

    def __str__(self) -> str:
        return self.url.render_as_string(hide_password=True)

    def __repr__(self) -> str:
        return f"StateStore({str(self)!r})"

    def close(self) -> None:
        """Release pooled connections (a later call reconnects)."""
        self._engine.dispose()

    # --- applications -------------------------------------------------------------

    def register_application(self, name: str, cluster: str) -> Application:
        """Register `name` as active on `cluster`; if it is registered already it
        keeps its active cluster (a re-run must never move a live application)."""
        with self._write() as conn:
            if self._application_row(conn, name) is None:
                try:
                    with conn.begin_nested():
                        conn.execute(
                            insert(_applications).values(
                                name=name,
                                active_cluster=cluster,
                                fenced=False,
                                epoch=0,
                                updated_at=_now(),
                            )
                        )
                except IntegrityError:  # registered concurrently (PostgreSQL): keep that one
                    pass
        return self.application(name)

    def application(self, name: str) -> Application:
        with self._read() as conn:
            return self._application(conn, name)

    def applications(self) -> list[Application]:
        with self._read() as conn:
            rows = conn.execute(select(_applications).order_by(_applications.c.name))
            return [Application(**row._mapping) for row in rows]

    def fence(self, name: str) -> int:
        """Fence `name` (its clients must stop); returns the epoch to wait for.

        Fencing a fenced application changes nothing and returns its epoch, so a
        retried procedure waits for the same acknowledgements.
        """
        with self._write() as conn:
            app = self._application(conn, name, for_update=True)
            if app.fenced:
                return app.epoch
            self._set_application(conn, name, fenced=True, epoch=app.epoch + 1)
            return app.epoch + 1

    def switch(self, name: str, cluster: str) -> Application:
        """Make `cluster` the active cluster of `name` and lift any fence."""
        with self._write() as conn:
            app = self._application(conn, name, for_update=True)
            if app.active_cluster != cluster or app.fenced:
                self._set_application(
                    conn, name, active_cluster=cluster, fenced=False, epoch=app.epoch + 1
                )
        return self.application(name)

    def unfence(self, name: str) -> Application:
        """Let the clients of `name` run again on the cluster they were fenced on."""
        with self._write() as conn:
            app = self._application(conn, name, for_update=True)
            if app.fenced:
                self._set_application(conn, name, fenced=False, epoch=app.epoch + 1)
        return self.application(name)

    # --- clients ------------------------------------------------------------------

    def report_client(  # noqa: PLR0917 - procedures and clients call it positionally
        self,
        application: str,
        client_id: str,
        role: str,
        cluster: str,
        epoch: int,
        state: ClientStatus,
    ) -> None:
        """Record what a client process is doing; "fenced" at epoch E acknowledges
        the fence of epoch E (the client has stopped and flushed/committed)."""
        if state not in _CLIENT_STATES:
            raise StateStoreError(
                f"client {client_id!r} of {application!r} reported state {state!r}; "
                f"a client state is one of {', '.join(_CLIENT_STATES)}"
            )
        with self._write() as conn:
            self._application(conn, application)
            self._upsert(
                conn,
                _clients,
                {"application": application, "client_id": client_id},
                {
                    "role": role,
                    "cluster": cluster,
                    "epoch": epoch,
                    "state": state,
                    "last_seen": _now(),
                },
            )

    def remove_client(self, application: str, client_id: str) -> None:
        """Forget a client that stopped cleanly, so no procedure waits for it."""
        with self._write() as conn:
            conn.execute(
                delete(_clients).where(
                    _clients.c.application == application, _clients.c.client_id == client_id
                )
            )

    def clients(self, application: str, seen_within_s: float | None = None) -> list[ClientState]:
        """The clients of `application`, only those seen in the last `seen_within_s` if given."""
        with self._read() as conn:
            self._application(conn, application)
            query = select(_clients).where(_clients.c.application == application)
            if seen_within_s is not None:
                query = query.where(
                    _clients.c.last_seen >= _now() - timedelta(seconds=seen_within_s)
                )
            rows = conn.execute(query.order_by(_clients.c.role, _clients.c.client_id))
            return [ClientState(**row._mapping) for row in rows]

    def wait_fenced(
        self, application: str, epoch: int, timeout_s: float, lease_s: float = ROUTE_LEASE_S
    ) -> list[ClientState]:
        """Wait until every client of `application` reports "fenced" at `epoch`, or has
        been silent for its route lease `lease_s` (plus ROUTE_LEASE_GRACE_S): a client
        that cannot confirm its route stops on its own within the lease, so silence
        counts as fenced only once the lease has passed since it was last seen.

        Returns the clients that were within their lease when the wait began: those
        that acknowledged, and those waited out (still not "fenced" at `epoch`). Raises
        FenceNotAcknowledged naming the clients still pending at the deadline, and
        StateStoreError if the application left that fence meanwhile."""
        deadline = time.monotonic() + timeout_s
        lease = timedelta(seconds=lease_s + ROUTE_LEASE_GRACE_S)
        began = _now()
        while True:
            app = self.application(application)
            if not app.fenced or app.epoch != epoch:
                raise StateStoreError(
                    f"application {application!r} is no longer fenced at epoch {epoch} "
                    f"(now epoch {app.epoch}, {'fenced' if app.fenced else 'not fenced'}, "
                    f"active on {app.active_cluster!r}): another procedure changed it; "
                    "check `replicator history` before fencing again"
                )
            now = _now()
            # A client silent for a lease before the wait began had stopped already.
            current = [c for c in self.clients(application) if c.last_seen + lease > began]
            pending = [
                c
                for c in current
                if (c.state != "fenced" or c.epoch != epoch) and c.last_seen + lease > now
            ]
            if not pending:
                return current
            if time.monotonic() >= deadline:
                listed = "; ".join(
                    f"{c.client_id} ({c.role} on {c.cluster}: {c.state} at epoch {c.epoch}, "
                    f"seen {(now - c.last_seen).total_seconds():.1f}s ago)"
                    for c in pending
                )
                raise FenceNotAcknowledged(
                    f"{len(pending)} client(s) of {application!r} did not acknowledge the "
                    f"fence at epoch {epoch} within {timeout_s:g}s: {listed}; make sure they "
                    "follow the fence protocol of replicator.statestore.discovery, or stop them",
                    pending,
                )
            time.sleep(min(_WAIT_POLL_S, max(0.0, deadline - time.monotonic())))

    # --- leases -------------------------------------------------------------------

    def acquire_leases(
        self, resources: Iterable[str], owner: str, ttl_s: float = DEFAULT_LEASE_TTL_S
    ) -> list[Lease]:
        """Lease every one of `resources` to `owner` for `ttl_s` seconds, all or none,
        in one transaction: a free resource is leased, an expired lease is taken
        over, `owner`'s own lease is renewed. Raises LeaseHeld naming the holder and
        its expiry when another owner holds one of them."""
        wanted = sorted(set(resources))  # one lock order for everyone: no deadlock
        now = _now()
        expires = now + timedelta(seconds=ttl_s)
        with self._write() as conn:
            for resource in wanted:
                held = self._lease(conn, resource)
                if held is None:
                    try:
                        with conn.begin_nested():
                            conn.execute(
                                insert(_leases).values(
                                    resource=resource,
                                    owner=owner,
                                    acquired_at=now,
                                    expires_at=expires,
                                )
                            )
                        continue
                    except IntegrityError:  # leased concurrently (PostgreSQL): see by whom
                        held = self._lease(conn, resource)
                        assert held is not None  # the row that made the insert fail
                if held.owner != owner and held.expires_at > now:
                    raise self._lease_held(held, owner, now)
                if held.owner != owner:
                    log.warning(
                        "the lease of %s by %s expired at %s; %s takes it over",
                        resource,
                        held.owner,
                        f"{held.expires_at:%Y-%m-%d %H:%M:%S} UTC",
                        owner,
                    )
                conn.execute(
                    update(_leases)
                    .where(_leases.c.resource == resource)
                    .values(
                        owner=owner,
                        acquired_at=held.acquired_at if held.owner == owner else now,
                        expires_at=expires,
                    )
                )
            return [lease for r in wanted if (lease := self._lease(conn, r)) is not None]

    def release_leases(self, owner: str) -> int:
        """Release every lease `owner` holds; returns how many it held."""
        with self._write() as conn:
            return conn.execute(delete(_leases).where(_leases.c.owner == owner)).rowcount

    def leases(self) -> list[Lease]:
        """Every lease, expired ones included (until someone takes them over)."""
        with self._read() as conn:
            rows = conn.execute(select(_leases).order_by(_leases.c.resource))
            return [Lease(**row._mapping) for row in rows]

    # --- flows --------------------------------------------------------------------

    def set_flow_state(
        self, flow: str, state: str, detail: Mapping[str, Any] | None = None
    ) -> FlowState:
        with self._write() as conn:
            values = {"state": state, "detail": _json(f"detail of flow {flow!r}", detail)}
            self._upsert(conn, _flows, {"flow": flow}, {**values, "updated_at": _now()})
        state_now = self.flow_state(flow)
        assert state_now is not None  # written just above
        return state_now

    def flow_state(self, flow: str) -> FlowState | None:
        with self._read() as conn:
            row = conn.execute(select(_flows).where(_flows.c.flow == flow)).first()
            return None if row is None else FlowState(**row._mapping)

    def flow_states(self) -> list[FlowState]:
        with self._read() as conn:
            rows = conn.execute(select(_flows).order_by(_flows.c.flow))
            return [FlowState(**row._mapping) for row in rows]

    # --- runs ---------------------------------------------------------------------

    def start_run(
        self, kind: str, flow: str | None, mode: str | None, params: Mapping[str, Any]
    ) -> str:
        """Record the start of a run; returns its id (`<kind>-<UTC time>-<random>`)."""
        started = _now()
        run_id = f"{kind}-{started:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"
        with self._write() as conn:
            conn.execute(
                insert(_runs).values(
                    run_id=run_id,
                    kind=kind,
                    flow=flow,
                    mode=mode,
                    params=_json(f"params of run {run_id}", params),
                    started_at=started,
                    details={},
                )
            )
        return run_id

    def finish_run(
        self,
        run_id: str,
        outcome: str,
        rpo_records: int | None,
        rto_seconds: float | None,
        details: Mapping[str, Any],
    ) -> RunRecord:
        """Record how a run ended; finishing it again (a retry) overwrites the result."""
        with self._write() as conn:
            done = conn.execute(
                update(_runs)
                .where(_runs.c.run_id == run_id)
                .values(
                    finished_at=_now(),
                    outcome=outcome,
                    rpo_records=rpo_records,
                    rto_seconds=rto_seconds,
                    details=_json(f"details of run {run_id}", details),
                )
            )
            if not done.rowcount:
                raise self._unknown_run(run_id)
        return self.run(run_id)

    def run(self, run_id: str) -> RunRecord:
        with self._read() as conn:
            row = conn.execute(select(_runs).where(_runs.c.run_id == run_id)).first()
        if row is None:
            raise self._unknown_run(run_id)
        return _run_record(row)

    def runs(self, kind: str | None = None, limit: int = 50) -> list[RunRecord]:
        """The last `limit` runs (of `kind` if given), newest first."""
        query = select(_runs).order_by(_runs.c.seq.desc()).limit(limit)
        if kind is not None:
            query = query.where(_runs.c.kind == kind)
        with self._read() as conn:
            return [_run_record(row) for row in conn.execute(query)]

    # --- procedure steps ----------------------------------------------------------

    def step(self, procedure_id: str, name: str) -> StepRecord | None:
        with self._read() as conn:
            row = conn.execute(
                select(_steps).where(_steps.c.procedure_id == procedure_id, _steps.c.name == name)
            ).first()
        return None if row is None else _step_record(row)

    def save_step(
        self, procedure_id: str, name: str, state: StepStatus, result: Mapping[str, Any]
    ) -> StepRecord:
        if state not in _STEP_STATES:
            raise StateStoreError(
                f"step {name!r} of {procedure_id!r} saved with state {state!r}; "
                f"a step state is one of {', '.join(_STEP_STATES)}"
            )
        now = _now()
        values = {"state": state, "result": _json(f"result of step {name!r}", result)}
        with self._write() as conn:
            self._upsert(
                conn,
                _steps,
                {"procedure_id": procedure_id, "name": name},
                {**values, "updated_at": now},
                first={"first_saved_at": now},
            )
        saved = self.step(procedure_id, name)
        assert saved is not None  # written just above
        return saved

    def steps(self, procedure_id: str) -> list[StepRecord]:
        """The steps of one procedure run, in the order they were first saved."""
        query = select(_steps).where(_steps.c.procedure_id == procedure_id).order_by(_steps.c.seq)
        with self._read() as conn:
            return [_step_record(row) for row in conn.execute(query)]

    # --- plumbing -----------------------------------------------------------------

    def _create_engine(self) -> Engine:
        if not self._sqlite:
            return create_engine(self.url, pool_pre_ping=True)
        engine = create_engine(self.url, connect_args={"timeout": _SQLITE_BUSY_TIMEOUT_S})

        # SQLAlchemy's documented recipe for real SQLite transactions, plus WAL
        # and BEGIN IMMEDIATE for writers (see the module docstring); the
        # driver's `timeout` is SQLite's busy timeout.
        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            writes = conn.get_execution_options().get(_WRITE, False)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if writes else "BEGIN")

        return engine

    def _ensure_schema(self) -> None:
        """Bring the schema to the newest revision on first use (see `migrate`); a
        store already current costs one read, with no lock taken."""
        if self._schema_ready:
            return
        with self._schema_lock:
            if self._schema_ready:
                return
            with self._transaction(write=False) as conn:
                current = migrate.current_revision(conn)
            if current != migrate.head_revision():
                try:
                    with self._transaction(write=True) as conn:
                        migrate.upgrade_to_head(conn)
                except migrate.UnknownRevision as exc:
                    raise StateStoreError(
                        f"state store {self} has schema revision {exc.revision!r}, which this "
                        f"replicator does not know (its newest is {exc.head!r}): a newer "
                        "replicator upgraded it; run that version, or point --state-url / "
                        f"${STATE_URL_ENV} at another store"
                    ) from None
                log.info(
                    "state store %s: schema upgraded from revision %s to %s",
                    self,
                    current or "none",
                    migrate.head_revision(),
                )
            self._schema_ready = True

    @contextmanager
    def _transaction(self, write: bool) -> Iterator[Connection]:
        try:
            with self._engine.connect() as conn:
                conn.execution_options(**{_WRITE: write})
                with conn.begin():
                    yield conn
        except OperationalError as exc:
            raise StoreUnavailable(
                f"state store {self} is unavailable: {exc.orig}; check --state-url or "
                f"${STATE_URL_ENV}, and that the database is reachable and not locked"
            ) from None

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        self._ensure_schema()
        with self._transaction(write=False) as conn:
            yield conn

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        self._ensure_schema()
        with self._transaction(write=True) as conn:
            yield conn

    @staticmethod
    def _upsert(
        conn: Connection,
        table: Table,
        key: Mapping[str, Any],
        values: Mapping[str, Any],
        first: Mapping[str, Any] | None = None,
    ) -> None:
        """Set `values` on the row with `key`, inserting it (with `first` too) if it
        is new; portable SQL instead of each dialect's ON CONFLICT."""
        match = [table.c[name] == value for name, value in key.items()]
        if conn.execute(update(table).where(*match).values(**values)).rowcount:
            return
        try:
            with conn.begin_nested():
                conn.execute(insert(table).values(**key, **values, **(first or {})))
        except IntegrityError:  # a concurrent writer inserted it first (PostgreSQL)
            conn.execute(update(table).where(*match).values(**values))

    def _application_row(self, conn: Connection, name: str, for_update: bool = False) -> Row | None:
        query = select(_applications).where(_applications.c.name == name)
        if for_update:
            query = query.with_for_update()
        return conn.execute(query).first()

    def _application(self, conn: Connection, name: str, for_update: bool = False) -> Application:
        row = self._application_row(conn, name, for_update)
        if row is None:
            known = conn.execute(select(_applications.c.name).order_by(_applications.c.name))
            names = ", ".join(known.scalars()) or "none"
            raise NotFoundError(
                f"application {name!r} is not registered in the state store {self} "
                f"(registered: {names}); register it with "
                f"`replicator clients register {name} --cluster ALIAS`"
            )
        return Application(**row._mapping)

    @staticmethod
    def _set_application(conn: Connection, name: str, **values: Any) -> None:
        conn.execute(
            update(_applications)
            .where(_applications.c.name == name)
            .values(**values, updated_at=_now())
        )

    @staticmethod
    def _lease(conn: Connection, resource: str) -> Lease | None:
        """The lease of `resource`, its row locked until the transaction ends."""
        query = select(_leases).where(_leases.c.resource == resource).with_for_update()
        row = conn.execute(query).first()
        return None if row is None else Lease(**row._mapping)

    def _lease_held(self, held: Lease, wanted_by: str, now: datetime) -> LeaseHeld:
        left = (held.expires_at - now).total_seconds()
        return LeaseHeld(
            f"{held.resource} is leased to {held.owner} until "
            f"{held.expires_at:%Y-%m-%d %H:%M:%S} UTC ({left:.0f}s from now), so "
            f"{wanted_by} may not change it: two procedures on the same flow or "
            f"application would undo each other's steps. Wait until {held.owner} "
            "finishes (`replicator history`); if its orchestrator died, the lease "
            "lapses at that time",
            held,
        )

    def _unknown_run(self, run_id: str) -> NotFoundError:
        return NotFoundError(
            f"run {run_id!r} is not in the state store {self}; "
            "list the recent ones with `replicator history`"
        )


def _json(what: str, value: Mapping[str, Any] | None) -> dict[str, Any]:
    """`value` as stored: redacted, and checked to be JSON so a bad value fails here
    with its name, not later in a driver."""
    data = redact(value or {})
    try:
        return json.loads(json.dumps(data))
    except (TypeError, ValueError) as exc:
        raise StateStoreError(
            f"{what} cannot be stored as JSON ({exc}); pass plain numbers, strings, "
            "lists and dicts (e.g. timestamps as ISO strings)"
        ) from None


def _run_record(row: Row) -> RunRecord:
    fields = dict(row._mapping)
    del fields["seq"]
    return RunRecord(**fields)


def _step_record(row: Row) -> StepRecord:
    fields = dict(row._mapping)
    del fields["seq"]
    return StepRecord(**fields)
