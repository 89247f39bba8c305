"""A TF 2.2-2.4 GPU op's executions are its executions, not the pieces its ``TensorFlow Ops``
line cuts them in (issue 51, point 4).

TF derives that line from the kernels: walking a GPU plane's kernels in start order, it
extends the last event while the kernels name the same op and starts a new one otherwise.
So an execution whose kernels interleave with another op's (a ``_FusedConv2D``'s three
kernels around a pooling kernel on another stream) becomes two or three events: on a
third-party TF 2.4 CNN, ``sequential/conv2d/Relu`` (one execution a step, 21 steps) had 44,
and its mean read 31.9 µs for 66.8 µs. The rule: pieces of one op's execution in one step
group, with no other execution of that op launched between them, are one execution, the
host's kernel launches deciding where the file has them.

The xplanes here are built from that documented structure: kernels on two ``Stream #``
lines of ``/device:GPU:0`` carrying ``level 0`` / ``annotation`` (``<op name>:<op type>``),
``group_id`` (the step), ``correlation_id`` and ``is_eager``; the ``TensorFlow Ops`` line
derived from them as TF derives it; and, where asked, a ``/host:CPU`` plane whose executor
thread holds each execution's op event with its kernels' launches inside (events named
after the kernel, carrying its ``correlation_id``). The expected figures are computed here
from the raw kernels.
"""

from __future__ import annotations

import collections
import dataclasses
import gzip
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tb_opcompare.ingest.formats import read_profile
from tb_opcompare.ingest.readers import xplane_wire
from tb_opcompare.ingest.readers.xplane_schema import XPlane, XSpace

STEPS = 21
LINE_NS = 1_700_000_000_000_000_000  # lines start at ns since the epoch, as TF writes them
US = 1_000_000  # ps

CONV = "sequential/conv2d/Relu:_FusedConv2D"  # three kernels an execution, one execution a step
POOL = "sequential/max_pooling2d/MaxPool:MaxPool"  # on another stream, between CONV's kernels
DROPOUT = "sequential/dropout/dropout/Mul:Mul"
LOOP = "while/body/dense/MatMul:MatMul"  # two executions a step, each two kernels, sometimes cut
ADD = "while/body/add:AddV2"
PACKED = "sequential/conv2d_1/Conv2D:Conv2D"  # three kernels, the first and last of one name


@dataclasses.dataclass
class Kernel:
    op: str
    name: str
    stream: int
    start_ps: int
    duration_ps: int
    step: int
    execution: int  # which execution of its op in its step, the truth the reader must find
    correlation: int = 0


def _kernels() -> list[Kernel]:
    """Each step's kernels, the cuts varying by step: CONV cut in two where POOL runs
    between its first two kernels (steps not divisible by 3), in three where DROPOUT runs
    between its last two as well (steps divisible by 5); LOOP's two executions cut where
    ADD runs inside them (odd steps), always with ADD between them; PACKED cut before its
    last kernel by a POOL kernel (even steps)."""
    kernels: list[Kernel] = []
    clock = 0
    executions: collections.Counter = collections.Counter()  # (op, step) -> executions begun

    def run(op: str, name: str, stream: int, step: int, duration_us: float, begins: bool = True) -> None:
        """A kernel ``begins`` a new execution of its op, or continues the last one."""
        nonlocal clock
        executions[op, step] += begins
        duration = int(duration_us * US) + 1000 * step  # every step's kernels a little longer
        kernels.append(Kernel(op, name, stream, clock, duration, step, executions[op, step]))
        clock += duration + US

    for step in range(1, STEPS + 1):
        run(CONV, "implicit_convolve_sgemm", 7, step, 40)
        if step % 3:
            run(POOL, "MaxPoolForwardNHWC", 8, step, 5)
        run(CONV, "cudnn::winograd::generateWinogradTilesKernel", 7, step, 20, begins=False)
        if step % 5 == 0:
            run(DROPOUT, "EigenMetaKernel<scalar_product_op>", 8, step, 3)
        run(CONV, "BiasReluKernel", 7, step, 6, begins=False)
        for _ in range(2):
            run(LOOP, "volta_sgemm_128x64_nn", 7, step, 12)
            if step % 2:
                run(ADD, "EigenMetaKernel<scalar_sum_op>", 8, step, 2)
            run(LOOP, "splitKreduce_kernel", 7, step, 4, begins=False)
            run(ADD, "EigenMetaKernel<scalar_sum_op>", 8, step, 2)
        run(PACKED, "scalePackedTensor_kernel", 7, step, 3)
        run(PACKED, "volta_scudnn_128x64_relu_interior_nn", 7, step, 30, begins=False)
        if step % 2 == 0:
            run(POOL, "MaxPoolForwardNHWC", 8, step, 5)
        run(PACKED, "scalePackedTensor_kernel", 7, step, 3, begins=False)
        clock += 200 * US  # the host's turn between steps
    for correlation, kernel in enumerate(kernels, start=1000):
        kernel.correlation = correlation
    return kernels


