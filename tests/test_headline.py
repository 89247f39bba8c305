"""One stopwatch headline (issue 31): the first number of a comparison is the step wall
time ratio, computed here from each profile's own raw step events, and Compare, the
Matrix, the Batch sweep and the CLI read the same number for the same runs. Checked on
logdirs this project did not write (kineto's ResNet-50 logdir, the TF1 timelines) and on
its own recordings (the demo; Keras 2 xplanes)."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import statistics
from pathlib import Path

import pytest
from conftest import FIXTURES, REALTRACES, REPO, profiler_step_durations, run_cli, steady_median

from tb_opcompare.service.compare import compare_document
from tb_opcompare.service.layers import layers_document
from tb_opcompare.service.matrix import matrix_document
from tb_opcompare.service.modules import modules_document
from tb_opcompare.service.sweep import sweep_document
from tb_opcompare.store.catalog import Catalog
from tb_opcompare.text import format_speedup


def _step_durations(trace: Path) -> list[float]:
    """Each ProfilerStep#N's longest range (µs) in one raw trace, in start order."""
    ranges: dict[str, tuple[float, float]] = {}
    for event in json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]:
        name = event.get("name", "")
        if event.get("ph") == "X" and name.startswith("ProfilerStep#"):
            if name not in ranges or event["dur"] > ranges[name][1]:
                ranges[name] = (event["ts"], event["dur"])
    return [duration for _, duration in sorted(ranges.values())]


def test_kineto_s_own_logdir_reads_the_data_loader_speedup_op_time_misses(tmp_path):
    """num_workers 0 -> 4 on one V100: the step's wall time falls (the data loader's
    wait leaves the step), which op time, blind to the wait, reads as 0.95x slower."""
    logdir = tmp_path / "kineto"
    shutil.copytree(REALTRACES / "torch_resnet50_v100_logdir", logdir)
    base, target = "resnet50_num_workers_0", "resnet50_num_workers_4"
    newest = {run: sorted((logdir / run).glob("*.pt.trace.json.gz"))[-1] for run in (base, target)}
    expected = steady_median(_step_durations(newest[base])) / steady_median(_step_durations(newest[target]))
    assert 1.15 < expected < 1.45
    summary = compare_document(Catalog(str(logdir), cache_dir=None), base, target).summary
    assert summary.headline_basis == "step wall time" and not summary.headline_per_sample
    assert summary.headline_speedup == pytest.approx(expected, rel=1e-9)
    assert summary.overall_speedup < 1  # op time says slower: the number users were shown before
    text = run_cli("compare", str(logdir), "--baseline", base, "--target", target, "--no-cache", "--top", "1").stdout
    assert text.splitlines()[2].startswith(f"speedup {format_speedup(expected)} (step wall time: median of ")


def _tf1_logdir(root: Path) -> Path:
    for device in ("cpu", "gpu"):
        shutil.copytree(REALTRACES / "tf1_timeline_mlp_cpu_vs_gpu" / device, root / f"mlp_{device}")
    return root


def _tf1_span(path: Path) -> float:
    """A TF1 timeline's wall span: the first op's start to the last op's end (µs)."""
    events = [event for event in json.loads(path.read_text())["traceEvents"] if event.get("ph") == "X"]
    return max(event["ts"] + event.get("dur", 0) for event in events) - min(event["ts"] for event in events)


