"""deploy/monitoring/: every metric the alert rules and the Grafana dashboard query is
one the engine exports (replicator.metrics' registry). `make lint` runs
`promtool check rules` on the rules and `promtool test rules` on their tests."""

from __future__ import annotations

import pytest

from helpers.monitoring import (
    PROMETHEUS_SERIES,
    RULES,
    dashboard_queries,
    exported_families,
    queried_series,
    rule_expressions,
)


def exported_series() -> set[str]:
    return set(exported_families())


def test_every_supervisor_check_has_an_alert() -> None:
    alerts = set(rule_expressions())
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
        "ReplicatorMetricsAbsent",
    }


def test_no_rule_names_a_job_and_each_links_the_runbook() -> None:
    """Rules an operator installs as they are: whatever job the chart's ServiceMonitor or
    a static scrape gives, and each alert leads to what to do."""
    alerts = rule_expressions()
    assert [a for a, expression in alerts.items() if "job=" in expression] == []
    text = RULES.read_text(encoding="utf-8")
    assert text.count('runbook_url: "docs/operations.md#alarms-what-each-one-means"') == len(alerts)


def test_alert_rules_query_only_exported_metrics() -> None:
    exported = exported_series() | PROMETHEUS_SERIES
    for alert, expression in rule_expressions().items():
        names = queried_series(expression)
        assert names, f"{alert}: no metric found in {expression!r}"
        assert names <= exported, f"{alert} queries {sorted(names - exported)}, not exported"


def test_dashboard_queries_only_exported_metrics() -> None:
    exported = exported_series()
    queries = dashboard_queries()
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
