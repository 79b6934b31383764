"""The Kafka clients the replicator builds: confluent-kafka's, with everything
librdkafka says routed through the project's logging.

Without this, librdkafka writes its own lines to stderr (`%3|...|FAIL|...`),
bypassing the log format and levels, and reports every failed connection
attempt of every client as an error: during a broker outage, thousands of lines
that hide the one that matters. Every `Consumer`, `Producer` and `AdminClient`
of the replicator is built from this module instead of `confluent_kafka`, and gets:

- `logger`: librdkafka's log lines, under `replicator.librdkafka`, prefixed with
  the cluster, each distinct line at most once per `REPEAT_WINDOW_S` (the next
  one says how many were held back). Connection failures (facility `FAIL`) are
  not logged at all but reported to the cluster's `Reachability`, which tells the
  operator about outages in a few lines (see `replicator.kafka.reachability`).
- `error_cb`: connection errors (`_TRANSPORT`, `_ALL_BROKERS_DOWN`, `_RESOLVE`,
  `_TIMED_OUT`) go to the `Reachability` likewise. Any other error goes to the
  caller's own `error_cb` when it gave one (which then reports it), else it is
  logged, deduplicated like the log lines.

librdkafka hands logs and errors to Python only while a client is polled, so
this adds nothing to the hot path: callbacks run only when there is something
to report.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from typing import Any, cast

import confluent_kafka
from confluent_kafka import KafkaError
from confluent_kafka import admin as confluent_admin

from replicator.config.model import ClusterConfig
from replicator.kafka import reachability
from replicator.kafka.reachability import Reachability

log = logging.getLogger("replicator.librdkafka")

#: A distinct line (digits aside) is logged at most once in this many seconds.
REPEAT_WINDOW_S = 60.0
#: librdkafka's log facilities for a connection that failed or dropped.
_CONNECTION_FACILITIES = frozenset({"FAIL"})
_CONNECTION_ERRORS = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._RESOLVE,
        KafkaError._TIMED_OUT,
    }
)
_DIGITS = re.compile(r"\d+")
#: librdkafka starts a line with the thread it came from; the cluster says enough.
_THREAD = re.compile(r"^\[thrd:[^\]]*\]: ")
#: How many distinct lines are remembered before old ones are forgotten.
_MAX_REMEMBERED = 1_000
#: The longest one poll of `Producer.flush` waits (it returns at the first report).
_FLUSH_POLL_S = 0.1

ErrorCallback = Callable[[KafkaError], None]


class RepeatFilter:
    """Lets a line through once per `window_s` per key, counting what it held back."""

    def __init__(
        self, window_s: float = REPEAT_WINDOW_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._window_s = window_s
        self._clock = clock
        self._lock = threading.Lock()
        #: key -> (when it was last let through, repeats held back since)
        self._seen: dict[Hashable, tuple[float, int]] = {}

    def admit(self, key: Hashable) -> int | None:
        """None to drop the line, else how many repeats of it were held back."""
        now = self._clock()
        with self._lock:
            last = self._seen.get(key)
            if last is not None and now - last[0] < self._window_s:
                self._seen[key] = (last[0], last[1] + 1)
                return None
            if len(self._seen) >= _MAX_REMEMBERED:
                self._forget(now)
            self._seen[key] = (now, 0)
            return last[1] if last is not None else 0

    def _forget(self, now: float) -> None:
        for key in [k for k, (at, _) in self._seen.items() if now - at >= self._window_s]:
            del self._seen[key]
        if len(self._seen) >= _MAX_REMEMBERED:
            self._seen.clear()


_REPEATS = RepeatFilter()


def _log_once(level: int, cluster: str, text: str) -> None:
    held_back = _REPEATS.admit((cluster, level, _DIGITS.sub("#", text)))
    if held_back is None:
        return
    more = f" ({held_back} more like it in the last {REPEAT_WINDOW_S:.0f} s)" if held_back else ""
    log.log(level, "cluster %s: %s%s", cluster, text, more)


class _LibrdkafkaLog(logging.LoggerAdapter):
    """confluent-kafka's `logger` for the clients of one cluster.

    confluent-kafka calls `log(level, "%s [%s] %s", facility, client name, message)`
    with librdkafka's syslog level already mapped to logging's.
    """

    def __init__(self, tracker: Reachability) -> None:
        super().__init__(log, {})
        self._tracker = tracker

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        if len(args) != 3:  # not the shape above: log it as it is
            _log_once(level, self._tracker.cluster, str(msg) % args if args else str(msg))
            return
        facility, client, text = (str(arg) for arg in args)
        text = _THREAD.sub("", text)
        if facility in _CONNECTION_FACILITIES:
            self._tracker.trouble(text)
            log.debug("cluster %s: %s: %s", self._tracker.cluster, client, text)
            return
        _log_once(level, self._tracker.cluster, f"{client}: {facility}: {text}")


def _error_callback(tracker: Reachability, then: ErrorCallback | None) -> ErrorCallback:
    def on_error(error: KafkaError) -> None:
        if not error.fatal() and error.code() in _CONNECTION_ERRORS:
            tracker.trouble(error.str())
        elif then is not None:
            then(error)
        else:
            level = logging.ERROR if error.fatal() else logging.WARNING
            _log_once(level, tracker.cluster, f"{error.name()}: {error.str()}")

    return on_error


#: How the compiled data plane's events name librdkafka's connection errors (the
#: rdkafka crate's names of _TRANSPORT, _ALL_BROKERS_DOWN, _RESOLVE, _TIMED_OUT).
_CONNECTION_NAMES = ("BrokerTransportFailure", "AllBrokersDown", "Resolve ", "OperationTimedOut")


def route_event(config: Mapping[str, object], cluster: str, level: str, text: str) -> None:
    """A log line or client error of a client this module did not build (the compiled
    data plane's own librdkafka, `replicator._dataplane`: its `events()`), routed as
    this module's clients' are: connection trouble to the cluster's `Reachability`,
    anything else logged, each distinct line at most once per `REPEAT_WINDOW_S`.
    `level` is librdkafka's ("fatal", "error", "warning", ...); `text` is
    "FACILITY [thrd:...]: message" for a log line, "<error>: <reason>" for an error.
    `config`: the client's settings (its bootstrap servers tell the cluster)."""
    tracker = reachability.CLUSTERS.of(config, cluster)
    facility, _, rest = text.partition(" ")
    connection = facility in _CONNECTION_FACILITIES or any(n in text for n in _CONNECTION_NAMES)
    if level != "fatal" and connection:
        tracker.trouble(_THREAD.sub("", rest) if facility in _CONNECTION_FACILITIES else text)
        log.debug("cluster %s: data plane: %s", cluster, text)
        return
    severity = logging.ERROR if level in ("fatal", "error") else logging.WARNING
    _log_once(severity, cluster, f"data plane: {_THREAD.sub('', text)}")


def routed(config: Mapping[str, object], cluster: str | None = None) -> dict[str, object]:
    """`config` with librdkafka's logs and errors routed as the module says.

    `cluster` names the cluster in lines and metrics (its alias); an `error_cb`
    in `config` still gets every error that is not about connectivity, and a
    `logger` in it is kept.
    """
    tracker = reachability.CLUSTERS.of(config, cluster)
    then = config.get("error_cb")
    return {
        **config,
        "logger": config.get("logger") or _LibrdkafkaLog(tracker),
        "error_cb": _error_callback(tracker, then if callable(then) else None),
    }


class Consumer(confluent_kafka.Consumer):
    """confluent-kafka's Consumer, its logs and errors routed (see the module)."""

    def __init__(self, config: Mapping[str, object], *, cluster: str | None = None) -> None:
        super().__init__(routed(config, cluster))


class Producer(confluent_kafka.Producer):
    """confluent-kafka's Producer, its logs and errors routed (see the module), and a
    `flush` that lets a fatal error through."""

    def __init__(self, config: Mapping[str, object], *, cluster: str | None = None) -> None:
        super().__init__(routed(config, cluster))

    def flush(self, timeout: float = -1) -> int:
        """Serve delivery reports until none is left or `timeout` seconds have passed
        (negative: no limit); return how many are left, as confluent-kafka's does.

        confluent-kafka's own `flush()` (2.16) goes on serving delivery reports after
        a fatal error (the gapless guarantee tripped by a batch the target refused)
        has set its exception: the next report's callback then fails with a
        SystemError that hides the fatal error, and the caller cannot tell the
        refusal. `poll()` returns as soon as the fatal error is served, which then
        raises as the KafkaException callers handle."""
        deadline = None if timeout < 0 else time.monotonic() + timeout
        while True:
            left = _FLUSH_POLL_S if deadline is None else deadline - time.monotonic()
            self.poll(max(0.0, min(left, _FLUSH_POLL_S)))
            if not len(self) or (deadline is not None and time.monotonic() >= deadline):
                return len(self)


class AdminClient(confluent_admin.AdminClient):
    """confluent-kafka's AdminClient, its logs and errors routed (see the module).

    An admin client hands logs and errors over only when polled, which the
    replicator's are not: what they would say, the clients that are polled and the
    failed requests' exceptions say too.
    """

    def __init__(self, config: Mapping[str, object], *, cluster: str | None = None) -> None:
        super().__init__(cast("dict[str, str | int | float | bool]", routed(config, cluster)))


def admin_for(cluster: ClusterConfig, settings: Mapping[str, object] | None = None) -> AdminClient:
    """An admin client of `cluster`: its admin settings, `settings` on top, and its
    lines naming the cluster by alias."""
    return AdminClient({**cluster.admin, **(settings or {})}, cluster=cluster.alias)


def quiet_admin(cluster: ClusterConfig, *, connect_timeout_ms: int | None = None) -> AdminClient:
    """An admin client of `cluster` that logs nothing of its own, for a probe whose
    caller reports the outcome once: probing a dead cluster, a client logs a failed
    connection every few milliseconds. `connect_timeout_ms` bounds each connection
    attempt (librdkafka's default is 30 s), for a probe that must answer quickly."""
    settings: dict[str, object] = {"log_level": 0}
    if connect_timeout_ms is not None:
        settings["socket.connection.setup.timeout.ms"] = connect_timeout_ms
    return admin_for(cluster, settings)