def test_a_tf1_pair_reads_one_number_in_compare_matrix_and_cli(tmp_path):
    """The public TF1 CPU/GPU timelines: one session.run each, 15.55 ms vs 1.17 ms of
    wall time (13.3x), where op time summed over the CPU's threads says 26.8-31.3x."""
    logdir = _tf1_logdir(tmp_path / "tf1")
    expected = _tf1_span(logdir / "mlp_cpu" / "timeline_02_step_1.json") / _tf1_span(
        logdir / "mlp_gpu" / "timeline_02_step_1.json"
    )
    assert expected == pytest.approx(13.33, abs=0.01)
    catalog = Catalog(str(logdir), cache_dir=None)
    summary = compare_document(catalog, "mlp_cpu", "mlp_gpu").summary
    assert summary.headline_speedup == pytest.approx(expected, rel=1e-9)
    assert summary.whole_step_speedup > 2 * expected  # op time, the old headline
    assert any(note.startswith("Op time per step gives ") for note in summary.notes)
    (cell,) = [cell for cell in matrix_document(catalog).cells if cell.runs == ["mlp_gpu"]]
    assert cell.speedup == pytest.approx(summary.headline_speedup, rel=1e-12)
    # Modules and Layers said 26.8x and 32.6x for this pair: now the same headline
    for document in (modules_document(catalog, "mlp_cpu", "mlp_gpu"), layers_document(catalog, "mlp_cpu", "mlp_gpu")):
        assert document.headline.speedup == summary.headline_speedup
        assert document.headline.text == summary.headline_text
    text = run_cli("compare", str(logdir), "--no-cache", "--top", "1").stdout
    assert f"\nspeedup {format_speedup(expected)} (step wall time" in text


@pytest.fixture(scope="module")
def demo() -> Catalog:
    return Catalog(str(REPO / "demo_logs"), cache_dir=None)


@pytest.mark.parametrize("batch", [1, 16, 64])
def test_the_demo_pair_reads_one_number_in_compare_matrix_sweep_and_cli(demo, batch):
    """The demo's PyTorch CPU -> H100 pair read 3.29x in Compare and 2.04x in the Matrix
    at batch 64 before: now both, the sweep's whole step and the CLI read the wall time."""
    base, target = f"torch/mnist_cnn_torch_cpu_bs{batch}", f"torch/mnist_cnn_torch_gpu_bs{batch}"
    expected = steady_median(profiler_step_durations(REPO / "demo_logs" / base)) / steady_median(
        profiler_step_durations(REPO / "demo_logs" / target)
    )
    summary = compare_document(demo, base, target).summary
    assert summary.headline_speedup == pytest.approx(expected, rel=1e-9)
    matrix = matrix_document(demo, models=["mnist_cnn_torch"])
    (cell,) = [cell for cell in matrix.cells if cell.runs == [target]]
    assert cell.speedup == pytest.approx(expected, rel=1e-12)
    sweep = sweep_document(demo, "mnist_cnn_torch")
    (step,) = [row for row in sweep.speedups if row.op == "(whole step)" and row.batch_size == batch]
    assert step.speedup == pytest.approx(expected, rel=1e-12)
    text = run_cli(
        "compare", str(REPO / "demo_logs"), "--baseline", base, "--target", target, "--no-cache", "--top", "1"
    ).stdout
    assert f"\nspeedup {format_speedup(expected)} (step wall time" in text


def test_batch_sizes_that_differ_compare_wall_time_per_sample(demo):
    base, target = "torch/mnist_cnn_torch_cpu_bs16", "torch/mnist_cnn_torch_gpu_bs64"
    walls = [steady_median(profiler_step_durations(REPO / "demo_logs" / run)) for run in (base, target)]
    summary = compare_document(demo, base, target).summary
    assert summary.headline_per_sample and summary.headline_basis == "step wall time"
    assert summary.headline_speedup == pytest.approx(walls[0] / 16 / (walls[1] / 64), rel=1e-9)


def _keras2_call_durations(path: Path) -> list[float]:
    """Keras 2's train_function calls on the host plane (µs), in start order, read with
    TensorFlow's own XSpace classes."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace.FromString(path.read_bytes())
    calls = []
    for plane in space.planes:
        ids = {key for key, metadata in plane.event_metadata.items() if metadata.name == "train_function"}
        for line in plane.lines:
            calls += [
                (line.timestamp_ns * 1000 + event.offset_ps, event.duration_ps / 1e6)
                for event in line.events
                if event.metadata_id in ids
            ]
    return [duration for _, duration in sorted(calls)]


KERAS2 = sorted((FIXTURES / "versions" / "tf2.12").glob("*/plugins/profile/*/*.xplane.pb"))


@pytest.mark.parametrize("xplane", KERAS2, ids=lambda path: path.parts[-5])
def test_keras_2_step_function_calls_are_the_steps_wall_times(xplane, tmp_path):
    """TF 2.4-2.15 Keras marks one profiled step (or none) but calls train_function once
    a step: each call's span is a step, so the run has a wall time (the Matrix had none)."""
    expected = _keras2_call_durations(xplane)
    assert len(expected) >= 2
    run = tmp_path / "run"
    shutil.copytree(xplane.parents[3], run)
    facts = Catalog(str(tmp_path), cache_dir=None).load("run").profile.facts
    assert facts.steps == len(expected) and facts.step_times_us == pytest.approx(expected, rel=1e-12)
    assert facts.steps_source.startswith("Keras step function calls")