def _derived_ops(kernels: list[Kernel]) -> list[tuple[str, int, int, int]]:
    """The ``TensorFlow Ops`` line TF 2.2-2.4 derives: (op, start, end, step) of each event,
    the plane's kernels walked in start order, a kernel of the last event's op extending it."""
    events: list[list] = []
    for kernel in sorted(kernels, key=lambda kernel: kernel.start_ps):
        end = kernel.start_ps + kernel.duration_ps
        if events and events[-1][0] == kernel.op:
            events[-1][2] = max(events[-1][2], end)
        else:
            events.append([kernel.op, kernel.start_ps, end, kernel.step])
    return [tuple(event) for event in events]


class _Plane:
    """An XPlane with its metadata made as used."""

    def __init__(self, plane_id: int, name: str):
        self.plane = XPlane(id=plane_id, name=name)
        self._stats: dict[str, int] = {}
        self._events: dict[str, int] = {}

    def stat(self, name: str) -> int:
        if name not in self._stats:
            key = self._stats[name] = len(self._stats) + 1
            entry = self.plane.stat_metadata.add(key=key)
            entry.value.id, entry.value.name = key, name
        return self._stats[name]

    def event(self, name: str) -> int:
        if name not in self._events:
            key = self._events[name] = len(self._events) + 1
            entry = self.plane.event_metadata.add(key=key)
            entry.value.id, entry.value.name = key, name
        return self._events[name]


def _write_xplane(path: Path, kernels: list[Kernel], host: str = "", device_first: bool = False) -> None:
    """The session's xplane: the GPU plane, and with ``host`` its host planes: ``"cpu"``,
    the launches on the executor thread of ``/host:CPU`` (TF 2.4); ``"cupti"``, the
    launches on a ``/host:CUPTI`` plane of their own, its line numbered by the thread as
    the executor's is; ``"untraced"``, as ``"cpu"`` but the ops' own events missing, each
    step's launches inside one function call's op event."""
    device = _Plane(2, "/device:GPU:0")
    streams = {
        stream: device.plane.lines.add(id=stream, name=f"Stream #{stream}(Compute)", timestamp_ns=LINE_NS)
        for stream in sorted({kernel.stream for kernel in kernels})
    }
    for kernel in kernels:
        event = streams[kernel.stream].events.add(
            metadata_id=device.event(kernel.name), offset_ps=kernel.start_ps, duration_ps=kernel.duration_ps
        )
        for name, value in (("level 0", kernel.op), ("annotation", kernel.op)):
            event.stats.add(metadata_id=device.stat(name)).str_value = value
        event.stats.add(metadata_id=device.stat("group_id")).int64_value = kernel.step
        event.stats.add(metadata_id=device.stat("correlation_id")).uint64_value = kernel.correlation
        event.stats.add(metadata_id=device.stat("is_eager")).int64_value = 0
    line = device.plane.lines.add(id=-559038734, name="TensorFlow Ops", timestamp_ns=LINE_NS)
    for op, start, end, step in _derived_ops(kernels):
        event = line.events.add(metadata_id=device.event(op), offset_ps=start, duration_ps=end - start)
        event.stats.add(metadata_id=device.stat("group_id")).int64_value = step
    planes = [device.plane] + (_host_planes(kernels, host) if host else [])
    space = XSpace()
    space.planes.extend(planes if device_first else planes[::-1])
    path.write_bytes(space.SerializeToString())


