"""Where the time went (issue 53): each run's steps split by what they were spent on, and
Compare's waterfall from the baseline's step to the target's, on real PyTorch traces
others recorded (kineto's ResNet-50 num_workers 0 -> 4 logdir, BERT on an H100 and an
MI300X, HTA's two ranks of one job, MI250 and MTIA) and the demo's CPU -> GPU pairs,
against oracles computed here from the raw events."""

from __future__ import annotations

import gzip
import json
import shutil
import statistics
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, REALTRACES, REPO, steady_steps

from tb_opcompare.ingest.readers.step_breakdown import decided_categories, measure_in, union
from tb_opcompare.service.compare import compare_document
from tb_opcompare.store.catalog import Catalog

KINETO = "torch_resnet50_v100_logdir"
NEXT = "DataLoader"  # enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__ and the multi-process one


def _newest_trace(run: Path) -> Path:
    return max(run.glob("*.json*"), key=lambda path: path.name)


def _raw_steps(trace: Path) -> list[dict]:
    """Each ProfilerStep#N's longest range, in start order, with the trace's events."""
    data = trace.read_bytes()
    events = json.loads(gzip.decompress(data) if trace.suffix == ".gz" else data)["traceEvents"]
    longest: dict[str, dict] = {}
    for event in events:
        if event.get("ph") == "X" and event.get("name", "").startswith("ProfilerStep#"):
            if event["name"] not in longest or event["dur"] > longest[event["name"]]["dur"]:
                longest[event["name"]] = event
    return sorted(longest.values(), key=lambda step: step["ts"]), events


def _input_per_step(trace: Path) -> list[float]:
    """Each step's time in the DataLoader's ``__next__`` spans on its thread (µs)."""
    steps, events = _raw_steps(trace)
    spans = [event for event in events if event.get("ph") == "X" and NEXT in event.get("name", "")]
    return [
        sum(
            span["dur"]
            for span in spans
            if span["tid"] == step["tid"] and step["ts"] <= span["ts"] < step["ts"] + step["dur"]
        )
        for step in steps
    ]


@pytest.fixture(scope="module")
def kineto(tmp_path_factory):
    root = tmp_path_factory.mktemp("kineto")
    shutil.copytree(REALTRACES / KINETO, root / KINETO)
    return root / KINETO


def test_num_workers_4_saves_the_input_wait_the_raw_spans_show(kineto):
    """Kineto's ResNet-50, num_workers 0 -> 4 on one V100: the step 1.22x faster, op time
    0.95x. The DataLoader's __next__ spans take a median of 45.5 ms a steady step, then
    1.36 ms: the waterfall's input bar is that -44 ms, and its bars add up to the wall
    difference of the headline's steps."""
    catalog = Catalog(str(kineto), cache_dir=None)
    summary = compare_document(catalog, "resnet50_num_workers_0", "resnet50_num_workers_4").summary
    breakdown = summary.breakdown
    assert breakdown is not None and summary.breakdown_note is None
    # the waterfall starts and ends at the headline's steps
    assert (breakdown.baseline_wall_us, breakdown.target_wall_us) == (
        summary.baseline_step_wall_us,
        summary.target_step_wall_us,
    )
    host = {part.category: part for part in breakdown.parts if part.side == "host"}
    assert sum(part.change_us for part in host.values()) == pytest.approx(
        breakdown.target_wall_us - breakdown.baseline_wall_us, abs=1e-6
    )
    oracle = []
    for run in ("resnet50_num_workers_0", "resnet50_num_workers_4"):
        trace = _newest_trace(kineto / run)
        walls = [step["dur"] for step in _raw_steps(trace)[0]]
        steady = len(walls) - len(steady_steps(walls))
        oracle.append(statistics.median(_input_per_step(trace)[steady:]))
    assert oracle[0] == pytest.approx(45_500, rel=0.01) and oracle[1] == pytest.approx(1_360, rel=0.01)
    assert host["input"].change_us == pytest.approx(oracle[1] - oracle[0], rel=0.05)
    assert host["input"].label == "waiting for input"
    # the rest of the step got slower: the bars other than input add up to about +17 ms
    rest = sum(part.change_us for name, part in host.items() if name != "input")
    assert 10_000 < rest < 25_000
    # the GPU was idle for much of a step that waited on its input
    device = {part.category: part for part in breakdown.parts if part.side == "device"}
    assert device["device_idle"].change_us < -20_000


