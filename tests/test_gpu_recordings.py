"""Real GPU recordings (tests/fixtures/gpu_h100): the demo CNN recorded by
``tb-opcompare record --repeats 3`` on one host with an H100, on its CPU and its GPU, at
batch 1, 16 and 64, fp32 and bf16 (autocast), memory profiling on; and one run with
Python stacks. What a user sees of them: every run read with the right device and batch
size, CPU->GPU pairs that keep repeats apart, GPU means per execution, and a GPU that wins
at batch 64 and loses at batch 1 on this small model."""

from __future__ import annotations

import json
import math
import re
import shutil
import statistics

import pytest
from conftest import FIXTURES, REPO, as_json, profiler_step_durations, run_cli, steady_median, steady_steps

from tb_opcompare.service.runs import runs_document
from tb_opcompare.service.sweep import sweeps_document
from tb_opcompare.store.catalog import Catalog

GPU_FIXTURES = FIXTURES / "gpu_h100"
DEMO = GPU_FIXTURES / "demo"
NAME = re.compile(r"mnist_cnn_torch(?P<bf16>_bf16)?_(?P<device>cpu|gpu)_bs(?P<batch>\d+)_rep(?P<repeat>\d)")


@pytest.fixture(scope="module")
def listing() -> dict:
    return json.loads(run_cli("runs", str(DEMO), "--json", "--no-cache").stdout)


def test_every_recording_is_read_with_its_device_batch_size_and_repeat(listing):
    assert listing["errors"] == [] and listing["notices"] == []
    assert len(listing["runs"]) == 36
    for run in listing["runs"]:
        named = NAME.fullmatch(run["run"]).groupdict()
        assert run["device"] == named["device"].upper() and not run["warnings"], run["run"]
        assert run["batch_size"] == int(named["batch"]) and run["batch_size_source"].startswith("data: ")
        assert run["repeat"] == int(named["repeat"]) and run["steps"] == 5
        # bf16 is a dimension of the run beside its model, not part of the model's name
        assert run["model"] == "mnist_cnn_torch" + (" [bf16]" if named["bf16"] else "")
        assert run["precision"] == ("bf16" if named["bf16"] else "fp32")
        if run["device"] == "GPU":
            assert run["device_name"] == "NVIDIA H100 80GB HBM3"


def test_cpu_and_gpu_runs_pair_within_one_repeat(listing):
    pairs = {(pair["baseline"], pair["target"]) for pair in listing["pairs"]}
    expected = {
        (f"mnist_cnn_torch{p}_cpu_bs{n}_rep{k}", f"mnist_cnn_torch{p}_gpu_bs{n}_rep{k}")
        for p in ("", "_bf16")
        for n in (1, 16, 64)
        for k in (1, 2, 3)
    }
    assert pairs == expected  # 18 pairs, not the 54 of every CPU repeat with every GPU repeat
    suggested = listing["suggested"]  # the largest batch size: at batch 1 this model measures launch overhead
    assert suggested["baseline"].endswith("_cpu_bs64_rep1") and suggested["target"].endswith("_gpu_bs64_rep1")
    assert "at the largest batch size (64)" in suggested["reason"]


def test_the_gpu_wins_at_batch_64_and_not_at_batch_1_in_every_repeat():
    for repeat in (1, 2, 3):
        speedups = {}
        for size in (1, 64):
            document = json.loads(
                run_cli(
                    "compare",
                    str(DEMO),
                    "--baseline",
                    f"mnist_cnn_torch_cpu_bs{size}_rep{repeat}",
                    "--target",
                    f"mnist_cnn_torch_gpu_bs{size}_rep{repeat}",
                    "--json",
                    "--no-cache",
                ).stdout
            )
            speedups[size] = document["summary"]["whole_step_speedup"]
        assert speedups[64] > 2 and speedups[1] < 1.5, speedups


