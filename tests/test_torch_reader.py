"""The PyTorch reader against torch.profiler's own key_averages() and real GPU traces."""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest
from conftest import FIXTURES, REALTRACES, read_bytes

from tb_opcompare.errors import ProfileError
from tb_opcompare.ingest.readers import chrome_json
from tb_opcompare.ingest.readers.chrome_json import open_chrome_trace
from tb_opcompare.ingest.readers.torch_trace import read_torch_trace
from tb_opcompare.schema.optable import OpProfile


def read(path: Path):
    return OpProfile.from_parsed(read_torch_trace(str(path), open_chrome_trace(str(path), read_bytes(path))))


def test_cpu_self_times_agree_with_key_averages(tmp_path):
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(FIXTURES))
    from record_torch import record

    torch.set_num_threads(1)
    profiler, run_dir = record(str(tmp_path), batch_size=8)
    expected = {
        e.key: (e.count, e.self_cpu_time_total) for e in profiler.key_averages() if not e.key.startswith("ProfilerStep")
    }
    (trace,) = Path(run_dir).glob("*.pt.trace.json*")
    profile = read(trace)
    host = profile.op_table.frame()[profile.op_table.frame()["side"] == "host"].set_index("op_name")
    assert set(host.index) == set(expected)
    for name, (count, self_us) in expected.items():
        assert host.loc[name, "occurrences"] == count, name
        assert host.loc[name, "self_us"] == pytest.approx(self_us, rel=0.01, abs=0.01), name
    assert profile.facts.batch_size == 8
    assert profile.facts.batch_size_source.startswith("data")
    assert profile.facts.steps == 2
    assert profile.facts.device == "CPU"


