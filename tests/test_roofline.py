"""The roofline (issue 54): device limits from the profile, the table and the sidecar; each
op's achieved rate against its device's roof on real recordings, where none may pass its
device's peak; and the document as the route, the CLI and the CSV give it."""

from __future__ import annotations

import csv
import glob
import io
import json
import math
import shutil

import msgspec
import pandas as pd
import pytest
from conftest import FIXTURES, REALTRACES, run_cli
from in_process import PREFIX, plugin_client

from tb_opcompare.analysis import roofline
from tb_opcompare.analysis.device_limits import DEVICES, device_limits, from_sidecar, from_table
from tb_opcompare.ingest.formats import read_profile
from tb_opcompare.schema.contract import ROOFLINE_COLUMNS, RooflineDocument
from tb_opcompare.service.roofline import roofline_document
from tb_opcompare.store.catalog import Catalog

H100_DEMO = FIXTURES / "gpu_h100" / "demo"
FLOPS_RUN = FIXTURES / "flops" / "logdir" / "cnn_torch_cpu_bs8"


@pytest.mark.parametrize(
    "name, model",
    [
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM"),  # gpu_h100's deviceProperties
        ("NVIDIA H200", "NVIDIA H200 SXM"),  # gpu_h200's, jax_h200's device plane
        ("Tesla V100-DGXS-32GB", "NVIDIA V100 SXM2"),  # kineto's ResNet-50 samples
        ("AMD Instinct MI300X VF", "AMD Instinct MI300X"),  # TraceLens's bert-small
        ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB SXM"),
        ("Quadro RTX 5000", "NVIDIA Quadro RTX 5000"),
    ],
)
def test_the_table_knows_the_accelerators_of_the_recordings(name, model):
    limits = from_table(name)
    assert limits.device == model and limits.source.startswith("https://")
    assert limits.memory_bandwidth > 1e11 and limits.peak_flops["fp32"] > 1e12
    assert from_table("AMD Radeon Graphics") is None  # HTA's MI250 trace names no model: unknown, not guessed


def test_every_table_entry_names_its_source_and_is_dense():
    for _, limits in DEVICES:
        assert limits.source.startswith("https://")
        # tensor-core peaks at least the vector fp32 peak: no entry swapped or sparse-halved the wrong way
        assert all(
            limits.peak_flops[name] >= limits.peak_flops["fp32"]
            for name in ("bf16", "fp16")
            if name in limits.peak_flops
        )


def test_an_xplane_device_plane_gives_its_own_limits():
    (path,) = glob.glob(str(FIXTURES / "jax_h200" / "cnn_gpu_bs32_rep3" / "plugins" / "profile" / "*" / "*.xplane.pb"))
    facts = read_profile("xplane", [path]).facts
    assert facts.device_properties["compute_capability"] == "9.0"
    limits = device_limits(facts.device_name, facts.device_properties, None)
    assert limits.source.startswith("the profile's device plane")
    # clock x SMs x FLOPs per SM per clock lands on the datasheet's figures
    datasheet = from_table("NVIDIA H200")
    assert limits.peak_flops["fp32"] == pytest.approx(datasheet.peak_flops["fp32"], rel=0.01)
    assert limits.memory_bandwidth == pytest.approx(datasheet.memory_bandwidth, rel=0.01)
    # the profile's bf16 figure is at its top clock, above the datasheet's: a roof, never below it
    assert limits.peak_flops["bf16"] >= datasheet.peak_flops["bf16"]


def test_the_sidecar_overrides_and_bad_values_are_ignored():
    assert from_sidecar({"peak_flops": {"float32": 2e12, "bf16": -1, "fp16": "x"}}).peak_flops == {"fp32": 2e12}
    assert from_sidecar({"peak_flops": {"fp32": True}}) is None
    given = device_limits("NVIDIA H100 80GB HBM3", {}, {"memory_bandwidth": 1e12, "source": "measured"})
    assert given.memory_bandwidth == 1e12 and given.peak_flops["fp32"] == 67e12  # the peaks stay the table's
    assert "sidecar" in given.source and "nvidia" in given.source


