"""JAX profiles (``jax.profiler.trace``) are XSpace files written by the profiler TF uses:
XLA's compiled ops run on the ``tf_XLAPjRtCpuClient`` line of ``/host:CPU``, each event
naming its HLO op (``dot.1``, ``ynn_fusion.2``) with an ``hlo_op`` stat, and
``StepTraceAnnotation`` marks the steps. Checked against the raw events of this project's
own recording (tests/fixtures/jax, ``record_jax.py``), read with TensorFlow's XSpace
classes (issue 32)."""

from __future__ import annotations

import collections
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES

from tb_opcompare.service.compare import compare_document
from tb_opcompare.store.catalog import Catalog

JAX = FIXTURES / "jax"
RUNS = ("mlp_cpu_bs8", "mlp_cpu_bs32")


def _raw(run: str) -> tuple[dict[str, tuple[int, float]], list[float]]:
    """Each HLO op's executions and summed time (µs), and the steps' wall times (µs)."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    (path,) = (JAX / run).rglob("*.xplane.pb")
    ops: dict[str, list] = collections.defaultdict(lambda: [0, 0.0])
    steps: dict[int, tuple[int, float]] = {}
    for plane in xplane_pb2.XSpace.FromString(path.read_bytes()).planes:
        stats = {key: metadata.name for key, metadata in plane.stat_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                kinds = {stats.get(stat.metadata_id): stat for stat in event.stats}
                if "hlo_op" in kinds:
                    entry = ops[plane.event_metadata[event.metadata_id].name]
                    entry[0] += 1
                    entry[1] += event.duration_ps / 1e6
                if "step_num" in kinds:
                    step = kinds["step_num"].int64_value or kinds["step_num"].uint64_value
                    start = line.timestamp_ns * 1000 + event.offset_ps
                    if step not in steps or event.duration_ps / 1e6 > steps[step][1]:
                        steps[step] = (start, event.duration_ps / 1e6)
    return ({name: (count, total) for name, (count, total) in ops.items()},
            [duration for _, duration in sorted(steps.values())])


@pytest.fixture(scope="module")
def catalog(tmp_path_factory) -> Catalog:
    logdir = tmp_path_factory.mktemp("jax") / "logs"
    shutil.copytree(JAX, logdir, ignore=shutil.ignore_patterns("*.md"))
    return Catalog(str(logdir), cache_dir=None)


@pytest.mark.parametrize("run", RUNS)
def test_a_jax_run_reads_each_hlo_op_and_each_step_as_its_raw_events_say(catalog, run):
    expected_ops, expected_steps = _raw(run)
    assert len(expected_ops) >= 10 and len(expected_steps) == 6
    loaded = catalog.load(run)
    facts, ops = loaded.profile.facts, loaded.profile.ops
    assert (facts.steps, facts.steps_source) == (6, "step markers (step_num) on the host")
    assert facts.step_times_us == pytest.approx(expected_steps, rel=1e-9)
    assert (facts.compiler, facts.precision, facts.device) == ("XLA", "fp32", "CPU")
    rows = ops.set_index("op_name")
    assert set(rows.index) == set(expected_ops)
    for name, (count, total) in expected_ops.items():
        assert rows.loc[name, "occurrences"] == count, name
        assert rows.loc[name, "total_us"] == pytest.approx(total, rel=1e-9), name
        assert rows.loc[name, "mean_us"] == pytest.approx(total / count, rel=1e-9), name


def test_two_jax_batch_sizes_compare_and_sweep_lines(catalog):
    """The headline is the step wall time per sample; every HLO op meets its namesake."""
    summary = compare_document(catalog, "mlp_cpu_bs8", "mlp_cpu_bs32").summary
    assert summary.headline_basis == "step wall time" and summary.headline_per_sample
    assert summary.matched_ops == len(_raw("mlp_cpu_bs8")[0]) and not summary.baseline_only_ops
