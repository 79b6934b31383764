"""What the local stack writes is its owner's only (issue 26, point 8): `.data` is made
under umask 077, and so is everything the brokers write in it; the PostgreSQL server's
password never stays in a file or shows in a repr."""

from __future__ import annotations

import shutil
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from replicator_lab import ClusterSpec, LocalStack
from replicator_lab.postgres import LocalPostgres
from replicator_lab.private import private_dir

from helpers.kafka import free_port_pair
from helpers.session import TEST_DATA_DIR


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_stack_makes_data_private_and_its_brokers_write_private_files(tmp_path: Path) -> None:
    data = tmp_path / ".data" / "stack"
    stack = LocalStack([ClusterSpec("private", free_port_pair())], data_dir=data)
    stack.up(timeout=120)
    try:
        assert _mode(tmp_path / ".data") == _mode(data) == 0o700
        assert _mode(data / "stack.json") == 0o600
        written = [path for path in data.rglob("*") if not path.is_symlink()]
        assert len(written) > 10, "the broker's config, storage and logs"
        readable = {str(p.relative_to(data)): oct(_mode(p)) for p in written if _mode(p) & 0o077}
        assert readable == {}, "files and folders others may read or enter"
    finally:
        stack.down(wipe=True)


@pytest.fixture
def root() -> Iterator[Path]:
    folder = TEST_DATA_DIR.resolve() / f"pg-{uuid.uuid4().hex[:8]}"
    yield folder
    LocalPostgres(folder, 0).down(wipe=True)


def test_a_server_with_a_password_keeps_it_out_of_files_and_reprs(root: Path) -> None:
    server = LocalPostgres(root, free_port_pair(), password="s3cret-pg", durable=False)
    server.up(timeout=300)

    assert "s3cret-pg" not in repr(server)
    assert not (root / ".initdb-password").exists(), "initdb's password file is deleted"
    engine = create_engine(server.url())
    with engine.connect() as conn:
        assert conn.execute(text("SELECT 1")).scalar() == 1
    engine.dispose()
    wrong = create_engine(make_url(server.url()).set(password="guess"))
    with pytest.raises(OperationalError, match="password authentication failed"):
        wrong.connect()
    wrong.dispose()


def test_postgres_starts_below_folders_made_private(root: Path) -> None:
    # .data made under umask 077 (0700): as root, the server runs as `postgres`, which
    # must still reach its folder (it may pass through, not list).
    private = private_dir(root / "made-private" / "stack")
    server = LocalPostgres(private / "postgres", free_port_pair(), durable=False)
    try:
        server.up(timeout=300)
        engine = create_engine(server.url())
        with engine.connect() as conn:
            assert conn.execute(text("SELECT 1")).scalar() == 1
        engine.dispose()
        assert not _mode(private) & 0o066, "nobody else may list or write it"
    finally:
        server.down(wipe=True)
        shutil.rmtree(root, ignore_errors=True)
