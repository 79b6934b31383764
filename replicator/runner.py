"""Running the flows of one configuration until asked to stop.

Each flow runs its replication task in its own thread (librdkafka does the
network work in its own threads, so one process keeps several flows busy).
SIGTERM and Ctrl-C stop every task cleanly: in-flight records are flushed and
acknowledged before the process exits, so the next start resumes exactly.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import multiprocessing
import os
import signal
import sys
import threading
from types import FrameType

from replicator import metrics
from replicator.config.model import FlowConfig, ReplicatorConfig
from replicator.errors import ReplicatorError
from replicator.task import ReplicationTask

log = logging.getLogger(__name__)

_STOP_TIMEOUT_S = 60.0
_PR_SET_PDEATHSIG = 1


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

    A flow with `tasks.max` N runs as N worker processes (processes, so each
    worker has a core of its own) that share the flow's partitions through the
    consumer group; a single worker runs in this process. Raises
    ReplicatorError naming every flow or worker that failed.
    """
    stop = stop_event or threading.Event()
    if threading.current_thread() is threading.main_thread():
        _stop_on_signals(stop)
    if sum(flow.tasks_max for flow in flows) == 1:
        _run_here(flows[0], stop)
    else:
        _run_workers(flows, stop)


def _run_here(flow: FlowConfig, stop: threading.Event) -> None:
    if flow.metrics_port:
        metrics.serve(flow.metrics_port)
        log.info("metrics on http://0.0.0.0:%d/metrics", flow.metrics_port)
    try:
        ReplicationTask(flow, stop_event=stop).run()
    except ReplicatorError as exc:
        raise ReplicatorError(f"replication of {flow.name} stopped: {exc}") from exc


def _run_workers(flows: list[FlowConfig], stop: threading.Event) -> None:
    """Keep `tasks.max` workers per flow alive until stopped. A worker killed by a
    signal (OOM killer, `kill -9`) is started again; its partitions meanwhile
    move to the others. A worker that fails by itself (a `fail` policy, bad
    credentials) stops them all: restarting would fail the same way."""
    context = multiprocessing.get_context("spawn")
    level = logging.getLogger().getEffectiveLevel()
    slots = [(flow, index) for flow in flows for index in range(flow.tasks_max)]

    def start(flow: FlowConfig, index: int) -> multiprocessing.process.BaseProcess:
        worker = context.Process(
            target=_worker_main, args=(flow, index, level), name=f"{flow.name}#{index}"
        )
        worker.start()
        return worker

    workers = [start(flow, index) for flow, index in slots]
    log.info("started %d workers: %s", len(workers), ", ".join(w.name for w in workers))
    failed: list[str] = []
    while not stop.is_set() and not failed:
        stop.wait(0.5)
        for position, worker in enumerate(workers):
            if worker.exitcode is not None and worker.exitcode < 0 and not stop.is_set():
                log.warning(
                    "worker %s (pid %s) was killed by signal %d; starting it again",
                    worker.name, worker.pid, -worker.exitcode,
                )  # fmt: skip
                workers[position] = start(*slots[position])
            elif worker.exitcode not in (None, 0):
                failed.append(f"{worker.name} (exit {worker.exitcode})")
    for worker in workers:
        if worker.is_alive():
            worker.terminate()  # SIGTERM: the worker flushes what is in flight, then exits
    for worker in workers:
        worker.join(_STOP_TIMEOUT_S)
        if worker.is_alive():
            log.error("worker %s did not stop in %.0f s; killing it", worker.name, _STOP_TIMEOUT_S)
            worker.kill()
            worker.join()
    if failed:
        raise ReplicatorError(
            f"replication stopped: workers failed: {', '.join(failed)}; "
            "their errors are logged above"
        )


def _worker_main(flow: FlowConfig, index: int, level: int) -> None:
    """Entry point of one worker process."""
    _die_with_parent()
    logging.basicConfig(
        level=level, format=f"%(asctime)s %(levelname)s [{flow.name}#{index}] %(name)s: %(message)s"
    )
    stop = threading.Event()
    _stop_on_signals(stop)
    if flow.metrics_port:
        metrics.serve(flow.metrics_port + index)
    try:
        ReplicationTask(flow, stop_event=stop).run()
    except ReplicatorError as exc:
        log.error("%s", exc)
        sys.exit(1)


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this worker when its parent dies: a `kill -9` of
    `replicator run` must not leave workers writing on their own."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
        log.warning("cannot tie worker %d to its parent's life (prctl failed)", os.getpid())


def _stop_on_signals(stop: threading.Event) -> None:
    def handler(signum: int, frame: FrameType | None) -> None:
        log.info("received %s: flushing and stopping", signal.Signals(signum).name)
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, handler)
