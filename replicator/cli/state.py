"""Which DR state store a command uses: `--state-url`, else `$REPLICATOR_STATE_URL`,
else the file `$REPLICATOR_STATE_URL_FILE` names (statestore.database decides
between those two), else the SQLite file `.data/state/replicator.db` that `make run`
and the tests use: only in a checkout of the project, or in a folder whose `.data`
was made for it (the Helm chart mounts an emptyDir there for a pod's own store).

Anywhere else a command would silently create an empty store in whatever folder it
was started from, and a failover would read no applications from it: so it stops
and says where it looked and how to name the store.
"""

from __future__ import annotations

import os
from pathlib import Path

from replicator.cli.app import usage_error
from replicator.statestore import STATE_URL_ENV, STATE_URL_FILE_ENV, default_state_url
from replicator.statestore.database import DEFAULT_STATE_PATH


def is_checkout(folder: Path) -> bool:
    """Whether `folder` is the top of a checkout of this project."""
    return (folder / "pyproject.toml").is_file() and (
        folder / "replicator" / "__init__.py"
    ).is_file()


def state_url(given: str | None) -> str:
    """The state store's URL for a command given `--state-url given` (or not)."""
    if given:
        return given
    if os.environ.get(STATE_URL_ENV) or os.environ.get(STATE_URL_FILE_ENV):
        return default_state_url()
    here = Path.cwd()
    if is_checkout(here) or (here / DEFAULT_STATE_PATH.parents[1]).is_dir():
        return default_state_url()
    raise usage_error(
        f"no DR state store named: looked at --state-url, ${STATE_URL_ENV} and "
        f"${STATE_URL_FILE_ENV} (none is set), and {here} is not a checkout of the "
        f"project and has no {DEFAULT_STATE_PATH.parents[1]} folder, where "
        f"{DEFAULT_STATE_PATH} would be used. Name the store: "
        f"export {STATE_URL_ENV}=postgresql+psycopg://USER@HOST:5432/replicator (or "
        "sqlite:////absolute/path/replicator.db), or put the URL in a file and export "
        f"{STATE_URL_FILE_ENV}=/path/to/that/file, or pass --state-url URL",
        "--state-url",
    )
