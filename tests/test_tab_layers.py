"""The Layers page (issue 17) in a real browser (Debian's Chromium driven by Playwright)
against a real TensorBoard serving the demo's PyTorch CNN recorded on an H100 host and
GPU (tests/fixtures/gpu_h100/demo: record_function ranges, CUDA runtime and driver calls,
kernels) beside the demo's CPU-only Keras runs (demo_logs/tf_keras: a framework layer
only): the four layers of the Compare page's runs, the rows of the application and the
runtime, their sort, filter, CSV and link, and what the page says instead of a blank
page, read against the layers route's own document. Numbers are checked as the tab's own
format.js writes the route's values, so the test compares text to text."""

from __future__ import annotations

import json
import shutil
import urllib.parse
from pathlib import Path

import pytest
from conftest import (
    FIXTURES,
    REALTRACES,
    REPO,
    TAB_FRAME,
    console_errors,
    open_op_compare,
    route,
    route_json,
    tab_state,
)

CPU = "mnist_cnn_torch_bf16_cpu_bs16_rep1"
GPU = "mnist_cnn_torch_bf16_gpu_bs16_rep1"
TF_BASELINE, TF_TARGET = "tf_keras/mnist_cnn_cpu_bs64", "tf_keras/mnist_cnn_cpu_bs16"
LAYERS = ["application", "framework", "runtime", "device"]
SUMMARY = "#oc-layers-summary tbody tr.oc-layers-layer"
ROWS = "#oc-layers-table tbody tr.oc-layers-row"
NUMBERS = ["baseline_us", "baseline_share", "target_us", "target_share", "speedup"]
ROW_COLUMNS = [
    "name",
    "kind",
    "baseline_calls",
    "target_calls",
    "baseline_wall_us",
    "target_wall_us",
    "baseline_mean_us",
    "target_mean_us",
    "speedup",
    "status",
]
SCREENSHOT, SCREENSHOT_DARK = "/tmp/layers-light.png", "/tmp/layers-dark.png"

# What the tab shows of a route's values, written by the tab's own format.js (imported in
# the plugin's frame, the module instance the page uses).
FORMATTED = """async (document) => {
  const f = await import(new URL('format.js', window.document.baseURI).href);
  const layers = {};
  for (const total of document.layers) {
    layers[total.layer] = [f.formatTime(total.baseline_us), f.formatShare(total.baseline_share),
                           f.formatTime(total.target_us), f.formatShare(total.target_share),
                           f.formatSpeedup(total.speedup)];
  }
  const rows = document.rows.map((row) => [row.name, row.kind, f.formatCount(row.baseline_calls),
    f.formatCount(row.target_calls), f.formatTime(row.baseline_wall_us), f.formatTime(row.target_wall_us),
    f.formatTime(row.baseline_mean_us), f.formatTime(row.target_mean_us), f.formatSpeedup(row.speedup),
    f.formatStatus(row.status)]);
  return {layers, rows, missing: [f.formatTime(null), f.formatShare(null), f.formatTime(null),
                                  f.formatShare(null), f.formatSpeedup(null)]};
}"""


@pytest.fixture(scope="module")
def layers_tensorboard_url(tmp_path_factory):
    """TensorBoard on a copy of the H100 demo runs, with the demo's Keras runs beside them
    as tf_keras/... (one server for both pairs)."""
    from tensorboard_server import running_tensorboard

    logdir = tmp_path_factory.mktemp("layers") / "logdir"
    shutil.copytree(FIXTURES / "gpu_h100" / "demo", logdir)
    shutil.copytree(REPO / "demo_logs" / "tf_keras", logdir / "tf_keras")
    for device in ("cpu", "gpu"):  # the public TF1 timelines: no application ranges, no runtime calls
        shutil.copytree(REALTRACES / "tf1_timeline_mlp_cpu_vs_gpu" / device, logdir / "tf1" / device)
    with running_tensorboard(logdir) as url:
        yield url


def plugin_frame(page):
    """The plugin's frame as a Frame (to evaluate in), not a FrameLocator."""
    return next(frame for frame in page.frames if "plugin_entry.html" in frame.url)


def cells(locator) -> list[str]:
    return [text.strip() for text in locator.locator("td").all_inner_texts()]


