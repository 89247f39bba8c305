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

from tb_opcompare.schema.dimensions import canonical_compiler, canonical_precision

_SEPARATORS = r"[/_\-.=:\s]"
_DEVICE = r"(?:cpu|gpu|cuda|xpu|tpu|mps)(?:[:_\-]?\d+)?"
_BATCH = r"(?:bs|batch|batch[_\-]?size|b)[=_\-]?(\d+)"
_DEVICE_TOKEN = re.compile(rf"(?<![a-z0-9]){_DEVICE}(?![a-z0-9])", re.IGNORECASE)
_BATCH_TOKEN = re.compile(rf"(?<![a-z0-9]){_BATCH}(?![a-z0-9])", re.IGNORECASE)
_REPEAT_TOKEN = re.compile(r"(?<![a-z0-9])rep(?:eat)?[=_\-]?(\d+)(?![a-z0-9])", re.IGNORECASE)
_PRECISION_TOKEN = re.compile(r"(?<![a-z0-9])(fp8|fp16|fp32|fp64|bf16|tf32|int8|float16|float32|bfloat16)"
                              r"(?![a-z0-9])", re.IGNORECASE)
# not "jit": TorchScript's word in PyTorch, XLA's in TF
_COMPILER_TOKEN = re.compile(r"(?<![a-z0-9])(eager|xla|compiled?|inductor|trt|tensorrt|onnxruntime|ort)"
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
    """The last precision token of the name (``fp16_study/resnet_bf16`` ran in bf16: the
    run's own part of a path speaks last)."""
    matches = _PRECISION_TOKEN.findall(run)
    return canonical_precision(matches[-1]) if matches else None


def compiler_from_name(run: str) -> str | None:
    matches = _COMPILER_TOKEN.findall(run)
    return canonical_compiler(matches[-1]) if matches else None


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
