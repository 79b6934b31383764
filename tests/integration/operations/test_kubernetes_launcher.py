"""`KubernetesLauncher` against a real Kubernetes API server (tests/helpers/kube.py: etcd and
kube-apiserver built by `make setup`, RBAC on), as the chart's launcher ServiceAccount:

- each test renders the replicator chart (deploy/helm/replicator/) with its launcher RBAC
  on (`launcher.enabled`) into a namespace of its own and creates it there, beside a
  Deployment of something else that the launcher's selector must leave alone;
- the launcher authenticates with a real token of the launcher's ServiceAccount (the
  TokenRequest API, as the kubelet gets one for a pod), through a kubeconfig file and the
  official client's own loading, so the API server's RBAC decides every call;
- what is checked is the stored Deployment, read back as the admin: replicas (set
  through the `scale` subresource, which the managed fields record), the pod template's
  `kubectl.kubernetes.io/restartedAt`, the launcher's stop marks, and that `stop` leaves
  the Deployment in place; the Deployment of another namespace is refused by the API
  server (403), and the message names what is missing and never the token.

There is no controller manager, scheduler or kubelet: no ReplicaSet or Pod is made and a
Deployment's status stays empty, so where a test needs a worker alive it writes the status
the Deployment controller would (`availableReplicas`, through the status subresource, as
the admin). That `workers` selects the chart's Deployments and no other, and that `alive`,
`scale`, `restart` and `restart_dead` act on real pods and read their readiness, is
tested on a real node: tests/integration/deploy/test_kube_node.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from replicator.errors import ReplicatorError
from replicator.operations import launcher_from_environment
from replicator.operations.kubernetes_launcher import (
    RESTARTED_AT,
    STOPPED_AT,
    STOPPED_REPLICAS,
    KubernetesLauncher,
)

from helpers.kube import ApiServer, Kube, api_server, render

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "deploy" / "helm" / "replicator"
LAUNCHER_SA = "airflow-launcher"
WORKER = "dr-replicator"
CONFIG = Path("/etc/replicator/mm2.properties")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """One API server for the module (it takes about 20 s to start)."""
    with api_server(tmp_path_factory.mktemp("kube")) as started:
        yield started


@dataclass
class Release:
    """The chart installed in `namespace`, and a kubeconfig of its launcher."""

    kube: Kube = field(repr=False)  # the admin (its repr holds the admin token)
    namespace: str
    kubeconfig: Path
    token: str = field(repr=False)

    def environ(self, **more: str) -> dict[str, str]:
        return {"KUBECONFIG": str(self.kubeconfig), **more}

    def launcher(self, **more: str) -> KubernetesLauncher:
        return KubernetesLauncher.from_environment(self.environ(**more))

    def deployment(self, name: str = WORKER) -> dict:
        path = self.kube.path("apps/v1", "Deployment", self.namespace, name)
        response = self.kube.request("GET", path)
        assert response.status_code == 200, response.text
        return response.json()

    def set_available(self, replicas: int, name: str = WORKER) -> None:
        """Write the status the Deployment controller would (there is none here)."""
        path = self.kube.path("apps/v1", "Deployment", self.namespace, name) + "/status"
        status = {
            "replicas": replicas,
            "updatedReplicas": replicas,
            "readyReplicas": replicas,
            "availableReplicas": replicas,
        }
        response = self.kube.request(
            "PATCH",
            path,
            json={"status": status},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert response.status_code == 200, response.text

    def scale_as_admin(self, replicas: int) -> None:
        path = self.kube.path("apps/v1", "Deployment", self.namespace, WORKER) + "/scale"
        response = self.kube.request(
            "PATCH",
            path,
            json={"spec": {"replicas": replicas}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert response.status_code == 200, response.text


def _create(kube: Kube, namespace: str, obj: dict) -> None:
    response = kube.create(obj, namespace)
    assert response.status_code == 201, (
        f"{obj['kind']} {obj['metadata']['name']}: {response.status_code} {response.text}"
    )


def _other_deployment() -> dict:
    """A Deployment the launcher's selector does not select (another application)."""
    labels = {"app.kubernetes.io/name": "postgres"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "postgres", "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "postgres", "image": "postgres:17"}]},
            },
        },
    }


