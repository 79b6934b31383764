"""The DR status page rendered from a snapshot built in memory (no Kafka, no Airflow):
the verdict at the top, charts as inline SVG, partitions grouped per topic, the
verification trend and the procedures' bars, autoescaping, nothing fetched from
outside; and a real estate's 200 topics x 50 partitions rendered under a second."""

from __future__ import annotations

import re
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from replicator_airflow.status_charts import HEIGHT, WIDTH, bar_chart, line_chart
from replicator_airflow.status_render import render_run, render_status

from replicator.operations.dr_status import (
    AclSyncInfo,
    CheckpointInfo,
    ClusterStatus,
    DrStatus,
    FlowStatus,
    PartitionLag,
    RunSummary,
    WorkerInfo,
)
from replicator.operations.health import Bounds, Problem
from replicator.operations.verdicts import FlowVerdict, Overview
from replicator.statestore import Application, FlowSample, RunRecord

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
FLOW = "primary->dr"


def _estate(topics: int, partitions: int) -> FlowStatus:
    """A flow of `topics` x `partitions`; topic.007[3] stopped, topic.011[0] lost 2."""
    rows = [
        PartitionLag(
            f"topic.{t:03d}",
            p,
            "stopped" if (t, p) == (7, 3) else "replicating",
            (t * 31 + p) % 900,
            1000 + p,
            1000 + p,
            2 if (t, p) == (11, 0) else 0,
            "record too large <script>alert(1)</script>" if (t, p) == (7, 3) else None,
            NOW - timedelta(seconds=2),
            False,
        )
        for t in range(topics)
        for p in range(partitions)
    ]
    worker = WorkerInfo("w1", "running", "host", 1, len(rows), True, NOW, NOW)
    checkpoint = CheckpointInfo("primary.checkpoints.internal", 3, ["g"], NOW, 12.5)
    return FlowStatus(FLOW, "primary", "dr", "running", [worker], rows, checkpoint)


def _overview(flow: FlowStatus) -> Overview:
    drills = [
        RunSummary(
            f"drill-{i}",
            "drill",
            FLOW,
            "non-disruptive",
            "succeeded",
            0,
            3.0 + i,
            NOW - timedelta(days=i),
            NOW - timedelta(days=i) + timedelta(seconds=20),
            10.0 + i,
            2.0 + i,
        )
        for i in range(4)
    ]
    verifications = [
        RunSummary(
            f"verification-{i}",
            "verification",
            FLOW,
            None,
            "failed" if i == 0 else "succeeded",
            12,
            None,
            NOW - timedelta(hours=i),
            NOW,
            data_docs="/site/index.html",
            failed_suites=["lag"] if i == 0 else [],
            suites=3,
            rows_checked=1200,
            failed_expectations=2 if i == 0 else 0,
            incremental=True,
            records_verified=3_600,
            records_verified_before=1_200_000,
            reverified={"orders[2]": "dr.orders was deleted and created again"},
            sampled_ranges=3,
            sampled_records=7_000,
        )
        for i in range(5)
    ]
    status = DrStatus(
        NOW,
        [ClusterStatus("primary", "p:9092", True, 1), ClusterStatus("dr", "d:9092", True, 1)],
        [flow],
        [Application("orders-app", "dr", False, 2, NOW)],
        verifications[0],
        drills,
        verifications=verifications,
    )
    bounds = {"max_lag_records": 800, "max_checkpoint_age_s": 300.0}
    samples = [
        FlowSample(FLOW, NOW - timedelta(minutes=m), 1, 500 + m, 100 + m, 10.0, 1.5, (), bounds)
        for m in range(180, 0, -1)
    ]
    stopped = Problem(FLOW, "stopped", "topic.007[3]", "stopped by its failure policy: x", "fix")
    lag = [Problem(FLOW, "lag", f"topic.{t:03d}[0]", "behind", "add workers") for t in range(3)]
    verdict = FlowVerdict(FLOW, "failing", [stopped, *lag], [], NOW - timedelta(seconds=40))
    return Overview(status, [verdict], {FLOW: samples})


def test_the_verdict_comes_first_with_its_reasons_and_charts() -> None:
    html = render_status(_overview(_estate(3, 4)))
    verdict = html.index('data-verdict-flow="primary-&gt;dr" data-verdict="failing"')
    assert verdict < html.index("<h2>Clusters</h2>")
    assert '<span class="badge failing">1 failing</span>' in html
    # One line per check: three lag problems are one reason, counted.
    assert re.search(r'data-check="stopped".*?topic\.007\[3\]', html, flags=re.S)
    assert re.search(r'data-check="lag"[^>]*><span class="warn">lag &times;3</span>', html)
    # The charts: inline SVG polylines from the samples, the supervisor's bound dashed.
    for key in ("lag", "age"):
        chart = re.search(rf'<figure class="chart" data-chart="{key}">(.*?)</figure>', html, re.S)
        assert chart is not None and chart.group(1).count("<polyline") == 2
        assert "180 samples" in chart.group(1)
    assert '<line class="bound"' in html


def test_partitions_are_grouped_per_topic_worst_first_and_text_is_escaped() -> None:
    html = render_status(_overview(_estate(12, 4)))
    topics = re.findall(r'data-topic-summary="([^"]+)"', html)
    assert topics[:2] == ["topic.007", "topic.011"]  # a stopped, then a lost partition
    assert len(topics) == 12 and topics[2:] == sorted(topics[2:])
    summary = re.search(r'data-topic-summary="topic.007">\s*<summary>(.*?)</summary>', html)
    assert summary is not None
    assert '<span class="stopped bad">1 stopped</span>' in summary.group(1)
    assert html.count('<tr data-flow="primary-&gt;dr" data-topic=') == 48
    assert "record too large &lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>alert" not in html


