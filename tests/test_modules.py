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

from tb_opcompare.analysis.modules import module_tree
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
        around = sorted(
            (m for m in modules if m["tid"] == event["tid"] and m["ts"] <= event["ts"] < m["ts"] + m["dur"]),
            key=lambda m: (m["ts"], -m["dur"]),
        )
        found["/".join(m["name"][len("nn.Module: ") :] for m in around)] += 1
    return found


def test_every_execution_is_placed_in_the_module_whose_call_it_ran_in(profile):
    modules = profile.module_table.frame()
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
    ops = profile.op_table.frame().set_index(["side", "op_name", "op_type"])
    sums = profile.module_table.frame().groupby(["side", "op_name", "op_type"])[["occurrences", "self_us"]].sum()
    host = sums.loc["host"]
    assert (host["occurrences"] == ops.loc["host"].loc[host.index, "occurrences"]).all()
    assert host["self_us"].to_numpy() == pytest.approx(ops.loc["host"].loc[host.index, "self_us"].to_numpy(), rel=1e-9)
    device = sums.loc["device"]
    assert device["self_us"].to_numpy() == pytest.approx(
        ops.loc["device"].loc[device.index, "self_us"].to_numpy(), rel=1e-9
    )
    assert (device["occurrences"] <= ops.loc["device"].loc[device.index, "occurrences"]).all()


def test_compare_by_module_on_pytorch_and_keras():
    result = run_cli(
        "compare", str(MODULES), "--baseline", RUN, "--target", RUN, "--group-by", "module", "--json", "--no-cache"
    )
    msgspec.json.decode(result.stdout, type=CompareDocument)  # the contract holds for module rows
    rows = pd.DataFrame(json.loads(result.stdout)["rows"]).set_index("key")
    assert {"Sequential_0/Conv2d_0", "Sequential_0/Linear_1", "CrossEntropyLoss_0", "(outside modules)"} <= set(
        rows.index
    )
    assert (rows["op_type"] == "module").all() and (rows["speedup"] == 1.0).all()
    by_name = json.loads(
        run_cli("compare", str(MODULES), "--baseline", RUN, "--target", RUN, "--json", "--no-cache").stdout
    )
    assert rows["baseline_total_us"].sum() == pytest.approx(
        sum(row["baseline_total_us"] for row in by_name["rows"]), rel=1e-9
    )  # the same time, grouped otherwise

    demo = REPO / "demo_logs"
    keras = json.loads(
        run_cli(
            "compare",
            str(demo),
            "--baseline",
            "tf_keras/mnist_cnn_cpu_bs16",
            "--target",
            "tf_keras/mnist_cnn_cpu_bs64",
            "--group-by",
            "module",
            "--json",
            "--no-cache",
        ).stdout
    )
    ops = json.loads(
        run_cli(
            "compare",
            str(demo),
            "--baseline",
            "tf_keras/mnist_cnn_cpu_bs16",
            "--target",
            "tf_keras/mnist_cnn_cpu_bs64",
            "--json",
            "--no-cache",
        ).stdout
    )
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
    document = json.loads(
        run_cli(
            "compare",
            str(MODULES.parent),
            "--baseline",
            f"modules/{RUN}",
            "--target",
            "demo/mnist_cnn_torch_gpu_bs16_rep1",
            "--group-by",
            "module",
            "--json",
            "--no-cache",
        ).stdout
    )
    assert any(
        note.startswith(f"Only modules/{RUN} records its nn.Module calls") for note in document["summary"]["notes"]
    ), document["summary"]["notes"]


def _tree(logdir, baseline, target) -> dict:
    result = run_cli("modules", str(logdir), "--baseline", baseline, "--target", target, "--json", "--no-cache")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _children_add_up(nodes: list[dict]) -> None:
    children = collections.defaultdict(list)
    for node in nodes:
        children[node["parent"]].append(node)
    for node in nodes:
        kids = children.get(node["id"])
        if node["kind"] == "module" and kids:
            for side in ("baseline_us", "target_us"):
                assert node[side] == pytest.approx(sum(kid[side] or 0.0 for kid in kids), rel=1e-9), node["id"]


def test_the_module_tree_adds_up_from_ops_to_the_whole_model():
    """PyTorch nn.Module calls: every module's time is its sub-modules' and ops'; the root
    is the compare's op time per step; an op sits under the module call it ran in."""
    document = _tree(MODULES, RUN, RUN)
    nodes = document["nodes"]
    assert (document["source"], document["per_step"], document["notes"]) == ("nn.Module calls", True, [])
    assert nodes[0]["id"] == "" and nodes[0]["parent"] is None and nodes[0]["baseline_share"] == 1.0
    _children_add_up(nodes)
    compared = json.loads(
        run_cli("compare", str(MODULES), "--baseline", RUN, "--target", RUN, "--json", "--no-cache").stdout
    )["summary"]
    assert nodes[0]["baseline_us"] == pytest.approx(compared["baseline_time_per_step_us"], rel=1e-9)
    by_id = {node["id"]: node for node in nodes}
    assert by_id["Sequential_0/Conv2d_0/aten::conv2d"]["parent"] == "Sequential_0/Conv2d_0"
    assert by_id["Sequential_0/Conv2d_0"]["parent"] == "Sequential_0"
    positions = {node["id"]: position for position, node in enumerate(nodes)}
    assert all(positions[node["parent"]] < positions[node["id"]] for node in nodes[1:])  # parents first


