"""The state store's URL may hold its password: the objects that carry it never show it,
nor do the errors raised from them (issue 26, point 8). No Kafka, no server."""

from __future__ import annotations

import traceback
from dataclasses import replace
from pathlib import Path

import pytest

from replicator.procedures import ProcedureRequest
from replicator.procedures.orchestration import build
from replicator_lab.postgres import LocalPostgres
from replicator_lab.system import SystemOptions

PASSWORD = "pg-s3cret-pw"
URL = f"postgresql+psycopg://dr:{PASSWORD}@127.0.0.1:1/dr_state"


def _shown(value: object) -> list[str]:
    return [repr(value), str(value), f"{value}", f"{value!r}", repr([value]), repr({"v": value})]


def _error_text(error: BaseException) -> str:
    return "".join(traceback.format_exception(error)) + repr(error)


def test_a_procedure_request_never_shows_the_state_stores_password() -> None:
    request = ProcedureRequest.from_params(
        "failover", {"config": "/etc/mm2.properties", "flow": "primary->dr", "state_url": URL}
    )

    assert request.state_url == URL, "it is still there for the procedure to use"
    for shown in _shown(request) + _shown(replace(request, dry_run=True)):
        assert PASSWORD not in shown


def test_errors_raised_from_a_request_never_show_the_password(tmp_path: Path) -> None:
    request = ProcedureRequest.from_params(
        "failover", {"config": str(tmp_path / "missing.properties"), "flow": "a->b"}
    )
    request = replace(request, state_url=URL)
    errors: list[BaseException] = []
    for attempt in (
        lambda: build(request),  # the configuration it names does not exist
        lambda: setattr(request, "state_url", "x"),  # frozen: FrozenInstanceError
        lambda: replace(request, no_such_field=1),
        lambda: ProcedureRequest(kind="failover", config="c", flow="a", state_url=URL, x=1),
    ):
        with pytest.raises(Exception) as caught:  # any error: none may show it
            attempt()
        errors.append(caught.value)

    assert len(errors) == 4
    for error in errors:
        assert PASSWORD not in _error_text(error)


def test_the_local_stacks_objects_never_show_a_password() -> None:
    options = SystemOptions(state_url=URL)
    server = LocalPostgres(Path("/nowhere"), 5432, password=PASSWORD)

    assert options.state_url == URL and server.password == PASSWORD
    for shown in _shown(options) + _shown(server):
        assert PASSWORD not in shown
