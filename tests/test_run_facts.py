"""Run facts beyond device and batch size (issue 18), read from the data of real
recordings whose sidecars are taken away: the precision the model computed in and the
compiler that ran it."""

from __future__ import annotations

import collections
import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES, run_cli

from tb_opcompare.store.catalog import Catalog

H100 = FIXTURES / "gpu_h100"
RUNS = {  # run: (precision, compiler) as recorded (the sidecars say so too)
    "demo/mnist_cnn_torch_bf16_gpu_bs16_rep1": ("bf16", "eager"),
    "demo/mnist_cnn_torch_bf16_cpu_bs64_rep2": ("bf16", "eager"),
    "demo/mnist_cnn_torch_gpu_bs16_rep1": ("fp32", "eager"),
    "zoo/mnist_cnn_compiled_cpu_bs16": ("fp32", "torch.compile"),
    "zoo/mnist_cnn_compiled_gpu_bs64": ("fp32", "torch.compile"),
    "zoo/resnet18_gpu_bs8": ("fp32", "eager"),
}


@pytest.fixture(scope="module")
def without_sidecars(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("facts")
    for run in RUNS:
        shutil.copytree(H100 / run, logdir / run, ignore=shutil.ignore_patterns("opcompare.json"))
    return logdir


@pytest.mark.parametrize("run", RUNS)
def test_precision_and_compiler_come_from_the_data(without_sidecars, run):
    facts = Catalog(str(without_sidecars), cache_dir=None).load(run).profile.facts
    precision, compiler = RUNS[run]
    assert (facts.precision, facts.compiler) == (precision, compiler)
    assert facts.precision_source.startswith("data: input dtypes of ")
    assert facts.compiler_source.startswith("data: ")
    sidecar = json.loads((H100 / run / "opcompare.json").read_text())
    assert sidecar["precision"] == precision  # what the recorder set


def test_a_sidecar_that_disagrees_is_warned_about_and_the_data_wins(tmp_path):
    run = "demo/mnist_cnn_torch_bf16_gpu_bs16_rep1"
    shutil.copytree(H100 / run, tmp_path / "run")
    sidecar = json.loads((tmp_path / "run" / "opcompare.json").read_text())
    (tmp_path / "run" / "opcompare.json").write_text(
        json.dumps({**sidecar, "precision": "fp16", "compiler": "torch.compile"})
    )
    listing = json.loads(run_cli("runs", str(tmp_path), "--json", "--no-cache").stdout)
    (record,) = listing["runs"]
    assert (record["precision"], record["compiler"]) == ("bf16", "eager")
    assert (
        "the sidecar opcompare.json says precision fp16 but the profile shows bf16; using the profile"
        in record["warnings"]
    )
    assert (
        "the sidecar opcompare.json says compiler torch.compile but the profile shows eager; using the "
        "profile" in record["warnings"]
    )


PRECISION = FIXTURES / "precision" / "logdir"  # Keras 3 runs recorded without sidecars


@pytest.mark.parametrize(
    "run, precision, precision_by, compiler",
    [
        # Keras's fit runs a graph: the name's "eager" (no XLA) agrees, and the data says which (no warning)
        ("keras_fp32_eager_cpu_bs16/train", "fp32", "data: ", "TF graph"),
        # mixed_bfloat16: float32 variables and loss; the name's "bf16" agrees with it (no warning)
        ("keras_bf16_eager_cpu_bs16/train", "mixed bf16/fp32", "data: ", "TF graph"),
        # XLA's allocations name no op and no dtype: its programs (HLO) give the precision
        ("keras_fp32_xla_cpu_bs16/train", "fp32", "data: ", "XLA"),
        # a bf16 Keras model under XLA on a CPU stores bf16 but computes its convolutions in fp32
        ("keras_bf16_xla_cpu_bs16/train", "mixed bf16/fp32", "data: ", "XLA"),
    ],
)
def test_keras_precision_and_xla_come_from_the_data(run, precision, precision_by, compiler):
    loaded = Catalog(str(PRECISION), cache_dir=None).load(run)
    facts = loaded.profile.facts
    assert (facts.precision, facts.compiler) == (precision, compiler)
    assert facts.precision_source.startswith(precision_by) and facts.compiler_source.startswith("data: ")
    assert not [warning for warning in facts.warnings if "precision" in warning or "compiler" in warning]
    # the four are one model in four configurations: never pooled or paired with each other
    assert loaded.base_model == "keras/train"
    # grouped as configured: the name's bf16 agrees with the data's bf16/fp32 mix
    assert (
        loaded.model
        == {
            "keras_fp32_eager": "keras/train",
            "keras_bf16_eager": "keras/train [bf16]",
            "keras_fp32_xla": "keras/train [XLA]",
            "keras_bf16_xla": "keras/train [bf16, XLA]",
        }[run.split("_cpu")[0]]
    )


XLA_XPLANES = sorted(
    [
        *PRECISION.glob("*_xla_*/**/*.xplane.pb"),
        *(FIXTURES.parent.parent / "demo_logs" / "tf_keras").glob("*_xla/**/*.xplane.pb"),
    ]
)


def _xla_run(xplane: Path) -> str:
    return next(part for part in xplane.parts if "_xla" in part)


@pytest.mark.parametrize("xplane", XLA_XPLANES, ids=_xla_run)
def test_xla_precision_is_the_element_types_tensorflow_s_own_hlo_proto_gives(xplane):
    """The XLA programs in the metadata plane, parsed with TensorFlow's own XSpace and
    HloProto classes: every floating-point instruction's element type, counted once."""
    from tensorflow.compiler.xla import xla_data_pb2
    from tensorflow.compiler.xla.service import hlo_pb2
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    from tb_opcompare.ingest.readers.xla_hlo import METADATA_PLANE, HloEvidence
    from tb_opcompare.ingest.readers.xplane_schema import XSpace

    space = xplane_pb2.XSpace.FromString(xplane.read_bytes())
    (metadata,) = [plane for plane in space.planes if plane.name == METADATA_PLANE]
    names = {"F16": "fp16", "F32": "fp32", "F64": "fp64", "BF16": "bf16"}
    expected, compute = collections.Counter(), collections.Counter()
    for event_metadata in metadata.event_metadata.values():
        for stat in event_metadata.stats:
            if metadata.stat_metadata[stat.metadata_id].name == "Hlo Proto":
                program = hlo_pb2.HloProto.FromString(stat.bytes_value)
                for computation in program.hlo_module.computations:
                    for instruction in computation.instructions:
                        name = names.get(xla_data_pb2.PrimitiveType.Name(instruction.shape.element_type))
                        if name:
                            expected[name] += 1
                            compute[name] += instruction.opcode in ("convolution", "dot")
    evidence = HloEvidence()
    for plane in XSpace.FromString(xplane.read_bytes()).planes:
        if plane.name == METADATA_PLANE:
            evidence.add(plane)
    assert evidence.values == expected and sum(expected.values()) > 100
    assert evidence.compute == +compute
    # a bf16 model's programs hold bf16 values; an fp32 model's none
    assert ("bf16" in expected) == ("bf16" in _xla_run(xplane))


def test_xla_compiled_ops_are_read_as_ops():
    """With jit_compile=True the step's arithmetic runs as XLA ops (events carrying an
    hlo_op stat), not TF ops: every one of them is an op occurrence, so the XLA run's op
    time is its real work, not only its input pipeline."""
    from tb_opcompare.ingest.readers.xplane_schema import XSpace

    (xplane,) = (PRECISION / "keras_fp32_xla_cpu_bs16").rglob("*.xplane.pb")
    (plane,) = [p for p in XSpace.FromString(xplane.read_bytes()).planes if p.name == "/host:CPU"]
    hlo_stat = next(entry.key for entry in plane.stat_metadata if entry.value.name == "hlo_op")
    names = {entry.key: entry.value.name for entry in plane.event_metadata}
    hlo_events = [
        (names[event.metadata_id], event.duration_ps)
        for line in plane.lines
        for event in line.events
        if any(stat.metadata_id == hlo_stat for stat in event.stats)
    ]
    assert len(hlo_events) > 100
    ops = Catalog(str(PRECISION), cache_dir=None).load("keras_fp32_xla_cpu_bs16/train").profile.op_table.frame()
    # a row is an XLA op's as the reader names it: its instruction's name, or its framework
    # op's with the instruction's kind (``sequential/conv2d/Conv2D/convolution``), so that two
    # compilations, which number their instructions differently, meet op by op
    kinds = {re.sub(r"\.\d+$", "", name) for name, _ in hlo_events}
    named = {name for name, _ in hlo_events}
    is_xla = [
        name in named or (kind in kinds and name.endswith(f"/{kind}"))
        for name, kind in zip(ops["op_name"], ops["op_type"])
    ]
    hlo_rows = ops[is_xla]
    assert hlo_rows["occurrences"].sum() == len(hlo_events)
    assert hlo_rows["total_us"].sum() == pytest.approx(sum(d for _, d in hlo_events) / 1e6, rel=1e-9)
    assert set(hlo_rows["op_type"]) >= {"convolution"}  # convolution.2 and the like meet as one type
    # against the same model without XLA, the op time per step is of the same order (it was 24x off)
    compare = json.loads(
        run_cli(
            "compare",
            str(PRECISION),
            "--no-cache",
            "--json",
            "--baseline",
            "keras_fp32_eager_cpu_bs16/train",
            "--target",
            "keras_fp32_xla_cpu_bs16/train",
            "--group-by",
            "type",
        ).stdout
    )
    assert 0.3 < compare["summary"]["whole_step_speedup"] < 3


@pytest.mark.parametrize(
    "claimed, measured, same",
    [
        ("float32", "fp32", True),
        ("mixed_bfloat16", "mixed bf16/fp32", True),
        ("bf16", "bf16", True),
        ("fp32", "mixed bf16/fp32", False),
        ("bf16", "fp32", False),
        ("e", "fp32", False),
    ],
)
def test_sidecar_precision_words_are_read_as_the_data_writes_them(claimed, measured, same):
    from tb_opcompare.schema.dimensions import same_dimension as _same

    assert _same("precision", claimed, measured) is same


@pytest.mark.parametrize(
    "claimed, measured, same",
    [
        ("inductor", "torch.compile", True),
        ("eager", "no XLA", True),
        ("jit_compile", "XLA", True),
        ("eager", "torch.compile", False),
        ("xla", "no XLA", False),
    ],
)
def test_sidecar_compiler_words_are_read_as_the_data_writes_them(claimed, measured, same):
    from tb_opcompare.schema.dimensions import same_dimension as _same

    assert _same("compiler", claimed, measured) is same


def test_a_mix_is_spelt_one_way_whichever_dtype_leads():
    """Runs of one configuration group together: the data's counts decide which dtype is
    most common, not how the mix is written."""
    from tb_opcompare.schema.events import precision_from_dtypes

    spelt = {
        precision_from_dtypes(counts, "{total}")[0]
        for counts in (
            {"fp16": 5, "bf16": 3, "fp32": 1},
            {"bf16": 5, "fp16": 3, "fp32": 1},
            {"fp32": 5, "fp16": 3, "bf16": 1},
        )
    }
    assert spelt == {"mixed bf16/fp16/fp32"}


def _claims(*batch_sizes):
    from tb_opcompare.ingest.sidecar import Claims

    return Claims(
        model="cnn",
        label=None,
        batch_sizes=tuple(batch_sizes),
        device=None,
        device_source=None,
        device_name=None,
        warning=None,
    )


@pytest.mark.parametrize(
    "claims, expected, source",
    [
        ((128, "opcompare.json"), 128, "opcompare.json"),  # a sidecar outranks fit()'s argument
        ((128, "run name"), 128, "run name"),  # so does the run name
    ],
)
def test_fit_s_batch_size_argument_is_outranked_by_a_sidecar_and_a_name(claims, expected, source):
    """Issue 31, item 7: fit(dataset_batched_at_128, batch_size=1024) leaves 1024 in Keras 2's
    step event, which Keras ignored; the run read 1024 and called it the tensors' word."""
    from tb_opcompare.ingest.facts import settle_facts
    from tb_opcompare.schema.events import ARGUMENT_SOURCE, ProfileFacts

    passed = ProfileFacts(
        format="xplane",
        batch_size=1024,
        batch_size_source=ARGUMENT_SOURCE + "the batch_size of the Keras step event (fit()'s argument)",
    )
    facts = settle_facts(passed, _claims(claims))
    assert (facts.batch_size, facts.batch_size_source) == (expected, source)
    (warning,) = facts.warnings
    assert warning.startswith("the profile holds batch size 1024 only as the batch_size of the Keras step event")
    alone = settle_facts(passed, _claims())
    assert alone.batch_size == 1024 and alone.batch_size_source.startswith("argument: ")
    measured = settle_facts(
        ProfileFacts(format="xplane", batch_size=1024, batch_size_source="data: shapes"), _claims(claims)
    )
    assert measured.batch_size == 1024  # a measurement still outranks both
