"""A preview of the shipped Grafana dashboard (deploy/monitoring/replicator-dashboard.json)
drawn from a real Prometheus, for the docs' picture and for the check that every panel
shows data. Test-side only: Grafana cannot be installed here (docs/monitoring.md), so
this draws what the dashboard's queries return, in the dashboard's layout, the way
Grafana lays it out; it is not Grafana and says so on the page.

- Layout: each panel at its `gridPos` on Grafana's 24-column grid (30 px rows, 8 px gaps).
- Data: `stat` panels ask Prometheus's `/api/v1/query`, `timeseries` panels its
  `/api/v1/query_range` (about 100 points over the range); `$flow` is "All" (`.*`).
- Names: a target's `legendFormat` with `{{label}}` filled from the series' labels.
- Values: formatted with the panel's unit as Grafana formats it (`short`, `s`, `Bps`,
  `count:<unit>`, `suffix:`/`prefix:`); a unit this module does not know is an error.
- Output: one self-contained HTML page (Jinja2, inline SVG; no script, no network).
"""

from __future__ import annotations

import json
import math
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from jinja2 import Environment, StrictUndefined

from helpers.monitoring import DASHBOARD

#: (API path, parameters) -> Prometheus's decoded JSON answer.
Fetch = Callable[[str, Mapping[str, str]], dict]

CAPTION = "rendered from Prometheus by the test; not Grafana"
COLUMNS, ROW_PX, GAP_PX = 24, 30, 8
#: Grafana's classic palette, in its order.
PALETTE = ("#73BF69", "#FADE2A", "#5794F2", "#FF9830", "#F2495C", "#B877D9", "#8AB8FF")
NAMED_COLORS = {"green": "#73BF69", "red": "#F2495C", "yellow": "#FADE2A", "orange": "#FF9830"}
_TITLE_PX, _LEGEND_LINE_PX, _AXIS_PX, _PAD_PX = 32, 18, 18, 8
_LEGEND = re.compile(r"\{\{\s*(\w+)\s*\}\}")
_VARIABLE = re.compile(r"\$(\{)?(\w+)(?(1)\})")


@dataclass(frozen=True)
class Series:
    """One series of a target's answer: its legend name and its (time, value) points
    (NaN where Prometheus answered NaN)."""

    name: str
    points: tuple[tuple[float, float], ...]

    @property
    def has_data(self) -> bool:
        return any(math.isfinite(value) for _, value in self.points)

    @property
    def last(self) -> float | None:
        finite = [value for _, value in self.points if math.isfinite(value)]
        return finite[-1] if finite else None


@dataclass(frozen=True)
class Target:
    """What one query of a panel returned."""

    expr: str
    promql: str
    series: tuple[Series, ...]

    @property
    def has_data(self) -> bool:
        return any(s.has_data for s in self.series)


@dataclass(frozen=True)
class Panel:
    title: str
    type: str
    unit: str
    grid: tuple[int, int, int, int]  # x, y, w, h in grid units
    targets: tuple[Target, ...]

    @property
    def has_data(self) -> bool:
        """What Grafana calls "No data" when False: no query returned a value."""
        return any(t.has_data for t in self.targets)


@dataclass(frozen=True)
class Preview:
    title: str
    panels: tuple[Panel, ...]
    html: str

    def panels_without_data(self) -> list[str]:
        return [p.title for p in self.panels if not p.has_data]

    def empty_queries(self) -> list[tuple[str, str]]:
        """(panel title, expression) of every query that returned nothing, even in a
        panel that shows data through another query."""
        return [(p.title, t.expr) for p in self.panels for t in p.targets if not t.has_data]


def prometheus(base: str, timeout: float = 10.0) -> Fetch:
    """A Fetch asking the Prometheus at `base` (http://host:port)."""

    def fetch(path: str, params: Mapping[str, str]) -> dict:
        url = f"{base}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:  # Prometheus says why in the body (400, 422)
            return json.loads(exc.read())

    return fetch


