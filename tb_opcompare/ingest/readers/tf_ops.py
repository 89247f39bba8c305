"""TensorFlow op-name conventions shared by the TF readers."""

from __future__ import annotations

import re

# The rule xprof uses to tell a TF op event ("<name>:<type>") from other host
# activity such as "EagerLocalExecute: Identity" or "ExecutorState::Process".
_OP_TYPE = re.compile(r"[A-Z_][a-zA-Z0-9_]*\Z")
_OP_NAME = re.compile(r"[A-Za-z0-9.][A-Za-z0-9_.\-/>]*\Z")
_FIRST_TENSOR_DIMS = re.compile(r"\w+\[([0-9,]*)\]")
_TENSOR_DIMS = re.compile(r"\[([0-9,]*)\]")


def parse_tf_op(full_name: str) -> tuple[str, str] | None:
    """``"scope/conv:Conv2D"`` -> ``("scope/conv", "Conv2D")``; None if not a TF op."""
    name, sep, op_type = full_name.rpartition(":")
    if not sep or not _OP_TYPE.match(op_type) or not _OP_NAME.match(name):
        return None
    return name, op_type


def parse_host_op(full_name: str) -> tuple[str, str] | None:
    """A TF op, or a tf.data iterator event (``Iterator::Root::Prefetch``), typed
    ``Dataset`` as xprof's TensorFlow Stats tool types them."""
    if full_name.startswith("Iterator::"):
        return full_name, "Dataset"
    return parse_tf_op(full_name)


def op_from_annotation(annotation: str) -> tuple[str, str] | None:
    """The op a kernel's annotation names: its innermost ``::``-joined entry with the
    ``#shape=...#`` suffix dropped. An entry that is not ``name:type`` (a TraceMe such
    as ``MakeTensorFromProto``) names the op itself and is its type too."""
    innermost = annotation.split("#", 1)[0].rsplit("::", 1)[-1]
    if not innermost:
        return None
    return parse_tf_op(innermost) or (innermost, innermost)


def leading_dim(shape_text: str) -> int | None:
    """Leading dimension of the first tensor of rank >= 2 in ``(float[32,28,28,1];int64[])``."""
    for match in _FIRST_TENSOR_DIMS.finditer(shape_text):
        dims = [d for d in match.group(1).split(",") if d]
        if len(dims) >= 2 and dims[0].isdigit() and int(dims[0]) > 0:
            return int(dims[0])
    return None


def shared_leading_dim(shapes_text: str) -> int | None:
    """The leading dimension all tensors of a tf.data element share (``[32,28,28,1] [32]``
    -> 32): the element's batch size. None if they do not share one."""
    leading = {dims.split(",", 1)[0] for dims in _TENSOR_DIMS.findall(shapes_text)}
    if len(leading) == 1:
        size = next(iter(leading))
        if size.isdigit() and int(size) > 0:
            return int(size)
    return None
