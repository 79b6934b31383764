"""ACL sync (`sync.topic.acls.enabled`): the source topics' ACLs, made safe, on their copies.

MirrorMaker 2's rules (MirrorSourceConnector.syncTopicAcls, shouldReplicateAcl,
targetAclBinding), which consumers that fail over rely on:

- only ACLs on TOPIC resources with a LITERAL pattern, naming a topic the flow
  replicates (its topic filter, no internal topics, no cycles; heartbeats always);
- never ALLOW WRITE: only the replicator writes the copies;
- ALLOW ALL becomes ALLOW READ;
- written on the remote topic name (the flow's replication policy), LITERAL, with
  the same principal and host;
- ACLs removed at the source stay on the target (MM2 never deletes either).

Two differences, both to keep the target safe (README, "ACL sync"):

- DENY entries are not synced (MM2 copies them): a DENY wins over every ALLOW, so
  a source `DENY WRITE` for `User:*` (a read-only topic) would refuse the
  replicator its own writes of the copy and stop replication;
- the LITERAL wildcard `*` (every topic) is not synced (MM2 renames it to
  `primary.*`, a topic nobody has, or under the identity policy grants it on
  every topic of the target, including ones the flow does not replicate).

PREFIXED ACLs are not synced, as in MM2: a prefix is not a topic the filter can
decide on. Each round reads the target's topic ACLs first and creates only the
missing ones, so nothing is created twice and the report says what was new.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from replicator.acls import bindings
from replicator.acls.bindings import Binding
from replicator.config.model import FlowConfig
from replicator.engine.topic_sync import why_not_replicated

log = logging.getLogger(__name__)

#: Why a source ACL is not synced, by rule (the report counts them by these).
NOT_TOPIC = "not a topic ACL"
PREFIXED = "not a LITERAL pattern (MM2 syncs literal topic ACLs only)"
DENY = "DENY (never synced: on the target it could refuse the replicator its writes)"
WRITE = "ALLOW WRITE (never synced: only the replicator writes the copies)"
WILDCARD = "the wildcard * (every topic), not a topic of the flow"
NOT_REPLICATED = "on a topic the flow does not replicate"


def why_not_synced(acl: Binding, replicated: Callable[[str], bool]) -> str | None:
    """None if the source ACL `acl` is synced, else the rule that leaves it out;
    `replicated(topic)`: whether the flow replicates that source topic."""
    rules = (
        (NOT_TOPIC, lambda: acl.resource_type != "TOPIC"),
        (PREFIXED, lambda: acl.pattern_type != "LITERAL"),
        (DENY, lambda: acl.permission != "ALLOW"),
        (WRITE, lambda: acl.operation == "WRITE"),
        (WILDCARD, lambda: acl.name == "*"),
        (NOT_REPLICATED, lambda: not replicated(acl.name)),
    )
    return next((reason for reason, applies in rules if applies()), None)


def target_binding(acl: Binding, flow: FlowConfig) -> Binding:
    """The ACL on the target for a synced source ACL: on the remote topic, ALL as READ."""
    return replace(
        acl,
        name=flow.policy.format_remote_topic(flow.source.alias, acl.name),
        pattern_type="LITERAL",
        operation="READ" if acl.operation == "ALL" else acl.operation,
    )


def planned_bindings(
    flow: FlowConfig, source_acls: list[Binding]
) -> tuple[list[Binding], dict[str, int]]:
    """The target ACLs `source_acls` make for `flow` (each once), and how many source
    ACLs each rule left out."""

    def replicated(topic: str) -> bool:
        return why_not_replicated(flow, topic) is None

    wanted: set[Binding] = set()
    left_out: Counter[str] = Counter()
    for acl in source_acls:
        reason = why_not_synced(acl, replicated)
        if reason is None:
            wanted.add(target_binding(acl, flow))
        else:
            left_out[reason] += 1
    return sorted(wanted), dict(left_out)


@dataclass
class AclSyncReport:
    """One round of ACL sync of one flow."""

    flow: str
    #: Topic ACLs read on the source.
    source_acls: int = 0
    #: The target ACLs the source's synced ACLs make: all present after the round.
    synced: int = 0
    #: Those created by this round (the others were there already).
    created: list[str] = field(default_factory=list)
    #: Source ACLs left out, by rule.
    left_out: dict[str, int] = field(default_factory=dict)


def sync_acls(flow: FlowConfig) -> AclSyncReport:
    """One round for `flow`: read the source's topic ACLs, create the missing ones on
    the target. Raises ReplicatorError naming what is missing (DESCRIBE on the source
    CLUSTER, ALTER on the target CLUSTER), or that the target has no authorizer (a
    source without one has no ACLs: nothing to sync)."""
    report = AclSyncReport(flow.name)
    source_acls = bindings.topic_acls(flow.source, "DESCRIBE")
    wanted, report.left_out = planned_bindings(flow, source_acls)
    report.source_acls, report.synced = len(source_acls), len(wanted)
    present = set(bindings.topic_acls(flow.target, "ALTER", pattern_type="LITERAL"))
    missing = [acl for acl in wanted if acl not in present]
    bindings.create(flow.target, missing)
    report.created = [acl.describe() for acl in missing]
    log.info(
        "flow %s: ACL sync: %d ACLs on %r (%d created), from %d topic ACLs on %r; left out: %s",
        flow.name, report.synced, flow.target.alias, len(missing), report.source_acls,
        flow.source.alias, report.left_out or "none",
    )  # fmt: skip
    return report
