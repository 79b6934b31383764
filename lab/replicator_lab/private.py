"""Files and folders only their owner may read: passwords, metadata DBs, `.data`.

A secret file is created with mode 0600 (`os.open` with the mode, so it is never
readable by others, not even between its creation and a chmod) and one that already
exists is tightened to 0600 before it is written. The local stack creates `.data`
and what it starts writes there under umask 077 (`private_umask`): folders 0700,
files 0600, whoever writes them (brokers, Airflow, the replicator).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: Owner only: what `.data` is created under, and what its children inherit.
PRIVATE_UMASK = 0o077
PRIVATE_FILE_MODE = 0o600


def write_private(path: Path, data: str | bytes) -> None:
    """Write `data` to `path`, mode 0600 from creation (an existing file is tightened
    to 0600 first). A symlink at `path` is refused rather than followed."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, PRIVATE_FILE_MODE)
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)  # an existing file keeps its mode through O_CREAT
        with os.fdopen(fd, "wb") as out:
            fd = -1
            out.write(raw)
    finally:
        if fd != -1:
            os.close(fd)


def ensure_private_file(path: Path) -> None:
    """Create `path` empty with mode 0600 if missing, else tighten it to 0600; for a
    file another program fills (Airflow's `airflow.db`: SQLite gives its journal and
    WAL files the database file's mode)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, PRIVATE_FILE_MODE)
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)
    finally:
        os.close(fd)


@contextmanager
def private_umask() -> Iterator[None]:
    """Run the block under umask 077: the folders it creates are 0700, its files 0600,
    and the processes it starts inherit the umask. Process-wide while it lasts."""
    before = os.umask(PRIVATE_UMASK)
    try:
        yield
    finally:
        os.umask(before)


def private_dir(path: Path) -> Path:
    """Create `path` and its missing parents with mode 0700 (an existing folder is
    left as it is); returns `path`."""
    with private_umask():
        path.mkdir(parents=True, exist_ok=True)
    return path
