"""The latency/throughput matrix (issue 18): model x precision x compiler x batch size
against device (issue 51: devices alone are the columns), on the real matrix recorded on an H100 host and GPU (tests/fixtures/gpu_h100/
matrix: the demo CNN, fp32/bf16 x eager/torch.compile x batch 1/16/64, CPU and GPU), and the
maths on small lists."""

from __future__ import annotations

import csv
import io
import json
import shutil
import statistics

import msgspec
import numpy as np
import pytest
from conftest import FIXTURES, profiler_step_durations, run_cli, steady_median, steady_steps
from in_process import PREFIX, plugin_client

from tb_opcompare.analysis.matrix import Column, MatrixRun, build_matrix, parse_column
from tb_opcompare.analysis.step_time import detect_warmup, step_latency
from tb_opcompare.errors import UsageError
from tb_opcompare.schema.contract import MatrixDocument
from tb_opcompare.service.matrix import matrix_document
from tb_opcompare.store.catalog import Catalog

MATRIX = FIXTURES / "gpu_h100" / "matrix"


def _run(name, times, model="m", batch=8, device="CPU", precision="fp32", compiler="eager"):
    return MatrixRun(
        run=name,
        model=model,
        batch_size=batch,
        device=device,
        precision=precision,
        compiler=compiler,
        step_times_us=times,
    )


@pytest.mark.parametrize(
    "times, warmup",
    [
        ([3.0, 3.1, 2.9, 3.0], 0),
        ([40.0, 3.1, 2.9, 3.0], 1),
        ([40.0, 9.0, 3.1, 2.9, 3.0, 3.0], 2),
        ([3.0, 3.0, 10.0, 10.0], 0),  # slowing down is not warm-up
        ([50.0, 50.0, 50.0, 3.0], 0),  # at most half the steps, and these are not faster later on median
        ([], 0),
    ],
)
def test_warmup_is_the_leading_steps_much_slower_than_the_rest(times, warmup):
    assert detect_warmup(times) == warmup


def test_step_latency_is_numpy_s_median_and_percentiles_to_the_last_bit():
    """``step_latency`` works its figures out in Python (numpy's calls cost 0.25 ms a run,
    0.25 s a listing of 1,000 runs): numpy's own results are the oracle, bit for bit, on
    runs of 1 to 300 steps, repeated values and NaN among them."""
    generator = np.random.default_rng(57)
    for count in [*range(1, 40), 99, 100, 101, 300] * 20:  # 20 draws a size: numpy's two ways to interpolate
        for draw in (generator.lognormal(7, 0.3, count), generator.integers(1, 4, count) * 1000.5):
            latency = step_latency([draw.tolist()], warmup=0)
            p10, p90 = np.percentile(draw, [10, 90])
            assert (latency.median_us, latency.p10_us, latency.p90_us) == (np.median(draw), p10, p90), count
            assert latency.std_us == draw.std() and latency.steps == count
    latency = step_latency([[1.0, float("nan"), 3.0]], warmup=0)
    assert all(np.isnan(value) for value in (latency.median_us, latency.p10_us, latency.p90_us))


