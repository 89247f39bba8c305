"""The xplane reader against xprof's TensorFlow Stats tool and against kernel sums."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES, LOGDIR, REALTRACES, read_bytes

from tb_opcompare.errors import ProfileError
from tb_opcompare.ingest.readers import xplane_wire
from tb_opcompare.ingest.readers.xplane import read_xplane_session
from tb_opcompare.ingest.readers.xplane_schema import XSpace
from tb_opcompare.schema.optable import OpProfile


def _session(paths: list[str]) -> OpProfile:
    """The tables of a session read by the xplane reader from these files."""
    return OpProfile.from_parsed(read_xplane_session(paths, read_bytes))


KERAS_XPLANES = sorted(LOGDIR.glob("tf_keras/*/train/plugins/profile/*/*.xplane.pb"))
VERSIONS = FIXTURES / "versions"
BERT_XPLANE = next(REALTRACES.glob("tf2_xplane_bert_multigpu/plugins/profile/*/*.xplane.pb"))


def xprof_host_rows(xplane: Path, tmp_path: Path) -> dict[str, tuple[str, float]]:
    """Host rows of xprof's framework_op_stats, run on a copy (xprof writes caches beside it)."""
    raw_to_tool_data = pytest.importorskip("xprof.convert.raw_to_tool_data")
    copy = tmp_path / xplane.name
    shutil.copy(xplane, copy)
    data, _ = raw_to_tool_data.xspace_to_tool_data([str(copy)], "framework_op_stats", {})
    table = json.loads(data)[0]
    ids = [c["id"] for c in table["cols"]]
    rows = {}
    for row in table["rows"]:
        values = dict(zip(ids, (cell["v"] for cell in row["c"])))
        if values["host_or_device"] == "Host" and values["operation"] != "IDLE":
            rows[values["operation"]] = (values["type"], values["total_self_time"])
    return rows


@pytest.mark.parametrize("xplane", KERAS_XPLANES, ids=lambda p: p.parts[-6])
def test_host_self_time_agrees_with_xprof(xplane, tmp_path):
    expected = xprof_host_rows(xplane, tmp_path)
    assert len(expected) > 50, "xprof should see the Keras training step's ops"
    ops = _session([str(xplane)]).op_table.frame()
    host = ops[ops["side"] == "host"].set_index("op_name")
    assert set(host.index) == set(expected)
    for name, (op_type, total_self_us) in expected.items():
        assert host.loc[name, "op_type"] == op_type
        assert host.loc[name, "self_us"] == pytest.approx(total_self_us, rel=0.01, abs=0.002), name


def test_keras_cpu_run_facts():
    profile = _session([str(KERAS_XPLANES[0])])
    assert profile.facts.device == "CPU"
    # the fixtures were recorded with --profile-steps 3,7: five steps
    assert profile.facts.steps == 5
    assert 0 < profile.facts.step_time_us < 100_000
    conv = profile.op_table.frame()[profile.op_table.frame()["op_type"] == "_MklNativeFusedConv2D"]
    assert len(conv) == 2 and (conv["occurrences"] == profile.facts.steps).all()  # once per step
    assert conv["mean_us"].to_numpy() == pytest.approx((conv["self_us"] / conv["occurrences"]).to_numpy())


@pytest.mark.parametrize("xplane", KERAS_XPLANES, ids=lambda path: path.parts[-6])
def test_keras_batch_size_comes_from_the_input_pipeline(xplane):
    """Keras 3 writes no shapes on op events; the tf.data elements fed to each step have
    them. The fixtures' run names (cnn_cpu_bs2 ...) were given by the recorder."""
    facts = _session([str(xplane)]).facts
    named = int(xplane.parts[-6].rsplit("bs", 1)[1])
    assert (facts.batch_size, facts.batch_size_source) == (
        named,
        "data: tf.data input elements (Iterator::Root shapes)",
    )


