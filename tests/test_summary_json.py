"""summary.json (the seed material's wrapper layout) against the step_stats it came from."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict

import pytest
from conftest import FIXTURES, REPO

from tb_opcompare.errors import ProfileError
from tb_opcompare.ingest.readers.summary_json import read_summary_json

RECORD = r"""
import json, sys
sys.path.insert(0, "tests/fixtures")
from record_tf1_summary import record
path, raw = record(sys.argv[1], steps=3)
print(json.dumps({"path": path, "raw": raw}))
"""


def test_totals_and_steps_match_the_recorded_step_stats(tmp_path):
    pytest.importorskip("tensorflow")
    # Graph mode must not leak into other tests: record in a child process.
    out = subprocess.run([sys.executable, "-c", RECORD, str(tmp_path)], capture_output=True, text=True, cwd=REPO,
                         timeout=180, check=True)
    recorded = json.loads(out.stdout.strip().splitlines()[-1])
    expected_total = defaultdict(float)
    expected_count = defaultdict(int)
    for _step, _device, node, duration in recorded["raw"]:
        expected_total[node] += duration
        expected_count[node] += 1
    with open(recorded["path"], "rb") as handle:
        profile = read_summary_json(recorded["path"], handle.read())
    ops = profile.ops.set_index("op_name")
    assert dict(ops["self_us"]) == pytest.approx(dict(expected_total))
    assert dict(ops["occurrences"]) == dict(expected_count)
    assert profile.facts.steps == 3 and profile.facts.device == "CPU"
    assert ops.loc["hidden/MatMul", "op_type"] == "MatMul"


def test_committed_fixture_reads():
    path = FIXTURES / "summary_json/mlp_cpu/summary.json"
    profile = read_summary_json(str(path), path.read_bytes())
    assert profile.facts.format == "summary_json" and profile.facts.steps == 2
    assert "logits/MatMul" in set(profile.ops["op_name"])


def test_wrong_nesting_names_the_expected_layout(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"op_stats": {"model": {"0": {"CPU": {"MatMul": {"duration": 3}}}}}}))
    with pytest.raises(ProfileError, match="op_stats -> model -> step -> ip -> device -> node"):
        read_summary_json(str(path), path.read_bytes())
