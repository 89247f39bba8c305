"""The Compare view's confidence check in a real browser (Debian's Chromium driven by
Playwright) against a real TensorBoard: the Confidence card, the forest plot and the op
table's verdict marks, read against the check route's own document."""

from __future__ import annotations

import json
import re

from conftest import console_errors, open_op_compare, route_json
from conftest import route as raw_route

from tb_opcompare.text import format_interval, format_level, format_speedup

PAIR = {"baseline": "cnn_cpu_bs16_rep1", "target": "cnnslow_cpu_bs16_rep1"}
SCREENSHOT = "/tmp/opcompare-confidence.png"


def route(url: str, name: str, **params) -> tuple[int, dict]:
    status, body = raw_route(url, name, **params)
    return status, json.loads(body)


def interval(row: dict) -> str:
    return format_interval(row["speedup_low"], row["speedup_high"])


def speedup_cell(frame, url: str, key: str):
    """The speedup cell of the op table's row `key`, scrolled into the rows rendered (the
    table shows the compare route's order)."""
    keys = [row["key"] for row in route(url, "compare", **PAIR)[1]["rows"]]
    frame.locator(".oc-table-scroll[aria-label=ops]").evaluate(
        "(el, top) => { el.scrollTop = top; }", max(0, keys.index(key) * 28 - 100)
    )
    row = frame.locator(f"tr.oc-row[data-key='{key}']")
    row.wait_for()
    column = frame.locator("th[data-column]").evaluate_all("ths => ths.map(th => th.dataset.column).indexOf('speedup')")
    return row.locator("td").nth(column)


def test_confidence_card_forest_plot_and_table_marks(page, repeats_tensorboard_url):
    url = repeats_tensorboard_url
    status, check = route(url, "check", repeats=1, **PAIR)
    assert status == 200, check
    frame = open_op_compare(page, url, **PAIR)
    counts = frame.locator("#oc-confidence-counts")
    counts.wait_for(timeout=60_000)
    assert counts.inner_text() == (
        f"{check['slower']} ops significantly slower · {check['faster']} faster · {check['within_noise']} within noise"
    )
    assert check["slower"] >= 1  # the slow variant's head
    assert counts.get_attribute("title") == check["headline"]
    runs = frame.locator("#oc-confidence-runs")
    assert runs.inner_text() == f"pooled: {len(check['baseline'])} baseline runs, {len(check['target'])} target runs"
    assert all(run in runs.get_attribute("title") for run in check["baseline"] + check["target"])
    step = check["whole_step"]
    step_text = frame.locator("#oc-confidence-step").inner_text()
    assert format_speedup(step["speedup"]) in step_text
    # a line shown only sometimes leaves nothing where it is not (it wrote "null" there)
    assert "null" not in frame.locator("#oc-confidence").inner_text()
    assert f"Whole step ({check['whole_step_basis']})" in step_text
    # each interval at the confidence its verdict was decided at
    assert f"{format_level(step['interval_level'])} interval {interval(step)} · {step['verdict']}" in step_text
    assert frame.locator("#oc-confidence-noise").inner_text() == check["noise"]
    # the verdict's word on evidence and outlier runs, as the CLI prints them (issue 52)
    evidence = frame.locator("#oc-confidence-evidence")
    assert (evidence.inner_text() if evidence.count() else None) == (
        None if check["enough_evidence"] else check["headline"]
    )
    outliers = frame.locator("#oc-confidence-outliers")
    assert outliers.count() == bool(check["outlier_runs"])
    if check["outlier_runs"]:
        assert ", ".join(check["outlier_runs"]) in outliers.inner_text()

    # the forest plot: the gated, tested ops that moved most, one point each
    tested = [row for row in check["rows"] if row["gated"] and row["verdict"] != "not tested"]
    plotted = min(15, len(tested))
    frame.locator(f"#oc-forest .scatterlayer .point >> nth={plotted - 1}").wait_for()
    assert frame.locator("#oc-forest .scatterlayer .point").count() == plotted
    labels = frame.locator("#oc-forest .ytick text").all_text_contents()
    assert "head" in labels and len(labels) == plotted
    axis = frame.locator("#oc-forest").evaluate("el => el.layout.yaxis")
    top = axis["tickvals"].index(max(axis["tickvals"]))
    assert axis["ticktext"][top] == "head"  # the most moved at the top
    assert "adjusted for run speed" in frame.locator("#oc-forest .xtitle").text_content()
    slower_fill = (
        frame.locator("#oc-forest .scatterlayer .trace").first.locator(".point").first.evaluate("el => el.style.fill")
    )
    assert slower_fill == "rgb(198, 40, 40)"  # the table's --oc-worse

    # the table: head carries the slower mark and its interval; a within-noise op only its interval
    head = next(row for row in check["rows"] if row["key"] == "head")
    assert head["verdict"] == "slower"
    cell = speedup_cell(frame, url, "head")
    assert cell.locator(".oc-verdict-mark").inner_text() == "▲"
    assert cell.locator(".oc-verdict-slower").evaluate("el => getComputedStyle(el).color") == "rgb(198, 40, 40)"
    title = cell.get_attribute("title")
    assert title == (
        f"{format_level(head['interval_level'])} interval {interval(head)} (adjusted for run speed, "
        f"{format_speedup(head['adjusted_speedup'])}): slower"
    )
    calm = next(row for row in check["rows"] if row["verdict"] == "within noise")
    calm_cell = speedup_cell(frame, url, calm["key"])
    assert calm_cell.locator(".oc-verdict-mark").inner_text() == ""
    assert calm_cell.get_attribute("title").endswith("): within noise")
    page.screenshot(path=SCREENSHOT, full_page=True)

    # TensorBoard's dark theme recolours the plot as the table
    page.get_by_label("Menu for changing light or dark theme").click()
    page.get_by_role("menuitem", name=re.compile("dark", re.IGNORECASE)).click()
    frame.locator("html.oc-dark").wait_for(state="attached")
    page.wait_for_function("() => true")
    point = frame.locator("#oc-forest .scatterlayer .trace").first.locator(".point").first
    dark_worse = "rgb(239, 154, 154)"
    page.wait_for_timeout(200)
    assert point.evaluate("el => el.style.fill") == dark_worse
    cell = speedup_cell(frame, url, "head")
    assert cell.locator(".oc-verdict-slower").evaluate("el => getComputedStyle(el).color") == dark_worse

    # grouping by op type asks for the check of the types
    by_type = route(url, "check", repeats=1, group_by="type", **PAIR)[1]
    frame.locator("[data-group-by='type']").click()
    frame.locator(
        "#oc-confidence-counts",
        has_text=f"{by_type['slower']} ops significantly slower · "
        f"{by_type['faster']} faster · {by_type['within_noise']} within noise",
    ).wait_for()
    tested = [row for row in by_type["rows"] if row["gated"] and row["verdict"] != "not tested"]
    frame.locator(f"#oc-forest .scatterlayer .point >> nth={min(15, len(tested)) - 1}").wait_for()
    assert frame.locator("#oc-forest .scatterlayer .point").count() == min(15, len(tested))
    significant = sum(row["verdict"] in ("slower", "faster") for row in by_type["rows"])
    assert frame.locator(".oc-verdict-slower, .oc-verdict-faster").count() <= significant
    assert not page.page_errors


