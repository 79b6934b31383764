"""The Helm chart (deploy/helm/replicator/) against a real Kubernetes API server (issue 28):

- `helm lint` is clean, with the default values and with the test's values file;
- `helm template` with the default values, and with a values file setting replicas,
  Secrets, the state store from a Secret and the launcher's RBAC (ServiceMonitor off:
  the API server has no Prometheus Operator CRDs), renders objects that the API server
  creates in a namespace of their own with strict server-side field validation;
- RBAC as the API server enforces it: the launcher's ServiceAccount scales the
  Deployment through its `scale` subresource and restarts it (a patch of its pod
  template), and is refused (403) deleting or reading a Secret, creating or deleting a
  Deployment, and touching the Deployment of another namespace; the engine's
  ServiceAccount is refused everything;
- what the chart refuses to render (a second metrics port, a state store set twice, a
  launcher without its ServiceAccount) and the ServiceMonitor it renders when asked.
- the readiness probe's script against the engine's own metric families, served by
  prometheus_client as `replicator run` serves them: ready only when every worker loop
  runs and every cluster answers.
- the optional verification server (`verificationServer`): its Deployment, Service and
  NetworkPolicy created with strict validation, the full image running
  `replicator verification-server` with the workers' configuration and Secrets at the
  workers' paths and the shared results claim, reachable only from Airflow's pods; off by
  default, refused without its claim.

No Pod runs here (the API server alone: tests/helpers/kube.py); the chart's Pods run
on the single node of tests/integration/deploy/test_kube_node.py.
httpx with the admin token and impersonation headers is the client: it is already a
dependency, and the tests need raw status codes and headers, not a typed client.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from replicator.config import load_config
from replicator.operations.kubernetes_launcher import DEFAULT_SELECTOR

from helpers.kafka import free_port_pairs
from helpers.kube import ApiServer, Kube, api_server, helm, render

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "deploy" / "helm" / "replicator"
DEFAULTS_NS, CUSTOM_NS = "replicator-defaults", "replicator-custom"
LAUNCHER_SA = "airflow-launcher"

CUSTOM_VALUES = {
    "replicas": 3,
    "secrets": ["source-user", "source-cluster-ca"],
    "stateStore": {"existingSecret": {"name": "state-store", "key": "url"}},
    "launcher": {"enabled": True, "serviceAccount": {"name": LAUNCHER_SA}},
    "serviceMonitor": {"enabled": False},
    "config": (
        "clusters = source, target\n"
        "source.bootstrap.servers = source-kafka-bootstrap:9093\n"
        "source.security.protocol = SASL_SSL\n"
        "source.sasl.mechanism = SCRAM-SHA-512\n"
        "source.ssl.truststore.type = PEM\n"
        "source.ssl.truststore.location = /etc/replicator/secrets/source-cluster-ca/ca.crt\n"
        "source.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule "
        'required username="source-user" '
        'password="${directory:/etc/replicator/secrets/source-user:password}";\n'
        "target.bootstrap.servers = target-kafka-bootstrap:9092\n"
        "source->target.enabled = true\n"
        "source->target.topics = orders.*\n"
        "metrics.port = 9404\n"
    ),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """One API server for the module (it takes about 20 s to start)."""
    with api_server(tmp_path_factory.mktemp("kube")) as started:
        yield started


@pytest.fixture(scope="module")
def values_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("values") / "values.yaml"
    path.write_text(yaml.safe_dump(CUSTOM_VALUES))
    return path


def _by_kind(objects: list[dict]) -> dict[str, list[dict]]:
    kinds: dict[str, list[dict]] = {}
    for obj in objects:
        kinds.setdefault(obj["kind"], []).append(obj)
    return kinds


def _apply(kube: Kube, namespace: str, objects: list[dict]) -> None:
    kube.create_namespace(namespace)
    for obj in objects:
        response = kube.create(obj, namespace)
        assert response.status_code == 201, (
            f"{obj['kind']} {obj['metadata']['name']}: {response.status_code} {response.text}"
        )


@pytest.fixture(scope="module")
def defaults(server: ApiServer) -> list[dict]:
    """The chart with its default values, created in DEFAULTS_NS."""
    objects = render(CHART, "dr", DEFAULTS_NS, server.helm_home)
    _apply(server.kube, DEFAULTS_NS, objects)
    return objects


@pytest.fixture(scope="module")
def custom(server: ApiServer, values_file: Path) -> list[dict]:
    """The chart with CUSTOM_VALUES, created in CUSTOM_NS beside the Secrets it mounts
    and the launcher's ServiceAccount (which the chart does not create)."""
    kube = server.kube
    objects = render(CHART, "dr", CUSTOM_NS, server.helm_home, values_file)
    kube.create_namespace(CUSTOM_NS)
    existing = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": LAUNCHER_SA}},
        *(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": name},
                "stringData": {"password": "not-a-real-one", "ca.crt": "-", "url": "sqlite://"},
            }
            for name in ("source-user", "source-cluster-ca", "state-store")
        ),
    ]
    for obj in existing + objects:
        response = kube.create(obj, CUSTOM_NS)
        assert response.status_code == 201, (
            f"{obj['kind']} {obj['metadata']['name']}: {response.status_code} {response.text}"
        )
    return objects


