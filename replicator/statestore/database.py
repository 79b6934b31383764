"""The state store's database: where it is, how it is reached, and its transactions.

The store is a small SQL database (SQLite by default; PostgreSQL,
`postgresql+psycopg://...`, in production) reached through SQLAlchemy Core, so the
same statements run on both; its schema is managed by Alembic migrations
(`migrate`), run on first use. Several processes share one SQLite file safely: WAL
mode lets readers run beside a writer, every write transaction takes the write
lock up front (`BEGIN IMMEDIATE`, so two read-modify-write transactions cannot
deadlock on lock upgrade), and a busy timeout makes writers queue instead of
failing.

Nothing here holds client configurations: callers pass aliases, names and
figures. JSON fields (run params and details, flow details, step results) are
passed through `redact` anyway (`json_field`), so a secret handed over by mistake
is stored as `******`.

`Database` is what every part of `StateStore` shares (see `store.py`; each part is
given it): `read()`/`write()` transactions and a portable upsert, and `now()` is
the one clock they stamp rows with.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Table, create_engine, event, insert, update
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    DisconnectionError,
    IntegrityError,
    InterfaceError,
    NoSuchModuleError,
    OperationalError,
    SQLAlchemyError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeout
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential

from replicator.config.redact import redact, redact_url
from replicator.statestore import migrate
from replicator.statestore.errors import StateStoreError, StoreUnavailable

log = logging.getLogger(__name__)

#: Environment variable with the SQLAlchemy URL of the state store.
STATE_URL_ENV = "REPLICATOR_STATE_URL"
#: Or the path of a file holding that URL (a Docker secret, a Kubernetes Secret's
#: volume), so that a URL with a password is not in the environment.
STATE_URL_FILE_ENV = "REPLICATOR_STATE_URL_FILE"
#: Where the SQLite file goes when nothing else is configured (relative to the cwd).
DEFAULT_STATE_PATH = Path(".data/state/replicator.db")

_SQLITE_BUSY_TIMEOUT_S = 30.0
#: A PostgreSQL server that does not answer (host down, packets dropped) fails a
#: connection after this long instead of the operating system's minutes.
_CONNECT_TIMEOUT_S = 10
#: Errors that say the database cannot be reached now (it may be back later).
_UNREACHABLE = (OperationalError, InterfaceError, DisconnectionError, PoolTimeout)
_WRITE = "replicator_write"  # execution option: this transaction writes


def _locked(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and "database is locked" in str(exc)


def default_state_url() -> str:
    """`$REPLICATOR_STATE_URL`, else the content of the file `$REPLICATOR_STATE_URL_FILE`
    names, else a SQLite file under `.data/state/` of the cwd."""
    url, path = os.environ.get(STATE_URL_ENV), os.environ.get(STATE_URL_FILE_ENV)
    if url and path:
        raise StateStoreError(
            f"both ${STATE_URL_ENV} and ${STATE_URL_FILE_ENV} are set; set only one "
            f"(${STATE_URL_FILE_ENV} keeps a password out of the environment)"
        )
    if path:
        return _url_from_file(Path(path))
    return url or f"sqlite:///{Path.cwd() / DEFAULT_STATE_PATH}"


def _url_from_file(path: Path) -> str:
    """The state store URL in `path` (surrounding whitespace and newline dropped)."""
    try:
        url = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise StateStoreError(
            f"${STATE_URL_FILE_ENV} names {path}, which cannot be read ({exc.strerror}); "
            "mount the secret there readable by this user, or unset the variable"
        ) from None
    if not url:
        raise StateStoreError(
            f"{path} (${STATE_URL_FILE_ENV}) is empty; write the state store's SQLAlchemy "
            "URL into it, e.g. postgresql+psycopg://replicator:PASSWORD@db:5432/replicator"
        )
    return url


def now() -> datetime:
    """The time the store stamps rows with (table groups call it as `database.now()`,
    so a test can replace this one clock)."""
    return datetime.now(UTC)


def json_field(what: str, value: Mapping[str, Any] | None) -> dict[str, Any]:
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


class Database:
    """The database at a SQLAlchemy URL; its schema is created, or upgraded to this
    code's newest revision, on first use (replicator.statestore.migrate).

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
        return f"{type(self).__name__}({str(self)!r})"

    def close(self) -> None:
        """Release pooled connections (a later call reconnects)."""
        self._engine.dispose()

    def _create_engine(self) -> Engine:
        if not self._sqlite:
            connect_args = {}
            if (
                self.url.get_backend_name() == "postgresql"
                and "connect_timeout" not in self.url.query
            ):
                connect_args["connect_timeout"] = _CONNECT_TIMEOUT_S
            return create_engine(self.url, pool_pre_ping=True, connect_args=connect_args)
        engine = create_engine(self.url, connect_args={"timeout": _SQLITE_BUSY_TIMEOUT_S})

        # SQLAlchemy's documented recipe for real SQLite transactions, plus WAL
        # and BEGIN IMMEDIATE for writers (see the module docstring); the
        # driver's `timeout` is SQLite's busy timeout.
        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            # Switching a new file to WAL answers "database is locked" at once while
            # another connection switches it (SQLite's busy timeout does not cover
            # it): engines opening a new store together retry, for as long as the
            # busy timeout would have waited. Once in WAL mode it is a no-op.
            for attempt in Retrying(
                retry=retry_if_exception(_locked),
                wait=wait_exponential(multiplier=0.01, max=0.5),
                stop=stop_after_delay(_SQLITE_BUSY_TIMEOUT_S),
                reraise=True,
            ):
                with attempt:
                    cursor.execute("PRAGMA journal_mode=WAL")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            writes = conn.get_execution_options().get(_WRITE, False)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if writes else "BEGIN")

        return engine

    def schema_revision(self) -> tuple[str | None, str]:
        """(the database's schema revision, None for a new database; this code's
        newest), read without changing anything."""
        with self._transaction(write=False) as conn:
            return migrate.current_revision(conn), migrate.head_revision()

    def migrate(self) -> None:
        """Bring the schema to this code's newest revision now (first use does it too)."""
        self._ensure_schema()

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
        except SQLAlchemyError as exc:
            # Every database failure is the store's: callers catch StateStoreError, and
            # a driver's error never escapes to end a thread or `replicator run`.
            raise self._store_error(exc) from None

    def _store_error(self, exc: SQLAlchemyError) -> StateStoreError:
        """`exc` as the store's error: names the store (password hidden) and what to do.

        Only the driver's own message is kept (SQLAlchemy's adds the statement and its
        parameters), and the URL's password is masked in it should a driver quote it."""
        why = str(exc.orig) if isinstance(exc, DBAPIError) and exc.orig is not None else str(exc)
        why = " ".join(why.split()) or "no message"
        password = self.url.password
        if password:
            why = why.replace(str(password), "******")
        kind = type(exc.orig if isinstance(exc, DBAPIError) and exc.orig else exc).__name__
        if isinstance(exc, _UNREACHABLE):
            return StoreUnavailable(
                f"state store {self} is unavailable: {kind}: {why}; check --state-url or "
                f"${STATE_URL_ENV}, and that the database is reachable and not locked"
            )
        return StateStoreError(
            f"state store {self} failed: {kind}: {why}; check that the database is intact "
            "(a damaged SQLite file: restore it from a backup) and that the store's user "
            "may read and write its tables"
        )

    @contextmanager
    def read(self) -> Iterator[Connection]:
        self._ensure_schema()
        with self._transaction(write=False) as conn:
            yield conn

    @contextmanager
    def write(self) -> Iterator[Connection]:
        self._ensure_schema()
        with self._transaction(write=True) as conn:
            yield conn

    @staticmethod
    def upsert(
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
        if not Database.insert_new(conn, table, {**key, **values, **(first or {})}):
            conn.execute(update(table).where(*match).values(**values))

    @staticmethod
    def insert_new(conn: Connection, table: Table, values: Mapping[str, Any]) -> bool:
        """Insert a row the transaction found missing; False when a concurrent writer
        inserted it first (PostgreSQL: the key's unique violation, in a savepoint so the
        transaction goes on), for the caller to read or update that row instead."""
        try:
            with conn.begin_nested():
                conn.execute(insert(table).values(**values))
        except IntegrityError:
            return False
        return True
