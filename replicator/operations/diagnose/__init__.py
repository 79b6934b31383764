"""Why a topic is not replicated, or not fully: the checks behind `replicator diagnose`.

An operator asking "why is X not on the DR cluster" needs every cause at once and
the fix for each, not the first error. So the diagnosis runs every check that
applies and reports the ones that passed too, so the operator sees what was ruled
out. Each check asks the engine's own rules (the replication policy, the topics
filter, TopicSync, the status topic, TailReader), so the diagnosis cannot
disagree with what the engine does.
"""

from __future__ import annotations

import difflib
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Literal

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient, ConfigResource, TopicDescription

from replicator.config.model import FlowConfig
from replicator.engine.policies import ReplicationPolicy, load_policy
from replicator.engine.status import STATUS_TOPIC, PartitionStatus, WorkerStatus, read_status
from replicator.engine.tail import TailReader
from replicator.engine.topic_sync import HEADER_HEADROOM_BYTES, MAX_MESSAGE_BYTES, TopicSync
from replicator.errors import ReplicatorError
from replicator.kafka.clients import Consumer
from replicator.kafka.watermarks import watermarks

Status = Literal["ok", "warning", "problem"]
Verdict = Literal["replicated", "not replicated", "partially replicated", "unknown"]

#: A partition further behind than this many records is reported as lagging.
DEFAULT_LAG_THRESHOLD = 10_000
#: Workers publish their status every 10 s; one silent for longer than this is gone.
_WORKER_SILENT_S = 60.0
_TIMEOUT_S = 30.0
_SEVERITY: tuple[Status, ...] = ("problem", "warning", "ok")
#: What the replicator does on a source topic, by the permission it needs for it.
_NEEDED_ON_SOURCE = {
    AclOperation.READ: "consume",
    AclOperation.DESCRIBE: "read its metadata and offsets",
    AclOperation.DESCRIBE_CONFIGS: "read its configs",
}
_AUTH_ERRORS = frozenset(
    {
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    }
)
_AUTHN_ERRORS = frozenset({KafkaError.SASL_AUTHENTICATION_FAILED, KafkaError._AUTHENTICATION})
#: A stopped partition's status error is "<problem>. The partition is stopped (...). <fix>".
_STOPPED_ERROR = re.compile(
    r"(?P<problem>.*?The partition is stopped[^(]*\([^)]*\)\.)\s*(?P<fix>.+)"
)


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

    def render(self) -> str:
        """One line per finding, problems first, so the cause is on top."""
        lines = [f"flow {self.flow}: {self.topic} -> {self.remote_topic}: {self.verdict}"]
        for finding in sorted(self.findings, key=lambda f: _SEVERITY.index(f.status)):
            fix = f"  Fix: {finding.fix}" if finding.fix else ""
            lines.append(f"  {finding.status.upper():<8} {finding.check:<18} {finding.detail}{fix}")
        return "\n".join(lines)


def diagnose(flow: FlowConfig, topic: str, lag_threshold: int = DEFAULT_LAG_THRESHOLD) -> Diagnosis:
    """Why `topic` (its name on the source cluster) is or is not replicated by `flow`."""
    policy = load_policy(
        flow.replication_policy_class, flow.replication_policy_separator, flow.source.alias
    )
    checks = _Checks(flow, policy, topic, lag_threshold)
    try:
        verdict = checks.run()
    except _Unverifiable as exc:
        checks.findings.append(exc.finding)
        verdict = "unknown"
    return Diagnosis(flow.name, topic, checks.remote, verdict, checks.findings)


class _Unverifiable(Exception):
    """A check could not be made (not allowed, or a cluster did not answer)."""

    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.detail)
        self.finding = finding