# This project's 2-core Xeon (Cascade Lake, AVX-512 with two FMA units: 64 fp32 FLOPs a
# cycle a core) at its highest turbo, 4.0 GHz: more than the machine can do, so a bound.
CPU_PEAK = 2 * 4.0e9 * 64


def test_a_cpu_run_gets_its_roof_from_its_sidecar(tmp_path):
    run = tmp_path / "cnn_cpu_bs8"
    shutil.copytree(FLOPS_RUN, run)
    limits = {"device_limits": {"peak_flops": {"fp32": CPU_PEAK}, "memory_bandwidth": 20e9, "source": "lscpu"}}
    (run / "opcompare.json").write_text(json.dumps(limits))
    document = roofline_document(Catalog(str(tmp_path)), run.name, run.name)
    (host,) = document.baseline.limits
    assert (host.processor, host.peak_flops, host.precision) == ("host", CPU_PEAK, "fp32")
    rows = {row["op_name"]: row for row in document.rows}
    conv = rows["aten::conv2d"]
    assert conv["baseline_timed_on"] == "host" and 0 < conv["baseline_fraction_of_roof"] <= 1
    roof = min(CPU_PEAK, conv["baseline_intensity"] * 20e9)
    assert conv["baseline_roof_flops_per_s"] == pytest.approx(roof)
    assert conv["baseline_fraction_of_roof"] == pytest.approx(conv["baseline_flops_per_s"] / roof)
    assert conv["baseline_bound"] == ("compute" if conv["baseline_intensity"] >= CPU_PEAK / 20e9 else "memory")
    assert conv["baseline_time_at_roof_us"] == pytest.approx(conv["baseline_flops"] / roof * 1e6)
    assert conv["speedup"] == pytest.approx(1.0) and conv["change"] == roofline.MOVED
    assert all((row["baseline_flops_per_s"] or 0) <= CPU_PEAK for row in document.rows)


def test_a_cpu_run_without_limits_says_how_to_give_them():
    document = roofline_document(Catalog(str(FLOPS_RUN.parent)), FLOPS_RUN.name, FLOPS_RUN.name)
    assert document.baseline.limits[0].peak_flops is None
    assert any("device_limits" in note and "opcompare.json" in note for note in document.notes)
    assert all(row["baseline_fraction_of_roof"] is None for row in document.rows)


PAIRS = [
    *[
        (H100_DEMO, f"mnist_cnn_torch_{p}cpu_bs{bs}_rep1", f"mnist_cnn_torch_{p}gpu_bs{bs}_rep1")
        for p in ("", "bf16_")
        for bs in (1, 16, 64)
    ],
    (REALTRACES / "torch_bert_small_h100_vs_mi300", "h100", "mi300"),
]


@pytest.mark.parametrize("logdir, baseline, target", PAIRS, ids=lambda value: str(value)[-30:])
def test_no_op_passes_its_devices_peak(logdir, baseline, target):
    document = roofline_document(Catalog(str(logdir)), baseline, target)
    placed = 0
    for side in ("baseline", "target"):
        limits = {limits.processor: limits for limits in getattr(document, side).limits}
        for row in document.rows:
            if row[f"{side}_timed_on"] != "device":
                continue
            device = limits["device"]
            assert row[f"{side}_flops_per_s"] <= device.peak_flops, row["op_name"]
            assert row[f"{side}_bytes_per_s"] <= device.memory_bandwidth, row["op_name"]
            assert row[f"{side}_suspect"] is None and 0 < row[f"{side}_fraction_of_roof"] <= 1
            placed += 1
    assert placed >= 5


