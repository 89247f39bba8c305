"""The Matrix view in a real browser (Debian's Chromium driven by Playwright) against a real
TensorBoard on 36 real runs of a CNN on an H100 host and GPU (fp32/bf16 x eager/torch.compile
x batch 1/16/64): the table, its reference, warm-up, sort, CSV download and the comparison a
cell opens, read against the matrix route's own documents."""

from __future__ import annotations

import csv
import io
import json
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from conftest import (
    FIXTURES,
    TAB_FRAME,
    console_errors,
    open_op_compare,
    reopen_op_compare,
    route,
    route_json,
    tab_state,
    tensorboard_on_copy,
)
from playwright.sync_api import expect

from tb_opcompare.text import format_speedup, format_throughput, format_time

SCREENSHOT = "/tmp/opcompare-matrix.png"
SCREENSHOT_DARK = "/tmp/opcompare-matrix-dark.png"
CPU, GPU = "CPU", "GPU"


@pytest.fixture(scope="module")
def matrix_tensorboard_url(tmp_path_factory):
    """TensorBoard on a copy of tests/fixtures/gpu_h100/matrix."""
    with tensorboard_on_copy(tmp_path_factory, FIXTURES / "gpu_h100" / "matrix") as url:
        yield url


def cell_locator(frame, cell: dict):
    return frame.locator(
        f"#oc-matrix-table tbody tr[data-model='{cell['model']}'][data-precision='{cell['precision']}']"
        f"[data-compiler='{cell['compiler']}'][data-batch-size='{cell['batch_size']}'] td[data-column='{cell['column']}']"
    )


def wait_for_reference(frame, key: str):
    frame.locator("#oc-matrix-table th.oc-matrix-reference", has_text="reference").and_(
        frame.locator(f"th[data-column='{key}']")
    ).wait_for(timeout=60_000)


def check_cells(frame, document: dict):
    """Every cell on screen says what the document says of it, written by the tab's rules
    (the same golden rules as text.py's)."""
    for cell in document["cells"]:
        shown = cell_locator(frame, cell)
        assert shown.locator(".oc-matrix-latency").inner_text() == format_time(cell["latency_us"])
        assert shown.locator(".oc-matrix-range").inner_text() == (
            f"p10–p90 {format_time(cell['latency_p10_us'])} – {format_time(cell['latency_p90_us'])}"
        )
        assert shown.locator(".oc-matrix-throughput").inner_text() == format_throughput(cell["throughput_per_s"])
        speedup = shown.locator(".oc-matrix-speedup").inner_text()
        assert speedup == ("reference" if cell["reference"] else format_speedup(cell["speedup"]))
        runs = len(cell["runs"])
        title = shown.get_attribute("title")
        assert title.startswith(f"{runs} run{'s' if runs > 1 else ''} pooled: {', '.join(cell['runs'])}\n")
        assert f"{cell['steps']} steady steps" in title
        assert ("oc-matrix-link" in shown.get_attribute("class")) is (not cell["reference"])


def row_key(row: dict) -> tuple:
    return row["precision"], row["compiler"], row["batch_size"]


def shown_order(frame) -> list[tuple]:
    return [
        (precision, compiler, int(size))
        for precision, compiler, size in frame.locator("#oc-matrix-table tbody tr").evaluate_all(
            "rows => rows.map(r => [r.dataset.precision, r.dataset.compiler, r.dataset.batchSize])"
        )
    ]