def _host_planes(kernels: list[Kernel], kind: str) -> list[XPlane]:
    """The executor thread of the host: each execution's op event, 2 µs and 10 µs a kernel,
    with its kernels' launches inside it (events named after the kernel, carrying its
    correlation id); the host runs ahead of the device, as it does. ``"cupti"``: the
    launches lie on a ``/host:CUPTI`` plane's line of the same thread id, its own clock
    origin 3 µs earlier; ``"untraced"``: one ``StatefulPartitionedCall`` op event a step
    in place of the ops' own."""
    apart = kind == "cupti"
    host = _Plane(1, "/host:CPU")
    thread = host.plane.lines.add(id=4242, name="tf_Compute/4242", timestamp_ns=LINE_NS - 1_000_000)
    cupti = _Plane(3, "/host:CUPTI") if apart else host
    launches = cupti.plane.lines.add(id=4242, name="4242", timestamp_ns=LINE_NS - 1_003_000) if apart else thread
    shift = 3 * 1000 * 1000 if apart else 0  # ps
    executions: dict[tuple, list[Kernel]] = collections.defaultdict(list)
    for kernel in kernels:
        executions[kernel.op, kernel.step, kernel.execution].append(kernel)
    clock = 0
    step_starts: dict[int, int] = {}
    step_ends: dict[int, int] = {}
    for (op, step, _), launched in sorted(executions.items(), key=lambda item: item[1][0].start_ps):
        start = clock
        clock += 2 * US
        for kernel in launched:
            launch = launches.events.add(
                metadata_id=cupti.event(kernel.name), offset_ps=clock + shift, duration_ps=5 * US
            )
            launch.stats.add(metadata_id=cupti.stat("correlation_id")).int64_value = kernel.correlation
            launch.stats.add(metadata_id=cupti.stat("group_id")).int64_value = step
            clock += 10 * US
        if kind != "untraced":
            thread.events.add(metadata_id=host.event(op), offset_ps=start, duration_ps=clock - start)
        clock += 1 * US
        step_starts.setdefault(step, start)
        step_ends[step] = clock
    if kind == "untraced":
        call = host.event("StatefulPartitionedCall:StatefulPartitionedCall")
        for step, start in step_starts.items():
            thread.events.add(metadata_id=call, offset_ps=start, duration_ps=step_ends[step] - start)
    return [host.plane, cupti.plane] if apart else [host.plane]


def _read(path: Path, pure_python: bool, monkeypatch) -> pd.DataFrame:
    """The device rows, on the C path or the pure-Python one, the lines cut into many batches."""
    monkeypatch.setattr(xplane_wire, "EVENT_BATCH_BYTES", 4096)
    if pure_python:
        monkeypatch.setenv(xplane_wire.PURE_PYTHON_ENV, "1")
    else:
        monkeypatch.delenv(xplane_wire.PURE_PYTHON_ENV, raising=False)
    try:
        ops = read_profile("xplane", [str(path)]).op_table.frame()
    finally:
        monkeypatch.delenv(xplane_wire.PURE_PYTHON_ENV, raising=False)
    ops = ops[ops["side"] == "device"]
    return ops.assign(op=ops["op_name"] + ":" + ops["op_type"]).set_index("op").sort_index()


def _truth(kernels: list[Kernel]) -> dict[str, tuple[int, float]]:
    """Each op's executions and mean per execution (µs), from the raw kernels."""
    times: dict[str, dict[tuple, int]] = collections.defaultdict(lambda: collections.defaultdict(int))
    for kernel in kernels:
        times[kernel.op][kernel.step, kernel.execution] += kernel.duration_ps
    return {op: (len(found), sum(found.values()) / len(found) / US) for op, found in times.items()}


