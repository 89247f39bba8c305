"""ONNX Runtime's own profiles (``SessionOptions.enable_profiling``), read against the raw
files: the demo CNN exported from PyTorch and run by ONNX Runtime 1.32 (batch 1, 16, 64)
and 1.20 (batch 16), beside the same model's PyTorch eager inference
(tests/fixtures/onnxruntime, recorded by tests/fixtures/record_onnxruntime.py)."""

from __future__ import annotations

import collections
import json
import shutil
import statistics
from pathlib import Path

import msgspec
import pytest
from conftest import FIXTURES, profiler_step_durations, run_cli, steady_median

from tb_opcompare.errors import ProfileError
from tb_opcompare.ingest.formats import ONNXRUNTIME, read_profile
from tb_opcompare.schema.contract import CompareDocument, MatrixDocument, RunsDocument
from tb_opcompare.schema.events import HOST

ROOT = FIXTURES / "onnxruntime"
LOGDIR = ROOT / "logdir"
PROFILES = sorted(path for path in ROOT.glob("*/*_ort/*.json") if path.name != "opcompare.json")
BATCH_SIZES = (1, 16, 64)


def _profile_path(run_dir: Path) -> Path:
    (path,) = (path for path in run_dir.glob("*.json") if path.name != "opcompare.json")
    return path


def _raw_nodes(path: Path) -> dict[str, dict]:
    """Per node, straight from the JSON: executions, total µs and operator."""
    nodes: dict[str, dict] = collections.defaultdict(lambda: {"count": 0, "total": 0.0, "type": None})
    for event in json.loads(path.read_text()):
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            node = nodes[event["name"][: -len("_kernel_time")]]
            node["count"] += 1
            node["total"] += event["dur"]
            node["type"] = event["args"].get("op_name") or event["name"][: -len("_kernel_time")]
    return nodes


def _raw_runs(path: Path) -> list[float]:
    return [
        event["dur"]
        for event in sorted(json.loads(path.read_text()), key=lambda event: event["ts"])
        if event.get("cat") == "Session" and event.get("name") == "model_run"
    ]


@pytest.mark.parametrize("path", PROFILES, ids=lambda path: f"{path.parent.parent.name}/{path.parent.name}")
def test_every_node_execution_is_read(path):
    profile = read_profile(ONNXRUNTIME, [str(path)])
    ops = profile.op_table.frame()
    assert set(ops["side"]) == {HOST}
    rows = ops.set_index("op_name")
    nodes = _raw_nodes(path)
    assert set(rows.index) == set(nodes) and len(nodes) >= 6
    for name, node in nodes.items():
        assert rows.loc[name, "occurrences"] == node["count"]
        assert rows.loc[name, "op_type"] == node["type"]
        assert rows.loc[name, "total_us"] == pytest.approx(node["total"], rel=1e-9)
        assert rows.loc[name, "self_us"] == pytest.approx(node["total"], rel=1e-9)  # nodes never nest
    # each run is a step, and every node execution lies in one
    runs = _raw_runs(path)
    assert profile.step_count == profile.facts.steps == len(runs) == 10
    assert profile.facts.step_times_us == runs
    assert profile.step_table.frame()["occurrences"].sum() == ops["occurrences"].sum()
    assert profile.step_table.frame()["self_us"].sum() == pytest.approx(ops["self_us"].sum(), rel=1e-9)


def test_facts_come_from_the_data_without_sidecars_or_telling_names(tmp_path):
    """Run names that say nothing and no sidecars: the device, batch size, backend and
    precision are still the recording's, from the nodes' providers and first inputs."""
    for batch_size in BATCH_SIZES:
        run_dir = LOGDIR / f"cnn_infer_cpu_bs{batch_size}_ort"
        # an arbitrary prefix, as SessionOptions.profile_file_prefix allows
        target = tmp_path / f"run{batch_size}" / "my_session_2026.json"
        target.parent.mkdir()
        shutil.copyfile(_profile_path(run_dir), target)
    runs = msgspec.json.decode(run_cli("runs", str(tmp_path), "--no-cache", "--json").stdout, type=RunsDocument).runs
    assert [run.run for run in runs] == [f"run{size}" for size in BATCH_SIZES]
    for run, batch_size in zip(runs, BATCH_SIZES):
        assert (run.format, run.device, run.batch_size, run.compiler, run.precision) == (
            ONNXRUNTIME,
            "CPU",
            batch_size,
            "ONNX Runtime",
            "fp32",
        )
        assert run.batch_size_source.startswith("data: leading dimension of the first input")
        assert run.compiler_source == "data: an ONNX Runtime profile; providers CPUExecutionProvider (70 nodes)"


