"""The last ACL sync of each flow, in the status topic on its target (key `<flow>|acls`).

Whoever syncs (`replicator run`'s loop, the `replication_sync` DAG) publishes the
outcome where the engine publishes worker status, so the DR status page reads it
from the same place and needs no access to the host that synced. A failed round
keeps the last successful one's figures and adds its error: "last synced 2 h ago,
failing since" is what an operator needs to see. No client setting goes in.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, fields

from confluent_kafka import KafkaException

from replicator.acls.sync import AclSyncReport, sync_acls
from replicator.config.model import FlowConfig
from replicator.engine.internal_topics import STATUS_TOPIC, read_compacted
from replicator.engine.status import deliver_status, status_producer
from replicator.errors import ReplicatorError
from replicator.kafka.errors import error_text

log = logging.getLogger(__name__)

_FLUSH_S = 30.0


@dataclass(frozen=True)
class AclSyncStatus:
    """What the last rounds of ACL sync of `flow` did."""

    flow: str
    #: ACLs on the target that the source's synced ACLs make (after the last success).
    synced: int = 0
    #: How many the last successful round created.
    created: int = 0
    #: When the last successful round ended (None: none has succeeded yet).
    synced_ms: int | None = None
    #: When the last round ended, successful or not.
    attempted_ms: int | None = None
    #: The last round's error (None: it succeeded).
    error: str | None = None

    @property
    def key(self) -> str:
        return acl_status_key(self.flow)


def acl_status_key(flow: str) -> str:
    return f"{flow}|acls"


def succeeded(report: AclSyncReport) -> AclSyncStatus:
    now = int(time.time() * 1000)
    return AclSyncStatus(report.flow, report.synced, len(report.created), now, now, None)


def failed(previous: AclSyncStatus | None, flow: str, error: str) -> AclSyncStatus:
    """The last success's figures (if any) with this round's `error`."""
    now = int(time.time() * 1000)
    base = previous or AclSyncStatus(flow)
    return AclSyncStatus(flow, base.synced, base.created, base.synced_ms, now, error)


def publish(flow: FlowConfig, status: AclSyncStatus) -> None:
    """Write `status` to the status topic on `flow`'s target (created if missing)."""
    deliver_status(
        status_producer(flow),
        flow,
        "ACL sync status",
        status.key,
        asdict(status),
        timeout_s=_FLUSH_S,
    )


def sync_and_publish(flow: FlowConfig) -> AclSyncReport:
    """One round of ACL sync of `flow`, its outcome published; the round's error
    (published too, with the last success's figures) is raised."""
    try:
        report = sync_acls(flow)
    except (ReplicatorError, KafkaException) as exc:
        error = error_text(exc)
        try:
            publish(flow, failed(read_acl_status(flow), flow.name, error))
        except (ReplicatorError, KafkaException) as unpublished:
            log.warning("flow %s: ACL sync status not published: %s", flow.name, unpublished)
        raise
    publish(flow, succeeded(report))
    return report


def read_acl_status(
    flow: FlowConfig, values: dict[bytes, bytes] | None = None
) -> AclSyncStatus | None:
    """The last published ACL sync status of `flow` (None: no round published one).
    `values`: the status topic as the caller read it, else it is read here."""
    if values is None:
        values = read_compacted(flow.target, STATUS_TOPIC)
    value = values.get(acl_status_key(flow.name).encode())
    if value is None:
        return None
    data = json.loads(value)
    known = {f.name for f in fields(AclSyncStatus)}
    return AclSyncStatus(**{name: data[name] for name in known if name in data})
