"""The database server's clock, for times that processes on different hosts compare.

`database.now()` is the clock of the process that writes a row; that is enough
for a time only that process reads back, but not for one another process
compares with its own clock: a client host 5 s behind would stamp its reports 5 s
in the past, and a fence would count it silent (so stopped) 5 s too early. The
clients' `last_seen` is therefore stamped with the server's clock at write
(`server_now()` as the value of an INSERT or UPDATE), and a fence compares it with
the server's clock read in the same query (`server_time(conn)`).

On PostgreSQL that is the server's `CURRENT_TIMESTAMP` (the start of the
transaction, in UTC); on SQLite, which has no server, the clock of the host that
holds the file (every process that opens it runs there: SQLite files are not
shared over the network).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, select
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement

from replicator.statestore.schema import UTCDateTime


class _ServerUTCNow(FunctionElement[datetime]):
    """The server's current time, as naive UTC (how `UTCDateTime` stores times)."""

    type = UTCDateTime()
    inherit_cache = True


@compiles(_ServerUTCNow)
def _default(element: _ServerUTCNow, compiler: Any, **kw: Any) -> str:
    return "(CURRENT_TIMESTAMP AT TIME ZONE 'UTC')"


@compiles(_ServerUTCNow, "sqlite")
def _sqlite(element: _ServerUTCNow, compiler: Any, **kw: Any) -> str:
    # Milliseconds padded to microseconds: the text SQLAlchemy stores a DateTime as.
    return "(strftime('%Y-%m-%d %H:%M:%f', 'now') || '000')"


def server_now() -> ColumnElement[datetime]:
    """The server's clock as an SQL expression, to stamp a row with (a test may
    replace this one function with a literal time)."""
    return _ServerUTCNow()


def server_time(conn: Connection) -> datetime:
    """What the server's clock says now (aware UTC), read on `conn`."""
    return conn.execute(select(server_now())).scalar_one()
