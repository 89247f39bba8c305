"""The Modules page in a real browser against a real TensorBoard serving the demo's PyTorch
CNN recorded with Python stacks on an H100 (tests/fixtures/gpu_h100/modules): the module
tree of the Compare page's runs, its expanding and collapsing, its filter, its CSV and its
link, read against the modules route's own document."""

from __future__ import annotations

import urllib.parse
from pathlib import Path

from conftest import TAB_FRAME, console_errors, open_op_compare, route, route_json, tab_state

from tb_opcompare.text import format_bytes, format_share, format_speedup, format_time

RUN = "mnist_cnn_torch_stack_gpu_bs16"
ROWS = "#oc-modules-table tbody tr.oc-tree-row"
CONV = "Sequential_0/Conv2d_0"


def shown_ids(frame) -> list[str]:
    return frame.locator(ROWS).evaluate_all("rows => rows.map(row => row.dataset.id)")


def row(frame, node_id: str):
    return frame.locator(f"{ROWS}[data-id='{node_id}']")


def check_row(frame, node: dict):
    """A row says what the document says of its node, written by the tab's rules (the same
    golden rules as text.py's)."""
    cells = row(frame, node["id"]).locator("td").all_inner_texts()
    assert node["name"] in cells[0]
    assert cells[1:] == [
        format_time(node["baseline_us"]),
        format_time(node["target_us"]),
        format_share(node["baseline_share"]),
        format_share(node["target_share"]),
        format_speedup(node["speedup"]),
        format_bytes(node["baseline_alloc_bytes"]),
        format_bytes(node["target_alloc_bytes"]),
    ]


def test_the_module_tree_expands_collapses_filters_downloads_and_survives_a_reload(page, modules_tensorboard_url):
    url = modules_tensorboard_url
    errors = console_errors(page)
    document = route_json(url, "modules", baseline=RUN, target=RUN)
    nodes = document["nodes"]
    by_id = {node["id"]: node for node in nodes}
    assert document["source"] == "nn.Module calls" and document["per_step"] is True

    # the Compare page's runs, at first the root and the depth-1 modules open: depth 2 shows,
    # nothing deeper, and the ops outside every module call wait for a click
    frame = open_op_compare(page, url, ready=ROWS, view="modules", baseline=RUN, target=RUN)
    assert frame.locator(".oc-page-tab.oc-active").inner_text().lower() == "modules"
    expected = [node["id"] for node in nodes if node["depth"] <= 2 and node["parent"] != "(outside modules)"]
    assert shown_ids(frame) == expected
    for node_id in ("", "(outside modules)", "Sequential_0", "CrossEntropyLoss_0", CONV):
        assert row(frame, node_id).is_visible()
    assert row(frame, "").locator(".oc-tree-label").inner_text() == by_id[""]["name"] == "(whole model)"
    assert row(frame, "Sequential_0").locator("button.oc-tree-toggle").inner_text() == "▾"
    assert row(frame, CONV).locator("button.oc-tree-toggle").inner_text() == "▸"
    conv_ops = [node for node in nodes if node["parent"] == CONV]
    assert conv_ops and all(node["kind"] == "op" for node in conv_ops)
    assert row(frame, f"{CONV}/aten::conv2d").count() == 0  # no row is built for a closed module
    for node in nodes:
        if node["id"] in expected:
            check_row(frame, node)
    assert row(frame, "(outside modules)").locator("button.oc-tree-toggle").inner_text() == "▸"
    row(frame, "(outside modules)").locator("button.oc-tree-toggle").click()
    # ops are leaves, with no toggle
    assert row(frame, "(outside modules)/cudaLaunchKernel").locator("button").count() == 0
    row(frame, "(outside modules)").locator("button.oc-tree-toggle").click()
    caption = frame.locator("#oc-modules-caption").inner_text()
    assert "modules from nn.Module calls" in caption and "per profiled step" in caption
    assert frame.locator("#oc-modules-notes .oc-modules-note").all_inner_texts() == document["notes"]
    assert tab_state(page)["view"] == "modules"
    page.screenshot(path="/tmp/opcompare-modules.png", full_page=True)

    # opening Conv2d_0 shows its ops, as the route times them; closing hides them again
    row(frame, CONV).locator("button.oc-tree-toggle").click()
    row(frame, f"{CONV}/aten::conv2d").wait_for()
    assert row(frame, CONV).locator("button.oc-tree-toggle").get_attribute("aria-expanded") == "true"
    shown = shown_ids(frame)
    start = shown.index(CONV) + 1
    assert shown[start : start + len(conv_ops)] == [node["id"] for node in conv_ops]
    for node in conv_ops:
        check_row(frame, node)
    assert row(frame, f"{CONV}/aten::conv2d").locator("td").nth(1).inner_text() == format_time(
        by_id[f"{CONV}/aten::conv2d"]["baseline_us"]
    )
    row(frame, CONV).locator("button.oc-tree-toggle").click()
    row(frame, f"{CONV}/aten::conv2d").wait_for(state="detached")
    assert shown_ids(frame) == expected

    # expand all: every node; collapse all: the root alone
    frame.locator("#oc-modules-expand").click()
    assert shown_ids(frame) == [node["id"] for node in nodes]
    frame.locator("#oc-modules-collapse").click()
    assert shown_ids(frame) == [""]
    frame.locator("#oc-modules-expand").click()

    # a filter: the nodes whose name holds it (any case) and their ancestors, nothing else
    frame.locator("#oc-modules-filter").fill("Linear")
    keep = set()
    for node in nodes:
        if "linear" in node["name"].lower():
            node_id = node["id"]
            while node_id is not None:
                keep.add(node_id)
                node_id = by_id[node_id]["parent"]
    assert {"Sequential_0/Linear_0", "Sequential_0/Linear_1", "Sequential_0", ""} <= keep
    assert shown_ids(frame) == [node["id"] for node in nodes if node["id"] in keep]
    assert row(frame, "Sequential_0/Linear_0").is_visible() and row(frame, "Sequential_0/Linear_1").is_visible()
    for absent in (CONV, "(outside modules)", "CrossEntropyLoss_0"):
        assert row(frame, absent).count() == 0
    frame.locator("#oc-modules-filter").fill("")
    assert len(shown_ids(frame)) == len(nodes)  # back to what was open

    # the CSV: the route's for the same runs
    href = frame.locator("#oc-modules-export").get_attribute("href")
    assert urllib.parse.urlsplit(href).path == "modules.csv"
    assert dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(href).query)) == {"baseline": RUN, "target": RUN}
    with page.expect_download() as download_info:
        frame.locator("#oc-modules-export").click()
    downloaded = Path(download_info.value.path()).read_bytes()
    status, body = route(url, "modules.csv", baseline=RUN, target=RUN)
    assert status == 200 and downloaded == body

    # the link keeps the page (what was open need not survive)
    page.reload()
    frame = page.frame_locator(TAB_FRAME)
    frame.locator(ROWS).first.wait_for(timeout=60_000)
    assert frame.locator(".oc-page-tab.oc-active").inner_text().lower() == "modules"
    assert frame.locator("#oc-modules").is_visible() and frame.locator("#oc-matrix").is_hidden()
    assert shown_ids(frame) == expected
    assert tab_state(page)["view"] == "modules"
    assert not page.page_errors
    assert not errors