def test_kernels_are_attributed_to_the_op_that_launched_them():
    path = REALTRACES / "torch_bert_small_h100_vs_mi300/h100/gaunernst_bert-small-uncased__1016001.json.gz"
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    # Independent walk: correlation -> runtime launch -> innermost enclosing cpu_op.
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    launches = {e["args"]["correlation"]: e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")}
    expected: dict[str, float] = defaultdict(float)
    for kernel in (e for e in events if e.get("cat") in ("kernel", "gpu_memcpy")):
        launch = launches[kernel["args"]["correlation"]]
        enclosing = [
            op
            for op in ops
            if op["tid"] == launch["tid"]
            and op["ts"] <= launch["ts"]
            and launch["ts"] + launch["dur"] <= op["ts"] + op["dur"]
        ]
        innermost = min(enclosing, key=lambda op: op["dur"])
        expected[innermost["name"]] += kernel["dur"]
    profile = read(path)
    device = profile.op_table.frame()[profile.op_table.frame()["side"] == "device"].set_index("op_name")["total_us"]
    assert dict(device.round(3)) == pytest.approx({k: round(v, 3) for k, v in expected.items()})
    assert profile.facts.device == "GPU"
    assert profile.facts.device_name == "NVIDIA H100 80GB HBM3"
    assert profile.facts.batch_size == 1


def test_old_category_names_of_pytorch_1_9():
    profile = read(next(REALTRACES.glob("torch_resnet50_v100/*.pt.trace.json.gz")))
    assert profile.facts.device_name == "Tesla V100-DGXS-32GB"
    assert profile.facts.steps == 6
    assert profile.facts.batch_size == 32
    device = profile.op_table.frame()[profile.op_table.frame()["side"] == "device"].set_index("op_name")
    conv = device.loc["aten::cudnn_convolution"]
    # Several kernels per convolution call: occurrences count calls, not kernels.
    assert conv["kernels"] > conv["occurrences"] > 0
    assert conv["mean_us"] == pytest.approx(conv["total_us"] / conv["occurrences"])


def test_amd_trace_reads_as_gpu_with_its_name():
    profile = read(REALTRACES / "torch_bert_small_h100_vs_mi300/mi300/gaunernst_bert-small-uncased__1016001.json.gz")
    assert profile.facts.device == "GPU"
    assert profile.facts.device_name == "AMD Instinct MI300X VF"


def test_truncated_gzip_names_the_problem(tmp_path):
    source = next(REALTRACES.glob("torch_resnet50_v100/*.json.gz")).read_bytes()
    path = tmp_path / "w.1.pt.trace.json.gz"
    path.write_bytes(source[: len(source) // 3])
    with pytest.raises(ProfileError, match="gzip stream is truncated"):
        open_chrome_trace(str(path), path.read_bytes()).materialize()


def test_json_that_is_not_a_trace(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"traceEvents": 3}')
    with pytest.raises(ProfileError, match="not a Chrome trace"):
        open_chrome_trace(str(path), path.read_bytes()).materialize()


BERT_H100 = REALTRACES / "torch_bert_small_h100_vs_mi300/h100/gaunernst_bert-small-uncased__1016001.json.gz"


def same_profile(first, second) -> None:
    keys = ["side", "op_name", "op_type"]
    pd.testing.assert_frame_equal(
        first.op_table.frame().sort_values(keys).reset_index(drop=True),
        second.op_table.frame().sort_values(keys).reset_index(drop=True),
    )
    assert vars(first.facts) == vars(second.facts)


@pytest.mark.parametrize("way", ["cut by searching the text", "cut by msgspec, event by event"])
def test_reading_events_in_small_batches_gives_the_same_table(monkeypatch, way):
    """Big traces are decoded a batch at a time to bound memory; nesting, kernel links
    and the batch size must not depend on where a batch ends."""
    whole = read(BERT_H100)
    assert (whole.op_table.frame()["side"] == "device").any()
    monkeypatch.setattr(chrome_json, "WHOLE_TEXT_BYTES", 0)
    monkeypatch.setattr(chrome_json, "BATCH_BYTES", 3000)
    monkeypatch.setattr(chrome_json, "BATCH_EVENTS", 7)
    if way.startswith("cut by msgspec"):
        monkeypatch.setattr(chrome_json.TraceText, "_find_cuts", lambda self: None)
    same_profile(whole, read(BERT_H100))


def test_a_cut_inside_a_string_falls_back_to_the_exact_split(tmp_path, monkeypatch):
    """An op named like the text between two events (``}, {``) draws a batch cut into
    the middle of a string; the batch does not decode, and the rest of the file is split
    event by event instead, with nothing lost or counted twice."""
    trace = json.loads(gzip.decompress(BERT_H100.read_bytes()))
    renamed = [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op"][-1]
    renamed["name"] = 'aten::odd}, {"ph": "X"'
    path = tmp_path / "w.1.pt.trace.json"
    path.write_text(json.dumps(trace, indent=1))
    whole = read(path)
    monkeypatch.setattr(chrome_json, "WHOLE_TEXT_BYTES", 0)
    monkeypatch.setattr(chrome_json, "BATCH_BYTES", 1)  # cut at the first "}, {" after every batch start
    fell_back = []
    split = chrome_json.TraceText._split
    monkeypatch.setattr(chrome_json.TraceText, "_split", lambda self: (fell_back.append(True), split(self)))
    same_profile(whole, read(path))
    assert fell_back and 'aten::odd}, {"ph": "X"' in set(whole.op_table.frame()["op_name"])


def test_a_broken_event_in_a_later_batch_is_named_by_its_index_in_the_file(tmp_path, monkeypatch):
    trace = json.loads(next((FIXTURES / "logdir/torch/cnn_torch_cpu_bs4").glob("*.pt.trace.json")).read_text())
    broken = max(i for i, e in enumerate(trace["traceEvents"]) if e.get("ph") == "X")
    trace["traceEvents"][broken]["dur"] = -3.0
    path = tmp_path / "w.1.pt.trace.json"
    path.write_text(json.dumps(trace))
    monkeypatch.setattr(chrome_json, "WHOLE_TEXT_BYTES", 0)
    monkeypatch.setattr(chrome_json, "BATCH_EVENTS", 10)
    with pytest.raises(ProfileError, match=rf"traceEvents\[{broken}\] .* negative duration"):
        read(path)


@pytest.mark.parametrize("whole_text_bytes", [0, 1 << 30], ids=["in_batches", "whole"])
def test_invalid_utf8_names_the_byte_in_the_file(tmp_path, monkeypatch, whole_text_bytes):
    text = next((FIXTURES / "logdir/torch/cnn_torch_cpu_bs4").glob("*.pt.trace.json")).read_bytes()
    at = text.rindex(b'"name": "aten::') + len(b'"name": "aten::')
    path = tmp_path / "w.1.pt.trace.json"
    path.write_bytes(text[:at] + b"\xff" + text[at + 1 :])
    monkeypatch.setattr(chrome_json, "WHOLE_TEXT_BYTES", whole_text_bytes)
    monkeypatch.setattr(chrome_json, "BATCH_EVENTS", 10)
    line = text.count(b"\n", 0, at) + 1
    with pytest.raises(ProfileError, match=f"not valid UTF-8 text at byte {at:,} \\(line {line}\\)"):
        read(path)


def test_batch_size_ignores_a_dataloader_inside_a_record_function_wrapper(tmp_path):
    """Inference over a DataLoader, each step wrapped in ``record_function`` (as Lightning
    and many loops do): the DataLoader indexes its 1,000-sample data set inside the
    wrapper, 16 times a step, and must not outvote the model's few ops on the batch of 8."""
    import torch

    from tb_opcompare.store.catalog import Catalog

    data = torch.utils.data.TensorDataset(torch.randn(1000, 24), torch.randint(0, 5, (1000,)))
    loader = torch.utils.data.DataLoader(data, batch_size=8)
    model = torch.nn.Sequential(torch.nn.Linear(24, 12), torch.nn.ReLU(), torch.nn.Linear(12, 5))
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=2, repeat=1)
    handler = torch.profiler.tensorboard_trace_handler(str(tmp_path / "infer_cpu"))
    with (
        torch.no_grad(),
        torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU],
            schedule=schedule,
            on_trace_ready=handler,
            record_shapes=True,
        ) as profiler,
    ):
        batches = iter(loader)
        for _ in range(3):
            with torch.profiler.record_function("infer_step"):
                features, _labels = next(batches)
                model(features)
            profiler.step()
    facts = Catalog(str(tmp_path), cache_dir=None).load("infer_cpu").profile.facts
    assert facts.batch_size == 8, facts.batch_size_source


def test_a_weak_vote_yields_to_the_most_trusted_claim(tmp_path):
    """A sequence-first transformer at inference (no loss): its ops see [12, 8, 32], the
    sequence length first, so the tensors only weakly point at a size. The run name then
    decides, and where a sidecar speaks, the sidecar does, before the name."""
    import torch

    from tb_opcompare.store.catalog import Catalog

    layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, batch_first=False)
    model = torch.nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False).eval()
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=2, repeat=1)
    run = tmp_path / "encoder_cpu_bs8"
    with (
        torch.no_grad(),
        torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU],
            schedule=schedule,
            on_trace_ready=torch.profiler.tensorboard_trace_handler(str(run)),
            record_shapes=True,
        ) as profiler,
    ):
        for _ in range(3):
            model(torch.randn(12, 8, 32))
            profiler.step()
    facts = Catalog(str(tmp_path), cache_dir=None).load(run.name).profile.facts
    assert (facts.batch_size, facts.batch_size_source) == (8, "run name")
    (warning,) = facts.warnings
    assert warning.startswith("the profile's tensors weakly suggest batch size 12 (only ")
    assert warning.endswith("of the evidence agrees); using 8 from the run name")
    shutil.copytree(run, tmp_path / "encoder_cpu_bs16")
    (tmp_path / "encoder_cpu_bs16" / "opcompare.json").write_text('{"batch_size": 8}')
    facts = Catalog(str(tmp_path), cache_dir=None).load("encoder_cpu_bs16").profile.facts
    assert (facts.batch_size, facts.batch_size_source) == (8, "opcompare.json")


