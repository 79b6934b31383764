"""The supervisor's checks of one flow that wants to run, each returning its problems:
partitions a failure policy stopped and records lost to retention (as the workers
published them), lag beyond a bound, and checkpoints or heartbeats that stalled.
`Bounds` are what they tolerate; a `Problem` names the flow, where, what and the fix.
`replicator.operations.supervision` decides which checks a flow gets and when.

The rules that judge one item (`partition_problems`, `lag_problem`,
`no_worker_problem`, `unreadable_problem`) take figures, not clusters: the DR
status page applies them to its snapshot (`replicator.operations.verdicts`), so
its verdicts give the supervisor's reasons in the supervisor's words.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal, Protocol

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

from replicator.config.model import ClusterConfig, FlowConfig, shell_safe
from replicator.engine.status import STALE_AFTER_S, PartitionStatus, read_status
from replicator.errors import ReplicatorError
from replicator.kafka.clients import admin_for
from replicator.kafka.errors import error_text
from replicator.listing import first_of
from replicator.offsets.checkpoints import read_checkpoints
from replicator.offsets.groups import GroupAdmin
from replicator.operations.diagnose import DEFAULT_LAG_THRESHOLD
from replicator.operations.dr_status import checkpoint_age_s
from replicator.operations.lag import LagReport

_TIMEOUT_S = 30.0

Check = Literal[
    "workers",
    "stopped",
    "lag",
    "retention",
    "checkpoints",
    "heartbeats",
    "unreadable",
    "left stopped",
]


@dataclass(frozen=True)
class Bounds:
    """What the supervisor tolerates before it fails its run."""

    #: Records a partition may be behind its source.
    max_lag_records: int = DEFAULT_LAG_THRESHOLD
    #: Records a partition may have lost to retention (they never come back; raise
    #: this to acknowledge a known loss until the worker restarts and counts afresh).
    max_lost_records: int = 0
    #: Seconds the newest checkpoint may be old while groups have moved on. Keep it
    #: above the flows' emit.checkpoints.interval.seconds (MM2 default 60).
    max_checkpoint_age_s: float = 300.0
    #: Seconds the newest heartbeat on the target may be old (emitted every second).
    max_heartbeat_age_s: float = 120.0

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Bounds:
        """The bounds named in `params` (a DAG run's), the defaults for the rest."""
        names = {f.name: f.type for f in fields(cls)}
        given = {name: params[name] for name in names if params.get(name) is not None}
        values: dict[str, Any] = {
            name: int(value) if names[name] == "int" else float(value)
            for name, value in given.items()
        }
        return cls(**values)


@dataclass(frozen=True)
class Problem:
    """One thing wrong, complete on its own."""

    flow: str
    check: Check
    where: str
    detail: str
    fix: str

    def __str__(self) -> str:
        return f"flow {self.flow}: {self.where}: {self.detail}; fix: {self.fix}"


def status_problems(
    flow: FlowConfig, bounds: Bounds, values: dict[bytes, bytes] | None = None
) -> list[Problem]:
    """Stopped partitions and retention gaps, as the workers published them; `values`:
    the status topic as the caller read it (`status_values`)."""
    problems = []
    for row in read_status(flow.target, flow.name, values=values):
        if isinstance(row, PartitionStatus) and flow.topics.matches(row.topic):
            problems += partition_problems(flow, row, bounds)
        # else: a worker record, or another deployment's topic
    return problems


class PublishedPartition(Protocol):
    """A partition as its worker last published it (`PartitionStatus` from the status
    topic, or the status page's snapshot of it)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def state(self) -> str: ...
    @property
    def lost(self) -> int: ...
    @property
    def error(self) -> str | None: ...


def partition_problems(flow: FlowConfig, row: PublishedPartition, bounds: Bounds) -> list[Problem]:
    """A partition stopped by its failure policy, and records it lost to retention
    beyond the bound: the rules the supervisor and the DR status page share."""
    problems = []
    where = f"{row.topic}[{row.partition}]"
    if row.state == "stopped":
        problems.append(
            Problem(
                flow.name,
                "stopped",
                where,
                f"stopped by its failure policy: {row.error or 'no error recorded'}",
                f"act on the error, then restart the worker; details: replicator diagnose "
                f"--config FILE --flow {shell_safe(flow.name)} {row.topic}",
            )
        )
    if row.lost > bounds.max_lost_records:
        problems.append(
            Problem(
                flow.name,
                "retention",
                where,
                f"{row.lost} records deleted by retention on {flow.source.alias!r} before they "
                f"were replicated (retention.gap.policy=skip; bound {bounds.max_lost_records})",
                f"raise retention.ms of {row.topic} on {flow.source.alias!r} or keep "
                "replication from falling behind; the records are gone from the source, "
                "recover them from the producers if they matter",
            )
        )
    return problems


def lag_problems(flow: FlowConfig, lag: LagReport, bounds: Bounds) -> list[Problem]:
    return [
        lag_problem(
            flow,
            p.where,
            p.behind,
            f"replicated until {p.replicated_until}, source end {p.source_end}",
            bounds,
        )
        for p in lag.over(bounds.max_lag_records)
    ]


def lag_problem(
    flow: FlowConfig, where: str, behind: int, measured: str, bounds: Bounds
) -> Problem:
    """`where` is `behind` records behind its source, more than the bound (`measured`
    says how the figure was taken: from the data, or as the worker reported it)."""
    return Problem(
        flow.name,
        "lag",
        where,
        f"{behind} records behind ({measured}; bound {bounds.max_lag_records})",
        f"check that the workers of flow {flow.name} run (replicator status); if they "
        "do, they are slower than the producers: raise tasks.max or add workers",
    )


def no_worker_problem(flow: FlowConfig) -> Problem:
    """No worker of `flow` reported running recently: nothing replicates it."""
    return Problem(
        flow.name,
        "workers",
        "workers",
        f"no worker of flow {flow.name} reported running in the last {STALE_AFTER_S:.0f} s",
        f"start one: replicator run --config FILE --flow {shell_safe(flow.name)} (`make run` "
        "starts one the supervisor restarts); if one runs, read its log",
    )


def unreadable_problem(flow: FlowConfig, error: str) -> Problem:
    """`flow`'s clusters could not be read, so nothing else of it can be judged."""
    return Problem(
        flow.name,
        "unreadable",
        f"clusters {flow.source.alias!r} and {flow.target.alias!r}",
        f"cannot check the flow: {error}",
        "make sure both clusters are up and the principal may DESCRIBE topics "
        "and groups and READ the flow's topics and internal topics",
    )


def checkpoint_problems(
    flow: FlowConfig,
    lag: LagReport,
    bounds: Bounds,
    running_for: float | None,
    values: dict[bytes, bytes] | None = None,
) -> list[Problem]:
    """Groups whose committed position is replicated but not checkpointed, while the
    flow's checkpoints (`dr_status.checkpoint_age_s`: the newest, or the loop's last
    round) are older than the bound and the flow has run for longer than that: the
    checkpoint round is failing. `values`: the status topic as the caller read it."""
    policy = flow.policy
    topic = flow.checkpoints_topic
    age = checkpoint_age_s(flow, values)
    if age is not None and age <= bounds.max_checkpoint_age_s:
        return []  # the round writes: no need to read every group and checkpoint
    replicated = {(p.topic, p.partition): p.replicated_until or 0 for p in lag.partitions}
    checkpoints = read_checkpoints(flow.target, topic)
    source = GroupAdmin(flow.source)
    behind = []
    for group in source.groups(flow.groups):
        if flow.is_engine_group(group):
            continue  # the replicator's own positions: never checkpointed
        for committed in source.committed(group):
            until = replicated.get((committed.topic, committed.partition))
            if until is None or committed.offset > until:
                continue  # not ours, or not replicated yet (the lag check covers that)
            remote = policy.format_remote_topic(flow.source.alias, committed.topic)
            last = checkpoints.get((group, remote, committed.partition))
            if last is None or last.upstream < committed.offset:
                behind.append(
                    f"group {group} {committed.topic}[{committed.partition}] committed "
                    f"{committed.offset}, checkpointed {'none' if last is None else last.upstream}"
                )
    if not behind:
        return []
    return _stalled(
        flow,
        "checkpoints",
        topic,
        age,
        bounds.max_checkpoint_age_s,
        running_for=running_for,
        consequence=f" while groups moved on: {first_of(behind, sep='; ')}",
        fix="read the checkpoint errors in the worker's log (a cluster unreachable, or the "
        f"principal may not WRITE {topic}); the replication_sync DAG writes them too",
    )


def heartbeat_problems(
    flow: FlowConfig, bounds: Bounds, running_for: float | None
) -> list[Problem]:
    remote = _heartbeats_topic(flow)
    return _stalled(
        flow,
        "heartbeats",
        remote,
        heartbeat_age_s(flow),
        bounds.max_heartbeat_age_s,
        running_for=running_for,
        consequence=f": nothing gets from {flow.source.alias!r} to {flow.target.alias!r}",
        fix=f"check the workers of flow {flow.name} (replicator status, their log) and that "
        "both clusters are up",
    )


def heartbeat_age_s(flow: FlowConfig) -> float | None:
    """Seconds since the newest heartbeat of `flow` reached its target (None: none yet)."""
    return _age_s(flow.target, _heartbeats_topic(flow))


def _heartbeats_topic(flow: FlowConfig) -> str:
    return flow.policy.format_remote_topic(flow.source.alias, flow.heartbeats_topic)


def _stalled(
    flow: FlowConfig,
    check: Check,
    topic: str,
    age: float | None,
    bound_s: float,
    *,
    running_for: float | None,
    consequence: str,
    fix: str,
) -> list[Problem]:
    """A problem when the newest record of `topic` on the flow's target is `age`
    seconds old, more than `bound_s`, or there is none (`age` None); the caller
    checks only flows that have run for longer than `bound_s` (`running_for`)."""
    if age is not None and age <= bound_s:
        return []
    newest = "none written yet" if age is None else f"the newest is {age:.0f} s old"
    if running_for is not None:
        newest += f", the flow has run for {running_for:.0f} s"
    return [
        Problem(
            flow.name,
            check,
            f"{topic} on {flow.target.alias!r}",
            f"{check} stalled: {newest} (bound {bound_s:g} s){consequence}",
            fix,
        )
    ]


def _age_s(cluster: ClusterConfig, topic: str) -> float | None:
    """Seconds since the newest record of `topic[0]` on `cluster` was written (its
    timestamp); None when the topic does not exist or is empty."""
    admin = admin_for(cluster)
    partition = TopicPartition(topic, 0)
    try:
        # Offsets of a missing topic fail with "no leaders found", not "unknown topic".
        metadata = admin.list_topics(topic, timeout=_TIMEOUT_S).topics.get(topic)
        if metadata is None or metadata.error is not None or 0 not in metadata.partitions:
            return None
        future = admin.list_offsets(
            {partition: OffsetSpec.max_timestamp()}, request_timeout=_TIMEOUT_S
        )[partition]
        newest = future.result(timeout=_TIMEOUT_S)
    except KafkaException as exc:
        raise ReplicatorError(
            f"cannot read the newest record time of {topic} on {cluster.alias!r}: "
            f"{error_text(exc)}; check that the cluster is up"
        ) from exc
    if newest.offset < 0 or newest.timestamp < 0:
        return None
    return max(0.0, time.time() - newest.timestamp / 1000)
