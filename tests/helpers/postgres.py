"""PostgreSQL for the state store's tests: one server per test session (Debian's
binaries, `make setup` installs them; data under the session's test data dir, on a
free loopback port, stopped at the end), and `backend_state_url`, a fixture that
runs a test once on SQLite and once on a fresh PostgreSQL database."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from replicator.localstack.postgres import LocalPostgres

from conftest import TEST_DATA_DIR
from helpers.kafka import free_port_pair

#: The state store's backends: SQLite (the default) and PostgreSQL (production).
BACKENDS = ("sqlite", "postgresql")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[LocalPostgres]:
    """The session's PostgreSQL server (throw-away: no fsync), with the same code a
    deployment that runs its own server uses."""
    server = LocalPostgres(TEST_DATA_DIR.resolve() / "postgres", free_port_pair(), durable=False)
    server.down(wipe=True)  # whatever an interrupted session left behind
    server.up(timeout=120)
    yield server
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