def test_pytorch_and_onnx_runtime_pair_and_meet_at_the_whole_step():
    """Each batch size's PyTorch run and ONNX Runtime run differ in the backend only: a pair;
    their compare says why no op meets and gives the step ratio, from the raw step markers."""
    document = msgspec.json.decode(run_cli("runs", str(LOGDIR), "--no-cache", "--json").stdout, type=RunsDocument)
    pairs = {(pair.baseline, pair.target, pair.varies) for pair in document.variant_pairs}
    assert pairs == {(f"cnn_infer_cpu_bs{n}", f"cnn_infer_cpu_bs{n}_ort", "compiler") for n in BATCH_SIZES}
    result = run_cli(
        "compare",
        str(LOGDIR),
        "--no-cache",
        "--json",
        "--baseline",
        "cnn_infer_cpu_bs64",
        "--target",
        "cnn_infer_cpu_bs64_ort",
    )
    compare = msgspec.json.decode(result.stdout, type=CompareDocument)
    notes = " ".join(compare.summary.notes)
    assert "different frameworks" in notes and "Group by op type" not in notes
    torch_steps = profiler_step_durations(LOGDIR / "cnn_infer_cpu_bs64")
    ort_steps = _raw_runs(_profile_path(LOGDIR / "cnn_infer_cpu_bs64_ort"))
    ratio = steady_median(torch_steps) / steady_median(ort_steps)
    assert compare.summary.headline_speedup == pytest.approx(ratio, rel=1e-9)
    assert f"{ratio:.2f}× in step wall time" in notes


def test_the_matrix_has_an_onnx_runtime_row_whose_latency_is_the_runs():
    """With no warm-up left out, a cell's latency is the median of its run's raw steps."""
    result = run_cli("matrix", str(LOGDIR), "--no-cache", "--json", "--warmup", "0")
    document = msgspec.json.decode(result.stdout, type=MatrixDocument)
    assert [column.key for column in document.columns] == ["CPU"]
    assert [(row.compiler, row.batch_size) for row in document.rows] == [
        (compiler, batch) for compiler in ("eager", "ONNX Runtime") for batch in (1, 16, 64)
    ]
    for cell in document.cells:
        (run,) = cell.runs
        steps = (
            _raw_runs(_profile_path(LOGDIR / run)) if run.endswith("_ort") else profiler_step_durations(LOGDIR / run)
        )
        assert cell.latency_us == pytest.approx(statistics.median(steps), rel=1e-9)


def test_a_broken_profile_names_the_file_and_what_is_wrong(tmp_path):
    path = _profile_path(LOGDIR / "cnn_infer_cpu_bs16_ort")
    text = path.read_text()
    cut = tmp_path / "cut.json"
    cut.write_text(text[: len(text) // 2])
    with pytest.raises(ProfileError) as error:
        read_profile(ONNXRUNTIME, [str(cut)])
    assert error.value.path == str(cut)
    unrun = tmp_path / "unrun.json"
    unrun.write_text(
        json.dumps(
            [event for event in json.loads(text) if event.get("cat") == "Session" and event["name"] != "model_run"]
        )
    )
    with pytest.raises(ProfileError, match="no node events"):
        read_profile(ONNXRUNTIME, [str(unrun)])


def test_a_hostile_batch_dimension_is_not_a_batch_size(tmp_path):
    """Leading dimensions no model has (2**62, 10**30) are not votes for a batch size, and
    nothing downstream (the cache, the runs listing) is asked to keep them."""
    events = json.loads(_profile_path(LOGDIR / "cnn_infer_cpu_bs16_ort").read_text())
    for event in events:
        for shape in (event.get("args") or {}).get("input_type_shape") or []:
            for dims in shape.values():
                if len(dims) >= 2:
                    dims[0] = 10**30 if event["name"].startswith("/1/") else 2**62
    run_dir = tmp_path / "hostile"
    run_dir.mkdir()
    (run_dir / "onnxruntime_profile_x.json").write_text(json.dumps(events))
    result = run_cli("runs", str(tmp_path), "--json")  # with the cache, which must store the facts
    assert result.returncode == 0, result.stderr
    (run,) = msgspec.json.decode(result.stdout, type=RunsDocument).runs
    assert run.batch_size is None and run.format == ONNXRUNTIME


def test_a_large_profile_is_read_in_batches_cut_between_lines(tmp_path, monkeypatch):
    """Over 16 MB a trace is decoded a batch at a time, cut where one event ends and the
    next begins. ONNX Runtime's input shapes hold "},{" inside an event; cuts are made at
    the line breaks it writes between events, so the fast path holds (the exact, slower
    way would be taken only where a cut failed to decode)."""
    from tb_opcompare.ingest.readers import chrome_json

    events = json.loads(_profile_path(LOGDIR / "cnn_infer_cpu_bs16_ort").read_text())
    period = max(event["ts"] + event["dur"] for event in events) + 1
    once = {"model_loading_uri", "session_initialization"}  # a session's start, not its runs
    runs = [event for event in events if event.get("cat") in ("Node", "Session") and event["name"] not in once]
    copies = chrome_json.WHOLE_TEXT_BYTES // len(json.dumps(runs)) + 2
    lines = [json.dumps({**event, "ts": event["ts"] + copy * period}) for copy in range(copies) for event in runs]
    path = tmp_path / "onnxruntime_profile_big.json"
    path.write_text("[\n" + ",\n".join(lines) + "\n]\n")
    assert path.stat().st_size > chrome_json.WHOLE_TEXT_BYTES

    def no_exact_way(self):
        raise AssertionError("a cut failed to decode: the reader fell back to splitting per event")

    monkeypatch.setattr(chrome_json.TraceText, "_split", no_exact_way)
    profile = read_profile(ONNXRUNTIME, [str(path)])
    nodes = _raw_nodes(_profile_path(LOGDIR / "cnn_infer_cpu_bs16_ort"))
    rows = profile.op_table.frame().set_index("op_name")
    assert {name: rows.loc[name, "occurrences"] for name in nodes} == {
        name: node["count"] * copies for name, node in nodes.items()
    }
    assert profile.facts.steps == 10 * copies