def test_the_demos_pytorch_cpu_to_gpu_pair_fills_the_modules_view():
    """The demo logdir's PyTorch runs recorded with with_stack=True (demo_logs/torch_modules,
    the CPU and the H200 of one host): Modules shows each nn.Module the raw traces call, on
    both sides, adding up; the Memory view of the same pair has each side's peak, the GPU's
    on the GPU."""
    demo = REPO / "demo_logs"
    runs = ["torch_modules/mnist_cnn_torch_stack_cpu_bs64", "torch_modules/mnist_cnn_torch_stack_gpu_bs64"]
    document = _tree(demo, *runs)
    assert document["source"] == "nn.Module calls" and document["notes"] == []
    nodes = document["nodes"]
    _children_add_up(nodes)
    shown = {node["name"]: node for node in nodes if node["kind"] == "module"}
    for run in runs:
        (trace,) = (demo / run).glob("*.pt.trace.json.gz")
        called = {
            event["name"][len("nn.Module: ") :]
            for event in json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
            if event.get("cat") == "python_function" and event["name"].startswith("nn.Module: ")
        }
        assert {"Conv2d_0", "Conv2d_1", "Linear_0"} <= called <= set(shown) | {"MNISTNet_0", "Net_0"}, run
    assert all(shown[name]["baseline_us"] and shown[name]["target_us"] for name in ("Conv2d_0", "Linear_0"))
    assert shown["Conv2d_0"]["speedup"] > 1  # the GPU's convolution is faster, under the same module
    memory = json.loads(run_cli("memory", str(demo), "--baseline", runs[0], "--target", runs[1], "--json").stdout)
    assert memory["baseline"]["peak_memory_bytes"].get("CPU") and memory["target"]["peak_memory_bytes"].get("GPU:0")


def test_the_keras_tree_follows_name_scopes_and_compares_per_step():
    demo = REPO / "demo_logs"
    document = _tree(demo, "tf_keras/mnist_cnn_cpu_bs16", "tf_keras/mnist_cnn_cpu_bs64")
    assert document["source"] == "name scopes"
    nodes = document["nodes"]
    _children_add_up(nodes)
    dense = next(node for node in nodes if node["id"] == "StatefulPartitionedCall/sequential_1/dense_1")
    assert dense["speedup"] == pytest.approx(dense["baseline_us"] / dense["target_us"], rel=1e-12)
    ops = [node for node in nodes if node["parent"] == dense["id"] and node["kind"] == "op"]
    assert ops and all("/" not in node["name"] for node in ops)  # an op is named in its scope
    csv_text = run_cli(
        "modules",
        str(demo),
        "--baseline",
        "tf_keras/mnist_cnn_cpu_bs16",
        "--target",
        "tf_keras/mnist_cnn_cpu_bs64",
        "--csv",
        "-",
        "--no-cache",
    ).stdout
    client = plugin_client(demo)
    answer = client.get(f"{PREFIX}/modules.csv?baseline=tf_keras/mnist_cnn_cpu_bs16&target=tf_keras/mnist_cnn_cpu_bs64")
    assert answer.data.decode() == csv_text and len(csv_text.splitlines()) == len(nodes) + 1
    assert client.get(f"{PREFIX}/modules?baseline=nope&target=tf_keras/mnist_cnn_cpu_bs64").status_code == 404
    assert client.get(f"{PREFIX}/modules?baseline=tf_keras/mnist_cnn_cpu_bs16").status_code == 400


def test_each_modules_memory_is_what_was_allocated_inside_its_calls(profile):
    """Independent of the reader: the bytes of the raw trace's allocations ([memory]
    records, Bytes > 0) that fall inside each top-level module's calls on their thread,
    against the tree's bytes for that module; and the whole model's bytes are the op
    table's."""
    (path,) = (MODULES / RUN).glob("*.pt.trace.json.gz")
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    calls = collections.defaultdict(list)
    for event in events:
        if event.get("cat") == "python_function" and event["name"].startswith("nn.Module: "):
            calls[event["name"][len("nn.Module: ") :]].append(event)
    every_call = [call for ranges in calls.values() for call in ranges]

    def inside_another(call: dict) -> bool:
        return any(
            other is not call
            and other["tid"] == call["tid"]
            and other["ts"] <= call["ts"]
            and call["ts"] + call["dur"] <= other["ts"] + other["dur"]
            for other in every_call
        )

    tops = {name: ranges for name, ranges in calls.items() if not inside_another(ranges[0])}
    allocated = collections.Counter()
    for event in events:
        if event.get("name") == "[memory]" and event["args"].get("Bytes", 0) > 0:
            for name, ranges in tops.items():
                if any(
                    str(r["tid"]) == str(event["tid"]) and r["ts"] <= event["ts"] <= r["ts"] + r["dur"] for r in ranges
                ):
                    allocated[name] += event["args"]["Bytes"]
    tree = module_tree(
        profile.op_table, profile.op_table, profile.module_table, profile.module_table
    )  # in all, not per step
    nodes = tree.set_index("id")
    assert {"Sequential_0", "CrossEntropyLoss_0"} <= tops.keys()
    for name in tops:
        assert nodes.loc[name, "baseline_alloc_bytes"] == allocated[name], name
    assert nodes.loc["", "baseline_alloc_bytes"] == profile.op_table.frame()["alloc_bytes"].sum()
    assert nodes.loc["Sequential_0", "baseline_alloc_bytes"] > 0
