"""JAX profiles (``jax.profiler.trace``) are XSpace files written by the profiler TF uses:
XLA's compiled ops run on the ``tf_XLAPjRtCpuClient`` line of ``/host:CPU``, each event
naming its HLO op (``dot.1``, ``ynn_fusion.2``) with an ``hlo_op`` stat, and
``StepTraceAnnotation`` marks the steps. Checked against the raw events of this project's
own recording (tests/fixtures/jax_cpu, ``record_jax.py``), read with TensorFlow's XSpace
classes (issue 32)."""

from __future__ import annotations

import collections
import re
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES, steady_median

from tb_opcompare.ingest.formats import read_profile
from tb_opcompare.service.compare import compare_document
from tb_opcompare.service.runs import runs_document
from tb_opcompare.store.catalog import Catalog

JAX = FIXTURES / "jax_cpu"
RUNS = ("mlp_cpu_bs8", "mlp_cpu_bs32")


def _programs(space) -> dict:
    """The space's XLA programs (read with XLA's own ``HloProto`` classes), each by its
    program id and by its module's name."""
    from tensorflow.compiler.xla.service import hlo_pb2

    programs: dict = {}
    for plane in space.planes:
        stats = {key: metadata.name for key, metadata in plane.stat_metadata.items()}
        for metadata in plane.event_metadata.values():
            named = {stats.get(stat.metadata_id): stat for stat in metadata.stats}
            if "Hlo Proto" in named:
                module = hlo_pb2.HloProto.FromString(named["Hlo Proto"].bytes_value).hlo_module
                program_id = named["program_id"].int64_value or named["program_id"].uint64_value
                programs[program_id] = programs[module.name] = module
    return programs


def _framework_op(module, name: str) -> str | None:
    """The JAX op the program's instruction ``name`` computes: its metadata's, or where XLA
    made it without one, the one op its nearest users that name one compute (followed
    through the unnamed users between); "" where none is one op; None where the program
    has no such instruction."""
    for computation in module.computations:
        users = collections.defaultdict(list)
        for instruction in computation.instructions:
            for operand in instruction.operand_ids:
                users[operand].append(instruction)
        for instruction in computation.instructions:
            if instruction.name != name:
                continue
            if instruction.metadata.op_name:
                return instruction.metadata.op_name
            named, seen, waiting = set(), {instruction.id}, [instruction]
            while waiting:
                for user in users[waiting.pop().id]:
                    if user.id in seen:
                        continue
                    seen.add(user.id)
                    if user.metadata.op_name:
                        named.add(user.metadata.op_name)
                    else:
                        waiting.append(user)
            return named.pop() if len(named) == 1 else ""
    return None


def _row(programs: dict, ran: set, name: str) -> str:
    """The row an XLA instruction's events are counted in: ``<JAX op>/<kind>`` where the
    programs that ran it (``ran``: ids or module names) say it computes one JAX op, else
    its own name. ``kind``: the name without its number (``dot.1``: ``dot``)."""
    made_from = {_framework_op(programs[program], name) for program in ran & programs.keys()} - {None}
    if len(made_from) != 1 or "" in made_from:
        return name
    kind = re.sub(r"[.]\d+$", "", name)
    return f"{made_from.pop()}/{kind}"


