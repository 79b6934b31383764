"""Step 3 of `replicator init`: the least-privilege ACL plan (`replicator.acls.plan`)
checked rule by rule against what each cluster's authorizer says the configuration's
principal may do (Kafka's "authorized operations" of a described cluster, topic or
group), with the configuration's own clients: reported, never assumed.

A rule can be checked only on a resource that exists: a topic rule on the existing
topics it covers (prefixed: those with the prefix), a group rule on a probe group of
its name (a group need not exist to be described). Kafka has no way to ask about a
transactional id, nor about topics not created yet: those rules are reported as
unchecked, with why.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AclOperation

from replicator.acls.plan import AclRule, replicator_rules
from replicator.acls.principal import principal_of
from replicator.config.model import ClusterConfig, ReplicatorConfig
from replicator.errors import ReplicatorError
from replicator.init.report import InitReport
from replicator.kafka.clients import admin_for
from replicator.kafka.coordinator import SETTLING, UNEXPIRED_S, NotSettled, until_settled
from replicator.kafka.errors import error_code, error_text

STEP = "permissions"
_TIMEOUT_S = 30.0
#: At most this many existing topics are asked about for one topic rule.
_TOPICS_PER_RULE = 10
_PROBE = "init-probe"
_REFUSED = frozenset({KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED})
#: A group coordinator that is loading or moving (a cluster that just started creates
#: __consumer_offsets first) answers with these, or not in time, for a while.
_SETTLING = SETTLING | {KafkaError._TIMED_OUT}
_GROUP_TIMEOUT_S = 10.0
_SETTLE_S = 90.0

#: What a described resource allows: its operations, or None when the broker did not say.
Allowed = frozenset[AclOperation] | None


def check_permissions(
    config: ReplicatorConfig, reachable: Mapping[str, ClusterConfig], report: InitReport
) -> None:
    """Every rule of the replicator's plan on the clusters that answered."""
    by_cluster: dict[str, list[AclRule]] = defaultdict(list)
    for rule in replicator_rules(config):
        by_cluster[rule.cluster].append(rule)
    for alias, rules in sorted(by_cluster.items()):
        if alias in reachable:
            _check_cluster(reachable[alias], rules, report)


def _check_cluster(cluster: ClusterConfig, rules: list[AclRule], report: InitReport) -> None:
    alias = cluster.alias
    admin = admin_for(cluster)
    topics = sorted(
        t for t in admin.list_topics(timeout=_TIMEOUT_S).topics if not t.startswith("__")
    )
    covered = {
        rule: _covered_topics(rule, topics) for rule in rules if rule.resource_type == "TOPIC"
    }
    described_topics = _describe_topics(cluster, {t for names in covered.values() for t in names})
    groups = {_probe_group(r) for r in rules if r.resource_type == "GROUP"}
    described_groups = _describe_groups(cluster, groups)
    cluster_ops = _describe_cluster(cluster)
    granted = missing = 0
    # Rules that cannot be asked about, by resource: one line each, naming its operations.
    unchecked: dict[tuple[str, str], list[str]] = defaultdict(list)
    for rule in rules:
        resource = rule.describe().split(" on ", 1)[1]  # `TOPIC orders (prefixed)`
        if rule.resource_type == "CLUSTER":
            answers = {"the cluster": cluster_ops}
        elif rule.resource_type == "TOPIC":
            if not covered[rule]:
                why = "no topic it covers exists yet"
                unchecked[(resource, why)].append(rule.operation)
                continue
            answers = {f"topic {t}": described_topics[t] for t in covered[rule]}
        elif rule.resource_type == "GROUP":
            probe = _probe_group(rule)
            answers = {f"group {probe}": described_groups[probe]}
        else:
            why = f"Kafka cannot be asked about a {rule.resource_type}"
            unchecked[(resource, why)].append(rule.operation)
            continue
        lacking = [what for what, allowed in answers.items() if not _allows(allowed, rule)]
        if lacking:
            missing += 1
            report.add(
                STEP, alias, "missing",
                f"{rule.principal} lacks {rule.describe()} (asked on {', '.join(lacking)}) - "
                f"needed to {rule.why}; grant it with `replicator acls apply --config ...`",
            )  # fmt: skip
        else:
            granted += 1
    for (resource, why), operations in sorted(unchecked.items()):
        report.add(
            STEP, alias, "unchecked",
            f"{', '.join(sorted(operations))} on {resource}: {why} (a run that lacks one "
            "stops naming it)",
        )  # fmt: skip
    if granted:
        checkable = granted + missing
        report.add(
            STEP, alias, "ok",
            f"{principal_of(cluster)} holds {granted} of the {checkable} ACLs of the plan that "
            f"could be checked on this cluster ({len(rules)} in all: `replicator acls plan`)",
        )  # fmt: skip