class _Checks:
    """The checks for one topic, in the order a cause would block replication."""

    def __init__(
        self, flow: FlowConfig, policy: ReplicationPolicy, topic: str, lag_threshold: int
    ) -> None:
        self.flow = flow
        self.policy = policy
        self.topic = topic
        self.remote = policy.format_remote_topic(flow.source.alias, topic)
        self.lag_threshold = lag_threshold
        self.sync = TopicSync(flow, policy)
        self.findings: list[Finding] = []

    def run(self) -> Verdict:
        self._rules()
        source = self._source_topic()
        if source is None or self._problems():
            return "not replicated"
        remote_partitions = self._target_topic(len(source.partitions))
        if remote_partitions is None:
            return "not replicated"
        self._max_message_bytes()
        covered = self._partitions(len(source.partitions), remote_partitions)
        if covered == 0:
            return "not replicated"
        if covered < len(source.partitions) or self._problems():
            return "partially replicated"
        return "replicated"

    def _add(
        self,
        check: str,
        status: Status,
        detail: str,
        fix: str | None = None,
        partition: int | None = None,
    ) -> None:
        self.findings.append(Finding(check, status, detail, fix, partition))

    def _problems(self) -> bool:
        return any(f.status == "problem" for f in self.findings)

    # -- names: the topics filter, internal topics, cycles ---------------------------

    def _rules(self) -> None:
        """The rules TopicSync applies to a name, one finding each (they need no cluster)."""
        topic, flow, target = self.topic, self.flow, self.flow.target.alias
        if self.policy.is_heartbeats_topic(topic):
            self._add("topics filter", "ok", f"{topic}: heartbeats topics always replicate")
        elif reason := flow.topics.why_not(topic):
            self._add(
                "topics filter",
                "problem",
                f"{topic} {reason} of flow {flow.name} (topics / topics.exclude)",
                f"change {flow.name}.topics or {flow.name}.topics.exclude (or the top-level "
                f"keys) so that {topic} matches topics and no exclude pattern, then restart "
                "the replicator",
            )
        else:
            self._add("topics filter", "ok", f"{topic} matches topics and no exclude pattern")

        if self.policy.is_internal_topic(topic):
            self._add(
                "internal topic",
                "problem",
                f"{topic} is an internal topic (Kafka, Connect or MirrorMaker 2); "
                "these are never replicated, as in MM2",
                "none in the replicator: internal topics stay on their cluster; copy the data "
                "through a regular topic if the DR site needs it",
            )
        else:
            self._add("internal topic", "ok", f"{topic} is not an internal topic")

        if self.policy.is_cycle(topic, target):
            self._add(
                "cycle",
                "problem",
                f"{topic} came from {target!r} (replication policy naming): replicating "
                "it back there would loop",
                f"none needed: the original is {self.policy.original_topic(topic)} on "
                f"{target!r}; read it there",
            )
        else:
            self._add("cycle", "ok", f"{topic} did not come from {target!r}: no loop")

    # -- the source topic -------------------------------------------------------------

    def _source_topic(self) -> TopicDescription | None:
        alias = self.flow.source.alias
        try:
            described = _describe_topic(self.sync.source_admin, self.topic)
        except KafkaException as exc:
            error = exc.args[0]
            if error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise _unverifiable(
                    error, alias, f"describe topic {self.topic}", "DESCRIBE", f"topic {self.topic}"
                ) from exc
            self._add(
                "source topic",
                "problem",
                f"{self.topic} does not exist on {alias!r}",
                self._similar_names(),
            )
            return None
        self._add(
            "source topic",
            "ok",
            f"{self.topic} exists on {alias!r} with {_n_partitions(len(described.partitions))}",
        )
        self._permissions(described, alias, self.topic, _NEEDED_ON_SOURCE)
        return described

    def _similar_names(self) -> str:
        alias = self.flow.source.alias
        try:
            names = [d.source_topic for d in self.sync.decisions()]
        except KafkaException as exc:
            raise _unverifiable(
                exc.args[0], alias, "list topics", "DESCRIBE", "the topics"
            ) from exc
        upstream = self.policy.upstream_topic(self.topic)
        similar = [upstream] if upstream in names and upstream != self.topic else []
        similar += difflib.get_close_matches(self.topic, names, n=5)
        if not similar:
            return (
                f"no topic on {alias!r} has a similar name: check the name (give it as it is "
                f"called on {alias!r}), or create the topic there"
            )
        return f"did you mean {', '.join(dict.fromkeys(similar))} (topics on {alias!r})?"

    # -- the remote topic -------------------------------------------------------------

    def _target_topic(self, source_partitions: int) -> int | None:
        """The remote topic's partition count, or None when it does not exist."""
        flow, target, remote = self.flow, self.flow.target.alias, self.remote
        try:
            described = _describe_topic(self.sync.target_admin, remote)
        except KafkaException as exc:
            error = exc.args[0]
            if error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise _unverifiable(
                    error, target, f"describe topic {remote}", "DESCRIBE", f"topic {remote}"
                ) from exc
            self._add(
                "target topic",
                "problem",
                f"{remote} does not exist on {target!r}: nothing of {self.topic} was replicated",
                f"run the replicator for flow {flow.name} (replicator run --config FILE --flow "
                f"{flow.name}): it creates {remote}; its principal needs CREATE on {remote} "
                f"(or on the cluster) on {target!r}",
            )
            return None
        have = len(described.partitions)
        where = (
            f"{remote} on {target!r} has {_n_partitions(have)}, {self.topic} on "
            f"{flow.source.alias!r} {source_partitions}"
        )
        if have < source_partitions:
            self._add(
                "target topic",
                "problem",
                f"{where}: {_span(have, source_partitions)} of {self.topic} cannot be replicated",
                f"the replicator adds them at its next topic refresh (refresh.topics.enabled, "
                f"every {flow.refresh_topics_interval_seconds:.0f} s); if they stay missing, "
                f"grant its principal ALTER on {remote} on {target!r}, or add them by hand: "
                f"kafka-topics.sh --alter --topic {remote} --partitions {source_partitions}",
            )
        elif have > source_partitions:
            self._add(
                "target topic",
                "warning",
                f"{where}: was {self.topic} recreated with fewer partitions? "
                f"Nothing is replicated into {_span(source_partitions, have)} of {remote}",
            )
        else:
            self._add("target topic", "ok", f"{where}, the same")
        self._permissions(described, target, remote, _needed_on_target(flow))
        return have

    def _max_message_bytes(self) -> None:
        """The target must take every record the source admitted, plus our headers."""
        flow = self.flow
        source, target = flow.source.alias, flow.target.alias
        source_limit = _max_message_bytes(self.sync.source_admin, source, self.topic)
        target_limit = _max_message_bytes(self.sync.target_admin, target, self.remote)
        wanted = source_limit + HEADER_HEADROOM_BYTES
        limits = (
            f"max.message.bytes of {self.remote} on {target!r} is {target_limit}, "
            f"of {self.topic} on {source!r} {source_limit}"
        )
        raise_it = f"raise max.message.bytes of {self.remote} on {target!r} to at least {wanted}"
        if flow.sync_topic_configs_enabled:
            fix = (
                f"topic sync sets it to {wanted} every "
                f"{flow.sync_topic_configs_interval_seconds:.0f} s and when a record does not "
                f"fit; if it stays at {target_limit}, it was overridden by hand or the "
                f"principal lacks ALTER_CONFIGS on {self.remote} on {target!r}: {raise_it}"
            )
        else:
            fix = f"set sync.topic.configs.enabled=true to have topic sync keep it, or {raise_it}"
        if target_limit < source_limit:
            self._add(
                "max.message.bytes",
                "problem",
                f"{limits}: records of {target_limit}..{source_limit} bytes, which the source "
                "accepts, cannot be replicated",
                fix,
            )
        elif target_limit < wanted:
            self._add(
                "max.message.bytes",
                "warning",
                f"{limits}: records within {wanted - target_limit} bytes of the source's limit "
                "do not fit once the replicator's headers are added",
                fix,
            )
        else:
            self._add("max.message.bytes", "ok", f"{limits}: every source record fits")

    def _permissions(
        self,
        described: TopicDescription,
        alias: str,
        topic: str,
        needed: dict[AclOperation, str],
    ) -> None:
        """What the broker says the principal of our client settings may do on `topic`."""
        granted = set(described.authorized_operations or ())
        if not granted:
            return  # the broker did not say
        missing = [op for op in needed if not granted & {op, AclOperation.ALL}]
        if missing:
            names = ", ".join(op.name for op in missing)
            self._add(
                "authorization",
                "problem",
                f"the principal of the {alias!r} client settings may not "
                + "; ".join(f"{needed[op]} ({op.name})" for op in missing)
                + f" on {topic}",
                f"grant it {names} on topic {topic} on {alias!r} "
                f"(kafka-acls.sh --add --operation ... --topic {topic})",
            )
        else:
            names = ", ".join(op.name for op in needed)
            self._add("authorization", "ok", f"allowed {names} on {topic} on {alias!r}")

    # -- partitions: status, offsets, lag ---------------------------------------------

    def _partitions(self, source_partitions: int, remote_partitions: int) -> int:
        """Check each partition; return how many replicate with nothing wrong."""
        flow = self.flow
        try:
            rows = read_status(flow.target, flow.name)
        except KafkaException as exc:
            raise _unverifiable(
                exc.args[0],
                flow.target.alias,
                f"read {STATUS_TOPIC}",
                "READ",
                f"topic {STATUS_TOPIC}",
            ) from exc
        except ReplicatorError as exc:
            raise _Unverifiable(
                Finding(
                    "status",
                    "problem",
                    str(exc),
                    f"make sure the principal may READ {STATUS_TOPIC} on "
                    f"{flow.target.alias!r}, and that {flow.target.alias!r} is up",
                )
            ) from exc
        self._workers([r for r in rows if isinstance(r, WorkerStatus)])
        statuses = {
            r.partition: r for r in rows if isinstance(r, PartitionStatus) and r.topic == self.topic
        }
        covered = 0
        with _offset_readers(flow) as (consumer, tail):
            for partition in range(source_partitions):
                try:
                    # The tail first: the source's end only grows after it.
                    replicated = (
                        tail.position(self.remote, partition).next_source_offset
                        if partition < remote_partitions
                        else None
                    )
                    low, high = watermarks(consumer, self.topic, partition, _TIMEOUT_S)
                except ReplicatorError as exc:
                    raise _Unverifiable(
                        Finding(
                            "offsets",
                            "problem",
                            str(exc),
                            f"make sure the principal may DESCRIBE {self.topic} on "
                            f"{flow.source.alias!r} and READ {self.remote} on "
                            f"{flow.target.alias!r}, and that both clusters are up",
                            partition,
                        )
                    ) from exc
                status = statuses.get(partition)
                # Where replication resumes: the tail, else where the worker stopped.
                position = replicated
                if position is None and status is not None:
                    position = status.next_offset
                reported = self._status(partition, status, replicated)
                if self._offsets(partition, position, low, high):
                    self._lag(partition, low if position is None else position, high)
                    covered += reported
        return covered

    def _workers(self, workers: list[WorkerStatus]) -> None:
        name = self.flow.name
        running = [w for w in workers if w.is_live(_WORKER_SILENT_S)]
        if running:
            self._add("workers", "ok", f"{len(running)} worker(s) of flow {name} running")
            return
        last = max(workers, key=lambda w: w.updated_ms, default=None)
        seen = (
            f"; last seen: worker {last.worker} {last.state}"
            f"{': ' + last.error if last.error else ''}"
            if last
            else ""
        )
        self._add(
            "workers",
            "warning",
            f"no worker of flow {name} reported running in the last {_WORKER_SILENT_S:.0f} s"
            + seen,
            f"start it: replicator run --config FILE --flow {name}",
        )

    def _status(
        self, partition: int, status: PartitionStatus | None, replicated: int | None
    ) -> bool:
        """The engine's own report on the partition (a worker reports a partition
        every 10 s, a stop at once); True unless it is stopped or never replicated."""
        where = f"{self.topic}[{partition}]"
        if status is None and replicated is not None:
            self._add(
                "status",
                "ok",
                f"{where}: no status reported (yet), but {self.remote} holds its records up "
                f"to source offset {replicated - 1}",
                partition=partition,
            )
            return True
        if status is None:
            self._add(
                "status",
                "warning",
                f"{where}: never replicated (no replicator of flow {self.flow.name} has "
                "reported on it)",
                f"start the replicator for flow {self.flow.name}; it reports every partition "
                "it is assigned",
                partition,
            )
            return False
        if status.state == "stopped":
            detail, fix = _split_error(str(status.error), self.flow.name)
            self._add("status", "problem", detail, fix, partition)
            return False
        figures = (
            f"{where}: {status.state}, next offset {status.next_offset}, "
            f"{status.replicated} replicated since its worker took it"
        )
        losses = []
        if status.lost:
            losses.append(f"{status.lost} lost to retention (retention.gap.policy=skip)")
        if status.skipped:
            losses.append(f"{status.skipped} oversized (oversized.record.policy=skip)")
        if losses:
            detail = f"{figures}; records not replicated: {', '.join(losses)}"
            self._add("status", "warning", detail, None, partition)
        else:
            self._add("status", "ok", figures, None, partition)
        return True

    def _offsets(self, partition: int, position: int | None, low: int, high: int) -> bool:
        """Where replication resumes must lie within the source log."""
        where = f"{self.topic}[{partition}]"
        source, target = self.flow.source.alias, self.flow.target.alias
        if position is None:
            self._add(
                "offsets",
                "ok",
                f"{where}: nothing replicated yet; replication starts at the log start {low}",
                partition=partition,
            )
            return True
        if position > high:
            self._add(
                "offsets",
                "problem",
                f"{where}: resume offset {position} is beyond the source log end {high} on "
                f"{source!r}: {self.topic} was deleted and recreated, or truncated",
                f"to replicate the new {self.topic} from its start (offset {low}) after what "
                f"{self.remote} holds, set topic.reset.policy=skip and restart; to start "
                f"{self.remote} afresh, delete it on {target!r} and restart",
                partition,
            )
            return False
        if position < low:
            self._add(
                "offsets",
                "problem",
                f"{where}: resume offset {position} is before the source log start {low} on "
                f"{source!r}: offsets {position}..{low - 1} ({low - position} records) were "
                "deleted by retention before they were replicated",
                f"to accept the loss, set retention.gap.policy=skip and restart (replication "
                f"continues at offset {low}); to avoid it, raise retention.ms of {self.topic} "
                f"on {source!r} or keep the replicator from falling behind",
                partition,
            )
            return False
        self._add(
            "offsets",
            "ok",
            f"{where}: resume offset {position} is within the source log (start {low}, end {high})",
            partition=partition,
        )
        return True

    def _lag(self, partition: int, position: int, high: int) -> None:
        where = f"{self.topic}[{partition}]"
        lag = max(0, high - position)
        if lag > self.lag_threshold:
            self._add(
                "lag",
                "warning",
                f"{where}: {lag} records behind (next to replicate {position}, source end "
                f"{high}), more than {self.lag_threshold}",
                f"check that the replicator of flow {self.flow.name} runs (replicator status); "
                "if it does, it is slower than the producers: raise tasks.max or start more "
                "workers",
                partition,
            )
        else:
            self._add("lag", "ok", f"{where}: {lag} records behind", partition=partition)