def test_the_matrix_its_reference_warmup_sort_csv_and_the_comparison_a_cell_opens(page, matrix_tensorboard_url):
    url = matrix_tensorboard_url
    errors = console_errors(page)
    document = route_json(url, "matrix")
    assert document["reference"] == CPU and document["warmup"] is None
    assert len(document["columns"]) == 2 and len(document["rows"]) == 12 and len(document["cells"]) == 24

    frame = open_op_compare(page, url, ready="#oc-matrix-table tbody tr", view="matrix")
    headers = frame.locator("#oc-matrix-table thead th.oc-matrix-column")
    assert headers.count() == 2  # devices only (issue 51: with precision and compiler too there were 8)
    for header, column in zip(headers.all(), document["columns"]):
        assert header.get_attribute("data-column") == column["key"]
        assert header.locator(".oc-matrix-device").inner_text() == column["device"]
    assert frame.locator("thead th.oc-matrix-reference").get_attribute("data-column") == CPU
    assert frame.locator("#oc-matrix-table tbody tr").count() == 12
    first = frame.locator("#oc-matrix-table tbody tr").first
    assert first.locator(".oc-matrix-configuration").inner_text() == "fp32 · eager"
    # a configuration's CPU and GPU cells side by side, the GPU's in view at 1400 px without scrolling (issue 51)
    page.set_viewport_size({"width": 1400, "height": 1000})
    right = frame.locator(f"thead th[data-column='{GPU}']").evaluate("el => el.getBoundingClientRect().right")
    assert right <= page.evaluate("window.innerWidth")
    assert shown_order(frame) == [row_key(row) for row in document["rows"]]
    check_cells(frame, document)
    assert frame.locator("#oc-matrix-reference").input_value() == CPU
    assert frame.locator("#oc-matrix-warmup").input_value() == ""
    assert frame.locator(".oc-matrix-warning").count() == len(document["warnings"])
    # the comparison the Compare view chose is in the link too; nothing of the matrix's defaults
    assert {key: value for key, value in tab_state(page).items() if key not in ("baseline", "target")} == {
        "view": "matrix"
    }
    page.screenshot(path=SCREENSHOT, full_page=True)

    # a header sorts the rows by its column's latency, largest first; again, smallest first
    latency = {(*row_key(cell), cell["column"]): cell["latency_us"] for cell in document["cells"]}
    by_gpu = sorted((row_key(row) for row in document["rows"]), key=lambda key: latency[(*key, GPU)])
    frame.locator(f"thead th[data-column='{GPU}']").click()
    assert shown_order(frame) == by_gpu[::-1]
    frame.locator(f"thead th[data-column='{GPU}']").click()
    assert shown_order(frame) == by_gpu
    check_cells(frame, document)

    # another reference: the route's speedups against it, and the link says so
    frame.locator("#oc-matrix-reference").select_option(GPU)
    against_gpu = route_json(url, "matrix", reference=GPU)
    wait_for_reference(frame, GPU)
    page.wait_for_function("() => location.hash.includes('matrix_reference=')")
    check_cells(frame, against_gpu)
    speedups = {(*row_key(cell), cell["column"]): cell["speedup"] for cell in document["cells"]}
    assert any(cell["speedup"] != speedups[(*row_key(cell), cell["column"])] for cell in against_gpu["cells"])
    assert tab_state(page)["matrix_reference"] == GPU

    # a warm-up of one step: the route's latencies without each run's first step
    frame.locator("#oc-matrix-warmup").fill("1")
    frame.locator("#oc-matrix-warmup").press("Enter")
    params = {"reference": GPU, "warmup": "1"}
    warm = route_json(url, "matrix", **params)
    assert warm["warmup"] == 1 and all(cell["warmup_steps"] == len(cell["runs"]) for cell in warm["cells"])
    frame.locator("#oc-matrix-caption", has_text="the first 1 step of every run").wait_for()
    check_cells(frame, warm)
    assert {key: tab_state(page).get(key) for key in ("view", "matrix_reference", "matrix_warmup")} == {
        "view": "matrix",
        "matrix_reference": GPU,
        "matrix_warmup": "1",
    }

    # the CSV: the route's for the same parameters, one line per cell and a header
    href = frame.locator("#oc-matrix-export").get_attribute("href")
    assert urllib.parse.urlsplit(href).path == "matrix.csv"
    assert dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(href).query)) == params
    with page.expect_download() as download_info:
        frame.locator("#oc-matrix-export").click()
    downloaded = Path(download_info.value.path()).read_bytes()
    status, body = route(url, "matrix.csv", **params)
    assert status == 200 and downloaded == body
    lines = list(csv.reader(io.StringIO(downloaded.decode("utf-8"))))
    assert len(lines) == len(warm["cells"]) + 1 == 25
    assert [line[lines[0].index("runs")] for line in lines[1:]] == [";".join(cell["runs"]) for cell in warm["cells"]]

    # the link brings it all back
    page.reload()
    frame = page.frame_locator(TAB_FRAME)
    frame.locator("#oc-matrix-table tbody tr").first.wait_for(timeout=60_000)
    wait_for_reference(frame, GPU)
    assert frame.locator("#oc-matrix-reference").input_value() == GPU
    assert frame.locator("#oc-matrix-warmup").input_value() == "1"
    check_cells(frame, warm)

    # a CPU cell opens the comparison of its row's reference run (baseline: the GPU's now) with its own run
    bf16_compile_64 = ("bf16", "torch.compile", 64)
    cell = next(cell for cell in warm["cells"] if cell["column"] == CPU and row_key(cell) == bf16_compile_64)
    reference = next(other for other in warm["cells"] if other["reference"] and row_key(other) == bf16_compile_64)
    expected = {"baseline": reference["runs"][0], "target": cell["runs"][0]}
    assert expected == {
        "baseline": "mnist_cnn_torch_gpu_bs64_bf16_compile_rep1",
        "target": "mnist_cnn_torch_cpu_bs64_bf16_compile",
    }
    cell_locator(frame, cell).click()
    frame.locator("#oc-count").wait_for(timeout=60_000)
    assert frame.locator("#oc-matrix").is_hidden()
    assert frame.locator(".oc-page-tab.oc-active").inner_text().lower() == "compare runs"
    assert frame.locator("#oc-baseline").input_value() == expected["baseline"]
    assert frame.locator("#oc-target").input_value() == expected["target"]
    rows = len(route_json(url, "compare", **expected)["rows"])
    assert frame.locator("#oc-count").inner_text() == f"Showing {rows} of {rows} ops"
    state = tab_state(page)
    assert {key: state.get(key) for key in ("baseline", "target", "view")} == {**expected, "view": None}
    assert state["matrix_reference"] == GPU  # the matrix keeps its settings for the way back

    # the reference cell itself opens nothing
    frame.locator(".oc-page-tab[data-page='matrix']").click()
    reference_cell = cell_locator(frame, reference)
    reference_cell.click()
    assert frame.locator("#oc-matrix").is_visible() and reference_cell.get_attribute("role") is None
    assert not page.page_errors
    assert not errors