def test_a_rate_past_the_roof_is_named_not_plotted():
    # PyTorch 1.9 records no strides: a division of an expanded gradient (stride 0) reads
    # 3.2 M elements by its shape and far fewer in memory, so its rate passes the V100's bandwidth
    logdir = REALTRACES / "torch_resnet50_v100_logdir"
    document = roofline_document(Catalog(str(logdir)), "resnet50_num_workers_0", "resnet50_num_workers_4")
    (row,) = [row for row in document.rows if row["baseline_suspect"]]
    assert row["op_name"] == "aten::div" and "memory bandwidth" in row["baseline_suspect"]
    assert row["baseline_fraction_of_roof"] is None
    assert any(
        note.startswith("resnet50_num_workers_0: aten::div is not placed on the roof") for note in document.notes
    )
    # and PyTorch 1.9's convolutions, which record no stride or padding, are unknown and say why
    assert any("stride and padding" in note for note in document.notes)


def test_what_the_change_did():
    def side(fraction: float) -> pd.DataFrame:
        return pd.DataFrame(
            {"time_us": [10.0], "known_calls": [1], "flops": [1e6], "share": [1.0], "fraction_of_roof": [fraction]},
            index=pd.Index(["op"], name="op_name"),
        )

    def change(before: float, after: float) -> str:
        return roofline.roofline_rows(side(before), side(after))["change"][0]

    assert change(0.08, 0.09) == roofline.MOVED
    assert change(0.08, 0.5) == roofline.CLOSED
    assert change(0.5, 0.08) == roofline.WIDENED


@pytest.fixture(scope="module")
def client():
    return plugin_client(H100_DEMO)


def test_route_cli_and_csv_agree(client):
    baseline, target = "mnist_cnn_torch_cpu_bs64_rep1", "mnist_cnn_torch_gpu_bs64_rep1"
    response = client.get(f"{PREFIX}/roofline", query_string={"baseline": baseline, "target": target})
    assert response.status_code == 200
    document = msgspec.json.decode(response.get_data(), type=RooflineDocument, strict=True)
    assert document.columns == ROOFLINE_COLUMNS
    served = json.loads(response.get_data())
    cli = run_cli("roofline", str(H100_DEMO), "--baseline", baseline, "--target", target, "--json", "--no-cache")
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout) == served
    conv = next(row for row in served["rows"] if row["op_name"] == "aten::conv2d")
    assert conv["target_timed_on"] == "device" and conv["speedup"] > 10
    assert conv["work_ratio"] == pytest.approx(1.0)  # one model, one batch size: the same work a call
    csv_text = client.get(f"{PREFIX}/roofline.csv", query_string={"baseline": baseline, "target": target}).get_data()
    lines = list(csv.DictReader(io.StringIO(csv_text.decode())))
    assert [line["op_name"] for line in lines] == [row["op_name"] for row in served["rows"]]
    assert math.isclose(float(lines[0]["speedup"]), served["rows"][0]["speedup"])
    text = run_cli("roofline", str(H100_DEMO), "--baseline", baseline, "--target", target, "--no-cache").stdout
    assert "NVIDIA H100 SXM" in text and "aten::conv2d" in text


def test_a_format_without_flops_or_shapes_says_so():
    # Keras's xplane: TF host ops carry neither FLOPs nor input shapes this version reads
    logdir = FIXTURES / "logdir" / "tf_keras"
    document = roofline_document(Catalog(str(logdir)), "cnn_cpu_bs2/train", "cnn_cpu_bs8/train")
    assert document.rows == []
    assert document.notes == [
        f"{run}: no op's work is known: its format (xplane) carries neither FLOPs nor input shapes this version reads."
        for run in ("cnn_cpu_bs2/train", "cnn_cpu_bs8/train")
    ]


GPU_LOGDIRS = [
    FIXTURES / "gpu_h100" / "zoo",
    FIXTURES / "gpu_h100" / "resnet18",
    FIXTURES / "versions" / "torch2.11_h100",
    FIXTURES / "gpu_h200",
    FIXTURES / "user_logdirs" / "torch_h200",
    FIXTURES / "jax_h200",  # XLA's ops, their work from the programs the profiles carry
]


