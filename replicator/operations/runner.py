"""Running the flows of one configuration until asked to stop.

Each flow runs its replication task in its own thread (librdkafka does the
network work in its own threads, so one process keeps several flows busy).
SIGTERM and Ctrl-C stop every task cleanly: in-flight records are flushed and
acknowledged before the process exits, so the next start resumes exactly.

A flow also runs only while the DR state store wants it to: a failover
procedure sets it to "stopped" (`store.flows.set`) and its tasks
stop exactly as on SIGTERM (flush, then publish "stopped" status), so the
target tail holds everything replicated; set back to "running" (or with no
row at all) they start again and resume from that tail. The store is read about
every quarter second by a thread of its own (`DesiredStates`), never by the supervising
loop nor on the hot path: a store that is away or failing (down, damaged, refusing
the store's user) leaves every flow as it was, is said once and once more when it
is back, and never ends `replicator run`.

Checkpoints of the running flows are emitted on their schedule meanwhile
(`replicator.offsets.checkpoint_loop`), and their ACLs synced where enabled
(`replicator.acls.loop`). These background threads all follow one rule
(`replicator.flow_timer`); the supervising loop watches that each is alive (one
that died is started again, logged and counted), and their health is published
for `replicator status` and the DR status page (`thread_status`).
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
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from multiprocessing.sharedctypes import Synchronized
from types import FrameType
from typing import cast

from replicator import logs, metrics
from replicator.acls.loop import AclSyncLoop
from replicator.backoff import Backoff
from replicator.config.mm2_defaults import silent_differences
from replicator.config.model import FlowConfig, ReplicatorConfig
from replicator.engine.collector import pace_for_replication
from replicator.engine.kafka_errors import AccessDenied
from replicator.engine.task import ReplicationTask
from replicator.errors import ReplicatorError
from replicator.flow_timer import BackgroundLoop
from replicator.offsets.checkpoint_loop import CheckpointLoop
from replicator.operations.metrics_tree import MetricsTree, WorkerEndpoint, serve_worker
from replicator.operations.thread_status import ThreadStatusLoop
from replicator.statestore import StateStore
from replicator.statestore.flow_states import runs

log = logging.getLogger(__name__)

_STOP_TIMEOUT_S = 60.0
_PR_SET_PDEATHSIG = 1
_SUPERVISE_EVERY_S = 0.5
#: How often the desired state of the flows is read from the state store (one small
#: query for every flow of the process): a procedure's stop of a flow is part of the
#: applications' downtime in a cutover (the `flow_stopped` phase), so it is seen within
#: a quarter of a second, and the supervising loop acts on it at once (`changed`).
_DESIRED_EVERY_S = 0.25
#: A worker that failed by itself is started again after this long at first, then
#: twice as long each time, up to the maximum.
_RESTART_FIRST_S = 5.0
_RESTART_MAX_S = 300.0
#: A worker that ran this long since its start counts as healthy again.
_HEALTHY_AFTER_S = 60.0
#: The exit code of a worker process whose cluster refused its principal (AccessDenied).
_EXIT_ACCESS_DENIED = 3
#: How the one line of an AccessDenied ends (it names the ACL and the fix before).
_STAYS_STOPPED = (
    "; the flow stays stopped (not restarted: no ACL appears by waiting) until "
    "`replicator run` restarts or the flow is stopped and started again"
)


def select_flows(config: ReplicatorConfig, names: list[str] | None) -> list[FlowConfig]:
    """The flows named (all enabled ones by default); ReplicatorError if none."""
    flows = [config.flow(name) for name in names] if names else list(config.flows)
    if not flows:
        raise ReplicatorError(
            f"no flow is enabled in {config.source_file or 'the configuration'}; "
            "set A->B.enabled = true for at least one pair of clusters"
        )
    return flows


def run_flows(
    flows: list[FlowConfig],
    stop_event: threading.Event | None = None,
    store: StateStore | None = None,
) -> None:
    """Run `flows` until `stop_event` is set (or SIGTERM/SIGINT on the main thread),
    each only while the state store (`store`, default `$REPLICATOR_STATE_URL` or
    the SQLite file under `.data/state/`) does not say "stopped" for it.

    A flow with `tasks.max` N runs as N worker processes (processes, so each
    worker has a core of its own) that share the flow's partitions through the
    consumer group; a single worker runs in a thread of this process. A worker
    that fails is started again with backoff, and its failure stays its flow's:
    the other flows run on. Raises ReplicatorError naming every worker that
    failed while the run was stopping.
    """
    tree = _serve_metrics(flows)  # first: a port already taken stops the run before it starts
    for flow in flows:
        for line in silent_differences(flow):
            log.info(line)
    stop = stop_event or threading.Event()
    if threading.current_thread() is threading.main_thread():
        _stop_on_signals(stop)
    desired = DesiredStates(store or StateStore(), [flow.name for flow in flows], stop)
    desired.start()
    checkpoints = CheckpointLoop(flows, stop, desired.running)
    checkpoints.start()
    acl_sync = AclSyncLoop(flows, stop, desired.running)
    acl_sync.start()
    thread_status = ThreadStatusLoop(flows, stop, [desired, checkpoints, acl_sync])
    thread_status.start()
    loops = [desired, checkpoints, acl_sync, thread_status]
    slots = [(flow, index) for flow in flows for index in range(flow.tasks_max)]
    try:
        if len(slots) == 1:
            _supervise(slots, _ThreadWorker, stop, desired, loops)
        else:
            context = multiprocessing.get_context("spawn")
            level = logging.getLogger().getEffectiveLevel()
            _supervise(
                slots,
                lambda flow, index: _ProcessWorker(context, flow, index, level, tree),
                stop,
                desired,
                loops,
            )
    finally:
        stop.set()  # the run is over, also when a worker failed: so is checkpointing
        for loop in loops:
            loop.join(_STOP_TIMEOUT_S)
        thread_status.remove()


def _serve_metrics(flows: list[FlowConfig]) -> MetricsTree | None:
    """Serve this process's metrics and its workers' on the port the flows name
    (`metrics.port`; each distinct one, normally the one top-level port); None when
    no flow names one (workers then serve nothing)."""
    ports = sorted({flow.metrics_port for flow in flows if flow.metrics_port})
    if not ports:
        return None
    tree = MetricsTree()
    for port in ports:
        try:
            tree.serve(port)
        except OSError as exc:
            raise ReplicatorError(
                f"metrics.port {port}: cannot serve metrics there ({exc}); another process "
                "uses it: stop it, or set metrics.port to a free port"
            ) from exc
        log.info("metrics of every flow and worker on http://0.0.0.0:%d/metrics", port)
    return tree


class DesiredStates(BackgroundLoop):
    """What the state store wants of each flow, read every quarter second by a thread
    of its own; `running()` answers from the last read and never waits for the store.

    A store that cannot be read leaves every flow as it was: an outage of the
    store must never stop (or start) replication. The outage is logged once when it
    begins and once when it ends, each failed read counted, and reads back off (see
    `replicator.flow_timer`).
    """

    thread_name = "flow-states"
    work = "reading the flows' desired states"
    while_failing = (
        "every flow stays as it is (replication and checkpoints go on; a flow the store "
        "stops or starts meanwhile follows once it is read again)"
    )

    def __init__(
        self, store: StateStore, flows: list[str], stop: threading.Event | None = None
    ) -> None:
        super().__init__(stop or threading.Event())
        self._store = store
        self._running = dict.fromkeys(flows, True)
        #: Set when a flow is wanted running or stopped where it was not: the
        #: supervising loop wakes at once instead of at its next look.
        self.changed = threading.Event()

    # The module constant, read at each wait (tests shorten it); the base's attribute
    # is read here as a property.
    @property
    def tick_s(self) -> float:  # type: ignore[override]
        return _DESIRED_EVERY_S

    def start(self) -> None:
        """Read once now (a flow the store has stopped must not start), then in the thread."""
        self.guarded(self.work, self.tick)
        super().start()

    def running(self) -> dict[str, bool]:
        return dict(self._running)

    def tick(self) -> None:
        read, said = {}, {}
        states = {s.flow: s for s in self._store.flows.all()}  # StateStoreError: the rule
        for flow in self._running:
            state = states.get(flow)
            read[flow] = runs(state)
            said[flow] = "running" if state is None else state.state
        for flow, running in read.items():
            if running != self._running[flow]:
                log.info(
                    "flow %s: the state store says %s; %s",
                    flow,
                    said[flow],
                    "starting it" if running else "stopping it (flushing first)",
                )
        moved = read != self._running
        self._running = read
        for flow, running in read.items():
            metrics.FLOW_DESIRED_RUNNING.labels(flow).set(int(running))
        if moved:
            self.changed.set()


class _Worker(ABC):
    """One running replication task of a flow, in a thread or a process."""

    def __init__(self, flow: FlowConfig, name: str) -> None:
        self.flow = flow
        self.name = name

    @abstractmethod
    def alive(self) -> bool: ...

    @abstractmethod
    def stop(self) -> None:
        """Ask it to flush and stop (it may already be stopping)."""

    @abstractmethod
    def join(self, timeout: float) -> None:
        """Wait for it to stop; force it after `timeout`."""

    @abstractmethod
    def killed(self) -> bool:
        """It was killed from outside (a signal): starting it again is the cure."""

    @abstractmethod
    def failure(self) -> str | None:
        """Why it failed by itself (restarting would fail the same way), if it did."""

    @abstractmethod
    def access_denied(self) -> bool:
        """It failed because a cluster refused its principal (AccessDenied): only an
        operator can fix that, so its flow stays stopped rather than restarting."""


class _ThreadWorker(_Worker):
    """The single task of a one-worker configuration, in a thread of this process."""

    def __init__(self, flow: FlowConfig, index: int) -> None:
        super().__init__(flow, f"{flow.name}#{index}")
        self._task = ReplicationTask(flow)
        self._error: str | None = None
        self._access_denied = False
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._task.run()
        except AccessDenied as exc:  # one line: it names the ACL, the fix and what follows
            self._error = f"replication of {self.flow.name} stopped: {exc}"
            self._access_denied = True
            log.error("%s%s", exc, _STAYS_STOPPED)
        except Exception as exc:  # a thread's exception would vanish: keep it for the report
            self._error = f"replication of {self.flow.name} stopped: {exc}"
            # Our own errors say everything; anything else needs its traceback to be fixed.
            log.error("%s", self._error, exc_info=not isinstance(exc, ReplicatorError))

    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        self._task.stop_event.set()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.error("task %s did not stop in %.0f s", self.name, timeout)

    def killed(self) -> bool:
        return False

    def failure(self) -> str | None:
        return self._error

    def access_denied(self) -> bool:
        return self._access_denied


class _ProcessWorker(_Worker):
    """A worker process; SIGTERM makes it flush and stop."""

    def __init__(
        self,
        context: multiprocessing.context.BaseContext,
        flow: FlowConfig,
        index: int,
        level: int,
        tree: MetricsTree | None,
    ) -> None:
        super().__init__(flow, f"{flow.name}#{index}")
        #: The loopback port the worker serves its metrics on (0 until it says; -1: none).
        self._metrics_port = context.Value("i", 0 if tree is not None else -1)
        self._stopping = False
        # Every concrete context (BaseContext's subclasses) has Process.
        self._process = context.Process(  # type: ignore[attr-defined]
            target=_worker_main, args=(flow, index, level, self._metrics_port), name=self.name
        )
        self._process.start()
        if tree is not None:
            tree.add(
                WorkerEndpoint(
                    flow.name,
                    self.name,
                    port=lambda: self._metrics_port.value or None,
                    alive=self.alive,
                    wanted=lambda: not self._stopping,
                )
            )

    def alive(self) -> bool:
        return self._process.is_alive()

    def stop(self) -> None:
        self._stopping = True
        if self._process.is_alive():
            self._process.terminate()

    def join(self, timeout: float) -> None:
        self._process.join(timeout)
        if self._process.is_alive():
            log.error("worker %s did not stop in %.0f s; killing it", self.name, timeout)
            self._process.kill()
            self._process.join()

    def killed(self) -> bool:
        return (self._process.exitcode or 0) < 0

    def failure(self) -> str | None:
        code = self._process.exitcode
        return None if code is None or code <= 0 else f"{self.name} (exit {code})"

    def access_denied(self) -> bool:
        return self._process.exitcode == _EXIT_ACCESS_DENIED


def _supervise(
    slots: list[tuple[FlowConfig, int]],
    start: Callable[[FlowConfig, int], _Worker],
    stop: threading.Event,
    desired: DesiredStates,
    loops: Sequence[BackgroundLoop] = (),
) -> None:
    """Keep one worker per slot alive while its flow should run, until stopped, and
    each of the background `loops` alive (one that died is started again).

    A worker killed by a signal (OOM killer, `kill -9`) is started again at once;
    its partitions meanwhile move to the others. A worker that fails by itself
    (bad credentials, records the target rejects, a cluster away when it starts)
    is started again after a backoff growing from 5 s to 5 min, so a cause that
    passes or gets fixed needs nobody, and one that does not costs a log line per
    attempt. A worker refused by a cluster (a missing ACL: AccessDenied) is not:
    no ACL appears by waiting, and each attempt would write into the target up to
    the refusal again; its flow stays stopped, said once, until the state store
    stops and starts it again or `replicator run` restarts. Either way the failure
    stays its own: the other flows of the process run on. A flow the state store
    stops has its workers stopped (they flush) and started again when it wants
    the flow back.
    """
    workers: list[_Worker | None] = [None] * len(slots)
    restarts = [Backoff(_RESTART_FIRST_S, _RESTART_MAX_S) for _ in slots]
    started = [0.0] * len(slots)
    denied = set[int]()  # slots whose worker a cluster refused: not started again
    while not stop.is_set():
        wanted = desired.running()
        now = time.monotonic()
        for position, (flow, index) in enumerate(slots):
            worker = workers[position]
            if worker is not None and not worker.alive():
                ran_s = now - started[position]
                if _ended(worker, wanted[flow.name], restarts[position], ran_s, now):
                    denied.add(position)
                workers[position] = worker = None
            if not wanted[flow.name]:
                denied.discard(position)  # stopped and started again: an operator acted
            if position in denied:
                continue
            if worker is None and wanted[flow.name] and restarts[position].due(now):
                workers[position] = start(flow, index)
                started[position] = now
                log.info("started %s", cast(_Worker, workers[position]).name)
            elif worker is not None and not wanted[flow.name]:
                worker.stop()
        for loop in loops:
            loop.revive()
        if desired.changed.wait(_SUPERVISE_EVERY_S):  # a flow stopped or started: act now
            desired.changed.clear()
    _stop_all([worker for worker in workers if worker is not None])


def _stop_all(running: list[_Worker]) -> None:
    """Stop the running workers (each flushes what is in flight, then exits);
    ReplicatorError naming those that failed."""
    for worker in running:
        worker.stop()
    failed = []
    for worker in running:
        worker.join(_STOP_TIMEOUT_S)
        problem = worker.failure()
        if problem:
            failed.append(problem)
    if failed:
        raise ReplicatorError(
            f"replication stopped: workers failed: {', '.join(dict.fromkeys(failed))}; "
            "their errors are logged above"
        )


def _ended(worker: _Worker, wanted: bool, restart: Backoff, ran_s: float, now: float) -> bool:
    """A worker ended: True when a cluster refused it (its flow stays stopped; the
    worker said so in its last line), else say why it ended and when it starts again."""
    if not wanted:  # asked to stop: nothing restarts it until wanted
        log.info("worker %s stopped: its flow is stopped", worker.name)
        return False
    if worker.access_denied():
        metrics.ERRORS.labels(worker.flow.name, "access_denied").inc()
        return True
    _note_end(worker, restart, ran_s, now)
    return False


def _note_end(worker: _Worker, restart: Backoff, ran_s: float, now: float) -> None:
    """A worker ended on its own: say so, and when it starts again."""
    if ran_s >= _HEALTHY_AFTER_S:
        restart.succeeded(now)  # a failure after a healthy run waits the shortest
    if worker.failure():
        restart.failed(now)
        log.error(
            "worker %s stopped on the error above; starting it again in %.0f s (the "
            "other flows run on)",
            worker.name, restart.delay_s,
        )  # fmt: skip
    elif worker.killed():
        log.warning("worker %s was killed; starting it again", worker.name)


def _worker_main(flow: FlowConfig, index: int, level: int, metrics_port: Synchronized[int]) -> None:
    """Entry point of one worker process; it serves its metrics on a loopback port
    and tells the runner which in `metrics_port` (-1: none wanted)."""
    _die_with_parent()
    logs.crash_stacks()  # as `replicator run`: a crash in C code prints every stack
    pace_for_replication()
    logs.configure(level, worker=f"{flow.name}#{index}")  # the runner's format (see logs)
    stop = threading.Event()
    _stop_on_signals(stop)
    if metrics_port.value == 0:
        metrics_port.value = serve_worker()
    try:
        ReplicationTask(flow, stop_event=stop).run()
    except AccessDenied as exc:
        log.error("%s%s", exc, _STAYS_STOPPED)
        sys.exit(_EXIT_ACCESS_DENIED)
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
