"""One single-node Apache Kafka cluster in KRaft mode, run as a local JVM process.

The node is both broker and controller, listens on loopback only, keeps its
storage and logs under its own folder, and is found again by later commands
through its command line (so a lost pid file can never leave a JVM behind).
"""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import os
import re
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template
from typing import cast

from confluent_kafka.admin import AdminClient, ClusterMetadata

from replicator_lab import certificates
from replicator_lab.errors import StackError
from replicator_lab.jvm import (
    archive_options,
    artifact_classpath,
    extra_jvm_options,
    find_java,
)
from replicator_lab.security import BROKER_USER, StackSecurity

#: Where a local broker listens unless its ClusterSpec says otherwise.
LOOPBACK_HOST = "127.0.0.1"
_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]+$")
_STOP_TIMEOUT_S = 30.0
_LOG_TAIL_LINES = 25


@dataclass(frozen=True)
class ClusterSpec:
    """Name and ports of one local cluster; the controller listens on ``port + 1``.

    `host`: the address the broker listens on and advertises (127.0.0.1 by default;
    e.g. the Docker bridge's gateway address, so that containers reach it as clusters
    outside their compose project). The controller stays on 127.0.0.1.
    """

    name: str
    port: int
    node_id: int = 1
    host: str = LOOPBACK_HOST

    def __post_init__(self) -> None:
        if not _NAME_PATTERN.match(self.name):
            raise StackError(
                f"cluster name {self.name!r} is not valid; use letters, digits, '-' and '_'"
            )
        if not 1024 <= self.port < 65535:
            raise StackError(
                f"port {self.port} for cluster {self.name!r} is out of range; use 1024-65534"
            )
        try:
            ipaddress.ip_address(self.host)
        except ValueError:
            raise StackError(
                f"host {self.host!r} of cluster {self.name!r} is not an IP address; "
                "give the address of one of this machine's interfaces (e.g. 127.0.0.1)"
            ) from None

    @property
    def controller_port(self) -> int:
        return self.port + 1

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @classmethod
    def parse(cls, text: str) -> ClusterSpec:
        """Parse the CLI form ``NAME=PORT``."""
        name, sep, port = text.partition("=")
        if not sep or not port.isdigit():
            raise StackError(f"cluster {text!r} is not NAME=PORT (for example primary=19092)")
        return cls(name=name, port=int(port))


def new_cluster_id() -> str:
    """A random KRaft cluster id, in the form `kafka-storage random-uuid` prints.

    Like Kafka's own `Uuid.randomUuid()`, never one starting with "-", which
    command-line parsers take for an option.
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


def port_in_use(port: int) -> bool:
    """True when something already listens on 127.0.0.1:`port`.

    Binds with SO_REUSEADDR as the JVM does, so sockets left in TIME_WAIT by a
    broker that just stopped do not count as taken.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _port_accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _read_properties(path: Path) -> dict[str, str]:
    properties: dict[str, str] = {}
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = raw.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            key, _, value = line.partition("=")
            properties[key.strip()] = value.strip()
    return properties


