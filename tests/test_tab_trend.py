"""The Trend view in a real browser (Debian's Chromium driven by Playwright) against a real
TensorBoard: its default runs, its plots, its hover and its CSV export, read against the
runs and trend routes' own documents."""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from conftest import FIXTURES, TAB_FRAME, open_op_compare, route, route_json, tab_state, tensorboard_on_copy

from tb_opcompare.text import format_time, shorten_names

SCREENSHOT = "/tmp/opcompare-trend.png"
SCREENSHOT_DEFAULT = "/tmp/opcompare-trend-default.png"
WHOLE_STEP = "(whole step)"
STEP_PART = "(step) "  # the step's parts, plotted with it (issue 53)


def op_keys(document: dict) -> list[str]:
    return [key for key in document["keys"] if key != WHOLE_STEP and not key.startswith(STEP_PART)]


LABEL_LENGTH = 26  # frontend/views/trend.js


@pytest.fixture(scope="module")
def versions_tensorboard_url(tmp_path_factory):
    """TensorBoard on a copy of the version matrix: one CNN recorded with torch 2.5, 2.13
    and 2.14 (and TF), one run per version and batch size."""
    ignore = shutil.ignore_patterns("oracles", "*.md")
    with tensorboard_on_copy(tmp_path_factory, FIXTURES / "versions", ignore=ignore) as url:
        yield url


def wait_for_trend(frame, document: dict):
    """Once the plots show `document`: as many ops lines as it has ops, the whole step's
    points, and its points listed."""
    ops = len(op_keys(document))
    points = len(document["points"])
    frame.locator(f"#oc-trend-ops .scatterlayer .trace >> nth={ops - 1}").wait_for(timeout=60_000)
    frame.locator("#oc-trend-step .scatterlayer .trace").first.wait_for()  # drawn after the ops plot
    frame.locator("#oc-trend-points", has_text=f"{points} point").wait_for()
    return ops, points


def expected_labels(document: dict) -> list[str]:
    values = shorten_names([point["value"] for point in document["points"]], LABEL_LENGTH)
    return [
        f"{value}{len(point['runs'])} {'run' if len(point['runs']) == 1 else 'runs'}"
        for value, point in zip(values, document["points"])
    ]


def plotted(frame, plot: str, keys: list[str]) -> list[dict]:
    """A plot's traces once they are `keys` (Plotly redraws a plot after the list of points
    says the new document is in, and the whole-step plot after the ops plot), or what it
    holds after 30 s."""
    deadline = time.monotonic() + 30
    while True:
        data = frame.locator(f"#oc-trend-{plot}").evaluate(
            "el => (el.data || []).map(t => ({meta: t.meta, x: t.x, y: t.y, error_y: t.error_y || null}))"
        )
        if [trace["meta"] for trace in data] == keys or time.monotonic() > deadline:
            return data
        time.sleep(0.1)


def check_plots(frame, document: dict):
    """The plots hold exactly the document: one line per op over its points, in its order,
    mean per execution on y, bars from low_us to high_us; the whole step on its own plot;
    the x labels its points' values and run counts."""
    rows = {(row["key"], row["point"]): row for row in document["rows"]}
    parts = [key for key in document["keys"] if key.startswith(STEP_PART)]
    for plot, keys in (("ops", op_keys(document)), ("step", [WHOLE_STEP, *parts])):
        data = plotted(frame, plot, keys)
        assert [trace["meta"] for trace in data] == keys
        for trace in data:
            assert trace["x"] == list(range(len(document["points"])))
            expected = [rows.get((trace["meta"], i)) for i in trace["x"]]
            assert trace["y"] == [row["mean_us"] if row else None for row in expected]
            with_interval = [row for row in expected if row and row["low_us"] is not None]
            if not with_interval:
                assert trace["error_y"] is None
                continue
            for row, up, down in zip(expected, trace["error_y"]["array"], trace["error_y"]["arrayminus"]):
                if row and row["low_us"] is not None:
                    assert up == pytest.approx(row["high_us"] - row["mean_us"])
                    assert down == pytest.approx(row["mean_us"] - row["low_us"])
        axis = frame.locator(f"#oc-trend-{plot}").evaluate("el => el._fullLayout.yaxis.type")
        assert axis == "log"
        # the labels plotly drew under each point: value, then the runs it pools
        ticks = frame.locator(f"#oc-trend-{plot} .xtick text").all_text_contents()
        assert ticks == expected_labels(document)
    listed = frame.locator("#oc-trend-points li").all_inner_texts()
    assert len(listed) == len(document["points"])
    for line, point in zip(listed, document["points"]):
        assert line.startswith(point["value"]) and ", ".join(point["runs"]) in line