def _ops_on_tf32(logdir, run: str) -> set[str]:
    """From a PyTorch run's raw trace: the ops around any launch of a kernel named for TF32
    tensor cores (``tf32`` in its name), joined by the launch's correlation id (none for
    other formats)."""
    import gzip

    traces = glob.glob(str(logdir / run / "*.pt.trace.json*"))
    if not traces:
        return set()
    data = open(traces[0], "rb").read()
    events = json.loads(gzip.decompress(data) if traces[0].endswith(".gz") else data)["traceEvents"]
    tf32 = {e["args"].get("correlation") for e in events if e.get("cat") == "kernel" and "tf32" in e["name"].lower()}
    launches = [e for e in events if e.get("cat") == "cuda_runtime" and e.get("args", {}).get("correlation") in tf32]
    ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("ph") == "X"]
    return {
        op["name"]
        for launch in launches
        for op in ops
        if op["tid"] == launch["tid"] and op["ts"] <= launch["ts"] <= op["ts"] + op["dur"]
    }


@pytest.mark.parametrize("logdir", GPU_LOGDIRS, ids=lambda path: "/".join(path.parts[-2:]))
def test_no_op_of_any_gpu_recording_at_hand_passes_its_devices_peak(logdir):
    catalog = Catalog(str(logdir))
    placed = 0
    for source in catalog.sources():
        document = roofline_document(catalog, source.run, source.run)
        device = next((limits for limits in document.baseline.limits if limits.processor == "device"), None)
        tf32_peak = device.peak_flops_by_precision.get("tf32") if device else None
        tf32_ops = _ops_on_tf32(logdir, source.run) if tf32_peak and device.precision == "fp32" else set()
        for row in document.rows:
            if row["baseline_timed_on"] == "device":
                assert row["baseline_suspect"] is None, (source.run, row["op_name"], row["baseline_suspect"])
                # an fp32 op on TF32 tensor cores is under the TF32 peak; any other under the run's
                peak = tf32_peak if row["op_name"] in tf32_ops else device.peak_flops
                assert row["baseline_flops_per_s"] <= peak
                assert row["baseline_bytes_per_s"] <= device.memory_bandwidth
                placed += 1
    assert placed >= 10


def test_the_python_api_answers_the_routes_document(client):
    from tb_opcompare import open_logdir

    baseline, target = "mnist_cnn_torch_cpu_bs16_rep1", "mnist_cnn_torch_gpu_bs16_rep1"
    served = client.get(f"{PREFIX}/roofline", query_string={"baseline": baseline, "target": target}).get_data()
    document = open_logdir(str(H100_DEMO), cache_dir="none").roofline(baseline, target)
    assert msgspec.json.encode(document) == served
    frame = document.to_pandas()
    assert list(frame.columns) == ROOFLINE_COLUMNS and len(frame) == len(document.rows)


H200_STACKS = FIXTURES / "gpu_h200" / "stacks"  # the demo CNN on one host's CPU and H200, with_flops and stacks


def _raw_events(run) -> list[dict]:
    (trace,) = (H200_STACKS / run).glob("*.pt.trace.json.gz")
    import gzip

    return json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]


def _outermost(events: list[dict], name: str) -> list[dict]:
    calls = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op" and e["name"] == name]
    return [
        call
        for call in calls
        if not any(
            other is not call
            and other["tid"] == call["tid"]
            and other["ts"] <= call["ts"] <= call["ts"] + call["dur"] <= other["ts"] + other["dur"]
            for other in calls
        )
    ]


