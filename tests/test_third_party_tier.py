"""The third-party tier (issue 32): whole logdirs that other people wrote, assembled in a temp
dir from `../shared/realtraces` (kineto's ResNet-50 logdir, the MTIA and MI250 traces, two
ranks of one job, the BERT multi-GPU xplane, the TF1 CPU/GPU timelines, BERT on an H100 and an
MI300X), and every view built on each: runs, compare, matrix, sweep, trend, check, memory,
modules and layers. Each is filled, or says in its own words why not; the headline is the
ratio of the raw step markers wherever the files hold them (an oracle computed here)."""

from __future__ import annotations

import math
import shutil

import pytest
from conftest import REALTRACES, profiler_step_durations, steady_median

from tb_opcompare.service.check import check_document
from tb_opcompare.service.compare import compare_document
from tb_opcompare.service.layers import layers_document
from tb_opcompare.service.matrix import matrix_document
from tb_opcompare.service.memory import memory_document
from tb_opcompare.service.modules import modules_document
from tb_opcompare.service.runs import runs_document
from tb_opcompare.service.sweep import sweep_document, sweeps_document
from tb_opcompare.service.trend import trend_document
from tb_opcompare.store.catalog import Catalog

LOGDIRS = {  # name -> the folders of realtraces it holds
    "kineto_resnet50": ["torch_resnet50_v100_logdir"],
    "hta_accelerators": ["torch_hta_accelerators"],
    "hta_two_ranks": ["torch_hta_two_ranks"],
    "tf_bert_multigpu": ["tf2_xplane_bert_multigpu"],
    "tf1_cpu_vs_gpu": ["tf1_timeline_mlp_cpu_vs_gpu"],
    "bert_h100_vs_mi300": ["torch_bert_small_h100_vs_mi300"],
    # issue 51: one model's CPU and GPU runs in folders named by time only, as a user's
    # logdir has them (the folders' words say nothing of the device or the model)
    "tf1_other_folders": [
        ("tf1_timeline_mlp_cpu_vs_gpu/cpu", "log_prefetch/100_20210203-201149"),
        ("tf1_timeline_mlp_cpu_vs_gpu/gpu", "logs_load/download100-20210203-203216"),
    ],
}


def assemble(name: str, root) -> None:
    """The tier's logdir ``name`` under ``root``: each realtraces folder copied whole, or
    to the place a pair ``(source, destination)`` names."""
    for folder in LOGDIRS[name]:
        source, destination = folder if isinstance(folder, tuple) else (folder, folder)
        shutil.copytree(REALTRACES / source, root / destination)