@pytest.fixture(scope="module")
def kernels() -> list[Kernel]:
    return _kernels()


def test_the_built_plane_has_the_documented_cuts(kernels):
    """CONV: 21 executions drawn as 21 + 14 + 4 = 39 events (its three kernels as one, two
    or three pieces); LOOP: 42 executions as 42 + 2 * 11 = 64; PACKED: 21 as 31."""
    events = collections.Counter(op for op, *_ in _derived_ops(kernels))
    steps = range(1, STEPS + 1)
    assert (
        events[CONV] == STEPS + sum(1 for step in steps if step % 3) + sum(1 for step in steps if step % 5 == 0) == 39
    )
    assert events[LOOP] == 2 * STEPS + 2 * sum(step % 2 for step in steps) == 64
    assert events[PACKED] == STEPS + sum(1 for step in steps if step % 2 == 0) == 31


@pytest.mark.parametrize("pure_python", [False, True], ids=["c", "python"])
def test_pieces_of_one_execution_are_one_execution(kernels, tmp_path, pure_python, monkeypatch):
    """Without a host plane, the step groups and the kernels decide: CONV counts one
    execution a step and its mean is the sum of its three kernels a step; LOOP's two
    executions a step stay two (the second starts its kernels over); a piece that repeats a
    kernel of its execution (PACKED's second ``scalePackedTensor_kernel``) stays apart, as
    nothing but the host can tell it from a second execution. Before, every piece was an
    execution: CONV read 39 executions at less than half its time."""
    path = tmp_path / "gpu.xplane.pb"
    _write_xplane(path, kernels)
    rows, truth = _read(path, pure_python, monkeypatch), _truth(kernels)
    for op in (CONV, LOOP, POOL, ADD, DROPOUT):
        count, mean = truth[op]
        assert rows.loc[op, "occurrences"] == count, op
        assert rows.loc[op, "mean_us"] == pytest.approx(mean, rel=1e-12), op
    assert truth[CONV][0] == STEPS and truth[LOOP][0] == 2 * STEPS
    packed_events = sum(1 for op, *_ in _derived_ops(kernels) if op == PACKED)
    assert rows.loc[PACKED, "occurrences"] == packed_events
    assert rows["kernels"].sum() == len(kernels)


@pytest.mark.parametrize("pure_python", [False, True], ids=["c", "python"])
@pytest.mark.parametrize(
    ("host", "device_first"), [("cpu", False), ("cpu", True), ("cupti", False)], ids=["cpu", "device_first", "cupti"]
)
def test_the_hosts_launches_decide_where_the_file_has_them(
    kernels, tmp_path, pure_python, host, device_first, monkeypatch
):
    """With the host's planes, each kernel's launch (its correlation id) lies in one host
    execution of its op: every op, PACKED included, counts its executions exactly, whether
    the launches lie on the executor's line or on a ``/host:CUPTI`` plane's line of its
    thread, and whichever plane the file holds first."""
    path = tmp_path / "gpu.xplane.pb"
    _write_xplane(path, kernels, host=host, device_first=device_first)
    rows, truth = _read(path, pure_python, monkeypatch), _truth(kernels)
    for op, (count, mean) in truth.items():
        assert rows.loc[op, "occurrences"] == count, op
        assert rows.loc[op, "mean_us"] == pytest.approx(mean, rel=1e-12), op


def test_both_paths_read_the_same(kernels, tmp_path, monkeypatch):
    path = tmp_path / "gpu.xplane.pb"
    for host in ("", "cpu", "cupti"):
        _write_xplane(path, kernels, host=host)
        pd.testing.assert_frame_equal(_read(path, False, monkeypatch), _read(path, True, monkeypatch), check_exact=True)