def test_cells_pool_repeats_and_take_speedups_within_their_row():
    runs = [
        _run("cpu_a", [100.0, 10.0, 10.0, 10.0]),
        _run("cpu_b", [12.0, 12.0]),
        _run("gpu", [4.0, 4.0], device="GPU"),
        _run("gpu_bf16", [2.0, 2.0], device="GPU", precision="bf16"),
        _run("other_batch", [5.0, 5.0], batch=16, device="GPU"),
        _run("no_markers", [], batch=16),
    ]
    cells, columns, reference = build_matrix(runs)
    assert reference == Column("CPU")
    assert [column.key for column in columns] == ["CPU", "GPU"]
    by = {(cell.row.precision, cell.row.batch_size, cell.column.key): cell for cell in cells}
    cpu = by["fp32", 8, "CPU"]
    assert (cpu.runs, cpu.steps, cpu.warmup_steps) == (["cpu_a", "cpu_b"], 5, 1)
    # the median of the steady steps pooled (10, 10, 10, 12, 12), the headline's rule
    assert cpu.latency_us == pytest.approx(10.0) and cpu.speedup == pytest.approx(1.0)
    assert cpu.throughput_per_s == pytest.approx(8 * 1e6 / 10.0)
    assert by["fp32", 8, "GPU"].speedup == pytest.approx(10.0 / 4)
    assert by["bf16", 8, "GPU"].speedup is None  # its row (bf16) has no CPU cell
    assert by["fp32", 16, "GPU"].speedup is None  # its row has no reference with a latency
    assert by["fp32", 16, "CPU"].latency_us is None and by["fp32", 16, "CPU"].steps == 0
    cells, _, reference = build_matrix(runs, reference=parse_column("gpu"), warmup=0)
    by = {(cell.row.precision, cell.row.batch_size, cell.column.key): cell for cell in cells}
    assert reference.key == "GPU"
    assert by["fp32", 8, "CPU"].speedup == pytest.approx(4.0 / 11.0)  # nothing dropped: median of 6
    assert by["fp32", 16, "GPU"].speedup == pytest.approx(1.0) and by["bf16", 8, "GPU"].reference
    with pytest.raises(ValueError, match="precision and compiler are rows"):
        parse_column("GPU/bf16/eager")


def _matrix(*args) -> MatrixDocument:
    result = run_cli("matrix", str(MATRIX), "--no-cache", "--json", *args)
    assert result.returncode == 0, result.stderr
    return msgspec.json.decode(result.stdout, type=MatrixDocument)


def test_the_real_matrix_places_every_run_and_its_latency_is_the_step_markers():
    document = _matrix("--warmup", "0")
    assert [column.key for column in document.columns] == ["CPU", "GPU"]  # a configuration's CPU and GPU side by side
    assert [(row.model, row.precision, row.compiler, row.batch_size) for row in document.rows] == [
        ("mnist_cnn_torch", precision, compiler, n)
        for precision in ("fp32", "bf16")
        for compiler in ("eager", "torch.compile")
        for n in (1, 16, 64)
    ]
    assert len(document.cells) == 24 and sum(len(cell.runs) for cell in document.cells) == 36
    assert document.reference == "CPU"
    for cell in document.cells:
        token = {"eager": "eager", "torch.compile": "compile"}[cell.compiler]
        for run in cell.runs:  # the run's name says where it was recorded; the data put it there
            assert f"_{cell.column.lower()}_bs{cell.batch_size}_{cell.precision}_{token}" in run
        steps = [time for run in cell.runs for time in profiler_step_durations(MATRIX / run)]
        assert cell.steps == len(steps) == 5 * len(cell.runs)
        assert cell.latency_us == pytest.approx(statistics.median(steps), rel=1e-9)
        assert cell.throughput_per_s == pytest.approx(cell.batch_size * 1e6 / cell.latency_us, rel=1e-12)
    row = lambda cell: (cell.precision, cell.compiler, cell.batch_size)  # noqa: E731
    reference = {row(cell): cell.latency_us for cell in document.cells if cell.reference}
    assert len(reference) == 12 and all(cell.column == "CPU" for cell in document.cells if cell.reference)
    for cell in document.cells:
        assert cell.speedup == pytest.approx(reference[row(cell)] / cell.latency_us, rel=1e-12)


def test_precision_and_compiler_come_from_the_data_without_sidecars_or_telling_names(tmp_path):
    """Every run copied under a name that says nothing, its sidecar left behind: the
    matrix still places it by the dtypes and the torch.compile events in its trace."""
    neutral = tmp_path / "logdir"
    truth = {}
    for position, run_dir in enumerate(sorted(MATRIX.iterdir())):
        target = neutral / f"run{position:02d}"
        target.mkdir(parents=True)
        for trace in run_dir.glob("*.pt.trace.json.gz"):
            shutil.copy(trace, target / trace.name)
        name = run_dir.name
        truth[target.name] = (
            "bf16" if "_bf16_" in name else "fp32",
            "torch.compile" if "_compile" in name else "eager",
            "GPU" if "_gpu_" in name else "CPU",
        )
    catalog = Catalog(str(neutral), cache_dir=None)
    for run, (precision, compiler, device) in truth.items():
        facts = catalog.load(run).profile.facts
        assert (facts.precision, facts.compiler, facts.device) == (precision, compiler, device), run
        assert facts.precision_source.startswith("data: ") and facts.compiler_source.startswith("data: ")


