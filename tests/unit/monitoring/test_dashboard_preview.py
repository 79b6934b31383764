"""The dashboard preview (tests/helpers/dashboard_preview.py) on fixed Prometheus
answers, no server: panels at their grid positions, legends filled from the series'
labels, values in the panel's unit, "No data" where a query returned nothing, and a
refused query named with its panel."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

import pytest

from helpers.dashboard_preview import CAPTION, axis_step, formatter, render

NOW = 1_790_000_000.0
RED_AT_5 = {"color": "red", "value": 5}


def _dashboard(tmp_path: Path, panels: list[dict]) -> Path:
    path = tmp_path / "dashboard.json"
    path.write_text(
        json.dumps(
            {
                "title": "Replicator",
                "templating": {
                    "list": [
                        {"name": "datasource", "type": "datasource"},
                        {"name": "flow", "type": "query", "includeAll": True, "allValue": ".*"},
                    ]
                },
                "panels": panels,
            }
        ),
        encoding="utf-8",
    )
    return path


def _panel(kind: str, title: str, grid: tuple[int, int, int, int], unit: str, *targets: dict):
    x, y, w, h = grid
    return {
        "type": kind,
        "title": title,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {
            "defaults": {
                "unit": unit,
                "thresholds": {"steps": [{"color": "green", "value": None}, RED_AT_5]},
            }
        },
        "options": {},
        "targets": list(targets),
    }


class FixedPrometheus:
    """Answers each query from `answers` (expression -> result list); records the calls."""

    def __init__(self, answers: Mapping[str, list[dict]]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, dict[str, str]]] = []

    def __call__(self, path: str, params: Mapping[str, str]) -> dict:
        self.calls.append((path, dict(params)))
        result_type = "vector" if path == "/api/v1/query" else "matrix"
        return {
            "status": "success",
            "data": {"resultType": result_type, "result": self.answers[params["query"]]},
        }


RATE = 'sum by (flow, topic) (rate(replicator_replicated_records_total{flow=~".*"}[1m]))'
LAG = 'sum(replicator_lag_records{flow=~".*"})'
AGE = 'time() - max(replicator_checkpoint_success_timestamp_seconds{flow=~".*"})'


def _all(expression: str) -> str:
    """The dashboard's form of `expression`: `$flow` where the preview puts `.*`."""
    return expression.replace(".*", "$flow")


def _range(values: list[float], step: float = 2.0) -> list[list]:
    return [[NOW - step * (len(values) - 1 - i), str(v)] for i, v in enumerate(values)]


@pytest.fixture
def preview(tmp_path: Path):
    dashboard = _dashboard(
        tmp_path,
        [
            _panel("stat", "Lag (records)", (0, 0, 4, 4), "short", {"expr": _all(LAG)}),
            _panel("stat", "Checkpoint age", (4, 0, 4, 4), "s", {"expr": _all(AGE)}),
            _panel(
                "timeseries",
                "Replicated records/s",
                (0, 4, 12, 8),
                "count:records/s",
                {"expr": _all(RATE), "legendFormat": "{{flow}} {{topic}}"},
            ),
        ],
    )
    prometheus = FixedPrometheus(
        {
            LAG: [{"metric": {}, "value": [NOW, "1234"]}],
            AGE: [{"metric": {}, "value": [NOW, "7.5"]}],
            RATE: [
                {
                    "metric": {"flow": "primary->dr", "topic": "orders"},
                    "values": _range([0, 150, 200, 2500]),
                },
                {"metric": {"flow": "primary->dr", "topic": "payments"}, "values": _range([0, 0])},
            ],
        }
    )
    return render(prometheus, now=NOW, range_s=200, dashboard_path=dashboard), prometheus


def test_each_panel_asks_prometheus_as_its_type_says(preview) -> None:
    result, prometheus = preview
    paths = {params["query"]: (path, params) for path, params in prometheus.calls}
    assert paths[LAG] == ("/api/v1/query", {"query": LAG, "time": f"{NOW:.3f}"})
    path, params = paths[RATE]
    assert path == "/api/v1/query_range"
    assert float(params["end"]) - float(params["start"]) == 200
    assert params["step"] == "2"  # ~100 points over the range
    assert [p.has_data for p in result.panels] == [True, True, True]
    assert result.panels_without_data() == [] and result.empty_queries() == []


def test_panels_sit_at_their_grid_positions(preview) -> None:
    html = preview[0].html
    positions = re.findall(
        r'data-panel="([^"]+)"[^>]*\s+style="grid-column: (\d+) / span (\d+); '
        r'grid-row: (\d+) / span (\d+)"',
        html,
    )
    assert positions == [
        ("Lag (records)", "1", "4", "1", "4"),
        ("Checkpoint age", "5", "4", "1", "4"),
        ("Replicated records/s", "1", "12", "5", "8"),
    ]
    assert "grid-template-columns: repeat(24," in html
    assert "<script" not in html and "http://" not in html.replace(
        'xmlns="http://www.w3.org/2000/svg"', ""
    )
    assert CAPTION in html and "<h1>Replicator</h1>" in html


