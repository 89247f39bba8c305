"""Memory over time and the memory document (issue 17): each run's memory in use as the
readers thin it (``OpProfile.memory_table``), checked against the raw traces and xprof's
own memory profile, and the memory route, its CSV and ``tb-opcompare memory`` on real
recordings (tests/fixtures/memory: the demo CNN with memory profiling on; the H100 traces of
tests/fixtures/gpu_h100; the public traces of ../shared/realtraces)."""

from __future__ import annotations

import csv
import gzip
import io
import json
from pathlib import Path

import msgspec
import pandas as pd
import pytest
from conftest import FIXTURES, REALTRACES, run_cli
from in_process import PREFIX, plugin_client

from tb_opcompare.schema.contract import MEMORY_COLUMNS, ErrorDocument, MemoryDocument
from tb_opcompare.schema.events import MEMORY_TIMELINE_POINTS
from tb_opcompare.store.catalog import Catalog
from tb_opcompare.text import format_bytes

MEMORY = FIXTURES / "memory" / "logdir"
ORACLES = FIXTURES / "memory" / "oracles"
H100 = FIXTURES / "gpu_h100"
TORCH_DEVICE_TYPES = {0: "CPU", 1: "GPU", 6: "GPU"}  # c10::DeviceType: CPU, CUDA, HIP

# The demo CNN's first repeat at every batch size, precision and device, and ResNet-18 on
# both devices: its CPU run records over 6,000 samples, so its series is thinned.
H100_RUNS = [
    f"demo/mnist_cnn_torch{precision}_{device}_bs{batch}_rep1"
    for precision in ("", "_bf16")
    for device in ("cpu", "gpu")
    for batch in (1, 16, 64)
] + ["resnet18/resnet18_cpu_bs32_rep1", "resnet18/resnet18_gpu_bs32_rep1", "zoo/mnist_cnn_compiled_gpu_bs64"]


def _raw_memory_samples(run_dir: Path) -> pd.DataFrame:
    """Independent of the reader: every [memory] event of the trace file that reports
    "Total Allocated", with its device named as PyTorch's DeviceType says."""
    (path,) = [path for path in run_dir.glob("*.json*") if path.name != "opcompare.json"]
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    records = []
    for event in json.loads(data)["traceEvents"]:
        args = event.get("args") or {}
        if event.get("name") == "[memory]" and "Total Allocated" in args:
            kind = args.get("Device Type", 0)
            device = "CPU" if not kind else f"{TORCH_DEVICE_TYPES[kind]}:{max(args.get('Device Id', 0), 0)}"
            records.append((device, float(event["ts"]), float(args["Total Allocated"])))
    return pd.DataFrame(records, columns=["device", "ts", "total"])


def _check_timeline_against_the_raw_trace(timeline: pd.DataFrame, peaks: dict[str, int], raw: pd.DataFrame):
    assert len(raw) > 100
    expected_peaks = raw.groupby("device")["total"].max()
    assert {device: int(peak) for device, peak in expected_peaks.items()} == peaks
    assert timeline.groupby("device")["bytes_in_use"].max().to_dict() == peaks
    assert timeline["time_us"].min() == 0.0  # from the run's first sample, any device
    for device, samples in raw.groupby("device"):
        kept = timeline[timeline["device"] == device]
        assert kept["time_us"].is_monotonic_increasing
        samples = samples.sort_values("ts", kind="stable").assign(time_us=lambda s: s["ts"] - raw["ts"].min())
        if len(samples) <= MEMORY_TIMELINE_POINTS:  # every sample, as recorded
            assert kept["bytes_in_use"].tolist() == samples["total"].tolist()
            assert kept["time_us"].to_numpy() == pytest.approx(samples["time_us"].to_numpy(), abs=1e-3)
            continue
        # thinned: per stretch of equal time (half as many as points), its lowest and highest
        assert len(kept) <= MEMORY_TIMELINE_POINTS
        stretches = MEMORY_TIMELINE_POINTS // 2
        start, span = samples["time_us"].min(), samples["time_us"].max() - samples["time_us"].min()

        def stretch_of(times):
            return ((times - start) / span * stretches).astype(int).clip(upper=stretches - 1)

        extremes = samples.groupby(stretch_of(samples["time_us"]))["total"].agg(["min", "max"])
        shown = kept.groupby(stretch_of(kept["time_us"]))["bytes_in_use"].agg(lambda values: set(values.tolist()))
        assert shown.index.tolist() == extremes.index.tolist()
        assert shown.tolist() == [{low, high} for low, high in zip(extremes["min"], extremes["max"])]
        assert len(kept) < len(samples)


@pytest.mark.parametrize("run", ["torch_cnn_cpu_bs8", "torch_cnn_cpu_bs32"])
def test_the_timeline_peaks_where_the_memory_fixtures_trace_does(run):
    profile = Catalog(str(MEMORY), cache_dir=None).load(run).profile
    _check_timeline_against_the_raw_trace(
        profile.memory_table.frame(), profile.facts.peak_memory_bytes, _raw_memory_samples(MEMORY / run)
    )