def test_route_cli_and_csv_agree_and_bad_parameters_answer_400():
    client = plugin_client(MATRIX)
    answer = client.get(f"{PREFIX}/matrix?reference=gpu&warmup=1")
    assert answer.status_code == 200
    document = msgspec.json.decode(answer.data, type=MatrixDocument)
    assert document == _matrix("--reference", "gpu", "--warmup", "1")
    assert document.reference == "GPU" and all(cell.warmup_steps == len(cell.runs) for cell in document.cells)
    text = client.get(f"{PREFIX}/matrix.csv?reference=GPU&warmup=1").data.decode()
    lines = list(csv.DictReader(io.StringIO(text)))
    assert len(lines) == len(document.cells)
    for line, cell in zip(lines, document.cells):
        assert line["runs"].split(";") == cell.runs
        assert (line["device"], line["precision"], line["compiler"]) == (cell.column, cell.precision, cell.compiler)
        assert float(line["latency_us"]) == pytest.approx(cell.latency_us, rel=1e-12)
        assert (line["speedup"] and float(line["speedup"])) == pytest.approx(cell.speedup, rel=1e-12)
    cli_csv = run_cli("matrix", str(MATRIX), "--no-cache", "--csv", "-", "--reference", "GPU", "--warmup", "1")
    assert cli_csv.stdout == text
    for query, message in (
        ("reference=GPU/fp32/eager", "precision and compiler are rows of the matrix"),
        ("warmup=x", "warmup"),
        ("model=nothing", "no readable run of model nothing"),
    ):
        bad = client.get(f"{PREFIX}/matrix?{query}")
        assert bad.status_code == 400 and message in bad.json["error"]["message"], bad.data


def test_text_output_names_the_reference_and_each_cell():
    result = run_cli("matrix", str(MATRIX), "--no-cache", "--model", "mnist_cnn_torch")
    assert result.returncode == 0, result.stderr
    assert (
        "against CPU;" in result.stdout and "\nmnist_cnn_torch · bf16 · torch.compile · bs64\n  CPU: " in result.stdout
    )
    # each configuration's CPU cell is its row's reference (one run of fp32 eager, two of the others)
    assert result.stdout.count("  CPU: ") == result.stdout.count("  reference  [") == 12
    assert result.stdout.count("[2 runs, 10 steps]") == 12


def test_a_compare_across_compilers_says_the_whole_step_is_where_they_meet():
    """Eager against torch.compile on the H100: Inductor's Triton kernels and graph calls
    replace aten ops, so many ops are on one side only; the compare says why and gives the
    step-marker ratio, and a compare within one compiler says nothing of the kind."""
    base, target = "mnist_cnn_torch_gpu_bs64_fp32_eager_rep1", "mnist_cnn_torch_gpu_bs64_fp32_compile_rep1"
    document = json.loads(
        run_cli("compare", str(MATRIX), "--baseline", base, "--target", target, "--json", "--no-cache").stdout
    )
    (note,) = [note for note in document["summary"]["notes"] if "different compilers" in note]
    wall = steady_median(profiler_step_durations(MATRIX / base)) / steady_median(
        profiler_step_durations(MATRIX / target)
    )
    assert document["summary"]["headline_speedup"] == pytest.approx(wall, rel=1e-9)
    assert "(eager and torch.compile)" in note and f"{wall:.2f}× in step wall time" in note
    assert document["summary"]["target_only_ops"] > 0
    same = json.loads(
        run_cli(
            "compare",
            str(MATRIX),
            "--baseline",
            base,
            "--target",
            "mnist_cnn_torch_gpu_bs64_fp32_eager_rep2",
            "--json",
            "--no-cache",
        ).stdout
    )
    assert not [note for note in same["summary"]["notes"] if "compilers" in note]


