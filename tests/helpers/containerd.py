"""A containerd of the test node's own (Debian's containerd 1.6 and runc, `make setup`):
its root, state, socket, runc state and network namespaces all under one folder, its own
configuration (CRI plugin on, cgroupfs as the kubelet's `cgroupDriver`, the pod network's
CNI configuration, the sandbox image made here), images imported with `ctr` into the
`k8s.io` namespace the CRI plugin serves. Nothing of a containerd the host may run (or of
Docker's) is touched.

At the end every task still running is killed, containerd stops, the shims it started
(each named by its socket in its command line) are killed, and what it mounted under its
folder (container root file systems, network namespaces) is unmounted. Two folders it
uses are fixed by containerd 1.6 and its CNI library (the shims' sockets, the CNI result
cache); they are removed afterwards when they did not exist before and are empty.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from helpers.kube import log_tail, managed_process
from helpers.pod_network import CNI_BIN_DIR, PodNetwork

CONTAINERD = Path("/usr/bin/containerd")
CTR = Path("/usr/bin/ctr")
NAMESPACE = "k8s.io"
START_TIMEOUT_S = 30.0
#: Where containerd 1.6 puts its shims' sockets and its CNI library caches results,
#: whatever the configuration says; deepest first.
_FIXED_DIRS = (
    Path("/run/containerd/s"),
    Path("/run/containerd"),
    Path("/var/lib/cni/results"),
    Path("/var/lib/cni"),
)


def _config(folder: Path, socket: Path, network: PodNetwork, sandbox_image: str) -> str:
    """containerd 1.6's configuration (version 2)."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""version = 2
root = "{folder / "root"}"
state = "{folder / "state"}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{socket}.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "{folder / "opt"}"

[{cri}]
  sandbox_image = "{sandbox_image}"
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  # No OOM score below containerd's own: lowering one needs CAP_SYS_RESOURCE, which a
  # root in a sandboxed VM may lack (runc then fails every pod sandbox, whose score
  # containerd sets to -998: "failed to update /proc/self/oom_score_adj: Permission denied").
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false
  Root = "{folder / "runc"}"

[{cri}.cni]
  bin_dir = "{CNI_BIN_DIR}"
  conf_dir = "{network.conf_dir}"
  max_conf_num = 1
"""


@dataclass
class Containerd:
    socket: Path
    log: Path

    @property
    def endpoint(self) -> str:
        """The CRI endpoint, as the kubelet's `containerRuntimeEndpoint` takes it."""
        return f"unix://{self.socket}"

    def ctr(self, *args: str, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
        """`ctr ARGS` against this containerd, in the `k8s.io` namespace; fails on error."""
        result = subprocess.run(
            [str(CTR), "--address", str(self.socket), "--namespace", NAMESPACE, *args],
            capture_output=True,
            timeout=timeout,
            check=False,
            **kwargs,
        )
        if result.returncode != 0:
            raise AssertionError(
                f"ctr {' '.join(args)} exited {result.returncode}: "
                f"{result.stderr.decode(errors='replace')}"
            )
        return result

    def import_archive(self, archive: Path) -> None:
        """Import (and unpack) the images of an OCI or docker-archive tar file."""
        self.ctr("images", "import", str(archive))

    def import_docker_image(self, image: str, timeout: float = 600) -> None:
        """`docker save IMAGE`, streamed into this containerd."""
        save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
        try:
            self.ctr("images", "import", "-", stdin=save.stdout, timeout=timeout)
        finally:
            assert save.stdout is not None
            save.stdout.close()
            if save.wait(timeout=60) != 0:
                raise AssertionError(f"docker save {image} exited {save.returncode}")

    def images(self) -> list[str]:
        return self.ctr("images", "list", "--quiet").stdout.decode().split()


def _wait_answering(runtime: Containerd, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(
                f"containerd exited {process.returncode} while starting; its log "
                f"({runtime.log}):\n{log_tail(runtime.log)}"
            )
        if runtime.socket.exists():
            try:
                runtime.ctr("version", timeout=10)
                return
            except AssertionError:
                pass
        time.sleep(0.2)
    raise AssertionError(
        f"containerd did not answer in {START_TIMEOUT_S:.0f} s:\n{log_tail(runtime.log)}"
    )


def _kill_tasks(runtime: Containerd) -> None:
    """SIGKILL every task left (the kubelet removes its pods' before; this is for a
    test that failed half-way), and delete them."""
    try:
        tasks = runtime.ctr("tasks", "list", "--quiet", timeout=30).stdout.decode().split()
        for task in tasks:
            subprocess.run(
                [str(CTR), "--address", str(runtime.socket), "--namespace", NAMESPACE,
                 "tasks", "delete", "--force", task],
                capture_output=True, timeout=30, check=False,
            )  # fmt: skip
    except (AssertionError, subprocess.TimeoutExpired):
        pass


def _own_shims(socket: Path) -> list[int]:
    """The pids of the shims this containerd started: each has `-address SOCKET`."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(socket).encode() in args and b"-address" in args:
            pids.append(int(entry.name))
    return pids


def unmount_under(folder: Path) -> None:
    """Unmount every mount point under `folder` (deepest first; lazily, so a busy one
    goes when its last user does)."""
    prefix = str(folder.resolve()) + "/"
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].encode().decode("unicode_escape")
        if point.startswith(prefix) or point == prefix.rstrip("/"):
            points.append(point)
    for point in sorted(set(points), key=lambda p: p.count("/"), reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, timeout=30, check=False)


@contextmanager
def containerd(folder: Path, network: PodNetwork, sandbox_image: str) -> Iterator[Containerd]:
    """containerd under `folder`, answering; stopped, with its shims and mounts, after."""
    for path in (CONTAINERD, CTR):
        if not os.access(path, os.X_OK):
            raise AssertionError(f"{path} missing: run `make setup` (Debian's containerd)")
    folder.mkdir(parents=True, exist_ok=True)
    socket = folder / "containerd.sock"
    config = folder / "config.toml"
    config.write_text(_config(folder, socket, network, sandbox_image))
    runtime = Containerd(socket, folder / "containerd.log")
    fixed_before = {path for path in _FIXED_DIRS if path.exists()}
    try:
        with managed_process([str(CONTAINERD), "--config", str(config)], runtime.log) as process:
            _wait_answering(runtime, process)
            try:
                yield runtime
            finally:
                _kill_tasks(runtime)
    finally:
        for pid in _own_shims(socket):
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        unmount_under(folder)
        for path in _FIXED_DIRS:
            if path not in fixed_before:
                with suppress(OSError):  # not empty: someone else's too
                    path.rmdir()