@pytest.fixture(scope="module", params=sorted(LOGDIRS))
def logdir(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    assemble(request.param, root)
    return root


def test_every_view_is_filled_or_says_why(logdir):
    catalog = Catalog(str(logdir), cache_dir=None)
    runs = runs_document(catalog)
    assert runs.runs and not runs.errors
    records = {record.run: record for record in runs.runs}
    if runs.suggested is None:
        assert len(runs.runs) == 1  # one run: nothing to compare, and the listing says so
        assert runs.notices
        baseline = target = runs.runs[0].run
    else:
        baseline, target = runs.suggested.baseline, runs.suggested.target

    compare = compare_document(catalog, baseline, target)
    assert compare.rows and math.isfinite(compare.summary.headline_speedup)
    # the headline is the stopwatch's: the ratio of the raw step markers of the two runs shown
    sessions = {
        side: catalog.source(run).sessions[getattr(compare.summary, side).session]
        for side, run in (("baseline", baseline), ("target", target))
    }
    if all(len(files) == 1 and files[0].endswith((".json", ".json.gz")) for files in sessions.values()):
        from pathlib import Path

        steps = [profiler_step_durations(Path(sessions[side][0])) for side in ("baseline", "target")]
        medians = [steady_median(durations) if durations else None for durations in steps]
        if (
            all(medians)
            and compare.summary.headline_basis == "step wall time"
            and not compare.summary.headline_per_sample
        ):
            assert compare.summary.headline_speedup == pytest.approx(medians[0] / medians[1], rel=1e-9)

    matrix = matrix_document(catalog)
    placed = {run for cell in matrix.cells for run in cell.runs}
    assert {baseline, target} <= placed
    assert all(cell.latency_us for cell in matrix.cells) or any("no step markers" in w for w in matrix.warnings)

    sweeps = sweeps_document(catalog)
    assert sweeps.models  # every model's batch sizes per device: why a model is not sweepable
    for model in sweeps.sweepable:
        assert sweep_document(catalog, model).series
    for model, devices in sweeps.models.items():
        if model not in sweeps.sweepable:
            assert all(len(sizes) < 2 for sizes in devices.values())

    model_runs = [run for run, record in records.items() if record.model == records[baseline].model]
    trend = trend_document(catalog, model_runs)
    assert trend.points and trend.rows

    if baseline != target:
        check = check_document(catalog, [baseline], [target], allow_one_run=True)
        assert check.rows and check.whole_step is not None and check.warnings  # one run a side is said
    memory = memory_document(catalog, baseline, target)
    assert memory.rows or memory.notes
    modules = modules_document(catalog, baseline, target)
    assert len(modules.nodes) > 1 or modules.notes  # more than the root, or why not
    layers = layers_document(catalog, baseline, target)
    assert layers.rows or layers.notes


def _logdir(tmp_path, name):
    assemble(name, tmp_path)
    return Catalog(str(tmp_path), cache_dir=None)


def test_a_models_cpu_and_gpu_runs_in_other_folders_are_one_model_in_every_view(tmp_path):
    """Issue 51: the CPU run in ``log_prefetch/…`` and the GPU run in ``logs_load/…`` (one
    MLP, op names 0.76 alike) were two models: "Different models" above the pair the tab
    suggests, and two rows of the Matrix. Their layer scopes (``layer_1/fully_connected``,
    …) are the same."""
    catalog = _logdir(tmp_path, "tf1_other_folders")
    runs = runs_document(catalog)
    models = {record.run: record.model for record in runs.runs}
    (model,) = set(models.values())
    assert model == "log_prefetch + logs_load"  # the folders, never a cut word ("log")
    assert all("layer scopes" in record.model_source for record in runs.runs)
    cpu, gpu = "log_prefetch/100_20210203-201149", "logs_load/download100-20210203-203216"
    assert (runs.suggested.baseline, runs.suggested.target) == (cpu, gpu)
    compare = compare_document(catalog, cpu, gpu)
    assert not [note for note in compare.summary.notes if note.startswith("Different models")]
    assert compare.summary.baseline.model == compare.summary.target.model == model
    matrix = matrix_document(catalog)
    assert {cell.model for cell in matrix.cells} == {model}  # one row
    assert {run for cell in matrix.cells for run in cell.runs} == {cpu, gpu}
    cold = compare_document(Catalog(str(tmp_path), cache_dir=None), cpu, gpu)  # no listing first
    assert cold.summary.baseline.model == model


def test_the_first_pair_is_one_model_on_two_devices_or_two_experiments_of_it(tmp_path):
    """Without a CPU run or a batch sweep, the first pair was "the first two runs": the BERT
    runs on an H100 and an MI300X were two models, and kineto's `num_workers_0` and `_4`
    (one ResNet-50, two data-loader settings) were paired as unrelated runs."""
    bert = _logdir(tmp_path / "bert", "bert_h100_vs_mi300")
    runs = runs_document(bert)
    assert len({record.model for record in runs.runs}) == 1
    assert runs.suggested.reason.endswith("one model on two devices")
    assert "NVIDIA H100" in runs.suggested.reason and "MI300X" in runs.suggested.reason
    (row,) = {(cell.model, cell.batch_size) for cell in matrix_document(bert).cells}  # one row, two columns
    assert len(matrix_document(bert).cells) == 2

    kineto = _logdir(tmp_path / "kineto", "kineto_resnet50")
    suggested = runs_document(kineto).suggested
    assert suggested.reason.endswith("two experiments of one model")
    compare = compare_document(kineto, suggested.baseline, suggested.target)
    assert not any(note.startswith("Different models") for note in compare.summary.notes)


def test_runs_of_different_models_say_so_above_their_figures(tmp_path):
    """MI250 training and MTIA inference share 10 of 102 ops: the headline read a bare 0.00x
    with nothing said; now the notes say the models differ, and the figure has its digits."""
    catalog = _logdir(tmp_path, "hta_accelerators")
    compare = compare_document(catalog, "torch_hta_accelerators/mi250_train", "torch_hta_accelerators/mtia_inference")
    (note,) = [note for note in compare.summary.notes if note.startswith("Different models")]
    assert f"{compare.summary.matched_ops} of their" in note
    from tb_opcompare.text import format_speedup

    assert format_speedup(compare.summary.headline_speedup) != "0.00×"


def test_a_variant_of_one_model_is_not_called_a_different_model(tmp_path):
    """fp32 -> bf16 or eager -> torch.compile renames and fuses ops: their overlap is low,
    but the runs are one model's variants, and the notes must not say "different models"."""
    import msgspec

    from tb_opcompare.analysis.headline import different_models

    catalog = _logdir(tmp_path, "hta_accelerators")
    compare = compare_document(catalog, "torch_hta_accelerators/mi250_train", "torch_hta_accelerators/mtia_inference")
    summary = msgspec.structs.asdict(compare.summary)
    baseline = msgspec.structs.replace(compare.summary.baseline, model="resnet")
    assert different_models(summary, baseline, msgspec.structs.replace(baseline, model="resnet [bf16]")) is None
    assert different_models(summary, baseline, msgspec.structs.replace(baseline, model="bert")).startswith(
        "Different models"
    )
