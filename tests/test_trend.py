"""A model across many runs (issue 16's trend view), on real recordings: the version matrix's
CNN under three torch releases, and the repeated demo CNN with its deliberately slowed
variant (tests/fixtures/repeats)."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil

import msgspec
import numpy as np
import pytest
from conftest import FIXTURES, profiler_step_durations, run_cli, steady_median
from in_process import PREFIX, plugin_client

from tb_opcompare.schema.contract import TrendDocument
from tb_opcompare.service.matrix import matrix_document
from tb_opcompare.store.catalog import Catalog

VERSIONS = FIXTURES / "versions"
REPEATS = FIXTURES / "repeats" / "logdir"


def _trend(logdir, *args) -> TrendDocument:
    result = run_cli("trend", str(logdir), "--no-cache", "--json", *args)
    assert result.returncode == 0, result.stderr
    return msgspec.json.decode(result.stdout, type=TrendDocument)


def test_releases_in_their_natural_order_with_each_runs_own_means():
    document = _trend(VERSIONS, "--runs", "torch*/cnn_cpu_bs6", "--order-by", "run", "--top", "5")
    assert [point.value for point in document.points] == [
        "torch2.5/cnn_cpu_bs6",
        "torch2.13/cnn_cpu_bs6",
        "torch2.14/cnn_cpu_bs6",
    ]  # 2.5 before 2.13
    whole = document.keys.index("(whole step)")
    assert whole == 5 and all(key.startswith("(step) ") for key in document.keys[whole + 1 :])  # then its parts
    catalog = Catalog(str(VERSIONS), cache_dir=None)
    rows = {(row.key, row.point): row for row in document.rows}
    for position, point in enumerate(document.points):
        (run,) = point.runs
        profile = catalog.load(run).profile
        host = profile.op_table.frame()[profile.op_table.frame()["side"] == "host"].set_index("op_name")
        for key in document.keys[:whole]:
            assert rows[key, position].mean_us == pytest.approx(host.loc[key, "mean_us"], rel=1e-6)
            assert rows[key, position].low_us is None  # one run: no interval
        # the whole step is the headline's figure: the median steady step, from the raw ProfilerStep markers
        step = rows["(whole step)", position].mean_us
        assert step == pytest.approx(steady_median(profiler_step_durations(VERSIONS / run)), rel=1e-9)
    assert document.whole_step_basis == "step wall time"


def test_runs_sharing_a_value_are_pooled_with_an_interval():
    """Ordered by the sidecar's model, the six runs of each variant make one point each;
    the slowed `head` region's interval moves up."""
    document = _trend(REPEATS, "--runs", "*", "--order-by", "sidecar:model", "--top", "30")
    assert [(point.value, len(point.runs)) for point in document.points] == [("cnn", 6), ("cnnslow", 6)]
    head = {row.point: row for row in document.rows if row.key == "head"}
    assert head[0].runs == head[1].runs == 6
    assert head[0].low_us < head[0].mean_us < head[0].high_us < head[1].mean_us / 1.1
    catalog = Catalog(str(REPEATS), cache_dir=None)
    means = [
        float(catalog.load(run).profile.op_table.frame().query("op_name == 'head'")["mean_us"].iloc[0])
        for run in document.points[1].runs
    ]
    assert head[1].mean_us == pytest.approx(float(np.exp(np.mean(np.log(means)))), rel=1e-6)


def test_trend_csv_from_the_route_and_the_cli_are_the_same_rows():
    client = plugin_client(REPEATS)
    answer = client.get(f"{PREFIX}/trend.csv?runs=*&order_by=sidecar:model&top=3")
    assert answer.status_code == 200 and answer.headers["Content-Type"].startswith("text/csv")
    cli = run_cli(
        "trend", str(REPEATS), "--no-cache", "--runs", "*", "--order-by", "sidecar:model", "--top", "3", "--csv", "-"
    )
    assert answer.text == cli.stdout
    rows = list(csv.DictReader(io.StringIO(cli.stdout)))
    ops_and_step = [row for row in rows if not row["key"].startswith("(step) ")]  # then the step's parts
    assert len(ops_and_step) == 2 * 4 and {row["value"] for row in rows} == {"cnn", "cnnslow"}
    assert len(rows) > len(ops_and_step)
    document = msgspec.json.decode(
        client.get(f"{PREFIX}/trend?runs=*&order_by=sidecar:model&top=3").data, type=TrendDocument
    )
    assert len(document.rows) == len(rows)