def render(
    fetch: Fetch,
    *,
    now: float,
    range_s: float = 180.0,
    dashboard_path: Path = DASHBOARD,
    variables: Mapping[str, str] | None = None,
    scrape_interval_s: float = 15.0,
    width_px: int = 1600,
) -> Preview:
    """Run every panel's queries through `fetch` (instant at `now`, ranges over the
    `range_s` seconds before it) and draw the page `width_px` wide. `variables` fill
    the dashboard's `$name`s; by default every query variable is "All" (its allValue).
    `$__rate_interval` is what Grafana makes it from the data source's scrape interval
    (`scrape_interval_s`, Grafana's default 15 s): max(4 scrape intervals, step + one)."""
    dashboard = json.loads(dashboard_path.read_text(encoding="utf-8"))
    values = dict(variables) if variables is not None else _all_values(dashboard)
    step = max(1.0, round(range_s / 100))
    rate_interval = max(4 * scrape_interval_s, step + scrape_interval_s)
    values.setdefault("__rate_interval", f"{math.ceil(rate_interval)}s")
    panels = tuple(
        _collect(panel, fetch, values, now=now, start=now - range_s, step=step)
        for panel in dashboard["panels"]
    )
    html = _page(dashboard, panels, now=now, range_s=range_s, width_px=width_px)
    return Preview(dashboard["title"], panels, html)


def _all_values(dashboard: dict) -> dict[str, str]:
    values = {}
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable["type"] == "query":
            assert variable.get("includeAll"), (
                f"dashboard variable {variable['name']!r} has no 'All': pass its value "
                "in `variables`"
            )
            values[variable["name"]] = variable.get("allValue") or ".*"
    return values


def _substitute(expr: str, values: Mapping[str, str], title: str) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(2)
        if name not in values:
            raise ValueError(
                f"panel {title!r}: ${name} in {expr!r} is no dashboard variable the preview "
                f"knows ({sorted(values)}): pass its value in `variables`"
            )
        return values[name]

    return _VARIABLE.sub(value, expr)


def _collect(
    panel: dict, fetch: Fetch, values: Mapping[str, str], *, now: float, start: float, step: float
) -> Panel:
    title, kind = panel["title"], panel["type"]
    if kind not in ("stat", "timeseries"):
        raise ValueError(f"panel {title!r}: type {kind!r} is not drawn by the preview")
    unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
    formatter(unit, title)  # an unknown unit fails before any query
    grid = panel["gridPos"]
    targets = []
    for target in panel.get("targets", []):
        promql = _substitute(target["expr"], values, title)
        if kind == "stat":
            params = {"query": promql, "time": f"{now:.3f}"}
            answer = _answer(fetch, "/api/v1/query", params, title, promql)
        else:
            params = {"query": promql, "start": f"{start:.3f}", "end": f"{now:.3f}"}
            params["step"] = f"{step:g}"
            answer = _answer(fetch, "/api/v1/query_range", params, title, promql)
        series = tuple(
            Series(
                _legend(target.get("legendFormat"), item["metric"], promql),
                tuple(
                    (float(t), float(v))
                    for t, v in (item["values"] if "values" in item else [item["value"]])
                ),
            )
            for item in answer["result"]
        )
        targets.append(Target(target["expr"], promql, series))
    return Panel(title, kind, unit, (grid["x"], grid["y"], grid["w"], grid["h"]), tuple(targets))


def _answer(fetch: Fetch, path: str, params: Mapping[str, str], title: str, promql: str) -> dict:
    answer = fetch(path, params)
    if answer.get("status") != "success":
        raise AssertionError(
            f"panel {title!r}: Prometheus refused {promql!r} on {path}: "
            f"{answer.get('errorType')}: {answer.get('error')}"
        )
    data = answer["data"]
    expected = "vector" if path.endswith("/query") else "matrix"
    if data["resultType"] != expected:
        raise AssertionError(
            f"panel {title!r}: {promql!r} answered a {data['resultType']}, expected a {expected}"
        )
    return data


def _legend(legend_format: str | None, labels: Mapping[str, str], promql: str) -> str:
    """Grafana's series name: the legendFormat with `{{label}}` filled (absent labels
    empty), else the series' labels, else the expression."""
    if legend_format:
        name = _LEGEND.sub(lambda m: labels.get(m.group(1), ""), legend_format)
        return " ".join(name.split())
    shown = {k: v for k, v in labels.items() if k != "__name__"}
    inside = ", ".join(f'{k}="{v}"' for k, v in sorted(shown.items()))
    if labels.get("__name__"):
        return f"{labels['__name__']}{{{inside}}}" if inside else labels["__name__"]
    return f"{{{inside}}}" if inside else promql


# --- units, as Grafana formats them -------------------------------------------------


def _fixed(value: float) -> str:
    """Three significant digits at most, without trailing zeros (Grafana's auto
    decimals, near enough)."""
    if value == 0:
        return "0"
    size = abs(value)
    decimals = 0 if size >= 100 else 1 if size >= 10 else 2 if size >= 0.01 else 4
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _scaled(value: float, factor: float, suffixes: Sequence[str]) -> str:
    steps = 0
    while abs(value) >= factor and steps < len(suffixes) - 1:
        value /= factor
        steps += 1
    return _fixed(value) + suffixes[steps]