def kernel_sums_by_op(xplane: Path) -> dict[str, float]:
    """Independent walk: sum kernel durations per `level 0` op on Stream lines."""
    space = XSpace()
    space.ParseFromString(xplane.read_bytes())
    sums: dict[str, float] = {}
    for plane in space.planes:
        if not plane.name.startswith("/device:GPU"):
            continue
        names = {e.key: e.value.name for e in plane.stat_metadata}
        for line in plane.lines:
            if not line.name.startswith("Stream #"):
                continue
            for event in line.events:
                for stat in event.stats:
                    if names[stat.metadata_id] == "level 0" and names[stat.ref_value]:
                        op = names[stat.ref_value].rsplit(":", 1)[0]
                        sums[op] = sums.get(op, 0.0) + event.duration_ps / 1e6
    return sums


def test_device_op_time_is_the_sum_of_its_kernels():
    profile = _session([str(BERT_XPLANE)])
    assert profile.facts.device == "GPU"
    assert "compute capability 7.0" in profile.facts.device_name
    device = profile.op_table.frame()[profile.op_table.frame()["side"] == "device"].groupby("op_name")["total_us"].sum()
    expected = kernel_sums_by_op(BERT_XPLANE)
    assert len(expected) > 300
    for op, total in expected.items():
        assert device[op] == pytest.approx(total, rel=1e-9)


def test_bert_batch_size_comes_from_tensor_shapes():
    facts = _session([str(BERT_XPLANE)]).facts
    assert facts.batch_size == 4 and facts.batch_size_source.startswith("data")


def test_several_hosts_are_combined():
    one = _session([str(KERAS_XPLANES[0])]).op_table.frame()
    both = _session([str(KERAS_XPLANES[0]), str(KERAS_XPLANES[0])]).op_table.frame()
    merged = both.set_index(["side", "op_name"])["occurrences"]
    assert (merged == one.set_index(["side", "op_name"])["occurrences"] * 2).all()


@pytest.mark.parametrize(
    "content, reason",
    [
        (b"", "empty"),
        (b"\x08\x96\x01garbage that is not protobuf \xff\xff\xff", "not a valid XSpace"),
    ],
)
def test_bad_xplane_names_file_and_reason(tmp_path, content, reason):
    path = tmp_path / "host.xplane.pb"
    path.write_bytes(content)
    with pytest.raises(ProfileError) as error:
        _session([str(path)])
    assert error.value.path == str(path)
    assert reason in error.value.reason


def test_truncated_xplane_is_a_profile_error(tmp_path):
    path = tmp_path / "host.xplane.pb"
    data = KERAS_XPLANES[0].read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ProfileError):
        _session([str(path)])


@pytest.mark.parametrize("xplane", [KERAS_XPLANES[-1], BERT_XPLANE], ids=["keras_cpu", "bert_gpu"])
def test_reading_lines_in_small_batches_gives_the_same_table(xplane, monkeypatch):
    """Big lines are parsed a batch of events at a time to bound memory; a batch
    boundary must never change a number (nesting spans batches)."""
    whole = _session([str(xplane)])
    batches_seen = []
    original = xplane_wire.LineView.event_batches

    def counting(self):
        for batch in original(self):
            batches_seen.append(len(batch))
            yield batch

    monkeypatch.setattr(xplane_wire, "EVENT_BATCH_BYTES", 4096)
    monkeypatch.setattr(xplane_wire.LineView, "event_batches", counting)
    batched = _session([str(xplane)])
    assert len(batches_seen) > 2 * len(list(_lines(xplane)))  # lines really were cut up
    keys = ["side", "op_name", "op_type"]
    pd.testing.assert_frame_equal(
        whole.op_table.frame().sort_values(keys).reset_index(drop=True),
        batched.op_table.frame().sort_values(keys).reset_index(drop=True),
    )
    assert vars(whole.facts) == vars(batched.facts)


def _lines(xplane: Path):
    space = XSpace()
    space.ParseFromString(xplane.read_bytes())
    return [line for plane in space.planes for line in plane.lines]


