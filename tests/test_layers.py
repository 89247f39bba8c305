"""The layers of a profile (issue 17): application, framework, runtime and device time of two
runs side by side, and the application's ranges and the runtime's calls compared row by row.

Oracles: an independent walk over the raw trace events (each host event's time less the
events directly inside it on its thread, by category), PyTorch's own ``key_averages()``
taken in the recording process (tests/fixtures/memory/oracles), and the numbers written in
a real summary.json."""

from __future__ import annotations

import collections
import csv
import gzip
import io
import json

import msgspec
import pandas as pd
import pytest
from conftest import FIXTURES, REALTRACES, run_cli
from in_process import PREFIX, plugin_client

from tb_opcompare.schema.contract import LayersDocument
from tb_opcompare.store.catalog import Catalog

H100 = FIXTURES / "gpu_h100" / "demo"
CPU_RUN, GPU_RUN = "mnist_cnn_torch_cpu_bs16_rep1", "mnist_cnn_torch_gpu_bs16_rep1"
MEMORY = FIXTURES / "memory"
_LAYER_OF_CATEGORY = {
    "cpu_op": "framework",
    "user_annotation": "application",
    "cuda_runtime": "runtime",
    "cuda_driver": "runtime",
}
_DEVICE_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}


def _trace_events(path) -> list[dict]:
    with gzip.open(path) as handle:
        return json.load(handle)["traceEvents"]


