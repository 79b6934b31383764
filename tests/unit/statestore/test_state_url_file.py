"""`$REPLICATOR_STATE_URL_FILE`: the state store's URL from a file (a Docker secret, a
Kubernetes Secret's volume), so that its password is not in the environment, where
`docker inspect` and `/proc/*/environ` show it."""

from __future__ import annotations

from pathlib import Path

import pytest

from replicator.statestore import STATE_URL_ENV, STATE_URL_FILE_ENV, StateStore, default_state_url
from replicator.statestore.errors import StateStoreError


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STATE_URL_ENV, raising=False)
    monkeypatch.delenv(STATE_URL_FILE_ENV, raising=False)


def test_the_url_is_read_from_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = tmp_path / "state_url"
    secret.write_text(f"sqlite:///{tmp_path / 'state.db'}\n")
    monkeypatch.setenv(STATE_URL_FILE_ENV, str(secret))
    assert default_state_url() == f"sqlite:///{tmp_path / 'state.db'}"
    StateStore().applications.register("orders", "primary")
    assert (tmp_path / "state.db").is_file()


def test_both_variables_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STATE_URL_ENV, "sqlite:///x.db")
    monkeypatch.setenv(STATE_URL_FILE_ENV, str(tmp_path / "state_url"))
    with pytest.raises(StateStoreError, match="set only one"):
        default_state_url()


def test_a_missing_file_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "nowhere" / "state_url"
    monkeypatch.setenv(STATE_URL_FILE_ENV, str(missing))
    with pytest.raises(StateStoreError, match="which cannot be read"):
        default_state_url()


def test_an_empty_file_is_named_and_a_bad_url_is_not_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "state_url"
    secret.write_text("\n")
    monkeypatch.setenv(STATE_URL_FILE_ENV, str(secret))
    with pytest.raises(StateStoreError, match="is empty"):
        default_state_url()
    secret.write_text("postgresql+psycopg://replicator:s3cret-pw@db:notaport/replicator\n")
    with pytest.raises(StateStoreError) as refused:
        StateStore()
    assert "s3cret-pw" not in str(refused.value)
