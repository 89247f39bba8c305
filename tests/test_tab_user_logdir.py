"""The tab on logdirs named the way users name theirs (tests/fixtures/user_logdirs/
torch_h200 and lightning_h200; torch_h200: ``lstm_runA``..``D``, SummaryWriter's ``runs/<date>_<host>``, the tutorial's
``log/cnn``; no sidecars), in a real browser against a real TensorBoard: the Batch sweep
offers the models found from the ops, draws the LSTM's three GPU batch sizes, and the
Matrix puts its CPU and GPU runs on one row with the route's speedup (issue 32)."""

from __future__ import annotations

import shutil

import pytest
from conftest import FIXTURES, console_errors, open_op_compare, reopen_op_compare, route_json, tensorboard_on_copy

from tb_opcompare.text import format_speedup


@pytest.fixture(scope="module")
def user_tensorboard_url(tmp_path_factory):
    with tensorboard_on_copy(tmp_path_factory, FIXTURES / "user_logdirs" / "torch_h200") as url:
        yield url


def test_the_sweep_and_the_matrix_fill_on_a_logdir_whose_names_hide_the_models(page, user_tensorboard_url):
    url = user_tensorboard_url
    errors = console_errors(page)
    sweeps = route_json(url, "sweeps")
    assert {"lstm_run", "runs"} <= set(sweeps["sweepable"])

    frame = open_op_compare(page, url, ready="#oc-sweep-model", view="sweep", model="lstm_run")
    frame.locator("#oc-sweep-step .scatterlayer .point >> nth=0").wait_for(timeout=60_000)
    assert frame.locator("#oc-sweep-model").input_value() == "lstm_run"
    offered = frame.locator("#oc-sweep-model option").evaluate_all("options => options.map(o => o.value)")
    assert {"lstm_run", "runs"} <= set(offered)
    runs_text = frame.locator(".oc-sweep-runs").inner_text()
    for size in (2, 8, 32):
        assert f"batch {size}" in runs_text

    document = route_json(url, "matrix")
    cell = next(
        cell
        for cell in document["cells"]
        if cell["model"] == "lstm_run" and cell["batch_size"] == 32 and cell["column"].startswith("GPU")
    )
    assert cell["speedup"] and cell["speedup"] > 0
    frame = reopen_op_compare(page, ready="#oc-matrix-table tbody tr", view="matrix")
    shown = frame.locator(
        "#oc-matrix-table tbody tr[data-model='lstm_run'][data-batch-size='32'] "
        f"td[data-column='{cell['column']}'] .oc-matrix-speedup"
    )
    assert shown.inner_text() == format_speedup(cell["speedup"])
    assert not errors and not page.page_errors


@pytest.fixture(scope="module")
def lightning_tensorboard_url(tmp_path_factory):
    with tensorboard_on_copy(tmp_path_factory, FIXTURES / "user_logdirs" / "lightning_h200") as url:
        yield url


def test_lightnings_versions_fill_compare_the_sweep_and_the_matrix(page, lightning_tensorboard_url):
    """Lightning's own profiler on an H200 (``lightning_logs/version_N``, no sidecar, trace
    files named after Lightning's action, brackets included): the tab opens on the CPU ->
    GPU pair it suggests with the route's headline; the sweep draws the one model's two
    batch sizes; the Matrix pools the three GPU batch-64 repeats with the route's speedup."""
    url = lightning_tensorboard_url
    errors = console_errors(page)
    runs = route_json(url, "runs")
    (model,) = {run["model"] for run in runs["runs"]}
    suggested = runs["suggested"]
    compare = route_json(url, "compare", baseline=suggested["baseline"], target=suggested["target"])
    frame = open_op_compare(page, url, ready="#oc-headline")
    frame.locator("#oc-headline", has_text=format_speedup(compare["summary"]["headline_speedup"])).wait_for()

    frame = reopen_op_compare(page, ready="#oc-sweep-model", view="sweep", model=model)
    frame.locator("#oc-sweep-step .scatterlayer .point >> nth=0").wait_for(timeout=60_000)
    runs_text = frame.locator(".oc-sweep-runs").inner_text()
    assert "batch 16" in runs_text and "batch 64" in runs_text

    document = route_json(url, "matrix")
    cell = next(c for c in document["cells"] if c["batch_size"] == 64 and c["column"].startswith("GPU"))
    assert len(cell["runs"]) == 3 and cell["speedup"] > 0
    frame = reopen_op_compare(page, ready="#oc-matrix-table tbody tr", view="matrix")
    shown = frame.locator(
        f"#oc-matrix-table tbody tr[data-batch-size='64'] td[data-column='{cell['column']}'] .oc-matrix-speedup"
    )
    assert shown.inner_text() == format_speedup(cell["speedup"])
    assert not errors and not page.page_errors