def test_a_trace_with_kernels_only_is_read(tmp_path):
    """The H100 trace's kernels and copies without any host event (as a device-only
    export leaves them): each is listed under its own name, with a warning."""
    import gzip

    from tb_opcompare.store.catalog import Catalog

    document = json.loads(gzip.decompress(BERT_H100.read_bytes()))
    document["traceEvents"] = [
        event
        for event in document["traceEvents"]
        if event.get("cat") in ("kernel", "gpu_memcpy") or event.get("ph") == "M"
    ]
    (tmp_path / "kernels_gpu").mkdir()
    (tmp_path / "kernels_gpu" / "w.1.pt.trace.json").write_text(json.dumps(document))
    profile = Catalog(str(tmp_path), cache_dir=None).load("kernels_gpu").profile
    kernels = sum(1 for event in document["traceEvents"] if event.get("ph") == "X")
    assert profile.facts.device == "GPU" and int(profile.op_table.frame()["kernels"].sum()) == kernels
    assert any("have no launching op in the trace" in warning for warning in profile.facts.warnings)


def test_spread_of_leaf_ops_matches_their_event_durations():
    """For ops that never enclose another event, one occurrence's self time is its
    duration: their percentiles must be numpy's, straight from the trace's events."""
    import numpy as np

    from tb_opcompare.store.catalog import Catalog

    path = next((FIXTURES / "logdir" / "torch" / "cnn_torch_cpu_bs4").glob("*.pt.trace.json"))
    events = [
        e
        for e in json.loads(path.read_text())["traceEvents"]
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")
    ]

    def encloses(outer, inner):
        return (
            outer is not inner
            and outer["tid"] == inner["tid"]
            and outer["ts"] <= inner["ts"]
            and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"]
        )

    by_name: dict[str, list[dict]] = {}
    for event in events:
        if event["cat"] == "cpu_op":
            by_name.setdefault(event["name"], []).append(event)
    leaves = {
        name: [e["dur"] for e in group]
        for name, group in by_name.items()
        if len(group) >= 4 and not any(encloses(e, other) for e in group for other in events)
    }
    assert len(leaves) >= 5
    ops = (
        Catalog(str(path.parent.parent), cache_dir=None)
        .load(path.parent.name)
        .profile.op_table.frame()
        .set_index("op_name")
    )
    for name, durations in leaves.items():
        expected = np.quantile(durations, [0.1, 0.5, 0.9])
        got = ops.loc[name, ["p10_us", "median_us", "p90_us"]].to_numpy(dtype=float)
        assert got == pytest.approx(expected, rel=1e-5, abs=1e-3), name


def test_a_runtime_call_named_as_its_category_shares_the_row_of_an_op_of_that_name(tmp_path):
    """Rows are keyed by (name, type): an op's type is its name, a runtime call's its
    category. A runtime call named ``cuda_runtime`` and an op of that name have the same
    key as text, so they are one row, as the key reads; the reader keys rows on codes,
    and the tables must still merge the two (the real H100 trace, two events renamed)."""
    import gzip

    document = json.loads(gzip.decompress(BERT_H100.read_bytes()))
    events = document["traceEvents"]
    op = next(e for e in events if e.get("cat") == "cpu_op" and e.get("ph") == "X")
    call = next(e for e in events if e.get("cat") == "cuda_runtime" and e.get("ph") == "X")
    op["name"] = call["name"] = "cuda_runtime"
    path = tmp_path / "w.1.pt.trace.json"
    path.write_text(json.dumps(document))
    ops = read(path).op_table.frame()
    rows = ops[(ops["side"] == "host") & (ops["op_name"] == "cuda_runtime")]
    assert len(rows) == 1 and rows["op_type"].iloc[0] == "cuda_runtime"
    assert int(rows["occurrences"].iloc[0]) == 2
    assert not ops.duplicated(["side", "op_name", "op_type"]).any()
