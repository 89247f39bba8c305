"""The dimensions of a run beside its device and batch size, and the one vocabulary for
them: precision (``fp32``, ``bf16``, ``mixed bf16/fp32`` ...) and compiler (``eager``,
``torch.compile``, ``XLA`` ...), whoever names them (a sidecar, a run name, the data), and
the defaults a run is assumed to have where nothing says otherwise."""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal, TypeGuard

Processor = Literal["host", "device"]  # where an op's or a step part's time was spent

# How ops are grouped into rows: by name, by type; a compare also by module (PyTorch's
# nn.Module calls, ``OpProfile.module_table``, else the scopes of TF op names:
# ``sequential/conv2d/Relu`` is in ``sequential/conv2d``).
GroupBy = Literal["name", "type"]
GROUP_BY: tuple[GroupBy, ...] = ("name", "type")
COMPARE_GROUP_BY = (*GROUP_BY, "module")
SERIES_DIMENSIONS = ("device", "precision", "compiler")  # what a sweep's lines can be drawn by

# `check`'s defaults, the route's and the CLI's alike: a regression is a slowdown of more
# than 5% (the interval's far end) on an op holding at least 1% of the baseline's time
DEFAULT_THRESHOLD = 0.05
DEFAULT_MIN_SHARE = 0.01
CHECK_MIN_RUNS = 2  # runs a side of a check needs for its verdicts to mean more than a hint
# The chance, where nothing changed, that a check fails: half for the ops' family, half for
# the whole step (``analysis.confidence.decide``). 3% rather than 5%, since run-to-run noise
# has heavier tails than Student's t allows: on this project's identical repeats, two against
# two failed 5.9% of checks at 4% (benchmarks/bench_check.py).
FALSE_DISCOVERY_RATE = 0.03
# What a check answers for its power, one home for the code, the CLI's help and the contract:
# a slowdown is "detectable" where the check would flag it in DETECTION_POWER of checks, and
# a check that flags nothing has enough evidence only where it could detect ENOUGH_EVIDENCE x
# the threshold, and never less than that x POWER_MIN_THRESHOLD (a stricter gate, down to 0%:
# any significant slowdown, is answered for as one of POWER_MIN_THRESHOLD), in every gated op
# holding POWER_MIN_SHARE of op time or more.
DETECTION_POWER = 0.8
ENOUGH_EVIDENCE = 2
POWER_MIN_THRESHOLD = DEFAULT_THRESHOLD
POWER_MIN_SHARE = 0.05


def evidence_bar(threshold: float) -> float:
    """The largest detectable change with which a check of ``threshold`` has enough evidence."""
    return ENOUGH_EVIDENCE * max(threshold, POWER_MIN_THRESHOLD)


def evidence_rule(threshold: str = "the threshold") -> str:
    """``evidence_bar`` in words, for the help and the contract: "a regression of twice the
    threshold (10% at least) in every gated op holding 5% of op time or more"."""
    times = {1: "once", 2: "twice", 3: "three times"}.get(ENOUGH_EVIDENCE, f"{ENOUGH_EVIDENCE} times")
    return (
        f"a regression of {times} {threshold} ({ENOUGH_EVIDENCE * POWER_MIN_THRESHOLD:.0%} at least) in every "
        f"gated op holding {POWER_MIN_SHARE:.0%} of op time or more"
    )


