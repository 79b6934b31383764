"""ACL sync on a schedule while `replicator run` runs (`sync.topic.acls.interval.seconds`),
as MM2's source connector does it on its own timer.

One loop per runner process, in a thread of its own, like the checkpoint loop:
reading and creating ACLs must never stall replication. A flow the state store
has stopped is not synced (a failover owns it). A round that fails is logged,
counted and published (the status page shows it), and the next round tries again:
the ACLs already on the target stay.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from confluent_kafka import KafkaException

from replicator import metrics
from replicator.acls.status import sync_and_publish
from replicator.config.model import FlowConfig
from replicator.errors import ReplicatorError

log = logging.getLogger(__name__)

#: The first round comes this soon after start at the latest (the interval may be long).
_FIRST_ROUND_S = 10.0
_TICK_S = 1.0


class AclSyncLoop:
    """Syncs the ACLs of those `flows` that enable it until `stop` is set, each flow
    every `sync.topic.acls.interval.seconds` while `running()` says it runs."""

    def __init__(
        self,
        flows: list[FlowConfig],
        stop: threading.Event,
        running: Callable[[], dict[str, bool]],
    ) -> None:
        self._flows = [flow for flow in flows if flow.sync_topic_acls_enabled]
        self._stop = stop
        self._running = running
        self._thread = threading.Thread(target=self._loop, name="acl-sync", daemon=True)

    def start(self) -> None:
        if self._flows:
            self._thread.start()

    def join(self, timeout: float) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _loop(self) -> None:
        start = time.monotonic()
        due = {
            flow.name: start + min(_FIRST_ROUND_S, flow.sync_topic_acls_interval_seconds)
            for flow in self._flows
        }
        while not self._stop.wait(_TICK_S):
            wanted = self._running()
            for flow in self._flows:
                now = time.monotonic()
                if now < due[flow.name] or not wanted.get(flow.name, True):
                    continue
                due[flow.name] = now + flow.sync_topic_acls_interval_seconds
                self._round(flow)

    def _round(self, flow: FlowConfig) -> None:
        try:
            sync_and_publish(flow)
        except (ReplicatorError, KafkaException) as exc:
            metrics.ERRORS.labels(flow.name, "acl_sync").inc()
            log.error(
                "flow %s: ACLs not synced this round (those on %r stay): %s; next try in %gs",
                flow.name,
                flow.target.alias,
                exc,
                flow.sync_topic_acls_interval_seconds,
            )