def test_variant_pairs_vary_one_dimension_and_hold_the_rest():
    from tb_opcompare.analysis.pairing import RunForPairing, variant_pairs

    def run(name, precision="fp32", compiler="eager", device="GPU", batch=8, repeat=None, model="m"):
        return RunForPairing(
            run=name,
            model=model,
            device=device,
            batch_size=batch,
            op_names=frozenset(),
            repeat=repeat,
            base_model=model,
            precision=precision,
            compiler=compiler,
        )

    runs = [
        run("a"),
        run("a_bf16", precision="bf16"),
        run("a_compile", compiler="torch.compile"),
        run("a_bf16_compile", precision="bf16", compiler="torch.compile"),
        run("other_batch_bf16", precision="bf16", batch=16),
        run("cpu_bf16", precision="bf16", device="CPU"),
        run("other_model_bf16", precision="bf16", model="n"),
    ]
    pairs = [(pair.baseline, pair.target, pair.varies) for pair in variant_pairs(runs)]
    assert pairs == [
        ("a", "a_bf16", "precision"),
        ("a_compile", "a_bf16_compile", "precision"),
        ("a_bf16", "a_bf16_compile", "compiler"),
        ("a", "a_compile", "compiler"),
    ]
    # unknown (listed before its trace is read, nothing in its name) reads as the default
    unknown = [run("unread", precision=None, compiler=None), run("unread_bf16", precision="bf16", compiler=None)]
    assert [(pair.baseline, pair.target) for pair in variant_pairs(unknown)] == [("unread", "unread_bf16")]
    repeats = [run("r1", repeat=1), run("r2", repeat=2), run("r1_bf16", precision="bf16", repeat=1)]
    assert [(pair.baseline, pair.target) for pair in variant_pairs(repeats)] == [("r1", "r1_bf16")]


def test_the_demo_logdir_pairs_every_cell_with_its_default_along_each_dimension():
    """demo_logs holds both demo models' precision x compiler matrices: every non-default
    run is the target of one pair per dimension it differs in, and Keras's
    mixed_bfloat16 eager run (data: mixed bf16/fp32) pairs with its XLA run (bf16)."""
    document = json.loads(run_cli("runs", str(FIXTURES.parent.parent / "demo_logs"), "--json", "--no-cache").stdout)
    pairs = {(pair["baseline"], pair["target"]): pair["varies"] for pair in document["variant_pairs"]}
    assert len(pairs) == 36 and set(pairs.values()) == {"precision", "compiler"}
    assert pairs["tf_keras/mnist_cnn_cpu_bs16_bf16_eager", "tf_keras/mnist_cnn_cpu_bs16_bf16_xla"] == "compiler"
    assert pairs["torch/mnist_cnn_torch_gpu_bs64", "torch/mnist_cnn_torch_gpu_bs64_bf16_eager"] == "precision"
    records = {record["run"]: record for record in document["runs"]}
    for (baseline, target), varies in pairs.items():
        for held in ("device", "batch_size"):
            assert records[baseline][held] == records[target][held]
    assert all(pair["varies"] == "device" for pair in document["pairs"])


def test_a_run_whose_data_alone_says_bf16_is_never_pooled_with_fp32(tmp_path):
    """Two GPU runs of one model whose sidecars say only the model: the data's bf16 puts
    one in its own configuration (model key, matrix column) and makes the pair a precision
    pair, not two repeats of one run."""
    logdir = tmp_path / "logdir"
    for name, source in (
        ("plain", "mnist_cnn_torch_gpu_bs64_fp32_eager_rep1"),
        ("autocast", "mnist_cnn_torch_gpu_bs64_bf16_eager_rep1"),
    ):
        run = logdir / name
        run.mkdir(parents=True)
        for trace in (MATRIX / source).glob("*.pt.trace.json.gz"):
            shutil.copy(trace, run / trace.name)
        (run / "opcompare.json").write_text(json.dumps({"model": "cnn"}))
    catalog = Catalog(str(logdir), cache_dir=None)
    assert (catalog.load("plain").model, catalog.load("autocast").model) == ("cnn", "cnn [bf16]")
    listing = json.loads(run_cli("runs", str(logdir), "--json", "--no-cache").stdout)
    assert [(pair["baseline"], pair["target"], pair["varies"]) for pair in listing["variant_pairs"]] == [
        ("plain", "autocast", "precision")
    ]
    matrix = json.loads(run_cli("matrix", str(logdir), "--json", "--no-cache").stdout)
    assert [(row["model"], row["precision"]) for row in matrix["rows"]] == [("cnn", "fp32"), ("cnn", "bf16")]