@pytest.fixture(scope="module")
def ranks_tensorboard_url(tmp_path_factory):
    with tensorboard_on_copy(tmp_path_factory, FIXTURES / "gpu_h200" / "ranks") as url:
        yield url


def test_a_distributed_job_shows_as_one_run_with_its_workers(page, ranks_tensorboard_url):
    """Two ranks of one job in one folder (no sidecar): Compare pairs the CPU job with the
    GPU job, each side one run whose card names its workers, each rank's step in the tooltip."""
    url = ranks_tensorboard_url
    errors = console_errors(page)
    runs = route_json(url, "runs")
    gpu = next(run for run in runs["runs"] if run["run"] == "ddp_cnn_gpu")
    frame = open_op_compare(page, url, ready="#oc-target-workers", baseline="ddp_cnn_cpu", target="ddp_cnn_gpu")
    workers = frame.locator("#oc-target-workers")
    assert workers.inner_text() == "2 workers (ranks 0, 1 of 2)"
    title = workers.get_attribute("title")
    for worker in gpu["workers"]:
        assert f"rank {worker['rank']}: " in title and worker["file"] in title
    assert frame.locator("#oc-baseline-workers").inner_text() == "2 workers (ranks 0, 1 of 2)"
    # the ranks pooled by default, or one rank alone: the target's session picker offers each
    sessions = frame.locator("#oc-target-session option").evaluate_all("options => options.map(o => o.value)")
    assert sessions == list(reversed(gpu["sessions"])) and len(sessions) == 3
    rank_0 = next(session for session in sessions if session.endswith("(rank 0 of 2 only)"))
    alone = route_json(url, "compare", baseline="ddp_cnn_cpu", target="ddp_cnn_gpu", target_session=rank_0)
    frame.locator("#oc-target-session").select_option(rank_0)
    frame.locator("#oc-headline", has_text=format_speedup(alone["summary"]["headline_speedup"])).wait_for()
    assert alone["summary"]["target_step_wall_us"] == gpu["workers"][0]["step_time_us"]
    assert not errors and not page.page_errors


def test_a_run_name_with_a_right_to_left_override_cannot_pass_for_another(page, tmp_path_factory, tmp_path):
    """Issue 33: `cnn_gpu<U+202E>46sb` reads as `cnn_gpubs64` where the override is obeyed.
    The tab shows it escaped wherever it shows the name (the run picker, the run card, the
    loading text), and the route still takes the name itself."""
    spoof = "cnn_gpu\u202e46sb"
    source = tmp_path / "logdir"
    shutil.copytree(FIXTURES / "user_logdirs" / "torch_h200" / "lstm_runA", source / spoof)
    shutil.copytree(FIXTURES / "user_logdirs" / "torch_h200" / "lstm_runB", source / "cnn_gpubs64")
    with tensorboard_on_copy(tmp_path_factory, source) as url:
        errors = console_errors(page)
        frame = open_op_compare(page, url, ready="#oc-count", baseline="cnn_gpubs64", target=spoof)
        labels = frame.locator("#oc-target option").evaluate_all("options => options.map(o => o.textContent)")
        assert any(label.startswith("cnn_gpu\\u202e46sb") for label in labels), labels
        assert not any("\u202e" in label for label in labels)
        assert frame.locator("#oc-target").input_value() == spoof  # the value is the name itself
        assert "\u202e" not in frame.locator("body").inner_text()
        assert not errors and not page.page_errors