def test_the_device_steps_line_gives_a_tf_2_4_gpu_run_its_wall_time(tmp_path):
    """The public TF 2.x BERT xplane marks its step on each GPU plane's Steps line only."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    logdir = tmp_path / "bert"
    shutil.copytree(REALTRACES / "tf2_xplane_bert_multigpu", logdir / "bert")
    (path,) = (logdir / "bert").rglob("*.xplane.pb")
    lines = [
        [event.duration_ps / 1e6 for event in line.events]
        for plane in xplane_pb2.XSpace.FromString(path.read_bytes()).planes
        if plane.name.startswith("/device:GPU")
        for line in plane.lines
        if line.name == "Steps"
    ]
    assert lines and all(len(line) == len(lines[0]) for line in lines)
    facts = Catalog(str(logdir), cache_dir=None).load("bert").profile.facts
    assert facts.steps_source == "Steps line of the device plane"
    assert facts.step_times_us in [pytest.approx(line, rel=1e-12) for line in lines]
    assert statistics.median(facts.step_times_us) > 1000


def test_every_view_of_two_batch_sizes_says_the_batch_sizes_differ(demo):
    """Compare said so; Memory and Layers compared a bs16 run with a bs64 run silently."""
    from tb_opcompare.service.memory import memory_document

    base, target = "torch/mnist_cnn_torch_cpu_bs16", "torch/mnist_cnn_torch_gpu_bs64"
    for document in (
        compare_document(demo, base, target).summary,
        memory_document(demo, base, target),
        layers_document(demo, base, target),
    ):
        assert any(note.startswith("Batch sizes differ (16 vs 64): ") for note in document.notes), type(document)
    same = "torch/mnist_cnn_torch_gpu_bs16"
    for document in (memory_document(demo, base, same), layers_document(demo, base, same)):
        assert not any(note.startswith("Batch sizes differ") for note in document.notes)


def test_without_step_markers_the_stand_in_says_so_and_claims_no_per_sample(tmp_path):
    """Two runs without step markers (the profiler wrapper's summary.json) whose sidecars
    say batch 8 and 32: the headline is op time per step per sample, said as such."""
    import json as json_module

    for size in (8, 32):
        shutil.copytree(FIXTURES / "summary_json" / "mlp_cpu", tmp_path / f"mlp_bs{size}")
        (tmp_path / f"mlp_bs{size}" / "opcompare.json").write_text(
            json_module.dumps({"model": "mlp", "batch_size": size})
        )
    summary = compare_document(Catalog(str(tmp_path), cache_dir=None), "mlp_bs8", "mlp_bs32").summary
    assert summary.headline_basis == "op time per step" and summary.headline_per_sample
    assert summary.headline_text.startswith(
        "the baseline and the target have no step wall times, so op time per step per sample instead of wall time"
    )
    note = next(note for note in summary.notes if note.startswith("Batch sizes differ (8 vs 32): "))
    assert note.startswith("Batch sizes differ (8 vs 32): the headline is per sample")
    assert summary.headline_speedup == pytest.approx(summary.whole_step_speedup * 32 / 8, rel=1e-12)


def test_a_group_with_a_run_without_markers_says_it_is_left_out(tmp_path):
    """A run group pools the steady steps of the runs that have markers and says which
    it left out."""
    logdir = tmp_path / "logs"
    for run in ("mnist_cnn_torch_cpu_bs64", "mnist_cnn_torch_gpu_bs64"):
        shutil.copytree(REPO / "demo_logs" / "torch" / run, logdir / run)
    shutil.copytree(FIXTURES / "summary_json" / "mlp_cpu", logdir / "no_markers")
    catalog = Catalog(str(logdir), cache_dir=None)
    summary = compare_document(catalog, ["mnist_cnn_torch_cpu_bs64", "no_markers"], "mnist_cnn_torch_gpu_bs64").summary
    assert summary.headline_basis == "step wall time"
    assert summary.baseline_step_wall_us == pytest.approx(
        steady_median(profiler_step_durations(REPO / "demo_logs" / "torch" / "mnist_cnn_torch_cpu_bs64")), rel=1e-9
    )
    assert "The step wall time leaves out 1 baseline run without step markers." in summary.notes
    assert summary.baseline.step_time_us == summary.baseline_step_wall_us  # the group's record says the same


def _argument_only(source: Path, target: Path) -> None:
    """A copy of a Keras 2 run whose tf.data events are renamed away: its batch size is then
    fit()'s batch_size argument alone (the step event's stat), as in a profile whose input
    pipeline was not traced."""
    from tb_opcompare.ingest.readers.xplane_schema import XSpace

    space = XSpace()
    space.ParseFromString(next(source.rglob("*.xplane.pb")).read_bytes())
    for plane in space.planes:
        for entry in plane.event_metadata:
            entry.value.name = entry.value.name.replace("Iterator::", "Untraced::")
    path = target / "plugins" / "profile" / "1" / "vm.xplane.pb"
    path.parent.mkdir(parents=True)
    path.write_bytes(space.SerializeToString())


def _claiming(path: Path, batch_size: int) -> None:
    """The run's Keras step events made to carry another ``batch_size`` argument."""
    from tb_opcompare.ingest.readers.xplane_schema import XSpace

    (file,) = path.rglob("*.xplane.pb")
    space = XSpace()
    space.ParseFromString(file.read_bytes())
    changed = 0
    for plane in space.planes:
        ids = {entry.key for entry in plane.stat_metadata if entry.value.name == "batch_size"}
        for line in plane.lines:
            for event in line.events:
                for stat in event.stats:
                    if stat.metadata_id in ids:
                        field = stat.WhichOneof("value")
                        setattr(stat, field, batch_size)
                        changed += 1
    assert changed
    file.write_bytes(space.SerializeToString())


