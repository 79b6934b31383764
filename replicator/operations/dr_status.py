"""One snapshot of the whole DR estate, for the Airflow status page and scripts.

An on-call engineer opening the DR status page wants, on one screen: can we
reach every cluster, is every flow running and how far behind is it, are
checkpoints still coming (an unplanned failover starts consumers from them),
where does each client application run, did the last verification pass, and
what did past failovers and drills measure. `dr_status` gathers all of it from
the configuration, the clusters and the DR state store, reusing the readers
the engine itself uses (`read_status`, `live_workers`, MM2's checkpoint format
through `checkpoint_reads`), so the page shows what the engine sees.

A page must never hang on a dead cluster: each cluster is first probed with a
short metadata request, and a cluster that does not answer is shown as
unreachable with the client's error while nothing else is read from it. The
slower reads of reachable clusters run in parallel, one thread per flow.

Nothing secret goes into the snapshot: clusters are shown by alias and
bootstrap servers only (client settings, which may hold passwords, never),
the state store is not named at all (its URL may carry a password), and run
details come from the store, which redacts them when they are written.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import KafkaException

from replicator.acls.status import read_acl_status
from replicator.config.model import ClusterConfig, FlowConfig, ReplicatorConfig
from replicator.engine.status import (
    STALE_AFTER_S,
    NoStatus,
    PartitionStatus,
    WorkerStatus,
    flow_workers,
    read_status,
    status_values,
)
from replicator.errors import ReplicatorError
from replicator.kafka.clients import quiet_admin
from replicator.kafka.errors import error_text
from replicator.offsets.checkpoint_status import CheckpointRound, read_checkpoint_round
from replicator.operations.checkpoint_reads import (
    CheckpointInfo,
    CheckpointTallies,
    CheckpointTally,
    newest_checkpoint,
)
from replicator.operations.thread_status import read_thread_status
from replicator.statestore import Application, RunRecord, StateStore, StateStoreError
from replicator.statestore.flow_states import HALTED, RUNNING
from replicator.statestore.runs import RunStore

#: How long a cluster may take to answer a metadata request before it is shown as
#: unreachable: long enough for a loaded broker, short enough for a page load.
PROBE_TIMEOUT_S = 3.0
#: The run kinds shown as DR history (verification runs have a panel of their own).
HISTORY_KINDS = ("failover", "failback", "drill")
HISTORY_LIMIT = 50
#: Verification runs kept in the snapshot for the trend across runs (newest first).
VERIFICATION_TREND = 20


@dataclass(frozen=True)
class ClusterStatus:
    alias: str
    bootstrap: str
    reachable: bool
    brokers: int = 0
    #: The client's error when unreachable (librdkafka's text, never client settings).
    error: str | None = None


@dataclass(frozen=True)
class WorkerInfo:
    """One worker of a flow as it last reported in the status topic."""

    worker: str
    state: str
    host: str
    pid: int
    partitions: int
    live: bool  # reports "running" and reported recently (see `live_workers`)
    updated_at: datetime
    #: When it started the flow (None: a worker too old to say).
    started_at: datetime | None = None


@dataclass(frozen=True)
class PartitionLag:
    """One source partition of a flow, as its worker last published it."""

    topic: str
    partition: int
    state: str
    lag: int | None
    next_offset: int | None
    replicated: int
    lost: int
    error: str | None
    updated_at: datetime
    #: "replicating" but not reported for longer than a live worker stays silent: its
    #: worker is gone, and its lag is the last one it saw, not today's.
    stale: bool
    #: Records its worker did not replicate (loops), in words; None when none.
    skipped: str | None = None


@dataclass(frozen=True)
class AclSyncInfo:
    """ACL sync of a flow (`sync.topic.acls.enabled`), as its last round published it."""

    enabled: bool
    #: ACLs on the target that the source's synced ACLs make (None: never synced).
    synced: int | None = None
    last_sync_at: datetime | None = None
    age_seconds: float | None = None
    #: The last round's error (the figures are the last successful round's).
    error: str | None = None


@dataclass(frozen=True)
class BackgroundInfo:
    """The background threads of one `replicator run` of the flow (flow states,
    checkpoints, ACL sync), as it last published them (`thread_status`)."""

    runner: str
    state: str  # "ok", "failing" (a thread fails or died) or "silent" (runner gone?)
    summary: str  # each thread's state, and why the failing ones fail


@dataclass(frozen=True)
class FlowStatus:
    name: str
    source: str
    target: str
    #: What the state store asks of the flow ("running" when it has no entry).
    desired_state: str
    #: The live workers, and the dead ones that are still wanted: the flow should run,
    #: and no other worker started after they went silent. Workers replaced by a
    #: restart, or stopped with their flow, are history and left out.
    workers: list[WorkerInfo] = field(default_factory=list)
    partitions: list[PartitionLag] = field(default_factory=list)
    checkpoint: CheckpointInfo | None = None
    acl_sync: AclSyncInfo | None = None
    background: list[BackgroundInfo] = field(default_factory=list)
    #: Why the figures are missing or incomplete (target unreachable, a read failed).
    error: str | None = None

    @property
    def live_workers(self) -> int:
        return sum(1 for w in self.workers if w.live)

    @property
    def dead_workers(self) -> int:
        return sum(1 for w in self.workers if not w.live)

    @property
    def total_lag(self) -> int | None:
        lags = [p.lag for p in self.partitions if p.lag is not None]
        return sum(lags) if lags else None


@dataclass(frozen=True)
class RunSummary:
    """One run of the DR history, without its (possibly large) details."""

    run_id: str
    kind: str
    flow: str | None
    mode: str | None
    outcome: str | None  # None while the run is in progress
    rpo_records: int | None
    rto_seconds: float | None
    started_at: datetime
    finished_at: datetime | None
    #: Failovers, failbacks and drills: how long the procedure took, and how long the
    #: applications' clients were stopped (from the fence to the switch).
    duration_seconds: float | None = None
    downtime_seconds: float | None = None
    #: Verification runs: the Data Docs site's index.html, and the suites that failed.
    data_docs: str | None = None
    failed_suites: list[str] = field(default_factory=list)
    #: Verification runs: how many suites ran, the rows they validated, and the
    #: expectations that failed (the figures of its verdict).
    suites: int = 0
    rows_checked: int | None = None
    failed_expectations: int = 0
    #: Verification runs: whether it verified what was new (else everything), the
    #: records it verified, those earlier runs had, and the partitions it verified
    #: whole again (their targets truncated or created again) with why.
    incremental: bool | None = None
    records_verified: int | None = None
    records_verified_before: int | None = None
    reverified: dict[str, str] = field(default_factory=dict)
    #: Verification runs: the ranges earlier runs proved that it re-read, and their records.
    sampled_ranges: int = 0
    sampled_records: int = 0

    @classmethod
    def of(cls, run: RunRecord) -> RunSummary:
        docs = run.details.get("data_docs")
        stored = run.details.get("suites")
        suites: dict[str, Any] = stored if isinstance(stored, dict) else {}
        results = list(suites.values())
        failed = sorted(name for name, result in suites.items() if not result.get("success"))
        rows = [r["rows"] for r in results if isinstance(r.get("rows"), int)]
        stored_verified = run.details.get("verified")
        verified: dict[str, Any] = stored_verified if isinstance(stored_verified, dict) else {}
        return cls(
            run.run_id,
            run.kind,
            run.flow,
            run.mode,
            run.outcome,
            run.rpo_records,
            run.rto_seconds,
            run.started_at,
            run.finished_at,
            _seconds(run.details.get("duration_seconds")),
            _seconds(run.details.get("downtime_seconds")),
            docs if isinstance(docs, str) else None,
            failed,
            len(results),
            sum(rows) if rows else None,
            sum(len(r.get("failed") or []) for r in results),
            verified.get("incremental"),
            verified.get("records_now"),
            verified.get("records_before"),
            dict(verified.get("reverified") or {}),
            int(verified.get("sampled_ranges") or 0),
            int(verified.get("sampled_records") or 0),
        )


@dataclass(frozen=True)
class DrStatus:
    generated_at: datetime
    clusters: list[ClusterStatus]
    flows: list[FlowStatus]
    applications: list[Application]  # as the state store holds them
    verification: RunSummary | None
    history: list[RunSummary]
    #: Why applications, flow states and history are missing (the store is unavailable).
    store_error: str | None = None
    #: The last verification runs, newest first (`verification` is the first).
    verifications: list[RunSummary] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: datetimes as ISO 8601 strings, derived flow figures included."""
        data = _jsonable(asdict(self))
        for flow, out in zip(self.flows, data["flows"], strict=True):
            out["live_workers"] = flow.live_workers
            out["dead_workers"] = flow.dead_workers
            out["total_lag"] = flow.total_lag
        return data


