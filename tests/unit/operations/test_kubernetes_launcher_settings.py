"""`KubernetesLauncher`'s configuration from the environment and its messages, without an
API server (tests/integration/operations/test_kubernetes_launcher.py runs it against one):
the namespace from the variable, the kubeconfig's context or the pod; values that are
refused with the variable's name and the fix; the API server's refusals as one line with
the fix and no token; the launcher chosen by `$REPLICATOR_LAUNCHER`, with the Docker and
Kubernetes clients loaded only when chosen."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from replicator.errors import ReplicatorError
from replicator.operations.kubernetes_launcher import (
    DEFAULT_REPLICAS,
    DEFAULT_SELECTOR,
    DEFAULT_START_GRACE_S,
    KubernetesLauncher,
    KubernetesSettings,
    api_error,
)
from replicator.operations.launcher_choice import launcher_from_environment
from replicator.operations.launchers import LocalProcessLauncher

TOKEN = "sha256~not-a-real-token-but-secret-all-the-same"


def _kubeconfig(folder: Path, server: str = "https://127.0.0.1:6443", **context: str) -> Path:
    path = folder / "kubeconfig"
    contexts = [
        {"name": "main", "context": {"cluster": "c", "user": "u", **context}},
        {"name": "other", "context": {"cluster": "c", "user": "u", "namespace": "other-ns"}},
    ]
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": TOKEN}}],
                "contexts": contexts,
                "current-context": "main",
            }
        )
    )
    return path


def test_namespace_from_the_variable_the_context_or_the_pod(tmp_path: Path) -> None:
    kubeconfig = str(_kubeconfig(tmp_path, namespace="from-context"))

    settings = KubernetesSettings.from_environment({"KUBECONFIG": kubeconfig})
    assert (settings.namespace, settings.in_cluster) == ("from-context", False)
    assert settings.selector == DEFAULT_SELECTOR
    assert settings.default_replicas == DEFAULT_REPLICAS
    assert settings.start_grace_s == DEFAULT_START_GRACE_S

    named = KubernetesSettings.from_environment(
        {"KUBECONFIG": kubeconfig, "REPLICATOR_KUBE_CONTEXT": "other"}
    )
    assert (named.namespace, named.context) == ("other-ns", "other")

    given = KubernetesSettings.from_environment(
        {
            "KUBECONFIG": kubeconfig,
            "REPLICATOR_KUBE_NAMESPACE": "kafka-dr",
            "REPLICATOR_KUBE_SELECTOR": "app.kubernetes.io/instance=dr",
            "REPLICATOR_KUBE_REPLICAS": "3",
            "REPLICATOR_KUBE_START_GRACE_S": "30",
        }
    )
    assert (given.namespace, given.selector) == ("kafka-dr", "app.kubernetes.io/instance=dr")
    assert (given.default_replicas, given.start_grace_s) == (3, 30.0)

    pod_namespace = tmp_path / "namespace"
    pod_namespace.write_text("airflow\n")
    in_pod = KubernetesSettings.from_environment(
        {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, pod_namespace=pod_namespace
    )
    assert (in_pod.namespace, in_pod.in_cluster) == ("airflow", True)


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({}, r"needs a namespace: set \$REPLICATOR_KUBE_NAMESPACE to the replicator chart's"),
        ({"REPLICATOR_KUBE_NAMESPACE": "Kafka_DR"}, r"is not a Kubernetes namespace name"),
        (
            {"REPLICATOR_KUBE_NAMESPACE": "dr", "REPLICATOR_KUBE_REPLICAS": "0"},
            r"\$REPLICATOR_KUBE_REPLICAS='0' is not a whole number of at least 1",
        ),
        (
            {"REPLICATOR_KUBE_NAMESPACE": "dr", "REPLICATOR_KUBE_REPLICAS": "two"},
            r"\$REPLICATOR_KUBE_REPLICAS='two'",
        ),
        (
            {"REPLICATOR_KUBE_NAMESPACE": "dr", "REPLICATOR_KUBE_START_GRACE_S": "-5"},
            r"\$REPLICATOR_KUBE_START_GRACE_S='-5' is not a number of seconds",
        ),
        (
            {"REPLICATOR_KUBE_NAMESPACE": "dr", "REPLICATOR_KUBE_START_GRACE_S": "nan"},
            r"\$REPLICATOR_KUBE_START_GRACE_S='nan'",
        ),
        (
            {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "REPLICATOR_KUBE_CONTEXT": "main"},
            r"names a kubeconfig context, but this process runs in a pod",
        ),
    ],
)
def test_refused_settings_name_the_variable(
    tmp_path: Path, environ: dict[str, str], message: str
) -> None:
    environ = {"KUBECONFIG": str(tmp_path / "missing"), **environ}
    with pytest.raises(ReplicatorError, match=message):
        KubernetesSettings.from_environment(environ, pod_namespace=tmp_path / "no-namespace")


def test_a_missing_kubeconfig_names_the_file_and_the_fix(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    settings = KubernetesSettings("kafka-dr", kubeconfig=str(missing))
    with pytest.raises(ReplicatorError) as refused:
        settings.api_client()
    message = str(refused.value)
    assert f"cannot load its credentials from kubeconfig {missing}" in message
    assert "set $KUBECONFIG to a kubeconfig file" in message


def test_no_token_in_reprs_and_a_server_that_does_not_answer(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = f"https://127.0.0.1:{port}"
    environ = {"KUBECONFIG": str(_kubeconfig(tmp_path, server, namespace="kafka-dr"))}
    launcher = KubernetesLauncher.from_environment(environ)
    assert TOKEN not in repr(launcher)
    assert repr(launcher).startswith(f"KubernetesLauncher(server='{server}'")

    with pytest.raises(ReplicatorError) as refused:
        launcher.workers()
    message = str(refused.value)
    assert message.startswith(f"the Kubernetes API server at {server} did not answer")
    assert "namespace kafka-dr" in message and TOKEN not in message
    assert "\n" not in message


def _refusal(status: int, reason: str, message: str) -> ApiException:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message}
    return ApiException(status=status, reason=reason, body=json.dumps(body))


def test_api_refusals_are_one_line_with_the_fix() -> None:
    forbidden = api_error(
        _refusal(
            403,
            "Forbidden",
            'deployments.apps "dr-replicator" is forbidden: User '
            '"system:serviceaccount:airflow:scheduler" cannot patch resource '
            '"deployments/scale" in API group "apps" in the namespace "kafka-dr"',
        ),
        "scale Deployment dr-replicator to 2",
        "kafka-dr",
        "https://10.0.0.1:443",
        verb="patch",
        resource="deployments/scale",
    )
    assert forbidden.startswith(
        "Kubernetes API https://10.0.0.1:443: scale Deployment dr-replicator to 2 in "
        "namespace kafka-dr answered 403 Forbidden: deployments.apps"
    )
    assert "may not patch deployments/scale (group apps)" in forbidden
    assert "launcher.enabled=true" in forbidden and "launcher.serviceAccount.name" in forbidden

    unauthorized = api_error(
        _refusal(401, "Unauthorized", "Unauthorized"), "list", "kafka-dr", "https://k"
    )
    assert "answered 401 Unauthorized: Unauthorized; the credentials were not accepted" in (
        unauthorized
    )
    missing = api_error(_refusal(404, "Not Found", 'namespaces "x" not found'), "list", "x", "s")
    assert "set $REPLICATOR_KUBE_NAMESPACE to the replicator chart's release namespace" in missing
    tls = api_error(
        ApiException(status=0, reason="SSLError\ncertificate verify failed"), "list", "x", "s"
    )
    assert "failed before an answer (SSLError certificate verify failed)" in tls
    for message in (forbidden, unauthorized, missing, tls):
        assert "\n" not in message


def test_the_launcher_is_chosen_by_the_environment(tmp_path: Path) -> None:
    assert isinstance(launcher_from_environment(None, {}), LocalProcessLauncher)
    assert isinstance(
        launcher_from_environment(None, {"REPLICATOR_LAUNCHER": "local"}), LocalProcessLauncher
    )
    with pytest.raises(ReplicatorError, match=r"'podman' is not a launcher; use one of local, "):
        launcher_from_environment(None, {"REPLICATOR_LAUNCHER": "podman"})
    with pytest.raises(ReplicatorError, match=r"REPLICATOR_KUBE_NAMESPACE"):
        launcher_from_environment(
            None,
            {"REPLICATOR_LAUNCHER": "kubernetes", "KUBECONFIG": str(tmp_path / "missing")},
        )
    chosen = launcher_from_environment(
        None,
        {
            "REPLICATOR_LAUNCHER": "kubernetes",
            "KUBECONFIG": str(_kubeconfig(tmp_path, namespace="kafka-dr")),
        },
    )
    assert isinstance(chosen, KubernetesLauncher) and chosen.namespace == "kafka-dr"


def test_the_clients_load_only_when_chosen() -> None:
    """`import replicator.operations` (every worker, every Airflow task) loads neither
    the Docker nor the Kubernetes client."""
    code = (
        "import sys, replicator.operations; "
        "print(sorted(m for m in ('docker', 'kubernetes') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize("extra", ["docker", "kubernetes"])
def test_a_launcher_without_its_client_names_the_extra(
    extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine image has neither client: choosing its launcher there is a clear error."""
    monkeypatch.setitem(sys.modules, extra, None)  # `import extra` now fails as if absent
    monkeypatch.delitem(sys.modules, f"replicator.operations.{extra}_launcher", raising=False)
    with pytest.raises(ReplicatorError) as caught:
        launcher_from_environment(None, {"REPLICATOR_LAUNCHER": extra})
    assert f"install replicator[{extra}]" in str(caught.value)