class LocalBroker:
    """Lifecycle of one cluster: format once, start, wait until it serves, stop."""

    def __init__(
        self,
        spec: ClusterSpec,
        data_dir: Path,
        heap: str = "512m",
        security: StackSecurity | None = None,
    ) -> None:
        self.spec = spec
        self.security = security
        self.root = data_dir / spec.name
        self.storage_dir = self.root / "kraft"
        self.logs_dir = self.root / "logs"
        self.config_file = self.root / "server.properties"
        self.heap = heap

    # -- discovery ---------------------------------------------------------------

    def pids(self) -> list[int]:
        """JVMs running this cluster's config, found in /proc (survives lost state)."""
        marker = str(self.config_file).encode()
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"kafka.Kafka" in cmdline and marker in cmdline:
                found.append(int(entry.name))
        return found

    @property
    def client_settings(self) -> dict[str, str]:
        """librdkafka settings of the stack's own clients (the broker's super user
        on a secured stack): bootstrap servers and, if secured, credentials."""
        settings = {"bootstrap.servers": self.spec.bootstrap}
        if self.security is not None:
            settings |= self.security.client_settings(BROKER_USER)
        return settings

    def metadata(self, timeout: float = 5.0) -> ClusterMetadata:
        """One metadata request; raises StackError if the broker does not answer."""
        admin = AdminClient(cast("dict[str, str | int | float | bool]", self.client_settings))
        try:
            return admin.list_topics(timeout=timeout)
        except Exception as exc:
            raise StackError(
                f"cluster {self.spec.name!r} at {self.spec.bootstrap} did not answer a "
                f"metadata request within {timeout:.0f}s: {exc}"
            ) from exc

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        """The end of the broker's log and console output, for error messages."""
        parts = []
        for name in ("server.log", "console.log"):
            path = self.logs_dir / name
            if path.exists():
                tail = path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
                if tail:
                    parts.append(f"--- {path} (last {len(tail)} lines)\n" + "\n".join(tail))
        return "\n".join(parts) or f"(no log output in {self.logs_dir})"

    # -- checks before starting ----------------------------------------------------

    def check_can_start(self) -> None:
        """Raise a one-line StackError for every reason this node cannot start."""
        pids = self.pids()
        if pids:
            raise StackError(
                f"cluster {self.spec.name!r} is already running (pid {pids[0]}, "
                f"{self.spec.bootstrap}); stop it first with `replicator stack down`"
            )
        for port in (self.spec.port, self.spec.controller_port):
            if port_in_use(port):
                raise StackError(
                    f"port {port} needed by cluster {self.spec.name!r} is already in use by "
                    f"another process; free it or choose other ports "
                    f"(--cluster {self.spec.name}=PORT uses PORT and PORT+1)"
                )
        self._check_storage()

    def needs_format(self) -> bool:
        return not (self.storage_dir / "meta.properties").exists()

    def _check_storage(self) -> None:
        meta_file = self.storage_dir / "meta.properties"
        fix = "delete it with `replicator stack down --wipe` (its data is lost) and run `up` again"
        if not meta_file.exists():
            if self.storage_dir.exists() and any(self.storage_dir.iterdir()):
                raise StackError(
                    f"data dir {self.storage_dir} of cluster {self.spec.name!r} is corrupt: "
                    f"it holds files but no meta.properties; {fix}"
                )
            return
        meta = _read_properties(meta_file)
        problems = []
        if not meta.get("cluster.id"):
            problems.append("no cluster.id")
        if meta.get("node.id") != str(self.spec.node_id):
            problems.append(f"node.id is {meta.get('node.id')!r}, expected {self.spec.node_id}")
        if not (self.storage_dir / "bootstrap.checkpoint").exists():
            problems.append("bootstrap.checkpoint is missing")
        if problems:
            raise StackError(
                f"data dir {self.storage_dir} of cluster {self.spec.name!r} is corrupt "
                f"({'; '.join(problems)}); {fix}"
            )

    # -- lifecycle -------------------------------------------------------------------

    def write_config(self) -> None:
        """server.properties; owner-only, as on a secured stack it holds the
        broker's own SCRAM password."""
        template = resources.files("replicator_lab").joinpath("templates/server.properties")
        host, port, controller_port = self.spec.host, self.spec.port, self.spec.controller_port
        if self.security is None:
            listeners = {
                "listeners": f"PLAINTEXT://{host}:{port},CONTROLLER://127.0.0.1:{controller_port}",
                "advertised_listeners": f"PLAINTEXT://{host}:{port}",
                "protocol_map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "inter_broker_listener": "PLAINTEXT",
            }
            security = ""
        else:
            listeners = self.security.listener_settings(host, port, controller_port)
            settings = self.security.broker_settings()
            security = f"\n# Secured ({self.security.mode}): lab/replicator_lab/security.py\n"
            security += "".join(f"{key}={value}\n" for key, value in settings.items())
        rendered = Template(template.read_text(encoding="utf-8")).substitute(
            name=self.spec.name,
            node_id=self.spec.node_id,
            port=port,
            controller_port=controller_port,
            log_dir=self.storage_dir,
            security=security,
            **listeners,
        )
        self.root.mkdir(parents=True, exist_ok=True)
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        certificates.write_private(self.config_file, rendered.encode())

    @property
    def gc_log(self) -> Path:
        """The broker's garbage-collection pauses, one line each (as Kafka's own start
        scripts keep them), to tell a broker's pause from a replicator's delay."""
        return self.logs_dir / "gc.log"

    def _java_command(
        self, main_class: str, *args: str, heap: str, options: Sequence[str] = ()
    ) -> list[str]:
        log4j = resources.files("replicator_lab").joinpath("templates/log4j2.properties")
        return [
            str(find_java()),
            f"-Xms{heap}",
            f"-Xmx{heap}",
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            *archive_options("kafka"),
            *extra_jvm_options(),
            *options,
            "-Djava.awt.headless=true",
            f"-Dkafka.logs.dir={self.logs_dir}",
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            artifact_classpath("kafka"),
            main_class,
            *args,
        ]

    def broker_command(self) -> list[str]:
        """The broker's JVM, with its GC pauses logged to `gc_log`."""
        gc_log = f"-Xlog:gc:file={self.gc_log}:time,uptime:filecount=5,filesize=20M"
        return self._java_command(
            "kafka.Kafka", str(self.config_file), heap=self.heap, options=[gc_log]
        )

    def start_format(self) -> subprocess.Popen[bytes]:
        """Format storage with a fresh cluster id (once per data dir)."""
        command = self._java_command(
            "kafka.tools.StorageTool",
            "format",
            f"--cluster-id={new_cluster_id()}",
            f"--config={self.config_file}",
            *(self.security.format_arguments() if self.security else ()),
            heap="128m",
        )
        with (self.logs_dir / "format.log").open("ab") as out:
            return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)

    def check_formatted(self, process: subprocess.Popen[bytes]) -> None:
        if process.wait() != 0 or self.needs_format():
            log = (self.logs_dir / "format.log").read_text(encoding="utf-8", errors="replace")
            raise StackError(
                f"formatting storage of cluster {self.spec.name!r} in {self.storage_dir} "
                f"failed (exit {process.returncode}):\n{log.strip()}"
            )

    def start(self) -> subprocess.Popen[bytes]:
        """Start the JVM in its own session, so a Ctrl-C in the terminal reaches
        only the supervising command, which then stops the broker cleanly."""
        command = self.broker_command()
        with (self.logs_dir / "console.log").open("ab") as out:
            return subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def wait_ready(self, process: subprocess.Popen[bytes], deadline: float) -> str:
        """Block until the broker answers a metadata request; return its cluster id."""
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise StackError(
                    f"cluster {self.spec.name!r} exited during start-up "
                    f"(exit {process.returncode}):\n{self.log_tail()}"
                )
            if _port_accepts(self.spec.host, self.spec.port):
                metadata = self.metadata(timeout=max(1.0, deadline - time.monotonic()))
                if metadata.cluster_id:
                    return metadata.cluster_id
            time.sleep(0.2)
        raise StackError(
            f"cluster {self.spec.name!r} did not answer at {self.spec.bootstrap} "
            f"before the start-up timeout:\n{self.log_tail()}"
        )

    def stop(self, timeout: float = _STOP_TIMEOUT_S) -> bool:
        """SIGTERM (controlled shutdown), then SIGKILL after `timeout`. True if it ran."""
        pids = self.pids()
        for pid in pids:
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid in self.pids():
            _signal(pid, signal.SIGKILL)
        while self.pids():
            time.sleep(0.05)
        return bool(pids)


def _signal(pid: int, signum: signal.Signals) -> None:
    # A process that exited between discovery and signal has reached the goal.
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)