def test_batch_sizes_the_ops_time_contradicts_are_said_to_be(tmp_path):
    """Issue 51, point 3: a run whose fit() was given batch_size 48 on a dataset batched by 6
    read 8x the samples of its twin, while its ops took the same time a step. The measured
    work contradicts the claim, and Compare says so; sizes the data measured, or sizes whose
    ops' time grew with them, get no such note."""
    bs6 = FIXTURES / "versions" / "tf2.12" / "cnn_arrays_cpu_bs6"
    _argument_only(bs6, tmp_path / "said6")
    _argument_only(bs6, tmp_path / "said48")
    _claiming(tmp_path / "said48", 48)
    catalog = Catalog(str(tmp_path), cache_dir=None)
    summary = compare_document(catalog, "said6", "said48").summary
    assert (summary.baseline.batch_size, summary.target.batch_size) == (6, 48)
    (note,) = [note for note in summary.notes if "may have processed about the same batch" in note]
    assert "6 (argument) vs 48 (argument), 8x the samples a step" in note
    assert f"changed by {format_speedup(1 / summary.overall_speedup).rstrip('×')}x only" in note
    # twice the samples for real (6 vs 20, measured): the ops' time grew, and nothing is said
    versions = FIXTURES / "versions" / "tf2.12"
    measured = Catalog(str(versions), cache_dir=None)
    real = compare_document(measured, "cnn_arrays_cpu_bs6", "cnn_arrays_cpu_bs20").summary
    assert not [note for note in real.notes if "same batch" in note]


