"""Ops placed in modules (issue 17): PyTorch's nn.Module calls (a trace recorded with
with_stack=True on an H100, tests/fixtures/gpu_h100/modules) and TF name scopes (the demo's
Keras CNN), compared with --group-by module."""

from __future__ import annotations

import collections
import gzip
import json

import msgspec
import pandas as pd
import pytest
from conftest import FIXTURES, REPO, run_cli
from in_process import PREFIX, plugin_client

from tb_opcompare.schema.contract import CompareDocument
from tb_opcompare.store.catalog import Catalog

MODULES = FIXTURES / "gpu_h100" / "modules"
RUN = "mnist_cnn_torch_stack_gpu_bs16"


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    Catalog(str(MODULES), cache_dir=str(cache)).load(RUN)
    return Catalog(str(MODULES), cache_dir=str(cache)).load(RUN).profile  # read back from the disk cache


def _innermost_modules(op_name: str) -> collections.Counter:
    """Independent of the reader: for each event of an op in the raw trace, the path of
    nn.Module ranges on its thread that contain its start."""
    (path,) = (MODULES / RUN).glob("*.pt.trace.json.gz")
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    modules = [e for e in events if e.get("cat") == "python_function" and e["name"].startswith("nn.Module: ")]
    found = collections.Counter()
    for event in events:
        if event.get("cat") != "cpu_op" or event["name"] != op_name:
            continue
        around = sorted((m for m in modules if m["tid"] == event["tid"] and m["ts"] <= event["ts"] < m["ts"] + m["dur"]),
                        key=lambda m: (m["ts"], -m["dur"]))
        found["/".join(m["name"][len("nn.Module: "):] for m in around)] += 1
    return found


def test_every_execution_is_placed_in_the_module_whose_call_it_ran_in(profile):
    modules = profile.module_ops
    for op in ("aten::conv2d", "aten::linear", "aten::relu"):
        placed = modules[(modules["side"] == "host") & (modules["op_name"] == op)]
        assert dict(zip(placed["module"], placed["occurrences"])) == dict(_innermost_modules(op)), op
    conv = modules[(modules["op_name"] == "aten::conv2d") & (modules["side"] == "host")]
    assert sorted(conv["module"]) == ["Sequential_0/Conv2d_0", "Sequential_0/Conv2d_1"]
    backward = modules[modules["op_name"] == "aten::convolution_backward"]
    assert set(backward["module"]) == {""}  # the autograd thread runs outside every module call


def test_module_rows_add_up_to_the_op_table(profile):
    """Nothing lost, nothing counted twice: per op and side, the executions and time over
    all modules are the op's own row (device: kernel time of the launching op)."""
    ops = profile.ops.set_index(["side", "op_name", "op_type"])
    sums = profile.module_ops.groupby(["side", "op_name", "op_type"])[["occurrences", "self_us"]].sum()
    host = sums.loc["host"]
    assert (host["occurrences"] == ops.loc["host"].loc[host.index, "occurrences"]).all()
    assert host["self_us"].to_numpy() == pytest.approx(ops.loc["host"].loc[host.index, "self_us"].to_numpy(), rel=1e-9)
    device = sums.loc["device"]
    assert device["self_us"].to_numpy() == pytest.approx(
        ops.loc["device"].loc[device.index, "self_us"].to_numpy(), rel=1e-9)
    assert (device["occurrences"] <= ops.loc["device"].loc[device.index, "occurrences"]).all()


def test_compare_by_module_on_pytorch_and_keras():
    result = run_cli("compare", str(MODULES), "--baseline", RUN, "--target", RUN, "--group-by", "module", "--json",
                     "--no-cache")
    msgspec.json.decode(result.stdout, type=CompareDocument)  # the contract holds for module rows
    rows = pd.DataFrame(json.loads(result.stdout)["rows"]).set_index("key")
    assert {"Sequential_0/Conv2d_0", "Sequential_0/Linear_1", "CrossEntropyLoss_0", "(outside modules)"} <= set(
        rows.index)
    assert (rows["op_type"] == "module").all() and (rows["speedup"] == 1.0).all()
    by_name = json.loads(run_cli("compare", str(MODULES), "--baseline", RUN, "--target", RUN, "--json",
                                 "--no-cache").stdout)
    assert rows["baseline_total_us"].sum() == pytest.approx(
        sum(row["baseline_total_us"] for row in by_name["rows"]), rel=1e-9)  # the same time, grouped otherwise

    demo = REPO / "demo_logs"
    keras = json.loads(run_cli("compare", str(demo), "--baseline", "tf_keras/mnist_cnn_cpu_bs16", "--target",
                               "tf_keras/mnist_cnn_cpu_bs64", "--group-by", "module", "--json", "--no-cache").stdout)
    ops = json.loads(run_cli("compare", str(demo), "--baseline", "tf_keras/mnist_cnn_cpu_bs16", "--target",
                             "tf_keras/mnist_cnn_cpu_bs64", "--json", "--no-cache").stdout)
    scopes = collections.defaultdict(float)
    for row in ops["rows"]:
        scope = row["key"].rpartition("/")[0] or "(top level)"
        scopes[scope] += row["baseline_total_us"] or 0.0
    assert {row["key"]: row["baseline_total_us"] or 0.0 for row in keras["rows"]} == pytest.approx(dict(scopes))
    assert "StatefulPartitionedCall/sequential_1/dense_1" in scopes


def test_routes_take_module_for_compare_only():
    client = plugin_client(MODULES)
    assert client.get(f"{PREFIX}/compare?baseline={RUN}&target={RUN}&group_by=module").status_code == 200
    answer = client.get(f"{PREFIX}/sweep?model=mnist_cnn_torch&group_by=module")
    assert answer.status_code == 400 and "expected one of name, type" in answer.json["error"]["message"]


def test_a_module_compare_against_a_run_without_stacks_says_why_nothing_matches():
    document = json.loads(run_cli("compare", str(MODULES.parent), "--baseline", f"modules/{RUN}", "--target",
                                  "demo/mnist_cnn_torch_gpu_bs16_rep1", "--group-by", "module", "--json",
                                  "--no-cache").stdout)
    assert any(note.startswith(f"Only modules/{RUN} records its nn.Module calls") for note in
               document["summary"]["notes"]), document["summary"]["notes"]
