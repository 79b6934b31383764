"""The shipped monitoring against a real Prometheus (Debian's `prometheus`) scraping a
real `replicator run`: the alert rules load and evaluate on the engine's series, every
dashboard query is valid PromQL that Prometheus answers, the throughput and lag are
there, and every panel of the dashboard shows data. Screenshots are kept in
.data/test-artifacts/monitoring/: the dashboard's panels drawn from this Prometheus by
tests/helpers/dashboard_preview.py (dashboard.png, the README's picture; Grafana itself
cannot be installed here, see docs/monitoring.md) and Prometheus's own UI."""

from __future__ import annotations

import json
import math
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from helpers.browser import chromium, full_page_screenshot, show
from helpers.dashboard_preview import Preview, prometheus, render
from helpers.kafka import create_topic, free_port_pairs, unique_topic
from helpers.monitoring import RULES, dashboard_queries, rule_expressions
from helpers.replication import PacedProduction, start_replicator, wait_until, write_config

pytestmark = pytest.mark.integration

PROMETHEUS = Path("/usr/bin/prometheus")
ARTIFACTS = Path(__file__).resolve().parents[3] / ".data" / "test-artifacts" / "monitoring"
RECORDS, RATE, PARTITIONS = 4_000, 200, 2


def _get(url: str) -> dict | None:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.loads(response.read())
    except (urllib.error.URLError, ConnectionError):
        return None  # not up yet


def _query(base: str, expression: str) -> dict:
    answer = _get(f"{base}/api/v1/query?{urllib.parse.urlencode({'query': expression})}")
    assert answer is not None, f"Prometheus did not answer {expression!r}"
    return answer


def _value(base: str, expression: str) -> float | None:
    """The first sample's value; None when there is none or Prometheus is not up yet."""
    answer = _get(f"{base}/api/v1/query?{urllib.parse.urlencode({'query': expression})}")
    result = answer["data"]["result"] if answer else None
    return float(result[0]["value"][1]) if result else None