def test_a_batch_size_that_is_only_an_argument_gives_no_per_sample_headline(tmp_path):
    """Issue 51, point 3: fit()'s batch_size is an argument Keras ignores for a batched
    dataset (a run that processed 128 a step read 1024 and 9.80x per sample). Measured
    sizes give a per-sample headline; argument-only sizes compare whole steps, and a note
    says why and how to declare them."""
    versions = FIXTURES / "versions" / "tf2.12"
    for size, name in ((6, "small"), (20, "large")):  # names with no batch size: a name outranks an argument
        shutil.copytree(versions / f"cnn_arrays_cpu_bs{size}", tmp_path / "measured" / name)
        _argument_only(versions / f"cnn_arrays_cpu_bs{size}", tmp_path / "argument" / name)
    catalog = Catalog(str(tmp_path), cache_dir=None)
    measured = compare_document(catalog, "measured/small", "measured/large").summary
    argument = compare_document(catalog, "argument/small", "argument/large").summary
    assert argument.baseline.batch_size_source.startswith("argument: ")
    assert measured.headline_per_sample and not argument.headline_per_sample
    walls = (argument.baseline_step_wall_us, argument.target_step_wall_us)
    assert argument.headline_speedup == pytest.approx(walls[0] / walls[1], rel=1e-12)  # whole steps
    assert argument.per_sample_speedup is None and argument.op_time_basis == "per step"
    (note,) = [note for note in argument.notes if note.startswith("Batch sizes differ")]
    assert "6 (an argument) vs 20 (an argument)" in note and "compare whole steps, not samples" in note
    assert not any("Batch sizes differ" in note and "per sample" in note for note in argument.notes[1:])


def test_a_sweep_over_argument_only_sizes_says_they_are_unverified(tmp_path):
    """What Compare will not read per sample, the Batch sweep names: its samples/s and
    per-sample fits rest on sizes no measurement backs."""
    versions = FIXTURES / "versions" / "tf2.12"
    for size, name in ((6, "small"), (20, "large")):
        _argument_only(versions / f"cnn_arrays_cpu_bs{size}", tmp_path / "cnn" / name)
        (tmp_path / "cnn" / name / "opcompare.json").write_text('{"model": "cnn"}')  # one model, sizes not declared
    catalog = Catalog(str(tmp_path), cache_dir=None)
    document = sweep_document(catalog, "cnn")
    (warning,) = [warning for warning in document.warnings if warning.startswith("batch sizes that are only")]
    assert "cnn/small (6)" in warning and "cnn/large (20)" in warning


def test_allocations_leading_dimension_outranks_fits_argument():
    """Issue 51, point 3: TF 2.4 GPU runs said batch 1024 (fit()'s argument, on a dataset
    batched by 128) while their allocations carry 128 as the leading dimension of the
    activations ([128,32,30,30] convolution outputs): a measurement, which now wins; the
    argument is named in a warning where it disagrees, and confirms where it agrees."""
    import collections
    import types

    from tb_opcompare.ingest.readers.xplane import _settle_batch_size
    from tb_opcompare.schema.events import ProfileFacts

    shapes = {
        "[128,32,30,30]": {"sequential/conv2d/Relu"},
        "[128,64,13,13]": {"sequential/conv2d_1/Relu"},
        "[128,10]": {"sequential/dense_1/BiasAdd"},
        "[3,3,1,32]": {"Adam/update/mul"},  # an optimizer's: a parameter's shape, no vote
    }
    for argument, warned in ((1024, True), (128, False)):
        evidence = types.SimpleNamespace(
            first_shape=None,
            input_batches=collections.Counter(),
            step_batches=collections.Counter({argument: 21}),
            declared_batches=collections.Counter(),
            allocated_shapes=shapes,
        )
        facts = ProfileFacts(format="xplane")
        _settle_batch_size(facts, evidence)
        assert facts.batch_size == 128
        assert facts.batch_size_source.startswith("data: leading dimension of 3 of 3 tensor shapes")
        assert [warning for warning in facts.warnings if "1024" in warning] == (
            ["the batch_size of the Keras step event (fit()'s argument) is 1024, but the allocations' leading "
             "dimension gives 128; using 128"] if warned else []
        )  # fmt: skip
        assert facts.batch_size_source.endswith("agrees") is not warned


