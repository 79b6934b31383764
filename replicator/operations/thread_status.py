"""The health of `replicator run`'s background threads, in the status topic on each
flow's target (key `<flow>|threads|<host>:<pid>`).

The runner's threads beside replication (flow states from the DR state store,
checkpoints, ACL sync, and this publisher) follow one rule (`replicator.flow_timer`);
whether each is alive, and failing since when and why, is published every 10 s
where the engine publishes worker status, so `replicator status` and the DR status
page read it from the same place. A runner that stops cleanly removes its record;
one killed leaves it, and its silence says so (`live`). Messages hold thread
names, states and the errors' texts (which never carry a secret: the store's
errors name it with the password hidden), never client settings.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from confluent_kafka import KafkaException

from replicator.config.model import FlowConfig
from replicator.engine.internal_topics import STATUS_TOPIC, read_compacted
from replicator.engine.status import STALE_AFTER_S, deliver_status, status_producer
from replicator.errors import ReplicatorError
from replicator.flow_timer import BackgroundLoop, ThreadHealth
from replicator.kafka.clients import Producer
from replicator.kafka.errors import error_text

#: Seconds between two publications (a record older than STALE_AFTER_S is silent).
PUBLISH_EVERY_S = 10.0
_FLUSH_S = 10.0
_REMOVE_S = 5.0

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunnerThreads:
    """The background threads of one `replicator run` process, for one of its flows."""

    flow: str
    runner: str  # host:pid
    threads: list[ThreadHealth] = field(default_factory=list)
    updated_ms: int = field(default_factory=lambda: int(time.time() * 1000))

    @property
    def key(self) -> str:
        return f"{self.flow}|threads|{self.runner}"

    @property
    def live(self) -> bool:
        """Published recently: a runner killed with `kill -9` leaves a silent record."""
        return self.updated_ms >= (time.time() - STALE_AFTER_S) * 1000

    @property
    def state(self) -> str:
        """ "ok", "failing" (a thread fails or died), or "silent" (not published lately)."""
        if not self.live:
            return "silent"
        return "ok" if all(t.state == "ok" for t in self.threads) else "failing"

    def summary(self) -> str:
        """One line: each thread's state, and why the failing or dead ones are."""
        parts = []
        for t in self.threads:
            since = f" since {_clock(t.since_ms)}" if t.since_ms else ""
            why = f" ({t.error})" if t.error and t.state != "ok" else ""
            restarts = f", restarted {t.restarts}x" if t.restarts else ""
            parts.append(f"{t.thread}={t.state}{since}{why}{restarts}")
        silent = "" if self.live else f"; SILENT since {_clock(self.updated_ms)} (runner gone?)"
        return "; ".join(parts) + silent


def _clock(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))


def this_runner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class ThreadStatusLoop(BackgroundLoop):
    """Publishes the health of `loops` (and its own) for each of `flows` every 10 s."""

    thread_name = "thread-status"
    work = "publishing the threads' health"
    tick_s = PUBLISH_EVERY_S
    while_failing = "replication goes on; the status page shows this runner as silent"

    def __init__(
        self, flows: Sequence[FlowConfig], stop: threading.Event, loops: Sequence[BackgroundLoop]
    ) -> None:
        super().__init__(stop)
        self._flows = list(flows)
        self._loops = [*(loop for loop in loops if loop.wanted()), self]
        self._runner = this_runner()
        self._producers: dict[str, Producer] = {}

    def tick(self) -> None:
        threads = [loop.health() for loop in self._loops]
        for flow in self._flows:
            if self._stop.is_set():  # a cluster away can hold each flow's publish
                return
            try:
                self._publish(flow, RunnerThreads(flow.name, self._runner, threads))
            except KafkaException as exc:  # a cluster away: said once by the loop's rule
                raise ReplicatorError(
                    f"the thread status of flow {flow.name} was not written to {STATUS_TOPIC} "
                    f"on {flow.target.alias!r}: {error_text(exc)}"
                ) from None

    def remove(self) -> None:
        """Delete this runner's records (a clean stop); one left behind goes silent."""
        for flow in self._flows:
            key = RunnerThreads(flow.name, self._runner).key
            producer = self._producers.get(flow.target.alias)
            if producer is None:
                continue  # nothing published there
            try:
                producer.produce(STATUS_TOPIC, key=key.encode(), value=None)
                left = producer.flush(_REMOVE_S)
            except (ReplicatorError, KafkaException) as exc:
                left, why = 1, str(exc)
            else:
                why = f"not delivered in {_REMOVE_S:.0f}s"
            if left:
                log.warning(
                    "flow %s: the thread status of this runner was not removed from %s (%s); "
                    "status shows it as silent",
                    flow.name, STATUS_TOPIC, why,
                )  # fmt: skip

    def _producer(self, flow: FlowConfig) -> Producer:
        producer = self._producers.get(flow.target.alias)
        if producer is None:
            producer = self._producers[flow.target.alias] = status_producer(flow)
        return producer

    def _publish(self, flow: FlowConfig, record: RunnerThreads) -> None:
        deliver_status(
            self._producer(flow),
            flow,
            "thread status",
            record.key,
            asdict(record),
            timeout_s=_FLUSH_S,
        )


def read_thread_status(
    flow: FlowConfig, values: dict[bytes, bytes] | None = None
) -> list[RunnerThreads]:
    """The published thread health of every runner of `flow` on its target: the live
    ones, or (if none is live) the last one that published, so a runner that died
    shows as silent rather than vanishing. `values`: the status topic as the caller
    read it (`replicator.engine.status.status_values`), else it is read here."""
    prefix = f"{flow.name}|threads|".encode()
    if values is None:
        values = read_compacted(flow.target, STATUS_TOPIC)
    records = [_record(value) for key, value in values.items() if key.startswith(prefix)]
    live = [r for r in records if r.live]
    if live:
        return sorted(live, key=lambda r: r.runner)
    return sorted(records, key=lambda r: r.updated_ms)[-1:]


def _record(value: bytes) -> RunnerThreads:
    data = json.loads(value)
    known = set(ThreadHealth.__dataclass_fields__)
    threads = [ThreadHealth(**{k: v for k, v in t.items() if k in known}) for t in data["threads"]]
    return RunnerThreads(data["flow"], data["runner"], threads, data["updated_ms"])
