"""Airflow standalone for the local stack: the DAGs and the UI of `make run`.

`replicator stack run` starts it next to the clusters and the replicator, and the
end-to-end browser test starts one of its own::

    airflow = AirflowStandalone(
        home=Path(".data/airflow"),
        port=8080,
        env={"REPLICATOR_CONFIG": "/abs/mm2.properties", "REPLICATOR_STATE_URL": "sqlite:///..."},
    )
    airflow.start(timeout=300)  # once every component is healthy and our DAGs run; gives
                                # up only after 300 s in which nothing progressed
    print(airflow.url, airflow.username, airflow.password)  # only where the operator must see it
    run_id = airflow.client().trigger("failover", {"flow": "primary->dr", ...})  # AirflowClient
    airflow.stop()  # everything it started, task processes included

It runs `airflow standalone` (scheduler, dag processor, API server with the UI,
triggerer; LocalExecutor on SQLite) as a process in a session of its own, and drives
it from outside: this module never imports Airflow, it sets the environment, waits on
the REST API and stops the whole process tree. Settings, all through the environment
(the caller's `env` comes last and wins):

- `AIRFLOW_HOME` (default `.data/airflow`): metadata DB `airflow.db`, `airflow.cfg`,
  task logs, and `standalone.log` with everything standalone prints;
- DAGs from `<repo>/dags`, plugins from `<repo>/plugins`, no examples, the API and UI
  on 127.0.0.1:`port` (and the execution API the workers call on the same port);
- the user `admin` with a known password, kept in
  `$AIRFLOW_HOME/simple_auth_manager_passwords.json.generated` (random on first start
  and the same afterwards, or the one given);
- `AIRFLOW_HOME` made under umask 077 and standalone run under it: the password file
  and `airflow.db` (which holds the connections' secrets) are 0600 from creation, and
  tightened to 0600 if an earlier version left them readable;
- `[core] parallelism` 4 and one API worker, to stay light on SQLite and 2 cores;
- the connection `spark_local` (Spark `local[2]`, client mode) for the verification DAG,
  and `PYSPARK_PYTHON` set to this venv's interpreter.

No task may start before the API server listens: a task process talks to Airflow
only through the execution API the API server serves, and one started earlier
(standalone starts the scheduler in seconds, the API server in tens of seconds on
a loaded machine) gives up after a few retries and fails its run. So every DAG is
paused while Airflow starts: new DAGs are paused at creation, and those a previous
start left unpaused are paused in the metadata DB before standalone starts. Once
the API server answers and reports the metadata DB, scheduler, dag processor and
triggerer healthy, `start` unpauses the DAGs that should run on their schedule
(`scheduled`, default all of them) and the ones the previous start left unpaused
(kept in `dags-to-unpause.json` meanwhile); a DAG a person paused stays paused.

The password is never logged; `password` is there for `make run` to print.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path

import httpx
from sqlalchemy import create_engine, inspect, text

from replicator_lab.airflow_client import POLL_S, AirflowClient
from replicator_lab.broker import _signal, port_in_use
from replicator_lab.errors import StackError
from replicator_lab.private import ensure_private_file, private_umask, write_private

REPO = Path(__file__).resolve().parents[2]
DEFAULT_HOME = Path(".data/airflow")
DEFAULT_PORT = 8080
USERNAME = "admin"
PASSWORD_FILE = "simple_auth_manager_passwords.json.generated"  # noqa: S105 - a file name
LOG_FILE = "standalone.log"
#: The DAGs to unpause once Airflow is healthy, while a start is under way.
UNPAUSE_FILE = "dags-to-unpause.json"
SPARK_CONNECTION = {"conn_type": "spark", "host": "local[2]", "extra": {"deploy-mode": "client"}}
_DAG_ID = re.compile(r"""\bdag_id\s*=\s*["']([\w.-]+)["']""")
#: What `/api/v2/monitor/health` must report healthy before a DAG is unpaused.
_COMPONENTS = ("metadatabase", "scheduler", "dag_processor", "triggerer")
_LOG_TAIL_LINES = 40
#: How often a start that waits says how far it got.
_PROGRESS_EVERY_S = 15.0


class AirflowStandalone:
    """`airflow standalone` as a child process: start (and wait until it is useful),
    stop (every process it started), and a REST client for it. See the module doc."""

    username = USERNAME

    def __init__(
        self,
        home: Path | str = DEFAULT_HOME,
        port: int = DEFAULT_PORT,
        env: Mapping[str, str] | None = None,
        *,
        password: str | None = None,
        dag_ids: Iterable[str] | None = None,
        scheduled: Iterable[str] | None = None,
        repo: Path = REPO,
    ) -> None:
        """`dag_ids`: the DAGs `start` waits for (default: every `dag_id="..."` in
        `<repo>/dags/*.py`). `scheduled`: those of them that run on their schedule from
        the first start (default: all; the others wait paused until triggered).
        `password`: the admin's password (default: the one kept in the password file,
        random on first start)."""
        self.home = Path(home).resolve()
        self.port = port
        self.repo = repo
        self.env = dict(env or {})
        self.dag_ids = set(dag_ids) if dag_ids is not None else declared_dag_ids(repo / "dags")
        self.scheduled = set(scheduled) if scheduled is not None else set(self.dag_ids)
        if unknown := self.scheduled - self.dag_ids:
            raise ValueError(
                f"scheduled DAGs {sorted(unknown)} are not among {sorted(self.dag_ids)}"
            )
        #: When `start` found every component healthy; no DAG ran before (UTC).
        self.healthy_at: datetime | None = None
        self.log_file = self.home / LOG_FILE
        self._password = password
        self._process: subprocess.Popen[bytes] | None = None
        self._log_ports = (8793, 8794)  # Airflow's defaults; `start` picks free ones
        self._jwt_secret = ""  # new for each start: tokens die with the processes

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def password(self) -> str:
        """The admin's password (read from the password file once it exists)."""
        if self._password is None:
            self._password = _read_passwords(self.home / PASSWORD_FILE).get(USERNAME)
            if self._password is None:
                raise StackError(f"no password for {USERNAME!r} yet: start Airflow first")
        return self._password

    def client(self) -> AirflowClient:
        return AirflowClient(self.url, self.username, self.password)

    def environment(self) -> dict[str, str]:
        """The environment `airflow standalone` runs with: no password, but this start's
        JWT signing secret, so never log it."""
        scripts = Path(sys.executable).parent  # the venv's bin, not the interpreter it links to
        settings = {
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.home / 'airflow.db'}",
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.repo / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(self.repo / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",  # see the module doc
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USERNAME}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self.home / PASSWORD_FILE),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
            # A task talks to Airflow only through the API server's execution API: on a
            # busy host, wait for it longer than the 5 s default (four tries, then the
            # task was killed with nothing in its log), as docker-compose.yml does.
            "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "30",
            "AIRFLOW__WORKERS__EXECUTION_API_RETRIES": "10",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API__WORKERS": "1",
            # The scheduler's and triggerer's log servers (Airflow binds them to every
            # interface); fixed default ports would clash with a second standalone.
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(self._log_ports[0]),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(self._log_ports[1]),
            "AIRFLOW__API_AUTH__JWT_SECRET": self._jwt_secret,
            "AIRFLOW_CONN_SPARK_LOCAL": json.dumps(SPARK_CONNECTION),
            "PYSPARK_PYTHON": sys.executable,
            "PATH": os.pathsep.join([str(scripts), os.environ.get("PATH", "")]),
        }
        return {**os.environ, **settings, **self.env}

    # -- lifecycle ---------------------------------------------------------------------

    def start(
        self, timeout: float = 300.0, progress: Callable[[str], None] | None = None
    ) -> AirflowStandalone:
        """Start standalone and return once every component is healthy, every DAG in
        `dag_ids` is registered, and the DAGs to run on their schedule are unpaused.

        It waits as long as the start makes progress (what is still missing changes,
        or `standalone.log` grows): on a busy machine Airflow may take many minutes.
        It gives up when nothing progressed for `timeout` seconds or the process
        exited: it stops Airflow and raises StackError with what was missing and the
        end of `standalone.log`. `progress` gets a line every 15 s while it waits."""
        if self._process is not None and self._process.poll() is None:
            raise StackError(f"Airflow standalone is already running (pid {self._process.pid})")
        airflow = Path(sys.executable).parent / "airflow"
        if not airflow.exists():
            raise StackError(f"{airflow} not found; run `make setup` to install Airflow")
        if port_in_use(self.port):
            raise StackError(
                f"port {self.port} needed by Airflow is already in use by another process; "
                "free it or choose another port"
            )
        self.prepare_home()
        to_unpause = self._pause_dags()
        self._log_ports = _free_ports()
        self._jwt_secret = secrets.token_urlsafe(64)
        # Everything standalone writes (logs, airflow.cfg, task logs) is its owner's only.
        with private_umask(), self.log_file.open("ab") as log:
            self._process = subprocess.Popen(
                [str(airflow), "standalone"],
                cwd=self.repo,
                env=self.environment(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C reaches `replicator stack run` only
            )
        try:
            self._wait_ready(timeout, progress or (lambda line: None))
            self.healthy_at = datetime.now(UTC)
            with self.client() as api:
                for dag_id in sorted(to_unpause):
                    api.unpause(dag_id)
            (self.home / UNPAUSE_FILE).unlink()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 30.0) -> bool:
        """SIGTERM to every process standalone started (its session, and whatever left
        it, such as task processes), SIGKILL to those alive after `timeout`. True if it ran."""
        process, self._process = self._process, None
        if process is None:
            return False
        family = _family(process.pid, {process.pid})
        for pid in family:
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while family and time.monotonic() < deadline:
            process.poll()  # reap the leader; the others are reaped by init
            family = _family(process.pid, family)
            time.sleep(0.1)
        for pid in family:
            _signal(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
        return True

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def __enter__(self) -> AirflowStandalone:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        if not self.log_file.exists():
            return f"(no output in {self.log_file})"
        tail = self.log_file.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
        return f"--- {self.log_file} (last {len(tail)} lines)\n" + "\n".join(tail)

    # -- internals -----------------------------------------------------------------------

    def prepare_home(self) -> None:
        """`AIRFLOW_HOME` (0700 when made here), the admin's password in the password
        file and an `airflow.db`, both 0600: what `start` does before standalone runs."""
        with private_umask():
            self.home.mkdir(parents=True, exist_ok=True)
        self._ensure_password()
        ensure_private_file(self.home / "airflow.db")

    def _ensure_password(self) -> None:
        """Write the admin's password before the first start: the simple auth manager
        generates one only for users missing from the file. The file is 0600 from
        creation, and tightened if it exists."""
        path = self.home / PASSWORD_FILE
        passwords = _read_passwords(path)
        wanted = self._password or passwords.get(USERNAME) or secrets.token_urlsafe(16)
        if passwords.get(USERNAME) != wanted:
            passwords[USERNAME] = wanted
            write_private(path, json.dumps(passwords))
        else:
            path.chmod(0o600)
        self._password = wanted

    def _pause_dags(self) -> set[str]:
        """Pause every DAG before standalone starts (see the module doc); returns those
        to unpause once it is healthy. They are kept in `UNPAUSE_FILE` until then, so a
        start interrupted before that (Ctrl-C) does not leave them paused for good."""
        pending = self.home / UNPAUSE_FILE
        owed = set(json.loads(pending.read_text(encoding="utf-8"))) if pending.exists() else set()
        known, paused = _pause_every_dag(self.environment()["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
        to_unpause = ((owed | paused) & self.dag_ids) | (self.scheduled - known)
        pending.write_text(json.dumps(sorted(to_unpause)), encoding="utf-8")
        return to_unpause

    def _wait_ready(self, stall_timeout: float, progress: Callable[[str], None]) -> None:
        seen = "no answer yet"
        started = last_progress = last_said = time.monotonic()
        log_size = self._log_size()
        with httpx.Client(base_url=self.url, timeout=5.0) as http, self.client() as api:
            while True:
                assert self._process is not None
                if self._process.poll() is not None:
                    raise StackError(
                        f"Airflow standalone exited during start-up "
                        f"(exit {self._process.returncode}):\n{self.log_tail()}"
                    )
                try:
                    now_seen = self._readiness(http, api)
                except (httpx.HTTPError, StackError) as exc:
                    now_seen = f"{type(exc).__name__}: {exc}"
                if not now_seen:
                    return
                now, size = time.monotonic(), self._log_size()
                if now_seen != seen or size > log_size:
                    last_progress, seen, log_size = now, now_seen, size
                if now - last_progress > stall_timeout:
                    raise StackError(
                        f"Airflow at {self.url} made no progress for {stall_timeout:.0f}s "
                        f"(after {now - started:.0f}s; still {seen}; {self.log_file} did not "
                        f"grow):\n{self.log_tail()}"
                    )
                if now - last_said >= _PROGRESS_EVERY_S:
                    progress(f"Airflow starting ({now - started:.0f}s): {seen}")
                    last_said = now
                time.sleep(POLL_S)

    def _log_size(self) -> int:
        try:
            return self.log_file.stat().st_size
        except FileNotFoundError:
            return 0

    def _readiness(self, http: httpx.Client, api: AirflowClient) -> str:
        """What is still missing; empty once ready."""
        response = http.get("/api/v2/monitor/health")
        if response.is_error:
            return f"health answered HTTP {response.status_code}"
        health = response.json()
        unhealthy = [
            component
            for component in _COMPONENTS
            if (health.get(component) or {}).get("status") != "healthy"
        ]
        if unhealthy:
            return f"not healthy yet: {', '.join(unhealthy)}"
        missing = self.dag_ids - api.dag_ids()
        if not missing:
            return ""
        errors = "; ".join(
            f"{e['filename']}: {e['stack_trace'].strip().splitlines()[-1]}"
            for e in api.import_errors()
        )
        return f"DAGs not registered yet: {', '.join(sorted(missing))}" + (
            f"; import errors: {errors}" if errors else ""
        )


def declared_dag_ids(folder: Path) -> set[str]:
    """The `dag_id="..."` literals of the DAG files in `folder`."""
    return {m for path in folder.glob("*.py") for m in _DAG_ID.findall(path.read_text())}


def _pause_every_dag(database_url: str) -> tuple[set[str], set[str]]:
    """Pause every DAG in Airflow's metadata DB at `database_url` before standalone
    starts (see the module doc); returns the DAGs it holds, and those it paused.
    A DB that does not exist yet holds none."""
    if database_url.startswith("sqlite:///") and not Path(database_url[10:]).exists():
        return set(), set()
    engine = create_engine(database_url)
    try:
        with engine.begin() as conn:
            if not inspect(conn).has_table("dag"):
                return set(), set()
            rows = conn.execute(text("SELECT dag_id, is_paused FROM dag")).all()
            unpaused = {str(dag_id) for dag_id, paused in rows if not paused}
            if unpaused:
                conn.execute(text("UPDATE dag SET is_paused = :paused"), {"paused": True})
    finally:
        engine.dispose()
    return {str(dag_id) for dag_id, _ in rows}, unpaused


def _free_ports() -> tuple[int, int]:
    """Two ports nothing listens on right now."""
    with socket.socket() as first, socket.socket() as second:
        first.bind(("", 0))
        second.bind(("", 0))
        return first.getsockname()[1], second.getsockname()[1]


def _read_passwords(path: Path) -> dict[str, str]:
    if not path.exists():
        return {}
    try:
        passwords = json.loads(path.read_text(encoding="utf-8") or "{}")
    except json.JSONDecodeError as exc:
        raise StackError(
            f"{path} is not JSON ({exc.msg}); delete it and a new password is generated"
        ) from exc
    return {str(user): str(password) for user, password in passwords.items()}


def _family(session: int, known: Iterable[int]) -> set[int]:
    """Live processes of `session` (the leader's pid), their descendants, and those of
    `known` still alive (a task process that left the session keeps its pid)."""
    parents: dict[int, int] = {}
    members: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] in {"Z", "X"}:
            continue  # exited; only waiting to be reaped
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        if int(fields[3]) == session:
            members.add(pid)
    members |= {pid for pid in known if pid in parents}
    grown = True
    while grown:
        children = {pid for pid, parent in parents.items() if parent in members} - members
        members |= children
        grown = bool(children)
    return members