def _describe_topic(admin: AdminClient, topic: str) -> TopicDescription:
    futures = admin.describe_topics(
        TopicCollection([topic]), include_authorized_operations=True, request_timeout=_TIMEOUT_S
    )
    return futures[topic].result()


def _max_message_bytes(admin: AdminClient, alias: str, topic: str) -> int:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    try:
        entries = admin.describe_configs([resource], request_timeout=_TIMEOUT_S)[resource].result()
    except KafkaException as exc:
        raise _unverifiable(
            exc.args[0],
            alias,
            f"describe the configs of topic {topic}",
            "DESCRIBE_CONFIGS",
            f"topic {topic}",
        ) from exc
    return int(entries[MAX_MESSAGE_BYTES].value)


@contextmanager
def _offset_readers(flow: FlowConfig) -> Iterator[tuple[Consumer, TailReader]]:
    """A consumer for source watermarks and a reader of the target's tails."""
    consumer = Consumer(
        {
            **flow.source.consumer,
            "group.id": f"replicator-diagnose-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
        }
    )
    try:
        tail = TailReader(flow.target.consumer, flow.source.alias)
        try:
            yield consumer, tail
        finally:
            tail.close()
    finally:
        consumer.close()


def _needed_on_target(flow: FlowConfig) -> dict[AclOperation, str]:
    needed = {
        AclOperation.WRITE: "produce",
        AclOperation.READ: "read the tail to resume",
        AclOperation.DESCRIBE: "read its metadata",
        AclOperation.DESCRIBE_CONFIGS: "read its size limit",
        AclOperation.ALTER: "add partitions",
    }
    if flow.sync_topic_configs_enabled:
        needed[AclOperation.ALTER_CONFIGS] = "sync its configs"
    return needed


