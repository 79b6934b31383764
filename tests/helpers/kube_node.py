"""A single-node Kubernetes for the tests that need Pods to run (the Helm chart's
workers): the control plane of tests/helpers/kube.py (etcd, kube-apiserver) plus
kube-controller-manager, kube-scheduler, a containerd of its own and the kubelet, all
v1.34.4 from `make setup` (tools/k8s/), everything under one folder, stopped after.

- identities: every component talks to the API server as its admin (the static token,
  group `system:masters`) through one kubeconfig; no certificates are issued;
- the node `replicator-node`: the kubelet with the cgroupfs driver under a cgroup root of
  its own (`/replicator-node-<id>` in each cgroup v1 hierarchy), swap tolerated, no image
  garbage collection, eviction only when nearly out of disk, its root, pod logs
  and certificates under the folder; containerd and the pod network as
  tests/helpers/containerd.py and tests/helpers/pod_network.py make them;
- images: no registry answers here, so the sandbox image is made from the `pause` binary
  (tests/helpers/oci_image.py) and a test imports what else it runs
  (`KubeNode.import_docker_image`, e.g. the engine image of `make image`);
- pods reach the host at `KubeNode.host_address` (the bridge's), where a test's brokers
  listen.

At the end the controller manager stops first (no Pod is recreated), every Pod is
deleted and the kubelet is left to stop them (their sandboxes' networks torn down by the
CNI plugins), then the kubelet, the scheduler and the control plane stop; whatever is
left in the node's cgroups is killed, containerd and its shims stop, mounts under the
folder are unmounted, the bridge and the cgroups deleted, and the kernel settings and
iptables chains the kubelet changes are put back (tests/helpers/kubelet_host.py).
Needs root (and Linux with cgroup v1 or v2); under `CI=true` a missing binary or
package fails the test, elsewhere it skips.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from helpers.containerd import Containerd, containerd, unmount_under
from helpers.kafka import free_port_pair
from helpers.kube import BIN_DIR, ApiServer, Kube, api_server, log_tail, managed_process
from helpers.kubelet_host import restored_host
from helpers.oci_image import single_binary_image
from helpers.pod_network import CNI_BIN_DIR, pod_network

NODE_NAME = "replicator-node"
PAUSE_IMAGE = "localhost/replicator-node/pause:1.0"
NODE_BINARIES = ("kube-controller-manager", "kube-scheduler", "kubelet", "pause")
#: The node's registration and first Ready status (about 5 s idle on 2 cores).
READY_TIMEOUT_S = 120.0
#: The kubelet stopping every Pod at the end.
DRAIN_TIMEOUT_S = 90.0


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def node_binaries() -> dict[str, Path]:
    """The node's binaries; a missing one (or not being root) fails under CI=true, else
    skips the test."""
    if os.geteuid() != 0:
        _unavailable("the test node's kubelet and containerd need root")
    paths = {name: BIN_DIR / name for name in NODE_BINARIES}
    missing = [name for name, path in paths.items() if not os.access(path, os.X_OK)]
    missing += [
        str(path)
        for path in (Path("/usr/bin/containerd"), CNI_BIN_DIR / "bridge")
        if not os.access(path, os.X_OK)
    ]
    if missing:
        _unavailable(
            f"{', '.join(missing)} missing: run `make setup` (it builds the node's binaries "
            "from tools/k8s/ and installs containerd and the CNI plugins from Debian)"
        )
    return paths


@dataclass
class KubeNode:
    """The running node: the API server's client (admin), the runtime, and where pods
    reach the host."""

    api: ApiServer
    runtime: Containerd
    host_address: str
    kubeconfig: Path
    pod_logs: Path
    name: str = NODE_NAME

    @property
    def kube(self) -> Kube:
        return self.api.kube

    def import_docker_image(self, image: str) -> None:
        """Make a Docker image (e.g. `replicator-engine:latest`) runnable on the node."""
        self.runtime.import_docker_image(image)

    def create_namespace(self, name: str) -> None:
        """A namespace whose `default` ServiceAccount exists (the controller manager
        makes it; a Pod that names none is refused until then)."""
        self.kube.create_namespace(name)
        wait_for(
            lambda: (
                self.kube.request(
                    "GET", f"/api/v1/namespaces/{name}/serviceaccounts/default"
                ).status_code
                == 200
            ),
            60,
            f"the default ServiceAccount of namespace {name}",
        )

    def pod(self, namespace: str, name: str) -> dict:
        response = self.kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        response.raise_for_status()
        return response.json()

    def pods(self, namespace: str, selector: str = "") -> list[dict]:
        params = {"labelSelector": selector} if selector else {}
        response = self.kube.request("GET", f"/api/v1/namespaces/{namespace}/pods", params=params)
        response.raise_for_status()
        return response.json()["items"]

    def container_log(self, namespace: str, pod: str, container: str) -> str:
        """What the container wrote (stdout and stderr, every restart), from the files
        the kubelet keeps (`podLogsDir`), without the CRI line prefixes."""
        lines = []
        for path in sorted(self.pod_logs.glob(f"{namespace}_{pod}_*/{container}/*.log")):
            for line in path.read_text(errors="replace").splitlines():
                parts = line.split(" ", 3)  # time, stream, P(artial)/F(ull), text
                lines.append(parts[3] if len(parts) == 4 else "")
        return "\n".join(lines)

    def diagnose(self, namespace: str, container: str | None = None) -> str:
        """The node's taints and conditions, the namespace's pods' statuses and events,
        and the end of `container`'s log in each pod, for an assertion's message."""
        pods = self.pods(namespace)
        node = self.kube.request("GET", f"/api/v1/nodes/{self.name}").json()
        out = [f"node {self.name}: {_node_state(node)}"]
        out += [yaml.safe_dump(pod.get("status", {})) for pod in pods]
        events = self.kube.request("GET", f"/api/v1/namespaces/{namespace}/events").json()
        for event in events.get("items", []):
            out.append(
                f"{event.get('involvedObject', {}).get('name')}: {event.get('reason')}: "
                f"{event.get('message')}"
            )
        for pod in pods if container else ():
            name = pod["metadata"]["name"]
            log = self.container_log(namespace, name, container)[-3000:]
            out.append(f"--- {name}/{container}:\n{log}")
        return "\n".join(out)


def wait_for(
    check: Callable[[], Any],
    timeout: float,
    what: str,
    interval: float = 0.5,
    explain: Callable[[], str] | None = None,
) -> Any:
    """Poll `check` until it returns something true; fails naming `what`, with what
    `explain` says (e.g. `KubeNode.diagnose`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(interval)
    message = f"timed out after {timeout:.0f} s waiting for {what}"
    raise AssertionError(message + (f"\n{explain()}" if explain else ""))


def _kubeconfig(kube: Kube, path: Path) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "node",
                "cluster": {"server": kube.url, "certificate-authority": str(kube.ca_file)},
            }
        ],
        "users": [{"name": "admin", "user": {"token": kube.token}}],
        "contexts": [{"name": "node", "context": {"cluster": "node", "user": "admin"}}],
        "current-context": "node",
    }
    path.touch(mode=0o600)  # the admin's token: readable by root only, from the start
    path.write_text(yaml.safe_dump(config))
    return path


