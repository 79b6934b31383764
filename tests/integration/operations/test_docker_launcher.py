"""`DockerLauncher` against a real Docker engine (docker/engine.sh starts one when it
can): containers labelled as a compose project's `replicator` service are its workers;
a killed one is dead and `restart_dead` starts it again; `stop` removes it; a container
that is gone, and an engine that does not answer, are one line each naming the fix.

The containers run the base image (`make base-image`, built here from Debian's archive)
with a command shaped like `replicator run --config FILE`: the launcher reads the
configuration from the command line and never looks inside. No engine and none can be
started: skipped with the reason (a failure under CI=true), as the Docker stack test."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from replicator.errors import ReplicatorError
from replicator.operations.docker_launcher import DockerLauncher

from helpers.compose import docker_engine

pytestmark = pytest.mark.integration

BASE_IMAGE = "replicator-base:bookworm"
CONFIG = "/etc/replicator/mm2.properties"


def _docker(*args: str) -> str:
    result = subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, f"docker {' '.join(args)}: {result.stderr[-2000:]}"
    return result.stdout.strip()


@pytest.fixture(scope="module")
def engine() -> None:
    docker_engine(("docker-engine", "base-image"))


@pytest.fixture
def project(engine: None) -> Iterator[str]:
    """Two 'replicator' containers and one of another service, in a project of the
    test's own; whatever is left is removed afterwards."""
    name = f"launcher-test-{uuid.uuid4().hex[:6]}"
    for container, service in ((f"{name}_replicator_1", "replicator"),
                               (f"{name}_replicator_2", "replicator"),
                               (f"{name}_postgres_1", "postgres")):  # fmt: skip
        _docker(
            "run", "-d", "--name", container,
            "--label", f"com.docker.compose.project={name}",
            "--label", f"com.docker.compose.service={service}",
            BASE_IMAGE, "sh", "-c", "exec sleep 600", "replicator", "run", "--config", CONFIG,
        )  # fmt: skip
    yield name
    left = _docker("ps", "-aq", "--filter", f"label=com.docker.compose.project={name}")
    if left:
        _docker("rm", "-f", *left.split())


def test_workers_are_the_services_containers_and_dead_ones_come_back(project: str) -> None:
    launcher = DockerLauncher(project)
    names = [f"{project}_replicator_1", f"{project}_replicator_2"]

    workers = launcher.workers()

    assert [w.name for w in workers] == names
    assert {w.config for w in workers} == {Path(CONFIG)}
    assert all(launcher.alive(name) for name in names)

    _docker("kill", names[0])
    assert not launcher.alive(names[0])
    restarted = launcher.restart_dead(lambda worker: True)
    assert [(r.name, r.action, r.config) for r in restarted] == [
        (names[0], "restarted", Path(CONFIG))
    ]
    assert launcher.alive(names[0]) and launcher.alive(names[1])

    assert launcher.stop(names[1], timeout_s=1) is True
    assert [w.name for w in launcher.workers()] == names[:1]
    assert launcher.stop(names[1]) is False
    assert not launcher.alive(names[1])
    with pytest.raises(ReplicatorError, match=r"is gone; `docker-compose up -d`"):
        launcher.start(names[1], Path(CONFIG))


def test_an_engine_that_does_not_answer_is_one_line(tmp_path: Path) -> None:
    launcher = DockerLauncher("any", socket=str(tmp_path / "docker.sock"))
    with pytest.raises(ReplicatorError) as refused:
        launcher.workers()
    message = str(refused.value)
    assert f"the Docker engine at {tmp_path / 'docker.sock'} did not answer" in message
    assert "docker/compose.supervised.yml" in message
    assert "\n" not in message
