"""The replicator's Airflow connection as the DAG tasks read it (no Kafka): where the
configuration and the state store are, and the secrets the configuration may take
from the connection (`${conn:password}`, `${conn:NAME}` from its extra's "secrets")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replicator.errors import ReplicatorError

_CONN_ID = "replicator_hooktest"


def _connection(monkeypatch: pytest.MonkeyPatch, **fields: Any) -> None:
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{_CONN_ID.upper()}", json.dumps({"conn_type": "replicator", **fields})
    )


def _scram(cluster: str, reference: str) -> list[str]:
    return [
        f"{cluster}.security.protocol = SASL_SSL",
        f"{cluster}.sasl.mechanism = SCRAM-SHA-512",
        f"{cluster}.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule "
        f'required username="replicator" password="{reference}";',
    ]


def test_the_configuration_takes_the_connections_password_and_its_extras_secrets(
    airflow_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Late import: Airflow reads its settings at import, after `airflow_home` set them.
    from replicator_airflow.hooks import ReplicatorHook  # noqa: PLC0415

    config = tmp_path / "mm2.properties"
    lines = ["clusters = primary, dr", "primary.bootstrap.servers = 127.0.0.1:9093"]
    lines += ["dr.bootstrap.servers = 127.0.0.1:9094", "primary->dr.enabled = true"]
    lines += _scram("primary", "${conn:password}") + _scram("dr", "${conn:dr_password}")
    config.write_text("\n".join(lines) + "\n")
    state = f"sqlite:///{tmp_path / 'state.db'}"
    extra = {"config": str(config), "state_url": state, "secrets": {"dr_password": "pw-of-dr"}}
    _connection(monkeypatch, password="pw-of-primary", extra=extra)

    settings = ReplicatorHook(_CONN_ID).settings()
    assert settings.secrets == {"password": "pw-of-primary", "dr_password": "pw-of-dr"}
    assert "pw-of" not in repr(settings)
    loaded = settings.load_config()
    assert loaded.clusters["primary"].consumer["sasl.password"] == "pw-of-primary"
    assert loaded.clusters["dr"].consumer["sasl.password"] == "pw-of-dr"
    assert "pw-of" not in repr(loaded)


@pytest.mark.parametrize(
    "secrets",
    [["pw-in-a-list"], {"dr_password": 12345678}, {"password": "pw-twice"}],
    ids=["not-an-object", "not-a-string", "password"],
)
def test_secrets_in_the_extra_of_the_wrong_form_are_refused_unshown(
    airflow_home: Path, monkeypatch: pytest.MonkeyPatch, secrets: object
) -> None:
    """The password is the password field's: one more in the extra would be ambiguous."""
    from replicator_airflow.hooks import ReplicatorHook  # noqa: PLC0415

    _connection(monkeypatch, extra={"config": "/etc/mm2.properties", "secrets": secrets})
    with pytest.raises(ReplicatorError) as refused:
        ReplicatorHook(_CONN_ID).settings()
    message = str(refused.value)
    assert f"connection {_CONN_ID!r}" in message and '"secrets"' in message
    assert "pw-" not in message and "12345678" not in message
