"""Pods of the engine image on a real single-node Kubernetes (issue 45): etcd,
kube-apiserver, kube-controller-manager, kube-scheduler, the kubelet and containerd,
started by tests/helpers/kube_node.py, the engine image of `make image` imported into
the node's containerd (no registry answers here).

- a Pod of the engine image runs `replicator --version` to completion under the chart's
  own pod and container security contexts (deploy/helm/replicator/values.yaml): as uid
  10001, with a read-only root file system and no capability at all;
- `helm install` of the chart (deploy/helm/replicator/), its configuration naming two
  real clusters started here on the node's bridge address (where pods reach the host):
  both workers turn Ready through the chart's own readiness probe (every worker loop
  runs, every cluster answers) and every record produced to the source, before and
  after the install, arrives on the target; `helm uninstall` removes the workers.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, TopicPartition

from replicator.localstack.stack import LocalStack

from helpers.compose import BUILD_TIMEOUT_S, ENGINE_IMAGE, Figures, docker_engine, run
from helpers.kafka import create_topic, make_records, own_cluster_pair, produce_records
from helpers.kube import helm
from helpers.kube_node import KubeNode, kube_node, wait_for

# Alone, like the other tests that build and run the Docker images (`make test`'s second
# phase builds them first; run by itself, the module's `make image` rebuilds what a change
# touched, which can take minutes).
pytestmark = [pytest.mark.integration, pytest.mark.solo, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "deploy" / "helm" / "replicator"
POD_TIMEOUT_S = 120.0
#: The workers' start: the image's Python, the clusters' metadata, the first probes.
READY_TIMEOUT_S = 180.0
REPLICATED_TIMEOUT_S = 120.0
TOPIC, PARTITIONS = "orders", 3


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, figures: Figures) -> Iterator[KubeNode]:
    """The node, Ready, with the engine image of `make image` imported."""
    docker_engine()
    started = time.monotonic()
    run("make", "-s", "image", timeout=BUILD_TIMEOUT_S)
    figures.timed("make image", started)
    started = time.monotonic()
    with kube_node(tmp_path_factory.mktemp("kube-node")) as ready:
        figures.timed("node Ready", started)
        started = time.monotonic()
        ready.import_docker_image(ENGINE_IMAGE)
        figures.timed("engine image imported", started)
        yield ready


@pytest.fixture(scope="module")
def chart_values() -> dict:
    return yaml.safe_load((CHART / "values.yaml").read_text())


def _finished(node: KubeNode, namespace: str, name: str) -> dict | None:
    pod = node.pod(namespace, name)
    return pod if pod.get("status", {}).get("phase") in ("Succeeded", "Failed") else None


@pytest.fixture(scope="module")
def clusters(node: KubeNode, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """A source (`primary`) and a target (`dr`) cluster listening on the node's bridge
    address, where the pods reach them (as the host does)."""
    folder = tmp_path_factory.mktemp("node-clusters")
    with own_cluster_pair(folder, host=node.host_address) as stack:
        yield stack


def _records_on(bootstrap: str, topic: str, partitions: int) -> int:
    """How many records `topic` holds (its partitions' watermarks), 0 while it is absent."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kube-node-test-count"})
    try:
        if topic not in consumer.list_topics(timeout=10).topics:
            return 0
        total = 0
        for partition in range(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            total += high - low
        return total
    finally:
        consumer.close()


def test_an_engine_pod_runs_under_the_charts_security_context(
    node: KubeNode, chart_values: dict, figures: Figures
) -> None:
    namespace = "engine-version"
    node.create_namespace(namespace)
    script = (
        "replicator --version && id -u && grep CapEff /proc/self/status && "
        "{ touch /written 2>/dev/null && echo root-fs writable || echo root-fs read-only; }"
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "engine", "namespace": namespace},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "securityContext": chart_values["podSecurityContext"],
            "containers": [
                {
                    "name": "engine",
                    "image": ENGINE_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", script],
                    "securityContext": chart_values["securityContext"],
                }
            ],
        },
    }
    response = node.kube.create(pod)
    assert response.status_code == 201, response.text
    started = time.monotonic()
    done = wait_for(
        lambda: _finished(node, namespace, "engine"),
        POD_TIMEOUT_S,
        "the engine pod to finish",
        explain=lambda: node.diagnose(namespace, "engine"),
    )
    figures.timed("engine pod run", started)
    log = node.container_log(namespace, "engine", "engine")
    assert done["status"]["phase"] == "Succeeded", node.diagnose(namespace, "engine")
    assert done["spec"]["nodeName"] == node.name
    lines = log.splitlines()
    assert lines[0].startswith("replicator "), log
    assert lines[1] == "10001", log
    assert lines[2].split() == ["CapEff:", "0000000000000000"], log
    assert lines[3] == "root-fs read-only", log


