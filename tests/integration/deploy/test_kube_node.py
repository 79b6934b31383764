"""Pods of the engine image on a real single-node Kubernetes (issue 45): etcd,
kube-apiserver, kube-controller-manager, kube-scheduler, the kubelet and containerd,
started by tests/helpers/kube_node.py, the engine image of `make image` imported into
the node's containerd (no registry answers here). One node, one estate and one run of
scenarios after another on it (a second node at the same time would clash on the host's
iptables chains and sysctls):

- a Pod of the engine image runs `replicator --version` to completion under the chart's
  own pod and container security contexts (deploy/helm/replicator/values.yaml): as uid
  10001, with a read-only root file system and no capability at all;
- the estate, as docs/kubernetes.md walks an operator through it: two real clusters on
  the node's bridge address (where pods reach the host), a PostgreSQL state store there
  too, whose URL (with its password) is a Secret, `replicator init --home primary` from
  the host (so the flow back, `dr->primary`, is stopped: the standby direction), and
  two `helm install`s of the chart (deploy/helm/replicator/): release `dr` runs
  `primary->dr`, release `standby` runs `dr->primary`;
- each scenario starts from that estate settled (every pod of both releases Ready,
  no old pod left) and leaves it so: a configuration upgrade rolls every pod of both
  releases; a pod deleted and a container killed with SIGKILL under a producer lose and
  duplicate no record; a drain's evictions respect what the PodDisruptionBudgets say;
  the supervisor's KubernetesLauncher scales and restarts the release and reads
  liveness from real pods; `helm uninstall` removes everything.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from sqlalchemy.exc import OperationalError

from replicator.engine.headers import (
    OFFSET_HEADER,
    ORIGIN_HEADER,
    SOURCE_HEADER,
    TOPIC_HEADER,
    decode_offset,
)
from replicator.operations.kubernetes_launcher import KubernetesLauncher
from replicator_lab.postgres import LocalPostgres
from replicator_lab.security import admin_for
from replicator_lab.stack import LocalStack

from helpers.compose import BUILD_TIMEOUT_S, ENGINE_IMAGE, Figures, docker_engine, run
from helpers.exactly_once import next_offsets
from helpers.kafka import (
    create_topic,
    free_port_pair,
    make_records,
    own_cluster_pair,
    produce_records,
    read_partition,
)
from helpers.kube import helm
from helpers.kube_node import KubeNode, kube_node, wait_for
from helpers.replication import end_offsets
from helpers.secured import SecuredPair, only_topic
from helpers.session import TEST_DATA_DIR

# Alone, like the other tests that build and run the Docker images (`make test`'s second
# phase builds them first; run by itself, the module's `make image` rebuilds what a change
# touched, which can take minutes).
pytestmark = [pytest.mark.integration, pytest.mark.solo, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "deploy" / "helm" / "replicator"
POD_TIMEOUT_S = 120.0
#: The workers' start: the image's Python, the clusters' metadata, the first probes.
READY_TIMEOUT_S = 180.0
#: A rolling update of two pods, one after the other (each: start, first probes).
ROLLOUT_TIMEOUT_S = 150.0
REPLICATED_TIMEOUT_S = 120.0
NAMESPACE = "kafka-dr"
TOPIC, PARTITIONS = "orders", 3
REMOTE = f"primary.{TOPIC}"
#: The flow's consumer group on the source cluster (the engine's prefix + the flow).
GROUP = "replicator-primary-dr"
ACTIVE, STANDBY = "dr", "standby"  # the releases
ACTIVE_DEPLOYMENT, STANDBY_DEPLOYMENT = "dr-replicator", "standby-replicator"
REPLICAS = 2
LAUNCHER_SA = "airflow-launcher"
STATE_SECRET = "state-store"
#: Records a second written while pods go away (a few thousand in all).
RATE = 300
#: A member that vanished (SIGKILL) holds its partitions until the group coordinator
#: misses its heartbeats for this long: the workers' source consumers get 10 s, not
#: librdkafka's 45 s, so the killed worker's partitions move on sooner.
SESSION_TIMEOUT_MS = 10_000
#: The headers the engine adds to every copy (provenance, source offset, source topic).
ENGINE_HEADERS = {SOURCE_HEADER, OFFSET_HEADER, TOPIC_HEADER, ORIGIN_HEADER}
FLOWS = ("primary->dr", "dr->primary")


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


@pytest.fixture(scope="module")
def state_url(node: KubeNode) -> Iterator[str]:
    """The URL (with its password) of a PostgreSQL state store on the node's bridge
    address, which the host and the pods share (SCRAM from the bridge's network)."""
    # Under the session's data folder: the server runs as `postgres`, which may not enter
    # pytest's temporary folders (0700, root's).
    root = TEST_DATA_DIR.resolve() / "kube-node-state-store"
    LocalPostgres(root, 0).down(wipe=True)  # what an interrupted run left
    server = LocalPostgres(
        root,
        free_port_pair(),
        host=node.host_address,
        password=secrets.token_hex(12),
        durable=False,
    )
    server.up(timeout=120)
    try:
        # initdb lets in the loopback only; the pods (and the host, whose address on the
        # bridge is the pods' gateway) connect from the bridge's /24.
        network = ipaddress.ip_network(f"{node.host_address}/24", strict=False)
        hba = server.data_dir / "pg_hba.conf"
        hba.write_text(hba.read_text() + f"host all all {network} scram-sha-256\n")
        pid = server.server_pid()
        assert pid is not None, server.log_tail()
        os.kill(pid, signal.SIGHUP)  # the server reads pg_hba.conf again

        def created() -> str | None:
            try:
                return server.create_database("replicator")
            except OperationalError:
                return None  # not reloaded yet

        yield wait_for(created, 30, "the state store to let the bridge's network in")
    finally:
        server.down(wipe=True)


def _wait_replicated(estate: Estate, records: int) -> None:
    """Until dr's remote topic holds `records` records."""
    wait_for(
        lambda: _records_on(estate.dr, REMOTE, PARTITIONS) == records,
        REPLICATED_TIMEOUT_S,
        f"{records} records on dr's {REMOTE}",
        interval=1,
        explain=estate.diagnose,
    )


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


def _ready(pod: dict) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _merge_patch(node: KubeNode, path: str, body: dict) -> None:
    response = node.kube.request(
        "PATCH", path, json=body, headers={"Content-Type": "application/merge-patch+json"}
    )
    assert response.status_code == 200, response.text


@dataclass
class Estate:
    """The clusters, the state store and the two releases in NAMESPACE on the node."""

    node: KubeNode
    primary: str
    dr: str
    folder: Path
    state_url: str

    # -- what the operator writes ---------------------------------------------------

    def config(
        self, *flows: str, extra: str = "", primary: str | None = None, dr: str | None = None
    ) -> str:
        """An `mm2.properties` running `flows` (the others disabled), each for TOPIC;
        `extra`: more settings; `primary`, `dr`: other bootstrap servers."""
        enabled = "".join(
            f"{flow}.enabled = {str(flow in flows).lower()}\n{flow}.topics = {TOPIC}\n"
            for flow in FLOWS
        )
        return (
            "clusters = primary, dr\n"
            f"primary.bootstrap.servers = {primary or self.primary}\n"
            f"dr.bootstrap.servers = {dr or self.dr}\n"
            f"{enabled}"
            f"primary.consumer.session.timeout.ms = {SESSION_TIMEOUT_MS}\n"
            f"dr.consumer.session.timeout.ms = {SESSION_TIMEOUT_MS}\n"
            "replication.factor = 1\n"
            "heartbeats.topic.replication.factor = 1\n"
            "checkpoints.topic.replication.factor = 1\n"
            "offset-syncs.topic.replication.factor = 1\n"
            "status.topic.replication.factor = 1\n" + extra
        )

    def values(self, launcher: bool = False, state_store: bool = True) -> Path:
        """The release's values: the imported image, the state store from its Secret,
        quick probes, small requests (a 2-core node runs up to 8 workers here)."""
        values: dict = {
            "replicas": REPLICAS,
            "image": {"tag": "latest", "pullPolicy": "Never"},
            "probes": {"readiness": {"initialDelaySeconds": 3, "periodSeconds": 3}},
            "resources": {
                "requests": {"cpu": "100m", "memory": "256Mi"},
                "limits": {"cpu": "1", "memory": "1Gi"},
            },
            "terminationGracePeriodSeconds": 10,
            # `replicator init` runs from the host, as for a chart without the init Job.
            "init": {"enabled": False},
        }
        if state_store:
            values["stateStore"] = {"existingSecret": {"name": STATE_SECRET}}
        if launcher:
            values["launcher"] = {"enabled": True, "serviceAccount": {"name": LAUNCHER_SA}}
        path = self.folder / f"values-{secrets.token_hex(3)}.yaml"
        path.write_text(yaml.safe_dump(values))
        return path

    def helm(self, verb: str, release: str, *args: str) -> subprocess.CompletedProcess[str]:
        return helm(
            verb, release, *args, "--namespace", NAMESPACE,
            "--kubeconfig", str(self.node.kubeconfig), home=self.node.api.helm_home,
        )  # fmt: skip

    def install(self, verb: str, release: str, config: str, values: Path, *args: str) -> None:
        """`helm install|upgrade RELEASE CHART --values VALUES --set-file config=...`."""
        path = self.folder / f"{release}-{secrets.token_hex(3)}.properties"
        path.write_text(config)
        self.helm(
            verb, release, str(CHART), "--values", str(values), "--set-file", f"config={path}",
            *args,
        )  # fmt: skip

    # -- what the API server says ---------------------------------------------------

    def deployment(self, name: str) -> dict:
        response = self.node.kube.request(
            "GET", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{name}"
        )
        response.raise_for_status()
        return response.json()

    def pods(self, release: str) -> list[dict]:
        """The release's workers (not its init Job's pod)."""
        selector = f"app.kubernetes.io/instance={release},app.kubernetes.io/component=engine"
        return self.node.pods(NAMESPACE, selector)

    def template_hash(self, deployment: dict) -> str | None:
        """The pod-template-hash of the Deployment's current ReplicaSet (its revision)."""
        revision = (
            deployment["metadata"].get("annotations", {}).get("deployment.kubernetes.io/revision")
        )
        release = deployment["metadata"]["labels"]["app.kubernetes.io/instance"]
        response = self.node.kube.request(
            "GET",
            f"/apis/apps/v1/namespaces/{NAMESPACE}/replicasets",
            params={"labelSelector": f"app.kubernetes.io/instance={release}"},
        )
        response.raise_for_status()
        for replica_set in response.json()["items"]:
            annotations = replica_set["metadata"].get("annotations", {})
            if annotations.get("deployment.kubernetes.io/revision") == revision:
                return replica_set["metadata"]["labels"]["pod-template-hash"]
        return None

    def rolled_out(self, name: str, replicas: int | None = None) -> list[dict] | None:
        """The Deployment's pods once its rollout is complete, as `kubectl rollout
        status` decides it (the controller saw the latest spec; every replica updated
        and available; no old replica left), and no pod of an older ReplicaSet is left,
        not even a terminating one; else None."""
        deployment = self.deployment(name)
        wanted = deployment["spec"]["replicas"]
        if replicas is not None and wanted != replicas:
            return None
        status = deployment.get("status", {})
        if status.get("observedGeneration", 0) < deployment["metadata"]["generation"]:
            return None
        if not (
            status.get("updatedReplicas", 0)
            == status.get("replicas", 0)
            == status.get("availableReplicas", 0)
            == wanted
        ):
            return None
        current = self.template_hash(deployment)
        pods = self.pods(deployment["metadata"]["labels"]["app.kubernetes.io/instance"])
        if len(pods) != wanted or any(
            pod["metadata"]["labels"].get("pod-template-hash") != current
            or pod["metadata"].get("deletionTimestamp")
            or not _ready(pod)
            for pod in pods
        ):
            return None
        return pods

    def diagnose(self) -> str:
        statuses = [
            f"{name}: "
            + yaml.safe_dump(
                self.node.kube.request(
                    "GET", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{name}"
                )
                .json()
                .get("status", {})
            )
            for name in (ACTIVE_DEPLOYMENT, STANDBY_DEPLOYMENT)
        ]
        return "\n".join([*statuses, self.node.diagnose(NAMESPACE, "replicator")])

    def settled(self, timeout: float = READY_TIMEOUT_S) -> dict[str, list[dict]]:
        """Both releases' pods, once each Deployment has REPLICAS Ready pods and no
        other pod."""
        found: dict[str, list[dict]] = {}

        def both() -> bool:
            for name in (ACTIVE_DEPLOYMENT, STANDBY_DEPLOYMENT):
                pods = self.rolled_out(name, REPLICAS)
                if pods is None:
                    return False
                found[name] = pods
            return True

        wait_for(both, timeout, "both releases settled", interval=1, explain=self.diagnose)
        return found

    def metrics(self, pod: dict) -> str:
        """The pod's /metrics, straight from the pod's address (the host is the bridge's
        gateway: no Service or kube-proxy needed)."""
        url = f"http://{pod['status']['podIP']}:9404/metrics"
        return httpx.get(url, timeout=10).text


@pytest.fixture(scope="module")
def estate(
    node: KubeNode,
    clusters: LocalStack,
    state_url: str,
    figures: Figures,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Estate]:
    """The estate of docs/kubernetes.md's walk-through, installed: the topic with 300
    records, the state store prepared by `replicator init --home primary` from the host
    (the flow back to `primary` stopped), the namespace with the state store's Secret and
    the launcher's ServiceAccount, and the two releases; returned once the active one's
    workers are Ready. `helm uninstall`ed at the end (the node stops every pod left)."""
    folder = tmp_path_factory.mktemp("estate")
    estate = Estate(
        node, clusters.bootstrap("primary"), clusters.bootstrap("dr"), folder, state_url
    )
    create_topic(estate.primary, TOPIC, partitions=PARTITIONS)
    produce_records(estate.primary, TOPIC, make_records(300))
    both = folder / "mm2.properties"  # the operator's whole configuration: both directions
    both.write_text(estate.config(*FLOWS))
    # `replicator init` is the operator's, once, from a machine that reaches the clusters
    # and the state store (docs/kubernetes.md): the internal topics, the state store's
    # tables, and with --home primary the flows into primary stopped (the standby).
    init = subprocess.run(
        [sys.executable, "-m", "replicator", "init", "--config", str(both),
         "--state-url", state_url, "--home", "primary"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert init.returncode == 0, init.stdout + init.stderr

    node.create_namespace(NAMESPACE)
    for obj in (
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": STATE_SECRET},
            "stringData": {"url": state_url},
        },
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": LAUNCHER_SA}},
    ):
        response = node.kube.create(obj, NAMESPACE)
        assert response.status_code == 201, response.text
    started = time.monotonic()
    estate.install("install", ACTIVE, estate.config("primary->dr"), estate.values(launcher=True))
    estate.install("install", STANDBY, estate.config("dr->primary"), estate.values())

    def active_ready() -> bool:
        return estate.rolled_out(ACTIVE_DEPLOYMENT, REPLICAS) is not None

    wait_for(active_ready, READY_TIMEOUT_S, "the dr workers Ready", 1, explain=estate.diagnose)
    figures.timed("helm install to both dr workers Ready", started)
    yield estate
    for release in (ACTIVE, STANDBY, "outage"):
        estate.helm("uninstall", release, "--ignore-not-found")


def _flow_metrics(text: str) -> dict[str, list[str]]:
    """The series of a pod's metrics the readiness probe reads, by family."""
    families = (
        "replicator_worker_running{",
        "replicator_flow_desired_running{",
        "replicator_cluster_reachable{",
    )
    found: dict[str, list[str]] = {family[:-1]: [] for family in families}
    for line in text.splitlines():
        for family in families:
            if line.startswith(family):
                found[family[:-1]].append(line)
    return found


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


def test_helm_install_replicates_and_the_standby_stands_by(
    estate: Estate, figures: Figures
) -> None:
    """`helm install` with the state store's URL from a Secret: the dr release's two
    workers turn Ready through the chart's readiness probe with no restart and copy
    every record produced before and after the install; the standby release's two
    workers, whose only flow the state store stops, run no worker loop and are Ready
    too (standing by: every flow stopped on purpose, every cluster answering), which
    their metrics show."""
    started = time.monotonic()
    pods = estate.settled()
    figures.timed("standby workers Ready", started)
    for name, release_pods in pods.items():
        assert all(pod["spec"]["nodeName"] == estate.node.name for pod in release_pods)
        restarts = [
            s["restartCount"] for p in release_pods for s in p["status"]["containerStatuses"]
        ]
        assert restarts == [0] * REPLICAS, f"{name}: {estate.diagnose()}"
        env = release_pods[0]["spec"]["containers"][0]["env"]
        assert env == [
            {
                "name": "REPLICATOR_STATE_URL",
                "valueFrom": {"secretKeyRef": {"name": STATE_SECRET, "key": "url"}},
            }
        ]
    for pod in pods[ACTIVE_DEPLOYMENT]:
        seen = _flow_metrics(estate.metrics(pod))
        assert [s.endswith(" 1.0") for s in seen["replicator_worker_running"]] == [True], seen
        assert seen["replicator_flow_desired_running"] == [
            'replicator_flow_desired_running{flow="primary->dr"} 1.0'
        ]
    for pod in pods[STANDBY_DEPLOYMENT]:
        seen = _flow_metrics(estate.metrics(pod))
        assert seen["replicator_worker_running"] == [], seen  # no loop: the flow is stopped
        assert seen["replicator_flow_desired_running"] == [
            'replicator_flow_desired_running{flow="dr->primary"} 0.0'
        ]

    _wait_replicated(estate, 300)
    produce_records(estate.primary, TOPIC, make_records(200))
    _wait_replicated(estate, 500)
    assert _records_on(estate.primary, f"dr.{TOPIC}", PARTITIONS) == 0  # nothing back


def test_a_configuration_upgrade_rolls_every_pod_of_both_releases(
    estate: Estate, figures: Figures
) -> None:
    """`helm upgrade` with one setting changed in each release's `mm2.properties`
    changes the pod template's config checksum, and both rollouts complete (what
    `kubectl rollout status` waits for, and no old pod left) within ROLLOUT_TIMEOUT_S:
    every pod replaced by one running the new configuration. Under the chart's
    `maxSurge: 1, maxUnavailable: 0` an old pod goes only once a new one is Ready, so
    this completes for the standby release only because its pods are Ready while
    standing by (with the probe's earlier "no worker loop: not ready" the standby's
    first new pod never turned Ready and its rollout stopped there for good)."""
    before = estate.settled()
    old_names = {p["metadata"]["name"] for pods in before.values() for p in pods}
    old_checksums = {
        name: pods[0]["metadata"]["annotations"]["checksum/config"] for name, pods in before.items()
    }
    setting = "emit.checkpoints.interval.seconds = 20\n"
    started = time.monotonic()
    estate.install("upgrade", STANDBY, estate.config("dr->primary", extra=setting), estate.values())
    # The operator's usual command: --wait returns once the new pods are Ready.
    estate.install(
        "upgrade", ACTIVE, estate.config("primary->dr", extra=setting),
        estate.values(launcher=True),
        "--wait", "--timeout", "100s",
    )  # fmt: skip
    after = estate.settled(ROLLOUT_TIMEOUT_S)
    figures.timed("helm upgrade to both rollouts complete", started)

    for name, pods in after.items():
        assert not {p["metadata"]["name"] for p in pods} & old_names, name
        checksums = {p["metadata"]["annotations"]["checksum/config"] for p in pods}
        assert len(checksums) == 1 and checksums != {old_checksums[name]}, name
        status = estate.deployment(name)["status"]
        progressing = [c for c in status["conditions"] if c["type"] == "Progressing"]
        assert progressing[0]["reason"] == "NewReplicaSetAvailable", status
    configmap = estate.node.kube.request(
        "GET", f"/api/v1/namespaces/{NAMESPACE}/configmaps/{STANDBY_DEPLOYMENT}"
    ).json()
    assert setting.strip() in configmap["data"]["mm2.properties"]


class SteadyProduction:
    """Records written to the source from a thread, round-robin over its partitions at
    about `rate` a second, until the block ends: a source still being written while
    pods go away. The producer is idempotent: each record is in the source once."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: int) -> None:
        self._args = (bootstrap, topic, partitions, rate)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._produce, name="steady-producer")
        self.written = 0
        self.error: BaseException | None = None

    def __enter__(self) -> SteadyProduction:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(120)
        assert not self._thread.is_alive(), "the producer did not stop"
        assert self.error is None, f"producing failed: {self.error!r}"

    def _produce(self) -> None:
        bootstrap, topic, partitions, rate = self._args
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        failures: list[str] = []

        def report(error: object, _message: object) -> None:
            if error is not None:
                failures.append(str(error))

        slice_records, started, i = max(rate // 10, 1), time.monotonic(), 0
        try:
            while not self._stop.is_set():
                if i % slice_records == 0:  # each tenth of a second holds rate/10 records
                    self._stop.wait(max(0.0, started + i / rate - time.monotonic()))
                    producer.poll(0)
                producer.produce(
                    topic,
                    key=b"%d" % i,
                    value=b"steady-%d" % i,
                    partition=i % partitions,
                    headers=[("seq", b"%d" % i)],
                    on_delivery=report,
                )
                i += 1
            assert producer.flush(60) == 0, "records still undelivered after 60 s"
            assert not failures, failures[:5]
            self.written = i
        except BaseException as exc:  # reported by __exit__
            self.error = exc


def _assert_copied_exactly_once(primary: str, dr: str) -> int:
    """Every record of the source topic, in order, once on the target: per partition the
    target's records carry, in their source-offset header, exactly the source offsets
    0, 1, 2, ... and each has the source record's key, value, timestamp and headers.
    Returns how many records were compared."""
    ends = end_offsets(primary, TOPIC, PARTITIONS)
    assert ends is not None
    wait_for(
        lambda: next_offsets(dr, REMOTE, PARTITIONS) == ends,
        REPLICATED_TIMEOUT_S,
        f"the target's copy of {TOPIC} to reach the source's ends {ends}",
        interval=1,
    )
    compared = 0
    for partition in range(PARTITIONS):
        source = read_partition(primary, TOPIC, partition)
        target = read_partition(dr, REMOTE, partition)
        copied = [decode_offset(dict(record.headers)[OFFSET_HEADER]) for _offset, record in target]
        assert copied == [offset for offset, _ in source], (
            f"partition {partition}: {len(copied)} copies of {len(source)} records; "
            f"twice: {sorted({o for o in copied if copied.count(o) > 1})[:10]}, "
            f"missing: {sorted(set(range(ends[partition])) - set(copied))[:10]}"
        )
        for (offset, original), (_, copy) in zip(source, target, strict=True):
            own = tuple(h for h in copy.headers if h[0] not in ENGINE_HEADERS)
            assert (copy.key, copy.value, copy.timestamp, own) == (
                original.key,
                original.value,
                original.timestamp,
                original.headers,
            ), f"partition {partition} offset {offset}"
        compared += len(source)
    return compared


def test_a_deleted_pod_and_a_killed_container_lose_and_duplicate_nothing(
    estate: Estate, figures: Figures
) -> None:
    """While a producer writes to the source: one dr worker's pod is deleted (SIGTERM:
    it flushes and leaves the group; the ReplicaSet makes a new pod), then another
    worker's container is killed with SIGKILL through the node's runtime (`ctr tasks
    kill`: no flush, no goodbye to the group; the kubelet restarts the container in
    its pod). Both times the Deployment is back to two Ready workers, and in the end
    every source record, since the topic's first, is on the target exactly once and
    intact (per partition, record by record)."""
    pods = estate.settled()[ACTIVE_DEPLOYMENT]
    with SteadyProduction(estate.primary, TOPIC, PARTITIONS, RATE):
        base = _records_on(estate.dr, REMOTE, PARTITIONS)
        wait_for(
            lambda: _records_on(estate.dr, REMOTE, PARTITIONS) > base + RATE,
            REPLICATED_TIMEOUT_S,
            "the new records replicating",
            interval=1,
            explain=estate.diagnose,
        )
        deleted = pods[0]["metadata"]["name"]
        started = time.monotonic()
        response = estate.node.kube.request(
            "DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{deleted}"
        )
        assert response.status_code == 200, response.text
        after_delete = wait_for(
            lambda: estate.rolled_out(ACTIVE_DEPLOYMENT, REPLICAS),
            READY_TIMEOUT_S,
            f"a new pod Ready in place of {deleted}",
            interval=1,
            explain=estate.diagnose,
        )
        names = {p["metadata"]["name"] for p in after_delete}
        assert deleted not in names
        figures.timed("pod deleted to its replacement Ready", started)

        # Both workers own partitions again (the new one too): the kill takes some away.
        wait_for(
            lambda: _assignments(estate.primary) == [1, 2],
            60,
            "the two workers sharing the three partitions",
            explain=estate.diagnose,
        )
        killed = next(p for p in after_delete if p["metadata"]["name"] != deleted)
        name = killed["metadata"]["name"]
        container = killed["status"]["containerStatuses"][0]["containerID"]
        assert container.startswith("containerd://"), container
        moment, at_kill = time.monotonic(), _records_on(estate.dr, REMOTE, PARTITIONS)
        estate.node.runtime.ctr(
            "tasks", "kill", "--signal", "SIGKILL", container.removeprefix("containerd://")
        )

        def restarted() -> dict | None:
            pod = estate.node.pod(NAMESPACE, name)
            statuses = pod["status"].get("containerStatuses", [])
            return pod if statuses and statuses[0]["restartCount"] >= 1 and _ready(pod) else None

        pod = wait_for(
            restarted,
            READY_TIMEOUT_S,
            f"{name}'s container restarted and Ready",
            interval=1,
            explain=estate.diagnose,
        )
        figures.timed("container killed to restarted and Ready", moment)
        terminated = pod["status"]["containerStatuses"][0]["lastState"]["terminated"]
        assert terminated["exitCode"] == 128 + signal.SIGKILL, terminated
        wait_for(
            lambda: _records_on(estate.dr, REMOTE, PARTITIONS) > at_kill + RATE,
            REPLICATED_TIMEOUT_S,
            "replication going on after the kill",
            interval=1,
            explain=estate.diagnose,
        )
    moment = time.monotonic()
    compared = _assert_copied_exactly_once(estate.primary, estate.dr)
    figures.timed(f"{compared} records compared", moment)
    assert estate.rolled_out(ACTIVE_DEPLOYMENT, REPLICAS) is not None, estate.diagnose()


def _evict(node: KubeNode, pod: str) -> httpx.Response:
    """What `kubectl drain` asks for each pod: an Eviction (policy/v1)."""
    return node.kube.request(
        "POST",
        f"/api/v1/namespaces/{NAMESPACE}/pods/{pod}/eviction",
        json={
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod, "namespace": NAMESPACE},
        },
    )


def _budget(node: KubeNode, name: str) -> dict:
    response = node.kube.request(
        "GET", f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets/{name}"
    )
    response.raise_for_status()
    return response.json()


def _cordon(node: KubeNode, unschedulable: bool) -> None:
    _merge_patch(node, f"/api/v1/nodes/{node.name}", {"spec": {"unschedulable": unschedulable}})


def test_a_drain_keeps_each_budget_and_is_not_blocked_by_unready_pods(
    estate: Estate, figures: Figures
) -> None:
    """A drain as `kubectl drain` makes it: the node cordoned, then an Eviction for every
    chart pod on it. Beside the two releases runs a third whose clusters do not answer
    (an outage of its source site): its pods run and are never Ready.

    - its two unready pods are both evicted at once, although its budget
      (`maxUnavailable: 1`) has no disruption left with no healthy pod: the chart's
      `unhealthyPodEvictionPolicy: AlwaysAllow` (Kubernetes' default, IfHealthyBudget,
      would refuse them and block the drain for as long as the outage lasts);
    - of each release's two Ready pods, one is evicted and the other refused (429, the
      budget: at most one unavailable), and stays refused while the node is cordoned
      (its replacement cannot start anywhere);
    - once the replacement runs and is Ready (here: the node uncordoned, as another
      node would take it), the refused eviction is allowed: the drain completes, one
      worker at a time."""
    estate.settled()
    node = estate.node
    nowhere = f"{node.host_address}:{free_port_pair()}"  # nothing listens there
    outage = estate.config("primary->dr", primary=nowhere, dr=nowhere)
    estate.install("install", "outage", outage, estate.values(state_store=False))

    def unready_twice() -> bool:
        events = node.kube.request("GET", f"/api/v1/namespaces/{NAMESPACE}/events").json()
        failing = {
            e["involvedObject"]["name"]
            for e in events["items"]
            if e["reason"] == "Unhealthy" and "Readiness probe failed" in e.get("message", "")
        }
        pods = estate.pods("outage")
        return len(pods) == 2 and all(
            p["metadata"]["name"] in failing and p["status"].get("phase") == "Running" for p in pods
        )

    wait_for(unready_twice, READY_TIMEOUT_S, "the outage pods failing their readiness probe", 1,
             explain=estate.diagnose)  # fmt: skip
    budget = _budget(node, "outage-replicator")["status"]
    assert (budget["currentHealthy"], budget["desiredHealthy"]) == (0, 1), budget
    assert budget["disruptionsAllowed"] == 0, budget

    started = time.monotonic()
    _cordon(node, True)
    try:
        answers: dict[str, dict[str, int]] = {}
        for release in (ACTIVE, STANDBY, "outage"):
            answers[release] = {}
            for pod in estate.pods(release):
                name = pod["metadata"]["name"]
                response = _evict(node, name)
                answers[release][name] = response.status_code
                if response.status_code == 429:
                    assert "disruption budget" in response.text, response.text
        assert sorted(answers["outage"].values()) == [201, 201], answers
        for release in (ACTIVE, STANDBY):
            assert sorted(answers[release].values()) == [201, 429], answers
            budget = _budget(node, f"{release}-replicator")["status"]
            assert budget["disruptionsAllowed"] == 0, budget
        refused = [n for r in (ACTIVE, STANDBY) for n, code in answers[r].items() if code == 429]
        # Cordoned: the replacements stay Pending, the budgets stay spent.
        wait_for(
            lambda: (
                [p["status"]["phase"] for r in (ACTIVE, STANDBY) for p in estate.pods(r)].count(
                    "Pending"
                )
                == 2
            ),
            30,
            "a replacement Pending for each evicted worker",
            explain=estate.diagnose,
        )
        assert [_evict(node, name).status_code for name in refused] == [429, 429]
    finally:
        _cordon(node, False)

    # What `kubectl drain` does with a 429: ask again, until the budget allows it.
    left = set(refused)

    def evicted() -> bool:
        for name in sorted(left):
            if _evict(node, name).status_code == 201:
                left.discard(name)
        return not left

    wait_for(evicted, READY_TIMEOUT_S, f"the evictions of {refused} allowed", 2,
             explain=estate.diagnose)  # fmt: skip
    figures.timed("drain with budgets", started)
    estate.helm("uninstall", "outage")
    estate.settled()
    wait_for(lambda: not estate.pods("outage"), 60, "the outage pods gone")


def _launcher_kubeconfig(estate: Estate) -> Path:
    """A kubeconfig of the launcher's ServiceAccount (a token from the TokenRequest API),
    its context's namespace the release's: the launcher's Role decides every call."""
    kube = estate.node.kube
    answer = kube.request(
        "POST",
        f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{LAUNCHER_SA}/token",
        json={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        },
    )
    assert answer.status_code == 201, answer.text
    path = estate.folder / "launcher.kubeconfig"
    path.touch(mode=0o600)
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "node",
                        "cluster": {"server": kube.url, "certificate-authority": str(kube.ca_file)},
                    }
                ],
                "users": [
                    {"name": LAUNCHER_SA, "user": {"token": answer.json()["status"]["token"]}}
                ],
                "contexts": [
                    {
                        "name": "launcher",
                        "context": {"cluster": "node", "user": LAUNCHER_SA, "namespace": NAMESPACE},
                    }
                ],
                "current-context": "launcher",
            }
        )
    )
    return path


