"""Warm suites: the verification server's host keeps a suites process ready, GX
imported, and runs a run's suites there when its client asks.

A run's suites import GX (about 1.5 s of CPU) before they validate anything: most of a
run with nothing new (2.2-3.3 s on this project's two cores, against 1.0-1.3 s with the
import done). A long-lived process exists only where a verification server runs
(`replicator verification-server`: `make run`'s system, the compose service, the chart's
pod), so it keeps one suites process started ahead (`WarmSuites`) and serves requests on
the port after Spark Connect's (`server.suites_port`). A run whose master is that server
(`sc://HOST:PORT`) asks there (`find_warm_suites`); one whose server serves no suites,
or any other master, starts its own process (`suites.SuitesAhead`), as before.

The protocol is one JSON line each way over TCP: the client sends the run's folder, its
thresholds and the server's token; the server answers the suites' exit code, or an error.
The suites read the tables the server's Spark job wrote and write their summary and Data
Docs beside them: the run's folder is shared, at the same path, as for the job. When
the server holds a token (`$SPARK_CONNECT_AUTHENTICATE_TOKEN`, the Spark Connect
server's) it serves only clients that send it; the token is never logged or shown.
Whoever may ask is who may run a job on the server (the same network, the same token).
"""

from __future__ import annotations

import hmac
import json
import logging
import socket
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from replicator.errors import ReplicatorError
from replicator.verification.processes import Ahead, check_exit
from replicator.verification.server import client_token, is_remote, suites_address
from replicator.verification.suites import (
    SUITES,
    SuitesAhead,
    read_summary,
    suites_arguments,
    suites_command,
)

_log = logging.getLogger(__name__)

#: How long a client waits for a server's suites port to accept it.
CONNECT_TIMEOUT = 5.0
#: How long the server waits for a request's line once connected.
REQUEST_TIMEOUT = 30.0
#: The longest request line (a path, thresholds, a token).
MAX_REQUEST = 64 * 1024
#: The thresholds a request carries, written into its run's folder for the suites.
THRESHOLDS_FILE = "thresholds.json"


class Suites(Protocol):
    """Where a run's suites run: `run` waits for them and returns their summary."""

    where: str

    def run(self, directory: Path) -> dict[str, Any]: ...


@contextmanager
def suites_for(master: str | None, thresholds: Path | None = None) -> Iterator[Suites]:
    """The suites of a run on `master`: the warm ones of its verification server when
    it serves them (`find_warm_suites`), else a process of the run's own started now,
    ahead (ended when the block ends, if never asked)."""
    warm = find_warm_suites(master, thresholds) if master else None
    if warm is not None:
        yield warm
        return
    with SuitesAhead(thresholds) as own:
        yield own


def find_warm_suites(master: str, thresholds: Path | None = None) -> WarmSuitesClient | None:
    """A client of the warm suites of the verification server `master` names, when one
    answers on its suites port; None for any other master, or a server that serves no
    suites (one started otherwise than by `replicator verification-server`)."""
    if not is_remote(master):
        return None
    host, port = suites_address(master)
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT).close()
    except OSError:
        _log.info("no warm suites at %s:%d: the run starts its own", host, port)
        return None
    return WarmSuitesClient(host, port, client_token(master), thresholds)


class WarmSuitesClient:
    """A run's side of the protocol: asks the server at `host`:`port` to run the
    suites of a run folder, waits for their exit code, reads their summary."""

    def __init__(
        self, host: str, port: int, token: str | None, thresholds: Path | None = None
    ) -> None:
        self.where = f"warm, on {host}:{port}"
        self._address = (host, port)
        self._token = token
        self._thresholds = thresholds

    def __repr__(self) -> str:  # never the token
        return f"WarmSuitesClient({self._address[0]}:{self._address[1]})"

    def run(self, directory: Path) -> dict[str, Any]:
        thresholds = None if self._thresholds is None else json.loads(self._thresholds.read_text())
        request = {"run": str(directory.resolve()), "thresholds": thresholds, "token": self._token}
        what = f"{SUITES} ({self.where})"
        try:
            with socket.create_connection(self._address, timeout=CONNECT_TIMEOUT) as connection:
                connection.settimeout(None)  # the suites take what the tables take
                connection.sendall(json.dumps(request).encode() + b"\n")
                line = connection.makefile("rb").readline()
        except OSError as exc:
            raise ReplicatorError(f"{what}: {exc.strerror or exc}; see the server's log") from None
        if not line:
            raise ReplicatorError(f"{what} ended without an answer; see the server's log")
        reply = json.loads(line)
        if "error" in reply:
            raise ReplicatorError(f"{what}: {reply['error']}")
        check_exit(int(reply["code"]), what, directory / "suites.log", failing_ok=True)
        return {**read_summary(directory), "suites_ran": self.where}


