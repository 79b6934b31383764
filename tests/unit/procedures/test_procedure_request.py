"""What a DAG run asks a procedure for (no Kafka): the connection's secrets travel with
the request, never from its params and never shown."""

from __future__ import annotations

from dataclasses import replace

from replicator.procedures import ProcedureRequest


def test_the_connections_secrets_come_from_no_param_and_are_never_shown() -> None:
    params = {"config": "/etc/mm2.properties", "flow": "primary->dr", "connection": {"x": "y"}}
    request = ProcedureRequest.from_params("failover", params)
    assert request.connection == {}  # whoever triggers a DAG does not choose credentials
    request = replace(request, connection={"password": "pw-from-the-connection"})
    assert "pw-from-the-connection" not in repr(request)
