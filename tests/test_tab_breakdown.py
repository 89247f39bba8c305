"""Where the time went, in a real browser (issue 53): Compare draws the waterfall under the
headline, from the baseline's step to the target's, with the compare route's figures; on
kineto's num_workers 0 -> 4 logdir and on the demo's PyTorch CPU -> GPU pair."""

from __future__ import annotations

import pytest
from conftest import REALTRACES, REPO, console_errors, open_op_compare, route_json, tensorboard_on_copy

from tb_opcompare.text import format_time

SCREENSHOT = "/tmp/opcompare-waterfall.png"


@pytest.fixture(scope="module")
def kineto_url(tmp_path_factory):
    with tensorboard_on_copy(tmp_path_factory, REALTRACES / "torch_resnet50_v100_logdir") as url:
        yield url


@pytest.fixture(scope="module")
def demo_torch_url(tmp_path_factory):
    keep = {"mnist_cnn_torch_cpu_bs64", "mnist_cnn_torch_gpu_bs64"}

    def others(folder, names):
        return [name for name in names if folder.endswith("torch") and name not in keep]

    with tensorboard_on_copy(tmp_path_factory, REPO / "demo_logs" / "torch", ignore=others) as url:
        yield url


def _drawn(frame) -> dict:
    """The waterfall's bars as Plotly holds them."""
    frame.locator("#oc-waterfall .main-svg").first.wait_for(timeout=60_000)
    return frame.locator("#oc-waterfall").evaluate(
        "el => ({x: el.data[0].x, y: el.data[0].y, text: el.data[0].text, measure: el.data[0].measure})"
    )


def _expected(breakdown: dict) -> dict:
    host = [part for part in breakdown["parts"] if part["side"] == "host"]
    return {
        "x": ["baseline step", *(part["label"] for part in host), "target step"],
        "y": [breakdown["baseline_wall_us"] / 1000, *(part["change_us"] / 1000 for part in host),
              breakdown["target_wall_us"] / 1000],
        "measure": ["absolute", *(["relative"] * len(host)), "total"],
    }  # fmt: skip


@pytest.mark.parametrize("pair", [("resnet50_num_workers_0", "resnet50_num_workers_4")])
def test_the_waterfall_joins_the_headline_to_what_the_time_was_spent_on(page, kineto_url, pair):
    errors = console_errors(page)
    baseline, target = pair
    document = route_json(kineto_url, "compare", baseline=baseline, target=target)
    breakdown = document["summary"]["breakdown"]
    frame = open_op_compare(page, kineto_url, baseline=baseline, target=target)
    drawn = _drawn(frame)
    expected = _expected(breakdown)
    assert drawn["x"] == expected["x"] and drawn["measure"] == expected["measure"]
    assert drawn["y"] == pytest.approx(expected["y"], rel=1e-12)
    assert drawn["text"][0] == format_time(breakdown["baseline_wall_us"])
    input_bar = next(part for part in breakdown["parts"] if part["category"] == "input")
    assert drawn["x"][1] == "waiting for input" and drawn["text"][1] == "−" + format_time(-input_bar["change_us"])
    # it sits right under the summary cards, the headline's
    order = frame.locator(".oc-content > *").evaluate_all("nodes => nodes.map(n => n.id || n.className)")
    assert order.index("oc-breakdown") == order.index("oc-summary") + 1
    device = frame.locator("#oc-breakdown-device [data-category]")
    assert device.count() == len([part for part in breakdown["parts"] if part["side"] == "device"])
    assert frame.locator("#oc-breakdown-caption").inner_text().startswith("The median steady step of each side")
    frame.locator("#oc-breakdown").screenshot(path=SCREENSHOT)
    assert not errors