def _assignments(primary: str) -> list[int] | None:
    """Partitions of TOPIC owned by each member of the flow's group, None while the
    coordinator does not answer."""
    admin = AdminClient({"bootstrap.servers": primary})
    try:
        group = admin.describe_consumer_groups([GROUP])[GROUP].result(timeout=10)
    except (KafkaException, TimeoutError):
        return None
    return sorted(
        sum(1 for tp in member.assignment.topic_partitions if tp.topic == TOPIC)
        for member in group.members
    )


def test_the_launcher_scales_restarts_and_reads_liveness_from_pods(
    estate: Estate, figures: Figures
) -> None:
    """The supervisor's KubernetesLauncher, in this process, as the chart's launcher
    ServiceAccount (`launcher.enabled`, its own token through a kubeconfig): its workers
    are the chart's Deployments (not another application's); `alive` reads the
    availability the Deployment controller counts from the pods' readiness; `scale`
    to 4 gives four Ready workers (one more than the topic's partitions: the fourth
    owns none and is Ready all the same) and back to 2; `restart` replaces every pod;
    a Deployment scaled to 0 by someone else is dead, and `restart_dead` brings its
    pods back until they are Ready."""
    estate.settled()
    other = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "postgres", "labels": {"app.kubernetes.io/name": "postgres"}},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app.kubernetes.io/name": "postgres"}},
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": "postgres"}},
                "spec": {"containers": [{"name": "postgres", "image": "postgres:17"}]},
            },
        },
    }
    response = estate.node.kube.create(other, NAMESPACE)
    assert response.status_code == 201, response.text
    launcher = KubernetesLauncher.from_environment(
        {"KUBECONFIG": str(_launcher_kubeconfig(estate))}
    )
    assert launcher.namespace == NAMESPACE  # from the kubeconfig's context

    workers = {w.name: w for w in launcher.workers()}
    assert sorted(workers) == [ACTIVE_DEPLOYMENT, STANDBY_DEPLOYMENT]
    assert workers[ACTIVE_DEPLOYMENT].config == Path("/etc/replicator/mm2.properties")
    assert workers[ACTIVE_DEPLOYMENT].where == (
        f"deployment {NAMESPACE}/{ACTIVE_DEPLOYMENT} (2/2 available)"
    )
    assert launcher.alive(ACTIVE_DEPLOYMENT) and launcher.alive(STANDBY_DEPLOYMENT)
    assert not launcher.alive("postgres")  # not selected: not a worker
    assert not launcher.alive("no-such-deployment")

    started = time.monotonic()
    launcher.scale(ACTIVE_DEPLOYMENT, 4)
    wait_for(lambda: estate.rolled_out(ACTIVE_DEPLOYMENT, 4), READY_TIMEOUT_S,
             "four Ready workers", 1, explain=estate.diagnose)  # fmt: skip
    wait_for(lambda: _assignments(estate.primary) == [0, 1, 1, 1], 60,
             "four members sharing three partitions")  # fmt: skip
    assert estate.rolled_out(ACTIVE_DEPLOYMENT, 4), "the member with no partition is Ready"
    assert launcher.workers()[0].where.endswith("(4/4 available)")
    launcher.scale(ACTIVE_DEPLOYMENT, REPLICAS)
    wait_for(lambda: estate.rolled_out(ACTIVE_DEPLOYMENT, REPLICAS), READY_TIMEOUT_S,
             "back to two workers", 1, explain=estate.diagnose)  # fmt: skip
    figures.timed("launcher scale to 4 and back", started)

    before = {p["metadata"]["name"] for p in estate.pods(ACTIVE)}
    started = time.monotonic()
    launcher.restart(ACTIVE_DEPLOYMENT)
    after = wait_for(
        lambda: (
            (pods := estate.rolled_out(ACTIVE_DEPLOYMENT, REPLICAS))
            and not {p["metadata"]["name"] for p in pods} & before
            and pods
        ),
        ROLLOUT_TIMEOUT_S,
        "every pod replaced after the launcher's restart",
        1,
        explain=estate.diagnose,
    )
    assert len(after) == REPLICAS
    figures.timed("launcher restart rolled out", started)

    # Scaled to 0 by someone else (`kubectl scale --replicas=0`): dead, as its pods say.
    _merge_patch(
        estate.node,
        f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{ACTIVE_DEPLOYMENT}/scale",
        {"spec": {"replicas": 0}},
    )
    wait_for(lambda: not estate.pods(ACTIVE), 60, "the dr workers gone", explain=estate.diagnose)
    wait_for(lambda: not launcher.alive(ACTIVE_DEPLOYMENT), 30, "alive to turn False")
    started = time.monotonic()
    results = launcher.restart_dead(lambda worker: worker.name == ACTIVE_DEPLOYMENT)
    assert [(r.name, r.action) for r in results] == [(ACTIVE_DEPLOYMENT, "started")]
    assert not launcher.alive(ACTIVE_DEPLOYMENT)  # pods starting: nothing available yet
    wait_for(lambda: launcher.alive(ACTIVE_DEPLOYMENT), READY_TIMEOUT_S,
             "alive once a started pod is Ready", 1, explain=estate.diagnose)  # fmt: skip
    pods = wait_for(lambda: estate.rolled_out(ACTIVE_DEPLOYMENT, REPLICAS), READY_TIMEOUT_S,
                    "the chart's two workers back", 1, explain=estate.diagnose)  # fmt: skip
    assert all(_ready(p) for p in pods)
    figures.timed("launcher restart_dead to alive", started)
    assert launcher.restart_dead(lambda worker: True) == []  # both alive: nothing to do


