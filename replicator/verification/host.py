"""The verification server's host: `replicator verification-server` runs the Spark
Connect server (a child JVM, `server.server_command`) and the warm suites
(`warm_suites.SuitesService`, on the next port) in one foreground process, until it is
stopped (SIGTERM or SIGINT stop both) or the JVM ends."""

from __future__ import annotations

import ctypes
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

#: prctl(2)'s option: the signal the calling process gets when its parent ends.
_PR_SET_PDEATHSIG = 1


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
    # Started before this process starts a thread (the suites' server's come after).
    command = server_command(port, cores, host)
    jvm = subprocess.Popen(command, env=env, preexec_fn=_ends_with_us)  # noqa: PLW1509
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


def _ends_with_us() -> None:
    """In the JVM's process before it runs: it gets SIGTERM when this process ends,
    however it ends (a supervisor killed with SIGKILL, a test's timeout), rather than
    keep the port and the cores (Linux's PR_SET_PDEATHSIG; kept across exec)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


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
