"""The deployment of issue 15, on a Docker engine of this machine: the base image
(debootstrap), the image (`make image`), and the whole system in docker-compose.yml,
as a compose project of the test's own on ports of its own. On that stack:

- the demo application's ledgers prove the demo traffic was replicated exactly;
- the `failover` and `failback` DAGs, triggered through Airflow's REST API and approved
  there by the admin (the stack has no approval policy: every such run asks), move the
  demo application to `dr` and back with nothing lost and nothing processed twice;
- `verify_replication` runs its Spark job on the standalone cluster (the master lists
  the finished application) and writes Data Docs on the shared volume;
- a replicator container killed with `docker kill` comes back (the supervisor DAG
  starts it again through the Docker launcher) and nothing is lost;
- `docker-compose down -v` leaves no container, network or volume of the project.

No Docker engine and none can be started (not root, no dockerd): skipped with the
reason, except under CI=true, where that is a failure. The build, start and procedure
times are printed for the README.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from replicator.localstack.airflow_client import AirflowClient
from replicator.localstack.errors import StackError
from replicator.statestore import check_ledgers, read_ledger

from helpers.kafka import free_port_pairs
from helpers.procedures import wait_processed
from helpers.replication import wait_until

# Alone (`make test`'s second phase): its images' build and a compose stack of Kafka,
# PostgreSQL, Airflow and Spark next to another test starved both on two cores.
pytestmark = [pytest.mark.integration, pytest.mark.solo]

ROOT = Path(__file__).resolve().parents[3]
COMPOSE = os.environ.get("COMPOSE", "docker-compose")
#: docker/engine.sh exits with this when no engine answers and none can be started.
_NO_ENGINE = 2
_TIMEOUT_S = 180.0
_BUILD_TIMEOUT_S = 1800.0
_PORTS = ("AIRFLOW_PORT", "PRIMARY_KAFKA_PORT", "DR_KAFKA_PORT", "POSTGRES_PORT", "SPARK_UI_PORT")
#: The replicator workers' image (Dockerfile target `engine`) and its size bound.
ENGINE_IMAGE = "replicator-engine:latest"
ENGINE_IMAGE_MAX_BYTES = 400_000_000
#: Where the image mounts the shared `verification` volume.
_VERIFICATION_DIR = "/opt/replicator/.data/verification"


def _run(*command: str, timeout: float = _TIMEOUT_S, env: dict[str, str] | None = None) -> str:
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
    """The test's compose project: its name, its .env, and what it publishes."""

    name: str
    env_file: Path
    env: dict[str, str] = field(repr=False)  # secrets: never in a failure's output

    def compose(self, *args: str, timeout: float = _TIMEOUT_S) -> str:
        files = ("-f", "docker-compose.yml", "-f", "docker/compose.supervised.yml")
        return _run(
            COMPOSE, "-p", self.name, "--env-file", str(self.env_file), *files, *args,
            timeout=timeout,
        )  # fmt: skip

    def containers(self, service: str) -> list[str]:
        return self.compose("ps", "-q", service).split()

    def volume(self, name: str) -> Path:
        """Where the engine keeps volume `name` (the test runs beside a local engine)."""
        volume = f"{self.name}_{name}"
        return Path(_run("docker", "volume", "inspect", "-f", "{{.Mountpoint}}", volume).strip())

    def leftovers(self) -> list[str]:
        """Containers, networks and volumes of the project that still exist."""
        label = f"label=com.docker.compose.project={self.name}"
        found = []
        for kind in (("ps", "-a"), ("network", "ls"), ("volume", "ls")):
            ids = _run("docker", *kind, "-q", "--filter", label).split()
            found += [f"{kind[0]} {identifier}" for identifier in ids]
        return found

    def airflow(self) -> AirflowClient:
        url = f"http://127.0.0.1:{self.env['AIRFLOW_PORT']}"
        # One API server process serves the UI, the REST API and every task's execution
        # API calls: on a host loaded tens of processes deep it answers in minutes.
        return AirflowClient(url, "admin", self.env["AIRFLOW_ADMIN_PASSWORD"], timeout_s=300)


@pytest.fixture(scope="module")
def figures() -> Figures:
    return Figures()