def _heartbeats(metrics_port: int, metric: str) -> list[float]:
    """The engine's own endpoint: the values of `metric` for the `heartbeats` topic."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
            text = r.read().decode()
    except (urllib.error.URLError, OSError):
        return []
    return [
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == metric
        for sample in family.samples
        if sample.labels.get("topic") == "heartbeats"
    ]


def _start_prometheus(workdir: Path, scrape_port: int, port: int) -> subprocess.Popen[bytes]:
    assert PROMETHEUS.exists(), "prometheus is not installed: `make setup` installs it"
    config = workdir / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"rule_files:\n  - {RULES}\n"
        "scrape_configs:\n  - job_name: replicator\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{scrape_port}']\n",
        encoding="utf-8",
    )
    log = (workdir / "prometheus.log").open("ab")
    return subprocess.Popen(
        [
            str(PROMETHEUS),
            f"--config.file={config}",
            f"--storage.tsdb.path={workdir / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def test_prometheus_scrapes_the_engine_with_the_shipped_rules(
    tmp_path: Path, primary: str, dr: str
) -> None:
    topic = unique_topic("prom")
    create_topic(primary, topic, partitions=PARTITIONS)
    metrics_port, prometheus_port = free_port_pairs(2)
    config = write_config(
        tmp_path, primary, dr, topic,
        extra=(f"metrics.port = {metrics_port}", "emit.checkpoints.interval.seconds = 5"),
    )  # fmt: skip
    base = f"http://127.0.0.1:{prometheus_port}"
    replicator = start_replicator(config, tmp_path / "replicator.log")
    # The shared source cluster's `heartbeats` topic holds other tests' heartbeats, some
    # minutes old; their copies rightly count as minutes of replication latency (sampled
    # at each offset sync), which would leave ReplicatorLatencyHigh pending. Prometheus
    # starts once the engine has caught up on them and synced past them, so its rates
    # cover only this test's traffic.
    engine_log = tmp_path / "replicator.log"
    wait_until(lambda: _heartbeats(metrics_port, "replicator_lag_records") == [0], 120,
               f"the heartbeats' backlog replicated (see {engine_log})")  # fmt: skip
    caught_up = time.time()
    wait_until(
        lambda: (
            max(_heartbeats(metrics_port, "replicator_offset_sync_timestamp_seconds"), default=0)
            > caught_up
        ),
        60,
        f"an offset sync of the heartbeats after the backlog (see {engine_log})",
    )
    started = time.time()
    server = _start_prometheus(tmp_path, metrics_port, prometheus_port)
    try:
        wait_until(
            lambda: server.poll() is None and _value(base, 'up{job="replicator"}') == 1,
            60,
            f"the scrape (see {tmp_path / 'prometheus.log'})",
        )
        assert server.poll() is None, (tmp_path / "prometheus.log").read_text()
        with PacedProduction(primary, topic, RECORDS, PARTITIONS, RATE):
            wait_until(
                lambda: (
                    (_value(base, "sum(rate(replicator_replicated_records_total[10s]))") or 0)
                    > RATE / 2
                ),
                60,
                "a replication rate",
            )
        total = f'sum(replicator_replicated_records_total{{topic="{topic}"}})'
        wait_until(lambda: _value(base, total) == RECORDS, 60, f"{RECORDS} replicated")
        # The rules evaluate on the live series without error, and none fires.
        rules = _get(f"{base}/api/v1/rules")
        assert rules is not None
        loaded = {r["name"]: r for g in rules["data"]["groups"] for r in g["rules"]}
        assert set(loaded) == set(rule_expressions())
        for name, rule in loaded.items():
            assert rule["health"] == "ok", (name, rule.get("lastError"))
            assert rule["state"] == "inactive", (name, rule["alerts"])
        # Every dashboard query is valid PromQL Prometheus answers.
        for title, expression in dashboard_queries():
            promql = expression.replace("$flow", ".*").replace("$__rate_interval", "1m")
            if promql.startswith("label_values("):
                metric = promql.removeprefix("label_values(").split(",")[0]
                assert _value(base, f"count({metric})"), title
                continue
            answer = _query(base, promql)
            assert answer["status"] == "success", (title, answer)
        assert _value(base, "sum(replicator_lag_records)") == 0
        assert _value(base, 'sum(replicator_data_path{path="compiled"})') == 1
        # The dashboard as it looks now, over the whole run (Prometheus's data begins
        # at `started`): every panel shows data.
        now = time.time()
        preview = render(
            prometheus(base),
            now=now,
            range_s=max(30, math.ceil(now - started)),
            scrape_interval_s=1,
        )
        assert preview.panels_without_data() == [], (
            f"dashboard panels showing 'No data': {preview.panels_without_data()}; "
            f"queries with no series: {preview.empty_queries()}"
        )
        _screenshots(base, topic, preview)
    finally:
        for process in (replicator, server):
            process.send_signal(signal.SIGTERM)
        for process in (replicator, server):
            process.wait(timeout=60)


def _screenshots(base: str, topic: str, preview: Preview) -> None:
    """The dashboard preview, Prometheus's own graph page of the engine's throughput and
    lag, and its alerts page."""
    if ARTIFACTS.exists():
        shutil.rmtree(ARTIFACTS)
    ARTIFACTS.mkdir(parents=True)
    page = ARTIFACTS / "dashboard.html"
    page.write_text(preview.html, encoding="utf-8")
    # Queries that returned nothing in panels that show data through another query.
    (ARTIFACTS / "dashboard-empty-queries.json").write_text(
        json.dumps(preview.empty_queries(), indent=2), encoding="utf-8"
    )
    rate = f'rate(replicator_replicated_records_total{{topic="{topic}"}}[5s])'
    graph = urllib.parse.urlencode(
        {
            "g0.expr": f"sum by (topic) ({rate})",
            "g0.tab": "0",
            "g0.range_input": "2m",
            "g1.expr": "sum by (flow) (replicator_lag_records)",
            "g1.tab": "0",
            "g1.range_input": "2m",
        }
    )
    with chromium(ARTIFACTS) as driver:
        driver.get(page.as_uri())
        full_page_screenshot(driver, ARTIFACTS / "dashboard.png", width=1600)
        assert show(driver, f"{base}/graph?{graph}", "replicator_replicated_records_total")
        driver.implicitly_wait(0)
        wait_until(lambda: driver.find_elements("css selector", "svg"), 30, "the graphs drawn")
        assert driver.save_screenshot(str(ARTIFACTS / "prometheus-graph.png"))
        # The rules' state was checked through the API above; this page is for people
        # (Debian's build serves the classic UI; the pages other than the graph are
        # under /classic/).
        assert show(driver, f"{base}/classic/alerts", "ReplicatorLagHigh")
        assert driver.save_screenshot(str(ARTIFACTS / "prometheus-alerts.png"))
