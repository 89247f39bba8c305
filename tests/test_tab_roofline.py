"""The Roofline page (issue 54) in a real browser against a real TensorBoard: the demo CNN
on the CPU and on an H100 at batch 64 (tests/fixtures/gpu_h100), the third-party tier's
bert-small on an H100 and an MI300X (TraceLens), and our ResNet-18 job on an H200, whose
convolutions ran on TF32 tensor cores. The page's plot, cards and table are read
against the roofline route's own document."""

from __future__ import annotations

import shutil
import urllib.parse

import pytest
from conftest import FIXTURES, REALTRACES, console_errors, open_op_compare, route_json

from tb_opcompare.text import format_rate, format_speedup

ROWS = "#oc-roofline-table tbody tr.oc-roofline-row"
CPU, GPU = "mnist_cnn_torch_cpu_bs64_rep1", "mnist_cnn_torch_gpu_bs64_rep1"
LOADER = ("resnet18_num_workers_0_rep1", "resnet18_num_workers_4_rep1")  # ResNet-18 in fp32 on an H200


@pytest.fixture(scope="module")
def roofline_tensorboard_url(tmp_path_factory):
    """TensorBoard on the H100 demo's batch-64 pair and the public H100/MI300X pair."""
    from tensorboard_server import running_tensorboard

    logdir = tmp_path_factory.mktemp("roofline") / "logdir"
    for run in (CPU, GPU):
        shutil.copytree(FIXTURES / "gpu_h100" / "demo" / run, logdir / run)
    for run in ("h100", "mi300"):
        shutil.copytree(REALTRACES / "torch_bert_small_h100_vs_mi300" / run, logdir / "bert" / run)
    for run in LOADER:
        shutil.copytree(FIXTURES / "gpu_h200" / "loader" / run, logdir / "loader" / run)
    with running_tensorboard(logdir) as url:
        yield url


def placed(row: dict, side: str) -> bool:
    """On the plot: its rate and intensity measured, and not suspect (a roof is not needed:
    a CPU's ops are placed where its limits are unknown, under no roof)."""
    return not row[f"{side}_suspect"] and (row[f"{side}_intensity"] or 0) > 0 and (row[f"{side}_flops_per_s"] or 0) > 0


def test_the_roofline_page_puts_each_op_of_both_runs_under_its_roof(page, roofline_tensorboard_url):
    url = roofline_tensorboard_url
    errors = console_errors(page)
    document = route_json(url, "roofline", baseline=CPU, target=GPU)
    frame = open_op_compare(page, url, ready=ROWS, view="roofline", baseline=CPU, target=GPU)
    assert frame.locator(".oc-page-tab.oc-active").inner_text().lower() == "roofline"
    plot = frame.locator("#oc-roofline-plot")
    plot.locator(".main-svg").first.wait_for()
    traces = plot.evaluate("element => element.data.map(t => [t.name, t.mode, t.x.length, Math.max(...t.y)])")
    # the H100's roof, flat at its fp32 peak (the CPU run's roof is unknown: no line for it)
    roofs = [trace for trace in traces if trace[1] == "lines"]
    (device,) = [limits for limits in document["target"]["limits"] if limits["processor"] == "device"]
    assert len(roofs) == 1 and roofs[0][3] == pytest.approx(device["peak_flops"])
    # each run's placed ops as markers, the CPU's too (under no roof: its limits are unknown, its rates are
    # measured); an arrow from the CPU's point to the GPU's for each op placed on both sides
    on_gpu = [row for row in document["rows"] if placed(row, "target")]
    on_cpu = [row for row in document["rows"] if placed(row, "baseline")]
    markers = {trace[0]: trace[2] for trace in traces if trace[1] == "markers"}
    assert markers["Target ops"] == len(on_gpu) > 3 and markers["Baseline ops"] == len(on_cpu) > 3
    both = [row for row in document["rows"] if placed(row, "baseline") and placed(row, "target")]
    assert plot.evaluate("element => element.layout.annotations.length") == len(both) > 0
    hovers = plot.evaluate("element => element.data.find(t => t.name === 'Target ops').customdata")
    assert hovers == [row["op_name"] for row in on_gpu]

    # the cards: each run's achieved rate and roofs
    card = frame.locator(".oc-card[data-side='target']")
    assert format_rate(document["target"]["flops_per_s"], "FLOP/s") in card.inner_text()
    assert "NVIDIA H100 SXM" in card.inner_text()
    # the notes say the CPU's limits are unknown, and how to give them
    notes = frame.locator("#oc-roofline-notes .oc-roofline-note").all_inner_texts()
    assert notes == document["notes"] and any("device_limits" in note for note in notes)
    # the table: the route's rows in its order, as it formats them
    keys = frame.locator(ROWS).evaluate_all("rows => rows.map(row => row.dataset.key)")
    assert keys == [row["op_name"] for row in document["rows"]]
    conv = next(row for row in document["rows"] if row["op_name"] == "aten::conv2d")
    cells = frame.locator(f"{ROWS}[data-key='aten::conv2d'] td").all_inner_texts()
    assert cells[1:3] == [format_rate(conv[f"{side}_flops_per_s"], "FLOP/s") for side in ("baseline", "target")]
    assert cells[7:9] == [format_speedup(conv["speedup"]), format_speedup(conv["work_ratio"])]
    href = frame.locator("#oc-roofline-export").get_attribute("href")
    assert urllib.parse.urlsplit(href).path == "roofline.csv"
    page.screenshot(path="/tmp/roofline-page.png", full_page=True)
    assert not page.page_errors
    assert not errors