def shown_rows(frame) -> list[str]:
    return frame.locator(ROWS).evaluate_all("rows => rows.map(row => row.dataset.name)")


def in_groups(rows: list[dict], column: str | None = None, descending: bool = False) -> list[str]:
    """The names in the page's order: application rows, then runtime rows, each group by
    `column` (missing values last either way, ties as the route orders them)."""
    names = []
    for layer in ("application", "runtime"):
        mine = [row for row in rows if row["layer"] == layer]
        if column:
            present = sorted(
                (row for row in mine if row[column] is not None), key=lambda row: row[column], reverse=descending
            )
            mine = present + [row for row in mine if row[column] is None]
        names += [row["name"] for row in mine]
    return names


def check_summary(frame, document: dict, formatted: dict):
    """The four layers, in order: the route's numbers where a run records the layer, "–"
    where not (never 0), and the basis beside each recorded layer."""
    assert frame.locator(SUMMARY).evaluate_all("rows => rows.map(row => row.dataset.layer)") == LAYERS
    by_layer = {total["layer"]: total for total in document["layers"]}
    for layer in LAYERS:
        row = frame.locator(f"{SUMMARY}[data-layer='{layer}']")
        shown = cells(row)
        assert shown[0].startswith(layer.capitalize())
        if layer in by_layer:
            expected = list(formatted["layers"][layer])
            for position, share in ((1, "baseline_share"), (3, "target_share")):
                if (by_layer[layer][share] or 0) > 1:  # past 100%: the reason in the cell (issue 51)
                    expected[position] += "\nthreads side by side"
            assert shown[1:] == expected, layer
            basis = by_layer[layer]["basis"]
            assert row.locator(".oc-layers-basis").get_attribute("data-basis") == basis
            assert row.locator(".oc-layers-basis").inner_text() == f"{basis.replace('/', ' / ')} time"
            assert row.get_attribute("data-recorded") == "true"
        else:
            assert shown[1:] == formatted["missing"] == ["–"] * 5, layer
            assert row.locator(".oc-layers-basis").inner_text() == "not recorded"
            assert row.get_attribute("data-recorded") == "false"


def check_rows(frame, document: dict, formatted: dict, names: list[str]):
    """The rows on screen are `names`, each saying what the route says of it."""
    assert shown_rows(frame) == names
    by_name = {row[0]: row for row in formatted["rows"]}
    for shown in frame.locator(ROWS).all():
        texts = cells(shown)
        assert texts == by_name[shown.get_attribute("data-name")]