def _raw(run: str, root: Path = JAX) -> tuple[dict[str, tuple[int, float]], list[float]]:
    """Each XLA op row's executions and summed time (µs), its instructions' events
    counted in their JAX op's row (``_row``), and the steps' wall times (µs)."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    (path,) = (root / run).rglob("*.xplane.pb")
    space = xplane_pb2.XSpace.FromString(path.read_bytes())
    programs = _programs(space)
    ops: dict[str, list] = collections.defaultdict(lambda: [0, 0.0])
    steps: dict[int, tuple[int, float]] = {}
    for plane in space.planes:
        stats = {key: metadata.name for key, metadata in plane.stat_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                kinds = {stats.get(stat.metadata_id): stat for stat in event.stats}
                if "hlo_op" in kinds:
                    program = kinds.get("program_id")  # every program, where the event names none
                    ran = {program.int64_value or program.uint64_value} if program else set(programs)
                    entry = ops[_row(programs, ran, plane.event_metadata[event.metadata_id].name)]
                    entry[0] += 1
                    entry[1] += event.duration_ps / 1e6
                if "step_num" in kinds:
                    step = kinds["step_num"].int64_value or kinds["step_num"].uint64_value
                    start = line.timestamp_ns * 1000 + event.offset_ps
                    if step not in steps or event.duration_ps / 1e6 > steps[step][1]:
                        steps[step] = (start, event.duration_ps / 1e6)
    return (
        {name: (count, total) for name, (count, total) in ops.items()},
        [duration for _, duration in sorted(steps.values())],
    )


@pytest.fixture(scope="module")
def catalog(tmp_path_factory) -> Catalog:
    logdir = tmp_path_factory.mktemp("jax") / "logs"
    shutil.copytree(JAX, logdir, ignore=shutil.ignore_patterns("*.md"))
    return Catalog(str(logdir), cache_dir=None)


@pytest.mark.parametrize("run", RUNS)
def test_a_jax_run_reads_each_hlo_op_and_each_step_as_its_raw_events_say(catalog, run):
    """Each row has the executions and time of its instructions' events: an instruction's
    row is the JAX op it computes (``jit(step)/sub`` for ``multiply_subtract_fusion.1``),
    as the programs in the raw profile say, so that rows of the two batch sizes meet op by
    op however XLA numbered them."""
    expected_ops, expected_steps = _raw(run)
    assert len(expected_ops) >= 10 and len(expected_steps) == 6
    assert "jit(step)/sub/multiply_subtract_fusion" in expected_ops  # four instructions, one row
    loaded = catalog.load(run)
    facts, ops = loaded.profile.facts, loaded.profile.op_table.frame()
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
    """The headline is the step wall time per sample; every XLA op's row (its JAX op's)
    meets its namesake."""
    summary = compare_document(catalog, "mlp_cpu_bs8", "mlp_cpu_bs32").summary
    assert summary.headline_basis == "step wall time" and summary.headline_per_sample
    rows = _raw("mlp_cpu_bs8")[0]
    assert rows.keys() == _raw("mlp_cpu_bs32")[0].keys()
    assert summary.matched_ops == len(rows) and not summary.baseline_only_ops and not summary.target_only_ops


# ---------------------------------------------------------------------------------------
# JAX on an NVIDIA H200 (tests/fixtures/jax_h200): the kernels carry no TF op (``tf_op``
# is ``XlaModule:``) but the XLA op that launched them (``hlo_op``) and one
# ``scope_range_id`` per execution of it; cuDNN launches several kernels per convolution.

JAX_H200 = FIXTURES / "jax_h200"


def _raw_gpu(run: Path | str, kernel_named=lambda name: True) -> dict[str, tuple[int, int, float]]:
    """Each XLA op row's executions (distinct scope range ids), kernels and summed kernel
    time (µs) on the GPU plane, from the raw events; an instruction's kernels are counted
    in its JAX op's row (``_row``, in the program their ``hlo_module`` names). A kernel of
    a command buffer (its ``hlo_op`` is ``command_buffer_N``, one scope range for the
    whole buffer) is its own execution of the fusion it is named after, and keeps its
    name. ``kernel_named``: only the kernels whose names it takes."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    (path,) = (JAX_H200 / run).rglob("*.xplane.pb")
    space = xplane_pb2.XSpace.FromString(path.read_bytes())
    programs = _programs(space)
    scopes: dict[str, set] = collections.defaultdict(set)
    kernels: dict[str, list] = collections.defaultdict(lambda: [0, 0.0])
    for plane in space.planes:
        if not plane.name.startswith("/device:GPU"):
            continue
        stats = {key: metadata.name for key, metadata in plane.stat_metadata.items()}
        for line in plane.lines:
            for number, event in enumerate(line.events):
                values = {stats.get(stat.metadata_id): stat for stat in event.stats}
                if "hlo_op" not in values:  # a copy of the results to the host
                    continue
                if not kernel_named(plane.event_metadata[event.metadata_id].name):
                    continue
                op = values["hlo_op"].str_value or stats[values["hlo_op"].ref_value]
                scope = values["scope_range_id"].int64_value or values["scope_range_id"].uint64_value
                if op.startswith("command_buffer"):
                    op, scope = plane.event_metadata[event.metadata_id].name, (line.id, number)
                else:
                    module = values["hlo_module"].str_value or stats[values["hlo_module"].ref_value]
                    op = _row(programs, {module}, op)
                scopes[op].add(scope)
                kernels[op][0] += 1
                kernels[op][1] += event.duration_ps / 1e6
    return {op: (len(scopes[op]), count, total) for op, (count, total) in kernels.items()}


@pytest.fixture(scope="module")
def h200(tmp_path_factory) -> Catalog:
    logdir = tmp_path_factory.mktemp("jax_h200") / "logs"
    shutil.copytree(JAX_H200, logdir, ignore=shutil.ignore_patterns("*.md", "*.txt"))
    return Catalog(str(logdir), cache_dir=None)


