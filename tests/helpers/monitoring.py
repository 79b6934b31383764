"""What the monitoring tests share: the metric names a PromQL expression queries, the
expressions of deploy/monitoring/'s alert rules and Grafana dashboard, and the sample
names replicator.metrics exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client.metrics import MetricWrapperBase

from replicator import metrics

MONITORING = Path(__file__).resolve().parents[2] / "deploy" / "monitoring"
RULES = MONITORING / "replicator-alerts.yml"
RULE_TESTS = MONITORING / "replicator-alerts.test.yml"
DASHBOARD = MONITORING / "replicator-dashboard.json"

#: Series Prometheus itself makes for every scrape target.
PROMETHEUS_SERIES = frozenset({"up"})
_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def exported_families() -> dict[str, str]:
    """Sample name -> family name of every family in replicator.metrics, as /metrics
    shows them (a counter's samples end in _total, a histogram's in _bucket...)."""
    names = {}
    for value in vars(metrics).values():
        if isinstance(value, MetricWrapperBase):
            for family in value.describe():
                for suffix in _SUFFIXES[family.type]:
                    names[family.name + suffix] = family.name
    return names


def queried_series(expression: str) -> set[str]:
    """The metric names a PromQL expression selects (ours start with `replicator_`;
    `up` is Prometheus's own); names inside label values do not count."""
    without_strings = re.sub(r'"[^"]*"', '""', expression)
    names = set(re.findall(r"\breplicator_[a-z_]+\b", without_strings))
    if re.search(r"\bup\s*\{", without_strings):
        names.add("up")
    return names


def rule_expressions() -> dict[str, str]:
    """alert name -> expression, read without a YAML library: each `expr:` is one line
    or a folded block (`>-`) indented under it."""
    expressions: dict[str, str] = {}
    lines = RULES.read_text(encoding="utf-8").splitlines()
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


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title or variable, PromQL) of every query of the Grafana dashboard."""
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    queries = [
        (panel["title"], target["expr"])
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    ]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            queries.append((f"variable {variable['name']}", variable["definition"]))
    return queries