def test_the_layers_of_a_cpu_and_a_gpu_run_sort_filter_download_and_survive_a_reload(page, layers_tensorboard_url):
    url = layers_tensorboard_url
    errors = console_errors(page)
    document = route_json(url, "layers", baseline=CPU, target=GPU)
    rows = document["rows"]
    assert document["per_step"] is True and {total["layer"] for total in document["layers"]} == set(LAYERS)
    assert {row["layer"] for row in rows} == {"application", "runtime"} and len(rows) > 5

    frame = open_op_compare(page, url, ready=ROWS, view="layers", baseline=CPU, target=GPU)
    formatted = plugin_frame(page).evaluate(FORMATTED, document)
    assert frame.locator(".oc-page-tab.oc-active").inner_text().lower() == "layers"
    assert frame.locator("#oc-layers").is_visible() and frame.locator("#oc-modules").is_hidden()
    caption = frame.locator("#oc-layers-caption").inner_text()
    assert caption.startswith(f"{CPU} → {GPU}: times per profiled step")
    # the pair's headline, the number Compare's first card shows for the same runs
    compare = route_json(url, "compare", baseline=CPU, target=GPU)["summary"]
    assert document["headline"]["speedup"] == compare["headline_speedup"]
    assert (
        frame.locator("#oc-layers-headline")
        .inner_text()
        .startswith(f"Whole step: {compare['headline_speedup']:.2f}× faster on the target (step wall time: median of ")
    )
    assert frame.locator(".oc-layers-summary-card .oc-card-title").inner_text().lower() == (
        "time per layer, per profiled step"
    )

    # the four layers: the CPU run has no runtime calls nor kernels: "–", not 0
    check_summary(frame, document, formatted)
    by_layer = {total["layer"]: total for total in document["layers"]}
    assert by_layer["runtime"]["baseline_us"] is None and by_layer["device"]["baseline_us"] is None
    for layer in ("runtime", "device"):
        shown = cells(frame.locator(f"{SUMMARY}[data-layer='{layer}']"))
        assert shown[1] == shown[2] == shown[5] == "–" and shown[3] != "–"
    # a speedup is coloured as in the Compare table
    speedup = frame.locator(f"{SUMMARY}[data-layer='framework'] .oc-speedup")
    assert speedup.evaluate("el => el.style.background") != ""

    # the columns: each layer's numbers, each row's, in the order the checks read them
    columns = "heads => heads.map(head => head.dataset.layersColumn)"
    assert frame.locator("#oc-layers-summary thead th[data-layers-column]").evaluate_all(columns) == NUMBERS
    assert frame.locator("#oc-layers-table thead th").evaluate_all(columns) == ROW_COLUMNS

    # the rows: the route's, in its order, under a heading per layer
    check_rows(frame, document, formatted, [row["name"] for row in rows])
    assert in_groups(rows) == [row["name"] for row in rows]  # the route groups application first
    groups = frame.locator("#oc-layers-table tbody tr.oc-layers-group")
    assert groups.evaluate_all("rows => rows.map(row => row.dataset.layer)") == ["application", "runtime"]
    assert groups.first.inner_text().startswith("Application ranges")
    assert frame.locator("#oc-layers-count").inner_text() == f"{len(rows)} rows"
    assert (
        frame.locator("#oc-layers-table th[data-layers-column='baseline_wall_us']")
        .inner_text()
        .startswith("Baseline wall / step")
    )
    assert frame.locator("#oc-layers-notes .oc-layers-note").all_inner_texts() == document["notes"]
    assert tab_state(page)["view"] == "layers"

    # sorting: a number column starts with the largest, a second click flips it, text
    # starts at A; each within its layer, missing values last
    header = frame.locator("#oc-layers-table th[data-layers-column='target_mean_us']")
    header.click()
    assert header.get_attribute("aria-sort") == "descending"
    check_rows(frame, document, formatted, in_groups(rows, "target_mean_us", descending=True))
    header.click()
    assert header.get_attribute("aria-sort") == "ascending"
    check_rows(frame, document, formatted, in_groups(rows, "target_mean_us"))
    frame.locator("#oc-layers-table th[data-layers-column='baseline_mean_us']").click()
    assert shown_rows(frame) == in_groups(rows, "baseline_mean_us", descending=True)
    frame.locator("#oc-layers-table th[data-layers-column='name']").click()
    assert shown_rows(frame) == in_groups(rows, "name")
    assert frame.locator("#oc-layers-table th[aria-sort='ascending']").get_attribute("data-layers-column") == "name"
    assert (tab_state(page)["layers_sort"], tab_state(page)["layers_order"]) == ("name", "asc")

    # the filter: the rows whose name or kind holds the text, any case
    frame.locator("#oc-layers-filter").fill("LAUNCH")
    kept = [row for row in rows if "launch" in row["name"].lower() or "launch" in row["kind"].lower()]
    assert 0 < len(kept) < len(rows)
    check_rows(frame, document, formatted, in_groups(kept, "name"))
    assert frame.locator("#oc-layers-count").inner_text() == f"{len(kept)} of {len(rows)} rows"
    assert groups.evaluate_all("rows => rows.map(row => row.dataset.layer)") == ["runtime"]
    assert tab_state(page)["layers_q"] == "LAUNCH"
    frame.locator("#oc-layers-filter").fill("cuda_driver")
    assert shown_rows(frame) == in_groups([row for row in rows if row["kind"] == "cuda_driver"], "name")
    frame.locator("#oc-layers-filter").fill("no such range")
    assert frame.locator(ROWS).count() == 0
    assert frame.locator("#oc-layers-table .oc-no-rows").inner_text() == "No range or call has that name or kind"
    frame.locator("#oc-layers-filter").fill("launch")

    # the CSV: the route's for the same runs, whatever the table's sort and filter
    href = frame.locator("#oc-layers-export").get_attribute("href")
    assert urllib.parse.urlsplit(href).path == "layers.csv"
    assert dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(href).query)) == {"baseline": CPU, "target": GPU}
    with page.expect_download() as download_info:
        frame.locator("#oc-layers-export").click()
    downloaded = Path(download_info.value.path()).read_bytes()
    status, body = route(url, "layers.csv", baseline=CPU, target=GPU)
    assert status == 200 and downloaded == body
    assert body.decode().count("\n") >= len(rows)  # a header, then a line per row

    # the link keeps the page, its sort and its filter
    page.reload()
    frame = page.frame_locator(TAB_FRAME)
    frame.locator(ROWS).first.wait_for(timeout=60_000)
    assert frame.locator(".oc-page-tab.oc-active").inner_text().lower() == "layers"
    assert frame.locator("#oc-layers-filter").input_value() == "launch"
    assert shown_rows(frame) == in_groups(kept, "name")
    assert frame.locator("#oc-layers-table th[data-layers-column='name']").get_attribute("aria-sort") == "ascending"
    check_summary(frame, document, formatted)
    frame.locator("#oc-layers-filter").fill("")
    assert shown_rows(frame) == in_groups(rows, "name")
    assert "layers_q" not in tab_state(page)
    page.screenshot(path=SCREENSHOT, full_page=True)
    assert not page.page_errors
    assert not errors