def test_a_reference_without_runs_is_warned_of_and_a_bad_one_explained(page, matrix_tensorboard_url):
    url = matrix_tensorboard_url
    # a column no run has: the route's warning above the table, no speedups
    absent = route_json(url, "matrix", reference="tpu")
    assert absent["reference"] == "TPU" and absent["warnings"]
    frame = open_op_compare(page, url, ready="#oc-matrix-table tbody tr", view="matrix", matrix_reference="tpu")
    warnings = frame.locator("#oc-matrix-warnings .oc-matrix-warning")
    assert warnings.all_inner_texts() == absent["warnings"]
    assert frame.locator("#oc-matrix-reference").input_value() == "TPU"
    assert frame.locator("thead th.oc-matrix-reference").count() == 0
    assert set(frame.locator(".oc-matrix-speedup").all_inner_texts()) == {format_speedup(None)}

    # a reference that is no column at all: the route's 400, and the default to go back to
    status, body = route(url, "matrix", reference="CPU/fp32/eager")  # the older matrix's column
    assert status == 400
    frame = reopen_op_compare(page, ready="#oc-matrix-message", view="matrix", matrix_reference="CPU/fp32/eager")
    assert json.loads(body)["error"]["message"] in frame.locator("#oc-matrix-message").inner_text()
    assert frame.locator("#oc-matrix-export").is_hidden()
    frame.locator("#oc-matrix-reference").select_option("")
    wait_for_reference(frame, CPU)
    check_cells(frame, route_json(url, "matrix"))
    assert "matrix_reference" not in tab_state(page)
    assert not page.page_errors


