"""A worker the launcher starts (as the supervisor does from an Airflow task) gets a
minimal environment, not its starter's (issue 26, point 8): PATH, HOME, LANG, the
REPLICATOR_* variables and those its configuration reads, nothing of Airflow's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from replicator.operations.launchers import LocalProcessLauncher
from replicator.statestore import STATE_URL_ENV

from helpers.kafka import create_topic, unique_topic
from helpers.replication import end_offsets, preload, wait_until, write_config

#: What an Airflow task's environment holds besides ours (the metadata DB's URL with its
#: password, the API's signing key, a connection with its password).
AIRFLOW_TASK_ENV = {
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": "postgresql://airflow:db-s3cret@db/airflow",
    "AIRFLOW__API_AUTH__JWT_SECRET": "jwt-s3cret",
    "AIRFLOW_CONN_REPLICATOR_DEFAULT": '{"conn_type": "replicator", "password": "conn-s3cret"}',
    "AIRFLOW_CTX_DAG_ID": "replicator_supervisor",
    "SOME_OTHER_TOKEN": "other-s3cret",
}


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(entry.decode().partition("=")[::2] for entry in raw.split(b"\0") if entry)


def test_a_restarted_worker_gets_a_minimal_environment(
    primary: str, dr: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = unique_topic("env")
    create_topic(primary, topic)
    # The flow's topics come from the environment: a variable the configuration reads.
    config = write_config(tmp_path, primary, dr, "${env:DR_TEST_TOPICS}")
    for name, value in {**AIRFLOW_TASK_ENV, "DR_TEST_TOPICS": topic}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("REPLICATOR_RUN_DIR", str(tmp_path / "replicators"))
    state_url = f"sqlite:///{tmp_path / 'state.db'}"
    launcher = LocalProcessLauncher(tmp_path / "replicators", state_url=state_url)

    started = launcher.start("env-worker", config)
    try:
        env = _environ(int(started.where.removeprefix("pid ")))
        # It runs on that environment: the flow it read from it replicates.
        preload(primary, topic, 50, 1)
        wait_until(lambda: end_offsets(dr, f"primary.{topic}", 1) == [50], 120, "the records on dr")
        assert launcher.alive("env-worker")
    finally:
        launcher.stop("env-worker")

    expected = {"PATH", "HOME", "LANG", "DR_TEST_TOPICS", STATE_URL_ENV}
    expected |= {name for name in os.environ if name.startswith("REPLICATOR_")}
    assert set(env) == {name for name in expected if name in os.environ or name == STATE_URL_ENV}
    assert env["DR_TEST_TOPICS"] == topic
    assert env[STATE_URL_ENV] == state_url
    assert env["PATH"] == os.environ["PATH"]
    assert not [name for name in env if name.startswith("AIRFLOW")]
    assert not [value for value in env.values() if "s3cret" in value]