def test_a_cpu_only_keras_pair_shows_its_input_pipeline_and_dashes(page, layers_tensorboard_url):
    url = layers_tensorboard_url
    errors = console_errors(page)
    document = route_json(url, "layers", baseline=TF_BASELINE, target=TF_TARGET)
    assert [total["layer"] for total in document["layers"]] == ["application", "framework"]
    assert document["rows"] and {row["kind"] for row in document["rows"]} == {"Dataset"}

    frame = open_op_compare(page, url, ready=SUMMARY, view="layers", baseline=TF_BASELINE, target=TF_TARGET)
    formatted = plugin_frame(page).evaluate(FORMATTED, document)
    check_summary(frame, document, formatted)
    notes = frame.locator("#oc-layers-notes .oc-layers-note")
    assert notes.all_inner_texts() == document["notes"]
    assert frame.locator("#oc-layers-count").inner_text() == f"{len(document['rows'])} rows"
    # a share past 100% (several host threads): a full bar, and the route's number
    if (document["layers"][1]["baseline_share"] or 0) > 1:
        bar = frame.locator(f"{SUMMARY}[data-layer='framework'] td[data-layers-column='baseline_share'] .oc-layers-bar")
        assert "oc-layers-bar-over" in bar.get_attribute("class")
    page.screenshot(path="/tmp/layers-keras.png", full_page=True)
    assert not page.page_errors
    assert not errors


def test_runs_without_application_ranges_say_so(page, layers_tensorboard_url):
    url = layers_tensorboard_url
    errors = console_errors(page)
    document = route_json(url, "layers", baseline="tf1/cpu", target="tf1/gpu")
    assert [total["layer"] for total in document["layers"]] == ["framework", "device"] and not document["rows"]
    frame = open_op_compare(page, url, ready=SUMMARY, view="layers", baseline="tf1/cpu", target="tf1/gpu")
    check_summary(frame, document, plugin_frame(page).evaluate(FORMATTED, document))
    assert frame.locator("#oc-layers-notes .oc-layers-note").all_inner_texts() == document["notes"]
    assert any("no application ranges" in note for note in document["notes"])
    assert frame.locator("#oc-layers-table .oc-no-rows").inner_text() == (
        "No application ranges or runtime calls in these runs"
    )
    assert frame.locator("#oc-layers-count").inner_text() == "0 rows"
    assert frame.locator("#oc-layers-export").is_visible()
    assert not page.page_errors
    assert not errors


