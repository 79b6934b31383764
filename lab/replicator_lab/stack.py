"""Any number of named local Kafka clusters, started and stopped together.

This is the embedded default the whole project runs and tests on: by default a
`primary` and a `dr` cluster on fixed loopback ports, their storage and logs
under `.data/stack/<name>/`. The set of clusters is remembered in
`stack.json` so that `status` and `down` find what `up` started.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from replicator_lab.broker import LOOPBACK_HOST, ClusterSpec, LocalBroker
from replicator_lab.client_config import write_client_config
from replicator_lab.errors import StackError
from replicator_lab.private import private_umask
from replicator_lab.security import SecurityMode, StackSecurity

DEFAULT_CLUSTERS = (ClusterSpec("primary", 19092), ClusterSpec("dr", 29092))
DEFAULT_DATA_DIR = Path(".data/stack")
DEFAULT_HEAP = "512m"
_STATE_FILE = "stack.json"


@dataclass
class ClusterStatus:
    """What `replicator stack status` reports for one cluster."""

    name: str
    bootstrap: str
    state: str  # "running", "unresponsive" (JVM up, no answer) or "stopped"
    pid: int | None = None
    cluster_id: str | None = None
    topics: list[str] = field(default_factory=list)
    logs: str = ""

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


class LocalStack:
    """The named clusters under one data folder."""

    def __init__(
        self,
        clusters: tuple[ClusterSpec, ...] | list[ClusterSpec] = DEFAULT_CLUSTERS,
        data_dir: Path = DEFAULT_DATA_DIR,
        heap: str = DEFAULT_HEAP,
        security: SecurityMode | None = None,
    ) -> None:
        self.clusters = tuple(clusters)
        self.data_dir = Path(data_dir).resolve()
        self.heap = heap
        #: None: PLAINTEXT, no authorizer (the default); else see `replicator_lab.security`.
        self.security = (
            StackSecurity(
                security,
                self.data_dir / "security",
                hosts=[spec.host for spec in self.clusters if spec.host != LOOPBACK_HOST],
            )
            if security is not None
            else None
        )
        _check_distinct(self.clusters)
        self.brokers = {
            spec.name: LocalBroker(spec, self.data_dir, heap, self.security)
            for spec in self.clusters
        }

    @classmethod
    def load(cls, data_dir: Path = DEFAULT_DATA_DIR) -> LocalStack:
        """The stack that `up` last wrote under `data_dir`, or the default one."""
        state_file = Path(data_dir) / _STATE_FILE
        if not state_file.exists():
            return cls(data_dir=data_dir)
        try:
            state = json.loads(state_file.read_text(encoding="utf-8"))
            clusters = [ClusterSpec(**spec) for spec in state["clusters"]]
            return cls(
                clusters, data_dir=data_dir, heap=state["heap"], security=state.get("security")
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise StackError(
                f"{state_file} is unreadable ({exc}); stop any cluster with "
                f"`replicator stack down` and delete the file"
            ) from exc

    def bootstrap(self, name: str) -> str:
        """The bootstrap address of cluster `name`."""
        if name not in self.brokers:
            raise StackError(f"no cluster named {name!r}; this stack has {sorted(self.brokers)}")
        return self.brokers[name].spec.bootstrap

    def client_settings(self, name: str) -> dict[str, str]:
        """librdkafka settings of the stack's own admin client of cluster `name`
        (on a secured stack: the broker's super user, for setting up, not for apps)."""
        self.bootstrap(name)  # the error naming the clusters
        return self.brokers[name].client_settings

    # -- lifecycle -------------------------------------------------------------------

    def up(self, timeout: float = 90.0, keep_running: bool = False) -> list[str]:
        """Start every cluster and return once each answers a metadata request.

        With `keep_running`, clusters that already run are left alone instead of
        being an error. Returns the names this call started; if any cluster
        fails, the ones this call started are stopped again before raising.
        The data folder is made, and the brokers run, under umask 077: their
        storage, logs and credentials are their owner's only.
        """
        with private_umask():
            return self._up(timeout, keep_running)

    def _up(self, timeout: float, keep_running: bool) -> list[str]:
        to_start = [
            broker for broker in self.brokers.values() if not (keep_running and broker.pids())
        ]
        for broker in to_start:
            broker.check_can_start()
        self._check_same_security([b for b in to_start if not b.needs_format()])
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._write_state()
        if self.security is not None:
            self.security.ensure()

        for broker in to_start:
            broker.write_config()
        formatting = [(b, b.start_format()) for b in to_start if b.needs_format()]
        for broker, process in formatting:
            broker.check_formatted(process)

        deadline = time.monotonic() + timeout
        started = [(broker, broker.start()) for broker in to_start]
        try:
            for broker, process in started:
                broker.wait_ready(process, deadline)
            if self.security is not None:
                write_client_config(self)
        except BaseException:
            for broker, _ in started:
                broker.stop()
            raise
        return [broker.spec.name for broker, _ in started]

    def down(self, names: list[str] | None = None, wipe: bool = False) -> list[str]:
        """Stop the named clusters (all by default); return those that were running.

        With `wipe`, also delete their storage and logs.
        """
        stopped = []
        for name in names if names is not None else list(self.brokers):
            broker = self.brokers[name]
            if broker.stop():
                stopped.append(name)
            if wipe and broker.root.exists():
                shutil.rmtree(broker.root)
        return stopped

    def status(self) -> list[ClusterStatus]:
        return [self._status_of(broker) for broker in self.brokers.values()]

    def _status_of(self, broker: LocalBroker) -> ClusterStatus:
        pids = broker.pids()
        status = ClusterStatus(
            name=broker.spec.name,
            bootstrap=broker.spec.bootstrap,
            state="stopped",
            pid=pids[0] if pids else None,
            logs=str(broker.logs_dir),
        )
        if not pids:
            return status
        try:
            metadata = broker.metadata(timeout=5.0)
        except StackError:
            status.state = "unresponsive"
            return status
        status.state = "running"
        status.cluster_id = metadata.cluster_id
        status.topics = sorted(t for t in metadata.topics if not t.startswith("__"))
        return status

    def _check_same_security(self, formatted: list[LocalBroker]) -> None:
        """Storage formatted for another security mode lacks (or has) the SCRAM
        users, which only formatting creates: refuse rather than start half secured."""
        state_file = self.data_dir / _STATE_FILE
        if not formatted or not state_file.exists():
            return
        before = json.loads(state_file.read_text(encoding="utf-8")).get("security")
        now = self.security.mode if self.security is not None else None
        if before != now:
            raise StackError(
                f"the clusters under {self.data_dir} were created with security "
                f"{before or 'none (PLAINTEXT)'}, not {now or 'none (PLAINTEXT)'}; start them "
                "as before, or delete them with `replicator stack down --wipe` first"
            )

    def _write_state(self) -> None:
        state = {
            "clusters": [asdict(spec) for spec in self.clusters],
            "heap": self.heap,
            "security": self.security.mode if self.security is not None else None,
        }
        (self.data_dir / _STATE_FILE).write_text(json.dumps(state, indent=2), encoding="utf-8")


def _check_distinct(clusters: tuple[ClusterSpec, ...]) -> None:
    if not clusters:
        raise StackError("a stack needs at least one cluster")
    names = [spec.name for spec in clusters]
    duplicates = {name for name in names if names.count(name) > 1}
    if duplicates:
        raise StackError(f"cluster names must be unique; repeated: {sorted(duplicates)}")
    owner: dict[int, str] = {}
    for spec in clusters:
        for port in (spec.port, spec.controller_port):
            if port in owner:
                raise StackError(
                    f"clusters {owner[port]!r} and {spec.name!r} both need port {port} "
                    f"(each cluster uses PORT and PORT+1); pick ports at least 2 apart"
                )
            owner[port] = spec.name