def test_why_a_convolution_sped_up_on_an_h200_from_the_raw_events():
    """The demo CNN at batch 64 on one host's CPU and its H200: aten::conv2d's work on both
    sides is the formula's, from each call's own shapes; its time on the CPU is its calls' and
    on the GPU the kernels its calls launched (joined by the launch's correlation id); the
    rates, the speedup per call and the roof follow from those, as the roofline gives them."""
    from test_op_work import conv2d_flops

    baseline, target = "mnist_cnn_torch_stack_cpu_bs64_rep1", "mnist_cnn_torch_stack_gpu_bs64_rep1"
    document = roofline_document(Catalog(str(H200_STACKS), cache_dir=None), baseline, target)
    (row,) = [row for row in document.rows if row["op_name"] == "aten::conv2d"]
    oracle = {}
    for side, run in (("baseline", baseline), ("target", target)):
        events = _raw_events(run)
        calls = _outermost(events, "aten::conv2d")
        flops = sum(conv2d_flops(call["args"]) for call in calls)
        if side == "baseline":
            seconds = sum(call["dur"] for call in calls) / 1e6
        else:
            launches = {
                e["args"]["correlation"]
                for e in events
                if e.get("cat") == "cuda_runtime"
                and any(c["tid"] == e["tid"] and c["ts"] <= e["ts"] <= c["ts"] + c["dur"] for c in calls)
            }
            kernels = [e for e in events if e.get("cat") == "kernel" and e["args"].get("correlation") in launches]
            assert kernels, "no kernel launched from aten::conv2d"
            seconds = sum(kernel["dur"] for kernel in kernels) / 1e6
        oracle[side] = (len(calls), flops, seconds)
        assert row[f"{side}_calls"] == len(calls) and row[f"{side}_known_calls"] == len(calls)
        assert row[f"{side}_flops"] == pytest.approx(flops, rel=1e-9)
        assert row[f"{side}_flops_per_s"] == pytest.approx(flops / seconds, rel=1e-3), side
    assert row["baseline_timed_on"] == "host" and row["target_timed_on"] == "device"
    assert row["work_ratio"] == pytest.approx(1.0)
    per_call = {side: seconds / calls for side, (calls, _, seconds) in oracle.items()}
    assert row["speedup"] == pytest.approx(per_call["baseline"] / per_call["target"], rel=1e-3)
    # the H200's fp32 roof from the datasheet table, and how far under it the kernels ran
    assert row["target_roof_flops_per_s"] == from_table("NVIDIA H200").peak_flops["fp32"]
    assert row["target_fraction_of_roof"] == pytest.approx(
        row["target_flops_per_s"] / row["target_roof_flops_per_s"], rel=1e-9
    )


def test_fp32_convolutions_on_tf32_tensor_cores_are_measured_under_the_tf32_roof():
    """ResNet-18 in fp32 on an H200 (our DataLoader job): cuDNN ran its convolutions on TF32
    tensor cores, as PyTorch lets it by default and as the kernels' names say
    (``sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_…``). At up to 95 TFLOP/s they passed
    the fp32 peak (67) and were called suspect; their roof is the TF32 peak (494.5). The
    demo CNN's ops, mostly in fp32 FMA kernels, stay under the fp32 roof."""
    logdir = FIXTURES / "gpu_h200" / "loader"
    run = "resnet18_num_workers_4_rep1"
    document = roofline_document(Catalog(str(logdir), cache_dir=None), run, run)
    (device,) = [limits for limits in document.baseline.limits if limits.processor == "device"]
    tf32_ops = _ops_on_tf32(logdir, run)
    assert {"aten::conv2d", "aten::convolution_backward"} <= tf32_ops
    rows = {row["op_name"]: row for row in document.rows}
    for op in ("aten::conv2d", "aten::convolution_backward"):
        row = rows[op]
        assert row["baseline_suspect"] is None and row["baseline_flops_per_s"] > device.peak_flops  # past fp32's
        roof = min(device.peak_flops_by_precision["tf32"], row["baseline_intensity"] * device.memory_bandwidth)
        assert row["baseline_roof_flops_per_s"] == pytest.approx(roof, rel=1e-9)
        assert 0 < row["baseline_fraction_of_roof"] < 1
    assert any("TF32 tensor cores" in note and "aten::conv2d" in note for note in document.notes)
    # the matrix products (cuBLAS's fp32 kernels: torch.backends.cuda.matmul.allow_tf32 is off) keep the fp32 roof
    assert rows["aten::linear"]["baseline_roof_precision"] == "fp32"
    # and the CLI marks the ops under the TF32 roof
    printed = run_cli("roofline", str(logdir), "--baseline", run, "--target", run, "--no-cache").stdout
    (conv_line,) = [line for line in printed.splitlines() if line.endswith("  aten::conv2d: moved along the roof")]
    assert conv_line.count("compute tf32") == 2
    (linear_line,) = [line for line in printed.splitlines() if "  aten::linear" in line]
    assert "tf32" not in linear_line
    stacks = roofline_document(Catalog(str(H200_STACKS), cache_dir=None), *["mnist_cnn_torch_stack_gpu_bs64_rep1"] * 2)
    assert not any("TF32" in note for note in stacks.notes)
    assert all(
        row["baseline_roof_flops_per_s"] <= device.peak_flops
        for row in stacks.rows
        if row["baseline_timed_on"] == "device" and row["baseline_roof_flops_per_s"] is not None
    )


