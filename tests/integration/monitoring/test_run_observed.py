"""`replicator run --log-format json` as operators run it: its output is JSON lines
only (timestamp, level, logger, event), no secret of the config in them, and its
/metrics serve every metric the shipped dashboard and alert rules query."""

from __future__ import annotations

import json
import signal
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from helpers.kafka import free_port_pair
from helpers.monitoring import (
    dashboard_queries,
    exported_families,
    queried_series,
    rule_expressions,
)
from helpers.replication import end_offsets, preloaded_flow, start_replicator, wait_until

pytestmark = pytest.mark.integration

SECRET = "Sup3r-Secret-Passw0rd"


def _scrape(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            return response.read().decode()
    except urllib.error.URLError:
        return ""  # not up yet


def test_json_logs_and_live_metrics(tmp_path: Path, primary: str, dr: str) -> None:
    port = free_port_pair()
    flow = preloaded_flow(
        tmp_path, primary, dr, "json-logs", 200, 2,
        extra=(
            f"metrics.port = {port}",
            # A credential the clusters do not use (PLAINTEXT): it must never be logged.
            "primary.sasl.username = alice",
            f"primary.sasl.password = {SECRET}",
        ),
    )  # fmt: skip
    log = tmp_path / "run.log"
    process = start_replicator(flow.config, log, "--log-format", "json")
    try:
        wait_until(lambda: end_offsets(dr, flow.remote, 2) == flow.wanted, 60, "the copy")
        labels = f'flow="primary->dr",partition="",topic="{flow.topic}"'
        series = f"replicator_replicated_records_total{{{labels}}} 200.0"
        wait_until(lambda: series in _scrape(port), 30, series)
        scraped = _scrape(port)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)

    # Which data path the flow's records take, and that its worker ran.
    assert 'replicator_data_path{flow="primary->dr",path="compiled"} 1.0' in scraped
    assert 'replicator_worker_running{flow="primary->dr"' in scraped
    # Every family the dashboard and the rules query is served (HELP/TYPE at least).
    families = exported_families()
    queried = {name for _, query in dashboard_queries() for name in queried_series(query)}
    queried |= {n for query in rule_expressions().values() for n in queried_series(query)}
    for name in sorted(queried - {"up"}):
        # A counter's TYPE line names its samples (x_total), a histogram's its family.
        served = f"# TYPE {name} " in scraped or f"# TYPE {families[name]} " in scraped
        assert served, f"{name} not on /metrics"

    text = log.read_text(encoding="utf-8")
    assert SECRET not in text
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) >= 3, text
    for line in lines:
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            pytest.fail(f"not a JSON line: {line!r}")
        assert isinstance(entry, dict), line
        assert {"timestamp", "level", "logger", "event"} <= entry.keys(), line
    events = [json.loads(line)["event"] for line in lines]
    assert any("replicating" in str(event) for event in events), events
    assert process.returncode in (0, -signal.SIGTERM), process.returncode
