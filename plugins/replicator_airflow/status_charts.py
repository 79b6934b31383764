"""The DR status page's small charts as numbers for inline SVG: time series of the
supervisor's per-flow samples (lag, checkpoint and heartbeat age) and bars of the
procedures' duration and downtime across runs.

Only geometry is computed here (coordinates in a fixed view box); the markup is
the `charts.html.j2` macros', so no HTML is assembled in Python and the page needs
no chart library, no script and no network.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

T = TypeVar("T")

#: The view box of every chart; the page scales it to its column.
WIDTH = 320.0
HEIGHT = 80.0


@dataclass(frozen=True)
class Series:
    """One line: its name in the legend, its CSS class, the polyline segments
    (broken where a sample has no value) and its latest value."""

    name: str
    css: str
    segments: list[str]
    latest: float | None


@dataclass(frozen=True)
class LineChart:
    title: str
    unit: str
    series: list[Series]
    y_max: float
    #: y of the supervisor's bound (a dashed line), None when off the chart or unset.
    bound_y: float | None
    bound: float | None
    window: timedelta
    samples: int


@dataclass(frozen=True)
class Bar:
    x: float
    width: float
    y: float
    height: float
    css: str
    label: str


@dataclass(frozen=True)
class BarChart:
    title: str
    unit: str
    bars: list[Bar]
    y_max: float
    runs: int


def line_chart(
    title: str,
    unit: str,
    samples: Sequence[T],
    at: Callable[[T], datetime],
    lines: Sequence[tuple[str, str, Callable[[T], float | None]]],
    *,
    end: datetime,
    window: timedelta,
    bound: float | None = None,
) -> LineChart:
    """`samples` (oldest first) as one polyline per `lines` entry (name, CSS class,
    value of a sample), over the `window` that ends at `end`."""
    start = end - window
    shown = [s for s in samples if at(s) >= start]
    values = [v for _, _, value in lines for s in shown if (v := value(s)) is not None]
    y_max = _nice(max([*values, bound or 0.0], default=0.0))

    def x(when: datetime) -> float:
        return round((when - start) / window * WIDTH, 1)

    def y(value: float) -> float:
        return round(HEIGHT - min(value, y_max) / y_max * HEIGHT, 1)

    series = []
    for name, css, value in lines:
        segments: list[list[str]] = [[]]
        for sample in shown:
            v = value(sample)
            if v is None:
                segments.append([])
            else:
                segments[-1].append(f"{x(at(sample))},{y(v)}")
        last = value(shown[-1]) if shown else None
        latest = None if last is None else round(last, 1)
        series.append(Series(name, css, [" ".join(s) for s in segments if s], latest))
    bound_y = y(bound) if bound is not None and bound <= y_max else None
    return LineChart(title, unit, series, y_max, bound_y, bound, window, len(shown))


def bar_chart(
    title: str,
    unit: str,
    runs: Sequence[T],
    bars: Sequence[tuple[str, Callable[[T], float | None]]],
    label: Callable[[T], str],
) -> BarChart:
    """One group of bars per run (oldest first), one bar per `bars` entry (CSS class,
    value of a run); `label` is each group's tooltip."""
    values = [v for _, value in bars for run in runs if (v := value(run)) is not None]
    y_max = _nice(max(values, default=0.0))
    slot = WIDTH / max(len(runs), 1)
    width = slot * 0.8 / max(len(bars), 1)
    shapes = []
    for i, run in enumerate(runs):
        for j, (css, value) in enumerate(bars):
            v = value(run)
            if v is None:
                continue
            height = round(v / y_max * HEIGHT, 1)
            x = round(i * slot + slot * 0.1 + j * width, 1)
            shapes.append(
                Bar(x, round(width, 1), round(HEIGHT - height, 1), height, css, label(run))
            )
    return BarChart(title, unit, shapes, y_max, len(runs))


def _nice(value: float) -> float:
    """A round top for the y axis, at least `value` (1 for an all-zero chart)."""
    if value <= 0:
        return 1.0
    magnitude = 10 ** (len(str(int(value))) - 1) if value >= 1 else 1.0
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * magnitude:
            return float(step * magnitude)
    return float(10 * magnitude)