def test_lint(server: ApiServer, values_file: Path) -> None:
    verification = ["--set", "verificationServer.enabled=true"]
    verification += ["--set", "verificationServer.resultsClaim=replicator-verification"]
    for extra in ([], ["--values", str(values_file)], verification):
        result = helm("lint", "--strict", str(CHART), *extra, home=server.helm_home)
        assert "0 chart(s) failed" in result.stdout, result.stdout


def test_defaults_are_created_and_least_privileged(server: ApiServer, defaults: list[dict]) -> None:
    kinds = _by_kind(defaults)
    assert sorted(kinds) == [
        "ConfigMap",
        "Deployment",
        "Job",  # `replicator init`, a hook (tests/integration/deploy/test_helm_init_job.py)
        "PodDisruptionBudget",
        "Role",
        "RoleBinding",
        "Service",
        "ServiceAccount",
    ]
    stored = server.kube.request(
        "GET", server.kube.path("apps/v1", "Deployment", DEFAULTS_NS, "dr-replicator")
    ).json()
    assert stored["spec"]["replicas"] == 2
    pod = stored["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    assert container["command"] == [
        "replicator",
        "run",
        "--config",
        "/etc/replicator/mm2.properties",
    ]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/metrics"
    probe = container["readinessProbe"]["exec"]["command"]
    assert probe[:3] == ["python3", "-m", "replicator.probe"]
    assert "env" not in container or not container["env"]  # no state store set: none passed
    (role,) = kinds["Role"]
    assert role["rules"] == []
    (pdb,) = kinds["PodDisruptionBudget"]
    assert pdb["spec"]["maxUnavailable"] == 1

    # The mounted configuration is the engine's: the chart added the metrics port.
    [config_map] = [c for c in kinds["ConfigMap"] if c["metadata"]["name"] == "dr-replicator"]
    config = server.helm_home.parent / "defaults.properties"
    config.write_text(config_map["data"]["mm2.properties"])
    (flow,) = load_config(config).flows
    assert flow.metrics_port == 9404 == container["ports"][0]["containerPort"]
    # The verification server is off by default: nothing of it is rendered.
    assert not [o for o in defaults if "verification" in o["metadata"]["name"]]


def test_custom_values_mount_secrets_and_state_store(server: ApiServer, custom: list[dict]) -> None:
    kube = server.kube
    stored = kube.request(
        "GET", kube.path("apps/v1", "Deployment", CUSTOM_NS, "dr-replicator")
    ).json()
    assert stored["spec"]["replicas"] == 3
    (container,) = stored["spec"]["template"]["spec"]["containers"]
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    for name in ("source-user", "source-cluster-ca"):
        assert mounts[f"/etc/replicator/secrets/{name}"]["readOnly"] is True
    volumes = {v["name"]: v for v in stored["spec"]["template"]["spec"]["volumes"]}
    secret_volumes = [v["secret"] for v in volumes.values() if "secret" in v]
    assert [v["secretName"] for v in secret_volumes] == ["source-user", "source-cluster-ca"]
    assert {v["defaultMode"] for v in secret_volumes} == {0o440}  # values.yaml's 0440, octal
    (env,) = container["env"]
    assert env == {
        "name": "REPLICATOR_STATE_URL",
        "valueFrom": {"secretKeyRef": {"name": "state-store", "key": "url"}},
    }
    assert "ServiceMonitor" not in _by_kind(custom)
    assert sorted(r["metadata"]["name"] for r in _by_kind(custom)["Role"]) == [
        "dr-replicator",
        "dr-replicator-launcher",
    ]


