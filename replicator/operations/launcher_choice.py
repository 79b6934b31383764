"""Which launcher the supervisor restarts workers with: `$REPLICATOR_LAUNCHER`.

`local` (or unset): `LocalProcessLauncher`, the processes `make run` starts; `docker`:
`DockerLauncher`, the replicator containers of a compose project; `kubernetes`:
`KubernetesLauncher`, the replicator chart's Deployments. The Docker and Kubernetes
launchers are imported only when chosen: their client libraries are not loaded by a
process that does not use them (a `replicator run` worker, every other Airflow task).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

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
        from replicator.operations.docker_launcher import DockerLauncher  # noqa: PLC0415

        return DockerLauncher.from_environment(environ)
    if choice == "kubernetes":
        from replicator.operations.kubernetes_launcher import KubernetesLauncher  # noqa: PLC0415

        return KubernetesLauncher.from_environment(environ)
    raise ReplicatorError(
        f"${LAUNCHER_ENV}={choice!r} is not a launcher; use one of {', '.join(LAUNCHERS)}"
    )