def _kernel_time_of(events: list[dict], op: str) -> tuple[float, float]:
    """From the raw events: the device time (µs) launched inside the outermost calls of
    ``op`` (kernels and memsets), and the part of it in kernels named for TF32 (joined by
    correlation id)."""
    calls = _outermost(events, op)
    launched = {
        e["args"]["correlation"]
        for e in events
        if e.get("cat") == "cuda_runtime"
        and any(c["tid"] == e["tid"] and c["ts"] <= e["ts"] <= c["ts"] + c["dur"] for c in calls)
    }
    device = ("kernel", "gpu_memset", "gpu_memcpy")  # what a call launched on the device, memsets too
    kernels = [e for e in events if e.get("cat") in device and e["args"].get("correlation") in launched]
    return sum(k["dur"] for k in kernels), sum(k["dur"] for k in kernels if "tf32" in k["name"].lower())


def test_an_op_is_under_the_tf32_roof_only_where_most_of_its_kernel_time_is():
    """The demo CNN on the H200: its convolutions' backward pass ran one of its kernels on TF32
    tensor cores (the weight gradient's), about a sixth of its kernel time; the work table
    holds both times as the raw events give them, and the op keeps the fp32 roof. ResNet-18's
    convolutions, nearly all on TF32 kernels, take the TF32 one."""
    from tb_opcompare.store.catalog import Catalog as _Catalog

    cases = [
        (H200_STACKS, "mnist_cnn_torch_stack_gpu_bs64_rep1", "aten::convolution_backward", "fp32"),
        (FIXTURES / "gpu_h200" / "loader", "resnet18_num_workers_4_rep1", "aten::convolution_backward", "tf32"),
    ]
    for logdir, run, op, precision in cases:
        (trace,) = glob.glob(str(logdir / run / "*.pt.trace.json.gz"))
        import gzip

        events = json.loads(gzip.decompress(open(trace, "rb").read()))["traceEvents"]
        device_us, tf32_us = _kernel_time_of(events, op)
        assert 0 < tf32_us < device_us
        work = _Catalog(str(logdir), cache_dir=None).load(run).profile.work_table.frame().set_index("op_name")
        assert work.loc[op, "device_us"] == pytest.approx(device_us, rel=1e-6)
        assert work.loc[op, "device_tf32_us"] == pytest.approx(tf32_us, rel=1e-6)
        assert (tf32_us > device_us / 2) == (precision == "tf32")
        document = roofline_document(_Catalog(str(logdir), cache_dir=None), run, run)
        (row,) = [row for row in document.rows if row["op_name"] == op]
        assert row["baseline_roof_precision"] == precision, (run, tf32_us, device_us)