@pytest.fixture(scope="module")
def engine() -> None:
    """A Docker engine that answers (docker/engine.sh starts one if it can)."""
    result = subprocess.run(
        ["make", "-s", "docker-engine"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=_BUILD_TIMEOUT_S,
        check=False,
    )
    if result.returncode == 0:
        return
    reason = f"no Docker engine here and none can be started: {result.stderr.strip()[-600:]}"
    if os.environ.get("CI") == "true" or result.returncode != _NO_ENGINE:
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def project(
    engine: None, figures: Figures, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ComposeProject]:
    """The images built (`make image`), the stack up and healthy; torn down after."""
    started = time.monotonic()
    _run("make", "-s", "base-image", timeout=_BUILD_TIMEOUT_S)
    figures.timed("base image", started)
    started = time.monotonic()
    _run("make", "-s", "image", timeout=_BUILD_TIMEOUT_S)
    figures.timed("make image", started)
    size = _run("docker", "image", "inspect", "-f", "{{.Size}}", "replicator:latest")
    figures.values["image size"] = f"{int(size) / 1e9:.2f} GB"
    engine_size = int(_run("docker", "image", "inspect", "-f", "{{.Size}}", ENGINE_IMAGE))
    figures.values["engine image size"] = f"{engine_size / 1e6:.0f} MB"
    assert engine_size < ENGINE_IMAGE_MAX_BYTES, figures.values

    name = f"replicator-test-{uuid.uuid4().hex[:6]}"
    env_file = tmp_path_factory.mktemp("compose") / ".env"
    ports = {key: str(port) for key, port in zip(_PORTS, free_port_pairs(len(_PORTS)), strict=True)}
    _run("docker/make-env.sh", str(env_file), env={"COMPOSE_PROJECT_NAME": name, **ports})
    env = dict(
        line.split("=", 1)
        for line in env_file.read_text(encoding="utf-8").splitlines()
        if "=" in line and not line.startswith("#")
    )
    project = ComposeProject(name, env_file, env)
    try:
        started = time.monotonic()
        # compose waits for each dependency to be healthy: minutes on a loaded host.
        project.compose("up", "-d", timeout=1500)
        _run("docker/wait-healthy.sh", name, "900", timeout=960)
        figures.timed("compose up to healthy", started)
        yield project
    finally:
        if project.leftovers():
            project.compose("down", "-v", "--remove-orphans", timeout=300)


def _run_dag(
    api: AirflowClient, dag_id: str, conf: dict[str, object], approve: bool = False
) -> str:
    """Trigger `dag_id` and wait for its run; fail with the failed tasks' logs.
    `approve`: the run asks a person (its `approval` task), and the test's user (the
    stack's admin) answers Approve through the REST API, as on the Required Actions page."""
    run_id = api.trigger(dag_id, conf)
    if approve:
        try:
            answer = api.answer(dag_id, run_id, "approval", "Approve", timeout=4 * _TIMEOUT_S)
        except StackError as error:
            pytest.fail(f"{error}\n{api.failure_report(dag_id, run_id)}", pytrace=False)
        assert answer["responded_by"]["name"] == "admin", answer
    if api.wait_for_run(dag_id, run_id, timeout=4 * _TIMEOUT_S) != "success":
        pytest.fail(api.failure_report(dag_id, run_id), pytrace=False)
    return run_id


def _host_path(project: ComposeProject, path: str) -> Path:
    """A path on the shared `verification` volume, as the host sees it."""
    relative = Path(path).relative_to(_VERIFICATION_DIR)
    return project.volume("verification") / relative


@pytest.mark.timeout(3600)  # a first build on a fresh machine: about 10 minutes
def test_the_whole_system_in_docker_compose(
    project: ComposeProject, figures: Figures, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = project.volume("demo-data")
    produced, consumed = demo / "demo.produced.jsonl", demo / "demo.consumed.jsonl"
    wait_processed(consumed, "primary", 50, _TIMEOUT_S)

    # A broker's log reaches `docker logs` (its console), not only server.log.
    broker = project.containers("kafka-primary")[0]
    assert "Kafka Server started" in _run("docker", "logs", broker)
    # The image's engine uses the replication loop's C part (built in its wheel stage);
    # it logs to stderr, which `docker logs` replays there.
    workers = project.containers("replicator")
    assert len(workers) == 2, workers  # REPLICATOR_REPLICAS: compose's --scale replicator=N
    engine = workers[0]
    engine_log = subprocess.run(
        ["docker", "logs", engine], capture_output=True, text=True, timeout=60, check=True
    ).stderr
    assert "the replication loop produces plain records in C" in engine_log, engine_log[-3000:]
    # The workers run the slim engine image, as a user that is not root, without a JVM;
    # healthy means replicating (every worker loop runs, every cluster answers).
    for worker in workers:
        inspected = json.loads(_run("docker", "inspect", worker))[0]
        assert inspected["Config"]["Image"] == ENGINE_IMAGE, inspected["Config"]["Image"]
        assert inspected["State"]["Health"]["Status"] == "healthy", inspected["State"]["Health"]
    assert _run("docker", "exec", engine, "id", "-u").strip() == "10001"
    java = _run("docker", "exec", engine, "sh", "-c", "command -v java || echo none")
    assert java.strip() == "none", java

    with project.airflow() as api:
        assert api.import_errors() == []
        # The plugin comes from the installed wheel's entry point, once.
        plugins = api.request("GET", "/api/v2/plugins")["plugins"]
        assert [p["name"] for p in plugins] == ["replicator_dr"], plugins
        # The vendored Data Docs assets are in the image and served by the plugin.
        asset = "/dr-status/data-docs-assets/jquery/dist/jquery.min.js"
        served = httpx.get(
            f"{api.url}{asset}", headers={"Authorization": f"Bearer {api.token()}"}, timeout=300
        )
        assert served.status_code == 200 and b"jQuery" in served.content[:200], served
        # Failover and failback, as an operator triggers them: the stack's connection
        # has no approval policy, so each asks, and the admin approves it.
        for dag_id, params, now_active in (
            ("failover", {"mode": "planned", "reverse": True}, "dr"),
            ("failback", {"mode": "replicate"}, "primary"),
        ):
            started = time.monotonic()
            conf = {"flow": "primary->dr", "applications": ["demo"], "timeout_s": _TIMEOUT_S}
            run_id = _run_dag(api, dag_id, {**conf, **params}, approve=True)
            figures.timed(f"{dag_id} DAG", started)
            assert "RPO 0 records" in api.task_log(dag_id, run_id, "report", 1)
            wait_processed(consumed, now_active, 50, _TIMEOUT_S)

        # Verification on the Spark standalone cluster, Data Docs on the shared volume.
        started = time.monotonic()
        run_id = _run_dag(api, "verify_replication", {"flow": "primary->dr"})
        figures.timed("verify_replication DAG", started)
        xcom = f"/api/v2/dags/verify_replication/dagRuns/{run_id}/taskInstances/suites"
        result = api.request("GET", f"{xcom}/xcomEntries/return_value")["value"]
        result = json.loads(result) if isinstance(result, str) else result
        assert _host_path(project, result["data_docs"]).is_file(), result
        master = httpx.get(f"http://127.0.0.1:{project.env['SPARK_UI_PORT']}/json/").json()
        assert [app["name"] for app in master["completedapps"]], master

        # A replicator container killed comes back, started by the supervisor DAG.
        victim = project.containers("replicator")[0]
        _run("docker", "kill", victim)
        started = time.monotonic()
        _run_dag(api, "replicator_supervisor", {})
        wait_until(
            lambda: (
                _run("docker", "inspect", "-f", "{{.State.Health.Status}}", victim).strip()
                == "healthy"
            ),
            _TIMEOUT_S,
            f"replicator container {victim[:12]} running and healthy again",
        )
        figures.timed("killed replicator back", started)
        wait_processed(consumed, "primary", 50, _TIMEOUT_S)

    # The application stops producing; everything it had acknowledged is processed once.
    project.compose("stop", "demo-producer")
    wait_until(
        lambda: not check_ledgers([produced], [consumed]).missing,
        _TIMEOUT_S,
        "the consumer drained",
    )
    ledgers = check_ledgers([produced], [consumed])
    assert ledgers.ok, ledgers.summary()
    assert {entry.cluster for entry in read_ledger(consumed)} == {"primary", "dr"}
    figures.values["ledgers"] = ledgers.summary()

    started = time.monotonic()
    project.compose("down", "-v", "--remove-orphans", timeout=300)
    figures.timed("compose down -v", started)
    assert project.leftovers() == []
    with capsys.disabled():
        figures.print()