def test_xla_runs_of_two_batch_sizes_pair_their_ops_by_the_framework_op_they_compute(demo):
    """The demo's Keras XLA runs at batch 16 and 64, on one CPU: XLA numbers each program's
    instructions as it compiles it, so by those numbers the max-pools' argmax windows
    (made by XLA without metadata) paired the wrong way round: ``wrapped_reduce-window.1``
    read 331x faster on four times the samples. Named by their TF op, or by their users'
    where XLA made them without one, no matched op gets 16x faster per call (one call of
    an op cannot, with four times the work on the same CPU)."""
    base, target = "tf_keras/mnist_cnn_cpu_bs16_fp32_xla", "tf_keras/mnist_cnn_cpu_bs64_fp32_xla"
    document = compare_document(demo, base, target)
    matched = {row["key"]: row for row in document.rows if row["status"] == "matched"}
    assert len(matched) >= 60 and max(row["speedup"] for row in matched.values()) < 16
    # the argmax window and the fusions between it and the gradient's scatter, named by the scatter's TF op
    grad = "gradient_tape/sequential_1/max_pooling2d_1/MaxPool2d/MaxPoolGrad"
    for kind in ("wrapped_reduce-window", "concatenate_bitcast_fusion", "wrapped_iota", "wrapped_scatter"):
        assert matched[f"{grad}/{kind}"]["speedup"] < 1, kind  # four times the work
    assert not any(key.startswith("wrapped_reduce-window") for key in matched)


def test_xla_runs_of_two_batch_sizes_name_the_ops_that_keep_their_numbers(demo):
    """What stays numbered is what XLA made without metadata for users of several TF ops
    (a weight gradient that both of Adam's moments read, ``convolution.1``, and the
    transposes it reads): the note names those; rows by type, and runs compiled alike (an
    eager pair), do not get it."""
    base, target = "tf_keras/mnist_cnn_cpu_bs16_fp32_xla", "tf_keras/mnist_cnn_cpu_bs64_fp32_xla"
    document = compare_document(demo, base, target)
    (note,) = [line for line in document.summary.notes if "keeps the number XLA gave it" in line]
    instruction = re.compile(r"[a-z_-]+\.\d+")  # as XLA numbers them; TF's and XLA's ops named otherwise
    numbered = [row["key"] for row in document.rows if row["status"] == "matched" and instruction.fullmatch(row["key"])]
    assert "convolution.1" in numbered and f" {len(numbered)} matched ops ({', '.join(numbered[:3])} and" in note
    assert not any(
        "keeps the number" in line for line in compare_document(demo, base, target, group_by="type").summary.notes
    )
    eager = compare_document(demo, "tf_keras/mnist_cnn_cpu_bs16", "tf_keras/mnist_cnn_cpu_bs64")
    assert not any("keeps the number" in line for line in eager.summary.notes)


def test_jax_ops_named_by_their_framework_op_do_the_work_of_their_batch():
    """The JAX CPU fixtures at batch 8 and 32: paired by instruction number, ops' work per
    execution read 0.029x and 43,034x. Named by their JAX op, each matched op's work a
    step is a fixed part (weights, the optimizer) and a part proportional to the batch,
    so its ratio lies between 1 and 4; nearly all are exactly one or the other (a bias's
    update with its gradient's batch sum fused in is between)."""
    catalog = Catalog(str(FIXTURES / "flops" / "jax_cpu"))
    base, target = (catalog.load(run).profile.work_table.frame() for run in ("cnn_cpu_bs8", "cnn_cpu_bs32"))
    joined = base.merge(target, on=["op_name", "op_type"], suffixes=("_8", "_32"))
    joined = joined[(joined["flops_8"] > 0) & (joined["flops_32"] > 0)]
    ratios = joined["flops_32"] / joined["flops_8"]  # 4 steps profiled in each run
    assert len(ratios) >= 15 and ratios.between(1 - 1e-9, 4 + 1e-9).all()
    at_one_or_four = ratios.sub(4).abs().lt(0.01) | ratios.sub(1).abs().lt(0.01)
    assert at_one_or_four.mean() >= 0.9