def test_the_page_shows_a_spinner_while_the_route_answers_and_the_routes_error(page, layers_tensorboard_url):
    """Never a blank page: the spinner while the route answers, then the route's own error
    in words where it fails."""
    url = layers_tensorboard_url
    errors = console_errors(page)

    # from the Compare page: the Layers tab shows its runs, after a spinner
    held = []
    page.route("**/data/plugin/op_compare/layers?*", lambda handled: held.append(handled))
    frame = open_op_compare(page, url, baseline=CPU, target=GPU)
    frame.locator(".oc-page-tab[data-page='layers']").click()
    loading = frame.locator("#oc-layers .oc-loading")
    loading.wait_for()
    assert loading.inner_text() == "Reading both runs…"
    assert tab_state(page)["view"] == "layers"
    while not held:
        page.wait_for_timeout(50)
    held[0].continue_()
    frame.locator(ROWS).first.wait_for(timeout=60_000)
    assert loading.is_hidden() and frame.locator("#oc-layers-message").count() == 0
    page.unroute("**/data/plugin/op_compare/layers?*")

    # the route's error (an unknown run: its 404), in words, in place of the page
    def unknown_run(handled):
        parts = urllib.parse.urlsplit(handled.request.url)
        query = urllib.parse.urlencode({"baseline": "no_such_run", "target": GPU})
        handled.continue_(url=urllib.parse.urlunsplit(parts._replace(query=query)))

    status, body = route(url, "layers", baseline="no_such_run", target=GPU)
    assert status == 404
    message = json.loads(body)["error"]["message"]
    page.route("**/data/plugin/op_compare/layers?*", unknown_run)
    page.reload()
    frame = page.frame_locator(TAB_FRAME)
    box = frame.locator("#oc-layers-message.oc-panel-error")
    box.wait_for(timeout=60_000)
    assert box.locator(".oc-panel-title").inner_text() == "The layers cannot be compared"
    assert box.locator(".oc-panel-text").inner_text() == message
    assert frame.locator("#oc-layers-summary").is_hidden() and frame.locator("#oc-layers-export").is_hidden()
    assert not page.page_errors
    assert [error for error in errors if "status of 404" not in error] == []


def test_without_runs_to_compare_the_page_says_so_and_leads_to_the_compare_page(page, layers_tensorboard_url):
    """A logdir with no pair to suggest, and no runs in the link: the Compare page chooses
    none, and this page says so, with a way to the Compare page."""
    url = layers_tensorboard_url
    errors = console_errors(page)

    def without_suggestion(handled):
        answer = handled.fetch()
        listing = answer.json()
        listing["suggested"] = None
        handled.fulfill(response=answer, json=listing)

    page.route("**/data/plugin/op_compare/runs*", without_suggestion)
    frame = open_op_compare(page, url, ready="#oc-layers-message", view="layers")
    note = frame.locator("#oc-layers-message.oc-panel-note")
    assert note.locator(".oc-panel-title").inner_text() == "No runs chosen"
    assert frame.locator("#oc-layers-summary").is_hidden()
    frame.locator("#oc-layers-open-compare").click()
    assert frame.locator(".oc-page-tab.oc-active").inner_text().lower() == "compare runs"
    assert frame.locator("#oc-layers").is_hidden() and "view" not in tab_state(page)
    assert not page.page_errors and errors == []
    message = frame.locator("#oc-message.oc-panel-note")
    message.wait_for()
    assert message.locator(".oc-panel-title").inner_text() == "Choose two runs to compare"


def test_the_layers_page_in_tensorboards_dark_theme(browser, layers_tensorboard_url):
    context = browser.new_context(viewport={"width": 1500, "height": 1100}, color_scheme="dark")
    page = context.new_page()
    errors = console_errors(page)
    frame = open_op_compare(page, layers_tensorboard_url, ready=ROWS, view="layers", baseline=CPU, target=GPU)
    assert frame.locator("html").get_attribute("class") == "oc-dark"
    style = "(el, property) => getComputedStyle(el)[property]"
    surface, text = "rgb(58, 58, 58)", "rgb(232, 232, 232)"  # --oc-surface, --oc-text of html.oc-dark
    assert frame.locator(".oc-layers-summary-card").evaluate(style, "backgroundColor") == surface
    assert frame.locator(".oc-layers-scroll").evaluate(style, "backgroundColor") == surface
    assert frame.locator(f"{ROWS} td").first.evaluate(style, "color") == text
    assert frame.locator(f"{SUMMARY}[data-layer='framework'] .oc-layers-label").evaluate(style, "color") == text
    assert frame.locator("#oc-layers-table thead th").first.evaluate(style, "backgroundColor") == "rgb(64, 64, 64)"
    assert frame.locator(".oc-layers-bar").first.evaluate(style, "backgroundColor") == "rgb(74, 74, 74)"
    page.screenshot(path=SCREENSHOT_DARK, full_page=True)
    assert not errors
    context.close()