def check_refusal(
    baseline: list[str],
    target: list[str],
    group_by: str = "name",
    allow_one_run: bool = False,
    one_logdir: bool = True,
) -> str | None:
    """Why a check of these sides cannot be made or trusted, or None: a grouping the check
    has no statistics for (modules), a run on both sides, a side of fewer than
    CHECK_MIN_RUNS runs (unless ``allow_one_run``); ``one_logdir``: both sides' runs are
    named in one logdir. The check raises it; the compare summary carries it, so the tab
    says it instead of asking for a check that would be refused (an expected state, not an
    error)."""
    if group_by not in GROUP_BY:
        return (
            f"group_by: the check is per op or op type ({', '.join(GROUP_BY)}), not {group_by!r}: modules are for "
            "the compare table"
        )
    overlap = set(baseline) & set(target) if one_logdir else set()  # two logdirs may both hold a run so named
    if overlap:
        return f"{', '.join(sorted(overlap))} is both baseline and target: the check compares two sets of runs"
    lone = [name for name, runs in (("baseline", baseline), ("target", target)) if len(runs) < CHECK_MIN_RUNS]
    if not lone or allow_one_run:
        return None
    return (
        f"the {' and the '.join(lone)} {'has' if len(lone) == 1 else 'have'} one run: one run cannot tell a "
        "regression from a hiccup of the machine during that run (identical configurations failed 16% of "
        "one-against-one checks here). Record repeats (`tb-opcompare record --repeats 3` or more) to compare "
        "them; with one run a side, verdicts are only indicative (`--allow-one-run`)"
    )


# The words recorders, names and frameworks use for one precision or compiler, and this
# tool's word for it.
DEFAULT_PRECISION, DEFAULT_COMPILER = "fp32", "eager"
# TensorFlow running a graph it did not compile (tf.function, Keras's fit, a TF1 session):
# not eager, yet no compiler either. Like eager, it is what a TF model runs as unless the
# user picks XLA or TensorRT, so it names no variant of the model (``configuration_key``).
TF_GRAPH = "TF graph"
UNCOMPILED = (DEFAULT_COMPILER, TF_GRAPH)
_PRECISION_WORDS = {
    "float32": "fp32",
    "float": "fp32",
    "f32": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float64": "fp64",
    "double": "fp64",
}
_COMPILER_WORDS = {
    "inductor": "torch.compile",
    "compile": "torch.compile",
    "compiled": "torch.compile",
    "torch.compile": "torch.compile",
    "jit_compile": "XLA",
    "xla": "XLA",
    "eager": DEFAULT_COMPILER,
    "graph": TF_GRAPH,
    "tf graph": TF_GRAPH,
    "tf.function": TF_GRAPH,
    "no xla": DEFAULT_COMPILER,
    "none": DEFAULT_COMPILER,
    "trt": "TensorRT",
    "tensorrt": "TensorRT",
    "tf-trt": "TensorRT",
    "onnxruntime": "ONNX Runtime",
    "ort": "ONNX Runtime",
}


def canonical_precision(word: str) -> str:
    """``float32`` -> ``fp32``, Keras's ``mixed_bfloat16`` -> ``mixed bf16/fp32``."""
    words = [_PRECISION_WORDS.get(part, part) for part in word.lower().replace("_", " ").replace("/", " ").split()]
    if words[:1] == ["mixed"]:
        # one spelling per mix, whichever dtype leads: the others in order, fp32 last
        rest = sorted({part for part in words[1:] if part != "fp32"})
        return "mixed " + "/".join([*rest, "fp32"])
    return " ".join(words)


def canonical_compiler(word: str) -> str:
    """``inductor`` -> ``torch.compile``, ``jit_compile`` -> ``XLA``; TF's "no XLA" is eager."""
    return _COMPILER_WORDS.get(word.strip().lower(), word.strip())


DEFAULTS = {"precision": DEFAULT_PRECISION, "compiler": DEFAULT_COMPILER}


def is_default(dimension: str, value: str) -> bool:
    """Whether a precision or compiler is what a model runs as unless the user picks
    otherwise: fp32; eager, or for TF a graph it did not compile."""
    return value in UNCOMPILED if dimension == "compiler" else value == DEFAULTS[dimension]


def default_among(dimension: str, values: Collection[str | None]) -> str:
    """The default value of a dimension as a set of runs has it: for the compiler, eager
    where a run ran eagerly, else a TF graph where one did (a TF model's default)."""
    if dimension == "compiler" and DEFAULT_COMPILER not in values and TF_GRAPH in values:
        return TF_GRAPH
    return DEFAULTS[dimension]


MAX_BATCH_SIZE = 10_000_000  # a batch size above this is a broken file or sidecar, not a model


