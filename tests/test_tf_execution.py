"""TF graph or eager (issue 31 item 8): one Keras model trained by `fit` as users run it (a
`tf.function` graph) and with `run_eagerly=True`, recorded by `tests/fixtures/record_tf_modes.py`
(tests/fixtures/tf_modes). Every number is checked against the raw XSpace events."""

from __future__ import annotations

import collections

import pytest
from conftest import FIXTURES

from tb_opcompare.store.catalog import Catalog

MODES = FIXTURES / "tf_modes" / "logdir"
GRAPH, EAGER = "keras_graph_cpu_bs16/train", "keras_eager_cpu_bs16/train"


@pytest.fixture(scope="module")
def catalog():
    return Catalog(str(MODES), cache_dir=None)


def _raw_eager_ops(run: str) -> dict[str, tuple[int, float]]:
    """Each op type Python dispatched eagerly: its `EagerLocalExecute: <type>` events and their
    summed duration (µs), function calls (`__inference_…`) left out."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    (path,) = (MODES / run).rglob("*.xplane.pb")
    ops: dict[str, list] = collections.defaultdict(lambda: [0, 0.0])
    for plane in xplane_pb2.XSpace.FromString(path.read_bytes()).planes:
        if plane.name != "/host:CPU":
            continue
        for line in plane.lines:
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if name.startswith("EagerLocalExecute: ") and not name.endswith("_") and "__" not in name:
                    entry = ops[name.split(": ", 1)[1]]
                    entry[0] += 1
                    entry[1] += event.duration_ps / 1e6
    return {op: (count, total) for op, (count, total) in ops.items()}


def test_fit_runs_a_graph_and_run_eagerly_runs_eager(catalog):
    graph, eager = catalog.load(GRAPH).profile.facts, catalog.load(EAGER).profile.facts
    assert graph.compiler == "TF graph" and "executor threads" in graph.compiler_source
    assert eager.compiler == "eager"
    # neither is a variant of the model: no compiler token joins the key
    assert catalog.load(GRAPH).model == "keras_graph/train"


def test_an_eager_run_reads_its_eager_ops_exactly(catalog):
    """Before, an eager TF profile read nothing but its tf.data iterators: every op of the model
    ran as `EagerLocalExecute: <type>` on the Python thread, which no rule read."""
    ops = catalog.load(EAGER).profile.op_table.frame()
    host = ops[ops["side"] == "host"].set_index("op_name")
    raw = _raw_eager_ops(EAGER)
    assert {"Conv2D", "MatMul", "Conv2DBackpropFilter"} <= set(raw)
    for op_type, (count, total_us) in raw.items():
        assert host.loc[op_type, "op_type"] == op_type
        assert host.loc[op_type, "occurrences"] == count, op_type
        assert host.loc[op_type, "total_us"] == pytest.approx(total_us, rel=1e-6), op_type
    # the model's ops are nearly all of its op time, not the input pipeline's
    assert host.loc[list(raw), "self_us"].sum() > 0.9 * host["self_us"].sum()


def test_a_graph_run_leaves_out_the_loops_own_eager_ops(catalog):
    """Keras's loop dispatches a few ops eagerly around its step function (Identity,
    LogicalAnd...): they are not the model's, and xprof's op statistics leave them out."""
    ops = catalog.load(GRAPH).profile.op_table.frame()
    raw = _raw_eager_ops(GRAPH)
    assert raw  # the loop's own eager ops are in the file
    assert not set(ops["op_name"]) & set(raw)
