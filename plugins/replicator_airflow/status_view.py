"""What the DR status page's template shows, shaped for reading in five seconds:
each flow's verdict with its charts, partitions grouped per topic (worst lag,
stopped and lost counts first; the partitions behind a `<details>`), the
verification trend and the procedures' duration and downtime across runs.

Plain data only: `templates/status.html.j2` turns it into HTML (autoescaped).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import groupby

from replicator.operations import (
    HISTORY_KINDS,
    SEVERITY,
    DrStatus,
    FlowStatus,
    FlowVerdict,
    PartitionLag,
    Problem,
    RunSummary,
    Verdict,
)
from replicator.statestore import FlowSample
from replicator_airflow.status_charts import BarChart, LineChart, bar_chart, line_chart

#: Runs of each procedure kind in its duration/downtime chart.
PROCEDURE_TREND = 12


@dataclass(frozen=True)
class TopicGroup:
    """The partitions of one topic of a flow, with what an operator looks for first."""

    topic: str
    partitions: list[PartitionLag]
    worst_lag: int | None
    stopped: int
    lost: int
    stale: int

    @property
    def bad(self) -> bool:
        return bool(self.stopped or self.lost or self.stale)


@dataclass(frozen=True)
class Reason:
    """The problems of one check, shown as the first of them and how many there are
    (lag beyond the bound on 2,000 partitions is one line, not 2,000)."""

    check: str
    severity: Verdict
    first: Problem
    count: int


@dataclass(frozen=True)
class FlowView:
    status: FlowStatus
    verdict: FlowVerdict
    reasons: list[Reason]
    topics: list[TopicGroup]
    lag_chart: LineChart
    age_chart: LineChart


@dataclass(frozen=True)
class PageView:
    status: DrStatus
    flows: list[FlowView]
    counts: dict[Verdict, int]
    #: Verification runs, oldest first.
    verification_trend: list[RunSummary]
    procedure_charts: list[BarChart]
    window: timedelta
    refresh_s: int


def page_view(
    status: DrStatus,
    verdicts: Sequence[FlowVerdict],
    samples: Mapping[str, Sequence[FlowSample]],
    window: timedelta,
    refresh_s: int,
) -> PageView:
    """The page's data; `samples` are the supervisor's per flow, oldest first."""
    by_flow = {v.flow: v for v in verdicts}
    flows = [
        FlowView(
            flow,
            by_flow[flow.name],
            reasons(by_flow[flow.name].problems),
            group_topics(flow.partitions),
            *_flow_charts(samples.get(flow.name, []), status, window),
        )
        for flow in status.flows
    ]
    counts = Counter(v.verdict for v in verdicts)
    return PageView(
        status,
        flows,
        {k: counts[k] for k in ("failing", "degraded", "healthy")},
        list(reversed(status.verifications)),
        _procedure_charts(status.history),
        window,
        refresh_s,
    )


def reasons(problems: Sequence[Problem]) -> list[Reason]:
    """One reason per check, in the order of the problems (failing ones first)."""
    checks: dict[str, list[Problem]] = {}
    for problem in problems:
        checks.setdefault(problem.check, []).append(problem)
    return [
        Reason(check, SEVERITY[found[0].check], found[0], len(found))
        for check, found in checks.items()
    ]


def group_topics(partitions: Sequence[PartitionLag]) -> list[TopicGroup]:
    """Per topic (partitions sorted by topic, as the snapshot has them): topics with a
    stopped, lost or stale partition first, then by name."""
    groups = []
    for topic, rows in groupby(partitions, key=lambda p: p.topic):
        members = list(rows)
        lags = [p.lag for p in members if p.lag is not None]
        groups.append(
            TopicGroup(
                topic,
                members,
                max(lags) if lags else None,
                sum(1 for p in members if p.state == "stopped"),
                sum(p.lost for p in members),
                sum(1 for p in members if p.stale),
            )
        )
    groups.sort(key=lambda g: (not g.bad, g.topic))
    return groups


def _flow_charts(
    samples: Sequence[FlowSample], status: DrStatus, window: timedelta
) -> tuple[LineChart, LineChart]:
    """Lag, and checkpoint and heartbeat age, with the bounds of the newest sample."""
    bounds = samples[-1].bounds if samples else {}

    def at(sample: FlowSample) -> datetime:
        return sample.sampled_at

    lag = line_chart(
        "Lag",
        "records",
        samples,
        at,
        [
            ("total", "s1", lambda s: s.total_lag),
            ("worst partition", "s2", lambda s: s.max_lag),
        ],
        end=status.generated_at,
        window=window,
        bound=bounds.get("max_lag_records"),
    )
    age = line_chart(
        "Checkpoint and heartbeat age",
        "s",
        samples,
        at,
        [
            ("checkpoint", "s1", lambda s: s.checkpoint_age_s),
            ("heartbeat", "s2", lambda s: s.heartbeat_age_s),
        ],
        end=status.generated_at,
        window=window,
        bound=bounds.get("max_checkpoint_age_s"),
    )
    return lag, age


def _procedure_charts(history: Sequence[RunSummary]) -> list[BarChart]:
    charts = []
    for kind in HISTORY_KINDS:
        runs = [r for r in reversed(history) if r.kind == kind][-PROCEDURE_TREND:]
        if not runs:
            continue
        charts.append(
            bar_chart(
                f"{kind}: duration and downtime",
                "s",
                runs,
                [
                    ("s1", lambda r: r.duration_seconds),
                    ("s2", lambda r: r.downtime_seconds),
                ],
                _run_label,
            )
        )
    return charts


def _run_label(run: RunSummary) -> str:
    return (
        f"{run.kind} {run.run_id} at {run.started_at:%Y-%m-%d %H:%M} UTC, "
        f"{run.outcome or 'in progress'}: duration {_seconds(run.duration_seconds)}, "
        f"downtime {_seconds(run.downtime_seconds)}"
    )


def _seconds(value: float | None) -> str:
    return "unknown" if value is None else f"{value:g} s"
