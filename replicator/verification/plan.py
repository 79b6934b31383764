"""Which offsets a verification run compares, per partition.

Records still in flight must not count as missing, so each partition is
verified up to what the replicator had acknowledged when the run started: the
source offset after the last replica on the target (the target tail). The
target side is read up to its end at that moment. Both bounds are written into
the plan and reported with the results ("verified up to ...; N records in
flight not counted").

The flow keeps running while the job runs, so the checkpoints and offset syncs
are read only up to their ends when the run was planned, and those ends are taken
before the windows: every mapping read was written before its window was
measured, so it points within the window, where the job reads the records to
check it against (one written later could point past the window's end).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, cast

from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from replicator.config.model import ClusterConfig, FlowConfig
from replicator.engine.topic_sync import TopicSync
from replicator.offsets.groups import GroupAdmin
from replicator.verification.incremental import SAMPLE_PERIOD, due_samples, resume
from replicator.verification.positions import read_positions

if TYPE_CHECKING:  # the Spark job's driver imports this module: not the store
    from replicator.statestore.records import VerifiedRange

#: Source offsets per range of the comparison: small enough that a range that differs
#: is cheap to compare record by record, large enough that the per-range sums stay a
#: small table (10,000 rows for a billion offsets).
RANGE_OFFSETS = 100_000


@dataclass(frozen=True)
class PartitionWindow:
    """One source partition and its copy: source offsets [source_start, source_end)
    are compared with the copies found in target offsets [target_start, target_end)."""

    topic: str
    partition: int
    remote_topic: str
    source_start: int
    source_end: int
    target_start: int
    target_end: int
    #: Source records after `source_end` when the run started: in flight, not verified.
    in_flight: int
    #: Age of the oldest record in flight (0 when none): the replication lag in time.
    lag_seconds: float = 0.0
    #: The source topic's `retention.ms` (None: unlimited), and how long until
    #: retention deletes the oldest record in flight (None: nothing at risk).
    retention_ms: int | None = None
    retention_margin_seconds: float | None = None
    #: Source offsets [prior_start, source_start) were verified by earlier runs (-1:
    #: none): a copy of one in this window is a duplicate that came later.
    prior_start: int = -1
    #: Records of the partition verified by earlier runs and still standing.
    verified_before: int = 0
    #: Why the partition is verified whole again though earlier runs verified it
    #: (its target truncated or created again), None otherwise.
    reverified: str | None = None
    #: The remote topic's id when planned (None: the cluster did not tell).
    remote_topic_id: str | None = None
    #: The remote partition's log start (-1: `target_start`, a window from it).
    target_log_start: int = -1


@dataclass(frozen=True)
class SampleRange:
    """A range an earlier run proved, re-read on the target this run: the copies of
    source offsets [source_first, source_end) in target offsets [target_first,
    target_end) of `remote_topic` must sum to `records` and `digest` again."""

    topic: str
    partition: int
    remote_topic: str
    source_first: int
    source_end: int
    target_first: int
    target_end: int
    records: int
    #: 16 hex digits (`incremental.digest_hex`).
    digest: str


@dataclass(frozen=True)
class Sampling:
    """What a run's sample is chosen by (`incremental.due_samples`)."""

    now: datetime
    #: When the flow's previous verification started (None: it has none).
    last_run: datetime | None
    period: timedelta = SAMPLE_PERIOD


@dataclass(frozen=True)
class VerificationPlan:
    flow: str
    source_alias: str
    source_bootstrap: str
    target_bootstrap: str
    windows: list[PartitionWindow] = field(default_factory=list)
    #: MM2's internal topics of the flow, None where they do not exist (yet), and
    #: their end offsets per partition when the run was planned (read up to these).
    checkpoints_topic: str | None = None
    offset_syncs_topic: str | None = None
    offset_syncs_bootstrap: str = ""
    checkpoints_ends: list[int] = field(default_factory=list)
    offset_syncs_ends: list[int] = field(default_factory=list)
    #: The replicator's configuration, from which the job takes each cluster's security
    #: settings (`verification.kafka_options`): the plan names it, never a secret.
    config_file: str = ""
    #: Its truststores and keystores are shipped with `spark-submit --files`, and the
    #: job names them as shipped (for executors that do not share the driver's files).
    ship_files: bool = False
    #: Source offsets per range: the unit the job sums each side up by, and compares
    #: record by record only where the sums differ (`RANGE_OFFSETS`).
    range_offsets: int = 0
    #: Whether windows start after what earlier runs verified (False: `--full`, every
    #: window from the source's log start).
    incremental: bool = False
    #: Ranges earlier runs proved, re-read this run against their digests.
    samples: list[SampleRange] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.range_offsets <= 0:
            object.__setattr__(self, "range_offsets", RANGE_OFFSETS)

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(asdict(self), indent=2))
        return path

    @classmethod
    def read(cls, path: Path) -> VerificationPlan:
        data = json.loads(path.read_text())
        windows = [PartitionWindow(**w) for w in data.pop("windows")]
        samples = [SampleRange(**r) for r in data.pop("samples", [])]
        return cls(**data, windows=windows, samples=samples)