def _scale(kube: Kube, namespace: str, replicas: int) -> int:
    path = kube.path("apps/v1", "Deployment", namespace, "dr-replicator") + "/scale"
    return kube.request(
        "PATCH",
        path,
        json={"spec": {"replicas": replicas}},
        headers={"Content-Type": "application/merge-patch+json"},
    ).status_code


def _restart(client: Any, deployment: str) -> Any:
    """A patch of the pod template's annotations, as `kubectl rollout restart` does."""
    annotations = {"kubectl.kubernetes.io/restartedAt": "now"}
    return client.request(
        "PATCH",
        deployment,
        json={"spec": {"template": {"metadata": {"annotations": annotations}}}},
        headers={"Content-Type": "application/strategic-merge-patch+json"},
    )


def test_launcher_scales_and_restarts_in_its_namespace_only(
    server: ApiServer, defaults: list[dict], custom: list[dict]
) -> None:
    admin = server.kube
    launcher = admin.as_user(f"system:serviceaccount:{CUSTOM_NS}:{LAUNCHER_SA}")
    deployment = launcher.path("apps/v1", "Deployment", CUSTOM_NS, "dr-replicator")

    assert _scale(launcher, CUSTOM_NS, 0) == 200  # stop
    # A Scale's spec leaves `replicas` out when it is 0 (omitempty).
    assert launcher.request("GET", deployment + "/scale").json()["spec"].get("replicas", 0) == 0
    assert _scale(launcher, CUSTOM_NS, 4) == 200  # start, scaled
    assert admin.request("GET", deployment).json()["spec"]["replicas"] == 4
    response = _restart(launcher, deployment)
    assert response.status_code == 200, response.text
    listed = launcher.request("GET", launcher.path("apps/v1", "Deployment", CUSTOM_NS))
    assert [d["metadata"]["name"] for d in listed.json()["items"]] == ["dr-replicator"]

    # Refused: Secrets, creating and deleting Deployments, another namespace.
    secret = launcher.path("v1", "Secret", CUSTOM_NS, "source-user")
    assert launcher.request("DELETE", secret).status_code == 403
    assert launcher.request("GET", secret).status_code == 403
    assert launcher.request("DELETE", deployment).status_code == 403
    created = launcher.create(
        {**admin.request("GET", deployment).json(), "metadata": {"name": "another"}}, CUSTOM_NS
    )
    assert created.status_code == 403, created.text
    assert _scale(launcher, DEFAULTS_NS, 0) == 403
    # Another Deployment of the namespace: listed, but its pod template (any image, any
    # ServiceAccount, any Secret of the namespace) is not the launcher's to patch.
    other = admin.create(
        {**admin.request("GET", deployment).json(), "metadata": {"name": "other-app"}}, CUSTOM_NS
    )
    assert other.status_code == 201, other.text
    other_path = launcher.path("apps/v1", "Deployment", CUSTOM_NS, "other-app")
    patched = _restart(launcher, other_path)
    assert patched.status_code == 403, patched.text
    assert launcher.request("GET", other_path).status_code == 403
    assert launcher.request("PATCH", other_path + "/scale", json={"spec": {"replicas": 0}},
                            headers={"Content-Type": "application/merge-patch+json"}
                            ).status_code == 403  # fmt: skip
    admin.request("DELETE", admin.path("apps/v1", "Deployment", CUSTOM_NS, "other-app"))
    elsewhere = launcher.path("apps/v1", "Deployment", DEFAULTS_NS, "dr-replicator")
    assert launcher.request("GET", elsewhere).status_code == 403
    assert admin.request("GET", elsewhere).json()["spec"]["replicas"] == 2


