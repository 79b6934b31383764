"""The WRITE a failover's `grant_write` step gives applications' producers on the DR side.

MM2's ACL sync never copies WRITE (only the replicator writes the copies), so
after a failover the applications' producers, which now write their own topics
on the DR cluster, are refused with TOPIC_AUTHORIZATION_FAILED unless someone
granted them WRITE there beforehand: the 3 a.m. discovery. The failover's
opt-in `grant_write` step grants exactly this, and the failback removes it.

Whose and what come from the configuration (`replicator.config.applications`):
each application's `producer.principals` get WRITE and DESCRIBE (the producer's
metadata requests) on its `producer.topics` (default: the flow's `topics`), as
literal names or prefixes, under the names the producers use: their own, which
a failover does not change (the copies `primary.orders` are the replicator's).
"""

from __future__ import annotations

from replicator.acls.bindings import Binding
from replicator.acls.plan import topic_patterns
from replicator.config.applications import APPLICATIONS_PREFIX, PRINCIPALS, TOPICS
from replicator.config.model import FlowConfig, NameFilter, ReplicatorConfig
from replicator.errors import ConfigError

#: What a producer needs on its topics: WRITE, and DESCRIBE for its metadata requests.
PRODUCER_OPERATIONS = ("WRITE", "DESCRIBE")


def write_bindings(
    config: ReplicatorConfig, flow: FlowConfig, applications: list[str]
) -> dict[str, list[Binding]]:
    """Per application, the ACLs its producers need on `flow`'s target to write
    after a failover over `flow`. ConfigError naming the setting when an application
    has no producer principals, or its topics would be every topic (`*`)."""
    granted = {}
    for name in applications:
        app = config.applications.get(name)
        key = f"{APPLICATIONS_PREFIX}{name}"
        if app is None or not app.producer_principals:
            raise ConfigError(
                f"{key}.{PRINCIPALS} is not set: grant_write does not know whose producers "
                f"to give WRITE on {flow.target.alias!r}; set it (e.g. {key}.{PRINCIPALS} = "
                "User:orders-app) or run the failover without grant_write"
            )
        where = f"{key}.{TOPICS}" if app.producer_topics is not None else f"{flow.name}.topics"
        topics = NameFilter(app.producer_topics or flow.topics.include)
        resources = topic_patterns(topics, where)
        if any(r.name == "*" for r in resources):
            raise ConfigError(
                f"{where} covers every topic, and grant_write would let {name}'s producers "
                f"write every topic of {flow.target.alias!r}, the replicator's copies included; "
                f"name the topics they write in {key}.{TOPICS}"
            )
        granted[name] = sorted(
            Binding("TOPIC", r.pattern_type, r.name, principal, "*", operation, "ALLOW")
            for principal in app.producer_principals
            for r in resources
            for operation in PRODUCER_OPERATIONS
        )
    return granted