def plan_verification(
    flow: FlowConfig,
    topics: list[str] | None = None,
    verified: list[VerifiedRange] | None = None,
    sampling: Sampling | None = None,
) -> VerificationPlan:
    """The windows of every partition of the flow's topics (or of `topics`): after
    the `verified` ranges earlier runs stored (`incremental.resume`), or with None
    from each source partition's log start; with `sampling`, a share of the ranges
    still standing is re-read (`incremental.due_samples`)."""
    policy = flow.policy
    sync = TopicSync(flow)
    replicated = sync.replicated_topics()
    chosen = sorted(
        t
        for t in replicated
        if not policy.is_heartbeats_topic(t) and (topics is None or t in topics)
    )
    partitions = [(t, p) for t in chosen for p in range(replicated[t])]
    # Before the windows (see the module's docstring).
    checkpoints = flow.checkpoints_topic
    offset_syncs = flow.offset_syncs_topic
    checkpoints_ends = _ends(flow.target, sync.target_admin, checkpoints)
    # Offset syncs live where offset-syncs.topic.location says (the source by default).
    syncs_on_target = flow.offset_syncs_cluster is flow.target
    syncs_admin = sync.target_admin if syncs_on_target else sync.source_admin
    offset_syncs_ends = _ends(flow.offset_syncs_cluster, syncs_admin, offset_syncs)
    positions = read_positions(flow, partitions)
    retention = _retention_ms(sync, chosen)
    now = time.time()
    stored: dict[tuple[str, int], list[VerifiedRange]] = {}
    for r in verified or []:
        stored.setdefault((r.topic, r.partition), []).append(r)
    windows = []
    standing: list[VerifiedRange] = []
    for topic, partition in partitions:
        at = positions[topic, partition]
        remote = policy.format_remote_topic(flow.source.alias, topic)
        start = resume(
            sorted(stored.get((topic, partition), []), key=lambda r: r.source_first),
            source_start=at.source_start,
            target_start=at.target_start,
            target_end=at.target_end,
            target_topic=remote,
            target_topic_id=at.target_topic_id,
        )
        oldest = at.oldest_in_flight_ms
        age_s = 0.0 if oldest is None else max(0.0, now - oldest / 1000)
        margin = None
        if oldest is not None and retention.get(topic) is not None:
            margin = cast(int, retention[topic]) / 1000 - age_s
        standing += start.standing
        # Proved copied by earlier runs: never in flight, even if the target lost them.
        end = min(at.source_end, max(at.acknowledged, start.verified_end))
        windows.append(
            PartitionWindow(
                topic,
                partition,
                remote,
                min(start.source_start, end),
                end,
                at.target_start if start.target_start is None else start.target_start,
                at.target_end,
                at.source_end - end,
                round(age_s, 3),
                retention.get(topic),
                None if margin is None else round(margin, 3),
                start.prior_start if start.standing else -1,
                start.verified_before,
                start.reverify,
                at.target_topic_id,
                at.target_start,
            )
        )
    return VerificationPlan(
        flow.name,
        flow.source.alias,
        flow.source.bootstrap_servers,
        flow.target.bootstrap_servers,
        windows,
        None if checkpoints_ends is None else checkpoints,
        None if offset_syncs_ends is None else offset_syncs,
        flow.offset_syncs_cluster.bootstrap_servers,
        checkpoints_ends or [],
        offset_syncs_ends or [],
        incremental=verified is not None,
        samples=[] if sampling is None else _samples(standing, sampling),
    )


def _samples(standing: list[VerifiedRange], sampling: Sampling) -> list[SampleRange]:
    due = due_samples(
        standing, now=sampling.now, last_run=sampling.last_run, period=sampling.period
    )
    return [
        SampleRange(
            r.topic,
            r.partition,
            r.target_topic,
            r.source_first,
            r.source_end,
            r.target_first,
            r.target_end,
            r.records,
            r.digest,
        )
        for r in due
        if r.target_first is not None and r.target_end is not None
    ]


def _ends(cluster: ClusterConfig, admin: AdminClient, topic: str) -> list[int] | None:
    """The end offset of each partition of `topic` (None: it does not exist), asked
    with `admin`, which has its connections and metadata already: a new client's first
    ListOffsets waited 3 s in about one plan in twenty (1 in 40 in a loop of plans)."""
    metadata = admin.list_topics(timeout=30).topics.get(topic)
    if metadata is None:
        return None
    partitions = [(topic, p) for p in sorted(metadata.partitions)]
    ends = GroupAdmin(cluster, admin).end_offsets(partitions)
    return [ends[where] for where in partitions]


def _retention_ms(sync: TopicSync, topics: list[str]) -> dict[str, int | None]:
    """`retention.ms` of each source topic; None when retention is unlimited (-1)."""
    resources = [ConfigResource(ResourceType.TOPIC, t) for t in topics]
    if not resources:
        return {}
    found = {}
    for resource, future in sync.source_admin.describe_configs(resources).items():
        value = int(future.result(timeout=30)["retention.ms"].value)
        found[resource.name] = None if value < 0 else value
    return found
