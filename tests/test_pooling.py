"""Run groups in the compare table (issue 16): several repeats of one configuration stand
where a run stands, their executions pooled. Checked against the raw trace events of the
real repeats (tests/fixtures/repeats: the demo CNN, 6 + 6 CPU runs)."""

from __future__ import annotations

import collections
import gzip
import json
import shutil

import msgspec
import numpy as np
import pytest
from conftest import FIXTURES, REALTRACES, run_cli
from in_process import PREFIX, plugin_client

from tb_opcompare.analysis.pooling import pool_profiles
from tb_opcompare.schema.contract import CompareDocument
from tb_opcompare.store.catalog import Catalog

REPEATS = FIXTURES / "repeats" / "logdir"
BASE = [f"cnn_cpu_bs16_rep{k}" for k in range(1, 7)]
SLOW = [f"cnnslow_cpu_bs16_rep{k}" for k in range(1, 7)]
_HOST = {"cpu_op", "user_annotation"}


def _leaf_durations(run: str) -> dict[str, list[float]]:
    """Independent of the reader: the durations of the executions of each op that never
    has another host event inside it (its self time is its duration)."""
    (path,) = (REPEATS / run).glob("*.pt.trace.json.gz")
    events = [
        e
        for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
        if e.get("ph") == "X" and e.get("cat") in _HOST and not e["name"].startswith("ProfilerStep#")
    ]
    by_thread = collections.defaultdict(list)
    for event in events:
        by_thread[event["tid"]].append(event)
    parents = set()
    for thread in by_thread.values():
        thread.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: list[dict] = []
        for event in thread:
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= event["ts"]:
                stack.pop()
            if stack:
                parents.add(stack[-1]["name"])
            stack.append(event)
    durations = collections.defaultdict(list)
    for event in events:
        if event["name"] not in parents:
            durations[event["name"]].append(event["dur"])
    return durations


@pytest.fixture(scope="module")
def catalog():
    return Catalog(str(REPEATS), cache_dir=None)


def test_a_group_holds_every_execution_of_its_runs(catalog):
    runs = BASE[:3]
    pooled = pool_profiles([catalog.load(run).profile for run in runs])
    raw = collections.defaultdict(list)
    for run in runs:
        for name, durations in _leaf_durations(run).items():
            raw[name] += durations
    host = pooled.op_table.frame()[pooled.op_table.frame()["side"] == "host"].set_index("op_name")
    checked = 0
    for name, durations in raw.items():
        if len(durations) < 2 or name not in host.index:
            continue
        row, values = host.loc[name], np.asarray(durations)
        assert row["occurrences"] == len(values), name
        assert row["mean_us"] == pytest.approx(values.mean(), rel=1e-5), name
        assert row["std_us"] == pytest.approx(values.std(), rel=1e-3, abs=1e-3), name
        assert (row["min_us"], row["max_us"]) == pytest.approx((values.min(), values.max()), rel=1e-5), name
        checked += 1
    assert checked >= 10
    assert pooled.facts.steps == sum(catalog.load(run).profile.facts.steps for run in runs)
    assert pooled.step_count == pooled.facts.steps and len(pooled.facts.step_times_us) == pooled.facts.steps
    assert pooled.op_table.frame()[["p10_us", "median_us", "p90_us"]].isna().all().all()  # percentiles do not pool


def test_a_run_pooled_with_itself_keeps_its_means_and_spread(catalog):
    profile = catalog.load(BASE[0]).profile
    twice = pool_profiles([profile, profile])
    ops, doubled = (
        profile.op_table.frame().set_index(["side", "op_name"]),
        twice.op_table.frame().set_index(["side", "op_name"]),
    )
    assert (doubled["occurrences"] == 2 * ops["occurrences"]).all()
    for column in ("mean_us", "min_us", "max_us", "std_us", "per_step_cv"):
        assert np.allclose(doubled[column], ops[column], rtol=1e-6, atol=1e-6, equal_nan=True), column


def test_compare_with_run_groups_from_the_cli_the_route_and_repeats(catalog):
    cli = msgspec.json.decode(
        run_cli(
            "compare",
            str(REPEATS),
            "--no-cache",
            "--json",
            "--baseline",
            "cnn_cpu_bs16_rep*",
            "--target",
            ",".join(SLOW),
        ).stdout,
        type=CompareDocument,
    )
    summary = cli.summary
    assert summary.baseline_runs == BASE and summary.target_runs == SLOW
    assert summary.baseline_steps == sum(catalog.load(run).profile.facts.steps for run in BASE)
    head = next(row for row in cli.rows if row.key == "head")
    assert head.baseline_occurrences == sum(
        int(catalog.load(run).profile.op_table.frame().query("op_name == 'head'")["occurrences"].iloc[0])
        for run in BASE
    )
    selfs = [
        float(catalog.load(run).profile.op_table.frame().query("op_name == 'head'")["self_us"].iloc[0]) for run in SLOW
    ]
    counts = [
        int(catalog.load(run).profile.op_table.frame().query("op_name == 'head'")["occurrences"].iloc[0])
        for run in SLOW
    ]
    assert head.target_mean_us == pytest.approx(sum(selfs) / sum(counts), rel=1e-9)
    client = plugin_client(REPEATS)
    answer = client.get(f"{PREFIX}/compare", query_string={"baseline": BASE[0], "target": SLOW[0], "repeats": "1"})
    assert answer.status_code == 200
    routed = msgspec.json.decode(answer.data, type=CompareDocument)
    assert routed.summary.baseline_runs == BASE and routed.summary.target_runs == SLOW
    assert routed.rows == cli.rows
    single = msgspec.json.decode(
        client.get(f"{PREFIX}/compare", query_string={"baseline": BASE[0], "target": SLOW[0]}).data,
        type=CompareDocument,
    )
    assert single.summary.baseline_runs == [BASE[0]] and single.summary.baseline_steps == 5
    bad = client.get(f"{PREFIX}/compare", query_string={"baseline": BASE[0], "target": SLOW[0], "repeats": "yes"})
    assert bad.status_code == 400 and b"repeats" in bad.data
    unknown = client.get(f"{PREFIX}/compare", query_string={"baseline": "cnn_cpu_bs16_rep1,nope", "target": SLOW[0]})
    assert unknown.status_code == 404