def test_the_matrix_in_tensorboards_dark_theme(browser, matrix_tensorboard_url):
    context = browser.new_context(viewport={"width": 1500, "height": 1000}, color_scheme="dark")
    page = context.new_page()
    errors = console_errors(page)
    frame = open_op_compare(page, matrix_tensorboard_url, ready="#oc-matrix-table tbody tr", view="matrix")
    assert frame.locator("html").get_attribute("class") == "oc-dark"
    style = "(el, property) => getComputedStyle(el)[property]"
    surface, text = "rgb(58, 58, 58)", "rgb(232, 232, 232)"  # --oc-surface, --oc-text of html.oc-dark
    assert frame.locator(".oc-matrix-scroll").evaluate(style, "backgroundColor") == surface
    assert frame.locator("#oc-matrix-table tbody th").first.evaluate(style, "backgroundColor") == surface
    assert frame.locator(".oc-matrix-latency").first.evaluate(style, "color") == text
    assert frame.locator(".oc-matrix-device").first.evaluate(style, "color") == text
    header = frame.locator("#oc-matrix-table thead th").first.evaluate(style, "backgroundColor")
    assert header == "rgb(64, 64, 64)"
    page.screenshot(path=SCREENSHOT_DARK, full_page=True)
    assert not errors
    context.close()


def test_each_cell_shows_the_part_of_the_step_chosen_and_its_speedup(page, matrix_tensorboard_url):
    """Issue 53: the Matrix plots any one part of the step. Choosing one shows, in every
    cell, its time in the cell's median steady step and its speedup against the row's
    reference cell, as the route says; a device part is absent from the CPU's cells; the
    link keeps the choice."""
    url = matrix_tensorboard_url
    frame = open_op_compare(page, url, ready="#oc-matrix-table tbody tr", view="matrix")
    for part in ("forward", "device_idle"):
        document = route_json(url, "matrix", part=part)
        assert document["part"] == part
        frame.locator("#oc-matrix-part").select_option(part)
        page.wait_for_function(f"() => location.hash.includes('matrix_part={part}')")
        frame.locator(".oc-matrix-part").first.wait_for(timeout=60_000)
        label = frame.locator(f"#oc-matrix-part option[value='{part}']").inner_text()
        # the cells of the part chosen before stay on screen until the new document is drawn
        expect(frame.locator(".oc-matrix-part").filter(has_not_text=label)).to_have_count(0, timeout=60_000)
        for cell in document["cells"]:
            shown = cell_locator(frame, cell).locator(".oc-matrix-part").inner_text()
            if cell["part_us"] is None:
                assert shown == f"{label} –"
                continue
            expected = f"{label} {format_time(cell['part_us'])}"
            if not cell["reference"] and cell["part_speedup"] is not None:
                expected += f" · {format_speedup(cell['part_speedup'])}"
            assert shown == expected
        on_cpu = [cell["part_us"] for cell in document["cells"] if cell["column"] == CPU]
        on_gpu = [cell["part_us"] for cell in document["cells"] if cell["column"] == GPU]
        assert all(time is not None and time > 0 for time in on_gpu)
        assert all(time is None for time in on_cpu) if part == "device_idle" else all(on_cpu)
    page.reload()
    frame = page.frame_locator(TAB_FRAME)
    frame.locator(".oc-matrix-part").first.wait_for(timeout=60_000)
    assert frame.locator("#oc-matrix-part").input_value() == "device_idle"
    frame.locator("#oc-matrix-part").select_option("")
    page.wait_for_function("() => !location.hash.includes('matrix_part=')")
    # the hash changes at once, the cells once the matrix without a part is drawn
    expect(frame.locator(".oc-matrix-part")).to_have_count(0)
