"""What the demo producer and consumer share: the command line, signals, the ledger,
and the fence protocol of `replicator.statestore.discovery`.

A `FencedClient` runs in one thread: it does short units of work (`work`, at
most about half a second each) and between them, about every 0.5 s, asks the
state store where to connect and reports itself. When the application is
fenced or moved, it finishes what it was doing (`disconnect`: flush, commit,
close), then acknowledges the fence, waits until the fence is lifted, and
connects to the active cluster again.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import threading
import time
from abc import ABC, abstractmethod
from pathlib import Path
from types import FrameType
from typing import ClassVar

from replicator.config import load_config
from replicator.errors import ReplicatorError
from replicator.statestore import Route, StateStore, StoreUnavailable, where
from replicator.statestore.ledger import LedgerWriter
from replicator.statestore.store import ClientStatus

log = logging.getLogger("demo")

#: How often a client reads its route and reports itself.
REPORT_EVERY_S = 0.5


class FencedClient(ABC):
    """A client process of one application that obeys fences; subclasses say how it
    connects, what one unit of work is, and how it stops cleanly."""

    role: ClassVar[str]

    def __init__(self, args: argparse.Namespace) -> None:
        self.application: str = args.app
        self.topic: str = args.topic
        self.client_id: str = args.client_id or f"{self.role}-{socket.gethostname()}-{os.getpid()}"
        self.config = load_config(args.config)
        self.store = StateStore(args.state_url)
        self.ledger = LedgerWriter(args.ledger)
        self.stopping = threading.Event()

    @classmethod  # noqa: B027 - an optional hook, not abstract
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """Options of this kind of client beyond the common ones."""

    @abstractmethod
    def connect(self, route: Route) -> None:
        """Create the Kafka client for the cluster of `route`."""

    @abstractmethod
    def work(self) -> None:
        """One short unit of work (it must return within about half a second)."""

    @abstractmethod
    def disconnect(self) -> None:
        """Make everything done so far durable (ledger and Kafka), then close the client."""

    def run(self) -> int:
        """Serve until SIGTERM/SIGINT; returns the exit code."""
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._on_signal)
        try:
            route = where(self.application, self.config, self.store)
            while not self.stopping.is_set():
                route = self._sit_out(route) if route.fenced else self._serve(route)
        finally:
            self.ledger.close()
            self._forget()
            self.store.close()
        return 0

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        log.info("%s: stopping on signal %d", self.client_id, signum)
        self.stopping.set()

    def _serve(self, route: Route) -> Route:
        """Work on the cluster of `route` until the application is fenced or moved
        (returns the new route) or the process is asked to stop."""
        log.info(
            "%s: working on %s (%s), epoch %d",
            self.client_id,
            route.cluster,
            route.bootstrap_servers,
            route.epoch,
        )
        self.connect(route)
        try:
            self._report(route, "running")
            next_check = time.monotonic() + REPORT_EVERY_S
            while not self.stopping.is_set():
                self.work()
                if time.monotonic() < next_check:
                    continue
                fresh = self._lookup(route)
                if fresh.fenced or fresh.cluster != route.cluster:
                    return fresh
                route = fresh
                self._report(route, "running")
                next_check = time.monotonic() + REPORT_EVERY_S
            return route
        finally:
            self.disconnect()

    def _sit_out(self, route: Route) -> Route:
        """Acknowledge the fence (all work is durable and the Kafka client closed by
        now) and keep doing so until it is lifted or the process is asked to stop."""
        log.info("%s: fenced at epoch %d, waiting", self.client_id, route.epoch)
        while route.fenced:
            self._report(route, "fenced")
            if self.stopping.wait(REPORT_EVERY_S):
                break
            route = self._lookup(route)
        return route

    def _lookup(self, current: Route) -> Route:
        """The route now; the current one while the store is unreachable, so a store
        outage never stops a client that is allowed to run."""
        try:
            return where(self.application, self.config, self.store)
        except StoreUnavailable as exc:
            log.warning("%s: %s; staying on %s", self.client_id, exc, current.cluster)
            return current

    def _report(self, route: Route, state: ClientStatus) -> None:
        try:
            self.store.report_client(
                self.application, self.client_id, self.role, route.cluster, route.epoch, state
            )
        except StoreUnavailable as exc:
            log.warning("%s: could not report %s: %s", self.client_id, state, exc)

    def _forget(self) -> None:
        """A client that stopped cleanly removes itself, so no fence waits for it."""
        try:
            self.store.remove_client(self.application, self.client_id)
        except StoreUnavailable as exc:
            log.warning("%s: could not remove itself from the state store: %s", self.client_id, exc)


def main(client_class: type[FencedClient], description: str) -> int:
    """Command line of a demo client: parse, run, one-line errors."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--config", type=Path, required=True, help="mm2.properties with clusters")
    parser.add_argument("--app", required=True, help="application name in the state store")
    parser.add_argument("--topic", required=True, help="logical topic, e.g. demo.orders")
    parser.add_argument("--ledger", type=Path, required=True, help="JSON-lines ledger file")
    parser.add_argument("--state-url", help="SQLAlchemy URL of the state store")
    parser.add_argument("--client-id", help=f"default {client_class.role}-<host>-<pid>")
    client_class.add_arguments(parser)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        return client_class(args).run()
    except ReplicatorError as exc:
        log.error("%s", exc)
        return 1