def _install(server: ApiServer, namespace: str, folder: Path) -> Release:
    kube = server.kube
    folder.mkdir(parents=True, exist_ok=True)
    values = folder / "values.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                "replicas": 2,
                "launcher": {"enabled": True, "serviceAccount": {"name": LAUNCHER_SA}},
                "serviceMonitor": {"enabled": False},
            }
        )
    )
    kube.create_namespace(namespace)
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": LAUNCHER_SA}}
    for obj in [sa, _other_deployment(), *render(CHART, "dr", namespace, server.helm_home, values)]:
        _create(kube, namespace, obj)
    token_path = kube.path("v1", "ServiceAccount", namespace, LAUNCHER_SA) + "/token"
    answer = kube.request(
        "POST",
        token_path,
        json={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        },
    )
    assert answer.status_code == 201, answer.text
    token = answer.json()["status"]["token"]
    kubeconfig = folder / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "test",
                        "cluster": {"server": kube.url, "certificate-authority": str(kube.ca_file)},
                    }
                ],
                "users": [{"name": LAUNCHER_SA, "user": {"token": token}}],
                "contexts": [
                    {
                        "name": "launcher",
                        "context": {"cluster": "test", "user": LAUNCHER_SA, "namespace": namespace},
                    }
                ],
                "current-context": "launcher",
            }
        )
    )
    kubeconfig.chmod(0o600)
    return Release(kube, namespace, kubeconfig, token)


@pytest.fixture
def release(server: ApiServer, tmp_path: Path, request: pytest.FixtureRequest) -> Release:
    """The chart in a namespace named after the test."""
    namespace = request.node.name.removeprefix("test_").replace("_", "-")[:50].strip("-")
    return _install(server, namespace, tmp_path)


def _restarted_at(deployment: dict) -> str | None:
    annotations = deployment["spec"]["template"]["metadata"].get("annotations") or {}
    return annotations.get(RESTARTED_AT)


def _marks(deployment: dict) -> dict[str, str]:
    annotations = deployment["metadata"].get("annotations") or {}
    return {k: v for k, v in annotations.items() if k in (STOPPED_AT, STOPPED_REPLICAS)}


def test_start_scale_restart_stop_act_on_the_deployment(release: Release) -> None:
    launcher = release.launcher()
    before = datetime.now(UTC) - timedelta(seconds=1)

    started = launcher.start(WORKER, CONFIG)

    assert (started.name, started.action, started.config) == (WORKER, "restarted", CONFIG)
    stored = release.deployment()
    assert stored["spec"]["replicas"] == 2  # the replicas it had
    first = _restarted_at(stored)
    assert first is not None
    assert datetime.fromisoformat(first.replace("Z", "+00:00")) >= before

    scaled = launcher.scale(WORKER, 3)
    assert scaled.where == f"deployment {release.namespace}/{WORKER} (3 replicas)"
    stored = release.deployment()
    assert stored["spec"]["replicas"] == 3
    # Through the scale subresource (what the least-privilege Role allows), as the
    # API server's field management records it.
    assert "scale" in {entry.get("subresource") for entry in stored["metadata"]["managedFields"]}
    assert _restarted_at(stored) == first  # scaling does not roll the pods

    restarted = launcher.restart(WORKER)
    assert restarted.action == "restarted"
    stored = release.deployment()
    second = _restarted_at(stored)
    assert second is not None and second > first
    assert stored["spec"]["replicas"] == 3

    release.set_available(3)
    assert launcher.stop(WORKER) is True  # it had available replicas
    stored = release.deployment()  # still there: the chart owns it
    assert stored["spec"]["replicas"] == 0
    assert _marks(stored)[STOPPED_REPLICAS] == "3"
    assert STOPPED_AT in _marks(stored)
    assert launcher.workers() == []  # no longer managed: the supervisor leaves it alone
    assert launcher.alive(WORKER) is False  # the old status does not count at 0 replicas
    assert launcher.stop(WORKER) is False
    assert release.deployment()["spec"]["replicas"] == 0

    again = launcher.start(WORKER, CONFIG)
    assert again.action == "started"
    stored = release.deployment()
    assert stored["spec"]["replicas"] == 3  # what it had when stopped
    assert _marks(stored) == {}
    assert _restarted_at(stored) > second
    assert [w.name for w in launcher.workers()] == [WORKER]

    # The postgres Deployment is untouched by all of it.
    assert release.deployment("postgres")["spec"]["replicas"] == 1
    assert "annotations" not in release.deployment("postgres")["spec"]["template"]["metadata"]


def test_what_the_launcher_refuses(release: Release) -> None:
    launcher = release.launcher()
    with pytest.raises(ReplicatorError, match=r"is not a replicator worker: the launcher's sel"):
        launcher.start("postgres", CONFIG)
    with pytest.raises(ReplicatorError, match=r"no-such does not exist .*\(helm install\)"):
        launcher.start("no-such", CONFIG)
    with pytest.raises(ReplicatorError, match=r"runs --config /etc/replicator/mm2.properties"):
        launcher.start(WORKER, Path("/somewhere/else.properties"))
    with pytest.raises(ReplicatorError, match=r"stop the worker to take it to 0"):
        launcher.scale(WORKER, 0)
    with pytest.raises(ReplicatorError, match=r"not a Kubernetes Deployment name"):
        launcher.alive("Not_A_Name")
    assert launcher.stop("no-such") is False
    launcher.stop(WORKER)
    with pytest.raises(ReplicatorError, match=r"has 0 replicas: nothing to restart"):
        launcher.restart(WORKER)
    # Nothing of it changed the Deployment beyond the stop.
    assert release.deployment()["spec"]["replicas"] == 0
    assert _restarted_at(release.deployment()) is None


