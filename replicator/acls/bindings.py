"""ACL bindings as plain values, and the three admin calls on them (describe, create,
delete) with Kafka's refusals turned into errors that name the principal, the
missing operation, the resource and the fix.

ACL sync and the failover's `grant_write` step both read and write ACLs on a
cluster as the replicator's principal; a report, a step result (saved in the
state store) and a log line need them as strings, not as confluent-kafka objects.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from replicator.acls.principal import missing_acl
from replicator.config.model import ClusterConfig
from replicator.errors import ReplicatorError
from replicator.kafka.clients import admin_for
from replicator.kafka.errors import kafka_error

_TIMEOUT_S = 30.0


def resource_type(name: str) -> ResourceType:
    """The resource type Kafka names `name`; confluent-kafka calls CLUSTER `BROKER`."""
    return ResourceType.BROKER if name == "CLUSTER" else ResourceType[name]


def resource_type_name(kind: ResourceType | str | int) -> str:
    """An ACL's resource type as the CLI names it (Kafka's BROKER is the CLUSTER)."""
    return "CLUSTER" if kind == ResourceType.BROKER else _name(kind)


def _name(value: Enum | str | int) -> str:
    """An AclBinding field's name: confluent-kafka makes each an enum member when the
    binding is built, though its type stubs also admit the str or int it was given."""
    return value.name if isinstance(value, Enum) else str(value)


def any_acl_of(
    kind: ResourceType, pattern: ResourcePatternType, principal: str | None = None
) -> AclBindingFilter:
    """A filter matching every ACL on resources of `kind` and `pattern` (of `principal`
    only, when given): any name, host, operation and permission. confluent-kafka takes
    None for "any" name, principal or host, which its type stubs do not admit."""
    return AclBindingFilter(
        kind,
        None,  # type: ignore[arg-type]
        pattern,
        principal,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        AclOperation.ANY,
        AclPermissionType.ANY,
    )


@dataclass(frozen=True, order=True)
class Binding:
    """One ACL: `principal` from `host` is ALLOWed or DENYed `operation` on a resource."""

    resource_type: str  # TOPIC, GROUP, CLUSTER, ...
    pattern_type: str  # LITERAL or PREFIXED
    name: str
    principal: str
    host: str
    operation: str  # READ, WRITE, ALL, DESCRIBE, ...
    permission: str  # ALLOW or DENY

    @classmethod
    def of(cls, acl: AclBinding) -> Binding:
        return cls(
            resource_type_name(acl.restype),
            _name(acl.resource_pattern_type),
            acl.name,
            acl.principal,
            acl.host,
            _name(acl.operation),
            _name(acl.permission_type),
        )

    @classmethod
    def from_dict(cls, data: dict[str, str]) -> Binding:
        """From `asdict(binding)`, as a step result keeps it."""
        return cls(**data)

    def acl(self) -> AclBinding:
        return AclBinding(
            resource_type(self.resource_type),
            self.name,
            ResourcePatternType[self.pattern_type],
            self.principal,
            self.host,
            AclOperation[self.operation],
            AclPermissionType[self.permission],
        )

    def describe(self) -> str:
        """`User:a ALLOW READ on TOPIC primary.orders (literal)`, as lines name it."""
        host = "" if self.host == "*" else f" from {self.host}"
        return (
            f"{self.principal}{host} {self.permission} {self.operation} on {self.resource_type} "
            f"{self.name} ({self.pattern_type.lower()})"
        )


class SecurityDisabled(ReplicatorError):
    """The cluster has no authorizer (`authorizer.class.name`): it has no ACLs at all."""


def topic_acls(cluster: ClusterConfig, needs: str, *, pattern_type: str = "ANY") -> list[Binding]:
    """Every topic ACL of `cluster` (of `pattern_type`: ANY, LITERAL or PREFIXED), read by
    a caller that `needs` that operation on the CLUSTER resource (DESCRIBE to read;
    ALTER to change them next, which implies it). A describe the principal may not do
    answers as if there were no ACLs (librdkafka drops the response's error code), so
    the principal's authorized operations on the cluster are checked first."""
    require(cluster, needs, "reading its topic ACLs")
    query = any_acl_of(ResourceType.TOPIC, ResourcePatternType[pattern_type])
    admin = admin_for(cluster)
    try:
        found = admin.describe_acls(query, request_timeout=_TIMEOUT_S).result()
    except KafkaException as exc:
        raise _refused(cluster, needs, "reading its topic ACLs", exc) from exc
    return sorted(Binding.of(acl) for acl in found)


def require(cluster: ClusterConfig, operation: str, doing: str) -> None:
    """ReplicatorError naming the principal, `operation` on CLUSTER and the fix, unless
    the principal may do it on `cluster` (a cluster without an authorizer allows all)."""
    admin = admin_for(cluster)
    try:
        described = admin.describe_cluster(
            include_authorized_operations=True, request_timeout=_TIMEOUT_S
        ).result()
    except KafkaException as exc:
        raise _refused(cluster, operation, doing, exc) from exc
    allowed = {op.name for op in described.authorized_operations or []}
    if operation not in allowed:
        raise ReplicatorError(
            f"{doing} on cluster {cluster.alias!r} is not allowed: "
            + missing_acl(cluster, operation, "CLUSTER")
        )


def create(cluster: ClusterConfig, bindings: Iterable[Binding]) -> None:
    """Create `bindings` on `cluster` (creating one that exists is a no-op in Kafka).
    Needs ALTER on its CLUSTER resource."""
    wanted = list(bindings)
    if not wanted:
        return
    admin = admin_for(cluster)  # held until the futures are done: its end would fail them
    futures = admin.create_acls([b.acl() for b in wanted], request_timeout=_TIMEOUT_S)
    for binding, future in zip(wanted, futures.values(), strict=True):
        try:
            future.result()
        except KafkaException as exc:
            raise _refused(cluster, "ALTER", f"creating {binding.describe()}", exc) from exc


def delete(cluster: ClusterConfig, bindings: Iterable[Binding]) -> list[Binding]:
    """Delete exactly `bindings` from `cluster` (each filter is the binding itself, so
    nothing else matches); the ones that existed. Needs ALTER on its CLUSTER resource."""
    wanted = list(bindings)
    if not wanted:
        return []
    filters = [
        AclBindingFilter(
            resource_type(b.resource_type),
            b.name,
            ResourcePatternType[b.pattern_type],
            b.principal,
            b.host,
            AclOperation[b.operation],
            AclPermissionType[b.permission],
        )
        for b in wanted
    ]
    admin = admin_for(cluster)  # held until the futures are done: its end would fail them
    futures = admin.delete_acls(filters, request_timeout=_TIMEOUT_S)
    deleted: list[Binding] = []
    for binding, future in zip(wanted, futures.values(), strict=True):
        try:
            deleted += [Binding.of(acl) for acl in future.result()]
        except KafkaException as exc:
            raise _refused(cluster, "ALTER", f"deleting {binding.describe()}", exc) from exc
    return sorted(set(deleted))


def _refused(
    cluster: ClusterConfig, operation: str, doing: str, exc: KafkaException
) -> ReplicatorError:
    """The error of an ACL request `cluster` refused; `operation` on CLUSTER is what it needs."""
    error = kafka_error(exc)
    if error.code() == KafkaError.SECURITY_DISABLED:
        return SecurityDisabled(
            f"cluster {cluster.alias!r} ({cluster.bootstrap_servers}) has no authorizer, so "
            f"{doing} is not possible: {error.str()}; configure authorizer.class.name on its "
            "brokers, or turn off what needs ACLs there (sync.topic.acls.enabled, grant_write)"
        )
    if error.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED:  # its text is the request's
        return ReplicatorError(
            f"{doing} on cluster {cluster.alias!r} was refused ({error.name()}): "
            + missing_acl(cluster, operation, "CLUSTER")
        )
    return ReplicatorError(
        f"{doing} on cluster {cluster.alias!r} ({cluster.bootstrap_servers}) failed: {error.str()}"
    )
