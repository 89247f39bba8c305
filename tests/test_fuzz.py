"""Fuzz every reader over mutated real fixtures: whatever the bytes, the only exception
that may escape is the package's documented ProfileError.

The suite runs a short fuzz (TB_OPCOMPARE_FUZZ_EXAMPLES, default 30 per reader);
`make fuzz` runs a long one.
"""

from __future__ import annotations

import gzip
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FIXTURES, LOGDIR, REALTRACES
from tb_opcompare.catalog import read_profile
from tb_opcompare.errors import ProfileError
from tb_opcompare.optable import OP_COLUMNS

EXAMPLES = int(os.environ.get("TB_OPCOMPARE_FUZZ_EXAMPLES", "30"))


def _first(pattern_root: Path, pattern: str) -> Path:
    return next(pattern_root.glob(pattern))


SEEDS = {
    # reader format -> (file name to write, real seed bytes)
    "xplane": ("vm.xplane.pb", _first(LOGDIR / "tf_keras", "cnn_cpu_bs2/**/*.xplane.pb").read_bytes()),
    "xplane-gpu": ("vm.xplane.pb", _first(REALTRACES, "tf2_xplane_bert_multigpu/**/*.xplane.pb").read_bytes()[:400_000]),
    "pytorch": ("w.1.pt.trace.json", _first(LOGDIR / "torch", "cnn_torch_cpu_bs4/*.pt.trace.json").read_bytes()),
    "pytorch-gz": ("w.1.pt.trace.json.gz", gzip.compress(
        _first(LOGDIR / "torch", "cnn_torch_cpu_bs4/*.pt.trace.json").read_bytes()[:60_000])),
    "chrome_trace": ("timeline.json", (LOGDIR / "tf1" / "mlp_gpu" / "timeline_02_step_1.json").read_bytes()),
    "tf_trace_json": ("vm.trace.json.gz", _first(FIXTURES / "tf_trace_json", "**/*.trace.json.gz").read_bytes()),
    "summary_json": ("summary.json", (FIXTURES / "summary_json" / "mlp_cpu" / "summary.json").read_bytes()),
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
            data[at:at + len(chunk)] = chunk
        else:
            del data[at:at + draw(st.integers(1, 64))]
    return bytes(data)


@pytest.mark.parametrize("seed_name", sorted(SEEDS))
def test_reader_survives_mutations(seed_name):
    file_name, seed = SEEDS[seed_name]
    reader_format = READER_FORMAT.get(seed_name, seed_name)
    scratch = Path(tempfile.mkdtemp(prefix="fuzz-"))
    target = scratch / file_name

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 50,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(mutated(seed))
    def check(data):
        target.write_bytes(data)
        try:
            profile = read_profile(reader_format, [str(target)])
        except ProfileError as error:
            assert error.path and error.reason
            return
        assert list(profile.ops.columns) == OP_COLUMNS

    check()