def test_gpu_means_are_per_call_where_one_call_launches_several_kernels():
    catalog = Catalog(str(DEMO), cache_dir=None)
    ops = catalog.load("mnist_cnn_torch_gpu_bs64_rep1").profile.op_table.frame()
    host = ops[ops["side"] == "host"].set_index("op_name")
    device = ops[ops["side"] == "device"].set_index("op_name")
    several = device[device["kernels"] > device["occurrences"]]
    assert "aten::convolution_backward" in several.index
    # A device row counts the calls that launched kernels: aten::add_ also runs on the CPU
    # (Adam's step counters), and those calls are no GPU executions.
    assert (device["occurrences"] <= host.loc[device.index, "occurrences"]).all()
    assert device.loc["aten::add_", "occurrences"] < host.loc["aten::add_", "occurrences"]
    backward = device.loc["aten::convolution_backward"]
    assert backward["occurrences"] == host.loc["aten::convolution_backward", "occurrences"] == 10  # 2 convs x 5 steps
    assert backward["mean_us"] == pytest.approx(backward["total_us"] / 10)


def test_the_run_with_python_stacks_reads_like_the_others():
    document = json.loads(run_cli("runs", str(GPU_FIXTURES / "modules"), "--json", "--no-cache").stdout)
    (run,) = document["runs"]
    assert (run["device"], run["batch_size"], run["steps"], run["warnings"]) == ("GPU", 16, 5, [])


def test_the_demo_sweep_opens_on_the_model_swept_on_both_devices():
    document = as_json(sweeps_document(Catalog(str(REPO / "demo_logs"), cache_dir=None)))
    assert document["models"]["mnist_cnn"] == {"CPU": [1, 16, 64]}
    assert document["models"]["mnist_cnn_torch"] == {"CPU": [1, 16, 64], "GPU": [1, 16, 64]}
    # each precision and compiler of the matrix is its own sweep; fp32 eager on both devices first
    assert document["sweepable"][0] == "mnist_cnn_torch"
    assert document["models"]["mnist_cnn [bf16, XLA]"] == {"CPU": [1, 16, 64]}
    assert document["models"]["mnist_cnn_torch [bf16, torch.compile]"] == {"CPU": [1, 16, 64], "GPU": [1, 16, 64]}


ZOO = GPU_FIXTURES / "zoo"


def test_resnet18_on_the_h100_is_several_times_faster_per_step_than_on_its_host_cpu():
    for size, at_least in ((8, 2), (32, 5)):
        document = json.loads(
            run_cli(
                "compare",
                str(ZOO),
                "--baseline",
                f"resnet18_cpu_bs{size}",
                "--target",
                f"resnet18_gpu_bs{size}",
                "--json",
                "--no-cache",
            ).stdout
        )
        assert document["summary"]["whole_step_speedup"] > at_least, size


def test_torch_compile_runs_show_their_triton_kernels_per_call():
    """Inductor's generated kernels appear as host ops (``triton_*``) that launch one kernel
    each per step; its graph calls are annotations whose names carry a hash of the code, so
    the CPU and GPU graphs differ by name (compared at the level where both sides meet is
    still to come: issue 18)."""
    catalog = Catalog(str(ZOO), cache_dir=None)
    loaded = catalog.load("mnist_cnn_compiled_gpu_bs64")
    assert (loaded.profile.facts.batch_size, loaded.profile.facts.steps, loaded.profile.facts.warnings) == (64, 5, [])
    ops = loaded.profile.op_table.frame()
    triton = ops[(ops["side"] == "device") & ops["op_name"].str.startswith("triton_")]
    assert len(triton) >= 5
    assert (triton["occurrences"] == 5).all() and (triton["kernels"] == 5).all()
    host = set(ops.loc[ops["side"] == "host", "op_name"])
    assert {"Torch-Compiled Region: 0/0", "CompiledFunction", "CompiledFunctionBackward"} <= host
    assert any(re.fullmatch(r"## Call CompiledFxGraph \w+ ##", name) for name in host)