def test_engine_service_account_is_refused_everything(
    server: ApiServer, custom: list[dict]
) -> None:
    engine = server.kube.as_user(f"system:serviceaccount:{CUSTOM_NS}:dr-replicator")
    for path in (
        engine.path("apps/v1", "Deployment", CUSTOM_NS, "dr-replicator"),
        engine.path("apps/v1", "Deployment", CUSTOM_NS),
        engine.path("v1", "Secret", CUSTOM_NS, "source-user"),
        engine.path("v1", "ConfigMap", CUSTOM_NS, "dr-replicator"),
        engine.path("v1", "Pod", CUSTOM_NS),
        engine.path("v1", "Namespace", None),
    ):
        response = engine.request("GET", path)
        assert response.status_code == 403, f"GET {path}: {response.status_code}"
    assert _scale(engine, CUSTOM_NS, 1) == 403


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"config": "clusters = a, b\na->b.enabled = true\nmetrics.port = 9999\n"},
            "metrics.port = 9999 but values metrics.port is 9404",
        ),
        (
            {"config": "clusters = a, b\na->b.enabled = true\na->b.metrics.port = 9404\n"},
            "sets metrics.port per flow",
        ),
        (
            {"stateStore": {"url": "sqlite:///x", "existingSecret": {"name": "s"}}},
            "stateStore: set either url",
        ),
        ({"launcher": {"enabled": True}}, "launcher.serviceAccount.name"),
        # values.schema.json refuses it first, naming it.
        ({"probes": {"readiness": {"mode": "tcp"}}}, "/probes/readiness/mode"),
        # values.schema.json: wrong types and unknown keys, which rendered quietly before
        # (`replicas: 0`, port 0, a typo's ServiceMonitor left out).
        ({"replicas": "two"}, "at '/replicas': got string, want integer"),
        ({"metrics": {"port": "abc"}}, "at '/metrics/port': got string, want integer"),
        ({"servicemonitor": {"enabled": True}}, "additional properties 'servicemonitor'"),
        (
            {"podDisruptionBudget": {"unhealthyPodEvictionPolicy": "Never"}},
            "/podDisruptionBudget/unhealthyPodEvictionPolicy",
        ),
        # Names, as the pods' imagePullSecrets render them (objects rendered `map[...]`).
        ({"imagePullSecrets": [{"name": "regcred"}]}, "/imagePullSecrets/0"),
        # A policy that names no cluster would cut replication off.
        ({"networkPolicy": {"enabled": True}}, "needs networkPolicy.egress.clusters"),
        (
            {"networkPolicy": {"egress": {"clusters": [{"cidr": "10.0.0.0/8"}]}}},
            "missing property 'ports'",
        ),
        # A verification server needs the folder it shares with Airflow's tasks.
        ({"verificationServer": {"enabled": True}}, "verificationServer.resultsClaim"),
        # An empty selector would admit every pod of the namespace.
        (
            {
                "verificationServer": {
                    "enabled": True,
                    "resultsClaim": "replicator-verification",
                    "clientPodSelector": {"matchLabels": None, "matchExpressions": None},
                }
            },
            "verificationServer.clientPodSelector: an empty selector",
        ),
        ({"verificationServer": {"claim": "x"}}, "additional properties 'claim'"),
        ({"verificationServer": {"heap": "lots"}}, "/verificationServer/heap"),
    ],
)
def test_render_refuses(tmp_path: Path, values: dict, message: str) -> None:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    args = ["template", "dr", str(CHART), "--values", str(path)]
    result = helm(*args, home=tmp_path / "helm", check=False)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


def test_service_monitor_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump({"serviceMonitor": {"enabled": True}}))
    kinds = _by_kind(render(CHART, "dr", "monitoring", tmp_path / "helm", path))
    (monitor,) = kinds["ServiceMonitor"]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    assert monitor["spec"]["selector"]["matchLabels"] == kinds["Service"][0]["spec"]["selector"]


