"""PostgreSQL for the state store's tests: one server per test session (Debian's
binaries, `make setup` installs them; data under the session's test data dir, on a
free loopback port, stopped at the end), and `backend_state_url`, a fixture that
runs a test once on SQLite and once on a fresh PostgreSQL database.

The server starts when the first test that needs it runs, whatever else the machine
is doing: under `make test` the other xdist worker may be building Docker images or
running Spark, and `initdb` (hundreds of round trips between initdb and a single-user
server) then takes many times as long as on an idle machine (1.6 s idle, 32-65 s with
16 CPU-bound processes on 2 cores, measured on a machine like CI's). So the start has a
budget of its own (`START_TIMEOUT_S`), not billed to the per-test timeout of the test
that happens to ask first: pytest-timeout's 300 s would otherwise end the start with
"Timeout (>300.0s)" and no reason, and pytest replays a session fixture's error to every
test that asks for it, so every PostgreSQL test of the worker errs. A port another
process takes before the server binds it is answered by a start on another port; a
failure shows the server's log.
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from replicator_lab.errors import StackError
from replicator_lab.postgres import LocalPostgres, PortTakenError

from helpers.kafka import free_port_pair
from helpers.session import TEST_DATA_DIR

#: The state store's backends: SQLite (the default) and PostgreSQL (production).
BACKENDS = ("sqlite", "postgresql")
#: initdb, then the server's start, each on a machine as loaded as `make test` makes it.
START_TIMEOUT_S = 300.0
#: Ports tried when another process takes the chosen one before the server binds it.
PORT_ATTEMPTS = 3


def start_test_server(
    root: Path,
    timeout: float = START_TIMEOUT_S,
    attempts: int = PORT_ATTEMPTS,
    choose_port: Callable[[], int] = free_port_pair,
) -> LocalPostgres:
    """A throw-away server (no fsync) under `root`, on a free port of this xdist
    worker's block: whatever an earlier session left there (a server still running, a
    stale `postmaster.pid`, a half-made cluster) is stopped and deleted first; a port
    taken before the server bound it is replaced by another, up to `attempts` ports."""
    LocalPostgres(root, 0).down(wipe=True)
    taken: list[str] = []
    for _ in range(attempts):
        server = LocalPostgres(root, choose_port(), durable=False)
        try:
            server.up(timeout=timeout)
        except PortTakenError as exc:
            taken.append(str(exc))
            continue
        return server
    raise StackError(
        f"PostgreSQL under {root} found its port taken {attempts} times:\n" + "\n".join(taken)
    )


@contextmanager
def not_billed_to_the_test(seconds: float) -> Iterator[None]:
    """Give the running test `seconds` more under pytest-timeout while the block
    runs, and its remaining time back after it: a session's server start (bounded
    by its own timeouts) is not the work of the test that asks for it first.
    pytest-timeout's signal method arms ITIMER_REAL in the main thread, where
    fixtures run; with no timer armed this does nothing."""
    remaining, interval = signal.getitimer(signal.ITIMER_REAL)
    if remaining > 0:
        signal.setitimer(signal.ITIMER_REAL, remaining + seconds, interval)
    try:
        yield
    finally:
        if remaining > 0:
            signal.setitimer(signal.ITIMER_REAL, remaining, interval)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[LocalPostgres]:
    """The session's PostgreSQL server (throw-away: no fsync), with the same code a
    deployment that runs its own server uses."""
    root = TEST_DATA_DIR.resolve() / "postgres"
    # initdb, then the start on up to PORT_ATTEMPTS ports, then stopping a late start.
    with not_billed_to_the_test(START_TIMEOUT_S * (PORT_ATTEMPTS + 1) + 120):
        server = start_test_server(root)
    yield server
    with not_billed_to_the_test(120):  # to the session's last test
        server.down()


@pytest.fixture(params=BACKENDS)
def backend_state_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A state store URL of the test's own: a SQLite file, or a new PostgreSQL database
    (dropped after the test)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'state.db'}"
        return
    server: LocalPostgres = request.getfixturevalue("postgres_server")
    database = f"test_{uuid.uuid4().hex[:12]}"
    yield server.create_database(database)
    server.drop_database(database)