def _kubelet_config(folder: Path, runtime: Containerd, cgroup_root: str) -> Path:
    config = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": "127.0.0.1",
        "port": free_port_pair(),
        "readOnlyPort": 0,
        "healthzPort": 0,
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True}},
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": runtime.endpoint,
        "imageServiceEndpoint": runtime.endpoint,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": cgroup_root,
        "failCgroupV1": False,
        "failSwapOn": False,
        "podLogsDir": str(folder / "pod-logs"),
        "volumePluginDir": str(folder / "volume-plugins"),
        "resolvConf": "/etc/resolv.conf",
        "registerNode": True,
        "rotateCertificates": False,
        "serializeImagePulls": False,
        # Images cannot be pulled again here: never collect them. Evict only when the
        # machine is nearly out of disk: the defaults (10 to 15 % of the disk free) would
        # taint the node on a machine whose disk the suite's data fills. No memory
        # threshold (a signal left out is off): the kubelet counts active page cache as
        # used, which the suite's brokers fill. A CI run's node was once tainted through
        # the whole module, the taint not recorded; memory.available as the kubelet
        # reckons it, sampled every 10 s through a later CI run, stayed above 12 GiB, so
        # the cause is not known: the wait for the node and `diagnose` now name taints.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "nodefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.available": "1%",
        },
        "nodeStatusUpdateFrequency": "5s",
        "syncFrequency": "10s",
        "fileCheckFrequency": "10s",
        "logging": {"verbosity": 1},
    }
    path = folder / "kubelet.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _cgroup_dirs(root: str) -> list[Path]:
    """`root` in each cgroup hierarchy mounted here (v1: one per controller; v2: one)."""
    mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    hierarchies = [line.split()[4] for line in mounts if " - cgroup" in line]
    return [Path(h) / root.lstrip("/") for h in hierarchies]


