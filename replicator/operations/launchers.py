"""Starting, watching and restarting replicator workers (`replicator run` processes).

Something has to bring a worker back after the OOM killer or a `kill -9`: on a
Docker host that is the container runtime, on Kubernetes a Deployment, on one
machine nothing at all. `Launcher` is that something seen from the supervisor
(`replicator.operations.supervision`) and from `replicator stack run`: the workers it
manages, which are alive, start one, stop one. `LocalProcessLauncher`, the
embedded default, runs each worker as a detached local process and remembers
it in a small JSON file, so a supervisor in another process (an Airflow task
every minute) can find it, tell whether it still runs, and start it again.

A launcher manages *wanted* workers: `start` (or `ensure_running`) makes a
worker wanted, `stop` forgets it. A wanted worker that is not alive is dead
and is what `restart_dead` starts again. Whether its flows should replicate at
all is the DR state store's business (`replicator run` obeys it by itself);
the supervisor only restarts workers whose flows the store wants running.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from replicator.config.properties import environment_references, read_properties
from replicator.errors import ReplicatorError
from replicator.statestore import STATE_URL_ENV

#: Where `LocalProcessLauncher` keeps its records and logs unless told otherwise.
RUN_DIR_ENV = "REPLICATOR_RUN_DIR"
DEFAULT_RUN_DIR = Path(".data/replicators")
_STOP_TIMEOUT_S = 60.0
_POLL_S = 0.1
_EXEC_TIMEOUT_S = 5.0
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
#: What a worker inherits from whoever starts it, besides `REPLICATOR_*` and the
#: variables its configuration reads (`worker_environment`).
INHERITED_VARIABLES = ("PATH", "HOME", "LANG")
INHERITED_PREFIX = "REPLICATOR_"

log = logging.getLogger(__name__)

Action = Literal["started", "restarted", "running"]


@dataclass(frozen=True)
class Worker:
    """A worker a launcher manages (wanted running until stopped)."""

    name: str
    config: Path
    started_at: datetime
    #: Where it runs, for people: "pid 4711", a container id, a pod name.
    where: str
    log: Path | None = None


def config_option(command: list[str]) -> Path | None:
    """The `--config FILE` (or `--config=FILE`) of a `replicator run` command line."""
    for index, word in enumerate(command):
        if word == "--config" and index + 1 < len(command):
            return Path(command[index + 1])
        if word.startswith("--config="):
            return Path(word.partition("=")[2])
    return None


@dataclass(frozen=True)
class LaunchResult:
    """What `start`/`ensure_running` did: started a new worker, restarted one that
    was dead (or ran another configuration), or found it running."""

    name: str
    action: Action
    config: Path
    where: str
    log: Path | None = None

    def as_dict(self) -> dict[str, str | None]:
        return {
            "name": self.name,
            "action": self.action,
            "config": str(self.config),
            "where": self.where,
            "log": None if self.log is None else str(self.log),
        }


class Launcher(ABC):
    """Starts and watches `replicator run --config CONFIG` workers by name.

    Three implement it: `LocalProcessLauncher` (below: detached local processes),
    `DockerLauncher` (the containers of a compose project's replicator service) and
    `KubernetesLauncher` (the replicator chart's Deployments: stop is a scale to 0,
    start a scale back and a rollout restart). `launcher_choice` picks one from
    `$REPLICATOR_LAUNCHER`. On Docker and Kubernetes,
    restarting after a crash is also the platform's job; the supervisor's
    restart is then a second line that also reports what it did.
    """

    @abstractmethod
    def workers(self) -> list[Worker]:
        """Every worker this launcher manages, alive or dead."""

    @abstractmethod
    def alive(self, name: str) -> bool:
        """True when worker `name` is running (False also when it is unknown)."""

    @abstractmethod
    def start(self, name: str, config: Path) -> LaunchResult:
        """Start worker `name` on `config`; one already running under that name is
        stopped first (it flushes), so this is also the restart."""

    @abstractmethod
    def stop(self, name: str, timeout_s: float = _STOP_TIMEOUT_S) -> bool:
        """Stop worker `name` (SIGTERM: it flushes in-flight records; killed after
        `timeout_s`) and stop managing it. True when it was running."""

    def ensure_running(self, name: str, config: Path) -> LaunchResult:
        """Worker `name` runs on `config` afterwards: left alone when it already
        does, (re)started otherwise. What `make run` calls at start."""
        config = Path(config).resolve()
        known = {worker.name: worker for worker in self.workers()}.get(name)
        if known is not None and known.config == config and self.alive(name):
            return LaunchResult(name, "running", config, known.where, known.log)
        return self.start(name, config)

    def restart_dead(self, wanted: Callable[[Worker], bool]) -> list[LaunchResult]:
        """Start again every managed worker that is dead and `wanted`."""
        return [
            self.start(worker.name, worker.config)
            for worker in self.workers()
            if not self.alive(worker.name) and wanted(worker)
        ]


@dataclass(frozen=True)
class _Record:
    """`<run dir>/<name>.json`: what is needed to recognise the process again."""

    name: str
    pid: int
    config: str
    log: str
    started_at: str
    command: list[str]

    def worker(self) -> Worker:
        return Worker(
            self.name,
            Path(self.config),
            datetime.fromisoformat(self.started_at),
            f"pid {self.pid}",
            Path(self.log),
        )


class LocalProcessLauncher(Launcher):
    """Workers as detached local processes (their own session: they outlive the
    `make run` shell or the Airflow task that started them), each recorded in
    `<run_dir>/<name>.json` and logging to `<run_dir>/<name>.log`.

    `state_url` (default: none, the worker's own `$REPLICATOR_STATE_URL`) is
    handed to workers in their environment, never written to the record: it
    may hold a password. That environment is a minimal one (`worker_environment`),
    not the starter's: a worker the supervisor restarts from an Airflow task gets
    none of Airflow's settings and connections. Alive means the recorded pid exists and runs the
    recorded command line (/proc/<pid>/cmdline), so a pid reused by another
    process after a crash never passes for the worker.
    """

    def __init__(
        self,
        run_dir: Path | None = None,
        state_url: str | None = None,
        python: str = sys.executable,
    ) -> None:
        self.run_dir = Path(run_dir or os.environ.get(RUN_DIR_ENV) or DEFAULT_RUN_DIR)
        self.state_url = state_url
        self.python = python

    def workers(self) -> list[Worker]:
        if not self.run_dir.is_dir():
            return []
        records = (self._read(path.stem) for path in sorted(self.run_dir.glob("*.json")))
        return [record.worker() for record in records if record is not None]

    def alive(self, name: str) -> bool:
        record = self._read(_checked(name))
        return record is not None and _runs(record)

    def start(self, name: str, config: Path) -> LaunchResult:
        config = Path(config).resolve()
        if not config.is_file():
            raise ReplicatorError(
                f"worker {name}: configuration {config} does not exist; pass the path of "
                "an mm2.properties file"
            )
        with self._locked(_checked(name)):
            previous = self._read(name)
            if previous is not None and _runs(previous):
                _terminate(previous, _STOP_TIMEOUT_S)
            record = self._spawn(name, config)
        action: Action = "started" if previous is None else "restarted"
        log.info("%s worker %s (pid %d) on %s", action, name, record.pid, config)
        return LaunchResult(name, action, config, f"pid {record.pid}", Path(record.log))

    def stop(self, name: str, timeout_s: float = _STOP_TIMEOUT_S) -> bool:
        with self._locked(_checked(name)):
            record = self._read(name)
            if record is None:
                return False
            running = _runs(record)
            if running:
                _terminate(record, timeout_s)
            self._path(name, ".json").unlink(missing_ok=True)
        return running

    # -- records ----------------------------------------------------------------------

    def _path(self, name: str, suffix: str) -> Path:
        return self.run_dir / f"{name}{suffix}"

    def _read(self, name: str) -> _Record | None:
        path = self._path(name, ".json")
        try:
            return _Record(**json.loads(path.read_text()))
        except FileNotFoundError:
            return None
        except (ValueError, TypeError) as exc:
            raise ReplicatorError(
                f"worker record {path} is unreadable ({exc}); delete it and start the worker "
                "again (`make run` or the launcher's start)"
            ) from exc

    @contextmanager
    def _locked(self, name: str) -> Iterator[None]:
        """One start or stop of a worker at a time, across processes (a supervisor
        run and `make run` may meet)."""
        self.run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)  # workers' logs
        with self._path(name, ".lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def _spawn(self, name: str, config: Path) -> _Record:
        command = [self.python, "-m", "replicator", "run", "--config", str(config)]
        env = worker_environment(config, self.state_url)
        log_path = self._path(name, ".log").resolve()
        started_at = datetime.now(UTC).isoformat(timespec="seconds")
        with log_path.open("ab") as out:
            out.write(f"--- {started_at} starting worker {name}: {' '.join(command)}\n".encode())
            out.flush()
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        record = _Record(name, process.pid, str(config), str(log_path), started_at, command)
        # Popen returns once exec has begun, a moment before the kernel shows the new
        # command line: wait for it, so that `alive` is true as soon as we return.
        deadline = time.monotonic() + _EXEC_TIMEOUT_S
        while not _runs(record) and process.poll() is None and time.monotonic() < deadline:
            time.sleep(_POLL_S / 10)
        path = self._path(name, ".json")
        temporary = path.with_suffix(".json.tmp")
        temporary.write_text(json.dumps(asdict(record), indent=2))
        temporary.replace(path)  # readers never see half a record
        return record


def worker_environment(
    config: Path, state_url: str | None = None, environ: Mapping[str, str] = os.environ
) -> dict[str, str]:
    """The environment a worker runs with: `PATH`, `HOME`, `LANG`, every `REPLICATOR_*`
    variable, the variables `config` reads (`${env:VAR}`), and `state_url` as
    `$REPLICATOR_STATE_URL`; nothing else of its starter's. A supervisor runs as an
    Airflow task, whose environment holds Airflow's settings and secrets (`AIRFLOW__*`:
    the metadata DB's URL, the API's signing key; `AIRFLOW_CONN_*`: every connection)."""
    try:
        read = environment_references(read_properties(config))
    except ReplicatorError as exc:
        raise ReplicatorError(f"worker configuration {config}: {exc}") from exc
    wanted = {*INHERITED_VARIABLES, *read}
    env = {
        name: value
        for name, value in environ.items()
        if name in wanted or name.startswith(INHERITED_PREFIX)
    }
    if state_url:
        env[STATE_URL_ENV] = state_url
    return env


def _checked(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise ReplicatorError(
            f"worker name {name!r} is not usable as a file name; use letters, digits, '.', "
            "'_' and '-' (e.g. 'primary-dr')"
        )
    return name


def _runs(record: _Record) -> bool:
    """The recorded process exists and is still that worker."""
    # A worker we started and that died is our zombie until reaped; others are not ours.
    with suppress(ChildProcessError):
        os.waitpid(record.pid, os.WNOHANG)
    proc = Path("/proc")
    if not proc.is_dir():  # no procfs (macOS): the pid is all there is to go on
        try:
            os.kill(record.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return False  # another user's process: the pid was reused
        return True
    try:
        cmdline = (proc / str(record.pid) / "cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    return [arg.decode(errors="replace") for arg in cmdline.split(b"\0")[:-1]] == record.command


def _terminate(record: _Record, timeout_s: float) -> None:
    """SIGTERM (the worker flushes and exits), SIGKILL to its whole session after
    `timeout_s` (its worker processes too)."""
    try:
        os.kill(record.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while _runs(record):
        if time.monotonic() > deadline:
            log.warning(
                "worker %s (pid %d) did not stop within %.0f s; killing it",
                record.name,
                record.pid,
                timeout_s,
            )
            try:
                os.killpg(record.pid, signal.SIGKILL)
            except ProcessLookupError:
                return
            deadline = time.monotonic() + timeout_s
        time.sleep(_POLL_S)
