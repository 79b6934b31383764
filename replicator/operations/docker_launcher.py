"""`DockerLauncher`: replicator workers as containers of a Docker host (docker-compose.yml).

The workers are the containers of one compose project's `replicator` service (compose
labels), each a worker named after its container. `alive` is "the container runs";
`start` starts the container again (stopping it first if it runs); `stop` stops it
(SIGTERM: it flushes; SIGKILL after the timeout) and removes it, so it is no longer
managed. The supervisor DAG then brings back what `docker kill` (or anything that
stops a container the way Docker's restart policy leaves alone) took down, and reports
it. A container that is gone is not recreated here: `docker-compose up -d` does that.

It speaks to the engine through the Docker SDK for Python (`docker`, the `[docker]`
extra) over the daemon's unix socket. Access to that socket is access to the host as
root: any code that runs in the process holding it (every Airflow task, on a scheduler
with the socket mounted) can start a privileged container. So it is opt-in
(`docker/compose.supervised.yml`, `$REPLICATOR_LAUNCHER=docker`); without it the
restart policy restarts containers that crash and the supervisor only reports dead
workers.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import docker
import requests
from docker.errors import APIError, DockerException, NotFound
from docker.models.containers import Container

from replicator.errors import ReplicatorError
from replicator.operations.launchers import (
    _STOP_TIMEOUT_S,
    Action,
    Launcher,
    LaunchResult,
    Worker,
    config_option,
)

#: `docker` selects this launcher (`launcher_choice.launcher_from_environment`); named
#: here for the messages, which cannot import that module (it imports this one).
LAUNCHER_ENV = "REPLICATOR_LAUNCHER"
#: The compose project whose `replicator` service's containers are the workers.
PROJECT_ENV = "REPLICATOR_DOCKER_PROJECT"
SERVICE_ENV = "REPLICATOR_DOCKER_SERVICE"
SOCKET_ENV = "REPLICATOR_DOCKER_SOCKET"
DEFAULT_SOCKET = "/var/run/docker.sock"
DEFAULT_SERVICE = "replicator"
#: Docker 20.10 (Debian bookworm's) speaks 1.41; newer engines accept it too. A fixed
#: version also means no request until the first call (no version negotiation).
_API_VERSION = "1.41"
_HTTP_TIMEOUT_S = 30


class DockerLauncher(Launcher):
    """The containers of compose project `project`'s `service` as workers."""

    def __init__(
        self, project: str, service: str = DEFAULT_SERVICE, socket: str = DEFAULT_SOCKET
    ) -> None:
        self.project = project
        self.service = service
        self.socket = socket
        self._docker = docker.DockerClient(
            base_url=f"unix://{socket}", version=_API_VERSION, timeout=_HTTP_TIMEOUT_S
        )

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> DockerLauncher:
        project = environ.get(PROJECT_ENV)
        if not project:
            raise ReplicatorError(
                f"${LAUNCHER_ENV}=docker needs ${PROJECT_ENV}: the compose project whose "
                f"'{environ.get(SERVICE_ENV, DEFAULT_SERVICE)}' containers are the workers"
            )
        return cls(
            project,
            environ.get(SERVICE_ENV, DEFAULT_SERVICE),
            environ.get(SOCKET_ENV, DEFAULT_SOCKET),
        )

    def workers(self) -> list[Worker]:
        labels = [
            f"com.docker.compose.project={self.project}",
            f"com.docker.compose.service={self.service}",
        ]
        with self._engine("list the containers"):
            # sparse: the list's own fields (names, command, creation), no inspect each.
            found = self._docker.containers.list(all=True, sparse=True, filters={"label": labels})
        return sorted((_worker(container.attrs) for container in found), key=lambda w: w.name)

    def alive(self, name: str) -> bool:
        container = self._inspect(name)
        return container is not None and bool(container.attrs["State"]["Running"])

    def start(self, name: str, config: Path) -> LaunchResult:
        container = self._inspect(name)
        if container is None:
            raise ReplicatorError(
                f"replicator container {name!r} of compose project {self.project!r} is gone; "
                f"`docker-compose up -d` creates the service's containers again"
            )
        state = container.attrs["State"]
        was_running = bool(state["Running"])
        with self._engine(f"start container {name}"):
            if was_running:
                container.stop(timeout=int(_STOP_TIMEOUT_S))
            container.start()
        action: Action = "restarted" if was_running or state["StartedAt"] else "started"
        config = _config_of(container.attrs["Config"]["Cmd"])
        return LaunchResult(name, action, config, _where(container.attrs))

    def stop(self, name: str, timeout_s: float = _STOP_TIMEOUT_S) -> bool:
        container = self._inspect(name)
        if container is None:
            return False
        was_running = bool(container.attrs["State"]["Running"])
        with self._engine(f"stop and remove container {name}"):
            container.stop(timeout=int(timeout_s))
            container.remove()
        return was_running

    def _inspect(self, name: str) -> Container | None:
        with self._engine(f"inspect container {name}"):
            try:
                return self._docker.containers.get(name)
            except NotFound:
                return None

    @contextmanager
    def _engine(self, what: str) -> Iterator[None]:
        """The engine's refusals and a socket that does not answer, as one line each."""
        try:
            yield
        except APIError as exc:
            raise ReplicatorError(
                f"Docker engine: {what} answered {exc.status_code}: {exc.explanation}"
            ) from exc
        except (DockerException, requests.ConnectionError) as exc:
            raise ReplicatorError(
                f"the Docker engine at {self.socket} did not answer ({what}: {exc}); "
                f"mount the socket into this container (docker/compose.supervised.yml) "
                f"or unset ${LAUNCHER_ENV}"
            ) from exc


def _worker(container: Mapping[str, Any]) -> Worker:
    return Worker(
        name=str(container["Names"][0]).lstrip("/"),
        config=_config_of(str(container["Command"]).split()),
        started_at=datetime.fromtimestamp(int(container["Created"]), tz=UTC),
        where=f"container {str(container['Id'])[:12]}",
    )


def _where(container: Mapping[str, Any]) -> str:
    return f"container {str(container['Id'])[:12]}"


def _config_of(command: list[str]) -> Path:
    """The `--config` of a `replicator run` command line."""
    config = config_option(command)
    if config is not None:
        return config
    raise ReplicatorError(
        f"worker container runs {' '.join(command)!r}, not replicator run --config"
    )