def is_group_by(value: str) -> TypeGuard[GroupBy]:
    """Whether ``value`` is a grouping of ``GROUP_BY`` (a sweep's, trend's or check's)."""
    return value in GROUP_BY


def is_batch_size(value: object) -> TypeGuard[int]:
    """Whether a value read from a file can be a batch size: a whole number from 1 to
    ``MAX_BATCH_SIZE`` (hostile files carry 2**62 and 10**30, which no store can keep)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_BATCH_SIZE


def configuration_key(model: str, precision: str | None, compiler: str | None) -> str:
    """The key runs are grouped by (pairs, repeats, sweeps): the model with the precision
    and compiler it ran with where they are not the defaults (fp32; eager or a TF graph), so
    ``resnet [bf16, torch.compile]`` is never pooled with or paired against ``resnet``."""
    variant = [
        value
        for value, defaults in ((precision, (DEFAULT_PRECISION,)), (compiler, UNCOMPILED))
        if value and value not in defaults
    ]
    return f"{model} [{', '.join(variant)}]" if variant else model


def model_of(key: str) -> str:
    """The model of a ``configuration_key`` (``resnet [bf16]`` -> ``resnet``): runs of one
    model in two precisions or compilers are one model's variants, not two models."""
    return key.rsplit(" [", 1)[0] if key.endswith("]") and " [" in key else key


def same_dimension(fact: str, claimed: str, measured: str) -> bool:
    """Whether a claim and the data say the same: ``float32`` is ``fp32``, ``inductor`` is
    ``torch.compile``, for TF ``eager`` is what "no XLA" means, and ``bf16`` is what users
    call Keras's ``mixed_bfloat16`` (``mixed bf16/fp32``)."""
    if fact == "compiler":
        claimed, measured = canonical_compiler(claimed), canonical_compiler(measured)
        # a recorder's "eager" for TF means "no XLA": a graph it did not compile agrees
        return claimed == measured or {claimed, measured} == set(UNCOMPILED)
    claim_words, measured_words = (
        set(canonical_precision(text).replace("/", " ").split()) for text in (claimed, measured)
    )
    if "mixed" in measured_words and "mixed" not in claim_words:
        measured_words -= {"fp32"}  # "bf16" names a bf16/fp32 mix; "fp32" does not
    return claim_words - {"mixed"} <= measured_words - {"mixed"}


def configured(fact: str, claimed: str | None, measured: str | None) -> str | None:
    """The precision or compiler a run was configured with, for grouping it with others:
    the claim (the recorder's or the name's word: ``bf16`` for Keras's ``mixed_bfloat16``,
    whose data says ``mixed bf16/fp32``) where the data agrees or says nothing, else what
    the data says; in this vocabulary's words."""
    value = claimed if claimed and (measured is None or same_dimension(fact, claimed, measured)) else measured
    if value is None:
        return None
    if fact == "compiler":
        # where claim and data agree that nothing compiled the run, the data says which of the two it ran as
        return canonical_compiler(measured if measured and canonical_compiler(value) in UNCOMPILED else value)
    return canonical_precision(value)


# What a step's wall time was spent on (issue 53), in the same words for every format (here, not
# in schema.events, which brings numpy: the tab's contract reads them at TensorBoard's start). Host:
# the thread that drives the step, each moment once, so a step's host categories add up to
# its wall time. Device: the accelerator's time in the step, busy by what ran, and idle.
STEP_CATEGORIES = {
    "input": "waiting for input",
    "forward": "host compute: forward and other",
    "backward": "host compute: backward",
    "optimizer": "host compute: optimizer",
    "copy": "copies between host and device",
    "device_wait": "waiting on the device",
    "launch": "kernel launches and other runtime calls",
    "communication": "communication",
    "untracked": "untracked: Python, gaps between events",
}
DEVICE_STEP_CATEGORIES = {
    "device_compute": "device busy: compute",
    "device_copy": "device busy: copies and memsets",
    "device_communication": "device busy: communication",
    "device_idle": "device idle",
}
