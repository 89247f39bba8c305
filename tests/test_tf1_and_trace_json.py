"""TF1 timelines (hand-computed sums) and TF 2.x trace-viewer JSON (against the xplane)."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict

import pytest
from conftest import FIXTURES, LOGDIR, read_bytes

from tb_opcompare.ingest.readers.chrome_json import open_chrome_trace
from tb_opcompare.ingest.readers.tf1_timeline import read_tf1_timeline
from tb_opcompare.ingest.readers.tf_trace_json import read_tf_trace_json
from tb_opcompare.ingest.readers.xplane import read_xplane_session
from tb_opcompare.schema.optable import OpProfile

CPU = LOGDIR / "tf1/mlp_cpu/timeline_02_step_1.json"
GPU = LOGDIR / "tf1/mlp_gpu/timeline_02_step_1.json"


def read(path):
    text = open_chrome_trace(str(path), read_bytes(path))
    return OpProfile.from_parsed(read_tf1_timeline(str(path), text.materialize(), text))


def sums_by_process(path, predicate):
    events = json.loads(path.read_text())["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M"}
    sums = defaultdict(float)
    for e in events:
        if e.get("ph") == "X" and predicate(names[e["pid"]]):
            sums[e["args"]["name"]] += e["dur"]
    return sums


def test_cpu_timeline_means_match_hand_sums():
    expected = sums_by_process(CPU, lambda p: p.endswith("cpu:0 Compute"))
    ops = read(CPU).op_table.frame().set_index("op_name")
    assert (ops["side"] == "host").all()
    assert dict(ops["self_us"]) == pytest.approx(dict(expected))
    matmul = ops.loc["layer_1/fully_connected/MatMul"]
    assert matmul["op_type"] == "MatMul" and matmul["occurrences"] == 1
    assert matmul["mean_us"] == expected["layer_1/fully_connected/MatMul"]


def test_gpu_kernels_counted_once_from_stream_all_and_memcpy():
    profile = read(GPU)
    assert profile.facts.device == "GPU" and profile.facts.steps == 1
    expected = sums_by_process(GPU, lambda p: p.endswith("stream:all Compute") or p.endswith("memcpy Compute"))
    device = profile.op_table.frame()[profile.op_table.frame()["side"] == "device"].set_index("op_name")["total_us"]
    assert dict(device) == pytest.approx(dict(expected))
    per_stream = sums_by_process(GPU, lambda p: "/stream:" in p and "stream:all" not in p)
    assert sum(device) < sum(expected.values()) + sum(per_stream.values())


def test_trace_json_agrees_with_the_xplane_it_was_converted_from():
    (trace_path,) = (FIXTURES / "tf_trace_json").glob("**/*.trace.json.gz")
    (xplane,) = LOGDIR.glob("tf_keras/cnn_cpu_bs8/**/*.xplane.pb")
    trace = open_chrome_trace(str(trace_path), read_bytes(trace_path)).materialize()
    from_json = OpProfile.from_parsed(read_tf_trace_json(str(trace_path), trace)).op_table.frame()
    from_xplane = OpProfile.from_parsed(read_xplane_session([str(xplane)], read_bytes)).op_table.frame()
    left = from_json.set_index("op_name")["self_us"].sort_index()
    right = from_xplane.set_index("op_name")["self_us"].sort_index()
    assert list(left.index) == list(right.index)
    assert left.to_numpy() == pytest.approx(right.to_numpy(), abs=0.002)


def test_a_trace_json_reads_the_facts_its_xplane_reads(tmp_path):
    """Issue 31, item 6: TF 2.0-2.3 users have only the trace.json.gz rendering of a
    session. The fixture is xprof's own rendering of tf_keras/cnn_cpu_bs8's xplane: the
    batch size (tf.data's element shapes), the steps and each step's wall time read the
    same from both (before: the batch came from the run name and no step had a time)."""
    from tb_opcompare.store.catalog import Catalog

    shutil.copytree(FIXTURES / "tf_trace_json" / "cnn_cpu_bs8", tmp_path / "json")
    shutil.copytree(FIXTURES / "logdir" / "tf_keras" / "cnn_cpu_bs8" / "train", tmp_path / "xplane")
    catalog = Catalog(str(tmp_path), cache_dir=None)
    rendered, xplane = (catalog.load(run).profile.facts for run in ("json", "xplane"))
    assert rendered.format == "tf_trace_json" and xplane.format == "xplane"
    assert (
        (rendered.batch_size, rendered.batch_size_source)
        == (xplane.batch_size, xplane.batch_size_source)
        == (8, "data: tf.data input elements (Iterator::Root shapes)")
    )
    assert (rendered.steps, rendered.steps_source) == (xplane.steps, xplane.steps_source)
    assert rendered.steps == 5 and rendered.step_times_us == pytest.approx(xplane.step_times_us, rel=1e-6)
    assert rendered.device == xplane.device == "CPU"