@pytest.mark.parametrize(
    "query, status, message",
    [
        ("order_by=recorded", 400, "missing parameter: runs"),
        (
            "runs=*&order_by=height",
            400,
            "order_by: expected one of recorded, label, run, repeat, device, batch_size, precision, compiler or "
            "sidecar:<field>",
        ),
        ("runs=*&top=0", 400, "top: expected an integer from 1 to 50"),
        ("runs=gpu_*", 404, "no run matches 'gpu_*'"),
    ],
)
def test_trend_route_says_what_is_wrong(query, status, message):
    answer = plugin_client(REPEATS).get(f"{PREFIX}/trend?{query}")
    assert answer.status_code == status
    assert message in answer.get_json()["error"]["message"]


MATRIX = FIXTURES / "gpu_h100" / "matrix"


def test_ordered_by_a_dimension_the_trend_is_a_sweep_over_it():
    """The H100 matrix's GPU batch-64 eager runs, ordered by the precision their data
    shows: one point per precision, each pooling its two repeats, and nothing mixed."""
    document = _trend(MATRIX, "--runs", "mnist_cnn_torch_gpu_bs64_*_eager_rep*", "--order-by", "precision")
    assert [(point.value, sorted(point.runs)) for point in document.points] == [
        ("bf16", ["mnist_cnn_torch_gpu_bs64_bf16_eager_rep1", "mnist_cnn_torch_gpu_bs64_bf16_eager_rep2"]),
        ("fp32", ["mnist_cnn_torch_gpu_bs64_fp32_eager_rep1", "mnist_cnn_torch_gpu_bs64_fp32_eager_rep2"]),
    ]
    assert not document.warnings
    sizes = _trend(MATRIX, "--runs", "mnist_cnn_torch_cpu_bs*_fp32_eager", "--order-by", "batch_size")
    assert [point.value for point in sizes.points] == ["1", "16", "64"]  # as numbers, not as text
    catalog = Catalog(str(MATRIX), cache_dir=None)
    step = {row.point: row.mean_us for row in sizes.rows if row.key == "(whole step)"}
    for position, point in enumerate(sizes.points):
        (run,) = point.runs
        assert step[position] == pytest.approx(steady_median(profiler_step_durations(MATRIX / run)), rel=1e-9)
    # the same number the Matrix's cell of that run reads (issue 31: one headline in every view)
    cells = {tuple(cell.runs): cell.latency_us for cell in matrix_document(catalog).cells}
    for position, point in enumerate(sizes.points):
        assert cells[tuple(point.runs)] == pytest.approx(step[position], rel=1e-12)


def test_a_point_that_pools_another_dimension_names_it():
    document = _trend(MATRIX, "--runs", "mnist_cnn_torch_gpu_bs64_*_rep1", "--order-by", "precision")
    assert [len(point.runs) for point in document.points] == [2, 2]
    assert len(document.warnings) == 2
    assert all("compiler: eager, torch.compile" in warning and "batch" not in warning for warning in document.warnings)
    client = plugin_client(MATRIX)
    answer = client.get(
        f"{PREFIX}/trend", query_string={"runs": "mnist_cnn_torch_gpu_bs64_*_rep1", "order_by": "precision"}
    )
    assert msgspec.json.decode(answer.data, type=TrendDocument) == document


def test_runs_whose_sessions_share_a_file_name_are_points_of_their_own(tmp_path):
    """Issue 32: the public TF1 pair's sessions are both `timeline_02_step_1.json`; ordered by
    recording time the CPU and the GPU run fell on one point (and its pooled interval
    spanned fifteen decades). Without a sidecar, a session named by no time is ordered by
    its file's modification time."""
    from conftest import REALTRACES

    # A checkout or a copy does not keep file times (issue 50): the test sets the ones it means.
    for when, device in ((1_700_000_000, "gpu"), (1_700_000_100, "cpu")):
        run = tmp_path / f"mlp_{device}"
        shutil.copytree(REALTRACES / "tf1_timeline_mlp_cpu_vs_gpu" / device, run)
        for path in run.rglob("*"):
            os.utime(path, (when, when))
    document = _trend(tmp_path, "--runs", "*", "--top", "2")
    assert [point.runs for point in document.points] == [["mlp_gpu"], ["mlp_cpu"]]  # the GPU file is older
    assert not document.warnings and not document.order_note