def _processes_in(dirs: list[Path]) -> set[int]:
    """The pids in these cgroups and their descendants."""
    return {
        int(pid)
        for path in dirs
        if path.exists()
        for procs in path.rglob("cgroup.procs")
        for pid in procs.read_text().split()
    }


@contextmanager
def _cgroup_root(name: str) -> Iterator[str]:
    """A cgroup `/NAME` in every hierarchy for the kubelet's `cgroupRoot` (it must exist);
    at the end every process left in it is killed and it is removed."""
    root = f"/{name}"
    dirs = _cgroup_dirs(root)
    for path in dirs:
        path.mkdir(exist_ok=True)
        if (path / "cpuset.cpus").exists():  # v1 cpuset: empty until given its parent's
            for knob in ("cpuset.cpus", "cpuset.mems"):
                (path / knob).write_text((path.parent / knob).read_text())
    try:
        yield root
    finally:
        for _ in range(20):
            pids = _processes_in(dirs)
            for pid in pids:
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if not pids:
                break
            time.sleep(0.5)
        for path in dirs:
            if path.exists():
                children = [child for child in path.rglob("*") if child.is_dir()]
                for child in sorted(children, key=lambda p: len(p.parts), reverse=True):
                    child.rmdir()
                path.rmdir()


def _drain(kube: Kube, controller_manager: subprocess.Popen) -> None:
    """Stop the controller manager (nothing recreates a Pod), delete every Pod and let
    the kubelet stop them; what it cannot stop in time is killed with the cgroups."""
    controller_manager.terminate()
    try:
        controller_manager.wait(timeout=30)
    except subprocess.TimeoutExpired:
        controller_manager.kill()
        controller_manager.wait(timeout=30)
    try:
        pods = kube.request("GET", "/api/v1/pods").json().get("items", [])
        for ns in {pod["metadata"]["namespace"] for pod in pods}:
            kube.request(
                "DELETE", f"/api/v1/namespaces/{ns}/pods", params={"gracePeriodSeconds": 2}
            )
        wait_for(
            lambda: not kube.request("GET", "/api/v1/pods").json().get("items"),
            DRAIN_TIMEOUT_S,
            "the kubelet to stop every Pod",
            interval=1,
        )
    except (httpx.HTTPError, AssertionError):
        pass  # the cgroups' cleanup kills what is left


def _node_state(node: dict) -> str:
    """A node's taints and conditions (each with its reason and message), in a line."""
    taints = [f"{t['key']}:{t.get('effect')}" for t in node.get("spec", {}).get("taints", [])]
    conditions = [
        f"{c['type']}={c['status']} ({c.get('reason')}: {c.get('message')})"
        for c in node.get("status", {}).get("conditions", [])
    ]
    return f"taints {taints or 'none'}; conditions: {'; '.join(conditions) or 'none'}"


