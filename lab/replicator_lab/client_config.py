"""`<data dir>/clients.properties`: the replicator's configuration for a secured stack.

An MM2 properties file, written the way MM2 users write theirs: every cluster of
the stack with its bootstrap servers and security settings (`security.protocol`,
`sasl.mechanism`, `sasl.jaas.config`, a PEM truststore, a PEM keystore for
mTLS), the password only referred to (`${file:...}`), and the flows of
`include/config/local.properties` (the first cluster to each other one, and back
for failovers). `replicator run --config <data dir>/clients.properties` works as
it is: `stack up` grants the replicator's principal exactly the ACLs
`replicator acls plan` lists for this file, nothing more.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from replicator.acls.apply import apply_rules
from replicator.acls.plan import AclRule, replicator_rules
from replicator.config import load_config
from replicator_lab.security import DEMO_USER, REPLICATOR_USER

if TYPE_CHECKING:
    from replicator_lab.stack import LocalStack

CLIENTS_FILE = "clients.properties"
#: The same clusters and flows for the demo applications' principal.
DEMO_FILE = "demo.properties"
#: The topics the demo writes, as in include/config/local.properties.
DEMO_TOPICS = r"demo\\..*"
_ONE_REPLICA = (
    "replication.factor",
    "heartbeats.topic.replication.factor",
    "checkpoints.topic.replication.factor",
    "offset-syncs.topic.replication.factor",
    "status.topic.replication.factor",
)


def client_properties(stack: LocalStack, user: str = REPLICATOR_USER) -> str:
    """The text of the file for principal `user` (the stack must be secured)."""
    if stack.security is None:
        raise ValueError("only a secured stack writes a client configuration")
    names = [spec.name for spec in stack.clusters]
    lines = [
        f"# Written by `replicator stack up --security {stack.security.mode}` for principal "
        f"User:{user}.",
        "# The replicator's ACLs: `replicator acls plan --config <this file>`.",
        "",
        f"clusters = {', '.join(names)}",
        "config.providers = file",
        "config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider",
    ]
    for spec in stack.clusters:
        lines += ["", f"{spec.name}.bootstrap.servers = {spec.bootstrap}"]
        lines += [
            f"{spec.name}.{key} = {value}"
            for key, value in stack.security.mm2_settings(user).items()
        ]
    home, others = names[0], names[1:]
    lines.append("")
    for other in others:
        for source, target in ((home, other), (other, home)):
            lines += [
                f"{source}->{target}.enabled = true",
                f"{source}->{target}.topics = {DEMO_TOPICS}",
            ]
    lines += ["", *(f"{key} = 1" for key in _ONE_REPLICA)]
    return "\n".join(lines) + "\n"


def write_client_config(stack: LocalStack) -> Path:
    """Write `<data dir>/clients.properties` and grant its principal its ACLs; the
    same for the demo applications (`demo.properties`)."""
    path = stack.data_dir / CLIENTS_FILE
    path.write_text(client_properties(stack), encoding="utf-8")
    grant_replicator(stack, path)
    (stack.data_dir / DEMO_FILE).write_text(client_properties(stack, DEMO_USER), encoding="utf-8")
    apply_rules(demo_rules(stack), _super_users(stack))
    return path


def demo_rules(stack: LocalStack) -> list[AclRule]:
    """The demo principal produces and consumes the demo topics (and creates them)
    with groups named `demo...`, on every cluster from the start: the demo follows
    failovers, and `make run` has no step that grants WRITE at the switch."""
    grants = (
        ("TOPIC", "demo.", ("CREATE", "WRITE", "READ", "DESCRIBE"), "the demo topics"),
        ("GROUP", "demo", ("READ", "DESCRIBE"), "the demo consumer's group"),
    )
    rules = [
        AclRule(spec.name, f"User:{DEMO_USER}", kind, "PREFIXED", name, op, "demo", why)
        for spec in stack.clusters
        for kind, name, operations, why in grants
        for op in operations
    ]
    # After a failover the consumer reads the copies too (`primary.demo.orders` on dr):
    # records it had not reached when fenced are there, and nowhere else for it.
    return rules + [
        AclRule(
            spec.name,
            f"User:{DEMO_USER}",
            "TOPIC",
            "PREFIXED",
            f"{other.name}.demo.",
            op,
            "demo",
            f"the demo topics' copies from {other.name}",
        )
        for spec in stack.clusters
        for other in stack.clusters
        if other.name != spec.name
        for op in ("READ", "DESCRIBE")
    ]


def _super_users(stack: LocalStack) -> dict[str, dict[str, str]]:
    return {spec.name: stack.client_settings(spec.name) for spec in stack.clusters}


def grant_replicator(stack: LocalStack, config_file: Path) -> list[AclRule]:
    """Create the ACLs `config_file`'s replicator needs, as the broker's super user."""
    return apply_rules(replicator_rules(load_config(config_file)), _super_users(stack))