def test_legends_units_and_thresholds(preview) -> None:
    result, _ = preview
    rate = result.panels[2]
    names = [s.name for t in rate.targets for s in t.series]
    assert names == ["primary->dr orders", "primary->dr payments"]
    html = result.html
    assert "primary-&gt;dr orders" in html and "primary-&gt;dr payments" in html
    assert ">1.23 K<" in html  # the lag, `short`
    assert ">7.5 s<" in html  # the checkpoint age, `s`
    assert ">3K records/s<" in html  # the y axis of the rate, `count:records/s`
    assert html.count("<polyline") == 2
    # Both passed their red threshold (5).
    colors = re.findall(r"background: linear-gradient\(120deg,\s*(#\w+)", html)
    assert colors == ["#F2495C", "#F2495C"]


def test_a_query_with_no_answer_shows_no_data(tmp_path: Path) -> None:
    dashboard = _dashboard(
        tmp_path, [_panel("stat", "Lag (records)", (0, 0, 4, 4), "short", {"expr": LAG})]
    )
    result = render(FixedPrometheus({LAG: []}), now=NOW, dashboard_path=dashboard)
    assert result.panels_without_data() == ["Lag (records)"]
    assert result.empty_queries() == [("Lag (records)", LAG)]
    assert "No data" in result.html


def test_a_refused_query_names_its_panel(tmp_path: Path) -> None:
    dashboard = _dashboard(
        tmp_path, [_panel("stat", "Lag (records)", (0, 0, 4, 4), "short", {"expr": "sum("})]
    )

    def refusing(path: str, params: Mapping[str, str]) -> dict:
        return {"status": "error", "errorType": "bad_data", "error": "unexpected end of input"}

    with pytest.raises(AssertionError, match=r"panel 'Lag \(records\)'.*'sum\('.*bad_data"):
        render(refusing, now=NOW, dashboard_path=dashboard)


def test_an_unknown_unit_or_variable_is_an_error(tmp_path: Path) -> None:
    odd_unit = _dashboard(
        tmp_path, [_panel("stat", "Odd", (0, 0, 4, 4), "furlongs", {"expr": LAG})]
    )
    with pytest.raises(ValueError, match=r"panel 'Odd': unit 'furlongs'"):
        render(FixedPrometheus({}), now=NOW, dashboard_path=odd_unit)
    odd_variable = _dashboard(
        tmp_path, [_panel("stat", "Odd", (0, 0, 4, 4), "short", {"expr": 'sum(x{a=~"$cluster"})'})]
    )
    with pytest.raises(ValueError, match=r"panel 'Odd': \$cluster"):
        render(FixedPrometheus({}), now=NOW, dashboard_path=odd_variable)


@pytest.mark.parametrize(
    ("unit", "value", "shown"),
    [
        ("short", 0, "0"),
        ("short", 42, "42"),
        ("short", 1500, "1.5 K"),
        ("short", 2_000_000, "2 Mil"),
        ("s", 0.25, "250 ms"),
        ("s", 12.5, "12.5 s"),
        ("s", 90, "1.5 min"),
        ("s", 7200, "2 hour"),
        ("Bps", 512, "512 B/s"),
        ("Bps", 51_200, "51.2 kB/s"),
        ("count:records/s", 200, "200 records/s"),
        ("count:records/s", 4500, "4.5K records/s"),
        ("suffix:ms", 3, "3 ms"),
    ],
)
def test_units_as_grafana_shows_them(unit: str, value: float, shown: str) -> None:
    assert formatter(unit)(value) == shown


def test_the_shipped_dashboard_renders(tmp_path: Path) -> None:
    """Every panel of deploy/monitoring/ draws (its type, unit and variables are known)
    when each query answers one series."""

    def one_series(path: str, params: Mapping[str, str]) -> dict:
        assert "$" not in params["query"], params["query"]
        if path == "/api/v1/query":
            return {
                "status": "success",
                "data": {"resultType": "vector", "result": [{"metric": {}, "value": [NOW, "1"]}]},
            }
        values = _range([1, 2, 3])
        return {
            "status": "success",
            "data": {
                "resultType": "matrix",
                "result": [{"metric": {"flow": "a->b"}, "values": values}],
            },
        }

    result = render(one_series, now=NOW)
    assert len(result.panels) == 16
    assert result.panels_without_data() == []
    (tmp_path / "dashboard.html").write_text(result.html, encoding="utf-8")


def test_axis_steps() -> None:
    assert axis_step(2500) == 1000
    assert axis_step(1) == 0.25
    assert axis_step(600, seconds=True) == 300  # whole minutes on a duration axis
    assert axis_step(600) == 200


@pytest.mark.parametrize(("scrape_s", "window"), [(15, "60s"), (1, "4s"), (0.5, "3s")])
def test_rate_interval_as_grafana_makes_it(tmp_path: Path, scrape_s: float, window: str) -> None:
    """max(4 scrape intervals, step + one scrape interval); the step is 2 s here."""
    expr = "sum(rate(replicator_replicated_records_total[$__rate_interval]))"
    dashboard = _dashboard(
        tmp_path, [_panel("timeseries", "R", (0, 0, 12, 8), "short", {"expr": expr})]
    )
    asked = expr.replace("$__rate_interval", window)
    prometheus = FixedPrometheus({asked: []})
    render(prometheus, now=NOW, range_s=200, scrape_interval_s=scrape_s, dashboard_path=dashboard)
    assert [params["query"] for _, params in prometheus.calls] == [asked]
