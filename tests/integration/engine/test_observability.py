"""What operators see: Prometheus metrics over HTTP, `replicator status`, `replicator topics`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from replicator.config import load_config
from replicator.operations.runner import run_flows

from helpers.kafka import free_port_pair
from helpers.replication import preloaded_flow, wait_until

pytestmark = pytest.mark.integration


def _scrape(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            return response.read().decode()
    except urllib.error.URLError:
        return ""  # the endpoint is not up yet


def _cli(*args: str) -> str:
    """The command's stdout; a table's rows one a line (no cell wraps at 1000 columns)."""
    result = subprocess.run(
        [sys.executable, "-m", "replicator", *args],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "COLUMNS": "1000"},
    )
    return result.stdout


def test_metrics_status_and_topics(tmp_path: Path, primary: str, dr: str) -> None:
    port = free_port_pair()
    flow = preloaded_flow(
        tmp_path, primary, dr, "observed", 3_000, 3, extra=(f"metrics.port = {port}",)
    )
    config = load_config(flow.config)
    stop = threading.Event()
    runner = threading.Thread(target=run_flows, args=(list(config.flows), stop), daemon=True)
    runner.start()
    try:
        # One series per topic (no partition label unless metrics.partition.labels).
        labels = f'flow="primary->dr",partition="",topic="{flow.topic}"'
        series = f"replicator_replicated_records_total{{{labels}}}"
        wanted = float(sum(flow.wanted))
        wait_until(lambda: f"{series} {wanted}" in _scrape(port), 60, series)
        assert f"replicator_lag_records{{{labels}}}" in _scrape(port)
        # Both clusters answer (their outages are counted in tests that make them).
        scraped = _scrape(port)
        for cluster, bootstrap in (("primary", primary), ("dr", dr)):
            labels = f'bootstrap="{bootstrap}",cluster="{cluster}"'
            assert f"replicator_cluster_reachable{{{labels}}} 1.0" in scraped
            assert f"replicator_cluster_outages_total{{{labels}}}" in scraped
    finally:
        stop.set()
        runner.join(60)

    rows = json.loads(_cli("status", "--config", str(flow.config), "--json"))
    mine = [r for r in rows if r.get("topic") == flow.topic]
    assert sorted(r["partition"] for r in mine) == [0, 1, 2]
    assert sum(r["replicated"] for r in mine) == 3_000
    assert all(r["error"] is None for r in mine)
    assert f"partition {flow.topic}[0]" in _cli("status", "--config", str(flow.config))

    topics = _cli("topics", "--config", str(flow.config))
    rows = [line.split() for line in topics.splitlines()]
    assert ["primary->dr", flow.topic, flow.remote] in [row[:3] for row in rows]
    assert "__consumer_offsets" in topics and "internal topic" in topics
