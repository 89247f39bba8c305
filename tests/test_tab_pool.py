"""The Compare page's "Pool repeats" checkbox in a real browser (Debian's Chromium driven by
Playwright) against a real TensorBoard: the summary and the op table show the compare
route's run groups (`repeats=1`), the CSV export is that route's file, and the choice is
kept in the link; read against the routes' own documents, the values written by the tab's
own format.js."""

from __future__ import annotations

import urllib.parse
from pathlib import Path

from conftest import TAB_FRAME, console_errors, open_op_compare, reopen_op_compare, route, route_json, tab_state

PAIR = {"baseline": "cnn_cpu_bs16_rep1", "target": "cnnslow_cpu_bs16_rep1"}
SCREENSHOT = "/tmp/pool-on.png"
FIRST_ROWS = 5

# The means the table shows of a route's rows, written by the tab's own format.js
# (imported in the plugin's frame, the module instance the page uses); `~` marks a noisy mean.
FORMATTED_MEANS = """async (rows) => {
  const f = await import(new URL('format.js', window.document.baseURI).href);
  const mean = (row, side) => f.formatTime(row[`${side}_mean_us`]) + (row[`${side}_noisy`] ? ' ~' : '');
  return rows.map((row) => [row.key, mean(row, 'baseline'), mean(row, 'target')]);
}"""


def plugin_frame(page):
    """The plugin's frame as a Frame (to evaluate in), not a FrameLocator."""
    return next(frame for frame in page.frames if "plugin_entry.html" in frame.url)


def shown_means(frame, count: int = FIRST_ROWS) -> list[list[str]]:
    """The first rows of the op table: key, baseline mean and target mean as shown."""
    columns = frame.locator("th[data-column]").evaluate_all("ths => ths.map(th => th.dataset.column)")
    at = [columns.index("baseline_mean_us"), columns.index("target_mean_us")]
    return frame.locator("tr.oc-row").evaluate_all(
        """(rows, [count, at]) => rows.slice(0, count).map((row) => {
             const cells = row.querySelectorAll('td');
             return [row.dataset.key, ...at.map((i) => cells[i].firstChild.textContent.trim())];
           })""",
        [count, at],
    )


def expected_means(page, document: dict, count: int = FIRST_ROWS) -> list[list[str]]:
    return plugin_frame(page).evaluate(FORMATTED_MEANS, document["rows"][:count])


def wait_for_means(frame, page, document: dict):
    expected = expected_means(page, document)
    frame.locator(f"tr.oc-row[data-key='{expected[0][0]}'] td.oc-mean-cell", has_text=expected[0][1]).first.wait_for(
        timeout=60_000
    )
    assert shown_means(frame) == expected