INIT_OUTAGE, INIT_ELSEWHERE = "init-outage", "init-elsewhere"  # the init Job's releases


def _init_values(estate: Estate, **init: object) -> Path:
    """A release's values with the chart's init Job on (`init.*`), one worker and no
    state store Secret (the Job and the worker use the image's own SQLite store, in
    their scratch folder: the shared state store is left alone)."""
    path = estate.values(state_store=False)
    values = yaml.safe_load(path.read_text())
    values["replicas"] = 1
    values["init"] = {"enabled": True, **init}
    path.write_text(yaml.safe_dump(values))
    return path


def _init_log(estate: Estate, release: str) -> str:
    """The log of the init Job's pod (`job-name=<release>-replicator-init`)."""
    job = f"{release}-replicator-init"
    pods = estate.node.pods(NAMESPACE, f"job-name={job}")
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    return estate.node.container_log(NAMESPACE, pods[0]["metadata"]["name"], "init")


def _uninstall_with_hooks(estate: Estate, *releases: str) -> None:
    """`helm uninstall` of `releases`, and their init hook's Job and ConfigMap, which are
    no part of a release (`kubectl delete job,configmap -l ...`, the Job's pods with it:
    background propagation); returns once no pod of theirs is left."""
    for release in releases:
        estate.helm("uninstall", release, "--ignore-not-found")
    selector = f"app.kubernetes.io/instance in ({', '.join(releases)})"
    for collection, kind in (("apis/batch/v1", "jobs"), ("api/v1", "configmaps")):
        response = estate.node.kube.request(
            "DELETE",
            f"/{collection}/namespaces/{NAMESPACE}/{kind}",
            params={
                "labelSelector": f"app.kubernetes.io/component=init,{selector}",
                "propagationPolicy": "Background",
            },
        )
        assert response.status_code == 200, response.text
    wait_for(lambda: not estate.node.pods(NAMESPACE, selector), 60,
             f"the pods of {', '.join(releases)} gone", explain=estate.diagnose)  # fmt: skip