def test_trend_of_the_comparisons_model_then_of_two_models_by_a_sidecar_field(page, repeats_tensorboard_url):
    url = repeats_tensorboard_url
    pair = {"baseline": "cnn_cpu_bs16_rep1", "target": "cnnslow_cpu_bs16_rep1"}
    frame = open_op_compare(page, url, ready="#oc-trend-runs", view="trend", **pair)

    # by default: every run of the baseline's model, in the listing's order, by recording time
    listing = json.loads(route(url, "runs", load="0")[1])
    model = next(run["model"] for run in listing["runs"] if run["run"] == pair["baseline"])
    runs = ",".join(run["run"] for run in listing["runs"] if run["model"] == model)
    default = route_json(url, "trend", runs=runs)
    assert default["order_by"] == "recorded" and len(default["points"]) == 6
    wait_for_trend(frame, default)
    assert frame.locator("#oc-trend-runs").input_value() == runs
    assert model in frame.locator("#oc-trend-runs-hint").inner_text()
    check_plots(frame, default)
    assert "trend_runs" not in tab_state(page)  # derived from the comparison, which the link holds
    page.screenshot(path=SCREENSHOT_DEFAULT)

    # both models, pooled by the sidecar's model field: two points of six runs each
    frame.locator("#oc-trend-runs").fill("cnn*")
    frame.locator("#oc-trend-runs").press("Enter")
    frame.locator("#oc-trend-order").select_option("sidecar")
    frame.locator("#oc-trend-field").fill("model")
    frame.locator("#oc-trend-field").press("Enter")
    params = {"runs": "cnn*", "order_by": "sidecar:model", "top": "10", "group_by": "name"}
    document = route_json(url, "trend", **params)
    assert [point["value"] for point in document["points"]] == ["cnn", "cnnslow"]
    frame.locator("#oc-trend-points", has_text="2 points, by sidecar field model").wait_for(timeout=60_000)
    wait_for_trend(frame, document)
    check_plots(frame, document)
    assert tab_state(page) == {**pair, "view": "trend", "trend_runs": "cnn*", "trend_order": "sidecar:model"}

    # the hover: the point's value and runs, the mean and its interval, as the tab writes times
    first = document["keys"][0]
    row = next(row for row in document["rows"] if row["key"] == first and row["point"] == 1)
    box = frame.locator("#oc-trend-ops .scatterlayer .trace").first.locator(".point").nth(1).bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)  # plotly's drag layer takes it
    hover = frame.locator("#oc-trend-ops .hoverlayer .hovertext")
    hover.wait_for()
    text = hover.text_content()
    assert first in text and "cnnslow" in text and "6 runs" in text
    assert f"mean {format_time(row['mean_us'])} per execution" in text
    assert f"95% interval {format_time(row['low_us'])} – {format_time(row['high_us'])}" in text
    page.screenshot(path=SCREENSHOT, full_page=True)

    # the export: the route's CSV for the same parameters, byte for byte
    href = frame.locator("#oc-trend-export").get_attribute("href")
    assert dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(href).query)) == params
    with page.expect_download() as download_info:
        frame.locator("#oc-trend-export").click()
    assert download_info.value.suggested_filename == "opcompare_trend_sidecar-model.csv"
    assert Path(download_info.value.path()).read_bytes() == route(url, "trend.csv", **params)[1]

    # the link brings it all back
    page.reload()
    frame = page.frame_locator(TAB_FRAME)
    frame.locator("#oc-trend-points", has_text="2 points, by sidecar field model").wait_for(timeout=60_000)
    assert frame.locator("#oc-trend-runs").input_value() == "cnn*"
    assert frame.locator("#oc-trend-order").input_value() == "sidecar"
    assert frame.locator("#oc-trend-field").input_value() == "model"
    check_plots(frame, document)

    # an unknown run: the server's message, with the names it knows
    status, body = route(url, "trend", runs="no_such_run")
    assert status == 404
    error = json.loads(body)["error"]
    frame.locator("#oc-trend-runs").fill("no_such_run")
    frame.locator("#oc-trend-runs").press("Enter")
    message = frame.locator("#oc-trend-message")
    message.wait_for()
    assert error["message"] in message.inner_text()
    assert error["known"][0] in message.inner_text()
    assert frame.locator("#oc-trend-export").is_hidden()
    assert not page.page_errors