def test_network_policy_when_asked(server: ApiServer, tmp_path: Path) -> None:
    """The optional NetworkPolicy: the workers (not the init Job) may reach the clusters
    named, DNS and the extra peers, and be reached on the metrics port only; the API
    server accepts it with strict field validation."""
    values = {
        "imagePullSecrets": ["regcred"],
        "networkPolicy": {
            "enabled": True,
            "egress": {
                "clusters": [{"cidr": "10.0.12.0/24", "ports": [9093, 9094]}],
                "extra": [
                    {"to": [{"ipBlock": {"cidr": "10.0.30.5/32"}}], "ports": [{"port": 5432}]}
                ],
            },
            "ingress": {
                "metricsFrom": [
                    {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "mon"}}}
                ]
            },
        },
    }
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    objects = render(CHART, "dr", "netpol", tmp_path / "helm", path)
    kinds = _by_kind(objects)
    (policy,) = kinds["NetworkPolicy"]
    spec = policy["spec"]
    assert (
        spec["podSelector"]["matchLabels"]
        == kinds["Deployment"][0]["spec"]["selector"]["matchLabels"]
    )
    assert spec["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "engine"
    assert spec["ingress"] == [
        {
            "ports": [{"port": 9404, "protocol": "TCP"}],
            "from": values["networkPolicy"]["ingress"]["metricsFrom"],
        }
    ]
    clusters, extra, dns = spec["egress"]
    assert clusters == {
        "to": [{"ipBlock": {"cidr": "10.0.12.0/24"}}],
        "ports": [{"port": 9093, "protocol": "TCP"}, {"port": 9094, "protocol": "TCP"}],
    }
    assert extra == values["networkPolicy"]["egress"]["extra"][0]
    assert {p["port"] for p in dns["ports"]} == {53}
    pod = kinds["Deployment"][0]["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    server.kube.create_namespace("netpol")
    response = server.kube.create(policy, "netpol")
    assert response.status_code == 201, response.text


# The official Airflow chart's pod labels (its scheduler Deployment or StatefulSet, its
# workers' pod template and StatefulSet, and pods that must not connect), release `airflow`.
AIRFLOW_PODS = {
    component: {"tier": "airflow", "component": component, "release": "airflow"}
    for component in ("scheduler", "worker", "triggerer", "api-server", "dag-processor")
}


def _selects(selector: dict, labels: dict[str, str]) -> bool:
    """Whether a LabelSelector (matchLabels, matchExpressions) selects `labels`."""
    if any(labels.get(key) != value for key, value in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values")
        present = key in labels
        if not {
            "In": present and labels.get(key) in (values or []),
            "NotIn": not present or labels[key] not in (values or []),
            "Exists": present,
            "DoesNotExist": not present,
        }[operator]:
            return False
    return True


def test_verification_server_when_asked(server: ApiServer, tmp_path: Path) -> None:
    """The verification server: one pod of the full image running `replicator
    verification-server` on all interfaces, with the workers' configuration and Secrets at
    the workers' paths, the results claim at the run folder, the workers' security
    context and TCP probes on its port; a ClusterIP Service on that port; a NetworkPolicy
    admitting only Airflow's scheduler and worker pods, on that port. The API server
    creates all of it with strict field validation."""
    kube, namespace = server.kube, "verification"
    values = {
        "secrets": ["source-user", "source-cluster-ca"],
        "verificationServer": {
            "enabled": True,
            "resultsClaim": "replicator-verification",
            "port": 16002,
            "cores": 3,
        },
    }
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    objects = render(CHART, "dr", namespace, tmp_path / "helm", path)
    _apply(kube, namespace, objects)
    name = "dr-replicator-verification"
    assert sorted(o["kind"] for o in objects if o["metadata"]["name"] == name) == [
        "ConfigMap",
        "Deployment",
        "NetworkPolicy",
        "Service",
    ]

    def stored(api: str, kind: str, obj: str = name) -> dict:
        response = kube.request("GET", kube.path(api, kind, namespace, obj))
        assert response.status_code == 200, response.text
        return response.json()

    deployment = stored("apps/v1", "Deployment")
    workers = stored("apps/v1", "Deployment", "dr-replicator")
    assert deployment["spec"]["replicas"] == 1
    # Not a worker Deployment to the supervisor's KubernetesLauncher (its selector).
    launcher = dict(term.split("=") for term in DEFAULT_SELECTOR.split(","))
    assert _selects({"matchLabels": launcher}, workers["metadata"]["labels"])
    assert not _selects({"matchLabels": launcher}, deployment["metadata"]["labels"])
    pod = deployment["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"] == workers["spec"]["template"]["spec"]["securityContext"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001
    (container,) = pod["containers"]
    (worker,) = workers["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "replicator:0.1.0"  # the full image, not replicator-engine
    assert container["command"] == [
        "replicator",
        "verification-server",
        "--host",
        "0.0.0.0",
        "--port",
        "16002",
        "--cores",
        "3",
    ]
    assert container["securityContext"] == worker["securityContext"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["resources"]["limits"]["memory"] == "5Gi"
    ports = [(port["name"], port["containerPort"]) for port in container["ports"]]
    assert ports == [("spark-connect", 16002), ("suites", 16003)]  # the warm suites: + 1
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["tcpSocket"] == {"port": "spark-connect"}, probe

    # Mounts: the workers' configuration and Secrets at the workers' paths (the key and
    # trust stores the plan names), the shared claim at the run folder, a writable /tmp
    # (the working directory: the root file system is read-only).
    volumes = {v["name"]: v for v in pod["volumes"]}
    worker_volumes = {v["name"]: v for v in workers["spec"]["template"]["spec"]["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    worker_mounts = {m["mountPath"]: m for m in worker["volumeMounts"]}
    shared = ["/etc/replicator/mm2.properties"]
    shared += [f"/etc/replicator/secrets/{s}" for s in values["secrets"]]
    for mount_path in shared:
        mount, theirs = mounts[mount_path], worker_mounts[mount_path]
        assert mount == theirs, mount_path
        assert mount["readOnly"] is True
        assert volumes[mount["name"]] == worker_volumes[theirs["name"]], mount_path
    assert volumes[mounts["/etc/replicator/mm2.properties"]["name"]]["configMap"] == {
        "name": "dr-replicator",
        "defaultMode": 0o644,  # the API server's default
    }
    results = mounts["/opt/replicator/.data/verification"]
    assert results.get("readOnly", False) is False
    assert volumes[results["name"]]["persistentVolumeClaim"] == {
        "claimName": "replicator-verification"
    }
    assert "emptyDir" in volumes[mounts["/tmp"]["name"]]
    assert container["workingDir"] == "/tmp"
    # The heap, in the spark-defaults.conf spark-submit reads.
    (env,) = container["env"]
    assert env["name"] == "SPARK_CONF_DIR"
    spark_conf = volumes[mounts[env["value"]]["name"]]["configMap"]["name"]
    spark_defaults = stored("v1", "ConfigMap", spark_conf)["data"]["spark-defaults.conf"]
    assert "spark.driver.memory 3g" in spark_defaults.splitlines()

    # The Service: ClusterIP, the server's ports, its pod only (not the workers').
    service = stored("v1", "Service")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert _selects({"matchLabels": service["spec"]["selector"]}, pod_labels)
    worker_labels = workers["spec"]["template"]["metadata"]["labels"]
    assert not _selects({"matchLabels": service["spec"]["selector"]}, worker_labels)
    metrics = stored("v1", "Service", "dr-replicator-metrics")
    assert not _selects({"matchLabels": metrics["spec"]["selector"]}, pod_labels)
    assert [(p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [
        (16002, "spark-connect"),
        (16003, "suites"),
    ]

    # The NetworkPolicy: the server's pod, ingress on its ports from the client selector
    # only; its egress is not restricted (networkPolicy.enabled is off).
    policy = stored("networking.k8s.io/v1", "NetworkPolicy")["spec"]
    assert _selects(policy["podSelector"], pod_labels)
    assert not _selects(policy["podSelector"], worker_labels)
    assert policy["policyTypes"] == ["Ingress"]
    (rule,) = policy["ingress"]
    assert rule["ports"] == [
        {"port": 16002, "protocol": "TCP"},
        {"port": 16003, "protocol": "TCP"},
    ]
    (peer,) = rule["from"]
    assert list(peer) == ["podSelector"]  # this namespace's pods only
    clients = peer["podSelector"]
    admitted = sorted(c for c, labels in AIRFLOW_PODS.items() if _selects(clients, labels))
    assert admitted == ["scheduler", "worker"]
    assert not _selects(clients, worker_labels)
    assert not _selects(clients, {**AIRFLOW_PODS["scheduler"], "release": "other"})

    # With networkPolicy.enabled, the server's egress is the workers': the clusters, DNS.
    values["networkPolicy"] = {
        "enabled": True,
        "egress": {"clusters": [{"cidr": "10.0.12.0/24", "ports": [9093]}]},
    }
    path.write_text(yaml.safe_dump(values))
    policies = {
        p["metadata"]["name"]: p["spec"]
        for p in _by_kind(render(CHART, "dr", "verification-egress", tmp_path / "helm", path))[
            "NetworkPolicy"
        ]
    }
    ours, theirs = policies[name], policies["dr-replicator"]
    assert ours["policyTypes"] == ["Ingress", "Egress"]
    assert ours["egress"] == theirs["egress"]
    assert ours["ingress"] == [rule]


def test_grafana_dashboard_when_asked(tmp_path: Path) -> None:
    """The shipped dashboard as a ConfigMap Grafana's sidecar loads (its label), the
    same JSON as deploy/monitoring's."""
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump({"grafanaDashboard": {"enabled": True}}))
    kinds = _by_kind(render(CHART, "dr", "monitoring", tmp_path / "helm", path))
    [dashboard] = [
        c for c in kinds["ConfigMap"] if c["metadata"]["name"] == "dr-replicator-dashboard"
    ]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = ROOT / "deploy" / "monitoring" / "replicator-dashboard.json"
    assert json.loads(dashboard["data"]["replicator-dashboard.json"]) == json.loads(
        shipped.read_text(encoding="utf-8")
    )


def test_prometheus_rule_with_bounds_from_values(tmp_path: Path) -> None:
    """The shipped alert rules as a PrometheusRule, bounds and the runbook's address
    from values; still valid rules (promtool), naming no job."""
    path = tmp_path / "values.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "prometheusRule": {
                    "enabled": True,
                    "labels": {"release": "prometheus"},
                    "runbookBaseUrl": "https://docs.example/replicator/",
                    "thresholds": {"lagRecords": 50000, "checkpointAgeSeconds": 900},
                }
            }
        )
    )
    (rule,) = _by_kind(render(CHART, "dr", "monitoring", tmp_path / "helm", path))["PrometheusRule"]
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    alerts = {r["alert"]: r for group in rule["spec"]["groups"] for r in group["rules"]}
    assert "> 50000" in alerts["ReplicatorLagHigh"]["expr"]
    assert "50000 source records" in alerts["ReplicatorLagHigh"]["annotations"]["description"]
    assert "> 900" in alerts["ReplicatorCheckpointsStalled"]["expr"]
    assert "> 120" in alerts["ReplicatorHeartbeatsStalled"]["expr"]  # the default
    assert all(
        a["annotations"]["runbook_url"]
        == "https://docs.example/replicator/docs/operations.md#alarms-what-each-one-means"
        for a in alerts.values()
    )
    assert not [name for name, a in alerts.items() if "job=" in a["expr"]]
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump(rule["spec"]))
    checked = subprocess.run(
        ["promtool", "check", "rules", str(rules)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "PrometheusRule" not in _by_kind(render(CHART, "dr", "monitoring", tmp_path / "h2"))


# The engine's own gauges, served by prometheus_client as `replicator run` serves them.
_METRICS_SERVER = """
import sys, time
from prometheus_client import start_http_server
from replicator import metrics
for worker, running in (("w1", {w1}), ("w2", {w2})):
    if running is not None:
        metrics.WORKER_RUNNING.labels("a->b", worker).set(running)
if {reachable} is not None:
    metrics.CLUSTER_REACHABLE.labels("b", "b:9092").set({reachable})
for flow, desired in (("a->b", {desired}), ("b->a", {desired})):
    if desired is not None:
        metrics.FLOW_DESIRED_RUNNING.labels(flow).set(desired)
start_http_server(int(sys.argv[1]), addr="127.0.0.1")
print("serving", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize(
    ("w1", "w2", "reachable", "desired", "problem"),
    [
        (1, 1, 1, 1, None),
        (None, None, 1, None, "no worker loop reported"),
        (None, None, 1, 1, "no worker loop reported"),  # wanted, not started (yet)
        (None, None, 1, 0, None),  # every flow stopped on purpose: standing by
        (None, None, 0, 0, "unreachable: replicator_cluster_reachable{"),
        (1, 0, 1, 1, 'not running: replicator_worker_running{flow="a->b",worker="w2"}'),
        (1, 1, 0, 1, "unreachable: replicator_cluster_reachable{"),
    ],
)
def test_readiness_probe_means_replicating(
    w1: int | None,
    w2: int | None,
    reachable: int | None,
    desired: int | None,
    problem: str | None,
) -> None:
    """The chart's readiness probe (`replicator.probe`, also the image's Docker
    healthcheck of a worker) against the engine's real metric families: ready when
    every worker loop runs and every cluster answers, or when the state store stops
    every flow of the process on purpose (standing by: the standby direction's pods
    must be ready, or their Deployment's rolling update never ends)."""
    (port,) = free_port_pairs(1)
    code = _METRICS_SERVER.format(w1=w1, w2=w2, reachable=reachable, desired=desired)
    server = subprocess.Popen(
        [sys.executable, "-c", code, str(port)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        assert server.stdout.readline().strip() == "serving"
        probe = subprocess.run(
            [sys.executable, "-m", "replicator.probe", str(port)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    finally:
        server.kill()
        server.wait(timeout=10)
    assert probe.returncode == (0 if problem is None else 1), probe.stderr
    assert (problem or "") in probe.stderr