def dr_status(
    config: ReplicatorConfig,
    store: StateStore,
    *,
    probe_timeout_s: float = PROBE_TIMEOUT_S,
    history_limit: int = HISTORY_LIMIT,
    tallies: CheckpointTallies | None = None,
) -> DrStatus:
    """The snapshot: clusters probed first, then each flow read from its target
    (only if reachable), then the state store. A caller that asks again (the status
    page's server) passes its `tallies`: each flow's checkpoints are then counted from
    what was written since it last asked, not from the start of the topic."""
    with ThreadPoolExecutor(max_workers=max(1, len(config.clusters), len(config.flows))) as pool:
        clusters = list(
            pool.map(lambda c: probe_cluster(c, probe_timeout_s), config.clusters.values())
        )
        reachable = {c.alias for c in clusters if c.reachable}
        store_error = None
        try:
            desired = {s.flow: s.state for s in store.flows.all()}
            applications = store.applications.all()
            verifications = store.runs.recent("verification", limit=VERIFICATION_TREND)
            history = _history(store.runs, history_limit)
        except StateStoreError as exc:
            store_error = str(exc)
            desired, applications, verifications, history = {}, [], [], []
        flows = list(
            pool.map(
                lambda f: flow_status(
                    f,
                    desired.get(f.name, RUNNING),
                    f.target.alias in reachable,
                    tally=None if tallies is None else tallies.of(f),
                ),
                config.flows,
            )
        )
    return DrStatus(
        generated_at=datetime.now(UTC),
        clusters=clusters,
        flows=flows,
        applications=applications,
        verification=RunSummary.of(verifications[0]) if verifications else None,
        history=history,
        store_error=store_error,
        verifications=[RunSummary.of(run) for run in verifications],
    )


