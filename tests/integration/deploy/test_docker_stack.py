"""The deployment of issue 15, on a Docker engine of this machine: the base image
(debootstrap), the image (`make image`), and the whole system in docker-compose.yml
with the demo's overlay (deploy/compose/demo.yml), as a compose project of the test's
own on ports of its own. On that stack:

- no container shows a password in `docker inspect` (they are Docker secrets);
- the demo application's ledgers prove the demo traffic was replicated exactly;
- the two-person rule is on: a failover the admin triggers and approves is refused
  (its cutover skipped, nothing moved);
- the `failover` and `failback` DAGs, triggered through Airflow's REST API by the admin
  and approved there by the stack's second user (`approver`), move the demo application
  to `dr` and back with nothing lost and nothing processed twice;
- `verify_replication` runs its Spark job on the verification server (the server's
  log shows the job's session) and writes Data Docs on the shared volume;
- a replicator container killed with `docker kill` comes back (the supervisor DAG
  starts it again through the Docker launcher) and nothing is lost;
- `docker-compose down -v` leaves no container, network or volume of the project.

No Docker engine and none can be started (not root, no dockerd): skipped with the
reason, except under CI=true, where that is a failure. The build, start and procedure
times are printed for the README.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from replicator.statestore import check_ledgers, read_ledger

from helpers.compose import (
    ENGINE_IMAGE,
    TIMEOUT_S,
    ComposeProject,
    Figures,
    build_images,
    compose_project,
    docker_engine,
    fail_over_and_back,
    own_approval_refused,
    passwords_shown,
    run,
    run_dag,
)
from helpers.procedures import wait_processed
from helpers.replication import wait_until

# Alone (`make test`'s second phase): its images' build and a compose stack of Kafka,
# PostgreSQL, Airflow and Spark next to another test starved both on two cores.
pytestmark = [pytest.mark.integration, pytest.mark.solo]

#: The base file, the demo's clusters and application, the Docker launcher.
FILES = ("docker-compose.yml", "deploy/compose/demo.yml", "docker/compose.supervised.yml")
#: Where the image mounts the shared `verification` volume.
_VERIFICATION_DIR = "/opt/replicator/.data/verification"


@pytest.fixture(scope="module")
def project(figures: Figures, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ComposeProject]:
    """The images built (`make image`), the demo stack up and healthy; torn down after."""
    docker_engine()
    build_images(figures)
    with compose_project(tmp_path_factory.mktemp("compose"), FILES, figures) as project:
        yield project


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
    wait_processed(consumed, "primary", 50, TIMEOUT_S)

    # A broker's log reaches `docker logs` (its console), not only server.log.
    broker = project.containers("kafka-primary")[0]
    assert "Kafka Server started" in run("docker", "logs", broker)
    # The image's engine moves records through the compiled data plane (built in the
    # image's dataplane stage); it logs to stderr, which `docker logs` replays there.
    workers = project.containers("replicator")
    assert len(workers) == 2, workers  # REPLICATOR_REPLICAS: compose's --scale replicator=N
    engine = workers[0]
    engine_log = subprocess.run(
        ["docker", "logs", engine], capture_output=True, text=True, timeout=60, check=True
    ).stderr
    compiled = "records move through the compiled data plane (librdkafka"
    assert compiled in engine_log, engine_log[-3000:]
    # The workers run the slim engine image, as a user that is not root, without a JVM;
    # healthy means replicating (every worker loop runs, every cluster answers).
    for worker in workers:
        inspected = project.inspect(worker)
        assert inspected["Config"]["Image"] == ENGINE_IMAGE, inspected["Config"]["Image"]
        assert inspected["State"]["Health"]["Status"] == "healthy", inspected["State"]["Health"]
    assert run("docker", "exec", engine, "id", "-u").strip() == "10001"
    java = run("docker", "exec", engine, "sh", "-c", "command -v java || echo none")
    assert java.strip() == "none", java

    # Every password is a Docker secret: no container shows one in `docker inspect`.
    secrets = {path.name: path.read_text() for path in project.secrets_dir.iterdir()}
    secrets.pop("state_url"), secrets.pop("airflow_db_url")  # URLs: their passwords are checked
    assert passwords_shown(project, secrets) == []

    with project.airflow() as api, project.airflow("approver") as approver:
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
        # Failover and failback, as an operator triggers them: each asks, and under the
        # stack's two-person rule the triggerer's own Approve is refused; another
        # person's is taken.
        own_approval_refused(api)
        fail_over_and_back(api, approver, consumed, figures)

        # Verification on the verification server, Data Docs on the shared volume.
        started = time.monotonic()
        run_id = run_dag(api, "verify_replication", {"flow": "primary->dr"})
        figures.timed("verify_replication DAG", started)
        xcom = f"/api/v2/dags/verify_replication/dagRuns/{run_id}/taskInstances/suites"
        result = api.request("GET", f"{xcom}/xcomEntries/return_value")["value"]
        result = json.loads(result) if isinstance(result, str) else result
        assert _host_path(project, result["data_docs"]).is_file(), result
        assert result["suites_ran"] == "warm, on verification-server:15003", result
        [server] = project.containers("verification-server")
        server_log = subprocess.run(
            ["docker", "logs", server], capture_output=True, text=True, timeout=60, check=True
        )
        assert "SessionHolder: Session with" in server_log.stdout + server_log.stderr

        # A replicator container killed comes back, started by the supervisor DAG.
        victim = project.containers("replicator")[0]
        run("docker", "kill", victim)
        started = time.monotonic()
        run_dag(api, "replicator_supervisor", {})
        wait_until(
            lambda: (
                run("docker", "inspect", "-f", "{{.State.Health.Status}}", victim).strip()
                == "healthy"
            ),
            TIMEOUT_S,
            f"replicator container {victim[:12]} running and healthy again",
        )
        figures.timed("killed replicator back", started)
        wait_processed(consumed, "primary", 50, TIMEOUT_S)

    # The application stops producing; everything it had acknowledged is processed once.
    project.compose("stop", "demo-producer")
    wait_until(
        lambda: not check_ledgers([produced], [consumed]).missing,
        TIMEOUT_S,
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