def test_kernels_launched_under_an_annotation_with_no_op_belong_to_it(tmp_path):
    """A fused optimizer launches its kernels from inside ``Optimizer.step#…`` with no aten
    op around the launch. Made from the real H100 trace by taking out the ops inside
    ``Optimizer.step#Adam.step`` (their launches stay): its kernels now belong to the
    annotation, per call, and nothing is reported as unlaunched."""
    import gzip

    (source,) = (DEMO / "mnist_cnn_torch_gpu_bs16_rep1").glob("*.pt.trace.json.gz")
    trace = json.loads(gzip.decompress(source.read_bytes()))
    events = trace["traceEvents"]
    steps = [e for e in events if e.get("cat") == "user_annotation" and e["name"] == "Optimizer.step#Adam.step"]

    def inside_a_step(event) -> bool:
        return event.get("cat") == "cpu_op" and any(
            event["tid"] == s["tid"] and s["ts"] <= event["ts"] and event["ts"] + event["dur"] <= s["ts"] + s["dur"]
            for s in steps
        )

    trace["traceEvents"] = [e for e in events if not inside_a_step(e)]
    run = tmp_path / "fused_gpu_bs16"
    run.mkdir()
    (run / "w.1.pt.trace.json").write_text(json.dumps(trace))
    original = Catalog(str(DEMO), cache_dir=None).load("mnist_cnn_torch_gpu_bs16_rep1").profile.op_table.frame()
    loaded = Catalog(str(tmp_path), cache_dir=None).load("fused_gpu_bs16")
    assert not loaded.profile.facts.warnings
    ops = loaded.profile.op_table.frame()
    (row,) = ops[(ops["side"] == "device") & (ops["op_name"] == "Optimizer.step#Adam.step")].itertuples()
    foreach = original[(original["side"] == "device") & original["op_name"].str.startswith("aten::_foreach_")]
    assert row.occurrences == 5 and row.kernels == foreach["kernels"].sum()
    assert row.total_us == pytest.approx(foreach["total_us"].sum())
    assert not ops["op_type"].str.contains("without a launching op").any()


T_975_TWO_DEGREES = 4.302652729911275  # Student's t, 97.5th percentile, 2 degrees of freedom (printed tables)


def test_the_sweep_pools_repeats_into_one_point_with_its_interval():
    """Three repeats a point: the median of the runs' steady steps pooled (the headline's
    rule, as the Matrix reads the same runs), and around it the runs' 95% interval from
    Student's t on the logs of each run's own step time, as the check and the trend pool."""
    document = json.loads(run_cli("sweep", str(DEMO), "--model", "mnist_cnn_torch", "--json", "--no-cache").stdout)
    assert not [w for w in document["warnings"] if "left out" in w]
    assert {(row["series"], row["batch_size"], row["repeats"]) for row in document["steps"]} == {
        (device, size, 3) for device in ("CPU", "GPU") for size in (1, 16, 64)
    }
    catalog = Catalog(str(DEMO), cache_dir=None)
    for row in document["steps"]:
        runs = row["run"].split(", ")
        assert runs == sorted(
            f"mnist_cnn_torch_{row['series'].lower()}_bs{row['batch_size']}_rep{k}" for k in (1, 2, 3)
        )
        durations = [profiler_step_durations(DEMO / run) for run in runs]
        logs = [math.log(steady_median(steps)) for steps in durations]
        margin = T_975_TWO_DEGREES * statistics.stdev(logs) / math.sqrt(3)
        center = statistics.median([step for steps in durations for step in steady_steps(steps)])
        assert row["step_us"] == pytest.approx(center, rel=1e-9)
        assert (row["step_low_us"], row["step_high_us"]) == (
            pytest.approx(center * math.exp(-margin), rel=1e-6),
            pytest.approx(center * math.exp(margin), rel=1e-6),
        )
    backward = [row for row in document["series"] if row["op"] == "aten::convolution_backward"]
    assert len(backward) == 6 and all(
        r["low_us"] <= r["mean_us"] <= r["high_us"] and r["repeats"] == 3 for r in backward
    )
    from tb_opcompare.service.figures import sweep_figures
    from tb_opcompare.service.sweep import sweep_document

    figures = sweep_figures(sweep_document(catalog, "mnist_cnn_torch"))
    step_trace = figures["step"]["data"][0]
    assert (
        len(step_trace["error_y"]["array"]) == 3
        and step_trace["customdata"][0] == " (3 runs pooled, bar: 95% interval)"
    )
    assert all("error_y" in trace for trace in figures["op_time"]["data"])