def _seconds(value: float) -> str:
    size = abs(value)
    if size == 0:
        return "0 s"
    for limit, divisor, name in (
        (0.001, 1e-6, "µs"),
        (1, 1e-3, "ms"),
        (60, 1, "s"),
        (3600, 60, "min"),
        (86400, 3600, "hour"),
        (604800, 86400, "day"),
    ):
        if size < limit:
            return f"{_fixed(value / divisor)} {name}"
    return f"{_fixed(value / 604800)} week"


def formatter(unit: str, title: str = "") -> Callable[[float], str]:
    """The formatting of Grafana's unit `unit` (the ones the dashboard uses, and the
    custom `count:`, `suffix:`, `prefix:` forms)."""
    if unit in ("", "none"):
        return _fixed
    if unit == "short":
        return lambda v: _scaled(v, 1000, ("", " K", " Mil", " Bil", " Tri"))
    if unit == "s":
        return _seconds
    if unit == "ms":
        return lambda v: _seconds(v / 1000)
    if unit == "Bps":  # bytes/sec (SI)
        return lambda v: _scaled(v, 1000, (" B/s", " kB/s", " MB/s", " GB/s", " TB/s"))
    if unit == "bytes":  # bytes (IEC)
        return lambda v: _scaled(v, 1024, (" B", " KiB", " MiB", " GiB", " TiB"))
    if unit == "rps":
        return lambda v: _scaled(v, 1000, ("", "K", "M", "B", "T")) + " req/s"
    kind, _, sub = unit.partition(":")
    if kind == "count" and sub:
        return lambda v: _scaled(v, 1000, ("", "K", "M", "B", "T")) + f" {sub}"
    if kind == "suffix" and sub:
        return lambda v: f"{_fixed(v)} {sub}"
    if kind == "prefix" and sub:
        return lambda v: f"{sub}{_fixed(v)}"
    raise ValueError(
        f"panel {title!r}: unit {unit!r} is not one the preview formats: add it to "
        "tests/helpers/dashboard_preview.py's formatter (as Grafana formats it)"
    )


# --- drawing --------------------------------------------------------------------------


#: Tick steps of a duration axis above a minute: whole minutes and hours.
_TIME_STEPS = (60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400)


def axis_step(span: float, ticks: int = 4, seconds: bool = False) -> float:
    """A tick step giving about `ticks` intervals over `span`: 1, 2, 2.5 or 5 times a
    power of ten, or for durations over a few minutes whole minutes and hours."""
    raw = span / ticks
    if seconds and raw > 30:
        return next((t for t in _TIME_STEPS if raw <= t), raw)
    magnitude = 10 ** math.floor(math.log10(raw))
    for multiple in (1, 2, 2.5, 5, 10):
        if raw <= multiple * magnitude:
            return multiple * magnitude
    return 10 * magnitude


