"""One Prometheus endpoint for `replicator run` and its worker processes.

A flow with `tasks.max` N, or several flows, run their workers as processes; each
process counts its own metrics. Each worker serves them on a port of its own on the
loopback interface (chosen by the system, told to the runner), and the runner serves
the whole tree on the port the configuration names (`metrics.port`): its own families
(checkpoints, background loops, clusters) and every live worker's, read from the
worker when Prometheus scrapes. No port arithmetic: two flows, or a flow with many
workers, share the one port the Helm chart and compose publish.

A worker's samples gain a `worker` label (`<flow>#<index>`) where they have none, so
the workers of one flow never collide: sum by flow and topic for the flow's figure
(the shipped alerts and dashboard do). A worker process that is not running while
its flow should run shows as `replicator_worker_running` 0, as a worker thread's
failed loop does, so the readiness probe sees it.
"""

from __future__ import annotations

import logging
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from threading import Lock

from prometheus_client import REGISTRY, CollectorRegistry, start_http_server
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

log = logging.getLogger(__name__)

#: How long a scrape waits for one worker's metrics.
_WORKER_TIMEOUT_S = 5.0
_WORKER_RUNNING = "replicator_worker_running"


@dataclass(frozen=True)
class WorkerEndpoint:
    """Where one worker process serves its metrics, and whether it should be running."""

    flow: str
    name: str
    #: The loopback port the worker serves on (None: not told yet).
    port: Callable[[], int | None]
    #: True while the process runs, False once it ended.
    alive: Callable[[], bool]
    #: True while the runner wants it running (False once it was asked to stop).
    wanted: Callable[[], bool]


class MetricsTree:
    """The families of this process and of its registered worker processes, as one
    collector (register it with a registry and serve that)."""

    def __init__(self) -> None:
        self._workers: dict[str, WorkerEndpoint] = {}
        self._lock = Lock()

    def add(self, worker: WorkerEndpoint) -> None:
        """Serve `worker`'s metrics from now on (a restarted worker replaces its name's)."""
        with self._lock:
            self._workers[worker.name] = worker

    def serve(self, port: int) -> None:
        """Serve the tree on `port`, all interfaces (Prometheus scrapes remotely)."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self)
        start_http_server(port, registry=registry)

    def collect(self) -> Iterator[Metric]:
        families: dict[str, Metric] = {}
        _merge(families, REGISTRY.collect(), worker=None)
        with self._lock:
            workers = list(self._workers.values())
        if workers:
            with ThreadPoolExecutor(min(8, len(workers))) as pool:
                texts = list(pool.map(_read, workers))
            for worker, text in zip(workers, texts, strict=True):
                if text is not None:
                    _merge(families, text_string_to_metric_families(text), worker=worker.name)
                elif worker.wanted() and not worker.alive():
                    _not_running(families, worker)
        yield from families.values()


def serve_worker() -> int:
    """Serve this worker process's metrics on a loopback port the system picks; the port."""
    server, _ = start_http_server(0, addr="127.0.0.1")
    return int(server.server_port)


def _read(worker: WorkerEndpoint) -> str | None:
    """The worker's exposition, or None when it does not answer (starting or ended)."""
    port = worker.port()
    if port is None or not worker.alive():
        return None
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        with urllib.request.urlopen(url, timeout=_WORKER_TIMEOUT_S) as response:
            return response.read().decode()
    except (urllib.error.URLError, OSError) as exc:  # it ended between the look and the read
        log.debug("worker %s: metrics not read: %s", worker.name, exc)
        return None


def _merge(families: dict[str, Metric], found: Iterable[Metric], worker: str | None) -> None:
    """Add `found`'s samples to `families` (one family per name), labelled with `worker`."""
    for family in found:
        into = families.get(family.name)
        if into is None:
            into = families[family.name] = Metric(
                family.name, family.documentation, family.type, family.unit
            )
        for sample in family.samples:
            labels = sample.labels
            if worker is not None and "worker" not in labels:
                labels = {**labels, "worker": worker}
            into.samples.append(
                Sample(sample.name, labels, sample.value, sample.timestamp, sample.exemplar)
            )


def _not_running(families: dict[str, Metric], worker: WorkerEndpoint) -> None:
    """`replicator_worker_running` 0 for a worker process that should run and does not."""
    family = families.get(_WORKER_RUNNING)
    if family is None:
        family = families[_WORKER_RUNNING] = Metric(
            _WORKER_RUNNING, "1 while the worker's replication loop runs.", "gauge"
        )
    family.samples.append(
        Sample(_WORKER_RUNNING, {"flow": worker.flow, "worker": worker.name}, 0.0)
    )
