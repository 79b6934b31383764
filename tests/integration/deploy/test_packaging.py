"""Installable outside a checkout (issue 15 item 4): the project's wheel, installed with
its extras into a fresh virtual environment at the versions of requirements.lock, works
from a working directory that is not the checkout, with nothing of the checkout on the
path:

- `replicator --help` runs (every runtime dependency is declared) and the four packages
  (`replicator`, `replicator_airflow`, `replicator_spark`, `replicator_expectations`)
  come from the environment, not from the checkout;
- `replicator.verification.job` finds the Spark job in the installed `replicator_spark`
  and zips the executors' packages for `--py-files`;
- the GX suites run as `replicator verify` runs them (`python -m`) over a run's tables
  and write Data Docs;
- Airflow's own plugins manager registers the DR status plugin once, from the
  `airflow.plugins` entry point, with an empty plugins folder, and its providers manager
  lists the `replicator` connection type with its form's fields.

The environment is made with uv from its cache (`uv venv`, `uv pip install WHEEL[extras]
-c requirements.lock`), so the test needs the package index only for what the cache
lacks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers.data_docs import write_tables

# The module fixture builds the wheel (the data plane with cargo) and installs it with
# every extra into a fresh environment: minutes on a machine busy with the whole suite.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[3]
EXTRAS = "airflow,spark,gx,postgres,docker,kubernetes"
PACKAGES = ("replicator", "replicator_airflow", "replicator_spark", "replicator_expectations")
_INSTALL_TIMEOUT_S = 1200.0
_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Installed:
    """The fresh environment, a working directory outside the checkout, their env."""

    python: Path
    cwd: Path
    env: dict[str, str]
    wheel: Path

    def run(self, *args: str | Path, timeout: float = _TIMEOUT_S) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(arg) for arg in args],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def python_json(self, script: str) -> dict:
        """Run `script` with the environment's Python; the JSON it prints last."""
        result = self.run(self.python, "-c", textwrap.dedent(script))
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
        return json.loads(result.stdout.strip().splitlines()[-1])