def test_two_runs_of_one_time_are_two_points_in_run_name_order(tmp_path):
    """Issue 50: a fresh checkout gave both TF1 timelines one modification time, to the
    nanosecond, and Trend pooled a CPU and a GPU run into one point. Different runs that
    share a time (or have none) are each a point, ordered by run name, and the page says so."""
    from conftest import REALTRACES

    for device in ("gpu", "cpu"):
        run = tmp_path / f"mlp_{device}"
        shutil.copytree(REALTRACES / "tf1_timeline_mlp_cpu_vs_gpu" / device, run)
        for path in run.rglob("*"):
            os.utime(path, (1_700_000_000, 1_700_000_000))
    document = _trend(tmp_path, "--runs", "*", "--top", "2")
    assert [point.runs for point in document.points] == [["mlp_cpu"], ["mlp_gpu"]]
    assert len({point.value for point in document.points}) == 2  # two labels on the axis
    assert all(point.value.startswith("2023-11-14 22:13:20") for point in document.points)
    assert "mlp_cpu, mlp_gpu share a recording time" in document.order_note
    assert "ordered by run name" in document.order_note
    whole = [row for row in document.rows if row.key == "(whole step)"]
    assert [row.runs for row in whole] == [1, 1]


def test_recording_times_of_every_spelling_sort_as_times(tmp_path):
    """Issue 50's audit: a sidecar's ISO time, a Keras session named by its time, a PyTorch
    trace named by the epoch and a file's time were compared as text, so a PyTorch run with
    a larger process id sorted after a later one. Each is one UTC spelling now."""
    source = next((FIXTURES / "logdir" / "torch" / "cnn_torch_cpu_bs4").glob("*.pt.trace.json"))
    later, earlier = tmp_path / "later", tmp_path / "earlier"
    for run, name in ((later, "vm_100.1795345335619686555"), (earlier, "vm_99999.1795340000000000000")):
        run.mkdir()
        shutil.copyfile(source, run / f"{name}.pt.trace.json")
    between = tmp_path / "between"  # a sidecar's time, in another zone: 10:00 UTC
    between.mkdir()
    shutil.copyfile(source, between / "vm_1.pt.trace.json")
    (between / "opcompare.json").write_text('{"recorded_at": "2026-11-22T11:00:00+01:00"}')
    catalog = Catalog(str(tmp_path), cache_dir=None)
    times = {run: catalog.recorded_at(catalog.source(run)) for run in ("later", "earlier", "between")}
    assert times == {
        "later": "2026-11-22 11:02:15.619686",  # to the µs, not through a float
        "earlier": "2026-11-22 09:33:20.000000",
        "between": "2026-11-22 10:00:00.000000",
    }
    document = _trend(tmp_path, "--runs", "*", "--top", "2")
    assert [point.runs for point in document.points] == [["earlier"], ["between"], ["later"]]
    # what only looks like a time is none: a name's YYYYMMDDHH (not epoch seconds in 2034), a
    # sidecar time before year 1 in UTC; each falls back to the file's time, which the test sets
    for name, sidecar in (("run_2026112211", None), ("odd", '{"recorded_at": "0001-01-01T00:00:00+01:00"}')):
        run = tmp_path / name
        run.mkdir()
        shutil.copyfile(source, run / ("vm_1.pt.trace.json" if sidecar else f"{name}.pt.trace.json"))
        if sidecar:
            (run / "opcompare.json").write_text(sidecar)
        os.utime(next(run.glob("*.pt.trace.json")), (1_700_000_000, 1_700_000_000))
    catalog = Catalog(str(tmp_path), cache_dir=None)
    assert catalog.recorded_at(catalog.source("run_2026112211")) == "2023-11-14 22:13:20.000000"
    assert catalog.recorded_at(catalog.source("odd")) == "0001-01-01T00:00:00+01:00"  # kept as given, no crash


def test_repeats_that_share_a_time_with_another_run_stay_one_point(tmp_path):
    """A tie is broken between configurations, not within one: two repeats of the CNN and a
    run of its slowed variant recorded at one time give two points, the repeats pooled."""
    runs = ["cnn_cpu_bs16_rep1", "cnn_cpu_bs16_rep2", "cnnslow_cpu_bs16_rep1"]
    for run in runs:
        shutil.copytree(REPEATS / run, tmp_path / run)
        sidecar = json.loads((tmp_path / run / "opcompare.json").read_text())
        sidecar["recorded_at"] = "2026-11-23T10:00:00+00:00"
        (tmp_path / run / "opcompare.json").write_text(json.dumps(sidecar))
    document = _trend(tmp_path, "--runs", ",".join(runs), "--top", "2")
    assert [point.runs for point in document.points] == [runs[:2], runs[2:]]
    assert [point.value for point in document.points] == [
        "2026-11-23 10:00:00.000000 · cnn_cpu_bs16_rep1",
        "2026-11-23 10:00:00.000000 · cnnslow_cpu_bs16_rep1",
    ]
    whole = [row for row in document.rows if row.key == "(whole step)"]
    assert [row.runs for row in whole] == [2, 1]