def test_references_are_read_in_the_columns_words():
    assert parse_column("gpu") == Column("GPU")
    assert parse_column("gpu (NVIDIA H200)") == Column("GPU (NVIDIA H200)")
    document = _matrix("--reference", "gpu")
    assert document.reference == "GPU"
    assert all(cell.speedup is not None for cell in document.cells)
    assert plugin_client(MATRIX).get(f"{PREFIX}/matrix?warmup=%C2%B2").status_code == 400  # "²" is no step count
    # a usage error names the parameter at fault, for the tab to point at it
    answer = plugin_client(MATRIX).get(f"{PREFIX}/matrix?warmup=-1")
    assert answer.status_code == 400 and json.loads(answer.data)["error"]["parameter"] == "warmup"


def test_a_run_that_says_no_precision_sits_in_the_default_row_and_is_named(tmp_path):
    """Issue 32: unknown precision or compiler made a configuration of its own (`CPU · ? · ?`
    for the public TF1 pair), apart from every run that says fp32 and eager."""
    from conftest import REALTRACES

    for device in ("cpu", "gpu"):
        shutil.copytree(REALTRACES / "tf1_timeline_mlp_cpu_vs_gpu" / device, tmp_path / f"mlp_{device}")
    document = matrix_document(Catalog(str(tmp_path), cache_dir=None))
    # a TF1 session runs a graph; the timeline says no precision
    assert [column.key for column in document.columns] == ["CPU", "GPU"]
    assert [(row.precision, row.compiler) for row in document.rows] == [("fp32", "TF graph")]
    assert document.warnings == ["2 run(s) say no precision, so they sit in the fp32 rows: mlp_cpu, mlp_gpu"]
    # the row's CPU cell is its reference: the step's wall span, 15.55 ms vs 1.17 ms
    gpu = next(cell for cell in document.cells if cell.column == "GPU")
    assert gpu.speedup == pytest.approx(15554 / 1167) and not gpu.reference
    runs = [
        MatrixRun("a", "m", 8, "CPU", None, "eager", [5.0, 5.0]),
        MatrixRun("b", "m", 8, "CPU", "fp32", None, [7.0]),
    ]
    cells, columns, _ = build_matrix(runs)
    assert [column.key for column in columns] == ["CPU"] and cells[0].runs == ["a", "b"]


def test_every_configuration_takes_its_own_cpu_cell_as_reference():
    """A TF model runs as a TF graph and a JAX one under XLA: with an eager model beside them,
    the reference column (CPU · fp32 · eager, when columns held configurations) held no cell
    of theirs. Rows are configurations now: each row's CPU cell is its reference."""
    runs = [
        MatrixRun("torch_cpu", "torch_cnn", 8, "CPU", "fp32", "eager", [10.0] * 4),
        MatrixRun("torch_gpu", "torch_cnn", 8, "GPU", "fp32", "eager", [2.0] * 4),
        MatrixRun("jax_cpu", "jax_cnn", 8, "CPU", "fp32", "XLA", [9.0] * 4),
        MatrixRun("jax_gpu", "jax_cnn", 8, "GPU", "fp32", "XLA", [3.0] * 4),
        MatrixRun("keras_gpu", "keras_cnn", 8, "GPU", "fp32", "TF graph", [1.0] * 4),
    ]
    cells, _, reference = build_matrix(runs)
    assert reference == Column("CPU")
    by_run = {cell.runs[0]: cell for cell in cells}
    assert by_run["torch_gpu"].speedup == pytest.approx(5.0) and by_run["torch_cpu"].reference
    assert by_run["jax_gpu"].speedup == pytest.approx(3.0) and by_run["jax_cpu"].reference
    assert by_run["keras_gpu"].speedup is None and not by_run["keras_gpu"].reference  # no CPU run: nothing to go by


