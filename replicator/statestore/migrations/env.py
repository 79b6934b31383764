"""Alembic's environment for the state store's schema.

The replicator runs the migrations itself (`replicator.statestore.migrate`, on a
store's first use) on the connection it puts in `config.attributes["connection"]`,
inside its own transaction and lock. The `alembic` command (developers writing a
new revision, see alembic.ini) connects to `$REPLICATOR_STATE_URL` instead.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine

from replicator.statestore.database import default_state_url
from replicator.statestore.migrate import VERSION_TABLE
from replicator.statestore.schema import metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        render_as_batch=True,  # ALTER TABLE on SQLite copies the table, as it must
        compare_type=True,
    )
    with context.begin_transaction():  # a no-op inside the replicator's own transaction
        context.run_migrations()


if context.is_offline_mode():
    raise SystemExit("the state store's migrations run against a database, not as SQL scripts")
_given = context.config.attributes.get("connection")
if _given is not None:
    _run(_given)
else:
    _engine = create_engine(default_state_url())
    try:
        with _engine.connect() as _connection:
            _run(_connection)
    finally:
        _engine.dispose()