def probe_cluster(cluster: ClusterConfig, timeout_s: float = PROBE_TIMEOUT_S) -> ClusterStatus:
    """Whether `cluster` answers a metadata request within `timeout_s`."""
    admin = quiet_admin(cluster, connect_timeout_ms=1000)
    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        return ClusterStatus(cluster.alias, cluster.bootstrap_servers, False, error=error_text(exc))
    return ClusterStatus(cluster.alias, cluster.bootstrap_servers, True, len(metadata.brokers))


def flow_status(
    flow: FlowConfig,
    desired_state: str,
    target_reachable: bool,
    *,
    count: bool = True,
    tally: CheckpointTally | None = None,
) -> FlowStatus:
    """Workers, per-partition lag and checkpoints of `flow`, read from its target; with
    `count` False only the newest checkpoint is read, not the count of them all (a
    summary's cost stays the same at 20 checkpoints or 2,000,000); `tally`: the count
    kept since the caller last asked (else the checkpoints topic is read whole)."""
    status = FlowStatus(
        flow.name,
        flow.source.alias,
        flow.target.alias,
        desired_state,
        acl_sync=AclSyncInfo(flow.sync_topic_acls_enabled),
    )
    if not target_reachable:
        return replace(status, error=f"target cluster {flow.target.alias!r} is unreachable")
    try:
        values = status_values(flow.target)  # read once: rows, threads, ACL sync
        rows = read_status(flow.target, flow.name, values=values)
        checkpoint = _with_round(
            (tally or CheckpointTally(flow)).read() if count else newest_checkpoint(flow),
            read_checkpoint_round(values, flow),
        )
        acl_sync = acl_sync_info(flow, values)
        background = [
            BackgroundInfo(r.runner, r.state, r.summary()) for r in read_thread_status(flow, values)
        ]
    except (ReplicatorError, KafkaException) as exc:
        return replace(status, error=f"reading {flow.target.alias!r}: {exc}")
    workers = [_worker(row) for row in flow_workers(flow, rows)]
    return replace(
        status,
        workers=sorted(_current(workers, desired_state not in HALTED), key=lambda w: w.worker),
        # Other deployments may run a flow of the same name into the same target:
        # only partitions of the topics this configuration replicates are ours.
        partitions=sorted(
            (
                _partition(row)
                for row in rows
                if isinstance(row, PartitionStatus) and flow.topics.matches(row.topic)
            ),
            key=lambda p: (p.topic, p.partition),
        ),
        checkpoint=checkpoint,
        acl_sync=acl_sync,
        background=background,
    )