def _chart(
    panel: Panel, *, width: float, height: float, start: float, end: float, step: float
) -> dict:
    """The SVG of a timeseries panel's plot area: axes, grid, one polyline a series
    (broken where Prometheus has no point), and the legend."""
    fmt = formatter(panel.unit, panel.title)
    series = [s for t in panel.targets for s in t.series]
    values = [v for s in series for _, v in s.points if math.isfinite(v)]
    low, high = min([0.0, *values]), max([0.0, *values])
    if high == low:
        high = low + 1
    tick = axis_step(high - low, seconds=panel.unit == "s")
    low, high = math.floor(low / tick) * tick, math.ceil(high / tick) * tick
    labels = [low + i * tick for i in range(round((high - low) / tick) + 1)]
    left = 8 + 7 * max(len(fmt(v)) for v in labels)
    plot_w, plot_h = max(10.0, width - left - 10), max(10.0, height - _AXIS_PX - 6)

    def x(t: float) -> float:
        return left + (t - start) / (end - start) * plot_w

    def y(v: float) -> float:
        return 6 + (high - v) / (high - low) * plot_h

    y_ticks = [{"y": round(y(v), 1), "label": fmt(v)} for v in labels]
    span = end - start
    every = next(s for s in (15, 30, 60, 120, 300, 600, 1800, 3600, 1e9) if span / s <= 6)
    x_ticks = [
        {"x": round(x(t), 1), "label": datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S")}
        for t in range(int(math.ceil(start / every) * every), int(end) + 1, int(every))
    ]
    lines = []
    for index, one in enumerate(series):
        color = PALETTE[index % len(PALETTE)]
        runs: list[list[str]] = [[]]
        previous = None
        for t, v in one.points:
            if not math.isfinite(v) or (previous is not None and t - previous > 1.5 * step):
                runs.append([])
            if math.isfinite(v):
                runs[-1].append(f"{x(t):.1f},{y(v):.1f}")
            previous = t
        lines.append(
            {
                "color": color,
                "name": one.name,
                "runs": [" ".join(r) for r in runs if r],
                "dots": [r[0] for r in runs if len(r) == 1],
            }
        )
    return {
        "plot": {"left": left, "top": 6, "width": plot_w, "height": plot_h, "bottom": 6 + plot_h},
        "y_ticks": y_ticks,
        "x_ticks": x_ticks,
        "lines": lines,
    }


def _stat(panel: Panel, spec: dict) -> dict:
    fmt = formatter(panel.unit, panel.title)
    defaults = spec.get("fieldConfig", {}).get("defaults", {})
    steps = defaults.get("thresholds", {}).get("steps", [{"color": "green", "value": None}])
    text_mode = spec.get("options", {}).get("textMode", "auto")
    several = sum(len(t.series) for t in panel.targets) > 1
    shown = []
    for one in (s for t in panel.targets for s in t.series):
        value = one.last
        color = steps[0]["color"]
        for threshold in steps[1:]:
            if value is not None and value >= threshold["value"]:
                color = threshold["color"]
        shown.append(
            {
                "value": "" if text_mode == "name" else fmt(value) if value is not None else "-",
                "name": one.name
                if text_mode in ("name", "value_and_name") or (text_mode == "auto" and several)
                else "",
                "color": NAMED_COLORS.get(color, color),
            }
        )
    return {"values": shown}


_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{ title }}</title>
<style>
  body { margin: 0; background: #111217; color: #ccccdc;
         font: 13px/1.3 "Inter", "Helvetica Neue", Arial, sans-serif; }
  header { padding: 12px 16px 4px; display: flex; align-items: baseline; gap: 16px; }
  header h1 { margin: 0; font-size: 18px; font-weight: 500; color: #d8d9da; }
  header .vars { color: rgba(204,204,220,.65); }
  header .vars b { background: #181b1f; border: 1px solid rgba(204,204,220,.15);
                   border-radius: 2px; padding: 2px 8px; font-weight: 400; color: #ccccdc; }
  header .range { margin-left: auto; color: rgba(204,204,220,.65); }
  .caption { padding: 0 16px 8px; color: rgba(204,204,220,.5); font-size: 12px; }
  .grid { display: grid; grid-template-columns: repeat({{ columns }}, {{ column_px }}px);
          grid-auto-rows: {{ row_px }}px; gap: {{ gap_px }}px; padding: 0 16px 16px; }
  .panel { background: #181b1f; border: 1px solid rgba(204,204,220,.12); border-radius: 2px;
           display: flex; flex-direction: column; overflow: hidden; }
  .panel h2 { margin: 0; padding: 8px 8px 0; height: 24px; font-size: 13px;
              font-weight: 500; color: #ccccdc; white-space: nowrap; overflow: hidden; }
  .stat { flex: 1; display: flex; gap: 4px; padding: 4px 8px 8px; }
  .stat div { flex: 1; border-radius: 2px; display: flex; flex-direction: column;
              align-items: center; justify-content: center; color: #fff; }
  .stat .value { font-size: 30px; font-weight: 500; }
  .stat .name { font-size: 13px; }
  .nodata { flex: 1; display: flex; align-items: center; justify-content: center;
            color: rgba(204,204,220,.65); font-size: 16px; }
  svg text { fill: rgba(204,204,220,.65); font-size: 11px; }
  .legend { padding: 0 8px 6px; display: flex; flex-wrap: wrap; gap: 2px 14px;
            font-size: 12px; overflow: hidden; }
  .legend span::before { content: ""; display: inline-block; width: 14px; height: 4px;
                         margin: 0 6px 2px 0; border-radius: 2px; background: var(--c);
                         vertical-align: middle; }
</style></head>
<body>
<header><h1>{{ title }}</h1>
  {% for name, value in variables %}<span class="vars">{{ name }} <b>{{ value }}</b></span>
  {% endfor %}<span class="range">{{ range_label }}</span></header>
<div class="caption">{{ caption }}</div>
<div class="grid">
{% for p in panels %}
  <section class="panel" data-panel="{{ p.title }}" data-has-data="{{ p.has_data|lower }}"
    style="grid-column: {{ p.x + 1 }} / span {{ p.w }}; grid-row: {{ p.y + 1 }} / span {{ p.h }}">
    <h2>{{ p.title }}</h2>
    {% if not p.has_data %}<div class="nodata">No data</div>
    {% elif p.type == "stat" %}<div class="stat">
      {% for v in p.stat["values"] %}<div style="background: linear-gradient(120deg,
        {{ v.color }}, {{ v.color }}cc)">{% if v.value %}<span class="value">{{ v.value
        }}</span>{% endif %}{% if v.name %}<span class="name">{{ v.name }}</span>{% endif %}
      </div>{% endfor %}</div>
    {% else %}{% set c = p.chart %}
    <svg width="{{ p.chart_w }}" height="{{ p.chart_h }}" viewBox="0 0 {{ p.chart_w }} {{
      p.chart_h }}" xmlns="http://www.w3.org/2000/svg" style="margin: 0 4px">
      {% for t in c.y_ticks %}<line x1="{{ c.plot.left }}" x2="{{ c.plot.left + c.plot.width
        }}" y1="{{ t.y }}" y2="{{ t.y }}" stroke="rgba(204,204,220,.1)"/>
      <text x="{{ c.plot.left - 6 }}" y="{{ t.y + 4 }}" text-anchor="end">{{ t.label }}</text>
      {% endfor %}{% for t in c.x_ticks %}<line x1="{{ t.x }}" x2="{{ t.x }}" y1="{{ c.plot.top
        }}" y2="{{ c.plot.bottom }}" stroke="rgba(204,204,220,.1)"/>
      <text x="{{ t.x }}" y="{{ c.plot.bottom + 14 }}" text-anchor="middle">{{ t.label }}</text>
      {% endfor %}{% for line in c.lines %}{% for run in line.runs %}
      <polyline fill="none" stroke="{{ line.color }}" stroke-width="1.5"
        stroke-linejoin="round" points="{{ run }}"/>{% endfor %}{% for dot in line.dots %}
      {% set xy = dot.split(",") %}<circle cx="{{ xy[0] }}" cy="{{ xy[1] }}" r="2"
        fill="{{ line.color }}"/>{% endfor %}{% endfor %}
    </svg>
    <div class="legend" style="height: {{ p.legend_px }}px">{% for line in c.lines
      %}<span style="--c: {{ line.color }}">{{ line.name }}</span>{% endfor %}</div>
    {% endif %}
  </section>
{% endfor %}
</div>
</body></html>
"""


def _page(
    dashboard: dict, panels: Sequence[Panel], *, now: float, range_s: float, width_px: int
) -> str:
    column_px = (width_px - 32 - (COLUMNS - 1) * GAP_PX) / COLUMNS
    specs = dashboard["panels"]
    shown = []
    for panel, spec in zip(panels, specs, strict=True):
        x, y, w, h = panel.grid
        item = {"title": panel.title, "type": panel.type, "has_data": panel.has_data}
        item |= {"x": x, "y": y, "w": w, "h": h}
        if panel.type == "stat":
            item["stat"] = _stat(panel, spec)
        else:
            series = sum(len(t.series) for t in panel.targets)
            chart_w = w * column_px + (w - 1) * GAP_PX - 10
            chart_h = h * ROW_PX + (h - 1) * GAP_PX - _TITLE_PX - _legend_px(series) - _PAD_PX
            step = max(1.0, round(range_s / 100))
            item |= {"chart_w": round(chart_w), "chart_h": round(chart_h)}
            item["legend_px"] = _legend_px(series)
            item["chart"] = _chart(
                panel, width=chart_w, height=chart_h, start=now - range_s, end=now, step=step
            )
        shown.append(item)
    variables = [
        (v.get("label", v["name"]), "All")
        for v in dashboard.get("templating", {}).get("list", [])
        if v["type"] == "query"
    ]
    moment = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    environment = Environment(autoescape=True, undefined=StrictUndefined)
    return environment.from_string(_TEMPLATE).render(
        title=dashboard["title"],
        caption=CAPTION,
        variables=variables,
        range_label=f"last {_seconds(range_s)} to {moment}",
        panels=shown,
        columns=COLUMNS,
        column_px=f"{column_px:.2f}",
        row_px=ROW_PX,
        gap_px=GAP_PX,
    )


def _legend_px(series: int) -> int:
    return _LEGEND_LINE_PX * (1 if series <= 3 else 2)


def page_height(dashboard_path: Path = DASHBOARD) -> int:
    """The page's height in pixels (for a window that shows the whole dashboard)."""
    dashboard = json.loads(dashboard_path.read_text(encoding="utf-8"))
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in dashboard["panels"])
    return 70 + rows * ROW_PX + (rows - 1) * GAP_PX + 16