def test_without_repeats_the_card_explains_how_to_record_them(page, tensorboard_url):
    pair = {"baseline": "torch/cnn_torch_cpu_bs4", "target": "torch/cnn_torch_cpu_bs16"}
    status, answer = route(tensorboard_url, "check", repeats=1, **pair)
    assert status == 400
    message = answer["error"]["message"]
    assert "record --repeats" in message
    errors = console_errors(page)
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url) if "/check" in request.url else None)
    frame = open_op_compare(page, tensorboard_url, **pair)
    note = frame.locator("#oc-confidence-note")
    note.wait_for(timeout=60_000)
    assert message in note.inner_text()
    # an expected state: the compare summary says it, and the refused check is never asked (no 400 logged)
    assert route_json(tensorboard_url, "compare", **pair)["summary"]["check_refusal"] == message
    assert not asked and not errors
    assert "oc-panel-note" in note.get_attribute("class")
    assert frame.locator("#oc-confidence-message").count() == 0  # not shown as an error
    assert frame.locator(".oc-forest-card").is_hidden()
    assert frame.locator("#oc-forest .point").count() == 0
    # the table has no verdicts to show: no marks, no intervals
    frame.locator("tr.oc-row").first.wait_for()
    assert frame.locator(".oc-verdict-mark").count() == 0
    assert frame.locator("tr.oc-row td[title*='% interval']").count() == 0
    assert not page.page_errors


def test_the_whole_steps_figure_is_the_headlines_with_repeats(page, tmp_path_factory):
    """Our DataLoader job on an H200, three runs a side, pooled: the Confidence card's whole
    step is the headline's 1.34x (each side's steady steps pooled), where it showed the
    centre of its interval (the runs' medians' geometric means), 1.40x, under the same
    words "step wall time"."""
    from conftest import FIXTURES, tensorboard_on_copy

    pair = {"baseline": "resnet18_num_workers_0_rep1", "target": "resnet18_num_workers_4_rep1", "repeats": "1"}
    with tensorboard_on_copy(tmp_path_factory, FIXTURES / "gpu_h200" / "loader") as url:
        status, check = route(url, "check", **pair)
        assert status == 200, check
        step = check["whole_step"]
        assert format_speedup(step["adjusted_speedup"]) != format_speedup(step["speedup"])  # the case at hand
        frame = open_op_compare(page, url, **pair)
        frame.locator("#oc-confidence-step").wait_for(timeout=60_000)
        headline = frame.locator("#oc-headline").inner_text()
        assert (
            headline
            == format_speedup(step["speedup"])
            == format_speedup(route(url, "compare", **pair)[1]["summary"]["headline_speedup"])
        )
        shown = frame.locator("#oc-confidence-step .oc-kv-value").inner_text()
        assert shown == headline
        assert "null" not in frame.locator("#oc-confidence").inner_text()
