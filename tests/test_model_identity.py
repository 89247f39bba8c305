"""Models found from the data where run names hide them (issue 32, item 1).

On a logdir named the way users name theirs (tests/fixtures/user_logdirs/torch_h200: an
LSTM as ``lstm_runA``..``D`` at batch 2/8/32 on an H200 and 32 on its CPU; a CNN under
SummaryWriter's ``runs/<date>_<host>`` names on both; the tutorial's ``log/cnn``), each
lstm_run* was a model of its own and the four ``runs/…`` runs were joined only by luck of
their names: the Batch sweep and the Matrix had nothing to line up."""

from __future__ import annotations

import dataclasses
import shutil
import statistics

import pytest
from conftest import FIXTURES, REALTRACES, profiler_step_durations, steady_median

from tb_opcompare.analysis.model_identity import IdentityRun, identify_models, layer_scopes
from tb_opcompare.ingest.naming import model_key, names_no_model, run_folder
from tb_opcompare.service.matrix import matrix_document
from tb_opcompare.service.runs import runs_document
from tb_opcompare.service.sweep import sweep_document, sweeps_document
from tb_opcompare.store.catalog import Catalog

USER_LOGDIR = FIXTURES / "user_logdirs" / "torch_h200"
LSTM = ("lstm_runA", "lstm_runB", "lstm_runC", "lstm_runD")
SUMMARY_WRITER = (
    "runs/Nov26_02-49-23_vm",
    "runs/Nov26_02-49-32_vm",
    "runs/Nov26_02-49-41_vm",
    "runs/Nov26_02-49-54_vm",
)


