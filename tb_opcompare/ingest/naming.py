"""What a run's name says: model key, batch size and repeat.

The model key is the run path with device tokens (``cpu``, ``gpu``, ``cuda``, ``xpu``,
``tpu``, ``mps``, with or without a device index), batch tokens (``bs16``,
``batch16``, ``batch_size=16``, ``b16``) and repeat tokens (``rep2``, ``repeat2``, as
``tb-opcompare record --repeats`` writes) removed, so ``mnist_cpu_bs32/train`` and
``mnist_gpu_bs32_rep2/train`` share the key ``mnist/train``.
"""

from __future__ import annotations

import re

_SEPARATORS = r"[/_\-.=:\s]"
_DEVICE = r"(?:cpu|gpu|cuda|xpu|tpu|mps)(?:[:_\-]?\d+)?"
_BATCH = r"(?:bs|batch|batch[_\-]?size|b)[=_\-]?(\d+)"
_DEVICE_TOKEN = re.compile(rf"(?<![a-z0-9]){_DEVICE}(?![a-z0-9])", re.IGNORECASE)
_BATCH_TOKEN = re.compile(rf"(?<![a-z0-9]){_BATCH}(?![a-z0-9])", re.IGNORECASE)
_REPEAT_TOKEN = re.compile(r"(?<![a-z0-9])rep(?:eat)?[=_\-]?(\d+)(?![a-z0-9])", re.IGNORECASE)
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


def model_key(run: str) -> str:
    key = _REPEAT_TOKEN.sub("", _BATCH_TOKEN.sub("", _DEVICE_TOKEN.sub("", run)))
    key = _REPEATED_SEPARATORS.sub(lambda m: "/" if "/" in m.group(0) else m.group(1), key)
    key = re.sub(r"(^|/)[_\-.=:]+|[_\-.=:]+($|/)", r"\1\2", key).strip("/")
    return key or run
