"""summary.json (the seed material's wrapper layout) against the step_stats it came from."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict

import pytest
from conftest import FIXTURES, REPO, run_cli

from tb_opcompare.errors import ProfileError
from tb_opcompare.ingest.readers.summary_json import read_summary_json
from tb_opcompare.schema.optable import OpProfile

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
    out = subprocess.run(
        [sys.executable, "-c", RECORD, str(tmp_path)], capture_output=True, text=True, cwd=REPO, timeout=180, check=True
    )
    recorded = json.loads(out.stdout.strip().splitlines()[-1])
    expected_total = defaultdict(float)
    expected_count = defaultdict(int)
    for _step, _device, node, duration in recorded["raw"]:
        expected_total[node] += duration
        expected_count[node] += 1
    with open(recorded["path"], "rb") as handle:
        profile = OpProfile.from_parsed(read_summary_json(recorded["path"], handle.read()))
    ops = profile.op_table.frame().set_index("op_name")
    assert dict(ops["self_us"]) == pytest.approx(dict(expected_total))
    assert dict(ops["occurrences"]) == dict(expected_count)
    assert profile.facts.steps == 3 and profile.facts.device == "CPU"
    assert ops.loc["hidden/MatMul", "op_type"] == "MatMul"


def test_committed_fixture_reads():
    path = FIXTURES / "summary_json/mlp_cpu/summary.json"
    profile = OpProfile.from_parsed(read_summary_json(str(path), path.read_bytes()))
    assert profile.facts.format == "summary_json" and profile.facts.steps == 2
    assert "logits/MatMul" in set(profile.op_table.frame()["op_name"])


def _allocated_per_node(summary: dict) -> dict[str, int]:
    """Independent of the reader: each node's total_bytes summed over the file's steps."""
    totals: dict[str, int] = {}
    for model_steps in summary["op_stats"].values():
        for hosts in model_steps.values():
            for devices in hosts.values():
                for nodes in devices.values():
                    for name, node in nodes.items():
                        totals[name] = totals.get(name, 0) + node["total_bytes"]
    return totals


def test_each_nodes_total_bytes_are_its_memory_allocated_on_either_device(tmp_path):
    path = FIXTURES / "summary_json/mlp_cpu/summary.json"
    summary = json.loads(path.read_text())
    expected = _allocated_per_node(summary)
    assert max(expected.values()) > 0
    ops = OpProfile.from_parsed(read_summary_json(str(path), path.read_bytes())).op_table.frame().set_index("op_name")
    assert ops["alloc_bytes"].to_dict() == pytest.approx(expected)
    assert ops["net_bytes"].isna().all()  # frees are not recorded
    # The wrapper writes accelerator nodes under their device's key: the same real nodes under
    # "GPU" have device rows only, which then hold the memory.
    for hosts in summary["op_stats"]["mlp"].values():
        for devices in hosts.values():
            devices["GPU"] = devices.pop("CPU")
    (tmp_path / "mlp_gpu").mkdir()
    gpu = tmp_path / "mlp_gpu" / "summary.json"
    gpu.write_text(json.dumps(summary))
    device_ops = OpProfile.from_parsed(read_summary_json(str(gpu), gpu.read_bytes())).op_table.frame()
    assert set(device_ops["side"]) == {"device"}
    assert device_ops.set_index("op_name")["alloc_bytes"].to_dict() == pytest.approx(expected)
    result = run_cli("compare", str(tmp_path), "--baseline", "mlp_gpu", "--target", "mlp_gpu", "--json", "--no-cache")
    rows = {row["key"]: row for row in json.loads(result.stdout)["rows"]}
    name = max(expected, key=expected.get)
    assert rows[name]["baseline_alloc_bytes"] == expected[name]


def test_wrong_nesting_names_the_expected_layout(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"op_stats": {"model": {"0": {"CPU": {"MatMul": {"duration": 3}}}}}}))
    with pytest.raises(ProfileError, match="op_stats -> model -> step -> ip -> device -> node"):
        OpProfile.from_parsed(read_summary_json(str(path), path.read_bytes()))