def _allows(allowed: Allowed, rule: AclRule) -> bool:
    return allowed is None or AclOperation[rule.operation] in allowed


def _covered_topics(rule: AclRule, topics: Iterable[str]) -> list[str]:
    if rule.pattern_type == "PREFIXED":
        matching = [t for t in topics if t.startswith(rule.name)]
    elif rule.name == "*":
        matching = list(topics)
    else:
        matching = [t for t in topics if t == rule.name]
    return matching[:_TOPICS_PER_RULE]


def _probe_group(rule: AclRule) -> str:
    if rule.pattern_type == "PREFIXED":
        return f"{rule.name}{_PROBE}"
    return f"replicator-{_PROBE}" if rule.name == "*" else rule.name


def _describe_cluster(cluster: ClusterConfig) -> Allowed:
    admin = admin_for(cluster)  # held until answered: a collected client drops its requests
    future = admin.describe_cluster(include_authorized_operations=True, request_timeout=_TIMEOUT_S)
    described = future.result(timeout=_TIMEOUT_S + 5)
    return _operations(described.authorized_operations)


def _describe_topics(cluster: ClusterConfig, names: set[str]) -> dict[str, Allowed]:
    if not names:
        return {}
    admin = admin_for(cluster)  # held until answered
    futures = admin.describe_topics(
        TopicCollection(sorted(names)), include_authorized_operations=True,
        request_timeout=_TIMEOUT_S,
    )  # fmt: skip
    return {name: _answer(future) for name, future in futures.items()}


def _describe_groups(cluster: ClusterConfig, names: set[str]) -> dict[str, Allowed]:
    if not names:
        return {}
    try:
        return until_settled(_SETTLE_S, _describe_groups_once, cluster, sorted(names))
    except NotSettled as exc:
        raise ReplicatorError(
            f"cluster {cluster.alias!r}: its group coordinator did not answer for "
            f"{_SETTLE_S:.0f} s ({exc}): is the cluster still starting? Run `replicator init` "
            "again in a minute"
        ) from None


def _describe_groups_once(cluster: ClusterConfig, names: list[str]) -> dict[str, Allowed]:
    admin = admin_for(cluster)  # held until answered
    futures = admin.describe_consumer_groups(
        names,
        include_authorized_operations=True,
        request_timeout=UNEXPIRED_S,  # never shorter than the wait: see there
    )
    answers = {}
    for name, future in futures.items():
        try:
            answers[name] = _answer(future, _GROUP_TIMEOUT_S)
        except FutureTimeout:
            raise NotSettled(f"no answer about group {name}") from None
        except KafkaException as exc:
            if error_code(exc) in _SETTLING:
                raise NotSettled(error_text(exc)) from exc
            raise
    return answers


def _answer(future: Future, timeout_s: float = _TIMEOUT_S + 5) -> Allowed:
    """What the described resource allows; an authorization refusal allows nothing."""
    try:
        described = future.result(timeout=timeout_s)
    except KafkaException as exc:
        if error_code(exc) in _REFUSED:
            return frozenset()
        raise
    return _operations(described.authorized_operations)


def _operations(operations: Iterable[AclOperation] | None) -> Allowed:
    return None if operations is None else frozenset(operations)
