"""What every check of the diagnosis shares: the topic under diagnosis (`Subject`),
the findings it adds up (`Findings`), and the finding for a request a cluster
refused or did not answer (`unverifiable`), which ends the diagnosis."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

from confluent_kafka import KafkaError, KafkaException

from replicator.config.model import FlowConfig
from replicator.config.policies import ReplicationPolicy
from replicator.engine.topic_sync import TopicSync
from replicator.kafka.errors import kafka_error

Status = Literal["ok", "warning", "problem"]
Verdict = Literal["replicated", "not replicated", "partially replicated", "unknown"]

#: A partition further behind than this many records is reported as lagging.
DEFAULT_LAG_THRESHOLD = 10_000
#: How long a cluster may take to answer one request of a check.
TIMEOUT_S = 30.0
_SEVERITY: tuple[Status, ...] = ("problem", "warning", "ok")
_AUTH_ERRORS = frozenset(
    {
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    }
)
_AUTHN_ERRORS = frozenset({KafkaError.SASL_AUTHENTICATION_FAILED, KafkaError._AUTHENTICATION})


@dataclass(frozen=True)
class Finding:
    """The outcome of one check; `fix` says what to do when it is not ok."""

    check: str
    status: Status
    detail: str
    fix: str | None = None
    partition: int | None = None


@dataclass
class Diagnosis:
    """Every finding about one topic of one flow, and the verdict they add up to."""

    flow: str
    topic: str
    remote_topic: str
    verdict: Verdict
    findings: list[Finding] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    def headline(self) -> str:
        return f"flow {self.flow}: {self.topic} -> {self.remote_topic}: {self.verdict}"

    def by_severity(self) -> list[Finding]:
        """The findings, problems first, so the cause is on top."""
        return sorted(self.findings, key=lambda f: _SEVERITY.index(f.status))

    def render(self) -> str:
        """The headline and one line per finding, for a log (`replicator diagnose` prints
        the findings as a table)."""
        lines = [self.headline()]
        for finding in self.by_severity():
            fix = f"  Fix: {finding.fix}" if finding.fix else ""
            lines.append(f"  {finding.status.upper():<8} {finding.check:<18} {finding.detail}{fix}")
        return "\n".join(lines)


@dataclass(frozen=True)
class Subject:
    """The topic under diagnosis (its name on the source), with the engine's own rules
    for it: the flow's replication policy and its TopicSync (whose admin clients the
    checks share)."""

    flow: FlowConfig
    policy: ReplicationPolicy
    topic: str
    remote: str
    lag_threshold: int
    sync: TopicSync

    @classmethod
    def of(cls, flow: FlowConfig, topic: str, lag_threshold: int) -> Subject:
        policy = flow.policy
        remote = policy.format_remote_topic(flow.source.alias, topic)
        return cls(flow, policy, topic, remote, lag_threshold, TopicSync(flow))


class Findings(list[Finding]):
    """The findings so far, in the order the checks made them."""

    def add(
        self,
        check: str,
        status: Status,
        detail: str,
        fix: str | None = None,
        partition: int | None = None,
    ) -> None:
        self.append(Finding(check, status, detail, fix, partition))

    def problems(self) -> bool:
        return any(f.status == "problem" for f in self)


class Unverifiable(Exception):
    """A check could not be made (not allowed, or a cluster did not answer)."""

    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.detail)
        self.finding = finding


def unverifiable(
    exc: KafkaException, alias: str, action: str, permission: str, resource: str
) -> Unverifiable:
    """The finding for a cluster that refused (naming the permission needed on
    `resource`) or did not answer a request (`exc`)."""
    error = kafka_error(exc)
    what = f"{action} on {alias!r}: {error.str()}"
    if error.code() in _AUTH_ERRORS:
        return Unverifiable(
            Finding(
                "authorization",
                "problem",
                f"not allowed to {what}",
                f"grant the principal of the {alias!r} client settings {permission} on "
                f"{resource} on {alias!r}",
            )
        )
    if error.code() in _AUTHN_ERRORS:
        return Unverifiable(
            Finding(
                "authorization",
                "problem",
                f"cannot authenticate to {alias!r}: {error.str()}",
                f"check the credentials (sasl.*, ssl.*) of cluster {alias!r} in the configuration",
            )
        )
    return Unverifiable(
        Finding(
            "cluster",
            "problem",
            f"cannot {what}",
            f"check that {alias!r} is up and reachable at {alias}.bootstrap.servers, then "
            "diagnose again",
        )
    )


def n_partitions(count: int) -> str:
    return f"{count} partition{'' if count == 1 else 's'}"