def test_the_chart_replicates_on_the_node(
    node: KubeNode,
    clusters: LocalStack,
    figures: Figures,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    primary, dr = clusters.bootstrap("primary"), clusters.bootstrap("dr")
    create_topic(primary, TOPIC, partitions=PARTITIONS)
    produce_records(primary, TOPIC, make_records(300))
    config = tmp_path / "mm2.properties"
    config.write_text(
        "clusters = primary, dr\n"
        f"primary.bootstrap.servers = {primary}\n"
        f"dr.bootstrap.servers = {dr}\n"
        "primary->dr.enabled = true\n"
        f"primary->dr.topics = {TOPIC}\n"
        "replication.factor = 1\n"
        "heartbeats.topic.replication.factor = 1\n"
        "checkpoints.topic.replication.factor = 1\n"
        "offset-syncs.topic.replication.factor = 1\n"
        "status.topic.replication.factor = 1\n"
    )
    # `replicator init` is the operator's, once, from a machine that reaches the clusters
    # (docs/kubernetes.md): the internal topics; each worker keeps its own SQLite store.
    init = subprocess.run(
        [sys.executable, "-m", "replicator", "init", "--config", str(config),
         "--state-url", f"sqlite:///{tmp_path / 'state.db'}"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert init.returncode == 0, init.stdout + init.stderr

    namespace = "kafka-dr"
    node.create_namespace(namespace)
    values = tmp_path / "values.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                "replicas": 2,
                "image": {"tag": "latest", "pullPolicy": "Never"},
                "probes": {"readiness": {"initialDelaySeconds": 5, "periodSeconds": 5}},
                "terminationGracePeriodSeconds": 10,
            }
        )
    )
    started = time.monotonic()
    helm(
        "install", "dr", str(CHART), "--namespace", namespace, "--kubeconfig",
        str(node.kubeconfig), "--values", str(values), "--set-file", f"config={config}",
        home=node.api.helm_home,
    )  # fmt: skip
    deployment = f"/apis/apps/v1/namespaces/{namespace}/deployments/dr-replicator"

    def ready() -> bool:
        status = node.kube.request("GET", deployment).json().get("status", {})
        return status.get("readyReplicas") == 2 and status.get("updatedReplicas") == 2

    def diagnosis() -> str:
        return node.diagnose(namespace, "replicator")

    wait_for(ready, READY_TIMEOUT_S, "both workers Ready", interval=2, explain=diagnosis)
    figures.timed("helm install to both workers Ready", started)
    pods = node.pods(namespace, "app.kubernetes.io/instance=dr")
    assert len(pods) == 2 and all(pod["spec"]["nodeName"] == node.name for pod in pods), pods
    restarts = [s["restartCount"] for pod in pods for s in pod["status"]["containerStatuses"]]
    assert restarts == [0, 0], diagnosis()

    remote = f"primary.{TOPIC}"
    wait_for(
        lambda: _records_on(dr, remote, PARTITIONS) == 300,
        REPLICATED_TIMEOUT_S,
        f"300 records on dr's {remote}",
        interval=1,
        explain=diagnosis,
    )
    produce_records(primary, TOPIC, make_records(200))
    wait_for(
        lambda: _records_on(dr, remote, PARTITIONS) == 500,
        REPLICATED_TIMEOUT_S,
        f"500 records on dr's {remote}",
        interval=1,
        explain=diagnosis,
    )
    figures.timed("helm install to 500 records replicated", started)

    helm("uninstall", "dr", "--namespace", namespace, "--kubeconfig", str(node.kubeconfig),
         "--wait", "--timeout", "120s", home=node.api.helm_home)  # fmt: skip
    wait_for(
        lambda: not node.pods(namespace),
        120,
        "the workers gone after helm uninstall",
        explain=diagnosis,
    )
    with capsys.disabled():
        figures.print()
