"""deploy/monitoring/: the alert rules pass `promtool check rules` and their own
`promtool test rules`, and every metric the rules and the Grafana dashboard query is
one the engine exports (replicator.metrics' registry)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client.metrics import MetricWrapperBase

from replicator import metrics

ROOT = Path(__file__).resolve().parents[3]
MONITORING = ROOT / "deploy" / "monitoring"
RULES = MONITORING / "replicator-alerts.yml"
RULE_TESTS = MONITORING / "replicator-alerts.test.yml"
DASHBOARD = MONITORING / "replicator-dashboard.json"

#: Series Prometheus itself makes for every scrape target.
_PROMETHEUS_SERIES = {"up"}
_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def exported_series() -> set[str]:
    """The sample names of every family in replicator.metrics, as /metrics shows them."""
    names = set()
    for value in vars(metrics).values():
        if isinstance(value, MetricWrapperBase):
            for family in value.describe():
                names.update(family.name + suffix for suffix in _SUFFIXES[family.type])
    return names


def queried_series(expression: str) -> set[str]:
    """The metric names a PromQL expression selects (ours start with `replicator_`;
    `up` is Prometheus's own)."""
    without_strings = re.sub(r'"[^"]*"', '""', expression)
    names = set(re.findall(r"\breplicator_[a-z_]+\b", without_strings))
    if re.search(r"\bup\s*\{", without_strings):
        names.add("up")
    return names


def _promtool() -> str:
    promtool = shutil.which("promtool")
    assert promtool, (
        "promtool is not installed: it comes with Debian's prometheus package, which "
        "`make setup` installs (apt-get install prometheus)"
    )
    return promtool


def test_alert_rules_are_valid() -> None:
    result = subprocess.run(
        [_promtool(), "check", "rules", str(RULES)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_alert_rules_pass_their_promtool_tests() -> None:
    result = subprocess.run(
        [_promtool(), "test", "rules", RULE_TESTS.name],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=MONITORING,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _rule_expressions() -> dict[str, str]:
    """alert name -> expression, read without a YAML library: each `expr:` is one line
    or a folded block (`>-`) indented under it."""
    expressions: dict[str, str] = {}
    lines = RULES.read_text().splitlines()
    alert = None
    for index, line in enumerate(lines):
        found = re.match(r"\s*- alert: (\w+)", line)
        if found:
            alert = found.group(1)
            continue
        found = re.match(r"(\s*)expr: (.*)", line)
        if not found or alert is None:
            continue
        indent, value = len(found.group(1)), found.group(2).strip()
        if value == ">-":
            block = []
            for following in lines[index + 1 :]:
                if following.strip() and len(following) - len(following.lstrip()) <= indent:
                    break
                block.append(following.strip())
            value = " ".join(block)
        expressions[alert] = value
    return expressions


def test_every_supervisor_check_has_an_alert() -> None:
    alerts = set(_rule_expressions())
    assert alerts == {
        "ReplicatorWorkerDown",
        "ReplicatorPartitionStopped",
        "ReplicatorLagHigh",
        "ReplicatorLatencyHigh",
        "ReplicatorCheckpointsStalled",
        "ReplicatorHeartbeatsStalled",
        "ReplicatorOffsetSyncsStalled",
        "ReplicatorRecordsLost",
        "ReplicatorRecordsSkipped",
    }


def test_alert_rules_query_only_exported_metrics() -> None:
    exported = exported_series() | _PROMETHEUS_SERIES
    for alert, expression in _rule_expressions().items():
        names = queried_series(expression)
        assert names, f"{alert}: no metric found in {expression!r}"
        assert names <= exported, f"{alert} queries {sorted(names - exported)}, not exported"


def _dashboard_queries() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [
        (panel["title"], target["expr"])
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    ]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            queries.append((f"variable {variable['name']}", variable["definition"]))
    return queries


def test_dashboard_queries_only_exported_metrics() -> None:
    exported = exported_series()
    queries = _dashboard_queries()
    assert len(queries) >= 15
    for title, expression in queries:
        names = queried_series(expression)
        assert names, f"panel {title!r}: no metric of the engine in {expression!r}"
        assert names <= exported, f"panel {title!r} queries {sorted(names - exported)}"


def test_the_check_sees_a_name_that_is_not_exported() -> None:
    """The checks above would catch a renamed metric (the old names, for one)."""
    exported = exported_series()
    assert "replicator_replicated_records_total" in exported
    assert "replicator_replication_latency_seconds_bucket" in exported
    for old in ("replicator_records_replicated_total", "replicator_partition_stopped"):
        assert queried_series(f"rate({old}[1m])") - exported == {old}


@pytest.mark.parametrize(
    ("expression", "names"),
    [
        ('sum(rate(replicator_a_total{flow=~"x"}[1m]))', {"replicator_a_total"}),
        ('up{job="replicator"} == 0', {"up"}),
        ('replicator_b{topic="replicator_not_a_metric"}', {"replicator_b"}),
    ],
)
def test_queried_series(expression: str, names: set[str]) -> None:
    assert queried_series(expression) == names