def _wait_node_ready(kube: Kube, processes: dict[str, tuple[subprocess.Popen, Path]]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    state = "not registered"
    while time.monotonic() < deadline:
        for name, (process, log) in processes.items():
            if process.poll() is not None:
                raise AssertionError(
                    f"{name} exited {process.returncode} while the node started; its log "
                    f"({log}):\n{log_tail(log, 60)}"
                )
        response = kube.request("GET", f"/api/v1/nodes/{NODE_NAME}")
        if response.status_code == 200:
            node = response.json()
            conditions = node.get("status", {}).get("conditions", [])
            # Ready, and untainted: the controller manager lifts `not-ready` once the
            # kubelet says Ready, and a pressure taint would keep every Pod off the node.
            taints = node.get("spec", {}).get("taints", [])
            ready = [c for c in conditions if c["type"] == "Ready"]
            if ready and ready[0]["status"] == "True" and not taints:
                return
            state = _node_state(node)
        time.sleep(0.5)
    log = processes["kubelet"][1]
    raise AssertionError(
        f"node {NODE_NAME} not Ready and untainted in {READY_TIMEOUT_S:.0f} s ({state}); "
        f"the kubelet's log ({log}):\n{log_tail(log, 60)}"
    )


@contextmanager
def kube_node(folder: Path) -> Iterator[KubeNode]:
    """The single-node cluster under `folder`, its node Ready; all stopped after."""
    paths = node_binaries()
    folder = folder.resolve()
    node_id = secrets.token_hex(3)
    with ExitStack() as stack:
        stack.callback(unmount_under, folder)
        stack.enter_context(restored_host())
        cgroup_root = stack.enter_context(_cgroup_root(f"replicator-node-{node_id}"))
        network = stack.enter_context(pod_network(folder / "network"))
        runtime = stack.enter_context(containerd(folder / "containerd", network, PAUSE_IMAGE))
        runtime.import_archive(
            single_binary_image(paths["pause"], PAUSE_IMAGE, folder / "pause.tar")
        )
        control_plane = folder / "control-plane"
        control_plane.mkdir()
        api = stack.enter_context(api_server(control_plane))
        kubeconfig = _kubeconfig(api.kube, folder / "admin.kubeconfig")
        logs = folder / "logs"
        logs.mkdir()
        processes: dict[str, tuple[subprocess.Popen, Path]] = {}

        def start(name: str, *args: str) -> subprocess.Popen:
            log = logs / f"{name}.log"
            process = stack.enter_context(managed_process([str(paths[name]), *args], log))
            processes[name] = (process, log)
            return process

        controller_manager = start(
            "kube-controller-manager",
            f"--kubeconfig={kubeconfig}",
            "--secure-port=0",
            "--leader-elect=false",
            f"--service-account-private-key-file={api.service_account_key}",
            f"--root-ca-file={api.kube.ca_file}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--v=1",
        )
        start(
            "kube-scheduler",
            f"--kubeconfig={kubeconfig}",
            "--secure-port=0",
            "--leader-elect=false",
            "--v=1",
        )
        kubelet_dir = folder / "kubelet"
        start(
            "kubelet",
            f"--config={_kubelet_config(folder, runtime, cgroup_root)}",
            f"--kubeconfig={kubeconfig}",
            f"--root-dir={kubelet_dir}",
            f"--cert-dir={kubelet_dir / 'pki'}",
            f"--hostname-override={NODE_NAME}",
            f"--node-ip={network.host_address}",
        )
        stack.callback(_drain, api.kube, controller_manager)
        _wait_node_ready(api.kube, processes)
        yield KubeNode(api, runtime, network.host_address, kubeconfig, folder / "pod-logs")