@pytest.mark.parametrize("run", H100_RUNS)
def test_the_timeline_peaks_where_the_h100_trace_does(run):
    profile = Catalog(str(H100), cache_dir=None).load(run).profile
    raw = _raw_memory_samples(H100 / run)
    _check_timeline_against_the_raw_trace(profile.memory_table.frame(), profile.facts.peak_memory_bytes, raw)
    if "_gpu_" in run:
        assert profile.facts.peak_memory_bytes["GPU:0"] > 2**20


def test_resnet18_on_the_cpu_is_thinned_and_keeps_its_peak():
    """Over 6,000 samples come in bursts (the steps' allocations), so fewer stretches than
    the limit hold any: the timeline keeps the lowest and highest of each that does, the
    memory released between steps as well as the peak."""
    profile = Catalog(str(H100), cache_dir=None).load("resnet18/resnet18_cpu_bs32_rep1").profile
    raw = _raw_memory_samples(H100 / "resnet18/resnet18_cpu_bs32_rep1")
    timeline = profile.memory_table.frame()
    assert len(timeline) <= MEMORY_TIMELINE_POINTS < 3 * MEMORY_TIMELINE_POINTS < len(raw)
    assert timeline["bytes_in_use"].max() == raw["total"].max() == profile.facts.peak_memory_bytes["CPU"]
    assert timeline["time_us"].max() == pytest.approx(raw["ts"].max() - raw["ts"].min(), rel=1e-3)
    assert timeline["bytes_in_use"].min() == raw["total"].min()


def test_public_traces_rocm_names_its_gpu_and_pytorch_1_8_has_no_timeline():
    catalog = Catalog(str(REALTRACES), cache_dir=None)
    mi300 = catalog.load("torch_bert_small_h100_vs_mi300/mi300").profile
    raw = _raw_memory_samples(REALTRACES / "torch_bert_small_h100_vs_mi300" / "mi300")
    _check_timeline_against_the_raw_trace(mi300.memory_table.frame(), mi300.facts.peak_memory_bytes, raw)
    assert set(mi300.memory_table.frame()["device"]) == {"CPU", "GPU:0"}
    resnet = catalog.load("torch_resnet50_v100").profile  # [memory] events without "Total Allocated"
    assert resnet.facts.memory_events > 0 and not len(resnet.memory_table.frame())


@pytest.mark.parametrize("batch", [8, 32])
def test_the_tf_timeline_is_xprofs_memory_profile(batch):
    """xprof's memory_profile tool, run on a copy of the same xplane when it was recorded:
    its timeline lists every traced allocation and free with the allocator's heap after it."""
    oracle = json.loads((ORACLES / f"tf_cnn_cpu_bs{batch}.memory_profile.json").read_text())
    snapshots = sorted(
        oracle["memoryProfilePerAllocator"]["mklcpu"]["sampledTimelineSnapshots"],
        key=lambda snapshot: int(snapshot["timeOffsetPs"]),
    )
    profile = Catalog(str(MEMORY), cache_dir=None).load(f"tf_cnn_cpu_bs{batch}/train").profile
    timeline = profile.memory_table.frame()
    assert set(timeline["device"]) == {"mklcpu"} and len(timeline) == len(snapshots) == profile.facts.memory_events
    assert timeline["bytes_in_use"].tolist() == [float(s["aggregationStats"]["heapAllocatedBytes"]) for s in snapshots]
    first = int(snapshots[0]["timeOffsetPs"])
    assert timeline["time_us"].to_numpy() == pytest.approx(
        [(int(s["timeOffsetPs"]) - first) / 1e6 for s in snapshots], abs=1e-6
    )
    assert timeline["bytes_in_use"].max() == profile.facts.peak_memory_bytes["mklcpu"]


def test_the_disk_cache_keeps_the_timeline(tmp_path):
    run = "resnet18/resnet18_gpu_bs32_rep1"
    parsed = Catalog(str(H100), cache_dir=str(tmp_path)).load(run).profile
    cached = Catalog(str(H100), cache_dir=str(tmp_path)).load(run).profile  # a new process reads it back
    assert cached is not parsed and len(cached.memory_table.frame()) > 1000
    pd.testing.assert_frame_equal(cached.memory_table.frame(), parsed.memory_table.frame())
    assert cached.facts.peak_memory_bytes == parsed.facts.peak_memory_bytes


@pytest.fixture(scope="module")
def client():
    return plugin_client(MEMORY)


def _route(client, route: str, **params):
    response = client.get(f"{PREFIX}/{route}", query_string=params)
    return response.status_code, response.get_data()