def test_a_gpu_pair_of_the_third_party_tier_draws_both_roofs_and_arrows(page, roofline_tensorboard_url):
    url = roofline_tensorboard_url
    errors = console_errors(page)
    baseline, target = "bert/h100", "bert/mi300"
    document = route_json(url, "roofline", baseline=baseline, target=target)
    frame = open_op_compare(page, url, ready=ROWS, view="roofline", baseline=baseline, target=target)
    plot = frame.locator("#oc-roofline-plot")
    plot.locator(".main-svg").first.wait_for()
    roofs = plot.evaluate("element => element.data.filter(t => t.mode === 'lines').map(t => t.name)")
    assert len(roofs) == 2 and "H100" in roofs[0] and "MI300X" in roofs[1]
    both = [row for row in document["rows"] if placed(row, "baseline") and placed(row, "target")]
    assert plot.evaluate("element => element.layout.annotations.length") == len(both) > 0
    changes = frame.locator(f"{ROWS} td[data-roofline-column='change']").all_inner_texts()
    assert changes == [row["change"] or "–" for row in document["rows"]]
    page.screenshot(path="/tmp/roofline-page-bert.png", full_page=True)
    assert not page.page_errors
    assert not errors


def test_fp32_convolutions_on_tf32_tensor_cores_are_drawn_under_the_tf32_roof(page, roofline_tensorboard_url):
    """ResNet-18 in fp32 on an H200: its convolutions ran on TF32 tensor cores, past the fp32
    peak. The page draws the H200's TF32 roof beside its fp32 one, places them under it (not
    named suspect) and says so in their hover; every placed op is under its own roof."""
    url = roofline_tensorboard_url
    errors = console_errors(page)
    baseline, target = (f"loader/{run}" for run in LOADER)
    document = route_json(url, "roofline", baseline=baseline, target=target)
    frame = open_op_compare(page, url, ready=ROWS, view="roofline", baseline=baseline, target=target)
    plot = frame.locator("#oc-roofline-plot")
    plot.locator(".main-svg").first.wait_for()
    (device,) = [limits for limits in document["target"]["limits"] if limits["processor"] == "device"]
    target_roofs = plot.evaluate(
        "element => element.data.filter(t => t.mode === 'lines' && t.name.startsWith('Target')).map(t => Math.max(...t.y))"
    )
    assert sorted(target_roofs) == pytest.approx(
        [device["peak_flops"], device["peak_flops_by_precision"]["tf32"]], rel=1e-9
    )
    for side in ("baseline", "target"):
        for row in document["rows"]:
            if placed(row, side) and row[f"{side}_roof_flops_per_s"]:
                assert row[f"{side}_flops_per_s"] <= row[f"{side}_roof_flops_per_s"], (side, row["op_name"])
    conv = next(row for row in document["rows"] if row["op_name"] == "aten::conv2d")
    assert conv["target_roof_precision"] == "tf32" and conv["target_flops_per_s"] > device["peak_flops"]
    hovers = plot.evaluate(
        "element => { const t = element.data.find(t => t.name === 'Target ops');"
        " return Object.fromEntries(t.customdata.map((name, i) => [name, t.text[i]])); }"
    )
    assert "TF32 tensor cores' roof" in hovers["aten::conv2d"]
    cell = frame.locator(f"{ROWS}[data-key='aten::conv2d'] td[data-roofline-column='target_fraction_of_roof']")
    assert cell.inner_text().endswith(" compute tf32")
    assert "TF32" not in hovers.get("aten::linear", "")
    notes = frame.locator("#oc-roofline-notes .oc-roofline-note").all_inner_texts()
    assert any("TF32 tensor cores" in note for note in notes)
    page.screenshot(path="/tmp/roofline-page-tf32.png", full_page=True)
    assert not page.page_errors
    assert not errors