class WarmSuites:
    """Suites processes kept ready, GX imported (`suites.suites_command`): `take` hands
    one over (or starts one, when none is ready), `done` tops them up to `READY`: at
    once when none is left, else once no run's suites have been asked for `QUIET_S`
    seconds, so that an import (1.5 CPU-seconds) does not take the cores of runs
    that follow one another (a flow's runs back to back, flows one after the other).
    Each holds about 160 MiB."""

    READY = 2
    QUIET_S = 10.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ready: list[Ahead] = []
        self._timer: threading.Timer | None = None
        self._closed = False
        self._refill()

    @property
    def ready(self) -> int:
        """How many processes are ready."""
        with self._lock:
            return len(self._ready)

    def take(self) -> Ahead:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            while self._ready:
                process = self._ready.pop(0)
                if process.alive:
                    return process
                _log.warning("a warm suites process ended with %s", process.close())
        return Ahead(suites_command())

    def done(self) -> None:
        """A run's suites are done: top up now if none is ready, else once quiet."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            if self._ready:
                self._timer = threading.Timer(self.QUIET_S, self._refill)
                self._timer.daemon = True
                self._timer.start()
                return
        self._refill()

    def _refill(self) -> None:
        with self._lock:
            while not self._closed and len(self._ready) < self.READY:
                self._ready.append(Ahead(suites_command()))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
            ready, self._ready = self._ready, []
        for process in ready:
            process.close()


class SuitesService(socketserver.ThreadingTCPServer):
    """The server's side: listens on `address`, runs each request's suites in the warm
    process (`WarmSuites`), checking `token` when it has one. Requests of runs at once
    are served at once (a thread each)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], token: str | None) -> None:
        self._token = token
        self._warm = WarmSuites()
        try:
            super().__init__(address, _Request)
        except OSError as exc:
            self._warm.close()
            raise ReplicatorError(
                f"the warm suites cannot listen on {address[0]}:{address[1]} "
                f"({exc.strerror or exc}): the verification server's port + 1 must be free"
            ) from None

    def __repr__(self) -> str:  # never the token
        host, port = self.server_address[:2]
        return f"SuitesService({host!s}:{port})"

    def server_close(self) -> None:
        super().server_close()
        self._warm.close()

    def answer(self, line: bytes) -> int:
        """The exit code of the suites `line` (a request) asks for; ReplicatorError
        naming what is wrong with the request."""
        try:
            request = json.loads(line)
            run, thresholds, token = request["run"], request.get("thresholds"), request.get("token")
        except (ValueError, KeyError, TypeError):
            raise ReplicatorError("not a request for the warm suites") from None
        if self._token is not None and not hmac.compare_digest(
            str(token or "").encode(), self._token.encode()
        ):
            raise ReplicatorError(
                "the token does not match the server's: set $SPARK_CONNECT_AUTHENTICATE_TOKEN "
                "(or the master URL's ;token=) to the verification server's token"
            )
        directory = self._run_folder(str(run))
        threshold_file = None
        if thresholds is not None:
            threshold_file = directory / THRESHOLDS_FILE
            threshold_file.write_text(json.dumps(thresholds))
        arguments = suites_arguments(directory, threshold_file)
        process = self._warm.take()
        try:
            return process.ask(arguments, directory / "suites.log")
        except OSError as exc:  # it died before it read the request
            raise ReplicatorError(f"the suites process could not run: {exc}") from None
        finally:
            self._warm.done()

    def _run_folder(self, run: str) -> Path:
        """`run` when it is a run's folder (an absolute path, with the run's plan)."""
        directory = Path(run)
        if not directory.is_absolute() or not directory.name.startswith("run="):
            raise ReplicatorError(f"{run} is not a verification run's folder")
        if not (directory / "plan.json").is_file():
            raise ReplicatorError(
                f"the verification server does not see {directory / 'plan.json'}: it and "
                "its clients must share the results folder at the same path"
            )
        return directory


class _Request(socketserver.StreamRequestHandler):
    timeout = REQUEST_TIMEOUT  # for the request's line; the answer waits for the suites
    server: SuitesService

    def handle(self) -> None:
        line = self.rfile.readline(MAX_REQUEST)
        if not line.strip():
            return  # a client's check that the port answers (`find_warm_suites`)
        try:
            reply: dict[str, Any] = {"code": self.server.answer(line)}
        except ReplicatorError as exc:
            _log.warning("warm suites: refused a request from %s: %s", self.client_address[0], exc)
            reply = {"error": str(exc)}
        self.wfile.write(json.dumps(reply).encode() + b"\n")