def test_the_init_job_names_an_outage_and_fails_the_install_on_a_real_error(
    estate: Estate, figures: Figures
) -> None:
    """The chart's init Job (`init.enabled`: a pre-install hook running `replicator init
    --allow-unreachable`) on the node, with the real clusters:

    - `primary` does not answer (nothing listens at its address), `dr` does: the Job
      succeeds, its log names primary as not answering and says PARTIAL, `helm install`
      succeeds and the workers start (Running, unready: their source is down), and the
      internal topics are on dr;
    - `init.home` names no cluster of the configuration (a real error, no retry): the Job
      fails, so does `helm install`, and the Deployment is never created.

    Both releases, their hook Jobs and ConfigMaps and every pod of theirs are removed at
    the end: the other scenarios' releases are not touched."""
    estate.settled()
    node = estate.node
    kube = node.kube
    started = time.monotonic()
    try:
        nowhere = f"{node.host_address}:{free_port_pair()}"  # nothing listens there
        # Helm waits for the hook Job; `estate.install` fails on a non-zero exit.
        estate.install(
            "install", INIT_OUTAGE, estate.config("primary->dr", primary=nowhere),
            _init_values(estate), "--timeout", "100s",
        )  # fmt: skip
        job = kube.request(
            "GET", f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs/{INIT_OUTAGE}-replicator-init"
        )
        assert job.status_code == 200, job.text
        assert job.json()["status"].get("succeeded") == 1, job.json()["status"]
        log = _init_log(estate, INIT_OUTAGE)
        assert f"cluster primary: {nowhere} does not answer" in log, log
        assert any(
            line.startswith("PARTIAL") and "did not answer: primary" in line
            for line in log.splitlines()
        ), log
        figures.timed("init Job (primary down) to helm install done", started)
        deployment = estate.deployment(f"{INIT_OUTAGE}-replicator")
        assert deployment["spec"]["replicas"] == 1
        workers = f"app.kubernetes.io/instance={INIT_OUTAGE},app.kubernetes.io/component=engine"
        wait_for(
            lambda: (
                len(pods := node.pods(NAMESPACE, workers)) == 1
                and all(p["status"].get("phase") == "Running" for p in pods)
            ),
            POD_TIMEOUT_S,
            f"the {INIT_OUTAGE} worker Running",
            1,
            explain=estate.diagnose,
        )
        topics = AdminClient({"bootstrap.servers": estate.dr}).list_topics(timeout=10).topics
        for topic in ("replicator-status.internal", "replicator-resets.internal"):
            assert topic in topics, sorted(topics)

        moment = time.monotonic()
        path = estate.folder / f"{INIT_ELSEWHERE}.properties"
        path.write_text(estate.config("primary->dr"))
        failed = helm(
            "install", INIT_ELSEWHERE, str(CHART),
            "--values", str(_init_values(estate, home="elsewhere", backoffLimit=0)),
            "--set-file", f"config={path}", "--timeout", "100s",
            "--namespace", NAMESPACE, "--kubeconfig", str(node.kubeconfig),
            home=node.api.helm_home, check=False,
        )  # fmt: skip
        assert failed.returncode != 0, failed.stdout + failed.stderr
        figures.timed("init Job (--home elsewhere) to helm install failed", moment)
        missing = kube.request(
            "GET", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{INIT_ELSEWHERE}-replicator"
        )
        assert missing.status_code == 404, missing.text
        log = _init_log(estate, INIT_ELSEWHERE)
        assert "--home 'elsewhere' is none of the configuration's clusters" in log, log
    finally:
        _uninstall_with_hooks(estate, INIT_OUTAGE, INIT_ELSEWHERE)
    estate.settled()