def test_batch_size_evidence_keeps_its_order_and_the_step_event_confirms_or_is_warned_about():
    from collections import Counter

    from tb_opcompare.ingest.readers.tf_ops import batch_size_evidence

    elements, declared = Counter({(20, "Iterator::Root"): 3, (4, "Iterator::Root"): 1}), Counter({7: 3})
    assert batch_size_evidence(None, elements, Counter(), declared) == (
        20,
        "data: tf.data input elements (Iterator::Root shapes)",
        None,
    )
    assert batch_size_evidence(32, elements, Counter(), declared)[:2] == (
        32,
        "data: first op input shape in the profile",
    )
    # fit()'s batch_size argument is no measurement: the batch dataset's own size outranks it, and alone it is
    # labelled an argument (a sidecar or a run name outranks it: test_run_facts)
    size, source, warning = batch_size_evidence(None, Counter(), Counter({16: 3}), declared)
    assert (size, source) == (7, "data: the batch_size of the tf.data batch dataset (Iterator::…::BatchV2)")
    assert warning.startswith("the batch_size of the Keras step event (fit()'s argument) is 16, but ")
    assert batch_size_evidence(None, Counter(), Counter({16: 3}), Counter()) == (
        16,
        "argument: the batch_size of the Keras step event (fit()'s argument)",
        None,
    )
    assert batch_size_evidence(None, Counter(), Counter(), declared)[:2] == (
        7,
        "data: the batch_size of the tf.data batch dataset (Iterator::…::BatchV2)",
    )
    size, source, warning = batch_size_evidence(None, elements, Counter({16: 3}), declared)
    assert (size, source) == (20, "data: tf.data input elements (Iterator::Root shapes)")
    assert warning == (
        "the batch_size of the Keras step event (fit()'s argument) is 16, but tf.data input elements "
        "(Iterator::Root shapes) gives 20; using 20"
    )
    assert batch_size_evidence(None, Counter(), Counter(), Counter()) == (None, None, None)


def _steps_and_leaf_op(xplane: Path) -> tuple[list[float], str]:
    """Recomputed from the whole XSpace message: the profiled steps' ranges (Keras 2's
    train_function calls where they outnumber the step_num markers, else the longest
    marker of each step) and the time per step of the host op with the most time among
    those that never hold another op on their line (so self time is duration)."""
    space = XSpace.FromString(xplane.read_bytes())
    (plane,) = [p for p in space.planes if p.name == "/host:CPU"]
    names = {entry.key: entry.value.name for entry in plane.event_metadata}
    step_stat = next(entry.key for entry in plane.stat_metadata if entry.value.name == "step_num")
    origin = min(line.timestamp_ns for line in plane.lines) * 1000
    markers, calls, ops = {}, [], []
    for line in plane.lines:
        for event in line.events:
            start = line.timestamp_ns * 1000 - origin + event.offset_ps
            span = (start, start + event.duration_ps)
            step = next((s.int64_value or s.uint64_value for s in event.stats if s.metadata_id == step_stat), None)
            if step is not None and (step not in markers or event.duration_ps > markers[step][1] - markers[step][0]):
                markers[step] = span
            if names[event.metadata_id] == "train_function":
                calls.append(span)
            if re.fullmatch(r"[^:\s]+:[A-Za-z_]\w*", names[event.metadata_id]):  # "<op name>:<op type>"
                ops.append((line.id, names[event.metadata_id].split(":")[0], span))
    steps = sorted(calls if len(calls) > len(markers) else markers.values())
    holders = {
        name
        for line, name, (start, end) in ops
        for other_line, _, (s, e) in ops
        if other_line == line and (s, e) != (start, end) and start <= s and e <= end
    }
    per_step = {}
    for _, name, (start, end) in ops:
        if name not in holders:
            step = next((i for i, (s, e) in enumerate(steps) if s <= start < e), None)
            per_step.setdefault(name, [0.0] * len(steps))
            if step is not None:
                per_step[name][step] += (end - start) / 1e6
    name = max(per_step, key=lambda n: sum(per_step[n]))
    return per_step[name], name


