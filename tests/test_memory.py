"""Memory per op (issue 17): what each op itself allocated, on real recordings with
memory profiling on (PyTorch `profile_memory=True`; TF's allocation events)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO, run_cli

from tb_opcompare.store.catalog import Catalog
from tb_opcompare.text import format_bytes

DEMO = REPO / "demo_logs"
H100 = FIXTURES / "gpu_h100" / "demo"


@pytest.fixture(scope="module")
def demo():
    return Catalog(str(DEMO), cache_dir=None)


def _host(catalog: Catalog, run: str):
    ops = catalog.load(run).profile.op_table.frame()
    return ops[ops["side"] == "host"].set_index("op_name")


def _per_execution(ops, op: str) -> float:
    return ops.loc[op, "alloc_bytes"] / ops.loc[op, "occurrences"]


def test_activations_grow_with_the_batch_and_parameters_do_not(demo):
    """Batch 16 to 64 on the demo CNN: an activation is 4x larger, Adam's square root of
    each parameter's second moment keeps the parameters' size."""
    small, large = _host(demo, "torch/mnist_cnn_torch_cpu_bs16"), _host(demo, "torch/mnist_cnn_torch_cpu_bs64")
    for activation in ("aten::max_pool2d_with_indices", "aten::clamp_min", "aten::threshold_backward"):
        assert _per_execution(large, activation) == pytest.approx(4 * _per_execution(small, activation), rel=0.01)
    assert _per_execution(large, "aten::sqrt") == _per_execution(small, "aten::sqrt") > 0
    tf_small, tf_large = (_host(demo, f"tf_keras/mnist_cnn_cpu_bs{n}") for n in (16, 64))
    pool_grad = next(name for name in tf_large.index if name.endswith("MaxPool2d/MaxPoolGrad"))
    assert _per_execution(tf_large, pool_grad) == pytest.approx(4 * _per_execution(tf_small, pool_grad), rel=0.01)
    assert tf_large["net_bytes"].isna().all()  # TF's frees name no op


def _self_memory_from_the_raw_trace(run_dir: Path) -> dict[str, tuple[int, int]]:
    """Each op's (allocated, net) bytes recomputed from the trace file: every [memory]
    event goes to the shortest complete event around it on its thread, ends included
    (ProfilerStep#N ranges are not ops)."""
    (path,) = run_dir.glob("*.pt.trace.json.gz")
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    spans = {}
    for event in events:
        if (
            event.get("ph") == "X"
            and event.get("cat") in ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver")
            and not event["name"].startswith("ProfilerStep#")
        ):
            spans.setdefault((event["pid"], event["tid"]), []).append(event)
    totals: dict[str, list[int]] = {}
    for memory in (e for e in events if e.get("name") == "[memory]"):
        around = [
            e for e in spans.get((memory["pid"], memory["tid"]), ()) if e["ts"] <= memory["ts"] <= e["ts"] + e["dur"]
        ]  # key_averages counts an op's end as its
        if around:
            owner = min(around, key=lambda e: e["dur"])["name"]
            size = memory["args"]["Bytes"]
            allocated, net = totals.setdefault(owner, [0, 0])
            totals[owner] = [allocated + max(size, 0), net + size]
    return {name: (allocated, net) for name, (allocated, net) in totals.items()}


@pytest.mark.parametrize("run", ["mnist_cnn_torch_cpu_bs16_rep1", "mnist_cnn_torch_gpu_bs16_rep1"])
def test_each_ops_own_memory_agrees_with_the_raw_trace(run):
    expected = _self_memory_from_the_raw_trace(H100 / run)
    assert sum(allocated for allocated, _ in expected.values()) > 1_000_000
    ops = _host(Catalog(str(H100), cache_dir=None), run)
    for name, (allocated, net) in expected.items():
        assert ops.loc[name, "alloc_bytes"] == allocated, name
        assert ops.loc[name, "net_bytes"] == net, name
    # an op that allocated nothing says 0, not "unknown"
    assert (ops["alloc_bytes"].fillna(-1) >= 0).all()


def test_compare_shows_memory_per_side_and_each_runs_peak(demo):
    result = run_cli(
        "compare",
        str(DEMO),
        "--no-cache",
        "--baseline",
        "torch/mnist_cnn_torch_cpu_bs64",
        "--target",
        "torch/mnist_cnn_torch_gpu_bs64",
        "--json",
    )
    document = json.loads(result.stdout)
    pool = next(row for row in document["rows"] if row["key"] == "aten::max_pool2d_with_indices")
    # the same activation, in CPU memory on one side and GPU memory on the other
    assert pool["baseline_alloc_bytes_per_execution"] == pool["target_alloc_bytes_per_execution"] > 1_000_000
    target_peaks = document["summary"]["target"]["peak_memory_bytes"]
    assert target_peaks["GPU:0"] > 10 * 2**20 and document["summary"]["baseline"]["peak_memory_bytes"]["CPU"] > 0
    text = run_cli(
        "compare",
        str(DEMO),
        "--no-cache",
        "--baseline",
        "torch/mnist_cnn_torch_cpu_bs64",
        "--target",
        "torch/mnist_cnn_torch_gpu_bs64",
        "--memory",
        "--top",
        "3",
    ).stdout
    peaks = ", ".join(f"{device} {format_bytes(size)}" for device, size in target_peaks.items())
    assert f"peak memory, target: {peaks}" in text.splitlines()
    assert any(
        line.split()[:4] == ["speedup", "base", "mean", "target"] and "base alloc/call" in line
        for line in text.splitlines()
    )


MEMORY = FIXTURES / "memory"


@pytest.mark.parametrize("batch", [8, 32])
def test_self_memory_agrees_with_key_averages_taken_in_the_recording_process(batch):
    oracle = json.loads((MEMORY / "oracles" / f"torch_cnn_cpu_bs{batch}.key_averages.json").read_text())
    ops = _host(Catalog(str(MEMORY / "logdir"), cache_dir=None), f"torch_cnn_cpu_bs{batch}")
    checked = 0
    for entry in oracle["key_averages"]:
        if entry["key"].startswith("ProfilerStep"):
            continue  # a step range, not a row
        assert ops.loc[entry["key"], "net_bytes"] == entry["self_cpu_memory_usage"], entry["key"]
        checked += entry["self_cpu_memory_usage"] != 0
    assert checked > 20


@pytest.mark.parametrize("batch", [8, 32])
def test_tf_allocations_and_peak_agree_with_xprofs_memory_profile(batch):
    """xprof's memory_profile tool, run on a copy of the same xplane when it was recorded."""
    oracle = json.loads((MEMORY / "oracles" / f"tf_cnn_cpu_bs{batch}.memory_profile.json").read_text())
    allocator = oracle["memoryProfilePerAllocator"]["mklcpu"]
    requested: dict[str, int] = {}
    for snapshot in allocator["sampledTimelineSnapshots"]:
        activity = snapshot["activityMetadata"]
        if activity["memoryActivity"] == "ALLOCATION" and activity.get("tfOpName"):
            requested[activity["tfOpName"]] = requested.get(activity["tfOpName"], 0) + int(activity["requestedBytes"])
    profile = Catalog(str(MEMORY / "logdir"), cache_dir=None).load(f"tf_cnn_cpu_bs{batch}/train").profile
    ops = profile.op_table.frame()[profile.op_table.frame()["side"] == "host"].set_index("op_name")
    assert len(requested) >= 3
    for name, size in requested.items():
        assert ops.loc[name, "alloc_bytes"] == size, name
    assert ops["alloc_bytes"].sum() == sum(requested.values())
    # the highest memory in use during the profile, as xprof's memory profile finds it
    assert profile.facts.peak_memory_bytes["mklcpu"] == int(
        allocator["profileSummary"]["peakStats"]["heapAllocatedBytes"]
    )


def test_peaks_on_public_traces_name_the_gpu_and_never_invent_a_zero():
    """The MI300X trace (ROCm reports its GPU as device type 6, HIP) has its GPU peak under
    `GPU:0` as CUDA's does; the 2021 V100 trace's memory events carry no "Total Allocated",
    so it has no peak to tell rather than a peak of 0 bytes."""
    from conftest import REALTRACES

    catalog = Catalog(str(REALTRACES), cache_dir=None)
    for run in ("torch_bert_small_h100_vs_mi300/h100", "torch_bert_small_h100_vs_mi300/mi300"):
        peaks = catalog.load(run).profile.facts.peak_memory_bytes
        assert set(peaks) == {"CPU", "GPU:0"} and peaks["GPU:0"] > 2**20, (run, peaks)
    resnet = catalog.load("torch_resnet50_v100").profile
    assert resnet.facts.peak_memory_bytes == {}
    assert resnet.op_table.frame()["alloc_bytes"].sum() > 0  # its allocations are still counted per op


TF1_MEMORY = FIXTURES / "tf1_memory"


def _step_stats_bytes(run: str) -> dict[str, int]:
    """TF's own record of the traced step (saved beside the timeline by the recording):
    the bytes each node's output tensors asked for."""
    from tensorflow.core.framework import step_stats_pb2

    stats = step_stats_pb2.StepStats.FromString((TF1_MEMORY / "oracles" / f"{run}.step_stats.pb").read_bytes())
    requested: dict[str, int] = {}
    for device in stats.dev_stats:
        for node in device.node_stats:
            size = sum(output.tensor_description.allocation_description.requested_bytes for output in node.output)
            if size:
                requested[node.node_name] = requested.get(node.node_name, 0) + size
    return requested


@pytest.mark.parametrize("run", ["mlp_cpu_bs32", "mlp_cpu_bs128"])
def test_tf1_timeline_memory_agrees_with_tensorflows_step_stats(run):
    """A TF1 timeline written with show_memory=True: each op's allocated bytes equal its
    output tensors' requested bytes in the step's StepStats, and the peak per allocator
    equals the highest of the timeline's own Memory counters."""
    profile = Catalog(str(TF1_MEMORY / "logdir"), cache_dir=None).load(run).profile
    host = profile.op_table.frame()[profile.op_table.frame()["side"] == "host"]
    allocated = dict(zip(host["op_name"], host["alloc_bytes"]))
    requested = _step_stats_bytes(run)
    assert len(requested) > 20
    assert {name: allocated[name] for name in requested} == pytest.approx(requested, rel=0, abs=0)
    assert all(allocated[name] == 0 for name in allocated if name not in requested)
    raw = json.loads((TF1_MEMORY / "logdir" / run / "timeline.json").read_text())["traceEvents"]
    counters = [event for event in raw if event["ph"] == "C" and event["cat"] == "Memory"]
    peaks: dict[str, int] = {}
    for event in counters:
        peaks[event["name"]] = max(peaks.get(event["name"], 0), event["args"][event["name"]])
    assert profile.facts.peak_memory_bytes == peaks and profile.facts.memory_events == len(counters)
    timeline = profile.memory_table.frame()
    assert set(timeline["device"]) == set(peaks) and timeline["bytes_in_use"].max() == max(peaks.values())


def test_tf1_timeline_activations_grow_with_the_batch_and_weights_do_not():
    catalog = Catalog(str(TF1_MEMORY / "logdir"), cache_dir=None)
    small, large = _host(catalog, "mlp_cpu_bs32"), _host(catalog, "mlp_cpu_bs128")
    for activation in ("hidden", "gradients/hidden_grad/ReluGrad", "_arg_images_0_0"):
        assert _per_execution(large, activation) == 4 * _per_execution(small, activation) > 0
    for weight in ("hidden_matmul/ReadVariableOp", "gradients/hidden_matmul_grad/MatMul_1"):
        assert _per_execution(large, weight) == _per_execution(small, weight) == 784 * 256 * 4


def test_tf1_timeline_batch_size_and_precision_come_from_its_tensors():
    from tb_opcompare.ingest.formats import read_profile

    for size in (32, 128):
        facts = read_profile("chrome_trace", [str(TF1_MEMORY / "logdir" / f"mlp_cpu_bs{size}" / "timeline.json")]).facts
        assert facts.batch_size == size and facts.batch_size_source.startswith("data: leading dimension")
        assert facts.precision == "fp32" and "tensors the ops produced" in facts.precision_source


def test_tf1_timeline_numbers_past_int64_are_left_out_not_a_traceback(tmp_path):
    """A hostile timeline: a tensor that asks for 400 digits of bytes and shapes with
    dimensions of 10**30 and 5,000 digits read as no allocation and no batch size."""
    from tb_opcompare.ingest.formats import read_profile

    events = json.loads((TF1_MEMORY / "logdir" / "mlp_cpu_bs32" / "timeline.json").read_text())
    tensors = [event for event in events["traceEvents"] if event["ph"] == "O"]
    huge = (
        "dtype: DT_FLOAT\nshape {\n  dim {\n    size: %s\n  }\n  dim {\n    size: 7\n  }\n}\n"
        "allocation_description {\n  requested_bytes: %s\n  allocator_name: mklcpu\n}\n"
    )
    for event, (dim, size) in zip(tensors, [("1" + "0" * 30, "9" * 400), ("1" + "0" * 30, "4"), ("7" * 5000, "4")]):
        event["args"]["snapshot"]["tensor_description"] = huge % (dim, size)
    path = tmp_path / "timeline.json"
    path.write_text(json.dumps(events))
    profile = read_profile("chrome_trace", [str(path)])
    host = profile.op_table.frame()[profile.op_table.frame()["side"] == "host"].set_index("op_name")
    assert host.loc[tensors[0]["name"], "alloc_bytes"] == 0  # the 400 digits are no size
    assert host.loc[tensors[1]["name"], "alloc_bytes"] == 4
    assert profile.facts.batch_size == 32  # the real tensors still vote; 10**30 does not
