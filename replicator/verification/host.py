"""The verification server's host: `replicator verification-server` runs the Spark
Connect server (a child JVM, `server.server_command`) and the warm suites
(`warm_suites.SuitesService`, on the next port) in one foreground process, until it is
stopped (SIGTERM or SIGINT stop both) or the JVM ends."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from replicator.verification.server import (
    DEFAULT_PORT,
    LOOPBACK,
    REMOTE_SCHEME,
    TOKEN_ENV,
    server_command,
    server_environment,
    serving,
    suites_port,
)
from replicator.verification.warm_suites import SuitesService


def serve(port: int = DEFAULT_PORT, cores: int = 2, host: str = LOOPBACK) -> int:
    """Serve on `host`: Spark Connect on `port`, the warm suites on `suites_port(port)`;
    the JVM's exit code (0 once stopped by a signal). The token of
    `$SPARK_CONNECT_AUTHENTICATE_TOKEN`, when set, guards both, and reaches no other
    process (the suites' processes do not inherit it)."""
    token = os.environ.pop(TOKEN_ENV, None) or None
    suites = SuitesService((host, suites_port(port)), token)  # fails here if the port is taken
    env = server_environment()
    if token is not None:
        env[TOKEN_ENV] = token
    jvm = subprocess.Popen(server_command(port, cores, host), env=env)
    stopped = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        stopped.set()
        jvm.terminate()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    threading.Thread(target=suites.serve_forever, name="warm-suites", daemon=True).start()
    try:
        code = jvm.wait()
    finally:
        suites.shutdown()
        suites.server_close()
    return 0 if stopped.is_set() else code


def host_command(port: int = DEFAULT_PORT, cores: int = 2, host: str = LOOPBACK) -> list[str]:
    """`replicator verification-server` as a child process (`make run`'s system, the
    benchmarks, the tests)."""
    replicator = [sys.executable, "-m", "replicator", "verification-server"]
    return [*replicator, "--port", str(port), "--cores", str(cores), "--host", host]


@contextmanager
def local_server(log: Path, cores: int = 2, timeout: float = 180) -> Iterator[str]:
    """A verification server with its warm suites on a free pair of local ports for the
    block (benchmarks): its `sc://` URL once it listens. Its output goes to `log`; it is
    stopped after."""
    port = free_port_pair()
    with serving(host_command(port, cores), log, timeout):
        yield f"{REMOTE_SCHEME}127.0.0.1:{port}"


def free_port_pair() -> int:
    """A local port P such that P and P + 1 are free now (the server's and its suites')."""
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind((LOOPBACK, 0))
            port = probe.getsockname()[1]
        with socket.socket() as next_one:
            try:
                next_one.bind((LOOPBACK, suites_port(port)))
            except OSError:
                continue
        return port
    raise OSError("no pair of free local ports for a verification server")
