"""A compose project of a test's own on a Docker engine of this machine: the images
built (`make image`), docker/make-env.sh's .env and secrets in a folder of the test's,
ports of its own, and what the Docker tests do with it (run a DAG through Airflow's REST
API, look into volumes and containers, check that nothing is left)."""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from replicator_lab.airflow_client import AirflowClient
from replicator_lab.errors import StackError

from helpers.kafka import free_port_pairs
from helpers.procedures import wait_processed

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = os.environ.get("COMPOSE", "docker-compose")
TIMEOUT_S = 180.0
BUILD_TIMEOUT_S = 1800.0
#: docker/engine.sh exits with this when no engine answers and none can be started.
_NO_ENGINE = 2
_PORTS = ("AIRFLOW_PORT", "PRIMARY_KAFKA_PORT", "DR_KAFKA_PORT", "POSTGRES_PORT")
#: The replicator workers' image (Dockerfile target `engine`) and its size bound.
ENGINE_IMAGE = "replicator-engine:latest"
ENGINE_IMAGE_MAX_BYTES = 400_000_000


def run(*command: str, timeout: float = TIMEOUT_S, env: dict[str, str] | None = None) -> str:
    """Run `command` in the repository; its output, or a test failure showing it."""
    result = subprocess.run(
        command,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )
    if result.returncode != 0:
        output = (result.stdout + result.stderr)[-4000:]
        pytest.fail(f"{' '.join(command)} exited {result.returncode}:\n{output}", pytrace=False)
    return result.stdout


@dataclass
class Figures:
    """Wall times (seconds) and sizes measured on the way, printed at the end."""

    values: dict[str, str] = field(default_factory=dict)

    def timed(self, name: str, started: float) -> None:
        self.values[name] = f"{time.monotonic() - started:.0f}s"

    def print(self) -> None:
        sys.stdout.write("\n" + ", ".join(f"{k} {v}" for k, v in self.values.items()) + "\n")


@dataclass
class ComposeProject:
    """The test's compose project: its name, its compose files, .env and secrets."""

    name: str
    files: tuple[str, ...]
    env_file: Path
    env: dict[str, str] = field(repr=False)

    @property
    def secrets_dir(self) -> Path:
        return Path(self.env["SECRETS_DIR"])

    def secret(self, name: str) -> str:
        return (self.secrets_dir / name).read_text(encoding="utf-8")

    def compose(self, *args: str, timeout: float = TIMEOUT_S) -> str:
        files = [arg for path in self.files for arg in ("-f", path)]
        return run(
            COMPOSE, "-p", self.name, "--env-file", str(self.env_file), *files, *args,
            timeout=timeout,
        )  # fmt: skip

    def containers(self, service: str | None = None) -> list[str]:
        return self.compose("ps", "-q", *([service] if service else [])).split()

    def volume(self, name: str) -> Path:
        """Where the engine keeps volume `name` (the test runs beside a local engine)."""
        volume = f"{self.name}_{name}"
        return Path(run("docker", "volume", "inspect", "-f", "{{.Mountpoint}}", volume).strip())

    def leftovers(self) -> list[str]:
        """Containers, networks and volumes of the project that still exist."""
        label = f"label=com.docker.compose.project={self.name}"
        found = []
        for kind in (("ps", "-a"), ("network", "ls"), ("volume", "ls")):
            ids = run("docker", *kind, "-q", "--filter", label).split()
            found += [f"{kind[0]} {identifier}" for identifier in ids]
        return found

    def inspect(self, container: str) -> dict[str, object]:
        return json.loads(run("docker", "inspect", container))[0]

    def airflow(self, user: str = "admin") -> AirflowClient:
        """A REST client as `user`: `admin`, or `approver` (the stack's second person)."""
        url = f"http://127.0.0.1:{self.env['AIRFLOW_PORT']}"
        # One API server process serves the UI, the REST API and every task's execution
        # API calls: on a host loaded tens of processes deep it answers in minutes.
        password = self.secret(f"airflow_{user}_password")
        return AirflowClient(url, user, password, timeout_s=300)


def bridge_gateway() -> str:
    """This host's address on Docker's default bridge, where containers reach the host:
    the bridge's gateway, or, where the engine leaves that out of the bridge's IPAM
    config (Debian's docker.io 20.10 does), the first address of its subnet, which the
    engine then gives the bridge (docker0: 172.17.0.1 of 172.17.0.0/16)."""
    configs = json.loads(
        run("docker", "network", "inspect", "bridge", "-f", "{{json .IPAM.Config}}")
    )
    if not configs:
        raise StackError("Docker's bridge network has no IPAM config: no address to offer")
    if configs[0].get("Gateway"):
        return str(configs[0]["Gateway"])
    return str(next(ipaddress.ip_network(configs[0]["Subnet"]).hosts()))


def docker_engine(targets: Sequence[str] = ("docker-engine",)) -> None:
    """A Docker engine that answers (docker/engine.sh starts one if it can), and the
    other make `targets` given (e.g. the base image); else a skip with the reason, a
    failure under CI=true."""
    for target in targets:
        result = subprocess.run(
            ["make", "-s", target],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
            check=False,
        )
        if result.returncode == 0:
            continue
        reason = f"make {target}: no Docker engine here and none can be started, or: "
        reason += result.stderr.strip()[-600:]
        if os.environ.get("CI") == "true" or result.returncode != _NO_ENGINE:
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)


