"""Which launcher the supervisor restarts workers with: `$REPLICATOR_LAUNCHER`.

`local` (or unset): `LocalProcessLauncher`, the processes `make run` starts; `docker`:
`DockerLauncher`, the replicator containers of a compose project; `kubernetes`:
`KubernetesLauncher`, the replicator chart's Deployments. The Docker and Kubernetes
launchers are imported only when chosen: their client libraries are not loaded by a
process that does not use them (a `replicator run` worker, every other Airflow task).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from replicator.errors import ReplicatorError
from replicator.operations.launchers import Launcher, LocalProcessLauncher

LAUNCHER_ENV = "REPLICATOR_LAUNCHER"
LAUNCHERS = ("local", "docker", "kubernetes")


def launcher_from_environment(
    state_url: str | None, environ: Mapping[str, str] = os.environ
) -> Launcher:
    """The launcher `$REPLICATOR_LAUNCHER` names (default `local`); `state_url` is for the
    local launcher's workers (the others' workers have their own)."""
    choice = environ.get(LAUNCHER_ENV, "").strip() or "local"
    if choice == "local":
        return LocalProcessLauncher(state_url=state_url)
    if choice == "docker":
        with _extra("docker"):
            from replicator.operations.docker_launcher import DockerLauncher  # noqa: PLC0415

        return DockerLauncher.from_environment(environ)
    if choice == "kubernetes":
        with _extra("kubernetes"):
            from replicator.operations.kubernetes_launcher import (  # noqa: PLC0415
                KubernetesLauncher,
            )

        return KubernetesLauncher.from_environment(environ)
    raise ReplicatorError(
        f"${LAUNCHER_ENV}={choice!r} is not a launcher; use one of {', '.join(LAUNCHERS)}"
    )


@contextmanager
def _extra(name: str) -> Iterator[None]:
    """The launcher's client library is the `name` extra: a clear error without it."""
    try:
        yield
    except ModuleNotFoundError as exc:
        raise ReplicatorError(
            f"${LAUNCHER_ENV}={name} needs the {name} client ({exc.name} is not installed): "
            f"install replicator[{name}] (the full image has it; the engine image does not)"
        ) from exc
