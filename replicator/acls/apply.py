"""Creating planned ACLs on the clusters, as a principal allowed to (ALTER on CLUSTER).

Creating an ACL that exists is a no-op in Kafka, so `apply` can run again after
any change of the configuration: it adds what is missing and never removes
anything (an ACL someone else granted is not ours to take away).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from replicator.acls.bindings import any_acl_of, resource_type
from replicator.acls.plan import AclRule
from replicator.errors import ReplicatorError
from replicator.kafka.clients import AdminClient
from replicator.kafka.errors import kafka_error

_TIMEOUT_S = 30.0


def binding(rule: AclRule) -> AclBinding:
    return AclBinding(
        resource_type(rule.resource_type),
        rule.name,
        ResourcePatternType[rule.pattern_type],
        rule.principal,
        "*",
        AclOperation[rule.operation],
        AclPermissionType.ALLOW,
    )


def _key(acl: AclBinding) -> tuple[object, ...]:
    return (
        acl.restype,
        acl.name,
        acl.resource_pattern_type,
        acl.principal,
        acl.operation,
        acl.permission_type,
    )


def apply_rules(
    rules: Sequence[AclRule], admin_settings: Mapping[str, Mapping[str, object]]
) -> list[AclRule]:
    """Create every rule on its cluster (`admin_settings`: alias -> librdkafka
    settings of an admin client allowed to create ACLs); return the rules that
    were missing. A refusal names the cluster, the principal and the fix."""
    created = []
    for cluster in sorted({rule.cluster for rule in rules}):
        wanted = [rule for rule in rules if rule.cluster == cluster]
        admin = AdminClient(dict(admin_settings[cluster]), cluster=cluster)
        present = _existing(admin, cluster, {rule.principal for rule in wanted})
        missing = [rule for rule in wanted if _key(binding(rule)) not in present]
        if not missing:
            continue
        futures = admin.create_acls([binding(rule) for rule in missing], request_timeout=_TIMEOUT_S)
        for rule, future in zip(missing, futures.values(), strict=True):
            try:
                future.result()
            except KafkaException as exc:
                raise _refused(cluster, rule, exc) from exc
        created += missing
    return created


def _existing(admin: AdminClient, cluster: str, principals: set[str]) -> set[tuple[object, ...]]:
    found: set[tuple[object, ...]] = set()
    for principal in sorted(principals):
        query = any_acl_of(ResourceType.ANY, ResourcePatternType.ANY, principal)
        try:
            acls = admin.describe_acls(query, request_timeout=_TIMEOUT_S).result()
        except KafkaException as exc:
            raise _refused(cluster, None, exc) from exc
        found |= {_key(acl) for acl in acls}
    return found


def _refused(cluster: str, rule: AclRule | None, exc: KafkaException) -> ReplicatorError:
    error = kafka_error(exc)
    what = f"creating {rule.describe()} for {rule.principal}" if rule else "reading the ACLs"
    return ReplicatorError(
        f"cluster {cluster!r}: {what} failed: {error.str()}; run `replicator acls apply` with "
        "--admin-config naming a principal allowed to manage ACLs (ALTER and DESCRIBE on "
        "CLUSTER), on a cluster with an authorizer (authorizer.class.name)"
    )