def test_pool_repeats_shows_the_run_groups_in_summary_table_export_and_link(page, repeats_tensorboard_url):
    url = repeats_tensorboard_url
    errors = console_errors(page)
    single = route_json(url, "compare", PAIR)
    pooled = route_json(url, "compare", {**PAIR, "repeats": "1"})
    baseline_runs, target_runs = pooled["summary"]["baseline_runs"], pooled["summary"]["target_runs"]
    assert single["summary"]["baseline_runs"] == [PAIR["baseline"]]
    assert len(baseline_runs) == len(target_runs) == 6
    # pooled rows have means over every run, and no percentiles
    assert [row["baseline_mean_us"] for row in pooled["rows"][:FIRST_ROWS]] != [
        row["baseline_mean_us"] for row in single["rows"][:FIRST_ROWS]
    ]
    assert all(
        row[f"{side}_{name}_us"] is None
        for row in pooled["rows"]
        for side in ("baseline", "target")
        for name in ("p10", "median", "p90")
    )

    frame = open_op_compare(page, url, **PAIR)
    box = frame.locator("#oc-pool")
    frame.locator("#oc-pool:not([disabled]):not(:checked)").wait_for(timeout=60_000)
    assert "repeats" in frame.locator("label.oc-pool").get_attribute("title")
    wait_for_means(frame, page, single)
    assert frame.locator(".oc-pooled").count() == 0
    assert frame.locator(".oc-whisker").count() > 0  # one run's spread, drawn

    # on: the route's run groups, named in the summary
    box.check()
    frame.locator("#oc-baseline-pooled").wait_for(timeout=60_000)
    wait_for_means(frame, page, pooled)
    for side, runs in (("baseline", baseline_runs), ("target", target_runs)):
        line = frame.locator(f"#oc-{side}-pooled")
        assert line.inner_text() == f"{len(runs)} runs pooled"
        assert all(run in line.get_attribute("title") for run in runs)
    assert frame.locator(".oc-chart-card h3", has_text=f"({len(baseline_runs)} runs pooled)").count() == 2
    steps = pooled["summary"]["baseline"]["steps"]
    assert f"{steps} steps" in frame.locator(".oc-run-card").first.inner_text()
    # the spread is not pooled: no whisker, and no error drawing none
    assert frame.locator(".oc-whisker").count() == 0
    assert frame.locator("tr.oc-row").count() > 0
    assert tab_state(page) == {**PAIR, "repeats": "1"}
    frame.locator("section.oc-chooser").first.evaluate("el => el.scrollIntoView({block: 'start'})")
    page.screenshot(path=SCREENSHOT)

    # the export is the route's pooled CSV, byte for byte
    href = frame.locator("#oc-export").get_attribute("href")
    assert urllib.parse.parse_qs(urllib.parse.urlsplit(href).query)["repeats"] == ["1"]
    with page.expect_download() as download_info:
        frame.locator("#oc-export").click()
    status, body = route(url, "compare.csv", {**PAIR, "repeats": "1"})
    assert status == 200
    assert Path(download_info.value.path()).read_bytes() == body

    # a reload keeps it
    page.reload()
    frame = page.frame_locator(TAB_FRAME)
    frame.locator("#oc-pool:checked").wait_for(timeout=60_000)
    frame.locator("#oc-target-pooled").wait_for(timeout=60_000)
    wait_for_means(frame, page, pooled)

    # off: the single runs again, and the link forgets it
    frame.locator("#oc-pool").uncheck()
    wait_for_means(frame, page, single)
    assert frame.locator(".oc-pooled").count() == 0
    assert "repeats" not in tab_state(page)
    assert "repeats" not in urllib.parse.parse_qs(
        urllib.parse.urlsplit(frame.locator("#oc-export").get_attribute("href")).query
    )
    assert not page.page_errors
    assert errors == []


def test_pool_repeats_is_disabled_where_the_runs_have_no_repeats(page, tensorboard_url):
    errors = console_errors(page)
    frame = open_op_compare(page, tensorboard_url)
    frame.locator("#oc-count").wait_for(timeout=60_000)
    frame.locator("#oc-pool[disabled]:not(:checked)").wait_for()
    title = frame.locator("label.oc-pool").get_attribute("title")
    assert "record --repeats N" in title
    assert frame.locator("label.oc-pool.oc-disabled").count() == 1
    # a link asking for it keeps the choice but asks for the single runs
    state = tab_state(page)
    assert state["baseline"] and state["target"]
    frame = reopen_op_compare(page, **state, repeats="1")
    frame.locator("#oc-count").wait_for(timeout=60_000)
    frame.locator("#oc-pool[disabled]:not(:checked)").wait_for()
    assert "repeats" not in urllib.parse.parse_qs(
        urllib.parse.urlsplit(frame.locator("#oc-export").get_attribute("href")).query
    )
    assert tab_state(page).get("repeats") == "1"
    assert frame.locator(".oc-pooled").count() == 0
    assert not page.page_errors
    assert errors == []


def test_the_pages_of_the_chosen_runs_say_they_do_not_pool(page, repeats_tensorboard_url):
    """Layers, Memory, Modules and Roofline read the two runs chosen: with Pool repeats on, each says so."""
    url = repeats_tensorboard_url
    errors = console_errors(page)
    pages = (
        ("layers", "#oc-layers-summary tr"),
        ("memory", ".oc-memory-card"),
        ("modules", "#oc-modules-table tbody tr"),
        ("roofline", "#oc-roofline-table tbody tr"),
    )
    open_op_compare(page, url, **PAIR)
    for view, ready in pages:  # first without pooling: the tab keeps its last state for the browser tab
        frame = reopen_op_compare(page, ready=ready, view=view, **PAIR)
        assert frame.locator(".oc-pool-note").count() == 0, view
    for view, ready in pages:
        frame = reopen_op_compare(page, ready=ready, view=view, repeats="1", **PAIR)
        note = frame.locator(".oc-pool-note:visible")
        assert note.count() == 1 and "not their repeats" in note.inner_text(), view
    assert not page.page_errors and not errors