@pytest.mark.parametrize(
    "xplane",
    [KERAS_XPLANES[0], next(VERSIONS.glob("tf2.12/cnn_cpu_bs20/**/*.xplane.pb"))],
    ids=["keras3_step_markers", "keras2_step_function_calls"],
)
def test_each_tf_op_is_placed_in_the_step_it_ran_in(xplane):
    per_step, name = _steps_and_leaf_op(xplane)
    profile = _session([str(xplane)])
    assert profile.step_count == len(per_step) == profile.facts.steps >= 3
    row = profile.op_table.frame().index[
        (profile.op_table.frame()["side"] == "host") & (profile.op_table.frame()["op_name"] == name)
    ][0]
    cells = profile.step_table.frame()[profile.step_table.frame()["row"] == row].set_index("step")["self_us"]
    measured = [float(cells.get(step, 0.0)) for step in range(profile.step_count)]
    assert measured == pytest.approx(per_step, rel=1e-5)
    mean = sum(per_step) / len(per_step)
    cv = (sum((t - mean) ** 2 for t in per_step) / len(per_step)) ** 0.5 / mean
    assert profile.op_table.frame().loc[row, "per_step_cv"] == pytest.approx(cv, rel=1e-4)
    # every occurrence of every op lands in a step: the steps cover the profiled work
    assert profile.step_table.frame().groupby("row")["occurrences"].sum().to_numpy() == pytest.approx(
        profile.op_table.frame().loc[profile.step_table.frame()["row"].unique(), "occurrences"].to_numpy()
    )


def _without_other_batch_evidence(xplane: Path, tmp_path: Path) -> Path:
    """A copy whose tf.data events are renamed away and whose op events carry no shapes,
    as in profiles whose input pipeline was not traced (TF 2.4 GPU runs)."""
    space = XSpace.FromString(xplane.read_bytes())
    for plane in space.planes:
        for entry in plane.event_metadata:
            entry.value.name = entry.value.name.replace("Iterator::", "Untraced::")
        op_shape = {entry.key for entry in plane.stat_metadata if entry.value.name == "shape"}
        allocation = {entry.key for entry in plane.event_metadata if entry.value.name == "MemoryAllocation"}
        for line in plane.lines:
            for event in line.events:
                if event.metadata_id not in allocation:
                    kept = [stat for stat in event.stats if stat.metadata_id not in op_shape]
                    del event.stats[:]
                    event.stats.extend(kept)
    copy = tmp_path / xplane.parent.parent.parent.parent.name / "vm.xplane.pb"
    copy.parent.mkdir()
    copy.write_bytes(space.SerializeToString())
    return copy


def test_batch_size_from_the_shapes_of_memory_allocations(tmp_path):
    """TF writes each large allocation's tensor shape and op. Activations share the batch
    dimension; the dense layer's weight gradient and Adam's slots ([3872,64], allocated in
    every step) must not outvote them; a run whose only allocations have a weight's shape
    stays unknown rather than guessing its leading dimension."""
    demo = Path(__file__).parent.parent / "demo_logs" / "tf_keras"
    xplane = next(demo.glob("mnist_cnn_cpu_bs64/plugins/profile/*/*.xplane.pb"))
    facts = _session([str(_without_other_batch_evidence(xplane, tmp_path))]).facts
    assert facts.batch_size == 64
    assert facts.batch_size_source == (
        "data: leading dimension of 4 of 4 tensor shapes in memory allocations (optimizer state left out)"
    )
    assert facts.batch_size_agreement == 1.0
    xplane = next(demo.glob("mnist_cnn_cpu_bs1/plugins/profile/*/*.xplane.pb"))
    facts = _session([str(_without_other_batch_evidence(xplane, tmp_path))]).facts
    assert facts.batch_size is None
    # BERT (TF 2.4 era, 8 GPUs): the activations' batch of 4 wins against the weights' 1024,
    # but weakly, so a sidecar or run name that says otherwise would win
    facts = _session([str(_without_other_batch_evidence(BERT_XPLANE, tmp_path))]).facts
    assert facts.batch_size == 4 and facts.batch_size_agreement < 0.75


