"""The compose files start the replicator workers after `replicator init` has finished,
whatever it found about clusters that did not answer (an outage of the primary is when
DR is needed: `--allow-unreachable` makes that exit 0, naming them), and not when it
failed for a real problem (exit 1: Compose's `service_completed_successfully`)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from replicator.cli.reference import help_text

ROOT = Path(__file__).resolve().parents[3]
GATE = {"replicator-init": {"condition": "service_completed_successfully"}}


def _services(path: str) -> dict[str, Any]:
    return yaml.safe_load((ROOT / path).read_text(encoding="utf-8"))["services"]


def test_base_file_runs_init_that_lets_the_workers_start_during_an_outage() -> None:
    services = _services("docker-compose.yml")
    init = services["replicator-init"]
    command = init["command"]
    assert command[:2] == ["replicator", "init"]
    assert "--allow-unreachable" in command
    assert command[command.index("--home") + 1] == "${REPLICATOR_HOME:-primary}"
    assert init["restart"] == "no"
    assert init["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    workers = services["replicator"]
    assert workers["depends_on"] == GATE
    assert workers["command"][:2] == ["replicator", "run"]
    # The option the file passes is one `replicator init` has, with the exit statuses.
    help_ = " ".join(help_text(["init"]).split())
    assert "--allow-unreachable" in help_
    assert "3 partial: some clusters did not answer" in help_


def test_overlays_keep_the_gate() -> None:
    # Your own clusters: the base file's init command and gate, with the mounts.
    external = _services("deploy/compose/external.yml")
    assert "command" not in external["replicator-init"]
    assert "depends_on" not in external["replicator-init"]
    assert "depends_on" not in external["replicator"]
    # The demo's own clusters: its init is `replicator stack prepare` once both brokers
    # are healthy (no outage to ride out), and what needs it waits for it to succeed.
    demo = _services("deploy/compose/demo.yml")
    init = demo["replicator-init"]
    assert init["command"][:3] == ["replicator", "stack", "prepare"]
    assert set(init["depends_on"]) == {"kafka-primary", "kafka-dr"}
    assert "depends_on" not in demo.get("replicator", {})  # the base file's gate
    for name in ("demo-producer", "demo-consumer", "demo-traffic"):
        assert demo[name]["depends_on"] == GATE, name


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="no docker-compose here")
def test_compose_merges_the_overlay_keeping_the_gate(tmp_path: Path) -> None:
    """What Compose itself makes of the base file and the own-clusters overlay (`config`
    reads the files only: no Docker daemon, no container)."""
    env = {
        "PATH": "/usr/bin:/bin",
        "REPLICATOR_CONFIG_PATH": "/etc/replicator/mm2.properties",
        "SECRETS_DIR": str(tmp_path),
        "REPLICATOR_CONFIG_DIR": str(tmp_path),
        "REPLICATOR_CLUSTER_SECRETS_DIR": str(tmp_path),
        "REPLICATOR_HOME": "dr",
    }
    files = ["-f", "docker-compose.yml", "-f", "deploy/compose/external.yml"]
    result = subprocess.run(
        [str(shutil.which("docker-compose")), *files, "config"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    services = yaml.safe_load(result.stdout)["services"]
    assert services["replicator-init"]["command"] == [
        "replicator", "init", "--config", "/etc/replicator/mm2.properties",
        "--home", "dr", "--allow-unreachable",
    ]  # fmt: skip
    assert services["replicator"]["depends_on"] == GATE
