"""Plotly figures of a sweep document, as plain dicts.

The tab draws these figures with the plotly.js bundle it serves, and the CLI's
``--html`` report (``cli/html_report.py``) inlines that bundle, so both show identical
plots and neither needs a network. Op, run and device names come from user files: every one goes
through ``label`` (plotly renders a few HTML tags in text), and hover texts take them
from each trace's ``meta`` rather than the template, so a ``%{`` in a name is text.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from tb_opcompare.analysis.sweep import STEP
from tb_opcompare.errors import escape_control_characters
from tb_opcompare.schema.contract import SeriesPoint, SpeedupPoint, StepPoint, SweepDocument
from tb_opcompare.text import shorten_names

PALETTE = [
    "#1976d2",
    "#f57c00",
    "#388e3c",
    "#d32f2f",
    "#7b1fa2",
    "#0097a7",
    "#5d4037",
    "#c2185b",
    "#455a64",
    "#afb42b",
    "#512da8",
    "#00796b",
]
FONT = {"family": "Roboto, sans-serif", "size": 12, "color": "#424242"}


PLOT_HEIGHT = 420  # px of plotting area, whatever the legend below it needs
LEGEND_NAME_LENGTH = 36
_LEGEND_ROW = 20  # px per row of legend entries
_BELOW_PLOT = 56  # px under the plotting area for the x axis's ticks and title, above the legend
_LEGEND_ENTRIES_PER_ROW = 2  # at the width of a card in the tab (about 700 px) and of these names


def _layout(
    title: str, x_title: str, y_title: str, legend_entries: int, log_y: bool = True, **extra: Any
) -> dict[str, Any]:
    """A figure whose plotting area keeps PLOT_HEIGHT: the figure grows with its legend
    instead of the legend eating the plot."""
    legend_rows = -(-legend_entries // _LEGEND_ENTRIES_PER_ROW)
    layout: dict[str, Any] = {
        "title": {"text": title, "font": {"size": 14}, "x": 0, "xanchor": "left"},
        "font": FONT,
        "margin": {"l": 64, "r": 24, "t": 40, "b": 24},
        "height": 40 + PLOT_HEIGHT + _BELOW_PLOT + legend_rows * _LEGEND_ROW + 24,
        "xaxis": {"title": {"text": x_title}, "type": "log", "gridcolor": "#eee", "dtick": 0.30102999566},
        # no fixed dtick: within one decade a log axis would show a single tick
        "yaxis": {
            "title": {"text": y_title},
            "type": "log" if log_y else "linear",
            "gridcolor": "#eee",
            **({"minor": {"showgrid": True, "gridcolor": "#f7f7f7"}} if log_y else {"rangemode": "tozero"}),
        },
        "legend": {
            "font": {"size": 11, "family": "Roboto Mono, monospace"},
            "orientation": "h",
            "y": -_BELOW_PLOT / PLOT_HEIGHT,
            "yanchor": "top",
            "x": 0,
            "xanchor": "left",
        },
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
        "hovermode": "closest",
    }
    layout.update(extra)
    return layout


def _dashes(series: list[str], baseline: str | None) -> dict[str, str]:
    """Each series' dash: the baseline (CPU, fp32, eager) dotted, the first other solid,
    further ones dashed."""
    others = [value for value in series if value != baseline]
    return {
        value: "dot" if value == baseline else ("solid", "dash", "dashdot", "longdash")[others.index(value) % 4]
        for value in series
    }


def _line_styles(dashes: dict[str, str]) -> str:
    return ", ".join(f"{value} {'dotted' if dash == 'dot' else dash}" for value, dash in dashes.items())


def label(text: str) -> str:
    """A user-file string made safe as plotly text: tags and entities escaped (no link,
    no markup), invisible characters shown, quotes kept (plotly would show ``&quot;``)."""
    return html.escape(escape_control_characters(str(text)), quote=False)


def _op_traces(
    series: list[SeriesPoint], top_ops: list[str], per_sample: bool, unit: str, dashes: dict[str, str]
) -> list[dict[str, Any]]:
    """One line per op and series, of its mean time or (``per_sample``) its time per
    sample; one legend entry per op (its colour), the series told by the line's dash (the
    title says which)."""
    traces = []
    colours = {op: PALETTE[i % len(PALETTE)] for i, op in enumerate(top_ops)}
    short = dict(zip(top_ops, shorten_names(top_ops, LEGEND_NAME_LENGTH)))
    for op in top_ops:
        values = sorted({row.series for row in series if row.op == op})
        for series_value in values:
            points = sorted(
                (row for row in series if row.op == op and row.series == series_value),
                key=lambda row: row.batch_size,
            )
            y = [row.per_sample_us if per_sample else row.mean_us for row in points]
            # the interval is of mean_us: per sample, its ends are divided by the batch size too
            scale = [1 / row.batch_size if per_sample else 1 for row in points]
            bars = _range_bars(y, [row.low_us for row in points], [row.high_us for row in points], points, scale)
            traces.append(
                {
                    "type": "scatter",
                    "mode": "lines+markers",
                    "name": label(short[op]),
                    "showlegend": series_value == values[-1],
                    "legendgroup": label(op),
                    "meta": label(f"{op} · {series_value}"),
                    "x": [row.batch_size for row in points],
                    "y": y,
                    "line": {"color": colours[op], "dash": dashes[series_value], "width": 2},
                    "marker": {"size": 7},
                    "hovertemplate": f"%{{meta}}<br>batch %{{x}}: %{{y:,.2f}} {unit}{_REPEATS_HOVER}<extra></extra>",
                    **bars,
                }
            )
    return traces


# Where repeats were pooled, a bar spans the 95% interval of the point's mean and the
# hover says how many runs the point pools.
_REPEATS_HOVER = "%{customdata}"


def _range_bars(
    values: list[float | None],
    lows: list[float | None],
    highs: list[float | None],
    points: Sequence[SeriesPoint | StepPoint],
    scale: Sequence[float],
) -> dict[str, Any]:
    """The hover's note on the repeats each of ``points`` pools and, where any pools more
    than one run, bars from each of ``values`` to its interval's ends (each times its
    ``scale``)."""
    repeats = [row.repeats or 1 for row in points]
    extra: dict[str, Any] = {"customdata": [f" ({n} runs pooled, bar: 95% interval)" if n > 1 else "" for n in repeats]}
    if max(repeats, default=1) > 1:
        extra["error_y"] = {
            "type": "data",
            "symmetric": False,
            "thickness": 1,
            "width": 3,
            "array": [
                (high * s - value) if high is not None and value is not None else 0
                for value, high, s in zip(values, highs, scale)
            ],
            "arrayminus": [
                (value - low * s) if low is not None and value is not None else 0
                for value, low, s in zip(values, lows, scale)
            ],
        }
    return extra


def sweep_figures(document: SweepDocument) -> dict[str, dict[str, Any]]:
    """``op_time``, ``per_sample``, ``step`` and ``speedup`` figures (the last two only where
    the data allow)."""
    figures = _op_figures(document)
    if document.steps:
        figures["step"] = _step_figure(document.steps)
    if document.speedups:
        figures["speedup"] = _speedup_figure(document)
    return figures


def _op_figures(document: SweepDocument) -> dict[str, dict[str, Any]]:
    """The per-op figures, ``op_time`` and ``per_sample``: a colour per op, a dash per series."""
    series, top_ops = document.series, document.top_ops
    dashes = _dashes(sorted({row.series for row in series}), document.baseline_series)
    # the title names each series' dash: the legend lists ops only
    styles = f" ({_line_styles(dashes)})" if len(dashes) > 1 else ""
    return {
        "op_time": {
            "data": _op_traces(series, top_ops, False, "µs", dashes),
            "layout": _layout(
                f"Mean time per op vs batch size{styles}", "batch size", "mean time per op (µs)", len(top_ops)
            ),
        },
        "per_sample": {
            "data": _op_traces(series, top_ops, True, "µs/sample", dashes),
            "layout": _layout(
                f"Time per sample vs batch size{styles}", "batch size", "time per sample (µs)", len(top_ops)
            ),
        },
    }


def _step_figure(steps: list[StepPoint]) -> dict[str, Any]:
    """Time per step (left axis, ms) and throughput (right axis, samples/s) per series:
    two lines of one colour for each series."""
    data = []
    for i, series_value in enumerate(sorted({row.series for row in steps})):
        points = [row for row in steps if row.series == series_value]
        data.extend(_step_traces(series_value, points, PALETTE[i % len(PALETTE)]))
    basis = sorted({row.basis for row in steps})
    return {
        "data": data,
        "layout": _layout(
            f"Time per step and throughput ({', '.join(basis)})",
            "batch size",
            "time per step (ms)",
            len(data),
            log_y=False,
            # ticks of its own (plotly would sync them to the left axis: 4.02k, 8.05k, ...)
            yaxis2={
                "title": {"text": "throughput (samples/s)"},
                "type": "linear",
                "overlaying": "y",
                "side": "right",
                "showgrid": False,
                "rangemode": "tozero",
                "tickmode": "auto",
                "tickformat": "~s",
            },
            margin={"l": 64, "r": 72, "t": 40, "b": 24},
        ),
    }


def _milliseconds(microseconds: float | None) -> float | None:
    return microseconds / 1000 if microseconds is not None else None


def _step_traces(series_value: str, points: list[StepPoint], colour: str) -> list[dict[str, Any]]:
    """One series' time per step (solid) and throughput (dashed, on the right axis)."""
    x = [row.batch_size for row in points]
    # steps are in µs in the document; a step reads better in ms, and so do its bars
    step_ms = [_milliseconds(row.step_us) for row in points]
    low_ms = [_milliseconds(row.step_low_us) for row in points]
    high_ms = [_milliseconds(row.step_high_us) for row in points]
    step_time = {
        "type": "scatter",
        "mode": "lines+markers",
        "name": label(f"{series_value} time per step"),
        "meta": label(series_value),
        "x": x,
        "y": step_ms,
        "line": {"color": colour, "width": 2},
        "marker": {"size": 7},
        "hovertemplate": f"%{{meta}}<br>batch %{{x}}: %{{y:,.2f}} ms per step{_REPEATS_HOVER}<extra></extra>",
        **_range_bars(step_ms, low_ms, high_ms, points, [1] * len(points)),
    }
    throughput = {
        "type": "scatter",
        "mode": "lines+markers",
        "name": label(f"{series_value} samples/s"),
        "meta": label(series_value),
        "yaxis": "y2",
        "x": x,
        "y": [row.samples_per_s for row in points],
        "line": {"color": colour, "width": 2, "dash": "dash"},
        "marker": {"size": 7, "symbol": "diamond"},
        "hovertemplate": "%{meta}<br>batch %{x}: %{y:,.0f} samples/s<extra></extra>",
    }
    return [step_time, throughput]