def test_memory_of_a_compiled_run_reaches_its_xla_ops(monkeypatch):
    """A Keras XLA run's host plane names its XLA ops while it is read, after the plane's
    op index is made; memory attributed by op name then looked each one up in a table
    sized to the index (IndexError). Here an allocation names one of the run's XLA
    instructions, as a real profile's allocations do (``convolution.1``): its bytes reach
    the row the instruction is counted in (its TF op's), and no other."""
    from tb_opcompare.ingest.readers import xplane_host

    (xplane,) = (FIXTURES / "precision/logdir/keras_fp32_xla_cpu_bs16").glob("**/*.xplane.pb")
    instructions = set()  # the names of the events that carry an hlo_op stat: XLA's instructions
    for plane in XSpace.FromString(read_bytes(xplane)).planes:
        names = {entry.key: entry.value.name for entry in plane.event_metadata}
        hlo_op = {entry.key for entry in plane.stat_metadata if entry.value.name == "hlo_op"}
        for line in plane.lines:
            instructions.update(
                names[event.metadata_id]
                for event in line.events
                if any(stat.metadata_id in hlo_op for stat in event.stats)
            )
    xla_op = min(name for name in instructions if name.startswith("convolution"))
    before = _session([str(xplane)]).op_table.frame().set_index("op_name")["alloc_bytes"].fillna(0.0)
    original = xplane_host._Allocations.__init__

    def with_an_allocation(self, dtypes):
        original(self, dtypes)
        self.requested[xla_op] += 4096.0

    monkeypatch.setattr(xplane_host._Allocations, "__init__", with_an_allocation)
    ops = _session([str(xplane)]).op_table.frame().set_index("op_name")
    gained = ops["alloc_bytes"].fillna(0.0).sub(before)
    assert gained[gained != 0].to_dict() == {gained.idxmax(): 4096.0}
    assert ops.loc[gained.idxmax(), "op_type"] == "convolution"


def test_the_metadata_id_lookup_answers_as_a_dict_would():
    """Ids index a table where the writer numbered its metadata densely, else are searched;
    either way each id gets its code and any other id (negative, past the end, huge) -1."""
    from tb_opcompare.ingest.readers.xplane_events import IdLookup

    rng = np.random.default_rng(5)
    for trial in range(200):
        spread = [10, 1000, 10**6, 2**62][trial % 4]
        low = 0 if trial % 5 else -spread
        ids = list(dict.fromkeys(rng.integers(low, spread, int(rng.integers(0, 60))).tolist()))
        codes = rng.integers(0, 100, len(ids)).tolist()
        probe = np.concatenate(
            [np.array(ids, dtype=np.int64), rng.integers(-spread, spread, 100), [-1, -(2**63), 2**63 - 1]]
        ).astype(np.int64)
        expected = [dict(zip(ids, codes)).get(int(x), -1) for x in probe]
        assert IdLookup(ids, codes).codes(probe).tolist() == expected, trial


@pytest.mark.parametrize("pure_python", [False, True], ids=["native", "pure_python"])
def test_a_big_line_holds_at_most_two_batches_at_once(pure_python, monkeypatch):
    """Memory is bounded by batches: however long a line, a batch the reader has dropped is
    gone, and the scan running ahead holds one more at most (a review found every batch of
    a line held to its end, parsed events included: 134 MB for a 15 MB line)."""
    import gc

    from tb_opcompare.ingest.readers.xplane_schema import XLine

    monkeypatch.setattr(xplane_wire, "EVENT_BATCH_BYTES", 4096)
    if pure_python:
        monkeypatch.setattr(xplane_wire, "_compiled", None)
    # Batches alive, counted as they are made and freed: a scan of gc.get_objects() after
    # each batch took 30 s in a worker whose earlier tests left millions of objects.
    alive_now = [0]

    class CountedBatch(xplane_wire.EventBatch):
        def __init__(self, *args):
            super().__init__(*args)
            alive_now[0] += 1

        def __del__(self):
            alive_now[0] -= 1

    monkeypatch.setattr(xplane_wire, "EventBatch", CountedBatch)
    line = XLine(name="Stream #1")
    for index in range(6_000):
        event = line.events.add(metadata_id=index % 50 + 1, offset_ps=index * 10, duration_ps=5)
        event.stats.add(metadata_id=3, str_value=f"fusion.{index % 100}")
    data = line.SerializeToString()
    view = xplane_wire.LineView(memoryview(data), 0, len(data))
    alive, seen = [], 0
    for batch in view.event_batches():
        seen += sum(1 for _ in batch)  # every event parsed, as a kernel line's are
        del batch
        gc.collect()
        alive.append(alive_now[0])
    assert seen == 6_000 and len(alive) > 20
    assert max(alive) <= 2


