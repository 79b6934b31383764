"""A verification server: a Spark Connect server that stays up between runs, and the
job run as its client.

`spark-submit` starts a JVM for every run, which then spends most of a run of a few
million records loading, compiling and planning Spark before it reads a record (a JVM's
JIT compilers alone took 17-19 CPU-seconds of a 1 KB run of 1,000,000 records on two
cores). A server started once (`replicator verification-server`, or a service of the
deployment) keeps all of that warm: a run with master `sc://HOST:PORT` runs the same
job (`replicator_spark.verify --remote`) in a Python process that only sends Spark its
queries. The server reads the flows' clusters itself: it needs the Kafka connector
(given here) and, for a secured cluster, the configuration's truststores and keystores
at the same paths as the client (the same machine or a shared volume).

Whoever reaches a Spark Connect server runs code as its user. It listens on the
loopback interface unless told otherwise, and a server started with Spark's
`SPARK_CONNECT_AUTHENTICATE_TOKEN` in its environment answers only clients that send
that token (PySpark sends one in plain gRPC only to `localhost`; to another host it
insists on TLS, which the server does not speak): a client of ours takes it from the
same variable when the URL carries none.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

from replicator.errors import ReplicatorError
from replicator.verification.driver_jvm import QUICK_JIT_RECORDS, driver_conf
from replicator.verification.jars import jvm_dir
from replicator.verification.job import SPARK_JOB

#: A Spark Connect URL names the server instead of a Spark master (`--master sc://...`).
REMOTE_SCHEME = "sc://"
#: PySpark's variable naming the Spark Connect server of a session.
REMOTE_ENV = "SPARK_REMOTE"
#: Spark Connect's own default port.
DEFAULT_PORT = 15002
#: The interface a server listens on unless told otherwise.
LOOPBACK = "127.0.0.1"
#: Spark's variable holding the token a server requires of its clients (and ours hold).
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"  # noqa: S105 - a variable's name
#: Spark's Connect server, in the Spark distribution PySpark installs.
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
#: What the server logs once it listens (Spark's `SparkConnectServer`).
STARTED = "Spark Connect server started"
#: Connector consumers the server keeps (one per topic-partition read: a run over a
#: flow's thousands of partitions reads two per partition; the job itself sets this for
#: its own process, which a server's sessions cannot).
CONSUMER_CACHE = 20_000
#: The warm suites listen on the port after Spark Connect's (`warm_suites`).
SUITES_PORT_OFFSET = 1
#: How long the server keeps a Kafka consumer, and what it fetched, that no run uses.
IDLE_RELEASE = "30s"


def is_remote(master: str) -> bool:
    """Whether `master` names a verification server rather than a Spark master."""
    return master.startswith(REMOTE_SCHEME)


def server_command(port: int = DEFAULT_PORT, cores: int = 2, host: str = LOOPBACK) -> list[str]:
    """`spark-submit` starting a local verification server on `host`:`port` with
    `cores` cores: the Kafka connector's jars, the JVM options and heap of a large local job
    (`driver_jvm`), Spark's UI off, room for `CONSUMER_CACHE` connector consumers and
    the default parallelism set (the job sizes its work by it, and a Connect client
    cannot ask Spark's context)."""
    if port <= 0 or cores <= 0:
        raise ValueError(f"a verification server needs a port and cores, not {port}, {cores}")
    master = f"local[{cores}]"
    conf = {
        "spark.ui.enabled": "false",
        "spark.connect.grpc.binding.address": host,
        "spark.connect.grpc.binding.port": str(port),
        "spark.default.parallelism": str(cores),
        "spark.kafka.consumer.cache.capacity": str(CONSUMER_CACHE),
        # What a run's consumers fetched past its ranges' ends stays in their pools:
        # released once idle for IDLE_RELEASE (Spark's default, 5 minutes, let runs in
        # a row fill a 4 GiB heap: 1,085,230 records of 1 KB held after ten runs).
        **{
            f"spark.kafka.consumer.{pool}.{setting}": value
            for pool in ("cache", "fetchedData.cache")
            for setting, value in (("timeout", IDLE_RELEASE), ("evictorThreadRunInterval", "10s"))
        },
        **driver_conf(master, QUICK_JIT_RECORDS),
    }
    jars = ",".join(str(jar) for jar in sorted((jvm_dir() / "spark-kafka").glob("*.jar")))
    command = [spark_submit(), "--class", SERVER_CLASS, "--master", master, "--jars", jars]
    for key, value in sorted(conf.items()):
        command += ["--conf", f"{key}={value}"]
    return [*command, "--name", "replicator verification server"]


def client_command() -> list[str]:
    """The job as a client of the server its environment names (`client_environment`),
    without its arguments (`--plan`, `--out`)."""
    return [sys.executable, "-m", SPARK_JOB]


def client_environment(remote: str) -> dict[str, str]:
    """What names the server to the job: PySpark's own `SPARK_REMOTE`, not the command
    line, where a URL's parameters (`;token=...`) would be visible to every user; with
    `$SPARK_CONNECT_AUTHENTICATE_TOKEN`'s token when the URL has none."""
    token = os.environ.get(TOKEN_ENV)
    if token and ";token=" not in remote:
        remote += f";token={token}" if ";" in remote else f"/;token={token}"
    return {REMOTE_ENV: remote}


def client_token(remote: str) -> str | None:
    """The token a client of `remote` sends: the URL's `;token=`, else
    `$SPARK_CONNECT_AUTHENTICATE_TOKEN`'s (None: neither)."""
    for parameter in remote.split(";")[1:]:
        key, _, value = parameter.partition("=")
        if key.strip() == "token":
            return value
    return os.environ.get(TOKEN_ENV) or None


def suites_port(port: int) -> int:
    """The port of the warm suites of the server listening on `port`."""
    return port + SUITES_PORT_OFFSET


def suites_address(remote: str) -> tuple[str, int]:
    """The host and port of the warm suites of the server at `remote`."""
    host, port = _host_port(remote)
    return host, suites_port(port)


def server_address(remote: str) -> str:
    """`remote` without its parameters (`sc://HOST:PORT`): what messages and the run's
    history show of it (a URL's `;token=...` is a secret)."""
    host, port = _host_port(remote)
    return f"{REMOTE_SCHEME}{host}:{port}"


def check_reachable(remote: str, timeout: float = 10) -> None:
    """ReplicatorError unless a server accepts connections at `remote`, naming the fix."""
    host, port = _host_port(remote)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise ReplicatorError(
            f"no verification server answers at {server_address(remote)} ({exc.strerror or exc}): "
            f"start one there (`replicator verification-server --port {port}`) or give "
            "--master another URL"
        ) from None


def _host_port(remote: str) -> tuple[str, int]:
    """The host and port of an `sc://HOST[:PORT][/;param=value...]` URL."""
    parsed = urlsplit(remote)
    try:
        port = parsed.port or DEFAULT_PORT
    except ValueError:
        port = 0
    if parsed.scheme != REMOTE_SCHEME.removesuffix("://") or not parsed.hostname or not port:
        shown = remote.split(";", 1)[0]  # never a parameter: it may be a token
        raise ReplicatorError(f"not a Spark Connect URL (sc://HOST:PORT): {shown}")
    return parsed.hostname, port


def spark_submit() -> str:
    """This environment's `spark-submit` (PySpark's, beside this Python)."""
    return str(Path(sys.executable).with_name("spark-submit"))


def server_environment() -> dict[str, str]:
    """The server's environment: this Python's tools first on the path (spark-submit
    finds Spark's home with the `python3` it finds)."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return {**os.environ, "PATH": path}


@contextmanager
def serving(command: list[str], log: Path, timeout: float = 180) -> Iterator[None]:
    """`command` (one that starts a verification server) running for the block, from
    when the server listens (`STARTED` in `log`, where its output goes); stopped after."""
    server = ServerProcess(command, log).start()
    try:
        server.wait_started(timeout)
        yield
    finally:
        server.stop()


class ServerProcess:
    """A verification server as a child process (`make run`'s, a test's): `start` returns
    at once (the JVM starts while the caller starts other parts), `wait_started` once it
    listens (`STARTED` in `log`, where its output goes), `stop` ends it."""

    def __init__(self, command: list[str], log: Path, token: str | None = None) -> None:
        self.command = command
        self.log = log
        self._token = token  # required of every client when given
        self._process: subprocess.Popen[bytes] | None = None

    def __repr__(self) -> str:
        return f"ServerProcess(log={self.log}, running={self.running})"

    def start(self) -> ServerProcess:
        env = server_environment()
        if self._token is not None:
            env[TOKEN_ENV] = self._token
        with self.log.open("wb") as out:
            self._process = subprocess.Popen(
                self.command, stdout=out, stderr=subprocess.STDOUT, env=env
            )
        return self

    @property
    def pid(self) -> int | None:
        """Its process id, once started."""
        return None if self._process is None else self._process.pid

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def wait_started(self, timeout: float = 180) -> None:
        """Return once the server listens; ReplicatorError naming its log if it exits
        or does not listen within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while STARTED not in self.log.read_text(errors="replace"):
            if not self.running or time.monotonic() > deadline:
                raise ReplicatorError(f"the verification server did not start; see {self.log}")
            time.sleep(0.5)

    def stop(self, timeout: float = 30) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
