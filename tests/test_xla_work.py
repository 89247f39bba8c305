"""The work of XLA ops (issue 54) from the programs a JAX profile carries: on real JAX CPU
recordings, each op's FLOPs and bytes add up to what XLA itself counted of the profiled
step (``cost_analysis()``, written by the recording script), a convolution equals a
formula written out here from the model's own shapes, and the roofline places the ops; on
a real H200 recording, cuDNN's convolutions equal the same formula and the ops sit under
the roof the profile's own device plane gives."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import FIXTURES

from tb_opcompare.ingest.readers.xla_cost import ProgramCosts, XlaPrograms
from tb_opcompare.ingest.readers.xplane_schema import HloProto
from tb_opcompare.service.roofline import roofline_document
from tb_opcompare.store.catalog import Catalog

JAX_CPU = FIXTURES / "flops" / "jax_cpu"
FIRST_CONV = "jit(step)/jvp()/conv_general_dilated/conv_general_dilated"  # conv_general_dilated.5, by its JAX op
ORACLES = FIXTURES / "flops" / "oracles"


def work_of(run: str):
    return Catalog(str(JAX_CPU)).load(run).profile.work_table.frame()


@pytest.mark.parametrize("run", ["cnn_cpu_bs8", "cnn_cpu_bs32"])
def test_the_ops_work_adds_up_to_xlas_own_count_of_the_step(run):
    oracle = json.loads((ORACLES / f"jax_{run}.cost_analysis.json").read_text())
    work = work_of(run)
    assert set(work["source"]) == {"xla"}
    # every instruction once a step, 4 steps profiled; a framework op's several instructions of one kind share a row
    assert (work["calls"] % 4 == 0).all() and (work["calls"] > 4).any()
    per_step = work[["flops", "bytes"]].sum() / 4
    print(f"\n{run}: {per_step['flops']:.0f} FLOPs, {per_step['bytes']:.0f} bytes a step; XLA: {oracle}")
    assert per_step["flops"] == pytest.approx(oracle["flops"], rel=0.01)
    assert per_step["bytes"] == pytest.approx(oracle["bytes accessed"], rel=0.01)


def conv_flops(batch: int, size: int, kernel: int, features_in: int, features_out: int) -> int:
    """A stride-1 'SAME' convolution, counted as XLA counts it: padding is no work, so each
    spatial dimension contributes the (output, kernel) pairs that land inside the input."""
    pad = kernel // 2
    pairs = sum(min(size, size + pad - k) - max(pad - k, 0) for k in range(kernel))
    return 2 * batch * features_out * features_in * pairs * pairs


@pytest.mark.parametrize("run, batch", [("cnn_cpu_bs8", 8), ("cnn_cpu_bs32", 32)])
def test_the_first_convolution_equals_the_formula_on_the_models_shapes(run, batch):
    # record_jax.py's CNN: 28 x 28 x 1 inputs, a 3 x 3 convolution to 16 features first
    work = work_of(run).set_index("op_name")
    assert work.loc[FIRST_CONV, "flops"] / 4 == conv_flops(batch, 28, 3, 1, 16)


def test_the_roofline_places_a_jax_pair_and_its_work_scales_with_the_batch(tmp_path):
    logdir = tmp_path / "logdir"
    shutil.copytree(JAX_CPU, logdir)
    limits = {"peak_flops": {"fp32": 1.0e12}, "memory_bandwidth": 1.0e11, "device": "a test CPU", "source": "test"}
    for run in ("cnn_cpu_bs8", "cnn_cpu_bs32"):
        (logdir / run / "opcompare.json").write_text(json.dumps({"device_limits": limits}))
    document = roofline_document(Catalog(str(logdir)), "cnn_cpu_bs8", "cnn_cpu_bs32")
    assert not any("no op's work is known" in note for note in document.notes)
    conv = next(row for row in document.rows if row["op_name"] == FIRST_CONV)
    assert conv["work_ratio"] == pytest.approx(4.0)  # the same convolution on 4 times the batch
    placed = [row for row in document.rows if row["baseline_fraction_of_roof"] is not None]
    assert len(placed) >= 10
    assert all(0 < row["baseline_fraction_of_roof"] <= 1 for row in placed)


def program_of(run: str):
    from tb_opcompare.ingest.readers.xla_hlo import HloEvidence
    from tb_opcompare.ingest.readers.xplane_schema import XSpace

    (path,) = (JAX_CPU / run).rglob("*.xplane.pb")
    space = XSpace()
    space.ParseFromString(path.read_bytes())
    evidence = HloEvidence()
    evidence.add(next(plane for plane in space.planes if plane.name == "/host:metadata"))
    return evidence.modules


def test_a_malformed_or_hostile_program_makes_work_unknown_not_a_crash():
    modules = program_of("cnn_cpu_bs8")
    program_id = next(key for key, module in modules.items() if module.name == "jit_step")
    broken = HloProto()
    broken.hlo_module.CopyFrom(modules[program_id])
    for computation in broken.hlo_module.computations:
        for instruction in computation.instructions:
            if instruction.opcode == "convolution":
                instruction.convolution_dimension_numbers.input_spatial_dimensions[0] = 99  # past the shape
            if instruction.opcode == "fusion":  # every fusion calls the computation it is in
                del instruction.called_computation_ids[:]
                instruction.called_computation_ids.append(computation.id)
    costs = ProgramCosts(broken.hlo_module)
    assert "malformed" in costs.of("conv_general_dilated.5")
    assert "malformed" in costs.of("ynn_fusion.5")  # a cycle (or what it calls) counts nothing, and says so
    for computation in broken.hlo_module.computations:  # the convolutions mended: the cycle alone
        for instruction in computation.instructions:
            if instruction.opcode == "convolution":
                instruction.convolution_dimension_numbers.input_spatial_dimensions[0] = 1
    assert "calls itself" in ProgramCosts(broken.hlo_module).of("ynn_fusion.5")
    programs = XlaPrograms({})
    assert programs.cost("dot", set()) == "the profile carries no XLA program to count it on"
    assert XlaPrograms(modules).cost("no_such_op.7", {program_id}).startswith("no XLA program")


JAX_H200 = FIXTURES / "jax_h200"


@pytest.mark.parametrize("batch", [8, 128])
def test_cudnns_convolutions_on_a_gpu_equal_the_formula_and_the_cpu_programs(batch):
    # the same CNN on the H200 and on its host's CPU: cuDNN's forward, input-gradient and
    # weight-gradient calls are each one of the model's two convolutions' work
    first, second = conv_flops(batch, 28, 3, 1, 16), conv_flops(batch, 28, 3, 16, 32)
    gpu = Catalog(str(JAX_H200)).load(f"cnn_gpu_bs{batch}").profile.work_table.frame()
    convolutions = gpu[gpu["op_type"].str.startswith("cudnn-conv")].set_index("op_type")
    # the model's two convolutions are one JAX op (conv_general_dilated): each kind's calls share its row
    a_step = convolutions["flops"] / 6  # 6 steps profiled
    assert a_step.to_dict() == {
        "cudnn-conv": first + second,
        "cudnn-conv-bw-input": second,  # the first layer's input needs no gradient
        "cudnn-conv-bw-filter": first + second,
    }
    assert set(convolutions["source"]) == {"xla"} and (convolutions["device_calls"] % 6 == 0).all()
    # every op the GPU ran has its work, a command buffer's kernels' too (named after their fusion)
    ran = Catalog(str(JAX_H200)).load(f"cnn_gpu_bs{batch}").profile.op_table.frame()
    kernels = set(ran.loc[(ran["side"] == "device") & ~ran["op_name"].str.startswith("Memcpy"), "op_name"])
    assert kernels == set(gpu["op_name"]) and set(gpu["source"]) == {"xla"}
    cpu = Catalog(str(JAX_H200)).load(f"cnn_cpu_bs{batch}").profile.work_table.frame()
    steps = [side["calls"].min() for side in (gpu, cpu)]  # every instruction once a step
    a_step = [side["flops"].sum() / count for side, count in zip((gpu, cpu), steps)]
    assert a_step[0] == pytest.approx(a_step[1], rel=0.01)  # two compilers' programs, one model's work


def test_a_jax_gpu_recording_is_placed_under_its_own_devices_roof():
    document = roofline_document(Catalog(str(JAX_H200)), "cnn_gpu_bs8", "cnn_gpu_bs128")
    (device,) = [limits for limits in document.baseline.limits if limits.processor == "device"]
    assert device.source.startswith("the profile's device plane")
    conv = next(row for row in document.rows if row["op_name"] == "jit(step)/jvp()/conv_general_dilated/cudnn-conv")
    assert conv["baseline_timed_on"] == "device" and conv["work_ratio"] == pytest.approx(16.0)
    assert 0 < conv["baseline_fraction_of_roof"] < conv["target_fraction_of_roof"] <= 1  # the bigger batch fills more
    assert not any("is unknown" in note for note in document.notes)


def instruction(module, computation, name: str, opcode: str, dims: list[int], operands=(), **fields):
    made = computation.instructions.add(name=name, opcode=opcode, id=len(computation.instructions) + 1, **fields)
    made.shape.element_type, made.shape.dimensions[:] = 11, dims  # f32
    made.operand_ids[:] = [operand.id for operand in operands]
    return made


def test_ops_that_touch_part_of_a_buffer_count_what_they_touch():
    """XLA's rules for in-place and indexed ops: a dynamic-update-slice of 1 K floats into a
    1 M float buffer moves the update twice and its indices, not the buffer; a gather of 8
    rows reads its output's worth; an all-reduce of a tuple counts every array."""
    program = HloProto()
    module = program.hlo_module
    main = module.computations.add(name="main", id=1)
    buffer = instruction(module, main, "buffer", "parameter", [1024, 1024])
    update = instruction(module, main, "update", "parameter", [1, 1024])
    index = instruction(module, main, "index", "parameter", [])
    index.shape.element_type = 4  # s32
    instruction(module, main, "dus", "dynamic-update-slice", [1024, 1024], (buffer, update, index, index))
    rows = instruction(module, main, "rows", "parameter", [8])
    rows.shape.element_type = 4
    instruction(module, main, "gathered", "gather", [8, 1024], (buffer, rows))
    instruction(module, main, "clz", "count-leading-zeros", [1024], (update,))
    both = instruction(module, main, "both", "all-reduce", [], (buffer, buffer))
    both.shape.element_type = 13  # a tuple of two 1 M arrays
    for _ in range(2):
        both.shape.tuple_shapes.add(element_type=11, dimensions=[1024, 1024])
    costs = ProgramCosts(module)
    assert costs.of("dus").bytes == 2 * 1024 * 4 + 2 * 4
    assert costs.of("gathered").bytes == 2 * 8 * 1024 * 4 + 8 * 4
    assert costs.of("clz").flops == 1024
    assert costs.of("both").flops == 2 * 1024 * 1024