def _n_partitions(count: int) -> str:
    return f"{count} partition{'' if count == 1 else 's'}"


def _span(first: int, end: int) -> str:
    """Partitions `first` up to `end` (exclusive), as a phrase."""
    return f"partition {first}" if end - first == 1 else f"partitions {first}..{end - 1}"


def _split_error(error: str, flow: str) -> tuple[str, str]:
    """(problem, fix) of a stopped partition's status error, which holds both."""
    match = _STOPPED_ERROR.fullmatch(error)
    if match is None:
        return error, f"remove the cause named here, then restart the replicator of flow {flow}"
    return match["problem"], match["fix"]


def _unverifiable(
    error: KafkaError, alias: str, action: str, permission: str, resource: str
) -> _Unverifiable:
    """The finding for a cluster that refused (naming the permission needed on
    `resource`) or did not answer a request."""
    what = f"{action} on {alias!r}: {error.str()}"
    if error.code() in _AUTH_ERRORS:
        return _Unverifiable(
            Finding(
                "authorization",
                "problem",
                f"not allowed to {what}",
                f"grant the principal of the {alias!r} client settings {permission} on "
                f"{resource} on {alias!r}",
            )
        )
    if error.code() in _AUTHN_ERRORS:
        return _Unverifiable(
            Finding(
                "authorization",
                "problem",
                f"cannot authenticate to {alias!r}: {error.str()}",
                f"check the credentials (sasl.*, ssl.*) of cluster {alias!r} in the configuration",
            )
        )
    return _Unverifiable(
        Finding(
            "cluster",
            "problem",
            f"cannot {what}",
            f"check that {alias!r} is up and reachable at {alias}.bootstrap.servers, then "
            "diagnose again",
        )
    )
