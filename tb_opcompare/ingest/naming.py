"""What a run's name says: model key, batch size, repeat, precision and compiler; and
the one vocabulary for precisions and compilers, whoever names them.

The model key is the run path with device tokens (``cpu``, ``gpu``, ``cuda``, ``xpu``,
``tpu``, ``mps``, with or without a device index; accelerator models such as ``h100``,
``mi300x``, ``mtia``, and ``vs`` between two), batch tokens (``bs16``,
``batch16``, ``batch_size=16``, ``b16``), repeat tokens (``rep2``, ``repeat2``, as
``tb-opcompare record --repeats`` writes), precision tokens (``fp32``, ``bf16``,
``fp16``, ``int8`` ...) and compiler tokens (``eager``, ``xla``, ``compile``,
``inductor``, ``trt`` ...) removed, so ``mnist_cpu_bs32/train`` and
``mnist_gpu_bs32_bf16_rep2/train`` share the key ``mnist/train``. The precision and the
compiler are dimensions of a run like its device; ``configuration_key`` puts the ones
that are not the default back beside the model for grouping. Timestamps
(``20261126-031500``, SummaryWriter's ``Nov26_03-15-00_<host>``) are removed too: two
recordings of one model at different times share a key. A key of generic words only
(``runs``, ``fit/train``) names no model: ``analysis.model_identity`` then finds the model
from the runs' ops.
"""

from __future__ import annotations

import re

from tb_opcompare.schema.dimensions import canonical_compiler, canonical_precision

_SEPARATORS = r"[/_\-.=:\s]"
_DEVICE = r"(?:cpu|gpu|cuda|xpu|tpu|mps)(?:[:_\-]?\d+)?"
_BATCH = r"(?:bs|batch|batch[_\-]?size|b)[=_\-]?(\d+)"
_DEVICE_TOKEN = re.compile(rf"(?<![a-z0-9]){_DEVICE}(?![a-z0-9])", re.IGNORECASE)
# Accelerator models (``h100``, ``mi300x``, ``mtia``) and the word between two of them
# (``bert_h100_vs_mi300``): hardware, not a model. The profile says which one ran.
_HARDWARE_TOKEN = re.compile(
    r"(?<![a-z0-9])(?:[vahpb]100|[hb]200|gb200|a10g?|a30|a40|l40s?|l4|t4|k80|p40|mi\d{2,3}[a-z]?|mtia|trn\d|inf\d"
    r"|vs|versus)(?![a-z0-9])",
    re.IGNORECASE,
)
_BATCH_TOKEN = re.compile(rf"(?<![a-z0-9]){_BATCH}(?![a-z0-9])", re.IGNORECASE)
_REPEAT_TOKEN = re.compile(r"(?<![a-z0-9])rep(?:eat)?[=_\-]?(\d+)(?![a-z0-9])", re.IGNORECASE)
_PRECISION_TOKEN = re.compile(
    r"(?<![a-z0-9])(fp8|fp16|fp32|fp64|bf16|tf32|int8|float16|float32|bfloat16)"
    r"(?![a-z0-9])",
    re.IGNORECASE,
)
# not "jit": TorchScript's word in PyTorch, XLA's in TF
_COMPILER_TOKEN = re.compile(
    r"(?<![a-z0-9])(eager|xla|compiled?|inductor|trt|tensorrt|onnxruntime|ort)"
    r"(?![a-z0-9])",
    re.IGNORECASE,
)
_REPEATED_SEPARATORS = re.compile(rf"({_SEPARATORS})(?:{_SEPARATORS})+")
# When a run was recorded says nothing of what ran: Keras's tutorial names runs
# ``%Y%m%d-%H%M%S``, TF's profiler sessions ``%Y_%m_%d_%H_%M_%S``, SummaryWriter
# ``<Mon><DD>_<HH-MM-SS>_<hostname>`` (the host goes too: a machine is no model).
_TIMESTAMP_TOKEN = re.compile(
    r"(?<![a-z0-9])(?:"
    r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)\d{1,2}_\d{2}-\d{2}-\d{2}(?:_[^/]*)?"
    r"|(?:19|20)\d{2}[-_.]?\d{2}[-_.]?\d{2}(?:[-_T ]\d{2}[-_:.]?\d{2}(?:[-_:.]?\d{2})?)?"
    r")(?![a-z0-9])",
    re.IGNORECASE,
)
# Folder names that name no model: what tutorials and tools call a logdir's folders.
GENERIC_WORDS = frozenset(
    {
        "runs",
        "run",
        "logs",
        "log",
        "logdir",
        "fit",
        "train",
        "training",
        "validation",
        "eval",
        "test",
        "profile",
        "profiles",
        "profiler",
        "plugins",
        "tensorboard",
        "tb",
        "trace",
        "traces",
        "tmp",
        "output",
        "outputs",
        "out",
        "results",
        "experiments",
        "experiment",
        "exp",
    }
)
_RUN_SUFFIXES = ("train", "validation", "eval")  # Keras's sub-runs of one run


