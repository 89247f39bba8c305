"""The Memory page in a real browser against a real TensorBoard: the demo CNN recorded with
memory profiling on (tests/fixtures/memory: PyTorch at batch 8 and 32, Keras at batch 8 and
32), and this project's PyTorch runs recorded without it (tests/fixtures/logdir/torch). The
page's plots, peaks, table and CSV are read against the memory route's own document."""

from __future__ import annotations

import shutil
import urllib.parse
from pathlib import Path

import pytest
from conftest import FIXTURES, TAB_FRAME, console_errors, open_op_compare, route, route_json, tab_state

from tb_opcompare.text import format_bytes, format_speedup

ROWS = "#oc-memory-table tbody tr.oc-memory-row"
SMALL, LARGE = "torch_cnn_cpu_bs8", "torch_cnn_cpu_bs32"
TF_SMALL = "tf_cnn_cpu_bs8/train"
NO_MEMORY = ("torch/cnn_torch_cpu_bs4", "torch/cnn_torch_cpu_bs16")  # recorded without profile_memory


@pytest.fixture(scope="module")
def memory_tensorboard_url(tmp_path_factory):
    """TensorBoard on a copy of the memory fixtures plus two PyTorch runs without memory."""
    from tensorboard_server import running_tensorboard

    logdir = tmp_path_factory.mktemp("memory") / "logdir"
    shutil.copytree(FIXTURES / "memory" / "logdir", logdir)
    for run in NO_MEMORY:
        shutil.copytree(FIXTURES / "logdir" / run, logdir / run)
    with running_tensorboard(logdir) as url:
        yield url


def shown_keys(frame) -> list[str]:
    return frame.locator(ROWS).evaluate_all("rows => rows.map(row => row.dataset.key)")


def test_the_memory_page_plots_each_runs_memory_and_lists_each_ops_allocations(page, memory_tensorboard_url):
    url = memory_tensorboard_url
    errors = console_errors(page)
    document = route_json(url, "memory", baseline=SMALL, target=LARGE)
    assert [series["device"] for series in document["series"]] == ["CPU", "CPU"]

    frame = open_op_compare(page, url, ready=ROWS, view="memory", baseline=SMALL, target=LARGE)
    assert frame.locator(".oc-page-tab.oc-active").inner_text().lower() == "memory"
    # one plot for the CPU with both runs drawn on it as plotly lines, each with its peak marked
    plot = frame.locator(".oc-memory-plot[data-device='CPU']")
    plot.locator(".main-svg").first.wait_for()
    assert frame.locator(".oc-memory-plot").count() == 1
    traces = plot.evaluate("element => element.data.map(trace => [trace.mode, trace.x.length, Math.max(...trace.y)])")
    lines = [trace for trace in traces if trace[0] == "lines"]
    assert [length for _, length, _ in lines] == [len(series["time_us"]) for series in document["series"]]
    layout_unit = plot.evaluate("element => element.layout.yaxis.title.text")
    assert layout_unit == "MiB in use"
    for (_, _, highest), series in zip(lines, document["series"]):
        assert highest == pytest.approx(series["peak_bytes"] / 2**20)
    title = frame.locator(".oc-memory-plot-title").inner_text()
    peaks = [document[side]["peak_memory_bytes"]["CPU"] for side in ("baseline", "target")]
    assert title == (
        f"CPU · peak {format_bytes(peaks[0])} → {format_bytes(peaks[1])} ({format_speedup(peaks[1] / peaks[0])})"
    )
    # each run's card: its peak per device and what it allocated per step
    for side in ("baseline", "target"):
        card = frame.locator(f".oc-memory-card[data-side='{side}']")
        assert card.locator(".oc-memory-peak[data-device='CPU'] .oc-kv-value").inner_text() == format_bytes(
            document[side]["peak_memory_bytes"]["CPU"]
        )
        assert format_bytes(document[side]["allocated_bytes_per_step"]) in card.inner_text()

    # the table: the route's rows in its order (the largest allocation first), as it formats them
    keys = [row["key"] for row in document["rows"]]
    assert shown_keys(frame) == keys and "aten::mm" in keys
    mm = next(row for row in document["rows"] if row["key"] == "aten::mm")
    cells = frame.locator(f"{ROWS}[data-key='aten::mm'] td").all_inner_texts()
    assert cells[1:8] == [
        format_bytes(mm[column])
        for column in (
            "baseline_alloc_bytes",
            "target_alloc_bytes",
            "baseline_alloc_bytes_per_execution",
            "target_alloc_bytes_per_execution",
            "baseline_net_bytes",
            "target_net_bytes",
        )
    ] + [format_speedup(mm["ratio"])]
    # sorted by ratio, largest first, then filtered; both kept in the link
    frame.locator("#oc-memory-table th[data-memory-column='ratio']").click()
    by_ratio = sorted((row for row in document["rows"] if row["ratio"] is not None), key=lambda row: -row["ratio"])
    assert shown_keys(frame)[:5] == [row["key"] for row in by_ratio[:5]]
    frame.locator("#oc-memory-filter").fill("pool")
    assert shown_keys(frame) == [key for key in shown_keys(frame) if "pool" in key.lower()] != []
    assert len(shown_keys(frame)) == sum("pool" in key.lower() for key in keys)
    assert frame.locator("#oc-memory-count").inner_text() == f"{len(shown_keys(frame))} of {len(keys)} ops"
    state = tab_state(page)
    assert (state["view"], state["memory_sort"], state["memory_order"], state["memory_q"]) == (
        "memory",
        "ratio",
        "desc",
        "pool",
    )
    page.screenshot(path="/tmp/memory-page.png", full_page=True)

    # the CSV: the route's for the same runs
    href = frame.locator("#oc-memory-export").get_attribute("href")
    assert urllib.parse.urlsplit(href).path == "memory.csv"
    assert dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(href).query)) == {"baseline": SMALL, "target": LARGE}
    with page.expect_download() as download_info:
        frame.locator("#oc-memory-export").click()
    status, body = route(url, "memory.csv", baseline=SMALL, target=LARGE)
    assert status == 200 and Path(download_info.value.path()).read_bytes() == body

    # a reload keeps the page, its sort and its filter
    page.reload()
    frame = page.frame_locator(TAB_FRAME)
    frame.locator(ROWS).first.wait_for(timeout=60_000)
    assert frame.locator("#oc-memory-filter").input_value() == "pool"
    assert frame.locator("#oc-memory-table th[data-memory-column='ratio']").get_attribute("aria-sort") == "descending"
    assert not page.page_errors
    assert not errors