@pytest.mark.parametrize("run", ["cnn_gpu_bs32_rep1", "mlp_gpu_bs128"])
def test_a_jax_gpu_run_reads_each_xla_op_per_execution_as_its_raw_kernels_say(h200, run):
    """Before: every kernel was its own op, named by the kernel ('(kernel without TF op)'),
    so cuDNN's five kernels of one weight gradient were five rows with a fifth of its time.
    The model's two convolutions are one JAX op (``conv_general_dilated``): each of their
    kinds is one row, with both layers' executions."""
    expected = _raw_gpu(run)
    assert any(kernels > executions for executions, kernels, _ in expected.values()) or run.startswith("mlp")
    loaded = h200.load(run)
    facts, ops = loaded.profile.facts, loaded.profile.op_table.frame()
    assert (facts.device, facts.device_name, facts.framework) == ("GPU", "NVIDIA H200", "JAX 0.11.2")
    assert (facts.compiler, facts.precision, facts.steps) == ("XLA", "fp32", 6)
    device = ops[ops["side"] == "device"].set_index("op_name")
    assert set(device.index) == set(expected)
    for op, (executions, kernels, total) in expected.items():
        assert (device.loc[op, "occurrences"], device.loc[op, "kernels"]) == (executions, kernels), op
        assert device.loc[op, "mean_us"] == pytest.approx(total / executions, rel=1e-9), op
    # the runtime's `ThenExecuteCallback:GetEvent...` is no op; the host runs none here
    assert set(ops["side"]) == {"device"}


def test_a_jax_gpu_runs_convolutions_on_tf32_kernels_are_under_the_tf32_roof(h200):
    """JAX's CNN in fp32 on an H200: cuDNN ran two of its convolutions on TF32 tensor cores
    (``sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_…``), as the kernels' names say. Each
    op's TF32 kernel time is the raw events' (0 where none ran there), and the ops with most
    of their kernel time there are measured under the H200's TF32 peak, not its fp32 one."""
    from tb_opcompare.service.roofline import roofline_document

    run = "cnn_gpu_bs32_rep1"
    on_tf32 = {op: total for op, (_, _, total) in _raw_gpu(run, lambda name: "tf32" in name.lower()).items()}
    every = {op: total for op, (_, _, total) in _raw_gpu(run).items()}
    work = h200.load(run).profile.work_table.frame().set_index("op_name")
    known = work[work["device_calls"] > 0]
    assert len(known) > 5
    for op in known.index:
        assert known.loc[op, "device_us"] == pytest.approx(every[op], rel=1e-9), op
        assert known.loc[op, "device_tf32_us"] == pytest.approx(on_tf32.get(op, 0.0), rel=1e-9, abs=1e-9), op
    mostly = {op for op in known.index if on_tf32.get(op, 0.0) > every[op] / 2}
    assert len(mostly) >= 2
    document = roofline_document(h200, run, run)
    precisions = {row["op_name"]: row["baseline_roof_precision"] for row in document.rows}
    assert {op for op, precision in precisions.items() if precision == "tf32"} == mostly
    computing = [op for op in known.index if op not in mostly and known.loc[op, "device_flops"] > 0]
    assert computing and all(precisions[op] == "fp32" for op in computing)  # (a copy has no compute roof)


def test_the_jax_cpu_to_gpu_pair_of_one_host_pairs_and_reads_the_stopwatch(h200):
    """Before: the GPU runs read 'eager' and the CPU runs 'XLA', so the two never paired."""
    listing = runs_document(h200).pairs
    assert ("cnn_cpu_bs8", "cnn_gpu_bs8") in [(pair.baseline, pair.target) for pair in listing]
    summary = compare_document(h200, "cnn_cpu_bs8", "cnn_gpu_bs8").summary
    cpu = steady_median(_raw("cnn_cpu_bs8", JAX_H200)[1])
    gpu = steady_median(_raw("cnn_gpu_bs8", JAX_H200)[1])
    assert summary.headline_basis == "step wall time"
    assert summary.headline_speedup == pytest.approx(cpu / gpu, rel=1e-9)


# ---------------------------------------------------------------------------------------
# A Flax workdir as the Flax examples write it (tests/fixtures/user_logdirs/flax_h200): a
# transformer encoder on an H200 and its CPU, `jax.profiler.start_trace(workdir)`, the
# batch-32 GPU run three times into one workdir (three sessions).

FLAX = FIXTURES / "user_logdirs" / "flax_h200"


