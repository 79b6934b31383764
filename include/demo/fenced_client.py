"""What the demo producer and consumer share: the command line, signals, the ledger,
and the fence protocol of `replicator.statestore.discovery`.

A `FencedClient` runs in one thread: it does short units of work (`work`, at
most about half a second each) and between them, about every 0.5 s, asks the
state store where to connect and reports itself. When the application is
fenced or moved, it finishes what it was doing (`disconnect`: flush, commit,
close), then acknowledges the fence, waits until the fence is lifted, and
connects to the active cluster again.

The route lease: a route holds for `ROUTE_LEASE_S` after the client last
confirmed it (read it and reported itself on it). A client that cannot reach
the store works on for the first half of the lease, then stops within the
second (flush, commit, close), and waits for the store without working: a
fence it could not see may have been set meanwhile, and the failover waits
out the lease for it. When the store answers again, the client follows the
route as it is then (fenced, moved, or the same).
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

from confluent_kafka import KafkaError

from replicator.acls.principal import principal_of
from replicator.config import load_config
from replicator.errors import ReplicatorError
from replicator.statestore import (
    ROUTE_LEASE_S,
    ClientStatus,
    Route,
    StateStore,
    StoreUnavailable,
    where,
)
from replicator.statestore.ledger import LedgerWriter

log = logging.getLogger("demo")

#: How often a client reads its route and reports itself: a fence or a switch is seen
#: within this long (both are in a cutover's downtime: `clients_fenced`,
#: `first_client_resumed`).
REPORT_EVERY_S = 0.25
#: How long a client works on a route it could not confirm; the rest of the route
#: lease is for stopping (flush, commit, close) before the lease ends.
TRUST_S = ROUTE_LEASE_S / 2
#: How long stopping on a fence may take (flush and close).
STOP_TIMEOUT_S = 30.0


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
        #: Monotonic times: the start of the last route read, and of the last read
        #: whose route the client then reported itself on (its route lease starts there).
        self._read_at = self._confirmed_at = time.monotonic()
        #: When the store stopped answering (monotonic), until it answers again.
        self._store_down_since: float | None = None

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
    def disconnect(self, timeout_s: float) -> None:
        """Make everything done so far durable (ledger and Kafka) within `timeout_s`,
        then close the client; what cannot be made durable in time is dropped."""

    def run(self) -> int:
        """Serve until SIGTERM/SIGINT; returns the exit code."""
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._on_signal)
        try:
            route: Route | None = where(self.application, self.config, self.store.applications)
            while not self.stopping.is_set():
                if route is None:
                    route = self._wait_for_store()
                elif route.fenced:
                    route = self._sit_out(route)
                else:
                    route = self._serve(route)
        finally:
            self.ledger.close()
            self._forget()
            self.store.close()
        return 0

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        log.info("%s: stopping on signal %d", self.client_id, signum)
        self.stopping.set()

    def _serve(self, route: Route) -> Route | None:
        """Work on the cluster of `route` until the application is fenced or moved
        (returns the new route), the route lease runs short (returns None), or the
        process is asked to stop."""
        log.info(
            "%s: working on %s (%s), epoch %d",
            self.client_id,
            route.cluster,
            route.bootstrap_servers,
            route.epoch,
        )
        self.connect(route)
        stop_timeout = STOP_TIMEOUT_S
        try:
            self._confirm(route)
            next_check = time.monotonic() + REPORT_EVERY_S
            while not self.stopping.is_set():
                unconfirmed = time.monotonic() - self._confirmed_at
                if unconfirmed >= TRUST_S:
                    stop_timeout = max(0.0, ROUTE_LEASE_S - unconfirmed)
                    log.warning(
                        "%s: route to %s not confirmed for %.1fs (the state store does not "
                        "answer); stopping work within the route lease of %gs",
                        self.client_id,
                        route.cluster,
                        unconfirmed,
                        ROUTE_LEASE_S,
                    )
                    return None
                self.work()
                if time.monotonic() < next_check:
                    continue
                fresh = self._lookup()
                if fresh is not None:
                    if fresh.fenced or fresh.cluster != route.cluster:
                        return fresh
                    route = fresh
                    self._confirm(route)
                next_check = time.monotonic() + REPORT_EVERY_S
            return route
        finally:
            self.disconnect(stop_timeout)

    def _sit_out(self, route: Route) -> Route:
        """Acknowledge the fence (all work is durable and the Kafka client closed by
        now) and keep doing so until it is lifted or the process is asked to stop;
        a store that does not answer leaves the client fenced."""
        log.info("%s: fenced at epoch %d, waiting", self.client_id, route.epoch)
        while route.fenced:
            self._report(route, "fenced")
            if self.stopping.wait(REPORT_EVERY_S):
                break
            route = self._lookup() or route
        return route

    def _wait_for_store(self) -> Route | None:
        """Stopped for want of a confirmed route: ask for it about every 0.5 s until
        the store answers (the route then), or the process is asked to stop (None)."""
        while not self.stopping.wait(REPORT_EVERY_S):
            route = self._lookup()
            if route is not None:
                return route
        return None

    def _lookup(self) -> Route | None:
        """The route now, or None while the store does not answer."""
        self._read_at = time.monotonic()
        try:
            route = where(self.application, self.config, self.store.applications)
        except StoreUnavailable as exc:
            self._store_failed(exc)
            return None
        self._store_answered()
        return route

    def _confirm(self, route: Route) -> None:
        """Report "running" on `route`; once the store has that, the route lease
        runs from the read that gave `route`."""
        if self._report(route, "running"):
            self._confirmed_at = self._read_at

    def _report(self, route: Route, state: ClientStatus) -> bool:
        try:
            self.store.applications.report_client(
                self.application, self.client_id, self.role, route.cluster, route.epoch, state
            )
        except StoreUnavailable as exc:
            self._store_failed(exc)
            return False
        self._store_answered()
        return True

    def _store_failed(self, exc: StoreUnavailable) -> None:
        """Log the first failure of an outage of the store (not each retry)."""
        if self._store_down_since is None:
            self._store_down_since = time.monotonic()
            log.warning("%s: %s", self.client_id, exc)

    def _store_answered(self) -> None:
        if self._store_down_since is not None:
            log.info(
                "%s: the state store answers again after %.1fs",
                self.client_id,
                time.monotonic() - self._store_down_since,
            )
            self._store_down_since = None

    def _forget(self) -> None:
        """A client that stopped cleanly removes itself, so no fence waits for it."""
        try:
            self.store.applications.remove_client(self.application, self.client_id)
        except StoreUnavailable as exc:
            log.warning("%s: could not remove itself from the state store: %s", self.client_id, exc)


#: Errors that mean the client's principal lacks an ACL: only an operator can fix that.
REFUSED = frozenset({KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED})


def access_denied(
    client: FencedClient, cluster: str, error: KafkaError, operation: str, resource: str
) -> ReplicatorError:
    """The one-line error that stops a client its cluster refused: the principal, the
    missing operation and resource, and the fix (`replicator acls apply`)."""
    settings = client.config.clusters[cluster]
    principal = principal_of(settings)
    group = f" --group {client.application}" if client.role == "consumer" else ""
    return ReplicatorError(
        f"{client.client_id}: {principal} lacks ALLOW {operation} on {resource} on cluster "
        f"{cluster!r} ({settings.bootstrap_servers}): {error.str()}; grant it, e.g. with "
        f"`replicator acls apply --config <this configuration> --admin-config <an admin's> "
        f"--role {client.role} --principal {principal} --topic {client.topic}{group}`"
    )


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