def test_the_modules_page_follows_the_compare_pages_runs(page, modules_tensorboard_url):
    url = modules_tensorboard_url
    errors = console_errors(page)
    frame = open_op_compare(page, url, baseline=RUN, target=RUN)
    frame.locator(".oc-page-tab[data-page='modules']").click()
    row(frame, "Sequential_0").wait_for(timeout=60_000)
    assert tab_state(page)["view"] == "modules"
    assert frame.locator("#oc-compare, #oc-count").first.is_hidden()
    frame.locator(".oc-page-tab[data-page='compare']").click()
    assert frame.locator("#oc-modules").is_hidden()
    assert "view" not in tab_state(page)
    assert not page.page_errors
    assert not errors


def test_the_module_tree_in_tensorboards_dark_theme(browser, modules_tensorboard_url):
    context = browser.new_context(viewport={"width": 1500, "height": 1000}, color_scheme="dark")
    page = context.new_page()
    errors = console_errors(page)
    frame = open_op_compare(page, modules_tensorboard_url, ready=ROWS, view="modules", baseline=RUN, target=RUN)
    assert frame.locator("html").get_attribute("class") == "oc-dark"
    style = "(el, property) => getComputedStyle(el)[property]"
    surface, text = "rgb(58, 58, 58)", "rgb(232, 232, 232)"  # --oc-surface, --oc-text of html.oc-dark
    assert frame.locator(".oc-modules-scroll").evaluate(style, "backgroundColor") == surface
    assert row(frame, "Sequential_0").locator("td").first.evaluate(style, "color") == text
    assert frame.locator("#oc-modules-table thead th").first.evaluate(style, "backgroundColor") == "rgb(64, 64, 64)"
    page.screenshot(path="/tmp/opcompare-modules-dark.png", full_page=True)
    assert not errors
    context.close()
