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

from confluent_kafka import KafkaException

from replicator import metrics
from replicator.acls.status import sync_and_publish
from replicator.config.model import FlowConfig
from replicator.errors import ReplicatorError
from replicator.flow_timer import FlowTimer

log = logging.getLogger(__name__)


class AclSyncLoop(FlowTimer[FlowConfig]):
    """Syncs the ACLs of those `flows` that enable it until `stop` is set, each flow
    every `sync.topic.acls.interval.seconds` while `running()` says it runs."""

    thread_name = "acl-sync"

    def enabled(self, flow: FlowConfig) -> bool:
        return flow.sync_topic_acls_enabled

    def interval(self, flow: FlowConfig) -> float:
        return flow.sync_topic_acls_interval_seconds

    def round(self, flow: FlowConfig) -> None:
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