def acl_sync_info(flow: FlowConfig, values: dict[bytes, bytes] | None = None) -> AclSyncInfo:
    """The last ACL sync round of `flow` (read only when the flow enables it); `values`:
    the status topic as the caller read it."""
    if not flow.sync_topic_acls_enabled:
        return AclSyncInfo(False)
    last = read_acl_status(flow, values)
    if last is None:
        return AclSyncInfo(True)
    synced_at = None if last.synced_ms is None else _ms(last.synced_ms)
    age = (
        None if last.synced_ms is None else round(max(0.0, time.time() - last.synced_ms / 1000), 1)
    )
    return AclSyncInfo(
        True,
        last.synced if last.synced_ms is not None else None,
        synced_at,
        age,
        last.error,
    )


def checkpoint_age_s(flow: FlowConfig, values: dict[bytes, bytes] | None = None) -> float | None:
    """How old the flow's checkpoints are: seconds since its newest checkpoint was
    written (its broker timestamp, `newest_checkpoint`), or since its checkpoint loop's
    last round ended if that is younger (`checkpoint_status`: a round at rest writes
    no checkpoint); None when there is neither. `values`: the status topic as the
    caller read it, else it is read here."""
    if values is None:
        try:
            values = status_values(flow.target)
        except NoStatus:
            values = {}
    last_round = read_checkpoint_round(values, flow)
    return _with_round(newest_checkpoint(flow), last_round).age_seconds


def _with_round(info: CheckpointInfo, last: CheckpointRound | None) -> CheckpointInfo:
    """`info` with the checkpoint loop's `last` round: the checkpoints are as old as
    the younger of their newest record and that round."""
    if last is None:
        return info
    ages = [age for age in (info.age_seconds, last.age_seconds) if age is not None]
    return replace(info, age_seconds=min(ages), last_round_at=_ms(last.ended_ms))


def _current(workers: list[WorkerInfo], wanted: bool) -> list[WorkerInfo]:
    """The live workers, and (if the flow is `wanted` running) the dead ones that no
    other worker replaced: none started after they went silent. Every restart leaves
    the record of a dead worker behind; counting those would say "1 live / 6"."""

    def replaced(dead: WorkerInfo) -> bool:
        return any(
            w is not dead
            and (
                (w.started_at is not None and w.started_at >= dead.updated_at)
                or (w.live and w.started_at is None)  # too old to say: it may be
            )
            for w in workers
        )

    return [w for w in workers if w.live or (wanted and not replaced(w))]


def _history(store: RunStore, limit: int) -> list[RunSummary]:
    runs = [run for kind in HISTORY_KINDS for run in store.recent(kind, limit=limit)]
    runs.sort(key=lambda r: r.started_at, reverse=True)
    return [RunSummary.of(run) for run in runs[:limit]]


def _worker(row: WorkerStatus) -> WorkerInfo:
    return WorkerInfo(
        worker=row.worker,
        state=row.state,
        host=row.host,
        pid=row.pid,
        partitions=row.partitions,
        live=row.is_live(),
        updated_at=_ms(row.updated_ms),
        started_at=_ms(row.started_ms) if row.started_ms else None,
    )


def _partition(row: PartitionStatus) -> PartitionLag:
    updated_at = _ms(row.updated_ms)
    silent_s = (datetime.now(UTC) - updated_at).total_seconds()
    return PartitionLag(
        topic=row.topic,
        partition=row.partition,
        state=row.state,
        lag=row.lag,
        next_offset=row.next_offset,
        replicated=row.replicated,
        lost=row.lost,
        error=row.error,
        updated_at=updated_at,
        stale=row.state == "replicating" and silent_s > STALE_AFTER_S,
        skipped=row.skip_note,
    )


def _seconds(value: Any) -> float | None:
    return None if value is None else float(value)


def _ms(value: int) -> datetime:
    return datetime.fromtimestamp(value / 1000, UTC)


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value
