"""What the container image runs for docker-compose.yml, with the code `make run` uses.

- `ContainerBroker`: one cluster of the embedded default (`LocalBroker`: the same
  template, storage format and JVM command) serving on the container's network
  instead of loopback, in the foreground (the JVM replaces the command, so Docker's
  SIGTERM reaches Kafka's controlled shutdown);
- `prepare`: the one-shot set-up `EmbeddedSystem` does before it starts workers and
  the demo application: flows into the home cluster start stopped (a failover starts
  them), the demo application is registered on the home cluster, its topic exists on
  every cluster;
- `run_traffic`: the demo traffic of `make run` until SIGTERM.

Listeners of a container broker: `PLAINTEXT` on 0.0.0.0:`port` advertised as
`advertise:port` (the other containers), `EXTERNAL` on 0.0.0.0:`port + 2` advertised as
`external` (the address the host publishes it on, e.g. 127.0.0.1:39092), and the
controller on loopback, `port + 1`, as on the embedded default.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from replicator.config.model import ReplicatorConfig
from replicator.statestore import StateStore
from replicator_lab.broker import ClusterSpec, LocalBroker
from replicator_lab.demo import DEMO_TOPICS, DemoTraffic, ensure_topics
from replicator_lab.errors import StackError
from replicator_lab.system import DEMO_APP_TOPIC, prepare_state

log = logging.getLogger(__name__)

#: The in-network port of a container broker (controller: +1, external listener: +2).
CONTAINER_PORT = 9092


@dataclass(frozen=True)
class ContainerNetwork:
    """How clients reach a container broker: `advertise` is its host name on the
    container network, `external` the host:port the host publishes `port + 2` on
    (None: no external listener)."""

    advertise: str
    external: str | None = None


class ContainerBroker(LocalBroker):
    """A `LocalBroker` listening on every interface of its container."""

    def __init__(
        self, spec: ClusterSpec, data_dir: Path, network: ContainerNetwork, heap: str = "512m"
    ) -> None:
        super().__init__(spec, data_dir, heap)
        self.network = network

    def write_config(self) -> None:
        """The embedded default's server.properties, then the container's listeners
        after it (in a .properties file the last value of a key wins)."""
        super().write_config()
        with self.config_file.open("a", encoding="utf-8") as config:
            config.write("\n# A container's broker: lab/replicator_lab/container.py\n")
            config.writelines(f"{key}={value}\n" for key, value in self.listener_settings().items())

    def listener_settings(self) -> dict[str, str]:
        """server.properties keys of the container's listeners."""
        port, controller = self.spec.port, self.spec.controller_port
        listeners = [f"PLAINTEXT://0.0.0.0:{port}", f"CONTROLLER://127.0.0.1:{controller}"]
        advertised = [f"PLAINTEXT://{self.network.advertise}:{port}"]
        protocols = ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"]
        if self.network.external is not None:
            listeners.append(f"EXTERNAL://0.0.0.0:{port + 2}")
            advertised.append(f"EXTERNAL://{self.network.external}")
            protocols.append("EXTERNAL:PLAINTEXT")
        return {
            "listeners": ",".join(listeners),
            "advertised.listeners": ",".join(advertised),
            "listener.security.protocol.map": ",".join(protocols),
            "inter.broker.listener.name": "PLAINTEXT",
        }

    def serve(self) -> None:
        """Format the storage on first start, then become the broker (never returns).

        The broker logs to `<data dir>/<name>/logs/server.log` on the volume, as on the
        embedded default; its console output is the container's."""
        self.write_config()
        if self.needs_format():
            self.check_formatted(self.start_format())
        command = self.broker_command()
        log.info(
            "cluster %r: serving on %s (log %s)",
            self.spec.name,
            self.listener_settings()["advertised.listeners"],
            self.logs_dir / "server.log",
        )
        os.execv(command[0], command)  # noqa: S606 - the broker replaces this process


def prepare(
    config: ReplicatorConfig,
    store: StateStore,
    home: str,
    demo_app: str | None = None,
    demo_topic: str = DEMO_APP_TOPIC,
) -> None:
    """Set up the state store and the clusters of `config` for a first start, leaving
    what an earlier start (or a failover since) recorded as it is."""
    if home not in config.clusters:
        raise StackError(f"home cluster {home!r} is none of the clusters {sorted(config.clusters)}")
    prepare_state(config, store, home, demo_app)
    if demo_app is not None:
        for cluster in config.clusters.values():
            ensure_topics(cluster.bootstrap_servers, {demo_topic: DEMO_TOPICS[demo_topic]})


def run_traffic(bootstrap: str, rate: int, skip: frozenset[str]) -> None:
    """Demo traffic into `bootstrap` until SIGTERM or SIGINT; then flush and return."""
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _stop)
    traffic = DemoTraffic(bootstrap, rate, skip)
    traffic.start()
    log.info("demo traffic: %d records/s into %s at %s", rate, ", ".join(traffic.topics), bootstrap)
    stop.wait()
    counts = traffic.stop()
    log.info("demo traffic stopped: %d delivered, %d failed", counts.produced, counts.failed)