def test_verification_figures_trend_and_procedure_bars() -> None:
    html = render_status(_overview(_estate(1, 1)))
    assert '<p data-verification="verification-0">' in html
    assert 'class="data-docs" href="runs/verification-0/data-docs/index.html"' in html
    assert '<td class="num failed-expectations">2</td>' in html
    verified = re.search(r'<p data-item="verified">(.*?)</p>', html, flags=re.S)
    assert verified is not None
    assert verified.group(1).startswith("Incremental: 3600 records verified by this run")
    assert "of which 7000 re-read in 3 sampled ranges." in verified.group(1)
    assert "orders[2] verified whole again: dr.orders was deleted and created again" in html
    trend = re.search(r'data-trend="verification">(.*?)</p>', html, flags=re.S)
    assert trend is not None
    assert re.findall(r'<a class="(\w+)"', trend.group(1)) == ["ok"] * 4 + ["bad"]
    bars = re.search(r'data-chart="procedure-1">(.*?)</figure>', html, flags=re.S)
    assert bars is not None and bars.group(1).count("<rect") == 8  # duration + downtime x 4
    assert '<tr data-run="drill-0">' in html
    assert 'href="runs/drill-0/report.html" download' in html


def test_the_page_fetches_nothing() -> None:
    html = render_status(_overview(_estate(2, 2)))
    assert not re.search(r'(src|href)="(https?:)?//', html)
    assert "<link" not in html and "@import" not in html
    assert re.findall(r"<script[^>]*>", html) == ["<script>"]  # the inline refresh only


def test_acl_sync_per_flow() -> None:
    def cell(acl: AclSyncInfo | None) -> str:
        html = render_status(_overview(replace(_estate(1, 1), acl_sync=acl)))
        found = re.search(r'<td class="acl-sync">(.*?)</td>', html, flags=re.S)
        assert found is not None
        return found.group(1)

    assert cell(AclSyncInfo(False)) == '<span class="muted">off</span>'
    assert cell(AclSyncInfo(True)) == '<span class="warn">on, not synced yet</span>'
    synced = AclSyncInfo(True, 4, NOW, 12.5)
    assert cell(synced) == '<span class="ok">4 ACLs</span> synced 12 s ago'
    failed = replace(synced, error="principal may not ALTER <cluster>")
    assert cell(failed).endswith(
        '<br><span class="bad">last round failed: principal may not ALTER &lt;cluster&gt;</span>'
    )


def test_200_topics_of_50_partitions_render_under_a_second() -> None:
    overview = _overview(_estate(200, 50))
    render_status(overview)  # templates compile once per process, as in the server
    began, cpu = time.perf_counter(), time.process_time()
    html = render_status(overview)
    seconds, cpu_s = time.perf_counter() - began, time.process_time() - cpu
    sys.stdout.write(
        f"\n200 topics x 50 partitions: rendered in {seconds:.3f} s ({cpu_s:.3f} s CPU), "
        f"{len(html) / 1e6:.1f} MB\n"
    )
    assert html.count("<details") == 200
    assert html.count('<tr data-flow="primary-&gt;dr"') == 10_000
    # The render's own cost: CPU time, which other processes on a shared host do not
    # inflate (wall time is printed above; on an idle host the two are close).
    assert cpu_s < 1.0


def test_charts_break_at_missing_values_and_round_their_axis() -> None:
    samples = [(NOW - timedelta(minutes=m), v) for m, v in ((50, 10.0), (40, None), (30, 30.0))]
    chart = line_chart(
        "Lag",
        "records",
        samples,
        lambda s: s[0],
        [("total", "s1", lambda s: s[1])],
        end=NOW,
        window=timedelta(hours=1),
        bound=25.0,
    )
    [series] = chart.series
    assert chart.y_max == 50.0 and series.latest == 30.0
    assert series.segments == [
        f"{WIDTH / 6:.1f},{HEIGHT * 0.8:.1f}",
        f"{WIDTH / 2:.1f},{HEIGHT * 0.4:.1f}",
    ]
    assert chart.bound_y == HEIGHT / 2
    empty = line_chart(
        "Lag",
        "records",
        [],
        lambda s: s,
        [("total", "s1", lambda s: s)],
        end=NOW,
        window=timedelta(hours=1),
    )
    assert (empty.samples, empty.y_max, empty.series[0].segments) == (0, 1.0, [])
    bars = bar_chart("d", "s", [5.0, None], [("s1", lambda r: r)], str)
    assert [(b.height, b.label) for b in bars.bars] == [(HEIGHT, "5.0")]


def test_a_run_page_shows_its_figures_and_records_as_tables() -> None:
    run = RunRecord(
        "drill-1",
        "drill",
        FLOW,
        "non-disruptive",
        {"groups": ["g<1>"]},
        NOW,
        NOW,
        "succeeded",
        0,
        3.75,
        {"duration_seconds": 12.25, "checks": [{"topic": "t", "match": True}]},
    )
    html = render_run(run)
    assert "<th>duration (s)</th><td>12.25</td>" in html
    assert "<th>RTO (s)</th><td>3.75</td>" in html
    assert "<tr><th>topic</th><th>match</th></tr><tr><td>t</td><td>True</td></tr>" in html
    assert "g&lt;1&gt;" in html
    assert Bounds().max_lag_records > 0  # the bounds the page defaults to exist
