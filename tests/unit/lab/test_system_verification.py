"""`make run`'s verification server: Airflow's `spark_local` connection names it, so the
`verify_replication` DAG runs its Spark job on it (the plugin reads the master from the
Spark provider's own hook)."""

from __future__ import annotations

from pathlib import Path

import pytest

from replicator.verification import is_remote
from replicator.verification.server import REMOTE_ENV, TOKEN_ENV, client_environment
from replicator_lab.system import SPARK_CONNECTION_ENV, EmbeddedSystem, SystemOptions


def _system(tmp_path: Path, port: int | None) -> EmbeddedSystem:
    options = SystemOptions(
        state_url=f"sqlite:///{tmp_path}/state.db", work_dir=tmp_path, verification_port=port
    )
    return EmbeddedSystem(None, options)  # type: ignore[arg-type]


def test_the_verify_dag_runs_on_the_systems_verification_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from replicator_airflow.verification import SPARK_CONN_ID, spark_master  # noqa: PLC0415

    system = _system(tmp_path, 15123)
    assert system.verification_url == "sc://localhost:15123"
    connection = system._airflow_env()[SPARK_CONNECTION_ENV]
    monkeypatch.setenv(f"AIRFLOW_CONN_{SPARK_CONN_ID.upper()}", connection)
    master = spark_master()
    assert is_remote(master) and master == system.verification_url
    # The tasks hold the server's token: the job's client sends it.
    monkeypatch.setenv(TOKEN_ENV, system._airflow_env()[TOKEN_ENV])
    sent = client_environment(master)[REMOTE_ENV]
    assert sent == f"{master}/;token={system._airflow_env()[TOKEN_ENV]}"


def test_without_a_server_airflow_keeps_its_local_spark(tmp_path: Path) -> None:
    system = _system(tmp_path, None)
    assert system.verification_url is None
    assert SPARK_CONNECTION_ENV not in system._airflow_env()
    assert system.problems() == []
