"""The DR status page's HTML: the Jinja2 templates of `templates/` (shipped with
the plugin package, autoescaped) rendered from `status_view`'s shape of the
snapshot, and one run's stored report. Nothing here imports Airflow, so the
rendering is tested, and timed with 10,000 partitions, without it.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, StrictUndefined

from replicator.operations import Overview, RunSummary
from replicator.procedures import describe_phases
from replicator.statestore import RunRecord
from replicator_airflow import run_reports, status_charts
from replicator_airflow.status_view import page_view

#: Seconds between two refreshes of the page in the browser.
REFRESH_S = 10
#: Hours of samples the page's charts show by default.
WINDOW_H = 6.0
#: Rows of one list shown in a run report; the JSON of the run has them all.
_MAX_ROWS = 2000


def render_status(data: Overview, window: timedelta = timedelta(hours=WINDOW_H)) -> str:
    """The whole page; the `data-*` attributes and cell classes are what browser
    tests and scrapers rely on (see plugins/README.md)."""
    view = page_view(data.status, data.verdicts, data.samples, window, REFRESH_S)
    return _TEMPLATES.get_template("status.html.j2").render(
        title="DR status", page=view, samples_error=data.samples_error
    )


def render_run(run: RunRecord) -> str:
    """One run's report: its figures, parameters and stored details (per-partition
    results of a drill, steps of a failover, suites of a verification)."""
    summary = RunSummary.of(run)
    figures = {
        "kind": run.kind,
        "flow": run.flow,
        "mode": run.mode,
        "outcome": run.outcome or "in progress",
        "RPO (records)": run.rpo_records,
        "RTO (s)": run.rto_seconds,
        "duration (s)": summary.duration_seconds,
        "downtime (s)": summary.downtime_seconds,
        "started": _time(run.started_at),
        "finished": _time(run.finished_at),
    }
    return _TEMPLATES.get_template("run.html.j2").render(
        title=f"{run.kind} {run.run_id}",
        run=run,
        figures=figures,
        phases=describe_phases(run.details.get("phases") or {}),
        data_docs=bool(summary.data_docs),
        max_rows=_MAX_ROWS,
    )


def _environment() -> Environment:
    """The page's templates, shipped with the plugin package; autoescaped."""
    env = Environment(
        loader=PackageLoader("replicator_airflow", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        time=_time,
        figure=_figure,
        scalar=_scalar,
        columns=_columns,
        hours=_hours,
        short=_short,
        report_href=report_href,
        docs_href=docs_href,
        urlpart=lambda value: quote(str(value), safe=""),
    )
    env.tests.update(records=_is_records, datetime=lambda value: isinstance(value, datetime))
    env.globals.update(
        width=status_charts.WIDTH,
        height=status_charts.HEIGHT,
        audit_report=run_reports.REPORT,
    )
    return env


def _is_records(value: Any) -> bool:
    """A list of objects (per-partition results): shown as a table, a column per key."""
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _columns(records: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(key for record in records for key in record))


def _scalar(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _figure(value: float | None, unit: str = "") -> str:
    """A figure as stored (the JSON API's value), an em dash when unknown."""
    return "\u2014" if value is None else f"{value}{unit}"


def _short(value: float | None) -> str:
    """A chart's figure: 5,000 for 5000.0, 12.5 for 12.5, an em dash when unknown."""
    if value is None:
        return "\u2014"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _hours(window: timedelta) -> str:
    minutes = window.total_seconds() / 60
    return f"{minutes:.0f} min" if minutes < 120 else f"{minutes / 60:g} h"


def report_href(run_id: str) -> str:
    return f"runs/{quote(run_id, safe='')}"


def docs_href(run_id: str) -> str:
    return f"{report_href(run_id)}/data-docs/index.html"


def _time(value: datetime | None) -> str:
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M:%S UTC")


_TEMPLATES = _environment()