def test_pytorch_against_tensorflow_plots_each_runs_own_allocator(page, memory_tensorboard_url):
    url = memory_tensorboard_url
    errors = console_errors(page)
    document = route_json(url, "memory", baseline=SMALL, target=TF_SMALL)
    frame = open_op_compare(page, url, ready=ROWS, view="memory", baseline=SMALL, target=TF_SMALL)
    frame.locator(".oc-memory-plot[data-device='mklcpu'] .main-svg").first.wait_for()
    assert frame.locator(".oc-memory-plot").evaluate_all("plots => plots.map(plot => plot.dataset.device)") == [
        "CPU",
        "mklcpu",
    ]
    notes = frame.locator("#oc-memory-notes .oc-memory-note").all_inner_texts()
    assert notes == document["notes"] and any("TensorFlow traces only some allocations" in note for note in notes)
    page.screenshot(path="/tmp/memory-page-tf.png", full_page=True)
    assert not page.page_errors
    assert not errors


def test_runs_without_memory_get_a_message_saying_how_to_record_it(page, memory_tensorboard_url):
    url = memory_tensorboard_url
    errors = console_errors(page)
    frame = open_op_compare(
        page, url, ready="#oc-memory-message", view="memory", baseline=NO_MEMORY[0], target=NO_MEMORY[1]
    )
    message = frame.locator("#oc-memory-message")
    assert "Neither run records memory" in message.inner_text()
    assert "profile_memory=True" in message.inner_text()
    assert frame.locator(".oc-memory-body").is_hidden() and frame.locator("#oc-memory-export").is_hidden()
    page.screenshot(path="/tmp/memory-page-no-memory.png", full_page=True)
    frame.locator("#oc-memory-open-compare").click()
    assert frame.locator("#oc-memory").is_hidden()
    assert not page.page_errors
    assert not errors


def test_a_run_without_memory_beside_one_with_it(page, memory_tensorboard_url):
    """The page shows what there is, and says why the other run is missing from it."""
    url = memory_tensorboard_url
    errors = console_errors(page)
    frame = open_op_compare(page, url, ready=ROWS, view="memory", baseline=NO_MEMORY[0], target=SMALL)
    frame.locator(".oc-memory-plot .main-svg").first.wait_for()
    assert frame.locator(".oc-memory-card[data-side='baseline']").inner_text().endswith("records no memory")
    note = frame.locator("#oc-memory-notes .oc-memory-note").first.inner_text()
    assert note.startswith(f"{NO_MEMORY[0]} records no memory") and "profile_memory=True" in note
    assert not page.page_errors
    assert not errors