def test_a_launch_outside_its_ops_execution_leaves_the_step_rule_to_decide(kernels, tmp_path, monkeypatch):
    """Launches known for one piece only (the other's correlation ids match no launch) do
    not decide: the step group and the kernels do."""
    path = tmp_path / "gpu.xplane.pb"
    partial = [dataclasses.replace(kernel) for kernel in kernels]
    for kernel in partial:
        if kernel.op == CONV and kernel.name != "implicit_convolve_sgemm":
            kernel.correlation += 10**9  # no launch carries it
    _write_xplane(path, partial, host="cpu")
    rows, truth = _read(path, False, monkeypatch), _truth(partial)
    assert rows.loc[CONV, "occurrences"] == truth[CONV][0] == STEPS
    assert rows.loc[CONV, "mean_us"] == pytest.approx(truth[CONV][1], rel=1e-12)


def test_a_launch_places_a_kernel_only_in_an_execution_of_its_own_op(kernels, tmp_path, monkeypatch):
    """Where the host traced no event of the ops themselves, a launch lies in the function
    call that ran them all: that says nothing of which execution of the kernel's op it was
    (LOOP's two executions a step would read as one), so the step rule decides, as without
    a host."""
    path = tmp_path / "gpu.xplane.pb"
    _write_xplane(path, kernels, host="untraced")
    untraced = _read(path, False, monkeypatch)
    _write_xplane(path, kernels)
    pd.testing.assert_frame_equal(untraced, _read(path, False, monkeypatch), check_exact=True)
    assert untraced.loc[LOOP, "occurrences"] == 2 * STEPS


def test_kernels_without_a_step_group_keep_the_lines_pieces(kernels, tmp_path, monkeypatch):
    """Nothing ties the pieces: each stays an execution, as before."""
    path = tmp_path / "gpu.xplane.pb"
    _write_xplane(path, kernels)
    space = XSpace.FromString(path.read_bytes())
    (device,) = space.planes
    group = next(entry.key for entry in device.stat_metadata if entry.value.name == "group_id")
    for line in device.lines:
        for event in line.events:
            kept = [stat for stat in event.stats if stat.metadata_id != group]
            del event.stats[:]
            event.stats.extend(kept)
    path.write_bytes(space.SerializeToString())
    rows = _read(path, False, monkeypatch)
    events = collections.Counter(op for op, *_ in _derived_ops(kernels))
    for op in (CONV, LOOP, PACKED):
        assert rows.loc[op, "occurrences"] == events[op], op


@pytest.mark.parametrize("host", ["", "cpu"], ids=["no_host", "host"])
def test_the_trace_json_of_the_session_counts_what_its_xplane_counts(kernels, tmp_path, host, monkeypatch):
    """TF 2.0-2.3's ``<host>.trace.json.gz`` (xprof's trace-viewer rendering of the xplane):
    its kernels keep ``group_id`` and ``correlation_id`` as args and its host threads the
    launches, so the same rule reads the same executions and means."""
    from xprof.convert import raw_to_tool_data

    path = tmp_path / "gpu.xplane.pb"
    _write_xplane(path, kernels, host=host)
    rendered, _ = raw_to_tool_data.xspace_to_tool_data([str(path)], "trace_viewer", {})
    trace = tmp_path / "host.trace.json.gz"
    trace.write_bytes(gzip.compress(rendered.encode() if isinstance(rendered, str) else rendered))
    ops = read_profile("tf_trace_json", [str(trace)]).op_table.frame()
    ops = ops[ops["side"] == "device"]
    from_json = ops.assign(op=ops["op_name"] + ":" + ops["op_type"]).set_index("op").sort_index()
    from_xplane = _read(path, False, monkeypatch)
    assert from_json.index.equals(from_xplane.index)
    assert from_json["occurrences"].equals(from_xplane["occurrences"])
    # the trace viewer writes times in µs with ns digits: means agree to its rounding
    assert np.allclose(from_json["mean_us"], from_xplane["mean_us"], rtol=1e-6)
    assert from_json.loc[CONV, "occurrences"] == STEPS
    if host:
        assert from_json.loc[PACKED, "occurrences"] == STEPS