def test_a_group_without_step_markers_counts_a_step_per_run(tmp_path):
    """Three copies of one public trace that has no ProfilerStep markers, two pooled
    against the third: per run, identical, so no change (summing the two would read 2x)."""
    trace = REALTRACES / "torch_resnet18_cpu" / "export_chrome_trace" / "trace.json"
    for k in (1, 2, 3):
        (tmp_path / f"r18_cpu_bs5_rep{k}").mkdir()
        shutil.copy(trace, tmp_path / f"r18_cpu_bs5_rep{k}" / trace.name)
    document = msgspec.json.decode(
        run_cli(
            "compare",
            str(tmp_path),
            "--no-cache",
            "--json",
            "--baseline",
            "r18_cpu_bs5_rep1,r18_cpu_bs5_rep2",
            "--target",
            "r18_cpu_bs5_rep3",
        ).stdout,
        type=CompareDocument,
    )
    summary = document.summary
    assert (summary.baseline_steps, summary.target_steps) == (2, 1)
    assert summary.overall_speedup == pytest.approx(1.0) and summary.whole_step_speedup == pytest.approx(1.0)
    assert any("each run counts as one step" in note for note in summary.notes)
    assert summary.baseline.steps_source.startswith("no step markers: one step per run")


def test_groups_that_cannot_be_compared_are_refused_with_the_reason(tmp_path):
    client = plugin_client(REPEATS)
    for query, message in [
        ({"baseline": ",", "target": SLOW[0]}, "no baseline runs given"),
        ({"baseline": " , ", "target": SLOW[0]}, "no baseline runs given"),
        ({"baseline": BASE[0], "target": BASE[1], "repeats": "1"}, "share cnn_cpu_bs16_rep1"),
        ({"baseline": f"{BASE[0]},{BASE[1]}", "target": SLOW[0], "baseline_session": "x"}, "baseline_session"),
    ]:
        answer = client.get(f"{PREFIX}/compare", query_string=query)
        assert answer.status_code == 400, query
        assert message in json.loads(answer.data)["error"]["message"], query
    result = run_cli("compare", str(REPEATS), "--no-cache", "--baseline", ",", "--target", SLOW[0])
    assert result.returncode == 2 and "no baseline runs given" in result.stderr
    result = run_cli("compare", str(REPEATS), "--no-cache", "--repeats")
    assert result.returncode == 2 and "--baseline" in result.stderr


def test_an_unreadable_repeat_is_left_out_and_named(tmp_path):
    logdir = tmp_path / "logdir"
    shutil.copytree(REPEATS, logdir)
    (broken,) = (logdir / BASE[1]).glob("*.pt.trace.json.gz")
    broken.write_bytes(broken.read_bytes()[:2000])  # a truncated file
    document = msgspec.json.decode(
        plugin_client(logdir)
        .get(f"{PREFIX}/compare", query_string={"baseline": BASE[0], "target": SLOW[0], "repeats": "1"})
        .data,
        type=CompareDocument,
    )
    assert document.summary.baseline_runs == [run for run in BASE if run != BASE[1]]
    assert document.summary.target_runs == SLOW
    assert any(note.startswith(f"{BASE[1]} left out of the baseline group") for note in document.summary.notes)


def test_a_group_mixing_configurations_says_which_dimensions_differ():
    h100 = FIXTURES / "gpu_h100" / "demo"
    document = msgspec.json.decode(
        run_cli(
            "compare",
            str(h100),
            "--no-cache",
            "--json",
            "--baseline",
            "mnist_cnn_torch_cpu_bs16_rep1,mnist_cnn_torch_gpu_bs64_rep1",
            "--target",
            "mnist_cnn_torch_gpu_bs16_rep1",
        ).stdout,
        type=CompareDocument,
    )
    (note,) = [note for note in document.summary.notes if note.startswith("The baseline group pools")]
    assert "device: CPU, GPU" in note and "batch size: 16, 64" in note and "precision" not in note
    assert document.summary.baseline.device is None and document.summary.baseline.batch_size is None
    assert document.summary.baseline.batch_size_source == "the runs of the group differ"