def _train_steps(session: Path) -> list[float]:
    """The wall time (µs) of each ``StepTraceAnnotation("train")`` of a session, from the
    raw events, in start order."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    (path,) = session.glob("*.xplane.pb")
    steps: dict[int, tuple[int, float]] = {}
    for plane in xplane_pb2.XSpace.FromString(path.read_bytes()).planes:
        stats = {key: metadata.name for key, metadata in plane.stat_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                if plane.event_metadata[event.metadata_id].name != "train":
                    continue
                (step,) = [s.int64_value or s.uint64_value for s in event.stats if stats[s.metadata_id] == "step_num"]
                start = line.timestamp_ns * 1000 + event.offset_ps
                if step not in steps or event.duration_ps / 1e6 > steps[step][1]:
                    steps[step] = (start, event.duration_ps / 1e6)
    return [duration for _, duration in sorted(steps.values())]


def test_a_flax_workdir_pairs_its_cpu_and_gpu_runs_on_the_stopwatch(tmp_path):
    shutil.copytree(FLAX, tmp_path / "logs")
    catalog = Catalog(str(tmp_path / "logs"), cache_dir=None)
    listing = runs_document(catalog)
    runs = {run.run: run for run in listing.runs}
    assert set(runs) == {"workdir_cpu_bs32", "workdir_gpu_bs8", "workdir_gpu_bs32"}
    assert len(runs["workdir_gpu_bs32"].sessions) == 3
    assert {(run.device, run.device_name) for run in runs.values()} == {("CPU", None), ("GPU", "NVIDIA H200")}
    assert [(pair.baseline, pair.target) for pair in listing.pairs] == [("workdir_cpu_bs32", "workdir_gpu_bs32")]
    summary = compare_document(catalog, "workdir_cpu_bs32", "workdir_gpu_bs32").summary
    newest = max((tmp_path / "logs" / "workdir_gpu_bs32" / "plugins" / "profile").iterdir())
    (cpu_session,) = (tmp_path / "logs" / "workdir_cpu_bs32" / "plugins" / "profile").iterdir()
    expected = steady_median(_train_steps(cpu_session)) / steady_median(_train_steps(newest))
    assert summary.headline_basis == "step wall time"
    assert summary.headline_speedup == pytest.approx(expected, rel=1e-6)


def test_the_kernels_of_a_command_buffer_are_the_fusions_they_ran(tmp_path):
    """Recent XLA runs a whole step as one command buffer (a CUDA graph): every kernel's
    ``hlo_op`` is ``command_buffer_1``. Before, the GPU side of the Flax run was one row of
    1,014 kernels; now each fusion is a row, and the GPU's time is the raw kernels' time."""
    shutil.copytree(FLAX / "workdir_gpu_bs8", tmp_path / "logs" / "encoder")
    expected = _raw_gpu(tmp_path / "logs" / "encoder")
    assert len(expected) >= 50 and not any(op.startswith("command_buffer") for op in expected)
    ops = Catalog(str(tmp_path / "logs"), cache_dir=None).load("encoder").profile.op_table.frame()
    device = ops[(ops["side"] == "device") & ~ops["op_name"].str.startswith("Memcpy")].set_index("op_name")
    assert set(device.index) == set(expected)
    for op, (executions, kernels, total) in expected.items():
        assert (device.loc[op, "occurrences"], device.loc[op, "kernels"]) == (executions, kernels), op
        assert device.loc[op, "total_us"] == pytest.approx(total, rel=1e-9), op
    # typed as XLA's ops are, so that runs with and without command buffers meet by type
    assert device.loc["loop_add_fusion_26", "op_type"] == "loop_add_fusion"


def test_a_command_buffers_kernel_row_holds_every_xla_op_that_ran_that_kernel():
    """Oracle: the same Flax encoder recorded with command buffers off, where each kernel
    launch names its XLA op. XLA compiles one kernel for the fusions it finds alike, so a
    kernel's row in the command-buffer run executes as often as all the XLA ops that ran
    that kernel in the other, and both runs type their rows alike."""
    without = FIXTURES / "jax_h200_command_buffers" / "encoder_gpu_bs8_without_command_buffers"
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    (path,) = without.rglob("*.xplane.pb")
    ran: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for plane in xplane_pb2.XSpace.FromString(path.read_bytes()).planes:
        stats = {key: metadata.name for key, metadata in plane.stat_metadata.items()}
        for line in plane.lines if plane.name.startswith("/device:GPU") else []:
            for event in line.events:
                for stat in event.stats:
                    if stats.get(stat.metadata_id) == "hlo_op":
                        ran[plane.event_metadata[event.metadata_id].name][stat.str_value or stats[stat.ref_value]] += 1
    assert any(len(ops) > 1 for ops in ran.values())  # kernels shared by several fusions
    (with_buffers,) = (FLAX / "workdir_gpu_bs8").rglob("*.xplane.pb")
    ops = read_profile("xplane", [str(with_buffers)]).op_table.frame()
    rows = ops[(ops["side"] == "device") & ~ops["op_name"].str.startswith("Memcpy")].set_index("op_name")
    assert set(rows.index) == set(ran)
    for kernel, hlo_ops in ran.items():
        assert rows.loc[kernel, "occurrences"] == sum(hlo_ops.values()), kernel
    plain = read_profile("xplane", [str(path)]).op_table.frame()
    plain = plain[(plain["side"] == "device") & ~plain["op_name"].str.startswith("Memcpy")]
    assert set(plain["op_type"]) == set(rows["op_type"])
