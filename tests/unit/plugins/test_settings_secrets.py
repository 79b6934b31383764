"""The replicator's Airflow settings never show the state store's password (issue 26,
point 8): it is in the URL the connection gives (its password field set into the URL)."""

from __future__ import annotations

import json
import traceback
from pathlib import Path

import pytest

from replicator.errors import ReplicatorError

PASSWORD = "pg-s3cret-pw"


def test_replicator_settings_never_show_the_state_stores_password(
    airflow_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Late import: Airflow reads its settings at import, after `airflow_home` set them.
    from replicator_airflow.hooks import ReplicatorHook  # noqa: PLC0415

    extra = {
        "config": str(tmp_path / "missing.properties"),
        "state_url": "postgresql+psycopg://dr@db.example:5432/dr_state",
    }
    connection = {"conn_type": "replicator", "password": PASSWORD, "extra": extra}
    monkeypatch.setenv("AIRFLOW_CONN_REPLICATOR_SECRETTEST", json.dumps(connection))

    settings = ReplicatorHook("replicator_secrettest").settings()

    assert settings.state_url is not None and PASSWORD in settings.state_url
    for shown in (repr(settings), str(settings), f"{settings!r}", repr([settings])):
        assert PASSWORD not in shown
    with pytest.raises(ReplicatorError) as error:
        settings.load_config()  # the configuration it names does not exist
    assert PASSWORD not in "".join(traceback.format_exception(error.value))
