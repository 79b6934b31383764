"""Running the flows of one configuration until asked to stop.

Each flow runs its replication task in its own thread (librdkafka does the
network work in its own threads, so one process keeps several flows busy).
SIGTERM and Ctrl-C stop every task cleanly: in-flight records are flushed and
acknowledged before the process exits, so the next start resumes exactly.
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

from replicator import metrics
from replicator.config.model import FlowConfig, ReplicatorConfig
from replicator.errors import ReplicatorError
from replicator.task import ReplicationTask

log = logging.getLogger(__name__)


def select_flows(config: ReplicatorConfig, names: list[str] | None) -> list[FlowConfig]:
    """The flows named (all enabled ones by default); ReplicatorError if none."""
    flows = [config.flow(name) for name in names] if names else list(config.flows)
    if not flows:
        raise ReplicatorError(
            f"no flow is enabled in {config.source_file or 'the configuration'}; "
            "set A->B.enabled = true for at least one pair of clusters"
        )
    return flows


def run_flows(flows: list[FlowConfig], stop_event: threading.Event | None = None) -> None:
    """Run `flows` until `stop_event` is set (or SIGTERM/SIGINT on the main thread).

    Raises ReplicatorError naming every flow that failed.
    """
    stop = stop_event or threading.Event()
    if threading.current_thread() is threading.main_thread():
        _stop_on_signals(stop)
    port = next((f.metrics_port for f in flows if f.metrics_port), None)
    if port:
        metrics.serve(port)
        log.info("metrics on http://0.0.0.0:%d/metrics", port)
    tasks = [ReplicationTask(flow, stop_event=stop) for flow in flows]
    failures: dict[str, BaseException] = {}

    def run(task: ReplicationTask) -> None:
        try:
            task.run()
        except Exception as exc:  # reported below with the flow's name
            failures[task.flow.name] = exc
            stop.set()

    threads = [threading.Thread(target=run, args=(t,), name=t.flow.name) for t in tasks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        summary = "; ".join(f"{name}: {exc}" for name, exc in failures.items())
        raise ReplicatorError(f"replication stopped: {summary}")


def _stop_on_signals(stop: threading.Event) -> None:
    def handler(signum: int, frame: FrameType | None) -> None:
        log.info("received %s: flushing and stopping", signal.Signals(signum).name)
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, handler)