def _checked(command: list[str | Path], cwd: Path, timeout: float = _INSTALL_TIMEOUT_S) -> None:
    result = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, f"{command} exited {result.returncode}:\n{result.stderr[-4000:]}"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    work = tmp_path_factory.mktemp("packaging")
    dist = work / "dist"
    _checked([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", dist, ROOT], work)
    (wheel,) = dist.glob("replicator-*.whl")
    venv = work / "venv"
    uv = Path(sys.executable).with_name("uv")
    _checked([uv, "venv", "-q", "--python", sys.executable, venv], work)
    python = venv / "bin" / "python"
    lock = ROOT / "requirements.lock"
    _checked(
        [uv, "pip", "install", "-q", "--python", python, f"{wheel}[{EXTRAS}]", "-c", lock], work
    )
    _checked([uv, "pip", "check", "-q", "--python", python], work)
    elsewhere = work / "elsewhere"
    (elsewhere / "plugins").mkdir(parents=True)
    env = {
        "PATH": f"{venv / 'bin'}{os.pathsep}/usr/bin:/bin",
        "HOME": str(elsewhere),
        "LANG": "C.UTF-8",
        "AIRFLOW_HOME": str(elsewhere / "airflow"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(elsewhere / "plugins"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(elsewhere / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    }
    return Installed(python, elsewhere, env, wheel)


def test_the_cli_runs_from_the_installed_packages(installed: Installed) -> None:
    result = installed.run("replicator", "--help")
    assert result.returncode == 0, result.stderr[-4000:]
    assert "usage: replicator" in result.stdout.lower()  # typer writes "Usage:"
    files = installed.python_json(
        f"""
        import importlib, json
        print(json.dumps({{p: importlib.import_module(p).__file__ for p in {PACKAGES!r}}}))
        """
    )
    site = installed.python.parent.parent
    for package, file in files.items():
        assert Path(file).is_relative_to(site), f"{package} imported from {file}, not {site}"


def test_the_wheel_holds_no_part_of_the_lab(installed: Installed) -> None:
    """The local stack (lab/replicator_lab: brokers, PostgreSQL, Airflow standalone, the
    demo) is not in the product's wheel: no module of it, no `replicator stack` command,
    and the installed product imports without it."""
    names = zipfile.ZipFile(installed.wheel).namelist()
    lab = [n for n in names if n.startswith(("replicator_lab/", "replicator/localstack/"))]
    assert lab == [], lab
    assert not [n for n in names if n.split("/")[0] not in (*PACKAGES, "")
                and not n.split("/")[0].endswith((".dist-info", ".data"))], names  # fmt: skip
    result = installed.run("replicator", "stack", "--help")
    assert result.returncode == 2 and "No such command 'stack'" in result.stderr, result
    found = installed.python_json(
        """
        import importlib.util, json
        print(json.dumps({"lab": importlib.util.find_spec("replicator_lab") is not None}))
        """
    )
    assert found == {"lab": False}


def test_the_data_plane_is_in_the_wheel_and_chosen(installed: Installed) -> None:
    """The wheel carries the compiled data plane (built with cargo), and the installed
    engine takes it for a flow in the default mode, from outside the checkout."""
    found = installed.python_json(
        """
        import json
        from replicator import _dataplane
        from replicator.config import load_config
        from replicator.engine import data_path
        config = load_config({"clusters": "a, b", "a.bootstrap.servers": "localhost:1",
                              "b.bootstrap.servers": "localhost:2", "a->b.enabled": "true"})
        print(json.dumps({"file": _dataplane.__file__,
                          "path": data_path.choose(config.flow("a->b")).path}))
        """
    )
    assert Path(found["file"]).is_relative_to(installed.python.parent.parent), found
    assert found["path"] == "compiled", found


def test_the_spark_job_is_found_in_the_installed_package(installed: Installed) -> None:
    found = installed.python_json(
        """
        import json, pathlib, tempfile
        from replicator.verification.job import py_files, spark_application
        archive = py_files(pathlib.Path(tempfile.mkdtemp()))
        print(json.dumps({"job": str(spark_application()), "py_files": str(archive)}))
        """
    )
    job = Path(found["job"])
    assert job.is_file()
    assert job.is_relative_to(installed.python.parent.parent), job
    assert job.parts[-2:] == ("replicator_spark", "verify.py")
    names = zipfile.ZipFile(found["py_files"]).namelist()
    assert "replicator/engine/formats.py" in names
    assert "replicator_spark/verify.py" in names


def test_the_suites_run_and_write_data_docs(installed: Installed) -> None:
    run = installed.cwd / "run=1"
    write_tables(run, "orders")
    result = installed.run(
        installed.python, "-m", "replicator_expectations.report",
        "--results", run, "--gx-root", run / "gx",
    )  # fmt: skip
    # The helper's tables have one partition lagging beyond the threshold: exit 1.
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-4000:]
    summary = json.loads((run / "summary.json").read_text())
    assert set(summary["suites"]) == {"parity", "faults", "mappings", "digests", "samples", "lag"}
    assert [name for name, suite in summary["suites"].items() if suite["failed"]] == ["lag"]
    assert Path(summary["data_docs"]).is_file()


def test_airflow_finds_the_plugin_and_the_connection_type(installed: Installed) -> None:
    found = installed.python_json(
        """
        import json
        from airflow import plugins_manager
        from airflow.providers_manager import ProvidersManager
        plugins, errors = plugins_manager._get_plugins()
        providers = ProvidersManager()
        hook = providers.hooks["replicator"]
        print(json.dumps({
            "plugins": [(p.name, str(p.source)) for p in plugins],
            "errors": errors,
            "hook": hook.hook_class_name,
            "package": hook.package_name,
            "fields": sorted(
                k for k in providers.connection_form_widgets if k.startswith("extra__replicator")
            ),
            "behaviour": providers.field_behaviours.get("replicator"),
        }))
        """
    )
    assert found["errors"] == {}
    assert [name for name, _ in found["plugins"]] == ["replicator_dr"]
    assert "replicator_airflow.dr_status_plugin" in found["plugins"][0][1]
    assert found["hook"] == "replicator_airflow.hooks.ReplicatorHook"
    assert found["package"] == "replicator"
    assert found["fields"] == ["extra__replicator__config", "extra__replicator__state_url"]
    assert "host" in found["behaviour"]["hidden_fields"]
    assert found["behaviour"]["relabeling"] == {"password": "State store password"}