def _sums_hold(profile, step_times: list[float]) -> None:
    """Each step's categories add up to its wall time (the raw ProfilerStep range), on the
    host and on the device, within 0.1%."""
    table = profile.breakdown_table.frame()
    assert len(table), "no breakdown"
    assert len(profile.facts.step_times_us) == len(step_times)
    for side, rows in table.groupby("side"):
        sums = rows.groupby("step")["time_us"].sum()
        assert sorted(sums.index) == list(range(len(step_times))), side
        for step, total in sums.items():
            assert total == pytest.approx(step_times[step], rel=1e-3), (side, step)


@pytest.mark.parametrize(
    "folder, run",
    [
        (KINETO, "resnet50_num_workers_0"),
        (KINETO, "resnet50_num_workers_4"),
        ("torch_bert_small_h100_vs_mi300", "h100"),
        ("torch_bert_small_h100_vs_mi300", "mi300"),
        ("torch_hta_accelerators", "mi250_train"),
    ],
)
def test_every_step_adds_up_to_its_wall_time(tmp_path, folder, run):
    shutil.copytree(REALTRACES / folder, tmp_path / folder)
    catalog = Catalog(str(tmp_path / folder), cache_dir=None)
    profile = catalog.load(run).profile
    _sums_hold(profile, [step["dur"] for step in _raw_steps(_newest_trace(tmp_path / folder / run))[0]])
    assert set(profile.breakdown_table.frame()["side"]) == {"host", "device"}


def test_a_jobs_step_is_split_as_its_slowest_rank_spent_it(tmp_path):
    """HTA's two ranks of one job: each step lasts as long as its slowest rank, and is split
    as that rank spent it, so the job's split adds up to the job's step."""
    shutil.copytree(REALTRACES / "torch_hta_two_ranks", tmp_path / "job")
    profile = Catalog(str(tmp_path / "job"), cache_dir=None).load(".").profile
    ranks = [_raw_steps(path)[0] for path in sorted((tmp_path / "job").glob("*.json.gz"))]
    job = [max(rank[step]["dur"] for rank in ranks) for step in range(min(len(rank) for rank in ranks))]
    _sums_hold(profile, job)
    # beside the job's split, each rank's own median steady step and its parts (Compare's runs)
    breakdown = compare_document(Catalog(str(tmp_path / "job"), cache_dir=None), ".", ".").summary.breakdown
    own = [run for run in breakdown.runs if run.side == "baseline"]
    assert [run.run for run in own] == ["rank 0", "rank 1"]
    for run, steps in zip(own, ranks):
        walls = [step["dur"] for step in steps]
        assert run.wall_us == pytest.approx(statistics.median(steady_steps(walls)), rel=1e-6)
        assert sum(run.host.values()) == pytest.approx(run.wall_us, rel=1e-3)


def test_the_demos_cpu_to_gpu_waterfall_adds_up_to_the_headline(tmp_path):
    """The demo's PyTorch CNN, CPU -> H100 at batch 64: the CPU side ran on no device (its
    device parts are null, no change is claimed), the GPU side's device parts add up to its
    step, and the host bars to the wall difference."""
    for run in ("mnist_cnn_torch_cpu_bs64", "mnist_cnn_torch_gpu_bs64"):
        shutil.copytree(REPO / "demo_logs" / "torch" / run, tmp_path / run)
    summary = compare_document(
        Catalog(str(tmp_path), cache_dir=None), "mnist_cnn_torch_cpu_bs64", "mnist_cnn_torch_gpu_bs64"
    ).summary
    breakdown = summary.breakdown
    host = [part for part in breakdown.parts if part.side == "host"]
    device = [part for part in breakdown.parts if part.side == "device"]
    assert sum(part.baseline_us for part in host) == pytest.approx(summary.baseline_step_wall_us, rel=1e-6)
    assert sum(part.target_us for part in host) == pytest.approx(summary.target_step_wall_us, rel=1e-6)
    assert device and all(part.baseline_us is None and part.change_us is None for part in device)
    assert sum(part.target_us for part in device) == pytest.approx(summary.target_step_wall_us, rel=1e-6)
    # the GPU run launches kernels and the CPU run launches none
    launch = next(part for part in host if part.category == "launch")
    assert launch.baseline_us == 0 and launch.target_us > 0