def _speedup_figure(document: SweepDocument) -> dict[str, Any]:
    """Baseline / target time per batch size, the whole step first, with a dashed line at
    1 (no change): above it the target is faster."""
    data = _speedup_traces(document.speedups, document.top_ops)
    return {
        "data": data,
        "layout": _layout(
            label(f"Speedup ({document.baseline_series} / {document.target_series}) vs batch size"),
            "batch size",
            label(f"speedup (×, > 1: {document.target_series} faster)"),
            len(data),
            shapes=[
                {
                    "type": "line",
                    "xref": "paper",
                    "x0": 0,
                    "x1": 1,
                    "y0": 1,
                    "y1": 1,
                    "line": {"color": "#9e9e9e", "dash": "dash", "width": 1},
                }
            ],
        ),
    }


def _speedup_traces(speedups: list[SpeedupPoint], top_ops: list[str]) -> list[dict[str, Any]]:
    """One line per op with speedups, the whole step first, thick and dark so it stands
    out from the ops, which take the palette's colours after it."""
    ops = [op for op in [STEP, *top_ops] if any(row.op == op for row in speedups)]
    short = dict(zip(ops, shorten_names(ops, LEGEND_NAME_LENGTH)))
    data = []
    for i, op in enumerate(ops):
        points = sorted((row for row in speedups if row.op == op), key=lambda r: r.batch_size)
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": label(short[op]),
                "meta": label(op),
                "x": [row.batch_size for row in points],
                "y": [row.speedup for row in points],
                "line": {
                    "color": "#212121" if op == STEP else PALETTE[(i - 1) % len(PALETTE)],
                    "width": 3 if op == STEP else 2,
                },
                "hovertemplate": "%{meta}<br>batch %{x}: %{y:.2f}×<extra></extra>",
            }
        )
    return data