@pytest.mark.parametrize(
    "baseline, target", [("torch_cnn_cpu_bs8", "torch_cnn_cpu_bs32"), ("tf_cnn_cpu_bs8/train", "torch_cnn_cpu_bs8")]
)
def test_route_cli_json_and_csv_agree(client, baseline, target):
    status, body = _route(client, "memory", baseline=baseline, target=target)
    assert status == 200
    document = msgspec.json.decode(body, type=MemoryDocument, strict=True)
    served = json.loads(body)
    cli = run_cli("memory", str(MEMORY), "--baseline", baseline, "--target", target, "--json", "--no-cache")
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout) == served

    # each side's series peaks at its peak, per device
    for side in ("baseline", "target"):
        run = getattr(document, side)
        assert {
            series.device: series.peak_bytes for series in document.series if series.side == side
        } == run.peak_memory_bytes
        assert all(max(series.bytes_in_use) == series.peak_bytes for series in document.series)

    # the rows are the comparison's own memory columns, largest allocation first
    compare = json.loads(
        run_cli("compare", str(MEMORY), "--baseline", baseline, "--target", target, "--json", "--no-cache").stdout
    )
    compared = {row["key"]: row for row in compare["rows"]}
    assert document.columns == MEMORY_COLUMNS and len(served["rows"]) > 5
    for row in served["rows"]:
        assert {column: compared[row["key"]][column] for column in MEMORY_COLUMNS if column != "ratio"} == {
            column: value for column, value in row.items() if column != "ratio"
        }
    largest = [max(row["baseline_alloc_bytes"] or 0, row["target_alloc_bytes"] or 0) for row in served["rows"]]
    assert largest == sorted(largest, reverse=True)

    # the CSV: the route's and the CLI's are the same bytes, one line per row, same values
    status, text = _route(client, "memory.csv", baseline=baseline, target=target)
    assert status == 200
    cli_csv = run_cli(
        "memory", str(MEMORY), "--baseline", baseline, "--target", target, "--csv", "-", "--no-cache"
    ).stdout
    assert cli_csv == text.decode()
    lines = list(csv.DictReader(io.StringIO(cli_csv)))
    assert [line["key"] for line in lines] == [row["key"] for row in served["rows"]]
    for line, row in zip(lines, served["rows"]):
        for column in ("baseline_alloc_bytes", "target_alloc_bytes", "ratio"):
            assert (float(line[column]) if line[column] else None) == row[column]


def test_the_cli_text_shows_each_sides_peak_and_the_top_ops():
    baseline, target = "torch_cnn_cpu_bs8", "torch_cnn_cpu_bs32"
    document = json.loads(
        run_cli("memory", str(MEMORY), "--baseline", baseline, "--target", target, "--json", "--no-cache").stdout
    )
    text = run_cli(
        "memory", str(MEMORY), "--baseline", baseline, "--target", target, "--top", "3", "--no-cache"
    ).stdout.splitlines()
    for side, line in zip(("baseline", "target"), text):
        assert line.startswith(f"{side}:") and document[side]["run"] in line
        assert f"peak CPU {format_bytes(document[side]['peak_memory_bytes']['CPU'])}" in line
    header = next(i for i, line in enumerate(text) if line.split()[:2] == ["base", "alloc"])
    for line, row in zip(text[header + 1 : header + 4], document["rows"][:3], strict=True):
        assert line.endswith(f"  {row['key']}")
        assert line.split()[:2] == format_bytes(row["baseline_alloc_bytes"]).split()
    assert text[header + 4] == f"… {len(document['rows']) - 3} more (--top, --csv)"


def test_runs_without_memory_say_how_to_record_it(client):
    runs_without = Catalog(str(FIXTURES / "logdir"), cache_dir=None)
    from tb_opcompare.service.memory import memory_document

    document = memory_document(runs_without, "torch/cnn_torch_cpu_bs4", "torch/cnn_torch_cpu_bs16")
    assert not document.baseline.recorded and not document.target.recorded
    assert document.series == [] and document.rows == []
    batch_note, *notes = document.notes[::-1]  # the runs' batch sizes differ (4 vs 16): the last note says so
    assert batch_note.startswith("Batch sizes differ (4 vs 16): ")
    assert all("profile_memory=True" in note for note in notes) and len(notes) == 2
    v100 = memory_document(Catalog(str(REALTRACES), cache_dir=None), "torch_resnet50_v100", "torch_resnet50_v100")
    assert v100.baseline.recorded and v100.series == [] and v100.rows
    assert any("Total Allocated" in note for note in v100.notes)


@pytest.mark.parametrize(
    "query, code",
    [({"baseline": "nope", "target": "torch_cnn_cpu_bs8"}, 404), ({"baseline": "torch_cnn_cpu_bs8"}, 400)],
)
def test_memory_errors_fit_the_contract(client, query, code):
    for route in ("memory", "memory.csv"):
        status, body = _route(client, route, **query)
        assert status == code
        assert msgspec.json.decode(body, type=ErrorDocument, strict=True).error.status == code
