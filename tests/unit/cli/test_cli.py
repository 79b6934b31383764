"""The `replicator` command on typer (issue 30): options as before, `-o
table|json|yaml`, exit statuses 0/1/2, defaults from the environment, and no silent
SQLite state store outside a checkout. Commands that need no cluster; those that do
are tested against real brokers under tests/integration."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
import yaml

from replicator.cli import main
from replicator.cli.output import Output
from replicator.cli.progress import steps_of, tracked
from replicator.procedures.steps import Procedure, Step
from replicator.statestore import StateStore

ROOT = Path(__file__).resolve().parents[3]
LOCAL = ROOT / "include" / "config" / "local.properties"
ENVIRONMENT = ("REPLICATOR_CONFIG", "REPLICATOR_STATE_URL", "REPLICATOR_STATE_URL_FILE")


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "1000")  # rich's error panel: one line per message


def _usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    return " ".join(capsys.readouterr().err.replace("│", " ").split())


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert "No such command 'nope'" in _usage_error(["nope"], capsys)
    assert "No such option: --nope" in _usage_error(["history", "--nope"], capsys)
    assert "Missing option '--config'" in _usage_error(["acls", "plan"], capsys)
    assert "REPLICATOR_CONFIG" in _usage_error(["status"], capsys)
    err = _usage_error(["history", "-o", "xml"], capsys)
    assert "'xml' is not one of 'table', 'json', 'yaml'" in err
    err = _usage_error(["acls", "plan", "--config", str(LOCAL), "--json", "-o", "yaml"], capsys)
    assert "--json and -o yaml ask for two formats" in err
    err = _usage_error(["history", "--log-format", "xml"], capsys)
    assert "the log format is one of text, json" in err
    err = _usage_error(["stack", "up", "--cluster", "primary"], capsys)
    assert "'primary' is not NAME=PORT" in err
    err = _usage_error(["verify", "orders", "--config", str(LOCAL)], capsys)
    assert "unexpected arguments orders" in err  # `--topics a b` takes several
    err = _usage_error(["migrate", "--config", str(LOCAL)], capsys)
    assert "give exactly one of --from-mm2 and --to-mm2" in err


def test_help_exits_0_and_names_the_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--help"], ["flows", "-h"], ["diagnose", "--help"]):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Exit status: 0 the verdict is 'replicated'; 1 the verdict is 'not replicated'" in out
    assert "--output -o" in out and "--json" not in out  # deprecated: hidden, still taken


def test_a_failure_exits_1_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.properties"
    assert main(["acls", "plan", "--config", str(missing)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("replicator: error: ") and str(missing) in err
    assert len(err.strip().splitlines()) == 1


def test_config_defaults_to_replicator_config(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("REPLICATOR_CONFIG", str(LOCAL))
    assert main(["acls", "plan"]) == 0
    table = capsys.readouterr().out
    assert main(["acls", "plan", "--config", str(LOCAL)]) == 0
    assert capsys.readouterr().out == table and " demo. (prefixed)" in table


def test_json_yaml_and_the_json_alias_hold_the_same_data(
    capsys: pytest.CaptureFixture[str],
) -> None:
    plan = ["acls", "plan", "--config", str(LOCAL)]
    assert main([*plan, "-o", "json"]) == 0
    as_json = json.loads(capsys.readouterr().out)
    assert main([*plan, "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == as_json  # stdout as before: what scripts parse
    assert err == "replicator: warning: --json is deprecated: use -o json\n"
    assert main([*plan, "--output", "yaml"]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == as_json
    assert {"cluster", "principal", "operation", "why"} <= set(as_json[0])


def test_state_store_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path / 'state.db'}"
    monkeypatch.setenv("REPLICATOR_STATE_URL", url)
    assert main(["clients", "register", "orders", "--cluster", "primary"]) == 0
    assert "orders is registered, active on primary (epoch 0)" in capsys.readouterr().out
    monkeypatch.delenv("REPLICATOR_STATE_URL")
    secret = tmp_path / "state_url"
    secret.write_text(url + "\n")
    monkeypatch.setenv("REPLICATOR_STATE_URL_FILE", str(secret))
    assert main(["clients", "list", "-o", "yaml"]) == 0
    [listed] = yaml.safe_load(capsys.readouterr().out)
    assert (listed["name"], listed["active_cluster"], listed["clients"]) == (
        "orders",
        "primary",
        [],
    )
    assert main(["history", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert not (tmp_path / ".data").exists()


def test_no_silent_sqlite_outside_a_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    err = _usage_error(["history"], capsys)
    assert f"{tmp_path} is not a checkout of the project and has no .data folder" in err
    for named in ("--state-url", "REPLICATOR_STATE_URL", "REPLICATOR_STATE_URL_FILE"):
        assert named in err
    assert not (tmp_path / ".data").exists()


def test_sqlite_in_a_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'replicator'\n")
    (tmp_path / "replicator").mkdir()
    (tmp_path / "replicator" / "__init__.py").write_text("")
    monkeypatch.chdir(tmp_path)
    assert main(["history"]) == 0
    assert "no runs recorded" in capsys.readouterr().out
    assert (tmp_path / ".data" / "state" / "replicator.db").is_file()


def test_sqlite_in_a_folder_made_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Helm chart's pods without a state store URL: an emptyDir at .data."""
    (tmp_path / ".data").mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["history", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_log_format_after_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("REPLICATOR_STATE_URL", f"sqlite:///{tmp_path / 'state.db'}")
    assert main(["history", "--log-format", "json", "-v"]) == 0
    assert main(["--log-format", "json", "history"]) == 0
    assert "no runs recorded" in capsys.readouterr().out


def test_no_progress_into_json_or_a_pipe(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert list(tracked(["a", "b"], "flows", "flows")) == ["a", "b"]  # stderr is no terminal
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert list(tracked(["a", "b"], "flows", "flows", Output.json)) == ["a", "b"]
    assert list(tracked(["a", "b"], "flows", "flows", Output.yaml)) == ["a", "b"]
    assert capsys.readouterr() == ("", "")


def test_progress_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert list(tracked(["a", "b", "c"], "verifying", "flows")) == ["a", "b", "c"]
    err = capsys.readouterr().err
    assert "verifying" in err and "flows/min" in err and "ETA" in err


def test_shell_completion(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--show-completion", "bash"])
    assert exited.value.code == 0
    assert "_REPLICATOR_COMPLETE=complete_bash" in capsys.readouterr().out


def test_flows_of_an_unreachable_target_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No broker listens on port 9: the flow is listed from the configuration, with
    why its figures are missing. (tests/integration/cli has the live flow.)"""
    config = tmp_path / "mm2.properties"
    config.write_text(
        "clusters = primary, dr\nprimary.bootstrap.servers = 127.0.0.1:9\n"
        "dr.bootstrap.servers = 127.0.0.1:9\nprimary->dr.enabled = true\n"
        "primary->dr.topics = orders.*\nprimary->dr.tasks.max = 3\n"
    )
    monkeypatch.setenv("REPLICATOR_CONFIG", str(config))
    monkeypatch.setenv("REPLICATOR_STATE_URL", f"sqlite:///{tmp_path / 'state.db'}")
    assert main(["flows", "list", "-o", "json"]) == 1
    [flow] = json.loads(capsys.readouterr().out)["flows"]
    assert (flow["name"], flow["topics"]["include"], flow["tasks_max"]) == (
        "primary->dr",
        ["orders.*"],
        3,
    )
    assert flow["desired_state"] == "running"
    assert flow["error"] == "target cluster 'dr' is unreachable"
    assert main(["flows", "describe", "primary->dr"]) == 1
    out = capsys.readouterr().out
    assert "FINDING: target cluster 'dr' is unreachable" in out
    assert "orders.*" in out and "127.0.0.1:9" in out
    # The same flow, as every other command takes it, and in its shell-safe form.
    assert main(["flows", "describe", "--flow", "primary:dr"]) == 1
    assert "FINDING: target cluster 'dr' is unreachable" in capsys.readouterr().out
    with pytest.raises(SystemExit) as twice:
        main(["flows", "describe", "primary:dr", "--flow", "primary:dr"])
    assert twice.value.code == 2


class _Slow(Procedure):
    """Three steps of 0.6 s each, without clusters."""

    kind = "slow"
    recovery_step = "second"

    def steps(self) -> list[Step]:
        return [Step(name, self._wait) for name in ("first", "second", "third")]

    def _wait(self) -> dict[str, object]:
        time.sleep(0.6)
        return {}

    def params(self) -> dict[str, object]:
        return {}

    def flow_name(self) -> str | None:
        return "a->b"

    def mode(self) -> str | None:
        return None

    def rpo(self) -> int | None:
        return 0


def test_a_procedure_shows_its_steps_on_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setenv("FORCE_COLOR", "1")
    store = StateStore(f"sqlite:///{tmp_path / 'state.db'}")
    procedure = _Slow(store)
    with steps_of(procedure, store.runs, "slow a->b"):
        report = procedure.run("slow-1")
    assert report.outcome == "succeeded"
    err = capsys.readouterr().err
    assert "slow a->b: second" in err and "steps/min" in err and "/3" in err
    with steps_of(procedure, store.runs, "slow a->b", Output.json):
        procedure.run("slow-2")
    assert capsys.readouterr().err == ""
    store.close()


def test_a_state_store_password_never_reaches_the_output(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = "postgresql+psycopg://replicator:s3cret-pw@127.0.0.1:9/replicator"
    assert main(["history", "--state-url", url]) == 1
    out, err = capsys.readouterr()
    assert err.startswith("replicator: error: ") and "127.0.0.1:9" in err
    assert "s3cret-pw" not in out + err
