"""Run groups in the compare table (issue 16): several repeats of one configuration stand
where a run stands, their executions pooled. Checked against the raw trace events of the
real repeats (tests/fixtures/repeats: the demo CNN, 6 + 6 CPU runs)."""

from __future__ import annotations

import collections
import gzip
import json

import msgspec
import numpy as np
import pytest
from conftest import FIXTURES, run_cli
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
    events = [e for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
              if e.get("ph") == "X" and e.get("cat") in _HOST and not e["name"].startswith("ProfilerStep#")]
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
    host = pooled.ops[pooled.ops["side"] == "host"].set_index("op_name")
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
    assert pooled.ops[["p10_us", "median_us", "p90_us"]].isna().all().all()  # percentiles do not pool


def test_a_run_pooled_with_itself_keeps_its_means_and_spread(catalog):
    profile = catalog.load(BASE[0]).profile
    twice = pool_profiles([profile, profile])
    ops, doubled = profile.ops.set_index(["side", "op_name"]), twice.ops.set_index(["side", "op_name"])
    assert (doubled["occurrences"] == 2 * ops["occurrences"]).all()
    for column in ("mean_us", "min_us", "max_us", "std_us", "per_step_cv"):
        assert np.allclose(doubled[column], ops[column], rtol=1e-6, atol=1e-6, equal_nan=True), column


def test_compare_with_run_groups_from_the_cli_the_route_and_repeats(catalog):
    cli = msgspec.json.decode(run_cli("compare", str(REPEATS), "--no-cache", "--json", "--baseline",
                                      "cnn_cpu_bs16_rep*", "--target", ",".join(SLOW)).stdout, type=CompareDocument)
    summary = cli.summary
    assert summary.baseline_runs == BASE and summary.target_runs == SLOW
    assert summary.baseline_steps == sum(catalog.load(run).profile.facts.steps for run in BASE)
    head = next(row for row in cli.rows if row.key == "head")
    assert head.baseline_occurrences == sum(
        int(catalog.load(run).profile.ops.query("op_name == 'head'")["occurrences"].iloc[0]) for run in BASE)
    selfs = [float(catalog.load(run).profile.ops.query("op_name == 'head'")["self_us"].iloc[0]) for run in SLOW]
    counts = [int(catalog.load(run).profile.ops.query("op_name == 'head'")["occurrences"].iloc[0]) for run in SLOW]
    assert head.target_mean_us == pytest.approx(sum(selfs) / sum(counts), rel=1e-9)
    client = plugin_client(REPEATS)
    answer = client.get(f"{PREFIX}/compare", query_string={"baseline": BASE[0], "target": SLOW[0], "repeats": "1"})
    assert answer.status_code == 200
    routed = msgspec.json.decode(answer.data, type=CompareDocument)
    assert routed.summary.baseline_runs == BASE and routed.summary.target_runs == SLOW
    assert routed.rows == cli.rows
    single = msgspec.json.decode(client.get(f"{PREFIX}/compare", query_string={"baseline": BASE[0],
                                                                                 "target": SLOW[0]}).data,
                                 type=CompareDocument)
    assert single.summary.baseline_runs == [BASE[0]] and single.summary.baseline_steps == 5
    bad = client.get(f"{PREFIX}/compare", query_string={"baseline": BASE[0], "target": SLOW[0], "repeats": "yes"})
    assert bad.status_code == 400 and b"repeats" in bad.data
    unknown = client.get(f"{PREFIX}/compare", query_string={"baseline": "cnn_cpu_bs16_rep1,nope", "target": SLOW[0]})
    assert unknown.status_code == 404
