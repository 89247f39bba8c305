"""Plotly figures of a sweep document, as plain dicts, and the offline HTML report.

The tab draws these same figures with the plotly.js bundle it serves, and the CLI's
``--html`` report inlines that bundle, so both show identical plots and neither
needs a network. Op, run and device names come from user files: every one goes
through ``label`` (plotly renders a few HTML tags in text), and hover texts take them
from each trace's ``meta`` rather than the template, so a ``%{`` in a name is text.
"""

from __future__ import annotations

import html
import json

from tb_opcompare.analysis.sweep import STEP
from tb_opcompare.schema.contract import SweepDocument
from tb_opcompare.web.assets import plotly_bundle

PALETTE = ["#1976d2", "#f57c00", "#388e3c", "#d32f2f", "#7b1fa2", "#0097a7", "#5d4037", "#c2185b", "#455a64",
           "#afb42b", "#512da8", "#00796b"]
DEVICE_DASH = {"CPU": "dot"}  # accelerators solid, CPU dotted
FONT = {"family": "Roboto, sans-serif", "size": 12, "color": "#424242"}


def shorten(name: str, length: int = 44) -> str:
    """Whole scope segments are elided, longest first, keeping the op's own last segment
    (the same rule as the tab's table, frontend/format.js)."""
    if len(name) <= length:
        return name
    parts = name.split("/")
    kept = [True] * len(parts)

    def joined() -> str:
        out: list[str] = []
        for part, keep in zip(parts, kept):
            if keep:
                out.append(part)
            elif not out or out[-1] != "…":
                out.append("…")
        return "/".join(out)

    text = joined()
    while len(text) > length:
        candidates = [i for i in range(len(parts) - 1) if kept[i]]
        if not candidates:
            break
        kept[max(candidates, key=lambda i: (len(parts[i]), -i))] = False
        text = joined()
    if len(text) <= length:
        return text
    tail = -(-(length - 1) * 3 // 5)
    return f"{name[: length - 1 - tail]}…{name[len(name) - tail:]}"


def _layout(title: str, x_title: str, y_title: str, log_y: bool = True, **extra) -> dict:
    layout = {
        "title": {"text": title, "font": {"size": 14}, "x": 0, "xanchor": "left"},
        "font": FONT,
        "margin": {"l": 64, "r": 24, "t": 40, "b": 24},
        "height": 480,
        "xaxis": {"title": {"text": x_title}, "type": "log", "gridcolor": "#eee", "dtick": 0.30102999566},
        "yaxis": {"title": {"text": y_title}, "type": "log" if log_y else "linear", "gridcolor": "#eee",
                  **({"dtick": 1, "minor": {"dtick": "D1", "showgrid": True, "gridcolor": "#f7f7f7"}}
                     if log_y else {"rangemode": "tozero"})},
        "legend": {"font": {"size": 11, "family": "Roboto Mono, monospace"}, "orientation": "h", "y": -0.38,
                   "yanchor": "top"},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
        "hovermode": "closest",
    }
    layout.update(extra)
    return layout


def label(text: str) -> str:
    """A user-file string made safe as plotly text: tags and entities escaped, quotes kept
    (plotly would show ``&quot;`` literally)."""
    return html.escape(str(text), quote=False)


def _op_traces(series: list[dict], top_ops: list[str], value: str, unit: str) -> list[dict]:
    traces = []
    colours = {op: PALETTE[i % len(PALETTE)] for i, op in enumerate(top_ops)}
    for op in top_ops:
        for device in sorted({row["device"] for row in series if row["op"] == op}):
            points = sorted((row for row in series if row["op"] == op and row["device"] == device),
                            key=lambda row: row["batch_size"])
            scale = [1 / row["batch_size"] if value == "per_sample_us" else 1 for row in points]
            traces.append({
                "type": "scatter", "mode": "lines+markers", "name": label(f"{shorten(op)} · {device}"),
                "legendgroup": label(op), "meta": label(f"{op} · {device}"),
                "x": [row["batch_size"] for row in points], "y": [row[value] for row in points],
                "line": {"color": colours[op], "dash": DEVICE_DASH.get(device, "solid"), "width": 2},
                "marker": {"size": 7},
                "hovertemplate": f"%{{meta}}<br>batch %{{x}}: %{{y:,.2f}} {unit}{_REPEATS_HOVER}<extra></extra>",
                **_range_bars(points, value, "low_us", "high_us", scale),
            })
    return traces


# Where repeats were pooled, a bar spans the lowest and the highest run's value and the
# hover says how many runs the point is the mean of.
_REPEATS_HOVER = "%{customdata}"


def _range_bars(points: list[dict], value: str, low: str, high: str, scale: list[float]) -> dict:
    repeats = [row.get("repeats") or 1 for row in points]
    extra = {"customdata": [f" (mean of {n} runs)" if n > 1 else "" for n in repeats]}
    if max(repeats, default=1) > 1:
        extra["error_y"] = {
            "type": "data", "symmetric": False, "thickness": 1, "width": 3,
            "array": [(row[high] * s - row[value]) if row[high] is not None else 0 for row, s in zip(points, scale)],
            "arrayminus": [(row[value] - row[low] * s) if row[low] is not None else 0 for row, s in zip(points, scale)],
        }
    return extra


def sweep_figures(document: SweepDocument) -> dict[str, dict]:
    """``op_time``, ``per_sample``, ``step`` and ``speedup`` figures (the last two only where
    the data allow)."""
    series, top_ops = document.series, document.top_ops
    figures = {
        "op_time": {"data": _op_traces(series, top_ops, "mean_us", "µs"),
                    "layout": _layout("Mean time per op vs batch size", "batch size", "mean time per op (µs)")},
        "per_sample": {"data": _op_traces(series, top_ops, "per_sample_us", "µs/sample"),
                       "layout": _layout("Time per sample vs batch size", "batch size", "time per sample (µs)")},
    }
    if document.steps:
        data = []
        for i, device in enumerate(sorted({row["device"] for row in document.steps})):
            points = [row for row in document.steps if row["device"] == device]
            colour = PALETTE[i % len(PALETTE)]
            x = [row["batch_size"] for row in points]
            milliseconds = [{key: (row[key] / 1000 if row.get(key) is not None else None) for key in
                             ("step_us", "step_low_us", "step_high_us")} | {"repeats": row.get("repeats")}
                            for row in points]
            data.append({"type": "scatter", "mode": "lines+markers", "name": label(f"{device} time per step"),
                         "meta": label(device), "x": x, "y": [row["step_us"] for row in milliseconds],
                         "line": {"color": colour, "width": 2}, "marker": {"size": 7},
                         "hovertemplate": f"%{{meta}}<br>batch %{{x}}: %{{y:,.2f}} ms per step{_REPEATS_HOVER}"
                                          "<extra></extra>",
                         **_range_bars(milliseconds, "step_us", "step_low_us", "step_high_us", [1] * len(points))})
            data.append({"type": "scatter", "mode": "lines+markers", "name": label(f"{device} samples/s"),
                         "meta": label(device), "yaxis": "y2",
                         "x": x, "y": [row["samples_per_s"] for row in points],
                         "line": {"color": colour, "width": 2, "dash": "dash"}, "marker": {"size": 7, "symbol": "diamond"},
                         "hovertemplate": "%{meta}<br>batch %{x}: %{y:,.0f} samples/s<extra></extra>"})
        basis = sorted({row["basis"] for row in document.steps})
        figures["step"] = {"data": data, "layout": _layout(
            f"Time per step and throughput ({', '.join(basis)})", "batch size", "time per step (ms)", log_y=False,
            yaxis2={"title": {"text": "throughput (samples/s)"}, "type": "linear", "overlaying": "y", "side": "right",
                    "showgrid": False, "rangemode": "tozero"},
            margin={"l": 64, "r": 72, "t": 40, "b": 24})}
    if document.speedups:
        ops = [op for op in [STEP, *top_ops] if any(row["op"] == op for row in document.speedups)]
        data = []
        for i, op in enumerate(ops):
            points = sorted((row for row in document.speedups if row["op"] == op), key=lambda r: r["batch_size"])
            data.append({"type": "scatter", "mode": "lines+markers", "name": label(shorten(op)), "meta": label(op),
                         "x": [row["batch_size"] for row in points], "y": [row["speedup"] for row in points],
                         "line": {"color": "#212121" if op == STEP else PALETTE[(i - 1) % len(PALETTE)],
                                  "width": 3 if op == STEP else 2},
                         "hovertemplate": "%{meta}<br>batch %{x}: %{y:.2f}×<extra></extra>"})
        figures["speedup"] = {"data": data, "layout": _layout(
            "Speedup (CPU / accelerator) vs batch size", "batch size", "speedup (×, > 1: accelerator faster)",
            shapes=[{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": 1, "y1": 1,
                     "line": {"color": "#9e9e9e", "dash": "dash", "width": 1}}])}
    return figures


def _cell(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else ""
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 1000 else f"{value:,.0f}"
    return html.escape(str(value))


def sweep_html(document: SweepDocument, table: list[dict], columns: list[str]) -> str:
    """One self-contained, offline HTML file: the sweep plots (plotly.js inlined), the
    fits table and the warnings."""
    figures = sweep_figures(document)
    payload = json.dumps(figures).replace("</", "<\\/")
    divs = "\n".join(f'<div class="plot" id="{name}"></div>' for name in figures)
    header = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "\n".join("<tr>" + "".join(f"<td>{_cell(row.get(c))}</td>" for c in columns) + "</tr>" for row in table)
    warnings = "".join(f"<li>{html.escape(w)}</li>" for w in document.warnings)
    runs = "".join(
        f"<li>{html.escape(r.run)}: {html.escape(r.device)}, batch {r.batch_size or 'unknown'}"
        f" ({html.escape(r.batch_size_source or 'no source')})</li>" for r in document.runs)
    title = html.escape(f"Batch sweep: {document.model}")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: Roboto, Helvetica, Arial, sans-serif; font-size: 13px; color: #212121; margin: 24px; }}
h1 {{ font-size: 20px; font-weight: 500; }} h2 {{ font-size: 15px; font-weight: 500; margin-top: 24px; }}
.plots {{ display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr)); gap: 16px; }}
.plot {{ border: 1px solid #e0e0e0; border-radius: 4px; padding: 8px; min-height: 480px; }}
table {{ border-collapse: collapse; }} th, td {{ padding: 4px 10px; border-bottom: 1px solid #eee; text-align: right; }}
th:first-child, td:first-child {{ text-align: left; font-family: monospace; }}
.warnings {{ background: #fff8e1; border: 1px solid #ffe082; padding: 8px 24px; border-radius: 4px; }}
</style>
<script>{plotly_bundle().decode('utf-8')}</script>
</head><body>
<h1>{title}</h1>
<ul>{runs}</ul>
{f'<ul class="warnings">{warnings}</ul>' if warnings else ''}
<div class="plots">{divs}</div>
<h2>Fits: mean time = fixed + per_sample × batch size (µs)</h2>
<table><thead><tr>{header}</tr></thead><tbody>
{body}
</tbody></table>
<script>
const figures = {payload};
for (const [name, figure] of Object.entries(figures)) {{
  Plotly.newPlot(name, figure.data, figure.layout, {{displaylogo: false, responsive: true}});
}}
</script>
</body></html>
"""