def test_trend_across_framework_versions_ordered_by_run(page, versions_tensorboard_url):
    url = versions_tensorboard_url
    params = {"runs": "torch*/cnn_cpu_bs6", "order_by": "run", "top": "4", "group_by": "name"}
    document = route_json(url, "trend", **params)
    assert len(document["points"]) == 3 and all(len(point["runs"]) == 1 for point in document["points"])
    frame = open_op_compare(
        page, url, ready="#oc-trend-runs", view="trend", trend_runs=params["runs"], trend_order="run", trend_top="4"
    )
    wait_for_trend(frame, document)
    check_plots(frame, document)  # one run a point: no interval bars
    assert frame.locator("#oc-trend-order").input_value() == "run"
    assert frame.locator("#oc-trend-field").is_hidden()
    assert frame.locator("#oc-trend-top").input_value() == "4"
    href = frame.locator("#oc-trend-export").get_attribute("href")
    assert dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(href).query)) == params
    assert frame.locator("#oc-trend-ops").evaluate("el => el._fullLayout.xaxis.type") == "category"

    # grouping by op type asks for the trend of the types
    frame.locator("#oc-trend-group").select_option("type")
    by_type = route_json(url, "trend", **{**params, "group_by": "type"})
    page.wait_for_function("() => location.hash.includes('trend_group_by=type')")
    frame.locator("#oc-trend-ops").evaluate(
        """(el, keys) => new Promise((resolve) => {
        const done = () => JSON.stringify(el.data.map(t => t.meta)) === JSON.stringify(keys);
        if (done()) return resolve();
        const timer = setInterval(() => { if (done()) { clearInterval(timer); resolve(); } }, 50);
    })""",
        op_keys(by_type),
    )
    check_plots(frame, by_type)
    assert not page.page_errors


def test_runs_of_one_time_are_two_points_and_the_page_says_why(page, tmp_path):
    """Issue 50: a fresh checkout gave a CPU and a GPU timeline one modification time and the
    page drew them as one point. Now each is a point, and the page says how it ordered them."""
    from conftest import REALTRACES
    from tensorboard_server import running_tensorboard

    logdir = tmp_path / "logdir"
    for device in ("gpu", "cpu"):
        shutil.copytree(REALTRACES / "tf1_timeline_mlp_cpu_vs_gpu" / device, logdir / f"mlp_{device}")
    for path in logdir.rglob("*"):
        os.utime(path, (1_700_000_000, 1_700_000_000))
    with running_tensorboard(logdir) as url:
        document = route_json(url, "trend", runs="mlp_cpu,mlp_gpu", order_by="recorded", top="3", group_by="name")
        frame = open_op_compare(
            page, url, ready="#oc-trend-runs", view="trend", trend_runs="mlp_cpu,mlp_gpu", trend_top="3"
        )
        wait_for_trend(frame, document)
        check_plots(frame, document)
        assert [point["runs"] for point in document["points"]] == [["mlp_cpu"], ["mlp_gpu"]]
        note = frame.locator("#oc-trend-order-note").inner_text()
        assert note == document["order_note"] and "ordered by run name" in note
        assert not page.page_errors
