"""The state store's schema, brought to the newest revision by the store itself.

The schema is managed with Alembic (revisions in `migrations/versions/`, shipped in
the package). Every `StateStore` upgrades its database to the newest revision on
its first use, so an upgraded replicator keeps working on the store, and the DR
history in it, that an older one wrote: nobody runs a migration by hand. Stores
made before migrations existed (up to commit 41d8c6e, by `create_all`) have the
tables but no version table; the baseline revision adopts them as they are.

Two processes that open one store at once must not both migrate it: the check
and the upgrade run in one transaction that first takes a lock (PostgreSQL: a
transaction-level advisory lock; SQLite: the database's write lock, which the
store's write transactions take up front), so the second waits, then finds the
schema current. Both databases run DDL inside transactions, so an upgrade that
fails leaves the store as it was.
"""

from __future__ import annotations

import threading
from functools import cache

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, inspect, text

#: The version table. Not Alembic's default `alembic_version`: the store may live in a
#: database shared with other applications (Airflow's metadata database has its own).
VERSION_TABLE = "dr_alembic_version"
#: The advisory lock PostgreSQL sessions take while checking and upgrading the schema
#: (any constant that other users of the database do not use; "drschema" in ASCII).
_PG_LOCK_KEY = 0x6472736368656D61
#: Alembic's `context` and `op` are module-level proxies of the one migration running in
#: the process: two threads migrating two stores at once would trample each other's.
_ALEMBIC_LOCK = threading.Lock()


class UnknownRevision(Exception):
    """The database is at a revision this code does not have: a newer replicator
    upgraded it."""

    def __init__(self, revision: str, head: str) -> None:
        super().__init__(revision)
        self.revision = revision
        self.head = head


def alembic_config(connection: Connection | None = None) -> Config:
    """Alembic's configuration for the state store, on `connection` if given."""
    config = Config()
    config.set_main_option("script_location", "replicator.statestore:migrations")
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@cache
def head_revision() -> str:
    """The newest revision this code knows."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None  # the baseline exists
    return head


def current_revision(conn: Connection) -> str | None:
    """The database's revision; None for a new database or a store made before migrations.

    Read with one query rather than through Alembic's MigrationContext, which logs at
    INFO each time: every client process opening the store would log it.
    """
    if not inspect(conn).has_table(VERSION_TABLE):
        return None
    return conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()  # noqa: S608


def upgrade_to_head(conn: Connection) -> None:
    """Upgrade the schema to the newest revision, under the lock; `conn` must be in a
    write transaction, which commits the upgrade (or rolls all of it back)."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
    current = current_revision(conn)
    head = head_revision()
    if current == head:
        return  # another process upgraded it while this one waited for the lock
    if current is not None:
        script = ScriptDirectory.from_config(alembic_config())
        if current not in {rev.revision for rev in script.walk_revisions()}:
            raise UnknownRevision(current, head)
    with _ALEMBIC_LOCK:  # after the database's lock: one order for everyone
        command.upgrade(alembic_config(conn), "head")