SECURED = "secured"  # the release on the SASL_SSL clusters
#: A topic within the replicator principal's ACLs (the stack's clients.properties).
SECURED_TOPIC = "demo.orders"
CA_SECRET, USER_SECRET = "kafka-ca", "replicator-user"  # what the operator creates
SECRETS_ROOT = "/etc/replicator/secrets"  # where the chart mounts `secrets`


@pytest.fixture(scope="module")
def secured_clusters(
    node: KubeNode, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SecuredPair]:
    """A SASL_SSL (SCRAM-SHA-512) `primary` and `dr` with the StandardAuthorizer on the
    node's bridge address; the replicator's principal has only its planned ACLs."""
    folder = tmp_path_factory.mktemp("node-secured")
    with own_cluster_pair(folder, security="sasl_ssl", host=node.host_address) as stack:
        yield SecuredPair(stack)


def test_helm_install_on_sasl_ssl_clusters_with_their_secrets(
    estate: Estate, secured_clusters: SecuredPair, figures: Figures
) -> None:
    """`helm install` of a release whose clusters are SASL_SSL, as docs/kubernetes.md's
    "Secrets layout" says: the operator creates a Secret with the clusters' CA
    certificate and one with the replicator principal's password, lists both in
    `secrets`, and the configuration refers to the mounted files (the CA's path, the
    password through `${directory:...}`). The chart's init Job runs `replicator init`
    with them (the internal topics appear on dr), the two workers turn Ready through
    the probe with no restart and copy every record produced before and after the
    install, and no log of the Job or the workers shows the password."""
    estate.settled()
    pair, node = secured_clusters, estate.node
    security = pair.stack.security
    assert security is not None
    password = security.password("replicator")
    create_topic(pair.primary, SECURED_TOPIC, PARTITIONS, client=pair.admin("primary"))
    produce_records(pair.primary, SECURED_TOPIC, make_records(300), pair.admin("primary"))
    for name, data in (
        (CA_SECRET, {"ca.crt": security.ca_file.read_text()}),
        (USER_SECRET, {"password": password}),
    ):
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}}
        response = node.kube.create({**secret, "stringData": data}, NAMESPACE)
        assert response.status_code == 201, response.text
    config = pair.operator_config(
        f"{SECRETS_ROOT}/{CA_SECRET}/ca.crt", f"{SECRETS_ROOT}/{USER_SECRET}", "password"
    )
    config += f"\n{only_topic('primary->dr', SECURED_TOPIC)}\ndr->primary.enabled = false\n"
    values = estate.values(state_store=False)  # each pod's own SQLite store
    settings = yaml.safe_load(values.read_text())
    settings |= {"secrets": [CA_SECRET, USER_SECRET], "init": {"enabled": True}}
    values.write_text(yaml.safe_dump(settings))
    deployment = f"{SECURED}-replicator"
    started = time.monotonic()
    try:
        estate.install("install", SECURED, config, values, "--timeout", "150s")
        wait_for(lambda: estate.rolled_out(deployment, REPLICAS), READY_TIMEOUT_S,
                 f"the {SECURED} workers Ready", 1, explain=estate.diagnose)  # fmt: skip
        figures.timed("helm install (SASL_SSL) to both workers Ready", started)
        pods = estate.rolled_out(deployment, REPLICAS)
        assert pods is not None
        restarts = [s["restartCount"] for p in pods for s in p["status"]["containerStatuses"]]
        assert restarts == [0] * REPLICAS, estate.diagnose()
        mounts = {m["mountPath"] for m in pods[0]["spec"]["containers"][0]["volumeMounts"]}
        assert {f"{SECRETS_ROOT}/{CA_SECRET}", f"{SECRETS_ROOT}/{USER_SECRET}"} <= mounts
        topics = admin_for(pair.dr, pair.admin("dr")).list_topics(timeout=10).topics
        assert "replicator-status.internal" in topics, sorted(topics)  # the init Job's

        remote = f"primary.{SECURED_TOPIC}"

        def copied(records: int) -> None:
            wait_for(
                lambda: sum(pair.end_offsets("dr", remote, PARTITIONS) or [0]) == records,
                REPLICATED_TIMEOUT_S, f"{records} records on the secured dr's {remote}",
                interval=1, explain=estate.diagnose,
            )  # fmt: skip

        copied(300)
        produce_records(pair.primary, SECURED_TOPIC, make_records(200), pair.admin("primary"))
        copied(500)
        figures.timed("helm install (SASL_SSL) to 500 records copied", started)
        logs = [_init_log(estate, SECURED)] + [
            node.container_log(NAMESPACE, pod["metadata"]["name"], "replicator") for pod in pods
        ]
        assert all(log for log in logs), logs
        assert not [log for log in logs if password in log]
    finally:
        _uninstall_with_hooks(estate, SECURED)
        for name in (CA_SECRET, USER_SECRET):
            node.kube.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}/secrets/{name}")
    estate.settled()


def test_helm_uninstall_removes_the_workers(
    estate: Estate, figures: Figures, capsys: pytest.CaptureFixture[str]
) -> None:
    """`helm uninstall` of both releases removes their Deployments and pods."""
    for release in (ACTIVE, STANDBY):
        estate.helm("uninstall", release, "--wait", "--timeout", "100s")
    wait_for(
        lambda: not estate.pods(ACTIVE) and not estate.pods(STANDBY),
        120,
        "the workers gone after helm uninstall",
        explain=estate.diagnose,
    )
    with capsys.disabled():
        figures.print()
