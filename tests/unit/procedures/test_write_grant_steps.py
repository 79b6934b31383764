"""The `grant_write` / `revoke_write` steps as the DAGs' params and the CLI ask for them
(no cluster: building a procedure reads only the configuration and the state store)."""

from __future__ import annotations

from pathlib import Path

import pytest

from replicator.cli import main
from replicator.errors import ConfigError
from replicator.procedures.orchestration import ProcedureRequest, build

CONFIG = """\
clusters = primary, dr
primary.bootstrap.servers = 127.0.0.1:1
dr.bootstrap.servers = 127.0.0.1:2
primary->dr.enabled = true
dr->primary.enabled = true
topics = orders
applications.orders.producer.principals = User:orders-app
"""


@pytest.fixture
def params(tmp_path: Path) -> dict[str, object]:
    config = tmp_path / "mm2.properties"
    config.write_text(CONFIG)
    return {
        "config": str(config),
        "flow": "primary->dr",
        "applications": ["orders"],
        "state_url": f"sqlite:///{tmp_path / 'state.db'}",
    }


def _steps(kind: str, params: dict[str, object]) -> list[str]:
    procedure = build(ProcedureRequest.from_params(kind, params))  # type: ignore[arg-type]
    return [step.name for step in procedure.steps()]


def test_grant_write_is_a_step_just_before_the_switch_only_when_asked(
    params: dict[str, object],
) -> None:
    assert "grant_write" not in _steps("failover", params)
    for mode in ("planned", "unplanned"):
        steps = _steps("failover", {**params, "grant_write": True, "mode": mode})
        assert steps.index("grant_write") == steps.index("switch") - 1
    procedure = build(ProcedureRequest.from_params("failover", {**params, "grant_write": True}))
    assert procedure.params()["grant_write"] is True


def test_revoke_write_follows_the_failbacks_switch_unless_kept(params: dict[str, object]) -> None:
    steps = _steps("failback", params)
    assert steps.index("revoke_write") == steps.index("switch") + 1
    assert "revoke_write" not in _steps("failback", {**params, "revoke_write": False})


def test_grant_write_for_an_application_without_producers_stops_before_anything_runs(
    params: dict[str, object],
) -> None:
    with pytest.raises(ConfigError, match=r"applications\.billing\.producer\.principals"):
        build(
            ProcedureRequest.from_params(
                "failover", {**params, "applications": ["billing"], "grant_write": True}
            )
        )


def test_the_cli_takes_grant_write_and_keep_write(
    params: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["--config", str(params["config"]), "--flow", "primary->dr", "--app", "billing"]
    common += ["--state-url", str(params["state_url"])]
    assert main(["failover", *common, "--grant-write", "--dry-run"]) != 0
    assert "applications.billing.producer.principals is not set" in capsys.readouterr().err
    for command, option in (("failover", "--grant-write"), ("failback", "--keep-write")):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert option in capsys.readouterr().out