def _raw_layers(events: list[dict]) -> tuple[dict[str, float], dict[str, tuple[int, float]], int]:
    """Independent of the reader: each layer's self time (an event's duration less the
    events directly inside it on its thread; ProfilerStep ranges are steps, not work),
    device time, each runtime call's (calls, wall time), and the step count."""
    host = [
        e
        for e in events
        if e.get("ph") == "X" and e.get("cat") in _LAYER_OF_CATEGORY and not e["name"].startswith("ProfilerStep#")
    ]
    by_thread = collections.defaultdict(list)
    for event in host:
        by_thread[(str(event["pid"]), str(event["tid"]))].append(event)
    layers = collections.Counter()
    for thread_events in by_thread.values():
        thread_events.sort(key=lambda e: (e["ts"], -e["dur"]))
        open_events: list[dict] = []
        for event in thread_events:
            while open_events and open_events[-1]["ts"] + open_events[-1]["dur"] <= event["ts"]:
                open_events.pop()
            if open_events:
                layers[_LAYER_OF_CATEGORY[open_events[-1]["cat"]]] -= event["dur"]
            layers[_LAYER_OF_CATEGORY[event["cat"]]] += event["dur"]
            open_events.append(event)
    layers["device"] = sum(e["dur"] for e in events if e.get("ph") == "X" and e.get("cat") in _DEVICE_CATEGORIES)
    calls = collections.defaultdict(lambda: [0, 0.0])
    for event in host:
        if _LAYER_OF_CATEGORY[event["cat"]] == "runtime":
            calls[event["name"]][0] += 1
            calls[event["name"]][1] += event["dur"]
    steps = len({e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#")})
    return {layer: time for layer, time in layers.items() if time}, {k: tuple(v) for k, v in calls.items()}, steps


def _layers(logdir, baseline: str, target: str) -> LayersDocument:
    return msgspec.json.decode(
        run_cli("layers", str(logdir), "--baseline", baseline, "--target", target, "--json", "--no-cache").stdout,
        type=LayersDocument,
    )


@pytest.fixture(scope="module")
def h100_layers() -> LayersDocument:
    return _layers(H100, CPU_RUN, GPU_RUN)


def test_each_layer_equals_the_raw_trace_per_step(h100_layers):
    for run, side in ((CPU_RUN, "baseline"), (GPU_RUN, "target")):
        (path,) = (H100 / run).glob("*.pt.trace.json.gz")
        raw, _, steps = _raw_layers(_trace_events(path))
        shown = {
            layer.layer: getattr(layer, f"{side}_us")
            for layer in h100_layers.layers
            if getattr(layer, f"{side}_us") is not None
        }
        assert shown.keys() == raw.keys(), run
        for layer, time in raw.items():
            assert shown[layer] == pytest.approx(time / steps, rel=1e-5), (run, layer)
    assert h100_layers.per_step
    assert {layer.layer for layer in h100_layers.layers} == {"application", "framework", "runtime", "device"}
    cpu_only = [layer.layer for layer in h100_layers.layers if layer.baseline_us is None]
    assert sorted(cpu_only) == ["device", "runtime"]  # a CPU run launches no kernels


def test_runtime_calls_are_rows_with_the_raw_counts_and_wall_time(h100_layers):
    (path,) = (H100 / GPU_RUN).glob("*.pt.trace.json.gz")
    _, calls, steps = _raw_layers(_trace_events(path))
    rows = {row.name: row for row in h100_layers.rows if row.layer == "runtime"}
    assert rows.keys() == calls.keys()
    for name, (count, wall) in calls.items():
        assert rows[name].target_calls == count
        assert rows[name].target_wall_us == pytest.approx(wall / steps, rel=1e-9)
        assert rows[name].target_mean_us == pytest.approx(wall / count, rel=1e-9)
        assert rows[name].status == "target_only" and rows[name].baseline_calls is None
    assert "cudaLaunchKernel" in rows


@pytest.mark.parametrize("batch", [8, 32])
def test_application_ranges_agree_with_key_averages_of_the_recording_process(batch):
    oracle = json.loads((MEMORY / "oracles" / f"torch_cnn_cpu_bs{batch}.key_averages.json").read_text())
    document = _layers(MEMORY / "logdir", f"torch_cnn_cpu_bs{batch}", f"torch_cnn_cpu_bs{batch}")
    steps = oracle["profiled_steps"]
    # rel=1e-5: the trace's times are decimal µs read as doubles, key_averages() sums integer ns
    rows = {row.name: row for row in document.rows if row.layer == "application"}
    expected = {row["key"]: row for row in oracle["key_averages"] if row["key"].startswith("Optimizer.")}
    assert rows.keys() == expected.keys()
    for name, row in expected.items():
        assert rows[name].baseline_calls == row["count"]
        assert rows[name].baseline_mean_us == pytest.approx(row["cpu_time_total"] / row["count"], rel=1e-6)
        assert rows[name].baseline_self_us == pytest.approx(row["self_cpu_time_total"] / steps, rel=1e-5)
        assert rows[name].speedup == pytest.approx(1.0)
    application = next(layer for layer in document.layers if layer.layer == "application")
    assert application.baseline_us == pytest.approx(
        sum(row["self_cpu_time_total"] for row in expected.values()) / steps, rel=1e-5
    )


def test_public_v100_trace_layers_equal_the_raw_events():
    (path,) = (REALTRACES / "torch_resnet50_v100").glob("*.pt.trace.json.gz")
    catalog = Catalog(str(path.parent.parent), cache_dir=None)
    run = next(source.run for source in catalog.sources() if source.run.endswith("torch_resnet50_v100"))
    profile = catalog.load(run).profile
    from tb_opcompare.analysis.layers import run_layers

    totals, rows = run_layers(profile.op_table.frame(), profile.annotation_table.frame())
    raw, calls, _ = _raw_layers(_trace_events(path))
    # The 2021 trace names its categories "Operator", "Runtime", "Kernel" ...: read as the same layers.
    for layer in ("framework", "runtime", "device"):
        assert layer in totals, layer
    if raw:  # the modern category names: the same totals
        for layer, time in raw.items():
            assert totals[layer][0] == pytest.approx(time, rel=1e-9), layer
    launches = rows[rows["name"] == "cudaLaunchKernel"]
    assert len(launches) == 1 and launches["calls"].iloc[0] > 1000


def test_app_stats_of_a_summary_json_are_the_application_layer_by_wall_time():
    path = FIXTURES / "summary_json" / "mlp_cpu" / "summary.json"
    app_stats = json.loads(path.read_text())["app_stats"]
    steps = len(app_stats)
    wall = sum(activity["duration"] for step in app_stats.values() for activity in step.values())
    document = _layers(FIXTURES / "summary_json", "mlp_cpu", "mlp_cpu")
    (row,) = [row for row in document.rows if row.layer == "application"]
    assert (row.name, row.kind, row.baseline_calls) == ("session_run", "app_stats", steps)
    assert row.baseline_wall_us == pytest.approx(wall / steps) and row.baseline_self_us is None
    application = next(layer for layer in document.layers if layer.layer == "application")
    assert application.basis == "wall" and application.baseline_us == pytest.approx(wall / steps)
    assert any("wall time" in note and "overlap" in note for note in document.notes)


def test_the_tf_data_input_pipeline_is_the_application_layer_of_a_keras_run():
    demo = FIXTURES.parent.parent / "demo_logs"
    runs = "tf_keras/mnist_cnn_cpu_bs64", "tf_keras/mnist_cnn_cpu_bs16"
    document = _layers(demo, *runs)
    assert [layer.layer for layer in document.layers] == ["application", "framework"]
    catalog = Catalog(str(demo), cache_dir=None)
    for run, side in zip(runs, ("baseline", "target")):
        profile = catalog.load(run).profile
        pipeline = profile.op_table.frame()[profile.op_table.frame()["op_type"] == "Dataset"]
        assert len(pipeline) and pipeline["op_name"].str.startswith("Iterator::").all()
        shown = {row.name: getattr(row, f"{side}_self_us") for row in document.rows}
        assert shown.keys() == set(pipeline["op_name"])
        application = getattr(document.layers[0], f"{side}_us")
        assert application == pytest.approx(pipeline["self_us"].sum() / profile.facts.steps, rel=1e-9)
        framework = getattr(document.layers[1], f"{side}_us")
        others = profile.op_table.frame()[
            (profile.op_table.frame()["op_type"] != "Dataset") & (profile.op_table.frame()["side"] == "host")
        ]
        assert framework == pytest.approx(others["self_us"].sum() / profile.facts.steps, rel=1e-9)
    assert any("several host threads" in note for note in document.notes) == any(
        (layer.baseline_share or 0) > 1 or (layer.target_share or 0) > 1 for layer in document.layers
    )


TF_ANNOTATED = FIXTURES / "tf_annotations" / "logdir"
TF_USER_RANGES = ("load_batch", "update", "postprocess", "metrics")  # record_tf_annotations.py's names
TF_NESTED_RANGE = "metrics"  # inside postprocess


def _raw_python_thread_ranges(run: str) -> tuple[dict[str, list[int]], int]:
    """Independent of the reader (TF's own protobuf classes): the duration (ps) of each
    event of the user's range names on the Python thread, and the step markers."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    (path,) = (TF_ANNOTATED / run).glob("plugins/profile/*/*.xplane.pb")
    space = xplane_pb2.XSpace.FromString(path.read_bytes())
    (host,) = [plane for plane in space.planes if plane.name == "/host:CPU"]
    names = {key: metadata.name for key, metadata in host.event_metadata.items()}
    durations, steps = collections.defaultdict(list), 0
    for line in host.lines:
        for event in line.events:
            name = names[event.metadata_id]
            if line.name == "python" and name in TF_USER_RANGES:
                durations[name].append(event.duration_ps)
            steps += name == "train"
    return durations, steps


def test_tf_trace_ranges_are_application_rows_with_the_raw_wall_time():
    runs = "annotated_cnn_cpu_bs16", "annotated_cnn_cpu_bs64"
    document = _layers(TF_ANNOTATED, *runs)
    application = {row.name: row for row in document.rows if row.layer == "application"}
    assert set(application) == set(TF_USER_RANGES)  # none of TensorFlow's own ranges
    assert {row.kind for row in application.values()} == {"tf.profiler Trace"}
    for run, side in zip(runs, ("baseline", "target")):
        durations, steps = _raw_python_thread_ranges(run)
        assert steps == 6
        for name, row in application.items():
            assert getattr(row, f"{side}_calls") == len(durations[name]) == steps
            assert getattr(row, f"{side}_wall_us") == pytest.approx(sum(durations[name]) / 1e6 / steps, rel=1e-9)
            assert getattr(row, f"{side}_self_us") is None
        layer = next(layer for layer in document.layers if layer.layer == "application")
        outermost = sum(sum(durations[name]) for name in TF_USER_RANGES if name != TF_NESTED_RANGE)
        assert layer.basis == "wall"
        assert getattr(layer, f"{side}_us") == pytest.approx(outermost / 1e6 / steps, rel=1e-9)
    assert any("outermost ranges" in note and "overlap" in note for note in document.notes)


def test_tf_xplanes_without_user_ranges_read_none():
    """Every other TF xplane at hand (TF 2.12 and 2.21 here, the public TF 2.4-era BERT
    one) holds TensorFlow's own ranges only, and JAX's (tests/fixtures/jax*) its runtime's
    (``PjitFunction(step)``, launches named by kernel): none may read as the user's."""
    from tb_opcompare.ingest.formats import read_profile

    paths = [
        path
        for root in (FIXTURES, FIXTURES.parent.parent / "demo_logs", REALTRACES)
        for path in sorted(root.glob("**/*.xplane.pb"))
        if TF_ANNOTATED not in path.parents and not {"hostile", "malformed"} & set(path.parts)
    ]
    assert len(paths) >= 20
    read = 0
    for path in paths:
        try:
            profile = read_profile("xplane", [str(path)])
        except Exception:  # the deliberately broken ones have their own tests
            continue
        read += 1
        assert profile.annotation_table.frame().empty, (path, list(profile.annotation_table.frame()["name"]))
    assert read >= 20


def test_user_ranges_nested_in_their_own_name_count_once():
    from tb_opcompare.ingest.readers.xplane_evidence import _UserRanges

    ranges = _UserRanges()
    main, loader = ("/host:CPU", 0), ("/host:CPU", 1)
    ranges.add("outer", main, 0, 100)
    ranges.add("outer", main, 10, 50)  # recursion: counts once, as the outer range
    ranges.add("inner", main, 20, 10)  # inside another range: not outermost
    ranges.add("outer", main, 200, 30)
    ranges.add("inner", loader, 25, 40)  # another thread: outermost there
    table = pd.DataFrame(ranges.table()).set_index("name")  # the columns the reader hands over
    assert table.loc["outer", "occurrences"] == 2 and table.loc["outer", "total_us"] == pytest.approx(130e-6)
    assert table.loc["outer", "outermost_us"] == pytest.approx(130e-6)
    assert table.loc["inner", "occurrences"] == 2 and table.loc["inner", "total_us"] == pytest.approx(50e-6)
    assert table.loc["inner", "outermost_us"] == pytest.approx(40e-6)


def test_runs_without_application_ranges_or_runtime_calls_say_so():
    document = _layers(REALTRACES / "tf1_timeline_mlp_cpu_vs_gpu", "cpu", "gpu")  # public TF1 timelines
    assert [layer.layer for layer in document.layers] == ["framework", "device"] and not document.rows
    assert any("no application ranges" in note and "tf.data" in note for note in document.notes)
    assert any(note.startswith("No runtime calls recorded in gpu") for note in document.notes)
    assert document.layers[1].baseline_us is None and document.layers[1].target_us > 0


def test_route_cli_and_csv_agree(h100_layers):
    client = plugin_client(str(H100))
    answer = client.get(f"{PREFIX}/layers", query_string={"baseline": CPU_RUN, "target": GPU_RUN})
    assert answer.status_code == 200
    assert msgspec.json.decode(answer.data, type=LayersDocument) == h100_layers
    download = client.get(f"{PREFIX}/layers.csv", query_string={"baseline": CPU_RUN, "target": GPU_RUN})
    assert download.status_code == 200 and "attachment" in download.headers["Content-Disposition"]
    cli_csv = run_cli(
        "layers", str(H100), "--baseline", CPU_RUN, "--target", GPU_RUN, "--csv", "-", "--no-cache"
    ).stdout
    assert download.data.decode() == cli_csv
    lines = list(csv.DictReader(io.StringIO(cli_csv)))
    assert [line["name"] for line in lines] == [row.name for row in h100_layers.rows]
    missing = client.get(f"{PREFIX}/layers", query_string={"baseline": CPU_RUN})
    assert missing.status_code == 400 and b"target" in missing.data
    unknown = client.get(f"{PREFIX}/layers", query_string={"baseline": CPU_RUN, "target": "no_such_run"})
    assert unknown.status_code == 404


def test_layers_survive_the_disk_cache(tmp_path):
    first = Catalog(str(FIXTURES / "summary_json"), cache_dir=str(tmp_path)).load("mlp_cpu").profile
    again = Catalog(str(FIXTURES / "summary_json"), cache_dir=str(tmp_path)).load("mlp_cpu").profile
    assert again is not first
    assert (
        again.annotation_table.frame().equals(first.annotation_table.frame())
        and len(again.annotation_table.frame()) == 1
    )


def test_cuda_and_hip_runtime_calls_meet_across_vendors():
    """The public BERT pair, H100 against MI300X: cudaLaunchKernel and hipLaunchKernel are
    one row, each side with its own trace's count."""
    pair = REALTRACES / "torch_bert_small_h100_vs_mi300"
    document = _layers(pair, "h100", "mi300")
    rows = {row.name: row for row in document.rows}
    launch = rows["cudaLaunchKernel / hipLaunchKernel"]
    assert launch.status == "matched" and launch.kind == "cuda_runtime"
    for side, run in (("baseline", "h100"), ("target", "mi300")):
        (path,) = (pair / run).glob("*.json.gz")
        count = sum(
            1
            for e in _trace_events(path)
            if e.get("ph") == "X"
            and e.get("cat") == "cuda_runtime"
            and e["name"] in ("cudaLaunchKernel", "hipLaunchKernel")
        )
        assert getattr(launch, f"{side}_calls") == count > 0
    assert rows["cuLaunchKernel"].status == "baseline_only"  # a driver call meets no runtime call