def build_images(figures: Figures) -> None:
    """`make image` (the base image first): the full, engine and PostgreSQL images."""
    started = time.monotonic()
    run("make", "-s", "base-image", timeout=BUILD_TIMEOUT_S)
    figures.timed("base image", started)
    started = time.monotonic()
    run("make", "-s", "image", timeout=BUILD_TIMEOUT_S)
    figures.timed("make image", started)
    size = run("docker", "image", "inspect", "-f", "{{.Size}}", "replicator:latest")
    figures.values["image size"] = f"{int(size) / 1e9:.2f} GB"
    engine_size = int(run("docker", "image", "inspect", "-f", "{{.Size}}", ENGINE_IMAGE))
    figures.values["engine image size"] = f"{engine_size / 1e6:.0f} MB"
    assert engine_size < ENGINE_IMAGE_MAX_BYTES, figures.values
    # The product alone: no module of the local stack (lab/replicator_lab) in the engine.
    script = "import importlib.util as u; print([u.find_spec(m) is None for m in {!r}])"
    modules = ("replicator_lab", "replicator.localstack", "replicator.engine")
    found = run("docker", "run", "--rm", ENGINE_IMAGE, "python3", "-c", script.format(modules))
    assert found.strip() == "[True, True, False]", found


@contextmanager
def compose_project(
    folder: Path, files: Sequence[str], figures: Figures, make_env_args: Sequence[str] = ()
) -> Iterator[ComposeProject]:
    """docker/make-env.sh's .env and secrets in `folder` (with `make_env_args`), the
    stack of `files` up and healthy; torn down after (volumes too)."""
    name = f"replicator-test-{uuid.uuid4().hex[:6]}"
    env_file = folder / ".env"
    ports = {key: str(port) for key, port in zip(_PORTS, free_port_pairs(len(_PORTS)), strict=True)}
    run(
        "docker/make-env.sh", str(env_file), *make_env_args,
        env={"COMPOSE_PROJECT_NAME": name, **ports},
    )  # fmt: skip
    env = dict(
        line.split("=", 1)
        for line in env_file.read_text(encoding="utf-8").splitlines()
        if "=" in line and not line.startswith("#")
    )
    project = ComposeProject(name, tuple(files), env_file, env)
    try:
        started = time.monotonic()
        # compose waits for each dependency to be healthy: minutes on a loaded host.
        project.compose("up", "-d", timeout=1500)
        run("docker/wait-healthy.sh", name, "900", timeout=960)
        figures.timed("compose up to healthy", started)
        yield project
    finally:
        if project.leftovers():
            project.compose("down", "-v", "--remove-orphans", timeout=300)


def run_dag(
    api: AirflowClient,
    dag_id: str,
    conf: dict[str, object],
    approver: AirflowClient | None = None,
) -> str:
    """Trigger `dag_id` and wait for its run; fail with the failed tasks' logs.
    `approver`: the run asks a person (its `approval` task), and that client's user (not
    the triggerer: the stack's two-person rule) answers Approve through the REST API,
    as on the Required Actions page."""
    run_id = api.trigger(dag_id, conf)
    if approver is not None:
        try:
            answer = approver.answer(dag_id, run_id, "approval", "Approve", timeout=4 * TIMEOUT_S)
        except StackError as error:
            pytest.fail(f"{error}\n{api.failure_report(dag_id, run_id)}", pytrace=False)
        assert answer["responded_by"]["name"] == approver.username, answer
    if api.wait_for_run(dag_id, run_id, timeout=4 * TIMEOUT_S) != "success":
        pytest.fail(api.failure_report(dag_id, run_id), pytrace=False)
    return run_id


def fail_over_and_back(
    api: AirflowClient, approver: AirflowClient, consumed: Path, figures: Figures
) -> None:
    """The `failover` (planned, the reverse flow started) and `failback` DAGs of the
    `demo` application on flow primary->dr, triggered by `api`'s user and approved by
    `approver`'s: each reports an RPO of 0 records, and the application's consumer (its
    ledger `consumed`) goes on processing on the cluster it was moved to."""
    for dag_id, params, now_active in (
        ("failover", {"mode": "planned", "reverse": True}, "dr"),
        ("failback", {"mode": "replicate"}, "primary"),
    ):
        started = time.monotonic()
        conf = {"flow": "primary->dr", "applications": ["demo"], "timeout_s": TIMEOUT_S}
        run_id = run_dag(api, dag_id, {**conf, **params}, approver=approver)
        figures.timed(f"{dag_id} DAG", started)
        assert "RPO 0 records" in api.task_log(dag_id, run_id, "report", 1)
        wait_processed(consumed, now_active, 50, TIMEOUT_S)


def own_approval_refused(api: AirflowClient) -> None:
    """A failover of `demo` triggered and approved by the same user (`api`'s): under
    the stack's two-person rule the approval is refused, the run ends without its
    cutover, and nothing moves."""
    conf = {"flow": "primary->dr", "applications": ["demo"], "mode": "planned"}
    run_id = api.trigger("failover", {**conf, "timeout_s": TIMEOUT_S})
    answer = api.answer("failover", run_id, "approval", "Approve", timeout=4 * TIMEOUT_S)
    assert answer["responded_by"]["name"] == api.username, answer
    assert api.wait_for_run("failover", run_id, timeout=4 * TIMEOUT_S) == "success"
    states = {t["task_id"]: t["state"] for t in api.task_instances("failover", run_id)}
    skipped = {task: states[task] for task in ("cutover", "start_reverse", "report")}
    assert set(skipped.values()) == {"skipped"}, (states, api.failure_report("failover", run_id))


def passwords_shown(project: ComposeProject, secrets: dict[str, str]) -> list[str]:
    """Which of `secrets` (name -> value) `docker inspect` of any container of the
    project shows (environment, command, labels, mounts: all of it)."""
    shown = []
    for container in project.containers():
        inspected = run("docker", "inspect", container)
        shown += [
            f"{name} in {container[:12]}" for name, value in secrets.items() if value in inspected
        ]
    return shown