def test_resnet18_repeats_pair_one_to_one_and_show_why_one_pair_is_not_enough():
    """Three CPU and three GPU recordings of one configuration: each CPU repeat pairs with
    the GPU repeat of its number, the bf16 and Python-stack variants stay apart, and the
    whole-step speedup moves from pair to pair by more than a fifth (the case for
    confidence intervals over repeats)."""
    logdir = GPU_FIXTURES / "resnet18"
    listing = json.loads(run_cli("runs", str(logdir), "--json", "--no-cache").stdout)
    assert listing["errors"] == [] and len(listing["runs"]) == 8
    assert {(p["baseline"], p["target"]) for p in listing["pairs"]} == {
        (f"resnet18_cpu_bs32_rep{k}", f"resnet18_gpu_bs32_rep{k}") for k in (1, 2, 3)
    }
    models = {run["run"]: run["model"] for run in listing["runs"]}
    assert (
        models["resnet18_bf16_gpu_bs32"] == "resnet18 [bf16]" and models["resnet18_stack_gpu_bs32"] == "resnet18_stack"
    )
    speedups = [
        json.loads(
            run_cli(
                "compare",
                str(logdir),
                "--baseline",
                f"resnet18_cpu_bs32_rep{k}",
                "--target",
                f"resnet18_gpu_bs32_rep{k}",
                "--json",
                "--no-cache",
            ).stdout
        )["summary"]["whole_step_speedup"]
        for k in (1, 2, 3)
    ]
    assert min(speedups) > 3 and max(speedups) / min(speedups) > 1.2


def _per_step_cv(totals: list[float]) -> float:
    mean = sum(totals) / len(totals)
    return (sum((t - mean) ** 2 for t in totals) / len(totals)) ** 0.5 / mean


def test_each_op_says_how_steady_it_is_from_step_to_step():
    """Recomputed from the raw trace: a leaf op's durations summed per ProfilerStep range,
    and an op's kernels summed per step of their launch (by correlation id)."""
    import gzip

    def read(run: str) -> tuple[list, list]:
        (path,) = (DEMO / run).glob("*.pt.trace.json.gz")
        events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
        steps = sorted(
            (e["ts"], e["ts"] + e["dur"])
            for e in events
            if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")
        )
        assert len(steps) == 5
        return events, steps

    def step_of(steps: list, ts: float) -> int:
        return next(i for i, (start, end) in enumerate(steps) if start <= ts < end)

    catalog = Catalog(str(DEMO), cache_dir=None)
    events, steps = read("mnist_cnn_torch_cpu_bs64_rep1")
    spans = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")]
    by_thread = {}
    for e in spans:
        by_thread.setdefault(e["tid"], []).append(e)
    parents = {
        e["name"]
        for e in spans
        for inner in by_thread[e["tid"]]
        if inner is not e and e["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= e["ts"] + e["dur"]
    }
    leaves = {}  # ops that never hold another event: their self time is their duration
    for e in spans:
        if e.get("cat") == "cpu_op" and e["name"] not in parents:
            leaves.setdefault(e["name"], []).append(e)
    name, leaf = max(leaves.items(), key=lambda item: sum(e["dur"] for e in item[1]))
    host = [0.0] * 5
    for e in leaf:
        host[step_of(steps, e["ts"])] += e["dur"]
    ops = catalog.load("mnist_cnn_torch_cpu_bs64_rep1").profile.op_table.frame().set_index(["side", "op_name"])
    assert ops.loc[("host", name), "per_step_cv"] == pytest.approx(_per_step_cv(host), rel=1e-6)

    run = "mnist_cnn_torch_gpu_bs64_rep1"
    events, steps = read(run)
    ops = catalog.load(run).profile.op_table.frame().set_index(["side", "op_name"])
    cpu_ops = [e for e in events if e.get("cat") == "cpu_op"]
    launches, backward_launches = {}, set()
    for launch in (e for e in events if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})):
        launches[launch["args"]["correlation"]] = launch["ts"]
        around = [
            op
            for op in cpu_ops
            if op["tid"] == launch["tid"]
            and op["ts"] <= launch["ts"]
            and launch["ts"] + launch["dur"] <= op["ts"] + op["dur"]
        ]
        if around and min(around, key=lambda op: op["dur"])["name"] == "aten::convolution_backward":
            backward_launches.add(launch["args"]["correlation"])  # the innermost op launched it
    device = [0.0] * 5
    for e in events:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and e["args"].get("correlation") in backward_launches:
            device[step_of(steps, launches[e["args"]["correlation"]])] += e["dur"]
    assert sum(device) == pytest.approx(ops.loc[("device", "aten::convolution_backward"), "total_us"])
    assert ops.loc[("device", "aten::convolution_backward"), "per_step_cv"] == pytest.approx(
        _per_step_cv(device), rel=1e-6
    )
    # and in the comparison each side carries it
    row = next(
        r
        for r in json.loads(
            run_cli(
                "compare",
                str(DEMO),
                "--baseline",
                "mnist_cnn_torch_cpu_bs64_rep1",
                "--target",
                run,
                "--json",
                "--no-cache",
            ).stdout
        )["rows"]
        if r["key"] == "aten::convolution_backward"
    )
    assert row["target_per_step_cv"] == pytest.approx(_per_step_cv(device), rel=1e-6)
    assert row["baseline_per_step_cv"] is not None