def test_one_model_on_two_accelerators_sits_side_by_side(tmp_path):
    """Issue 32: the Matrix's device said only `GPU`, so runs of one model on an H100 and an
    H200 fell into one cell (pooled as repeats of each other). Where a kind of accelerator came
    in several models, the model is part of the column; either can be the reference."""
    import numpy as np

    from tb_opcompare.service.matrix import matrix_document

    for fixture, pattern in (
        ("gpu_h100", "mnist_cnn_torch_gpu_bs*_rep*"),
        ("gpu_h200", "mnist_cnn_torch_gpu_bs*_rep*"),
    ):
        for run in (FIXTURES / fixture / "demo").glob(pattern):
            shutil.copytree(run, tmp_path / fixture / run.name)
    h100, h200 = "GPU (NVIDIA H100 80GB HBM3)", "GPU (NVIDIA H200)"
    document = matrix_document(Catalog(str(tmp_path), cache_dir=None), reference="gpu (NVIDIA H100 80GB HBM3)")
    assert [column.key for column in document.columns] == [h100, h200]
    assert document.reference == h100
    for batch in (16, 64):
        cells = {cell.column: cell for cell in document.cells if cell.batch_size == batch}
        assert len(cells[h100].runs) == len(cells[h200].runs) == 3
        pooled = {
            key: float(
                np.median(
                    [step for run in cells[key].runs for step in steady_steps(profiler_step_durations(tmp_path / run))]
                )
            )
            for key in (h100, h200)
        }
        assert cells[h200].speedup == pytest.approx(pooled[h100] / pooled[h200], rel=1e-9)
    # one accelerator model in a logdir keeps the plain device name
    only_h100 = matrix_document(Catalog(str(tmp_path / "gpu_h100"), cache_dir=None))
    assert [column.key for column in only_h100.columns] == ["GPU"]


def test_a_cells_step_part_is_compares_breakdown_of_its_runs(tmp_path):
    """``part``: each cell's time in one part of its median steady step is the figure
    Compare's waterfall shows for the same run, and its speedup is the reference cell's
    over its own; an unknown part is a usage error naming the parts."""
    from tb_opcompare.service.compare import compare_document

    for run in MATRIX.glob("mnist_cnn_torch_*_bs64_*"):  # one run a cell: Compare pairs two runs
        if not run.name.endswith("_rep2"):
            shutil.copytree(run, tmp_path / "matrix" / run.name)
    catalog = Catalog(str(tmp_path / "matrix"), cache_dir=None)
    document = matrix_document(catalog, part="launch")
    assert document.part == "launch"
    singles = [cell for cell in document.cells if cell.column == "GPU"]
    assert len(singles) == 4 and all(len(cell.runs) == 1 for cell in document.cells)
    for cell in singles:
        reference = next(
            other
            for other in document.cells
            if other.reference
            and (other.model, other.precision, other.compiler, other.batch_size)
            == (cell.model, cell.precision, cell.compiler, cell.batch_size)
        )
        breakdown = compare_document(catalog, reference.runs[0], cell.runs[0]).summary.breakdown
        launch = next(part for part in breakdown.parts if part.category == "launch")
        assert reference.part_us == pytest.approx(launch.baseline_us, rel=1e-9)
        assert cell.part_us == pytest.approx(launch.target_us, rel=1e-9) and cell.part_us > 0
        if reference.part_us:
            assert cell.part_speedup == pytest.approx(reference.part_us / cell.part_us, rel=1e-9)
    with pytest.raises(UsageError, match=r"part: expected a part of the step \(input, forward"):
        matrix_document(catalog, part="nope")
