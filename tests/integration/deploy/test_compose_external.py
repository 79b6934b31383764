"""The compose stack against clusters it did not start (issue 28, "Bring your own
clusters"), as docs/docker.md's "Your own clusters" tells an operator to run it:

- two SASL_SSL (SCRAM-SHA-512) clusters with the StandardAuthorizer, started outside
  compose on this host's Docker bridge address, where the containers reach them as
  they would reach clusters elsewhere; the replicator's principal has only the ACLs
  `replicator acls plan` lists;
- the operator's folder: `mm2.properties` naming the clusters, flows and the application,
  the CA's PEM file, and the password as a file its `${directory:...}` reference reads;
- `docker/make-env.sh .env --external FOLDER`, then docker-compose.yml with
  deploy/compose/external.yml: no broker and no demo container, `replicator init` as the
  one-shot that prepares the clusters and the state store, two replicator workers;
- the operator's application (the DR-aware demo producer and consumer, on the host)
  runs through a `failover` and a `failback` DAG, each approved by the admin: its ledgers
  show nothing lost and nothing processed twice;
- `docker inspect` of every container shows no password: neither the clusters' nor the
  stack's own (Docker secrets); every container has memory and CPU limits.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from replicator.statestore import read_ledger
from replicator_lab.demo_apps import DemoApplication, DemoApplicationProcesses

from helpers.compose import (
    TIMEOUT_S,
    ComposeProject,
    Figures,
    bridge_gateway,
    build_images,
    compose_project,
    docker_engine,
    fail_over_and_back,
    passwords_shown,
    run,
)
from helpers.kafka import create_topic, own_cluster_pair
from helpers.procedures import wait_processed
from helpers.secured import SecuredPair

# Alone (`make test`'s second phase), like the demo stack's test.
pytestmark = [pytest.mark.integration, pytest.mark.solo]

FILES = ("docker-compose.yml", "deploy/compose/external.yml")
#: The uid every container of the stack runs as (Dockerfile, docker/postgres).
_CONTAINER_UID = 10001
_TOPIC = "demo.orders"


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredPair]:
    """The operator's clusters: SASL_SSL, on the Docker bridge's gateway address."""
    docker_engine()
    folder = tmp_path_factory.mktemp("external-clusters")
    with own_cluster_pair(folder, security="sasl_ssl", host=bridge_gateway()) as stack:
        pair = SecuredPair(stack)
        for name in ("primary", "dr"):
            create_topic(getattr(pair, name), _TOPIC, partitions=3, client=pair.admin(name))
        yield pair


def _operator_folder(clusters: SecuredPair, folder: Path) -> Path:
    """What an operator brings: mm2.properties, the CA, and the password file it reads
    (`secrets/`), readable by the containers' user and nobody else's."""
    security = clusters.stack.security
    assert security is not None
    folder.mkdir()
    shutil.copy(security.ca_file, folder / "ca.pem")
    secrets = folder / "secrets"
    secrets.mkdir()
    (secrets / "replicator-password").write_text(security.password("replicator"))
    text = clusters.operator_config(
        "/etc/replicator/ca.pem", "/run/secrets/clusters", "replicator-password"
    )
    text += "\nmetrics.port = 9400\napplications.demo.producer.principals = User:demo\n"
    (folder / "mm2.properties").write_text(text, encoding="utf-8")
    # Readable by the containers' user: the folder and its files are world-readable
    # (no secret), the password 0600 and owned by that user (as docs/docker.md says).
    folder.chmod(0o755)
    for path in (folder / "mm2.properties", folder / "ca.pem"):
        path.chmod(0o644)
    shutil.chown(secrets, _CONTAINER_UID, _CONTAINER_UID)
    secrets.chmod(0o700)
    shutil.chown(secrets / "replicator-password", _CONTAINER_UID, _CONTAINER_UID)
    (secrets / "replicator-password").chmod(0o600)
    return folder


@pytest.fixture(scope="module")
def project(
    clusters: SecuredPair, figures: Figures, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ComposeProject]:
    build_images(figures)
    root = tmp_path_factory.mktemp("external-compose")
    operator = _operator_folder(clusters, root / "replicator")
    with compose_project(root, FILES, figures, ("--external", str(operator))) as project:
        yield project


@pytest.mark.timeout(3600)  # a first build on a fresh machine: about 10 minutes
def test_the_stack_runs_failover_and_failback_on_clusters_it_did_not_start(
    clusters: SecuredPair,
    project: ComposeProject,
    figures: Figures,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    services = set(project.compose("ps", "--services").split())
    assert not {name for name in services if name.startswith(("kafka", "demo"))}, services
    init = project.containers("replicator-init")[0]
    init_log = run("docker", "logs", init)
    assert "ready:" in init_log and "NOT ready" not in init_log, init_log[-3000:]
    assert "application demo registered as active on primary" in init_log, init_log[-3000:]
    workers = project.containers("replicator")
    assert len(workers) == 2, workers
    for container in project.containers():
        host_config = project.inspect(container)["HostConfig"]
        assert host_config["Memory"] > 0 and host_config["NanoCpus"] > 0, container

    # The operator's application, on the host, following the state store.
    state_url = project.secret("state_url").replace(
        "@postgres:5432/", f"@127.0.0.1:{project.env['POSTGRES_PORT']}/"
    )
    security = clusters.stack.security
    assert security is not None
    app = DemoApplication(
        "demo", _TOPIC, clusters.stack.data_dir / "demo.properties", state_url, tmp_path
    )
    processes = DemoApplicationProcesses(app)
    processes.start()
    try:
        wait_processed(app.consumed_ledger, "primary", 50, TIMEOUT_S)
        with project.airflow() as api, project.airflow("approver") as approver:
            assert api.import_errors() == []
            fail_over_and_back(api, approver, app.consumed_ledger, figures)
    finally:
        ledgers = processes.stop()
    assert ledgers.ok, ledgers.summary()
    assert {entry.cluster for entry in read_ledger(app.consumed_ledger)} == {"primary", "dr"}
    figures.values["ledgers"] = ledgers.summary()

    _up_during_an_outage_of_primary(clusters, project, figures)

    # No container shows a password: the clusters' principals' or the stack's own.
    secrets = {f"cluster {user}": value.decode() for user, value in clusters.passwords().items()}
    secrets |= {path.name: path.read_text() for path in project.secrets_dir.iterdir()}
    assert passwords_shown(project, secrets) == []

    started = time.monotonic()
    project.compose("down", "-v", "--remove-orphans", timeout=300)
    figures.timed("compose down -v", started)
    assert project.leftovers() == []
    with capsys.disabled():
        figures.print()


def _up_during_an_outage_of_primary(
    clusters: SecuredPair, project: ComposeProject, figures: Figures
) -> None:
    """`docker compose up` while primary is down, when DR is needed: `replicator init`
    names primary as not answering and ends PARTIAL with status 0 (`--allow-unreachable`),
    so its `service_completed_successfully` gate lets the workers start; they run (no
    restart) with their source down. Primary stays down: the test's last step."""
    started = time.monotonic()
    clusters.stack.down(["primary"])
    project.compose("up", "-d", "--force-recreate", "replicator-init", "replicator")
    init = project.containers("replicator-init")[0]
    state = project.inspect(init)["State"]
    log = run("docker", "logs", init)
    assert state["ExitCode"] == 0, log[-3000:]
    # The report's row: STEP, OUTCOME, CLUSTER, FINDING.
    assert re.search(r"unreachable +primary +\S+ does not answer", log), log[-3000:]
    assert any(
        line.startswith("PARTIAL") and "did not answer: primary" in line
        for line in log.splitlines()
    ), log[-3000:]
    workers = project.containers("replicator")
    assert len(workers) == 2, workers
    time.sleep(5)  # a worker that exits on a source it cannot reach has done so by now
    for worker in workers:
        state = project.inspect(worker)["State"]
        assert state["Running"] and project.inspect(worker)["RestartCount"] == 0, state
    figures.timed("compose up with primary down to workers running", started)
