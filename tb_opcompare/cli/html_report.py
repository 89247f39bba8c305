"""``tb-opcompare sweep --html``: one self-contained, offline HTML file with the sweep's
plots (the figures the tab draws, plotly.js inlined: no network needed), its fits table
and its warnings."""

from __future__ import annotations

import html
import json
from collections.abc import Callable

from tb_opcompare.schema.contract import Fit, SweepDocument
from tb_opcompare.service.figures import sweep_figures
from tb_opcompare.service.sweep import fits_table
from tb_opcompare.text import format_breakeven, format_share, format_time
from tb_opcompare.web.assets import plotly_bundle

# The offline report's fits table: what the tab's table shows, in its default order; each
# cell from the row and the document (the target series names the break-even).
_FIT_CELLS: tuple[tuple[str, Callable[[Fit, SweepDocument], str]], ...] = (
    ("Op", lambda row, _: row.op),
    ("Line", lambda row, _: row.series),  # headed by the sweep's series_by, as in the tab
    ("Share", lambda row, _: format_share(row.share)),
    ("Fixed", lambda row, _: format_time(row.fixed_us)),
    ("Per sample", lambda row, _: format_time(row.per_sample_us)),
    (
        "R²",
        lambda row, _: ("–" if row.r2 is None else f"{row.r2:.3f}") + (" ⚠ poor fit" if row.poor_fit else ""),
    ),
    ("Points", lambda row, _: str(row.points)),
    (
        "Break-even batch",
        lambda row, document: format_breakeven(row.breakeven_batch_size, row.target_faster, document.target_series),
    ),
)


def sweep_html(document: SweepDocument) -> str:
    """One self-contained, offline HTML file: the sweep plots (plotly.js inlined), the
    fits table (largest share first) and the warnings."""
    figures = sweep_figures(document)
    payload = json.dumps(figures).replace("</", "<\\/")
    divs = "\n".join(f'<div class="plot" id="{name}"></div>' for name in figures)
    header = "".join(
        f"<th>{html.escape(document.series_by.capitalize() if title == 'Line' else title)}</th>"
        for title, _ in _FIT_CELLS
    )
    body = "\n".join(
        "<tr>" + "".join(f"<td>{html.escape(cell(row, document))}</td>" for _, cell in _FIT_CELLS) + "</tr>"
        for row in fits_table(document, sort="share")
    )
    warnings = "".join(f"<li>{html.escape(w)}</li>" for w in document.warnings)
    runs = "".join(
        f"<li>{html.escape(r.run)}: {html.escape(r.device or 'unknown device')}, batch {r.batch_size or 'unknown'}"
        f" ({html.escape(r.batch_size_source or 'no source')})</li>"
        for r in document.runs
    )
    held = ", ".join(f"{dimension} {value}" for dimension, value in document.held.items())
    title = html.escape(f"Batch sweep: {document.model} ({held}), lines by {document.series_by}")
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
<script>{plotly_bundle().decode("utf-8")}</script>
</head><body>
<h1>{title}</h1>
<ul>{runs}</ul>
{f'<ul class="warnings">{warnings}</ul>' if warnings else ""}
<div class="plots">{divs}</div>
<h2>Fits: mean time = fixed + per sample × batch size</h2>
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