def test_a_file_without_devices_lets_its_bytes_go_before_the_host_steps(monkeypatch):
    """A host plane's steps sort every host event: with the whole file still held, that was
    the read's peak (a 31 MB Keras xplane: 71 MB traced, its worker 109 MB). A file with no
    device plane lets its bytes go first; one with devices settles the host's steps before
    its device planes are read, which join them."""
    import tracemalloc

    from tb_opcompare.ingest.readers.xplane_host import HostPlaneReader

    held: list[tuple[str, int]] = []
    read_lines, finish = HostPlaneReader.read_lines, HostPlaneReader.finish

    def spied_read_lines(self):
        read_lines(self)
        held.append(("lines read", tracemalloc.get_traced_memory()[0]))

    def spied_finish(self, *args):
        held.append(("steps", tracemalloc.get_traced_memory()[0]))
        return finish(self, *args)

    monkeypatch.setattr(HostPlaneReader, "read_lines", spied_read_lines)
    monkeypatch.setattr(HostPlaneReader, "finish", spied_finish)
    cpu, gpu = KERAS_XPLANES[0], BERT_XPLANE
    for path in (cpu, gpu):
        held.clear()
        tracemalloc.start()
        try:
            read_xplane_session([str(path)], read_bytes)
        finally:
            tracemalloc.stop()
        assert [step for step, _ in held] == ["lines read", "steps"], path
        let_go = held[0][1] - held[1][1]
        if path == cpu:
            assert let_go >= 0.95 * path.stat().st_size, (let_go, path.stat().st_size)
        else:
            assert abs(let_go) < 0.05 * path.stat().st_size, (let_go, path.stat().st_size)


def test_an_event_name_given_twice_is_read_as_protobuf_reads_a_map(tmp_path):
    """``event_metadata`` is a map on the wire (a repeated key/value entry): where a
    hostile or merged file gives a key twice, the last entry wins, as protobuf's map and
    xprof read it. The busiest op's key given again under another op's name: every event
    of that id is the new op's. Given again under a name that is no op: its events are no
    op's (they were counted as the old op's and as a range of that name at once)."""
    xplane = KERAS_XPLANES[0]
    before = _session([str(xplane)]).op_table.frame()
    host_before = before[before["side"] == "host"].set_index("op_name")
    busiest = host_before["self_us"].idxmax()

    def renamed(name: str) -> pd.DataFrame:
        space = XSpace.FromString(xplane.read_bytes())
        (host,) = [plane for plane in space.planes if plane.name.startswith("/host:")]
        (key,) = [
            entry.key
            for entry in host.event_metadata
            if entry.value.name == f"{busiest}:{host_before.loc[busiest, 'op_type']}"
        ]
        again = host.event_metadata.add()
        again.key = key
        again.value.id, again.value.name = key, name
        copy = tmp_path / name.replace("/", "_").replace(":", "_") / "vm.xplane.pb"
        copy.parent.mkdir()
        copy.write_bytes(space.SerializeToString())
        after = _session([str(copy)]).op_table.frame()
        return after[after["side"] == "host"].set_index("op_name")

    as_another_op = renamed("renamed/busiest:Renamed")
    assert busiest not in as_another_op.index
    assert as_another_op.loc["renamed/busiest", "op_type"] == "Renamed"
    assert as_another_op.loc["renamed/busiest", "occurrences"] == host_before.loc[busiest, "occurrences"]
    assert as_another_op.loc["renamed/busiest", "self_us"] == pytest.approx(host_before.loc[busiest, "self_us"])
    assert len(as_another_op) == len(host_before)

    as_a_range = renamed("my range")
    assert busiest not in as_a_range.index
    assert len(as_a_range) == len(host_before) - 1
