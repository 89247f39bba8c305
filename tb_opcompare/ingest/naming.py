"""What a run's name says: model key, batch size, repeat, precision and compiler; and
the one vocabulary for precisions and compilers, whoever names them.

The model key is the run path with device tokens (``cpu``, ``gpu``, ``cuda``, ``xpu``,
``tpu``, ``mps``, with or without a device index), batch tokens (``bs16``,
``batch16``, ``batch_size=16``, ``b16``), repeat tokens (``rep2``, ``repeat2``, as
``tb-opcompare record --repeats`` writes), precision tokens (``fp32``, ``bf16``,
``fp16``, ``int8`` ...) and compiler tokens (``eager``, ``xla``, ``compile``,
``inductor``, ``trt`` ...) removed, so ``mnist_cpu_bs32/train`` and
``mnist_gpu_bs32_bf16_rep2/train`` share the key ``mnist/train``. The precision and the
compiler are dimensions of a run like its device; ``configuration_key`` puts the ones
that are not the default back beside the model for grouping.
"""

from __future__ import annotations

import re

_SEPARATORS = r"[/_\-.=:\s]"
_DEVICE = r"(?:cpu|gpu|cuda|xpu|tpu|mps)(?:[:_\-]?\d+)?"
_BATCH = r"(?:bs|batch|batch[_\-]?size|b)[=_\-]?(\d+)"
_DEVICE_TOKEN = re.compile(rf"(?<![a-z0-9]){_DEVICE}(?![a-z0-9])", re.IGNORECASE)
_BATCH_TOKEN = re.compile(rf"(?<![a-z0-9]){_BATCH}(?![a-z0-9])", re.IGNORECASE)
_REPEAT_TOKEN = re.compile(r"(?<![a-z0-9])rep(?:eat)?[=_\-]?(\d+)(?![a-z0-9])", re.IGNORECASE)
_PRECISION_TOKEN = re.compile(r"(?<![a-z0-9])(fp8|fp16|fp32|fp64|bf16|tf32|int8|float16|float32|bfloat16)"
                              r"(?![a-z0-9])", re.IGNORECASE)
_COMPILER_TOKEN = re.compile(r"(?<![a-z0-9])(eager|xla|jit|compiled?|inductor|trt|tensorrt|onnxruntime|ort)"
                             r"(?![a-z0-9])", re.IGNORECASE)
_REPEATED_SEPARATORS = re.compile(rf"({_SEPARATORS})(?:{_SEPARATORS})+")


def batch_size_from_name(run: str) -> int | None:
    match = _BATCH_TOKEN.search(run)
    return int(match.group(1)) if match else None


def repeat_from_name(run: str) -> int | None:
    match = _REPEAT_TOKEN.search(run)
    return int(match.group(1)) if match else None


def device_from_name(run: str) -> str | None:
    """The device kind a run's name claims (``CPU``, ``GPU``, ...), or None. Only a guess
    for runs not read yet: the profile decides."""
    match = _DEVICE_TOKEN.search(run)
    if not match:
        return None
    token = re.match(r"[a-z]+", match.group(0).lower()).group(0)
    return {"cuda": "GPU"}.get(token, token.upper())


def precision_from_name(run: str) -> str | None:
    match = _PRECISION_TOKEN.search(run)
    return canonical_precision(match.group(1)) if match else None


def compiler_from_name(run: str) -> str | None:
    match = _COMPILER_TOKEN.search(run)
    return canonical_compiler(match.group(1)) if match else None


def model_key(run: str) -> str:
    return _tidy(_REPEAT_TOKEN.sub("", _BATCH_TOKEN.sub("", _DEVICE_TOKEN.sub("", without_dimensions(run))))) or run


def without_dimensions(model: str) -> str:
    """A model name without its precision and compiler tokens (``resnet_bf16`` ->
    ``resnet``): they are dimensions of a run, kept beside the model by
    ``configuration_key``."""
    return _tidy(_COMPILER_TOKEN.sub("", _PRECISION_TOKEN.sub("", model))) or model


def _tidy(key: str) -> str:
    key = _REPEATED_SEPARATORS.sub(lambda m: "/" if "/" in m.group(0) else m.group(1), key)
    return re.sub(r"(^|/)[_\-.=:]+|[_\-.=:]+($|/)", r"\1\2", key).strip("/")


# The words recorders, names and frameworks use for one precision or compiler, and this
# tool's word for it.
DEFAULT_PRECISION, DEFAULT_COMPILER = "fp32", "eager"
_PRECISION_WORDS = {"float32": "fp32", "float": "fp32", "f32": "fp32", "bfloat16": "bf16", "float16": "fp16",
                    "half": "fp16", "float64": "fp64", "double": "fp64"}
_COMPILER_WORDS = {"inductor": "torch.compile", "compile": "torch.compile", "compiled": "torch.compile",
                   "torch.compile": "torch.compile", "jit_compile": "XLA", "jit": "XLA", "xla": "XLA",
                   "eager": DEFAULT_COMPILER, "graph": DEFAULT_COMPILER, "tf graph": DEFAULT_COMPILER,
                   "no xla": DEFAULT_COMPILER, "none": DEFAULT_COMPILER, "trt": "TensorRT", "tensorrt": "TensorRT",
                   "tf-trt": "TensorRT", "onnxruntime": "ONNX Runtime", "ort": "ONNX Runtime"}


def canonical_precision(word: str) -> str:
    """``float32`` -> ``fp32``, Keras's ``mixed_bfloat16`` -> ``mixed bf16/fp32``."""
    words = [_PRECISION_WORDS.get(part, part) for part in word.lower().replace("_", " ").replace("/", " ").split()]
    if words[:1] == ["mixed"]:
        rest = [part for part in words[1:] if part != "fp32"]
        return "mixed " + "/".join([*rest, "fp32"])
    return " ".join(words)


def canonical_compiler(word: str) -> str:
    """``inductor`` -> ``torch.compile``, ``jit_compile`` -> ``XLA``; TF's "no XLA" is eager."""
    return _COMPILER_WORDS.get(word.strip().lower(), word.strip())


def configuration_key(model: str, precision: str | None, compiler: str | None) -> str:
    """The key runs are grouped by (pairs, repeats, sweeps): the model with the precision
    and compiler it ran with where they are not the defaults (fp32, eager), so
    ``resnet [bf16, torch.compile]`` is never pooled with or paired against ``resnet``."""
    variant = [value for value, default in ((precision, DEFAULT_PRECISION), (compiler, DEFAULT_COMPILER))
               if value and value != default]
    return f"{model} [{', '.join(variant)}]" if variant else model