def test_formats_that_do_not_split_their_steps_say_so(tmp_path):
    """The profiler wrapper's summary.json holds op totals only: no step to split."""
    from conftest import FIXTURES

    shutil.copytree(FIXTURES / "summary_json" / "mlp_cpu", tmp_path / "a")
    shutil.copytree(FIXTURES / "summary_json" / "mlp_cpu", tmp_path / "b")
    summary = compare_document(Catalog(str(tmp_path), cache_dir=None), "a", "b").summary
    assert summary.breakdown is None
    assert summary.breakdown_note.startswith("No step breakdown: neither side's profile splits its steps")
    # and its CSV is a 400 that says so, not an empty file
    from in_process import PREFIX, plugin_client

    answer = plugin_client(tmp_path).get(f"{PREFIX}/breakdown.csv?baseline=a&target=b")
    assert answer.status_code == 400
    assert json.loads(answer.data)["error"]["message"] == summary.breakdown_note


def test_an_onnxruntime_sessions_runs_are_split_by_what_its_nodes_ran(tmp_path):
    """ONNX Runtime, the same CNN's inference on a CPU at batch 64: each InferenceSession.run
    (``model_run``) is a step; the nodes any thread ran make its forward part, exactly the
    raw node events' union in the step; the rest is the session's own work; the parts add
    up to the step."""
    from conftest import FIXTURES

    shutil.copytree(FIXTURES / "onnxruntime" / "logdir" / "cnn_infer_cpu_bs64_ort", tmp_path / "ort")
    profile = Catalog(str(tmp_path), cache_dir=None).load("ort").profile
    (path,) = (tmp_path / "ort").glob("onnxruntime_profile_*.json")
    events = json.loads(path.read_text())
    steps = sorted(
        (e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "Session" and e["name"] == "model_run"
    )
    nodes = [
        (e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")
    ]
    _sums_hold(profile, [end - start for start, end in steps])
    table = profile.breakdown_table.frame()
    for step, (start, end) in enumerate(steps):
        parts = dict(zip(*table[table["step"] == step][["category", "time_us"]].to_numpy().T))
        assert parts["forward"] == pytest.approx(_covered_in(nodes, start, end), abs=1e-6)
        assert set(parts) <= {"forward", "untracked"}  # a CPU provider: no copies, no launches
    assert profile.facts.step_breakdown_note.startswith("ONNX Runtime records its nodes only")


def _raw_tf1(path: Path) -> tuple[list[tuple[float, float, str]], list[tuple[float, float]]]:
    """A TF1 timeline's op events on its host ``Compute`` processes (start, end, name) and
    its device's (stream:all and memcpy), from the raw JSON."""
    events = json.loads(path.read_text())["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    host, device = [], []
    for event in events:
        if event.get("ph") != "X" or "name" not in event.get("args", {}):
            continue
        process = names.get(event["pid"], "")
        span = (event["ts"], event["ts"] + event.get("dur", 0))
        if process.startswith("/job:") and process.endswith(" Compute"):
            host.append((*span, event["args"]["name"]))
        elif process.endswith(("stream:all Compute", "memcpy Compute")):
            device.append(span)
    return host, device


def _covered(spans) -> float:
    total, reach = 0.0, float("-inf")
    for start, end in sorted((start, end) for start, end, *_ in spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def test_a_tf1_timelines_step_is_split_by_what_any_thread_ran(tmp_path):
    """The public TF1 MLP, CPU -> GPU: ops run on a pool of threads, so each moment of the
    session.run counts once, by what any thread ran. The host parts other than untracked and
    waiting add up to the time any op ran (the raw events' union); the gradients' ops make
    the backward part; the device's parts add up to the step; the note says the rule."""
    for device in ("cpu", "gpu"):
        shutil.copytree(REALTRACES / "tf1_timeline_mlp_cpu_vs_gpu" / device, tmp_path / device)
    catalog = Catalog(str(tmp_path), cache_dir=None)
    summary = compare_document(catalog, "cpu", "gpu").summary
    breakdown = summary.breakdown
    assert summary.breakdown_note.startswith("Both sides: a TF1 timeline holds ops only")
    for side, wall in (("baseline", breakdown.baseline_wall_us), ("target", breakdown.target_wall_us)):
        host, device = _raw_tf1(tmp_path / ("cpu" if side == "baseline" else "gpu") / "timeline_02_step_1.json")
        start = min(span[0] for span in host + device)
        end = max(span[1] for span in host + device)
        assert wall == pytest.approx(end - start, rel=1e-9)
        parts = {part.category: getattr(part, f"{side}_us") for part in breakdown.parts if part.side == "host"}
        busy = sum(time for name, time in parts.items() if name not in ("untracked", "device_wait"))
        assert busy == pytest.approx(_covered(host), rel=1e-9)
        assert sum(parts.values()) == pytest.approx(wall, rel=1e-9)
        if side == "baseline":  # on the CPU: the gradients' ops alone, where no forward or optimizer op ran
            gradients = [span for span in host if span[2].startswith("gradients/")]
            assert 0 < parts["backward"] <= _covered(gradients) + 1e-6
            assert parts["backward"] > 0.5 * _covered(gradients)
    device = [part for part in breakdown.parts if part.side == "device"]
    assert sum(part.target_us for part in device) == pytest.approx(breakdown.target_wall_us, rel=1e-9)


def test_an_events_category_is_its_own_else_what_encloses_it():
    """input and communication hold everything inside them; a runtime call inside the
    optimizer is a launch; an op inside the optimizer is the optimizer's; an op with
    nothing around it is forward. Codes as in step_breakdown.HOST_CODES."""
    from tb_opcompare.ingest.readers.step_breakdown import HOST_CODES as C

    none = -1
    # 0 input > 1 op > 2 launch ; 3 optimizer > 4 op > 5 launch ; 6 op ; 7 comm > 8 launch
    parents = np.array([-1, 0, 1, -1, 3, 4, -1, -1, 7])
    own = np.array(
        [C["input"], none, C["launch"], C["optimizer"], none, C["launch"], none, C["communication"], C["launch"]]
    )
    sticky = np.zeros(len(C), dtype=bool)
    sticky[[C["input"], C["communication"]]] = True
    decided = decided_categories(parents, own, sticky).tolist()
    assert decided == [
        C["input"], C["input"], C["input"],
        C["optimizer"], C["optimizer"], C["launch"],
        C["forward"],
        C["communication"], C["communication"],
    ]  # fmt: skip


def test_time_covered_in_each_step():
    covered = union(np.array([0.0, 5.0, 2.0, 20.0]), np.array([3.0, 8.0, 4.0, 30.0]))
    assert covered[0].tolist() == [0.0, 5.0, 20.0] and covered[1].tolist() == [4.0, 8.0, 30.0]
    bounds = np.array([[0.0, 10.0], [10.0, 25.0], [40.0, 50.0]])
    assert measure_in(bounds, covered).tolist() == [7.0, 5.0, 0.0]


def test_the_trend_plots_each_part_of_the_step(kineto):
    """Trend over the two runs: beside the whole step, each part of it at each point, the
    same figures as Compare's waterfall."""
    from tb_opcompare.service.trend import trend_document

    catalog = Catalog(str(kineto), cache_dir=None)
    runs = ["resnet50_num_workers_0", "resnet50_num_workers_4"]
    trend = trend_document(catalog, runs, order_by="run")
    breakdown = compare_document(catalog, *runs).summary.breakdown
    host = [part for part in breakdown.parts if part.side == "host"]
    assert trend.keys[-len(host) :] == [f"(step) {part.label}" for part in host]
    rows = {(row["key"], row["point"]): row["mean_us"] for row in trend.rows}
    for part in host:
        assert rows[f"(step) {part.label}", 0] == pytest.approx(part.baseline_us, rel=1e-12)
        assert rows[f"(step) {part.label}", 1] == pytest.approx(part.target_us, rel=1e-12)
    whole = [rows["(whole step)", point] for point in (0, 1)]
    assert sum(rows[f"(step) {part.label}", 0] for part in host) == pytest.approx(whole[0], rel=1e-9)


def _raw_xplane(path: Path) -> tuple[list[tuple[float, float]], dict[str, list[tuple[float, float]]]]:
    """A TF2 xplane's steps (µs, start and end: Keras 2's train_function calls where they
    outnumber the step_num markers, else each step number's longest marker) and its host
    events by what the step waits on or runs ("input": the get-next op and its body;
    "any": every event on a thread that is not tf.data's, and the get-next bodies), read
    with TensorFlow's own XSpace classes."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace.FromString(path.read_bytes())
    (host,) = [plane for plane in space.planes if plane.name.startswith("/host:")]
    names = {key: metadata.name for key, metadata in host.event_metadata.items()}
    step_stat = {key for key, metadata in host.stat_metadata.items() if metadata.name == "step_num"}
    origin = host.lines[0].timestamp_ns
    calls, markers, spans = [], {}, {"input": [], "any": []}
    for line in host.lines:
        for event in line.events:
            start = ((line.timestamp_ns - origin) * 1000 + event.offset_ps) / 1e6
            span = (start, start + event.duration_ps / 1e6)
            name = names[event.metadata_id]
            if name == "train_function":
                calls.append(span)
            for stat in event.stats:
                if stat.metadata_id in step_stat:
                    step = stat.int64_value or stat.uint64_value
                    if step not in markers or span[1] - span[0] > markers[step][1] - markers[step][0]:
                        markers[step] = span
            # the op (``<name>:IteratorGetNext``; eagerly ``EagerLocalExecute: IteratorGetNext``) or its body
            waits = name.endswith((":IteratorGetNext", " IteratorGetNext")) or name.startswith("IteratorGetNextOp::")
            if waits:
                spans["input"].append(span)
            if waits or not line.name.startswith("tf_data"):
                spans["any"].append(span)
    steps = sorted(calls) if len(calls) > len(markers) else sorted(markers.values())
    return steps, spans


def _covered_in(spans, start: float, end: float) -> float:
    return _covered([(max(a, start), min(b, end)) for a, b in spans if b > start and a < end])


TF2_XPLANES = [
    "tf_modes/logdir/keras_graph_cpu_bs16/train",  # Keras 3, tf.function: ops on the executor's threads
    "tf_modes/logdir/keras_eager_cpu_bs16/train",  # Keras 3, run_eagerly: ops on the Python thread
    "versions/tf2.12/cnn_cpu_bs20",  # Keras 2: a train_function call a step
]


@pytest.mark.parametrize("run", TF2_XPLANES, ids=lambda run: run.split("/")[-2 if run.endswith("train") else -1])
def test_a_tf2_xplanes_steps_are_split_by_what_any_thread_ran(tmp_path, run):
    """Keras's steps on TF 2: each step's parts add up to its wall time; waiting for input
    is exactly the time the step's get-next op or its body ran (the raw events' union);
    what the split counts as run is at most what the host's threads (tf.data's aside) ran;
    the gradients make a backward part, also where eager ops carry no scope."""
    from conftest import FIXTURES

    (path,) = (FIXTURES / run).rglob("*.xplane.pb")
    shutil.copytree(FIXTURES / run, tmp_path / "run")
    profile = Catalog(str(tmp_path), cache_dir=None).load("run").profile
    steps, spans = _raw_xplane(path)
    assert len(steps) >= 2
    _sums_hold(profile, [end - start for start, end in steps])
    table = profile.breakdown_table.frame()
    assert set(table["side"]) == {"host"}  # a CPU run: no device part
    for step, (start, end) in enumerate(steps):
        parts = dict(zip(*table[table["step"] == step][["category", "time_us"]].to_numpy().T))
        assert parts.get("input", 0.0) == pytest.approx(_covered_in(spans["input"], start, end), abs=1e-3)
        busy = sum(time for name, time in parts.items() if name != "untracked")
        assert 0 < busy <= _covered_in(spans["any"], start, end) + 1e-3
        assert parts.get("backward", 0.0) > 0, step
    assert profile.facts.step_breakdown_note.startswith("TensorFlow runs a step's ops on a pool of threads")


def test_a_keras_batch_sweeps_waterfall_adds_up_to_the_headline(tmp_path):
    """Keras 3 on TF 2, batch 2 -> 32 on the CPU: Compare's waterfall has a host bar per
    part, and the bars add up to each side's headline step."""
    from conftest import FIXTURES

    shutil.copytree(FIXTURES / "logdir" / "tf_keras", tmp_path / "tf_keras")
    summary = compare_document(
        Catalog(str(tmp_path), cache_dir=None), "tf_keras/cnn_cpu_bs2/train", "tf_keras/cnn_cpu_bs32/train"
    ).summary
    breakdown = summary.breakdown
    assert breakdown is not None, summary.breakdown_note
    host = [part for part in breakdown.parts if part.side == "host"]
    assert {part.category for part in host} >= {"input", "forward", "backward", "optimizer", "untracked"}
    assert sum(part.baseline_us for part in host) == pytest.approx(summary.baseline_step_wall_us, rel=1e-6)
    assert sum(part.target_us for part in host) == pytest.approx(summary.target_step_wall_us, rel=1e-6)
    # a bigger batch: more arithmetic a step, in the forward and backward parts
    forward = next(part for part in host if part.category == "forward")
    assert forward.target_us > forward.baseline_us


def test_check_names_the_part_of_the_step_that_regressed_with_its_interval(tmp_path):
    """Kineto's two captures of each run as two runs a side, num_workers 4 -> 0 as a
    regression: the gate names waiting for input as where the step's time grew, by the
    change the raw __next__ spans show (each capture's median over its steady steps,
    averaged over the captures), with its interval over the runs (two captures of
    num_workers 0 wait 45 ms and far less a step: the interval is wide, and says so)."""
    from tb_opcompare.cli.check_report import text
    from tb_opcompare.service.check import check_document

    oracle = {}
    for workers in (0, 4):
        source = REALTRACES / KINETO / f"resnet50_num_workers_{workers}"
        medians = []
        for capture, trace in enumerate(sorted(source.glob("*.json.gz"))):
            run = tmp_path / f"nw{workers}_capture{capture}"
            run.mkdir()
            shutil.copy(trace, run / trace.name)
            walls = [step["dur"] for step in _raw_steps(trace)[0]]
            medians.append(statistics.median(_input_per_step(trace)[len(walls) - len(steady_steps(walls)) :]))
        oracle[workers] = statistics.mean(medians)
    document = check_document(
        Catalog(str(tmp_path), cache_dir=None), ["nw4_capture0", "nw4_capture1"], ["nw0_capture0", "nw0_capture1"]
    )
    assert document.grew_most == "input"
    part = next(part for part in document.step_parts if part.side == "host" and part.category == "input")
    assert part.low_us < part.change_us < part.high_us
    assert part.change_us == pytest.approx(oracle[0] - oracle[4], rel=0.05)
    # the host parts of each side add up to the mean of its runs' median steady steps
    host = [part for part in document.step_parts if part.side == "host"]
    assert sum(part.target_us for part in host) > sum(part.baseline_us for part in host) + 30_000
    report = text(document)
    assert "step:     grew most in waiting for input (+" in report and "95% interval " in report
    if document.whole_step.verdict == "slower":
        assert "most of it in waiting for input" in document.headline


def test_a_tf_2_4_gpu_step_on_the_devices_steps_line_is_split(tmp_path):
    """The public TF 2.4 BERT xplane marks its one step on each GPU's Steps line only (its
    host marks none): the step is split over that line's span, by what the host's threads
    ran and by the busiest GPU's streams. Against the raw events (TensorFlow's own XSpace
    classes): the device's busy parts are exactly its stream events' union in the step, the
    input part exactly the get-next bodies' union, and each side adds up to the step."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    shutil.copytree(REALTRACES / "tf2_xplane_bert_multigpu", tmp_path / "bert")
    profile = Catalog(str(tmp_path), cache_dir=None).load("bert").profile
    (wall,) = profile.facts.step_times_us
    (path,) = (tmp_path / "bert").rglob("*.xplane.pb")
    space = xplane_pb2.XSpace.FromString(path.read_bytes())
    (host,) = [plane for plane in space.planes if plane.name.startswith("/host:")]
    origin = host.lines[0].timestamp_ns

    def spans(line, names=None, keep=lambda name: True):
        start = (line.timestamp_ns - origin) * 1000
        return [
            ((start + event.offset_ps) / 1e6, (start + event.offset_ps + event.duration_ps) / 1e6)
            for event in line.events
            if keep(names[event.metadata_id] if names else "")
        ]

    steps, busy = None, None
    for plane in space.planes:
        lines = {line.name: line for line in plane.lines}
        if "Steps" in lines and spans(lines["Steps"])[0][1] - spans(lines["Steps"])[0][0] == pytest.approx(wall):
            steps = spans(lines["Steps"])[0]
            busy = [span for name, line in lines.items() if name.startswith("Stream #") for span in spans(line)]
    assert steps is not None
    names = {key: metadata.name for key, metadata in host.event_metadata.items()}
    bodies = ("IteratorGetNextOp::", "IteratorGetNextAsOptionalOp::")  # on tf.data's threads
    ops = (":IteratorGetNext", ":IteratorGetNextAsOptional", ":MultiDeviceIteratorGetNextFromShard")  # executor threads
    waits = [span for line in host.lines for span in spans(line, names, lambda name: name.startswith(bodies))]
    waits += [
        span
        for line in host.lines
        if not line.name.startswith("tf_data")
        for span in spans(line, names, lambda name: name.endswith(ops))
    ]
    _sums_hold(profile, [wall])
    table = profile.breakdown_table.frame()
    parts = {(side, category): time for side, category, time in table[["side", "category", "time_us"]].to_numpy()}
    device_busy = sum(
        time for (side, category), time in parts.items() if side == "device" and category != "device_idle"
    )
    assert device_busy == pytest.approx(_covered_in(busy, *steps), rel=1e-6)
    assert (
        parts["host", "input"] == pytest.approx(_covered_in(waits, *steps), rel=1e-6) and parts["host", "input"] > 5_000
    )
    assert parts["host", "device_wait"] > 0  # moments no host thread ran, and the GPU did


H200_LOADER = FIXTURES / "gpu_h200" / "loader"  # train_dataloader.py: ResNet-18, batch 32, one H200


def _stopwatch(run: str) -> dict:
    """The job's own clock of its profiled steps (``time.perf_counter``), in µs."""
    clock = json.loads((FIXTURES / "stopwatch" / f"{run}.json").read_text())
    return {key: [value * 1e6 for value in clock[key]] for key in ("step_wall_s", "input_wait_s")}


def test_a_loaders_workers_saving_agrees_with_the_jobs_own_stopwatch():
    """Our own DataLoader job on an H200, num_workers 0 -> 4, three processes each (repeats,
    pooled): the step wall times, the headline and the waterfall's input bar are each checked
    against the clock the training loop kept itself (around each ``next()`` on the loader,
    and from one ``prof.step()`` to the next), which knows nothing of the profile."""
    repeats = {workers: [f"resnet18_num_workers_{workers}_rep{k}" for k in (1, 2, 3)] for workers in (0, 4)}
    catalog = Catalog(str(H200_LOADER), cache_dir=None)
    summary = compare_document(catalog, repeats[0], repeats[4]).summary
    breakdown = summary.breakdown
    assert breakdown is not None and summary.breakdown_note is None
    pooled = {}
    for workers, runs in repeats.items():
        steps = []  # (profile's wall, stopwatch's wall, stopwatch's input wait), steady steps pooled
        for run in runs:
            walls = [step["dur"] for step in _raw_steps(_newest_trace(H200_LOADER / run))[0]]
            clock = _stopwatch(run)
            # each profiled step as the job timed it, within the profiler's own cost per step
            assert walls == pytest.approx(clock["step_wall_s"], rel=0.03, abs=300), run
            first = len(walls) - len(steady_steps(walls))
            steps += list(zip(walls, clock["step_wall_s"], clock["input_wait_s"]))[first:]
        pooled[workers] = sorted(steps)
    for side, workers in (("baseline", 0), ("target", 4)):
        steps = pooled[workers]
        assert len(steps) % 2 == 1  # 15 steady steps a side here: the median is one step
        median = steps[len(steps) // 2]
        assert getattr(summary, f"{side}_step_wall_us") == pytest.approx(median[0], rel=1e-6)
        assert getattr(summary, f"{side}_step_wall_us") == pytest.approx(
            statistics.median(step[1] for step in steps), rel=0.03
        )
        waiting = next(part for part in breakdown.parts if part.side == "host" and part.category == "input")
        assert getattr(waiting, f"{side}_us") == pytest.approx(median[2], abs=300), side
    # the workers took the input wait out of the step: its bar is the waterfall's largest saving
    host = {part.category: part.change_us for part in breakdown.parts if part.side == "host"}
    assert min(host, key=host.get) == "input" and host["input"] < -8_000
    assert summary.headline_speedup > 1.15
    # and each repeat's own median step is shown beside the pooled one
    assert sorted(run.run for run in breakdown.runs) == sorted(repeats[0] + repeats[4])


@pytest.mark.parametrize(
    ("event", "category"),
    [
        ("model/dense/MatMul:MatMul", "forward"),
        ("Adam/update_dense/kernel/mul:Mul", "optimizer"),  # an optimizer's scope, in any case
        ("training/ADAMW/mul:Mul", "optimizer"),
        ("model/adam:Mul", "forward"),  # an op named like an optimizer is not in its scope
        ("\u017fgd/mul:Mul", "forward"),  # "ſ" lowers to itself, not to "s"
        ("x:ResourceApplyAdam", "optimizer"),
        ("gradients/dense/MatMul_grad/MatMul:MatMul", "backward"),
        ("gradient_tape/model/conv/Conv2DBackpropInput:Conv2DBackpropInput", "backward"),
        ("model/relu_grad/x:Mul", "backward"),
        ("model/relu_grad:Mul", "forward"),  # the op's own name, not a scope
        ("model/gradients_extra/x:Mul", "forward"),
        ("model/conv:ReluGrad", "backward"),  # a gradient kernel's type
        ("IteratorGetNext:IteratorGetNext", "input"),
        ("Iterator::Root::Prefetch", "input"),
        ("x:_Send", "copy"),
    ],
)
def test_a_tf_op_s_step_category_follows_its_type_and_scopes(event, category):
    """The rules that split a TF step by what its ops are (``tf_step_category``), on names
    as TF writes them, and on the names that nearly match one."""
    from tb_opcompare.ingest.readers.tf_ops import tf_step_category

    name, _, op_type = event.rpartition(":")
    assert tf_step_category(name, op_type) == category


@pytest.mark.parametrize(
    ("event", "parsed"),
    [
        ("scope/conv:Conv2D", ("scope/conv", "Conv2D")),
        ("a.b-c/d>e:_Fused", ("a.b-c/d>e", "_Fused")),
        ("a:b:Conv2D", None),  # a colon in the name
        ("conv:conv2d", None),  # a type starts upper case
        (":Conv2D", None),
        ("conv:Conv2D\n", None),
        ("ExecutorState::Process", None),
        ("EagerLocalExecute: MatMul", ("MatMul", "MatMul")),
        ("EagerLocalExecute: __inference_train_function_1508", None),
    ],
)
def test_a_tf_host_event_is_an_op_by_xprof_s_rule(event, parsed):
    from tb_opcompare.ingest.readers.tf_ops import parse_host_op

    assert parse_host_op(event) == parsed