@pytest.fixture(scope="module")
def user_logdir(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("user") / "logs"
    shutil.copytree(USER_LOGDIR, logdir)
    return logdir


def _models(catalog: Catalog) -> dict[str, tuple[str, str]]:
    return {run.run: (run.model, run.model_source) for run in runs_document(catalog).runs}


def test_runs_whose_names_hide_the_model_are_one_model_by_their_ops(user_logdir):
    models = _models(Catalog(str(user_logdir), cache_dir=None))
    assert len({models[run][0] for run in LSTM}) == 1
    assert {models[run][0] for run in SUMMARY_WRITER} == {"runs"}
    assert models["lstm_runD"][1].startswith("data: the CPU run of lstm_runC")
    assert models["lstm_runB"][1].startswith("data: the same ops as lstm_runA at batch 2")
    # the tutorial's log/cnn runs the CNN at the configuration of runs/…-54 (GPU, batch 64):
    # two experiments of one configuration are never pooled by their data
    assert models["log/cnn"][0] not in {models[LSTM[0]][0], "runs"}
    # a CNN and an LSTM in one folder stay apart (op names overlap 0.38-0.48)
    assert models[LSTM[0]][0] != "runs"


def test_the_sweep_and_the_matrix_line_up_the_runs_of_a_hidden_model(user_logdir):
    """Before: no model had two batch sizes, so no sweep, and no Matrix row held a CPU and a
    GPU run. Now the LSTM's GPU line has batch 2, 8 and 32 and its Matrix cell at batch 32
    reads the stopwatch: the CPU's median steady ProfilerStep over the GPU's."""
    catalog = Catalog(str(user_logdir), cache_dir=None)
    model = _models(catalog)["lstm_runA"][0]
    assert model in sweeps_document(catalog).sweepable
    sweep = sweep_document(catalog, model)
    assert sweep.batch_sizes == {"CPU": [32], "GPU": [2, 8, 32]}
    assert sorted(run.run for run in sweep.runs) == list(LSTM)
    matrix = matrix_document(catalog)
    gpu = next(
        cell for cell in matrix.cells if cell.model == model and cell.batch_size == 32 and cell.column.startswith("GPU")
    )
    cpu_step = steady_median(profiler_step_durations(user_logdir / "lstm_runD"))
    gpu_step = steady_median(profiler_step_durations(user_logdir / "lstm_runC"))
    assert gpu.speedup == pytest.approx(cpu_step / gpu_step, rel=1e-6)
    pairs = {(pair.baseline, pair.target): pair.matched_by for pair in runs_document(catalog).pairs}
    assert pairs[("lstm_runD", "lstm_runC")] == "one model, found from the ops"


def test_runs_in_other_folders_are_never_joined_by_their_ops(tmp_path):
    """One model recorded in two folders may be two studies (another library version):
    only runs side by side are joined."""
    for run, folder in (("lstm_runA", "study1"), ("lstm_runB", "study2")):
        shutil.copytree(USER_LOGDIR / run, tmp_path / folder / run)
    models = _models(Catalog(str(tmp_path), cache_dir=None))
    assert models["study1/lstm_runA"] == ("study1/lstm_runA", "run name")
    assert models["study2/lstm_runB"] == ("study2/lstm_runB", "run name")


def test_kinetos_two_dataloader_settings_stay_two_models():
    """resnet50_num_workers_0 and _4: one model, batch 32, one V100, op names 0.88 alike;
    two experiments, not repeats: pooling them would average what the user compares."""
    logdir = REALTRACES / "torch_resnet50_v100_logdir"
    models = _models(Catalog(str(logdir), cache_dir=None))
    assert models["resnet50_num_workers_0"] == ("resnet50_num_workers_0", "run name")
    assert models["resnet50_num_workers_4"] == ("resnet50_num_workers_4", "run name")


LIGHTNING = FIXTURES / "user_logdirs" / "lightning_h200"
VERSIONS = [f"lightning_logs/version_{n}" for n in range(6)]  # GPU bs16, GPU bs64 x3, CPU bs16, CPU bs64


def test_lightnings_versions_of_one_script_are_one_model_with_its_repeats(tmp_path):
    """Lightning's PyTorchProfiler on an H200 (tests/fixtures/user_logdirs/lightning_h200):
    every run of the script is a ``lightning_logs/version_N``. Before, the GPU batch-64 run
    and its two repeats were three models (repeats were taken for two experiments), so the
    sweep's GPU line and the Matrix cell had one run where there were three."""
    shutil.copytree(LIGHTNING, tmp_path / "logs")
    catalog = Catalog(str(tmp_path / "logs"), cache_dir=None)
    models = _models(catalog)
    assert len({models[run][0] for run in VERSIONS}) == 1
    assert models[VERSIONS[2]][1].startswith(f"data: a repeat of {VERSIONS[1]}")
    model = models[VERSIONS[0]][0]
    sweep = sweep_document(catalog, model)
    assert sweep.batch_sizes == {"CPU": [16, 64], "GPU": [16, 64]}
    cells = {(cell.column.split(" ")[0], cell.batch_size): cell for cell in matrix_document(catalog).cells}
    assert sorted(cells[("GPU", 64)].runs) == VERSIONS[1:4]
    # the stopwatch: CPU's median steady ProfilerStep over the GPU's, where one run a side
    cpu_step = steady_median(profiler_step_durations(tmp_path / "logs" / VERSIONS[4]))
    gpu_step = steady_median(profiler_step_durations(tmp_path / "logs" / VERSIONS[0]))
    assert cells[("GPU", 16)].speedup == pytest.approx(cpu_step / gpu_step, rel=1e-6)
    pairs = {(pair.baseline, pair.target) for pair in runs_document(catalog).pairs}
    assert (VERSIONS[4], VERSIONS[0]) in pairs and (VERSIONS[5], VERSIONS[1]) in pairs


LIGHTNING_DDP = FIXTURES / "user_logdirs" / "lightning_ddp_h200"
DDP_VERSIONS = [f"lightning_logs/version_{n}" for n in range(6)]  # CPU bs16, bs64; GPU bs16, bs64 x3


def _job_step_median(run_dir) -> float:
    """The stopwatch of a job, apart from the reader: step N of the job lasts as long as
    its slowest rank's ProfilerStep N; the job's time is those steps' steady median."""
    per_rank = [profiler_step_durations(trace) for trace in sorted(run_dir.glob("*.pt.trace.json*"))]
    assert len(per_rank) == 2 and len({len(steps) for steps in per_rank}) == 1
    return steady_median([max(steps) for steps in zip(*per_rank)])


def test_lightnings_ddp_jobs_are_runs_of_one_model_each_with_its_ranks(tmp_path):
    """Lightning's PyTorchProfiler under ``strategy="ddp"`` on an H200 (tests/fixtures/
    user_logdirs/lightning_ddp_h200): each script run is a ``version_N`` holding one trace
    per rank (``fit-<rank>-[Strategy]DDPStrategy...``). Each version must be one run of two
    workers, not two runs or one rank, and every view must line them up as one model."""
    shutil.copytree(LIGHTNING_DDP, tmp_path / "logs")
    catalog = Catalog(str(tmp_path / "logs"), cache_dir=None)
    listing = runs_document(catalog)
    assert sorted(run.run for run in listing.runs) == DDP_VERSIONS
    for run in listing.runs:
        assert [(worker.rank, worker.world_size) for worker in run.workers] == [(0, 2), (1, 2)], run.run
    models = {run.run: (run.model, run.model_source) for run in listing.runs}
    assert len({models[run][0] for run in DDP_VERSIONS}) == 1
    assert models[DDP_VERSIONS[4]][1].startswith(f"data: a repeat of {DDP_VERSIONS[3]}")
    sweep = sweep_document(catalog, models[DDP_VERSIONS[0]][0])
    assert sweep.batch_sizes == {"CPU": [16, 64], "GPU": [16, 64]}
    cells = {(cell.column.split(" ")[0], cell.batch_size): cell for cell in matrix_document(catalog).cells}
    assert sorted(cells[("GPU", 64)].runs) == DDP_VERSIONS[3:]
    cpu_job, gpu_job = (_job_step_median(tmp_path / "logs" / DDP_VERSIONS[n]) for n in (0, 2))
    assert cells[("GPU", 16)].speedup == pytest.approx(cpu_job / gpu_job, rel=1e-6)
    pairs = {(pair.baseline, pair.target) for pair in listing.pairs}
    assert (DDP_VERSIONS[0], DDP_VERSIONS[2]) in pairs and (DDP_VERSIONS[1], DDP_VERSIONS[3]) in pairs


def test_runs_of_one_configuration_are_repeats_only_with_the_very_same_ops():
    """Repeats have identical op names (every repeat recorded here); one op more or less is
    another experiment (kineto's two data-loader settings differ by more), kept apart."""
    ops = {"conv", "relu", "pool", "linear"}
    same = identify_models([_run("runs/Nov26_01-00-00_a", 16, ops), _run("runs/Nov26_01-00-09_a", 16, ops)])
    assert len({identity.model for identity in same.values()}) == 1
    other = identify_models(
        [_run("runs/Nov26_01-00-00_a", 16, ops), _run("runs/Nov26_01-00-09_a", 16, ops | {"dropout"})]
    )
    assert len({identity.model for identity in other.values()}) == 2
    # a run joins a group (here by the batch-size rule: 10 of 11 ops alike) only where it
    # repeats each of the group's runs of its own configuration
    ops = {f"op{n}" for n in range(10)}
    mixed = identify_models(
        [
            _run("runs/Nov26_01-00-00_a", 16, ops),
            _run("runs/Nov26_01-00-09_a", 64, ops),
            _run("runs/Nov26_01-00-19_a", 64, ops | {"dropout"}),
        ]
    )
    assert mixed["runs/Nov26_01-00-19_a"].model != mixed["runs/Nov26_01-00-09_a"].model


@pytest.mark.parametrize(
    "names, one_model",
    [
        (("lightning_logs/version_0", "lightning_logs/version_1"), True),  # a run counter
        (("trials/run-1", "trials/run-2"), True),
        (("sweep/resnet18", "sweep/resnet34"), False),  # two sizes of one architecture
        (("exp/cudnn_benchmark_on", "exp/cudnn_benchmark_off"), False),  # a setting that changes no op
    ],
)
def test_alike_runs_are_repeats_only_where_their_names_differ_in_a_run_counter(names, one_model):
    """Same configuration, the very same op names: repeats where the names tell nothing
    else apart; two models or two experiments where they do (a review found ResNet-18 and
    ResNet-34, alike op for op, taken for one model's repeats)."""
    ops = {"aten::conv2d", "aten::relu", "aten::addmm"}
    found = identify_models([_run(name, 32, ops) for name in names])
    assert (found[names[0]].model == found[names[1]].model) is one_model
    assert not identify_models([_run(name, 32, set()) for name in names])[names[0]].source.startswith("data:")


@pytest.mark.parametrize(
    "run, key, says_nothing, folder",
    [
        ("mlp-20210202-131252", "mlp", False, ""),  # Keras tutorial's %Y%m%d-%H%M%S
        ("download128-20210202-131252/train", "download128/train", False, ""),
        ("runs/Nov26_02-49-23_vm", "runs", True, "runs"),  # SummaryWriter's default, host included
        ("fit/20261126-031500/train", "fit/train", True, "fit"),
        ("2026_11_26_02_45_41", "2026_11_26_02_45_41", True, ""),  # nothing left: the name stays the key
        ("mnist_cnn_torch_gpu_bs64_rep1", "mnist_cnn_torch", False, ""),
        ("bert_2020", "bert_2020", False, ""),  # a year alone is no timestamp
    ],
)
def test_a_run_names_time_and_host_name_no_model(run, key, says_nothing, folder):
    assert (model_key(run), names_no_model(run), run_folder(run)) == (key, says_nothing, folder)


def _run(run: str, batch: int, ops: set[str], device: str = "GPU", key: str | None = None) -> IdentityRun:
    return IdentityRun(
        run=run,
        key=key or model_key(run),
        from_sidecar=False,
        names_nothing=names_no_model(run),
        folder=run_folder(run),
        device=device,
        batch_size=batch,
        precision="fp32",
        compiler="eager",
        op_names=frozenset(ops),
    )


def test_two_hidden_models_in_one_generic_folder_get_distinct_names():
    cnn, lstm = {"conv", "relu", "pool", "linear"}, {"embed", "lstm", "linear", "softmax"}
    found = identify_models(
        [
            _run("runs/Nov26_01-00-00_a", 16, cnn),
            _run("runs/Nov26_01-00-09_a", 64, cnn),
            _run("runs/Nov26_02-00-00_a", 8, lstm),
            _run("runs/Nov26_02-00-09_a", 32, lstm),
        ]
    )
    names = [found[run].model for run in sorted(found)]
    assert names[0] == names[1] and names[2] == names[3] and names[0] != names[2]
    assert sorted({names[0], names[2]}) == ["runs", "runs (2)"]
    assert statistics.mode(identity.source.split(" ")[0] for identity in found.values()) == "data:"


def test_a_folder_of_very_many_runs_keeps_its_names_and_answers_at_once():
    """The pairwise comparison grows faster than the runs (14 s at 1,000 in one folder):
    beyond MAX_FOLDER_RUNS the names decide."""
    import time

    from tb_opcompare.analysis.model_identity import MAX_FOLDER_RUNS

    ops = {"conv", "relu", "pool", "linear"}
    many = [
        _run(
            f"runs/Nov26_03-{index // 60:02d}-{index % 60:02d}_host",
            2 ** (index % 7),
            ops,
            "GPU" if index % 2 else "CPU",
        )
        for index in range(MAX_FOLDER_RUNS + 1)
    ]
    start = time.perf_counter()
    found = identify_models(many)
    assert time.perf_counter() - start < 5
    assert {(identity.model, identity.source) for identity in found.values()} == {("runs", "run name")}


def test_a_models_name_is_never_a_cut_number():
    """Issue 51: the CPU runs ``log_prefetch/128_20210203-201149`` and
    ``log_prefetch/1024_20210203-203216`` (one CNN at two batch sizes) became the model
    ``log_prefetch/1``, the common beginning of ``128`` and ``1024``."""
    ops = {"sequential/conv2d/Conv2D", "sequential/dense/MatMul", "sequential/flatten/Reshape"}
    runs = ["log_prefetch/128_20210203-201149", "log_prefetch/1024_20210203-203216"]
    found = identify_models([_run(runs[0], 128, ops, "CPU"), _run(runs[1], 1024, ops, "CPU")])
    assert {found[run].model for run in runs} == {"log_prefetch"}
    letters = identify_models([_run("lstm_runA", 2, ops, "CPU"), _run("lstm_runB", 8, ops, "CPU")])
    assert letters["lstm_runA"].model == "lstm_run"  # letters are a name's own: kept as they were


def _keras(layers: list[str], device: str) -> set[str]:
    """A Keras model's op names on a device: the GPU side's layout transposes and the CPU
    side's oneDNN ops sit in the same layers under other names (as TF 2.4 writes them)."""
    ops = set()
    for layer in layers:
        scope = f"StatefulPartitionedCall/sequential/{layer}"
        ops |= {
            f"{scope}/Relu",
            f"{scope}/ReadVariableOp",
            f"StatefulPartitionedCall/gradient_tape/sequential/{layer}/ReluGrad",
        }
        if device == "GPU":
            ops |= {f"{scope}/Conv2D-0-TransposeNHWCToNCHW-LayoutOptimizer", f"{scope}/BiasAdd"}
        else:
            ops |= {f"{scope}/_MklNativeFusedConv2D", f"{scope}/mkl_layout"}
    return ops | {"IteratorGetNext", "StatefulPartitionedCall/adam/Add", "StatefulPartitionedCall/Mean"}


CNN = ["conv2d", "conv2d_1", "max_pooling2d", "flatten", "dense", "dense_1"]


def test_a_models_cpu_and_gpu_groups_in_other_folders_are_one_model_by_their_layer_scopes():
    """Issue 51: CPU runs in ``log_prefetch/<bs>_<time>`` and GPU runs in
    ``logs_load/download<bs>-<time>`` of one Keras CNN: op names 0.57-0.61 alike (layout
    transposes, fused ops), layer scopes the same; one model, named by its folders."""
    runs = [
        _run("log_prefetch/128_20210203-201149/train", 128, _keras(CNN, "CPU"), "CPU"),
        _run("log_prefetch/1024_20210203-203216/train", 1024, _keras(CNN, "CPU"), "CPU"),
        _run("logs_load/download8-20210202-101010/train", 8, _keras(CNN, "GPU"), "GPU"),
        _run("logs_load/download128-20210202-111111/train", 128, _keras(CNN, "GPU"), "GPU"),
    ]
    found = identify_models(runs)
    assert {identity.model for identity in found.values()} == {"log_prefetch + logs_load"}
    assert sum("layer scopes" in identity.source for identity in found.values()) == 2  # a run of each side


def test_layer_scopes_join_only_one_models_two_devices_and_only_one_to_one():
    cpu = _run("a/20210203-201149", 128, _keras(CNN, "CPU"), "CPU")
    gpu = _run("b/20210203-203216", 128, _keras(CNN, "GPU"), "GPU")
    other_gpu = _run("c/20210204-090000", 128, _keras(CNN, "GPU"), "GPU")
    # one device in two folders: maybe two studies (another library version), kept apart
    same_device = identify_models([cpu, dataclasses.replace(gpu, device="CPU")])
    assert len({identity.model for identity in same_device.values()}) == 2
    # two accelerator groups match one CPU group: which is its counterpart is not known
    ambiguous = identify_models([cpu, gpu, other_gpu])
    assert len({identity.model for identity in ambiguous.values()}) == 3
    # another model: a CNN and an MLP share their optimizer's and loss's scopes only
    mlp = _run("b/20210203-203216", 128, _keras(["dense", "dense_1", "dense_2"], "GPU"), "GPU")
    assert len({identity.model for identity in identify_models([cpu, mlp]).values()}) == 2
    # near twins: an LSTM and a fused LSTM have their cells under other scopes
    lstm = {f"rnn/while/basic_lstm_cell/{op}" for op in ("MatMul", "BiasAdd", "Sigmoid", "Tanh")}
    lstm |= {"rnn/while/Enter/x", "dense/Tensordot/MatMul", "dense/BiasAdd/x"}
    fused = {f"rnn/lstm_block_wrapper/{op}" for op in ("BlockLSTM", "Transpose", "Reshape")}
    fused |= {"rnn/while/Enter/x", "dense/Tensordot/MatMul", "dense/BiasAdd/x"}
    twins = identify_models([_run("x/1", 32, lstm, "CPU"), _run("y/2", 32, fused, "GPU")])
    assert len({identity.model for identity in twins.values()}) == 2
    # names that say the model keep it, whatever the data
    named = identify_models(
        [_run("x/cnn_small", 128, _keras(CNN, "CPU"), "CPU"), _run("y/cnn_big", 128, _keras(CNN, "GPU"), "GPU")]
    )
    assert {identity.model for identity in named.values()} == {"x/cnn_small", "y/cnn_big"}


@pytest.mark.parametrize(
    "name, scope",
    [
        ("StatefulPartitionedCall/sequential/conv2d/Relu", "sequential/conv2d"),
        ("StatefulPartitionedCall/gradient_tape/sequential/conv2d/ReluGrad", "sequential/conv2d"),
        ("gradients/layer_1/fully_connected/MatMul_grad/MatMul", "layer_1/fully_connected"),
        ("layer_1/fully_connected/MatMul", "layer_1/fully_connected"),
        ("edge_11_gradients/Mean_grad/floordiv", None),
        ("gradients/Mean_grad/Shape", None),
        ("sequential/dense/MatMul", "sequential/dense"),
        ("StatefulPartitionedCall/Add/ReadVariableOp", None),
        ("aten::mkldnn_convolution", None),
        ("ProfilerStep#3", None),
        ("Iterator::Root::Prefetch::ParallelMapV2::Zip[0]/x/y", None),
    ],
)
def test_layer_scopes_are_the_models_layers_in_its_op_names(name, scope):
    assert layer_scopes(frozenset([name])) == (frozenset([scope]) if scope else frozenset())


@pytest.mark.realtraces
def test_a_pair_joined_by_its_layers_says_so_and_a_sidecar_parts_it(tmp_path):
    """The TF1 MLP's CPU and GPU runs in folders named by time only: one model by their
    layer scopes, which carry no widths, so Compare says how the runs were joined and how
    to part them; a sidecar naming each run's model parts them, and the note goes."""
    import json

    from test_third_party_tier import assemble

    from tb_opcompare.service.compare import compare_document

    assemble("tf1_other_folders", tmp_path)
    cpu, gpu = "log_prefetch/100_20210203-201149", "logs_load/download100-20210203-203216"
    notes = compare_document(Catalog(str(tmp_path), cache_dir=None), cpu, gpu).summary.notes
    assert any(
        note.startswith(f"One model by its layers: {cpu} and {gpu} have the same layer scopes") for note in notes
    )
    assert not any(note.startswith("Different models") for note in notes)
    for run, model in ((cpu, "mlp_small"), (gpu, "mlp_wide")):
        (tmp_path / run / "opcompare.json").write_text(json.dumps({"model": model}))
    catalog = Catalog(str(tmp_path), cache_dir=None)
    models = {record.run: record.model for record in runs_document(catalog).runs}
    assert models[cpu] != models[gpu]
    notes = compare_document(catalog, cpu, gpu).summary.notes
    assert not any(note.startswith("One model by its layers") for note in notes)