def test_repeats_on_two_accelerator_models_are_two_repeat_groups(tmp_path):
    """The demo CNN's three GPU repeats at batch 16 on an H100 and three on an H200, in one
    logdir: one model, but each card's repeats are their own group (before, the six
    pooled as one configuration's repeats in `runs`, Compare's pooling and the check)."""
    for card in ("gpu_h100", "gpu_h200"):
        for repeat in (1, 2, 3):
            name = f"mnist_cnn_torch_gpu_bs16_rep{repeat}"
            shutil.copytree(FIXTURES / card / "demo" / name, tmp_path / card / name)
    runs = runs_document(Catalog(str(tmp_path), cache_dir=None)).runs
    assert len(runs) == 6 and len({run.model for run in runs}) == 1
    assert [run.repeat_runs for run in runs] == [3] * 6
    from tb_opcompare.store.run_groups import expand_runs

    catalog = Catalog(str(tmp_path), cache_dir=None)
    for card in ("gpu_h100", "gpu_h200"):
        assert expand_runs(catalog, [f"{card}/mnist_cnn_torch_gpu_bs16_rep1"], repeats=True) == [
            f"{card}/mnist_cnn_torch_gpu_bs16_rep{k}" for k in (1, 2, 3)
        ]


def test_repeats_named_after_two_accelerators_are_two_repeat_groups(tmp_path):
    """Without sidecars the name says the card: `bert_h100_rep1/2` and `bert_a100_rep1/2`
    are one model (hardware words are not model words) but two repeat groups."""
    from tb_opcompare.store.run_groups import expand_runs

    source = FIXTURES / "user_logdirs" / "torch_h200"
    for name, run in (
        ("bert_h100_rep1", "lstm_runA"),
        ("bert_h100_rep2", "lstm_runB"),
        ("bert_a100_rep1", "lstm_runC"),
        ("bert_a100_rep2", "lstm_runD"),
    ):
        shutil.copytree(source / run, tmp_path / name)
    catalog = Catalog(str(tmp_path), cache_dir=None)
    assert expand_runs(catalog, ["bert_h100_rep1"], repeats=True) == ["bert_h100_rep1", "bert_h100_rep2"]
    assert expand_runs(catalog, ["bert_a100_rep2"], repeats=True) == ["bert_a100_rep1", "bert_a100_rep2"]