def batch_size_from_name(run: str) -> int | None:
    match = _BATCH_TOKEN.search(_HARDWARE_TOKEN.sub("", run))  # `b200` is a GPU, not batch 200
    return int(match.group(1)) if match else None


def hardware_from_name(run: str) -> str | None:
    """The accelerator model a run's name says (``bert_h100_rep1`` -> ``h100``), or None."""
    found = [token.lower() for token in _HARDWARE_TOKEN.findall(run) if token.lower() not in ("vs", "versus")]
    return found[-1] if found else None


def repeat_from_name(run: str) -> int | None:
    match = _REPEAT_TOKEN.search(run)
    return int(match.group(1)) if match else None


def device_from_name(run: str) -> str | None:
    """The device kind a run's name claims (``CPU``, ``GPU``, ...), or None. Only a guess
    for runs not read yet: the profile decides."""
    match = _DEVICE_TOKEN.search(run)
    if not match:
        return None
    token = re.split(r"[^a-z]", match.group(0).lower(), maxsplit=1)[0]  # its letters: cpu, cuda ...
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
    return _name_key(run) or run


def names_no_model(run: str) -> bool:
    """Whether a run's name, its tokens and timestamps left out, holds only words that
    name no model (``runs/Nov26_02-49-23_vm`` is ``runs``, ``fit/20261126-031500/train``
    is ``fit/train``, ``20261126-031500`` is nothing)."""
    return all(part.lower() in GENERIC_WORDS for part in re.split(_SEPARATORS, _name_key(run)) if part)


def _name_key(run: str) -> str:
    stripped = _TIMESTAMP_TOKEN.sub("", without_dimensions(run))
    devices_out = _HARDWARE_TOKEN.sub("", _DEVICE_TOKEN.sub("", stripped))
    return _tidy(_REPEAT_TOKEN.sub("", _BATCH_TOKEN.sub("", devices_out)))


def run_folder(run: str) -> str:
    """The folder a run sits in, Keras's ``/train`` and ``/validation`` left out: runs
    side by side (``fit/20261126-031500/train`` and ``fit/20261126-041200/train``) share it."""
    parts = run.split("/")
    while len(parts) > 1 and parts[-1].lower() in _RUN_SUFFIXES:
        parts.pop()
    return "/".join(parts[:-1])


def without_dimensions(model: str) -> str:
    """A model name without its precision and compiler tokens (``resnet_bf16`` ->
    ``resnet``): they are dimensions of a run, kept beside the model by
    ``configuration_key``."""
    return _tidy(_COMPILER_TOKEN.sub("", _PRECISION_TOKEN.sub("", model))) or model


def _tidy(key: str) -> str:
    key = _REPEATED_SEPARATORS.sub(lambda m: "/" if "/" in m.group(0) else m.group(1), key)
    return re.sub(r"(^|/)[_\-.=:]+|[_\-.=:]+($|/)", r"\1\2", key).strip("/")