def test_an_instruction_made_without_metadata_is_named_by_its_nearest_named_users():
    """XLA makes some instructions without metadata (a max-pool gradient's argmax window,
    read through get-tuple-elements and a fusion by the gradient's scatter): such an
    instruction is counted in the one framework op its nearest users that name one
    compute, and keeps its own name where they name several (a weight gradient that both
    of Adam's moments read), where they are past 8 users away or past 256 instructions to
    visit (a hostile program's fan-out), or where a cycle leads nowhere."""
    program = HloProto()
    module = program.hlo_module
    main = module.computations.add(name="main", id=1)
    named = lambda name, op_name, operands: instruction(  # noqa: E731
        module, main, name, "fusion", [4], operands, metadata={"op_name": op_name}
    )
    window = instruction(module, main, "window.1", "reduce-window", [4])
    parts = [instruction(module, main, f"gte.{i}", "get-tuple-element", [4], (window,)) for i in range(2)]
    joined = instruction(module, main, "concatenate_fusion", "fusion", [4], parts)
    named("scatter", "grad/MaxPoolGrad", (joined,))
    named("own", "mine", (named("other_user", "theirs", ()),))
    gradient = instruction(module, main, "convolution.1", "convolution", [4])
    named("m", "adam/m", (gradient,))
    named("v", "adam/v", (gradient,))
    chain = [instruction(module, main, "far", "copy", [4])]
    for hop in range(8):
        chain.append(instruction(module, main, f"copy.{hop}", "copy", [4], (chain[-1],)))
    named("far_user", "far/op", (chain[-1],))  # 9 users away from "far", 8 from "copy.0"
    wide = instruction(module, main, "wide", "copy", [4])
    fanned = [instruction(module, main, f"fan.{i}", "copy", [4], (wide,)) for i in range(300)]
    named("fan_in", "wide/op", fanned)
    looped = instruction(module, main, "loop.1", "copy", [4])
    looped.operand_ids.append(instruction(module, main, "loop.2", "copy", [4], (looped,)).id)
    costs, programs = ProgramCosts(module), XlaPrograms({7: module})
    assert costs.framework_op("window.1") == costs.framework_op("concatenate_fusion") == "grad/MaxPoolGrad"
    assert programs.framework_row("window.1", "window", set()) == ("grad/MaxPoolGrad/window", "window")
    assert costs.framework_op("own") == "mine"
    assert costs.framework_op("convolution.1") == "" and programs.framework_row("convolution.1", "c", {7}) is None
    assert (costs.framework_op("far"), costs.framework_op("copy.0")) == ("", "far/op")
    assert (costs.framework_op("wide"), costs.framework_op("fan.0")) == ("", "wide/op")
    assert costs.framework_op("loop.1") == "" and costs.framework_op("missing") is None