def test_another_namespace_is_refused_by_rbac(
    server: ApiServer, release: Release, tmp_path: Path
) -> None:
    elsewhere = _install(server, "elsewhere", tmp_path / "elsewhere")
    # The first release's launcher token, pointed at the other namespace.
    launcher = release.launcher(REPLICATOR_KUBE_NAMESPACE=elsewhere.namespace)

    with pytest.raises(ReplicatorError) as listing:
        launcher.workers()
    with pytest.raises(ReplicatorError) as scaling:
        launcher.scale(WORKER, 5)

    for refused in (listing, scaling):
        message = str(refused.value)
        assert "answered 403 Forbidden" in message
        assert f"namespace {elsewhere.namespace}" in message
        assert f'User "system:serviceaccount:{release.namespace}:{LAUNCHER_SA}"' in message
        assert "launcher.enabled=true" in message and "$REPLICATOR_KUBE_NAMESPACE" in message
        assert release.token not in message and release.token not in repr(launcher)
        assert "\n" not in message
    assert "may not list deployments" in str(listing.value)
    assert elsewhere.deployment()["spec"]["replicas"] == 2  # untouched


def test_supervision_restarts_a_deployment_scaled_to_zero_by_someone_else(
    release: Release,
) -> None:
    launcher = release.launcher(REPLICATOR_KUBE_REPLICAS="5")
    release.set_available(2)
    assert launcher.restart_dead(lambda worker: True) == []  # alive: left alone

    release.scale_as_admin(0)  # `kubectl scale --replicas=0`, not the launcher's stop
    release.set_available(0)  # as the Deployment controller reports it once pods are gone
    (worker,) = launcher.workers()  # still managed, and dead
    assert not launcher.alive(worker.name)
    assert launcher.restart_dead(lambda worker: False) == []  # its flows are not wanted
    assert release.deployment()["spec"]["replicas"] == 0

    (result,) = launcher.restart_dead(lambda worker: True)

    assert (result.name, result.action, result.config) == (WORKER, "started", CONFIG)
    stored = release.deployment()
    assert stored["spec"]["replicas"] == 2  # the chart's replicas (its annotation), not 5
    assert _restarted_at(stored) is not None
    # No kubelet: still nothing available. Just started: starting, not dead, for
    # REPLICATOR_KUBE_START_GRACE_S (180 s by default).
    assert launcher.restart_dead(lambda worker: True) == []
    impatient = release.launcher(REPLICATOR_KUBE_START_GRACE_S="0")
    (again,) = impatient.restart_dead(lambda worker: True)
    assert again.action == "restarted"
    assert _restarted_at(release.deployment()) > _restarted_at(stored)

    launcher.stop(WORKER)  # stopped through the launcher: not restarted
    assert impatient.restart_dead(lambda worker: True) == []
    assert release.deployment()["spec"]["replicas"] == 0

    # A Deployment without the chart's replicas annotation (not from the chart, or an
    # older one) scaled to 0 by someone else: $REPLICATOR_KUBE_REPLICAS.
    path = release.kube.path("apps/v1", "Deployment", release.namespace, WORKER)
    unmarked = {"metadata": {"annotations": dict.fromkeys(_ANNOTATIONS)}}
    response = release.kube.request(
        "PATCH", path, json=unmarked, headers={"Content-Type": "application/merge-patch+json"}
    )
    assert response.status_code == 200, response.text
    (result,) = impatient.restart_dead(lambda worker: True)
    assert result.action == "started"
    assert release.deployment()["spec"]["replicas"] == 1  # the default of REPLICATOR_KUBE_REPLICAS


#: The launcher's stop marks and the chart's replicas, removed by a merge patch of nulls.
_ANNOTATIONS = (
    "replicator.dr/stopped-at",
    "replicator.dr/stopped-replicas",
    "replicator.dr/replicas",
)


def test_the_supervisor_chooses_it_from_the_environment(
    release: Release, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in release.environ(
        REPLICATOR_LAUNCHER="kubernetes", REPLICATOR_KUBE_NAMESPACE=release.namespace
    ).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)

    launcher = launcher_from_environment(state_url=None)

    assert isinstance(launcher, KubernetesLauncher)
    assert [w.name for w in launcher.workers()] == [WORKER]
    assert release.token not in repr(launcher)
