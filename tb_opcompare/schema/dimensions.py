"""The dimensions of a run beside its device and batch size, and the one vocabulary for
them: precision (``fp32``, ``bf16``, ``mixed bf16/fp32`` ...) and compiler (``eager``,
``torch.compile``, ``XLA`` ...), whoever names them (a sidecar, a run name, the data), and
the defaults a run is assumed to have where nothing says otherwise."""

from __future__ import annotations

# The words recorders, names and frameworks use for one precision or compiler, and this
# tool's word for it.
DEFAULT_PRECISION, DEFAULT_COMPILER = "fp32", "eager"
_PRECISION_WORDS = {"float32": "fp32", "float": "fp32", "f32": "fp32", "bfloat16": "bf16", "float16": "fp16",
                    "half": "fp16", "float64": "fp64", "double": "fp64"}
_COMPILER_WORDS = {"inductor": "torch.compile", "compile": "torch.compile", "compiled": "torch.compile",
                   "torch.compile": "torch.compile", "jit_compile": "XLA", "xla": "XLA",
                   "eager": DEFAULT_COMPILER, "graph": DEFAULT_COMPILER, "tf graph": DEFAULT_COMPILER,
                   "no xla": DEFAULT_COMPILER, "none": DEFAULT_COMPILER, "trt": "TensorRT", "tensorrt": "TensorRT",
                   "tf-trt": "TensorRT", "onnxruntime": "ONNX Runtime", "ort": "ONNX Runtime"}


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
MAX_BATCH_SIZE = 10_000_000  # a batch size above this is a broken file or sidecar, not a model


def is_batch_size(value) -> bool:
    """Whether a value read from a file can be a batch size: a whole number from 1 to
    ``MAX_BATCH_SIZE`` (hostile files carry 2**62 and 10**30, which no store can keep)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_BATCH_SIZE


def configuration_key(model: str, precision: str | None, compiler: str | None) -> str:
    """The key runs are grouped by (pairs, repeats, sweeps): the model with the precision
    and compiler it ran with where they are not the defaults (fp32, eager), so
    ``resnet [bf16, torch.compile]`` is never pooled with or paired against ``resnet``."""
    variant = [value for value, default in ((precision, DEFAULT_PRECISION), (compiler, DEFAULT_COMPILER))
               if value and value != default]
    return f"{model} [{', '.join(variant)}]" if variant else model


def same_dimension(fact: str, claimed: str, measured: str) -> bool:
    """Whether a claim and the data say the same: ``float32`` is ``fp32``, ``inductor`` is
    ``torch.compile``, for TF ``eager`` is what "no XLA" means, and ``bf16`` is what users
    call Keras's ``mixed_bfloat16`` (``mixed bf16/fp32``)."""
    if fact == "compiler":
        return canonical_compiler(claimed) == canonical_compiler(measured)
    claim_words, measured_words = (set(canonical_precision(text).replace("/", " ").split())
                                   for text in (claimed, measured))
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
    return canonical_compiler(value) if fact == "compiler" else canonical_precision(value)