def test_the_demos_cpu_to_gpu_pair_opens_on_its_waterfall(page, demo_torch_url):
    errors = console_errors(page)
    frame = open_op_compare(page, demo_torch_url)
    suggested = route_json(demo_torch_url, "runs")["suggested"]
    document = route_json(demo_torch_url, "compare", baseline=suggested["baseline"], target=suggested["target"])
    drawn = _drawn(frame)
    expected = _expected(document["summary"]["breakdown"])
    assert drawn["x"] == expected["x"] and drawn["y"] == pytest.approx(expected["y"], rel=1e-12)
    # the headline's two steps are the waterfall's ends
    summary = document["summary"]
    assert drawn["y"][0] * 1000 == pytest.approx(summary["baseline_step_wall_us"], rel=1e-12)
    assert drawn["y"][-1] * 1000 == pytest.approx(summary["target_step_wall_us"], rel=1e-12)
    # the CPU side ran on no device: its device column says so, not "0.00 µs"; the GPU's adds up to its step
    rows = frame.locator("#oc-breakdown-device [data-category]")
    cells = [row.locator("[role=cell]").all_inner_texts() for row in rows.all()]
    device = [part for part in summary["breakdown"]["parts"] if part["side"] == "device"]
    assert cells == [["–", format_time(part["target_us"]), "–"] for part in device]
    assert sum(part["target_us"] for part in device) == pytest.approx(summary["target_step_wall_us"], rel=1e-6)
    assert not errors


@pytest.fixture(scope="module")
def repeats_url(tmp_path_factory):
    from conftest import FIXTURES

    with tensorboard_on_copy(tmp_path_factory, FIXTURES / "repeats_noisy" / "logdir") as url:
        yield url


def test_pooled_repeats_show_each_runs_own_step_beside_the_waterfall(page, repeats_url):
    """A side that pools repeats (issue 53: per-run breakdowns): under the pooled waterfall,
    each run's own median steady step and its parts, as the route says, so the run whose
    step went elsewhere (repeats_noisy's hiccup) shows."""
    errors = console_errors(page)
    pair = {"baseline": "cnn_cpu_bs16_rep1", "target": "cnnwide_cpu_bs16_rep1"}
    document = route_json(repeats_url, "compare", repeats="1", **pair)
    runs = document["summary"]["breakdown"]["runs"]
    assert len(runs) >= 4 and {run["side"] for run in runs} == {"baseline", "target"}
    for run in runs:
        assert sum(run["host"].values()) == pytest.approx(run["wall_us"], rel=1e-6)
    frame = open_op_compare(page, repeats_url, repeats="1", **pair)
    _drawn(frame)
    shown = frame.locator("#oc-breakdown-runs [data-run]")
    assert shown.count() == len(runs)
    header = frame.locator("#oc-breakdown-runs .oc-breakdown-head [role=cell]").all_inner_texts()
    keys = header[2:]
    for row, run in zip(shown.all(), runs):
        cells = row.locator("[role=cell]").all_inner_texts()
        assert row.locator("[role=rowheader]").inner_text() == run["run"]
        assert cells == [
            run["side"],
            format_time(run["wall_us"]),
            *(format_time(run["host"][key]) if key in run["host"] else "–" for key in keys),
        ]
    assert not errors


def test_where_the_time_went_downloads_as_csv(page, kineto_url):
    """The waterfall's figures as a CSV download (issue 53: the CSV carries the breakdown):
    the route's bytes, the two steps first, then each part's time on both sides; a pair
    whose runs split no step gets a 400 that says why."""
    import csv
    import io
    from pathlib import Path

    from conftest import route

    pair = {"baseline": "resnet50_num_workers_0", "target": "resnet50_num_workers_4"}
    breakdown = route_json(kineto_url, "compare", **pair)["summary"]["breakdown"]
    frame = open_op_compare(page, kineto_url, **pair)
    _drawn(frame)
    with page.expect_download() as download_info:
        frame.locator("#oc-breakdown-export").click()
    downloaded = Path(download_info.value.path()).read_bytes()
    status, body = route(kineto_url, "breakdown.csv", **pair)
    assert status == 200 and downloaded == body
    lines = list(csv.DictReader(io.StringIO(downloaded.decode("utf-8"))))
    assert lines[0]["category"] == "(step)"
    assert float(lines[0]["baseline_us"]) == pytest.approx(breakdown["baseline_wall_us"], rel=1e-9)
    assert float(lines[0]["target_us"]) == pytest.approx(breakdown["target_wall_us"], rel=1e-9)
    assert [(line["side"], line["category"]) for line in lines[1:]] == [
        (part["side"], part["category"]) for part in breakdown["parts"]
    ]
    for line, part in zip(lines[1:], breakdown["parts"]):
        assert float(line["change_us"]) == pytest.approx(part["change_us"], rel=1e-9, abs=1e-9)
