"""The verification DAG's Spark task before it submits (no Spark, no Kafka): secrets
the configuration takes from the connection never go where the Spark provider would
put them on spark-submit's command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replicator.errors import ReplicatorError


def test_conn_secrets_are_refused_for_masters_that_put_the_environment_on_the_command_line(
    airflow_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """YARN here (a Kubernetes master needs the kubernetes package to be resolved at all)."""
    # Late import: Airflow reads its settings at import, after `airflow_home` set them.
    from replicator_airflow.verification import VerificationSubmitOperator  # noqa: PLC0415

    config = tmp_path / "mm2.properties"
    config.write_text(
        "clusters = primary\nprimary.bootstrap.servers = 127.0.0.1:9093\n"
        "primary.ssl.key.password = ${conn:password}\n"
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_REPLICATOR_SUBMITTEST",
        json.dumps(
            {"conn_type": "replicator", "password": "pw-of-kafka", "extra": {"config": str(config)}}
        ),
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_SUBMITTEST", json.dumps({"conn_type": "spark", "host": "yarn"})
    )
    task = VerificationSubmitOperator(
        task_id="spark",
        run_directory=str(tmp_path),
        application=str(tmp_path / "verify.py"),
        conn_id="spark_submittest",
        replicator_conn_id="replicator_submittest",
    )
    with pytest.raises(ReplicatorError) as refused:
        task.execute({})  # type: ignore[arg-type]
    message = str(refused.value)
    assert "for master yarn the Spark provider puts that on the command line" in message
    assert "${file:...}" in message and "pw-of-kafka" not in message
    assert not task.env_vars
