"""Fuzz every reader over mutated real fixtures: whatever the bytes, the only exception
that may escape is the package's documented ProfileError.

The suite runs a short fuzz (TB_OPCOMPARE_FUZZ_EXAMPLES, default 30 per reader);
`make fuzz` runs a long one.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import tempfile
from pathlib import Path

import pytest
from conftest import FIXTURES, LOGDIR, REALTRACES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tb_opcompare.errors import ProfileError
from tb_opcompare.ingest.formats import read_profile
from tb_opcompare.schema.events import OP_COLUMNS

EXAMPLES = int(os.environ.get("TB_OPCOMPARE_FUZZ_EXAMPLES", "30"))


def _first(pattern_root: Path, pattern: str) -> Path:
    return next(pattern_root.glob(pattern))


SEEDS = {
    # reader format -> (file name to write, real seed bytes)
    "xplane": ("vm.xplane.pb", _first(LOGDIR / "tf_keras", "cnn_cpu_bs2/**/*.xplane.pb").read_bytes()),
    "xplane-gpu": (
        "vm.xplane.pb",
        _first(REALTRACES, "tf2_xplane_bert_multigpu/**/*.xplane.pb").read_bytes()[:400_000],
    ),
    "pytorch": ("w.1.pt.trace.json", _first(LOGDIR / "torch", "cnn_torch_cpu_bs4/*.pt.trace.json").read_bytes()),
    "pytorch-gz": (
        "w.1.pt.trace.json.gz",
        gzip.compress(_first(LOGDIR / "torch", "cnn_torch_cpu_bs4/*.pt.trace.json").read_bytes()[:60_000]),
    ),
    "chrome_trace": ("timeline.json", (LOGDIR / "tf1" / "mlp_gpu" / "timeline_02_step_1.json").read_bytes()),
    "tf_trace_json": ("vm.trace.json.gz", _first(FIXTURES / "tf_trace_json", "**/*.trace.json.gz").read_bytes()),
    "summary_json": ("summary.json", (FIXTURES / "summary_json" / "mlp_cpu" / "summary.json").read_bytes()),
    "onnxruntime": (
        "onnxruntime_profile_x.json",
        _first(FIXTURES / "onnxruntime" / "logdir", "cnn_infer_cpu_bs16_ort/onnxruntime_profile_*.json").read_bytes(),
    ),
}
READER_FORMAT = {"xplane-gpu": "xplane", "pytorch-gz": "pytorch"}


@st.composite
def mutated(draw, seed: bytes) -> bytes:
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["truncate", "flip", "insert", "overwrite", "delete"]))
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        if kind == "truncate":
            del data[at:]
        elif kind == "flip":
            data[at] ^= draw(st.integers(1, 255))
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "overwrite":
            chunk = draw(st.binary(min_size=1, max_size=32))
            data[at : at + len(chunk)] = chunk
        else:
            del data[at : at + draw(st.integers(1, 64))]
    return bytes(data)


@pytest.mark.parametrize("seed_name", sorted(SEEDS))
def test_reader_survives_mutations(seed_name):
    file_name, seed = SEEDS[seed_name]
    reader_format = READER_FORMAT.get(seed_name, seed_name)
    scratch = Path(tempfile.mkdtemp(prefix="fuzz-"))
    target = scratch / file_name

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=EXAMPLES <= 50,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(mutated(seed))
    def check(data):
        target.write_bytes(data)
        try:
            profile = read_profile(reader_format, [str(target)])
        except ProfileError as error:
            assert error.path and error.reason
            return
        assert list(profile.op_table.frame().columns) == OP_COLUMNS

    check()


# Structure-aware generation: well-formed JSON traces whose values are odd (extreme or
# mistyped numbers, odd strings, missing fields, deep nesting), which byte mutations of a
# real file rarely reach.
ODD_NUMBERS = st.one_of(
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, -0.0, 1e308, -1e308, 5e-324, 2**63, -(2**63), 3.2e13, 1e-9]),
)
ODD_TEXT = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", "ProfilerStep#1", "cpu_op", "kernel", "X", "B", "aten::mm", "[[4, 8], []]", "\x00", "\ud7ff"]),
)
ODD_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), ODD_NUMBERS, ODD_TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(ODD_TEXT, inner, max_size=4)),
    max_leaves=12,
)


@st.composite
def odd_event(draw) -> dict:
    event = {
        "ph": draw(st.sampled_from(["X", "X", "X", "B", "E", "i", "M", "f", "s"]) | ODD_TEXT),
        "cat": draw(
            st.sampled_from(
                [
                    "cpu_op",
                    "kernel",
                    "cuda_runtime",
                    "user_annotation",
                    "gpu_memcpy",
                    "Operator",
                    "Kernel",
                    "Node",
                    "Session",
                ]
            )
            | ODD_TEXT
        ),
        "name": draw(
            st.sampled_from(
                [
                    "aten::mm",
                    "ProfilerStep#3",
                    "aten::conv2d",
                    "sgemm",
                    "model_run",
                    "/1/Conv_kernel_time",
                    "_kernel_time",
                ]
            )
            | ODD_TEXT
        ),
        "ts": draw(ODD_NUMBERS),
        "dur": draw(ODD_NUMBERS),
        "pid": draw(ODD_NUMBERS | ODD_TEXT),
        "tid": draw(ODD_NUMBERS | ODD_TEXT),
        "args": draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "correlation": ODD_NUMBERS,
                    "Input Dims": ODD_VALUES,
                    "External id": ODD_NUMBERS,
                    "device": ODD_NUMBERS,
                    "op_name": ODD_TEXT,
                    "provider": ODD_TEXT,
                    "input_type_shape": ODD_VALUES,
                },
            )
            | ODD_VALUES
        ),
    }
    for field in draw(st.lists(st.sampled_from(sorted(event)), max_size=3)):
        event.pop(field, None)
    return event


@st.composite
def odd_trace(draw) -> tuple[str, str, bytes]:
    """(reader format, file name, bytes)."""
    kind = draw(st.sampled_from(["pytorch", "chrome_trace", "summary_json", "onnxruntime"]))
    if kind == "summary_json":
        nodes = draw(
            st.dictionaries(
                ODD_TEXT, st.fixed_dictionaries({"duration": ODD_NUMBERS}) | ODD_VALUES, min_size=1, max_size=6
            )
        )
        document = {
            "op_stats": {"m": {draw(ODD_TEXT): {"h": {draw(st.sampled_from(["CPU", "GPU"]) | ODD_TEXT): nodes}}}}
        }
        name = "summary.json"
    elif kind == "onnxruntime":  # a bare array of events
        document = draw(st.lists(odd_event(), max_size=25))
        name = "onnxruntime_profile_x.json"
    else:
        document = {"traceEvents": draw(st.lists(odd_event(), max_size=25))}
        name = "w.1.pt.trace.json" if kind == "pytorch" else "timeline.json"
    text = json.dumps(document)
    depth = draw(st.sampled_from([0, 0, 0, 50_000]))
    if depth:  # nesting far deeper than any writer produces, in the first place a value may go
        text = text.replace("{", "{" + '"deep": ' + "[" * depth + "]" * depth + ", ", 1)
    data = text.encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        name, data = name + ".gz", gzip.compress(data, 1)
    return kind, name, data


def test_readers_survive_well_formed_traces_with_odd_values():
    scratch = Path(tempfile.mkdtemp(prefix="fuzz-structured-"))

    @settings(
        max_examples=EXAMPLES * 4,
        deadline=None,
        derandomize=EXAMPLES <= 50,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(odd_trace())
    def check(case):
        kind, name, data = case
        target = scratch / name
        target.write_bytes(data)
        try:
            profile = read_profile(kind, [str(target)])
        except ProfileError as error:
            assert error.path == str(target) and error.reason
            return
        finally:
            target.unlink()
        assert list(profile.op_table.frame().columns) == OP_COLUMNS
        assert profile.op_table.frame()["total_us"].map(math.isfinite).all()

    check()
