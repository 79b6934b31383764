"""Whether each Kafka cluster answers, told to an operator in three kinds of lines.

librdkafka reports every failed connection attempt of every client: a 40 s outage
of one broker wrote about 2,100 log lines. What an operator needs during an
incident is the cluster's state: one line when it becomes unreachable (which
cluster, since when, why), a reminder every `REMIND_EVERY_S` while it stays away,
and one line when it is back with the outage's length; and the same as metrics:
`replicator_cluster_reachable{cluster}` (0/1) and `replicator_cluster_outages_total`.

How a change is detected
------------------------
*Unreachable*: a client reports a connection problem (`Reachability.trouble`, fed
by `replicator.kafka.clients` from librdkafka's error callback and logs). That
alone proves nothing: a connection may drop and be made again at once, and one
broker of three may be down while the cluster serves. So the first trouble starts
a probe: a metadata request from an admin client of its own, given
`PROBE_TIMEOUT_S`. Only when it fails is the cluster unreachable, since the first
trouble. After a probe the cluster answered, reports are counted for `QUIET_S`
before they start another one.

*Back*: the same probe, every `PROBE_EVERY_S` while the cluster is away, until a
metadata request is answered. That is cheap (one request every few seconds during
an outage, nothing at all while the cluster is up) and reliable whatever the
clients do, whereas the alternatives are not: the replicating clients' own signs of
life (a delivery, a fetch) depend on traffic and sit on the hot path, and
librdkafka's statistics would cost a JSON document per client per interval all
the time, and reach only clients that are polled (admin clients are not).

One `Reachability` per cluster and process, keyed by the cluster's bootstrap
servers (`CLUSTERS.of`): every client of the cluster reports to it, so the
operator sees one account of an outage however many clients noticed it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, cast

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from replicator import metrics
from replicator.config.clients import admin_settings
from replicator.kafka.errors import error_text

if TYPE_CHECKING:
    from prometheus_client import Counter

log = logging.getLogger(__name__)

#: Time a probe's metadata request is given before the cluster counts as unreachable.
PROBE_TIMEOUT_S = 5.0
#: Pause between probes while the cluster is away.
PROBE_EVERY_S = 2.0
#: At most one "still unreachable" line this often.
REMIND_EVERY_S = 30.0
#: After a probe the cluster answered, client reports are only counted for this long
#: before they start another probe: one broker of several may stay down for hours,
#: and its clients' reports must not turn into a probe each.
QUIET_S = 30.0
#: A cluster no client of this process has reported on for this long while it is
#: away is no longer watched: its clients are gone (a flow stopped, a test's
#: cluster torn down), so there is nobody to tell and no end of outage to wait for.
#: Live clients retry at least every 10 s (librdkafka's reconnect.backoff.max.ms).
FORGET_AFTER_S = 120.0

#: A probe: None when the cluster answered, else why it did not.
Probe = Callable[[], "str | None"]
State = Literal["up", "suspect", "down"]


@dataclass
class _Outage:
    """The trouble being looked into, or the outage in progress."""

    started: float  # monotonic
    started_wall: float
    first_reason: str
    last_reason: str
    last_report: float  # monotonic
    #: Client reports since the last line about it.
    reports: int = 0
    last_line: float = 0.0  # monotonic

    def since(self) -> str:
        return time.strftime("%H:%M:%S", time.localtime(self.started_wall))


class _Series(Protocol):
    """A labelled series of prometheus_client (a gauge's or a counter's)."""

    def set(self, value: float) -> None: ...

    def inc(self, amount: float = 1) -> None: ...


class Reachability:
    """Whether one cluster answers, as far as this process can tell.

    `trouble` is called from clients' callbacks (any thread) and costs a lock and
    a few assignments; the first one of an incident starts `watch` in a thread of
    its own (`spawn`), which probes until the cluster answers and writes the
    lines. Tests drive `check` directly with a probe and a clock of their own.

    States: "up"; "suspect" while the first probe of an incident runs; "down" from
    its failure until a probe is answered.
    """

    def __init__(
        self,
        cluster: str,
        bootstrap: str,
        probe: Probe,
        *,
        clock: Callable[[], float] = time.monotonic,
        spawn: Callable[[Callable[[], None]], None] | None = None,
        remind_every_s: float = REMIND_EVERY_S,
    ) -> None:
        self.cluster = cluster
        self.bootstrap = bootstrap
        self._probe = probe
        self._clock = clock
        self._spawn = spawn or _in_daemon_thread(f"reachability-{cluster}")
        self._remind_every_s = remind_every_s
        self._lock = threading.Lock()
        self._state: State = "up"
        #: The reports not explained yet: the incident or outage, or while "up",
        #: reports counted during a quiet time.
        self._outage: _Outage | None = None
        self._quiet_until = float("-inf")
        self._outages = 0
        self._export()

    def _labels(self) -> tuple[str, str]:
        return self.cluster, self.bootstrap

    def _reachable(self) -> _Series:
        return metrics.CLUSTER_REACHABLE.labels(*self._labels())

    def _outages_series(self) -> Counter:
        return metrics.CLUSTER_OUTAGES.labels(*self._labels())

    def _drop_series(self) -> None:
        metrics.CLUSTER_REACHABLE.remove(*self._labels())
        metrics.CLUSTER_OUTAGES.remove(*self._labels())

    def _export(self) -> None:
        self._reachable().set(0 if self._state == "down" else 1)
        self._outages_series().inc(0)  # exported as 0 from the start

    def rename(self, cluster: str) -> None:
        """Name the cluster `cluster` from now on, in lines and metrics (a client
        that knew only its bootstrap servers reported first)."""
        with self._lock:
            if cluster == self.cluster:
                return
            self._drop_series()
            self.cluster = cluster
            self._export()
            self._outages_series().inc(self._outages)

    @property
    def state(self) -> State:
        return self._state

    def trouble(self, reason: str) -> None:
        """A client could not talk to the cluster (a refused or dropped connection,
        a name that does not resolve, all brokers down, requests timing out)."""
        with self._lock:
            now = self._clock()
            outage = self._outage
            if outage is None or (self._state == "up" and now - outage.last_report > QUIET_S):
                # Reports that stopped long ago belong to no outage starting now.
                outage = self._outage = _Outage(now, time.time(), reason, reason, now)
            outage.last_reason = reason
            outage.last_report = now
            outage.reports += 1
            if self._state != "up" or now < self._quiet_until:
                return
            self._state = "suspect"
        log.debug("cluster %s: %s; probing it", self.cluster, reason)
        self._spawn(self.watch)

    def watch(self) -> None:
        """Probe until the cluster answers (the thread `trouble` starts)."""
        while (pause := self.check()) is not None:
            time.sleep(pause)

    def check(self) -> float | None:
        """Probe once and act on the answer: the seconds until the next probe, or
        None when the cluster answered, or no client is left to tell (`FORGET_AFTER_S`)."""
        failure = self._probe()
        now = self._clock()
        with self._lock:
            outage = self._outage
            if outage is None or self._state == "up":
                return None
            if failure is None:
                self._answered(outage, now)
                return None
            if self._state == "suspect":
                self._state = "down"
                outage.reports = 0
                outage.last_line = now
                self._outages += 1
                self._reachable().set(0)
                self._outages_series().inc()
                log.warning(
                    "cluster %s (%s) unreachable since %s: %s; clients keep retrying, "
                    "a reminder every %.0f s until it is back",
                    self.cluster, self.bootstrap, outage.since(), outage.first_reason,
                    self._remind_every_s,
                )  # fmt: skip
            elif now - outage.last_report >= FORGET_AFTER_S:
                self._forget(outage, now)
                return None
            elif now - outage.last_line >= self._remind_every_s:
                log.warning(
                    "cluster %s (%s) still unreachable, for %.0f s (since %s; %d client "
                    "reports since the last line): %s",
                    self.cluster, self.bootstrap, now - outage.started, outage.since(),
                    outage.reports, outage.last_reason,
                )  # fmt: skip
                outage.reports = 0
                outage.last_line = now
            return PROBE_EVERY_S

    def _forget(self, outage: _Outage, now: float) -> None:
        """Stop watching a cluster nobody here uses any more; its series go, since
        this process can no longer tell (a later client's trouble starts anew)."""
        log.info(
            "cluster %s (%s): no client of this process reported on it for %.0f s; no "
            "longer watching it (unreachable since %s)",
            self.cluster, self.bootstrap, now - outage.last_report, outage.since(),
        )  # fmt: skip
        self._drop_series()
        self._state = "up"
        self._outage = None

    def _answered(self, outage: _Outage, now: float) -> None:
        if self._state == "down":
            self._reachable().set(1)
            log.info(
                "cluster %s (%s) reachable again after an outage of %.1f s (unreachable "
                "since %s)",
                self.cluster, self.bootstrap, now - outage.started, outage.since(),
            )  # fmt: skip
        else:
            log.info(
                "cluster %s (%s) answers, though its clients reported %d connection "
                "failure(s) since %s, the last: %s",
                self.cluster, self.bootstrap, outage.reports, outage.since(), outage.last_reason,
            )  # fmt: skip
        self._state = "up"
        self._outage = None
        self._quiet_until = now + QUIET_S


def _in_daemon_thread(name: str) -> Callable[[Callable[[], None]], None]:
    def spawn(target: Callable[[], None]) -> None:
        threading.Thread(target=target, name=name, daemon=True).start()

    return spawn


def metadata_probe(settings: Mapping[str, object]) -> Probe:
    """A probe asking the cluster of `settings` (an admin client's) for metadata.

    Each probe builds its admin client afresh and drops it: an outage may last
    hours, and a long-lived client that is never polled would pile up its own
    failure reports. Its librdkafka logs go to this module's DEBUG level.
    """
    config = {
        **settings,
        "logger": logging.getLogger(f"{__name__}.probe"),
        # Try again soon after the cluster is back, not after a backoff grown long.
        "reconnect.backoff.max.ms": 1000,
    }

    def probe() -> str | None:
        admin = AdminClient(cast("dict[str, str | int | float | bool]", config))
        try:
            admin.list_topics(timeout=PROBE_TIMEOUT_S)
        except KafkaException as exc:
            return error_text(exc)
        return None

    return probe


class Clusters:
    """The `Reachability` of every cluster this process has clients of."""

    def __init__(self, spawn: Callable[[Callable[[], None]], None] | None = None) -> None:
        self._spawn = spawn
        self._lock = threading.Lock()
        self._trackers: dict[str, Reachability] = {}

    def of(self, config: Mapping[str, object], cluster: str | None = None) -> Reachability:
        """The `Reachability` of the cluster `config` (a client's settings) connects to.

        Clusters are told apart by their bootstrap servers; `cluster` (the alias in
        the configuration) names it in lines and metrics, else the servers do, until
        a client that knows the name is built.
        """
        bootstrap = str(config.get("bootstrap.servers", ""))
        key = ",".join(sorted(part.strip() for part in bootstrap.split(",")))
        with self._lock:
            tracker = self._trackers.get(key)
            if tracker is None:
                probe = metadata_probe(admin_settings(config))
                tracker = Reachability(cluster or bootstrap, bootstrap, probe, spawn=self._spawn)
                self._trackers[key] = tracker
            elif cluster is not None:
                tracker.rename(cluster)
            return tracker


#: This process's clusters (tests put a `Clusters` of their own in its place).
CLUSTERS = Clusters()
