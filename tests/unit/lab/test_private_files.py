"""Secret files are their owner's only from creation, and an existing one is tightened
(issue 26, point 8): the Airflow password file, `airflow.db`, and what `write_private`
writes (the PostgreSQL password file). Each test runs under umask 000, so that the
modes come from the code, not from the umask of whoever runs the tests."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from replicator_lab.airflow import PASSWORD_FILE, AirflowStandalone
from replicator_lab.private import (
    ensure_private_file,
    private_dir,
    private_umask,
    write_private,
)


@pytest.fixture(autouse=True)
def open_umask() -> Iterator[None]:
    before = os.umask(0)
    try:
        yield
    finally:
        os.umask(before)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_write_private_creates_0600_and_tightens_an_existing_file(tmp_path: Path) -> None:
    new = tmp_path / "new"
    write_private(new, "s3cret")
    assert (_mode(new), new.read_text()) == (0o600, "s3cret")

    existing = tmp_path / "existing"
    existing.write_text("old and long content")
    existing.chmod(0o644)
    write_private(existing, "s3cret")
    assert (_mode(existing), existing.read_text()) == (0o600, "s3cret")


def test_write_private_refuses_to_follow_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("untouched")
    (tmp_path / "link").symlink_to(target)

    with pytest.raises(OSError):
        write_private(tmp_path / "link", "s3cret")
    assert target.read_text() == "untouched"


def test_ensure_private_file_keeps_the_content_and_tightens(tmp_path: Path) -> None:
    db = tmp_path / "airflow.db"
    ensure_private_file(db)
    assert (_mode(db), db.read_bytes()) == (0o600, b"")

    db.write_bytes(b"SQLite format 3\x00")
    db.chmod(0o644)
    ensure_private_file(db)
    assert (_mode(db), db.read_bytes()) == (0o600, b"SQLite format 3\x00")


def test_private_folders_and_umask(tmp_path: Path) -> None:
    made = private_dir(tmp_path / ".data" / "stack")
    assert _mode(tmp_path / ".data") == _mode(made) == 0o700
    with private_umask():
        (made / "file").write_text("x")
        (made / "folder").mkdir()
    assert (_mode(made / "file"), _mode(made / "folder")) == (0o600, 0o700)
    assert os.umask(0) == 0, "the umask is restored after the block"


def test_airflow_home_password_file_and_db_are_private_from_the_start(tmp_path: Path) -> None:
    home = tmp_path / ".data" / "airflow"
    airflow = AirflowStandalone(home, dag_ids=[], password="s3cret-admin")

    airflow.prepare_home()

    assert _mode(home) == _mode(home.parent) == 0o700
    assert _mode(home / PASSWORD_FILE) == 0o600
    assert _mode(home / "airflow.db") == 0o600
    assert "s3cret-admin" in (home / PASSWORD_FILE).read_text()


def test_airflow_files_an_older_version_left_readable_are_tightened(tmp_path: Path) -> None:
    home = tmp_path / "airflow"
    home.mkdir()
    (home / PASSWORD_FILE).write_text('{"admin": "kept"}')
    (home / "airflow.db").write_bytes(b"SQLite format 3\x00")
    for name in (PASSWORD_FILE, "airflow.db"):
        (home / name).chmod(0o644)

    airflow = AirflowStandalone(home, dag_ids=[])
    airflow.prepare_home()

    assert airflow.password == "kept"
    assert _mode(home / PASSWORD_FILE) == _mode(home / "airflow.db") == 0o600
    assert (home / "airflow.db").read_bytes() == b"SQLite format 3\x00"
