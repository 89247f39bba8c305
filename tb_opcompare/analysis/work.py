"""The work one op call does, from its recorded input shapes: floating-point operations and
the bytes it must at least move (its tensors read once, its result written once). The
maths only, no I/O: a reader hands each call's ``Input Dims``, ``Input type`` and
``Concrete Inputs`` (PyTorch's ``record_shapes=True``) and gets a ``Work`` or None.

Formulas (a multiply-add is 2 operations, as PyTorch's ``with_flops`` and xprof count):

- convolution (``conv1d/2d/3d``, ``convolution``, ``_convolution``): input ``[N, Cin, *S]``,
  weight ``[Cout, Cin/groups, *K]``: ``2 * N * Cout * prod(S_out) * Cin/groups * prod(K)``,
  ``S_out = floor((S + 2 * padding - dilation * (K - 1) - 1) / stride) + 1``; transposed:
  ``2 * N * Cin * prod(S) * Cout/groups * prod(K)``. The weight's second dim is
  ``Cin/groups`` by definition, so groups never need to be read.
- ``convolution_backward``: the forward's count once per gradient asked of input and weight
  (its ``output_mask``), the output's spatial size read from ``grad_output``.
- ``mm`` ``[M, K] x [K, N]``, ``addmm``, ``bmm`` ``[B, M, K] x [B, K, N]``, ``baddbmm``,
  ``linear`` (``x[..., K]``, ``W[N, K]``), ``matmul`` (broadcast batch): ``2 * batch * M * K * N``.
- scaled dot-product attention (``scaled_dot_product_attention`` and its flash, efficient
  and cuDNN kernels' ops): ``2 * batch * L * S * (E + Ev)`` for query ``[..., L, E]``, key
  ``[..., S, E]``, value ``[..., S, Ev]``.
- elementwise ops: one operation per output element (``copy_``, ``fill_``, ``zero_``: none);
  the output is the inputs' broadcast shape.

Bytes are every tensor input's elements in memory times its dtype's size (an input expanded
by a stride of 0 holds fewer elements than its shape: its strides, where recorded, tell),
plus the output's (the output of a write-only op, ``fill_``, ``zero_``, is its only traffic). An op whose shapes
were not recorded, or whose arguments a formula needs (a convolution's stride, padding and
dilation: ``Concrete Inputs``, PyTorch 2.x) are missing, has no ``Work``: unknown, never a
guess.
"""

from __future__ import annotations

import ast
import dataclasses
import math
from typing import Any, NamedTuple

# Bytes of one element per ``Input type`` (PyTorch's spelling of the C++ scalar type).
DTYPE_BYTES = {
    "double": 8,
    "float": 4,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
    "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1,
    "long int": 8,
    "int": 4,
    "short int": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
}

PROFILE = "profile"  # the profiler's own figure (PyTorch ``with_flops``, xplane ``flops`` stats)
SHAPES = "shapes"  # this module's formulas on the recorded input shapes
XLA_PROGRAM = "xla"  # XLA's cost rules on the compiled program the profile carries (ingest.readers.xla_cost)


@dataclasses.dataclass(frozen=True)
class Work:
    flops: float
    bytes: float  # NaN where a tensor's dtype is not one of DTYPE_BYTES


@dataclasses.dataclass(frozen=True)
class Call:
    """One op call's recorded inputs: dims (``[]`` for a scalar), types, concrete values and
    strides (PyTorch 2.x records them; empty where not)."""

    dims: list[Any]
    types: list[Any]
    concrete: list[Any]
    strides: list[Any] = dataclasses.field(default_factory=list)


class Tensor(NamedTuple):
    shape: list[Any]
    size: int | None  # bytes of an element; None where the dtype is not one of DTYPE_BYTES
    stored: int  # elements in memory: an expanded input (stride 0) holds fewer than its shape


def _numel(shape: list[Any]) -> int:
    return math.prod(int(size) for size in shape)


def _tensors(call: Call) -> list[Tensor]:
    """Each tensor input: a typed input with dims (a 0-d tensor has dims ``[]`` and a dtype;
    a Python scalar's type is ``Scalar``)."""
    found = []
    for position, shape in enumerate(call.dims):
        kind = call.types[position] if position < len(call.types) else ""
        if isinstance(shape, list) and (kind in DTYPE_BYTES or (shape and kind and kind not in _NOT_TENSORS)):
            strides = call.strides[position] if position < len(call.strides) else None
            stored = _numel(shape)
            if isinstance(strides, list) and len(strides) == len(shape):
                stored = math.prod(int(size) for size, stride in zip(shape, strides) if stride != 0)
            found.append(Tensor(shape, DTYPE_BYTES.get(kind), stored))
    return found


def _output(shape: list[Any], size: int | None) -> Tensor:
    return Tensor(shape, size, _numel(shape))


# Input types that are no tensor: PyTorch 2.x's ``Scalar`` and lists; PyTorch 1.x named a
# scalar by its IValue tag (``Int``, ``Double``, ``Bool``).
_NOT_TENSORS = frozenset(
    {"Scalar", "ScalarList", "TensorList", "GenericList", "Int", "Double", "Bool", "String", "Device", "None"}
)


def _bytes(tensors: list[Tensor]) -> float:
    total = 0
    for tensor in tensors:
        if tensor.size is None:
            return math.nan
        total += tensor.stored * tensor.size
    return float(total)


_MAX_CONCRETE = 200  # a stride or padding list is a few characters; longer text is no argument we read


def _ints(text: object) -> list[int] | None:
    """``'[1, 1]'`` or ``'(1,1)'`` or ``'1'`` (a Concrete Input) as a list of ints."""
    if not isinstance(text, str) or not text or len(text) > _MAX_CONCRETE:
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    value = list(value) if isinstance(value, (list, tuple)) else [value]
    return [int(v) for v in value] if all(isinstance(v, (int, bool)) for v in value) else None


def _concrete(call: Call, position: int) -> list[int] | None:
    return _ints(call.concrete[position]) if position < len(call.concrete) else None


def _conv_output(
    spatial: list[Any], kernel: list[Any], stride: list[Any], padding: list[Any], dilation: list[Any]
) -> list[int]:
    rank = len(spatial)

    def each(values: list[Any]) -> list[Any]:  # one value stands for every spatial dim
        return values * rank if len(values) == 1 else values

    stride, padding, dilation = each(stride), each(padding), each(dilation)
    return [(spatial[i] + 2 * padding[i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1 for i in range(rank)]


# Where each convolution's stride, padding, dilation and ``transposed`` are among its inputs
# (``transposed`` None: never transposed).
_CONV_ARGUMENTS = {
    "aten::conv1d": (3, 4, 5, None),
    "aten::conv2d": (3, 4, 5, None),
    "aten::conv3d": (3, 4, 5, None),
    "aten::convolution": (3, 4, 5, 6),
    "aten::_convolution": (3, 4, 5, 6),
}


def _convolution(name: str, call: Call) -> Work | None:
    tensors = _tensors(call)
    if len(tensors) < 2 or len(tensors[0][0]) < 3 or len(tensors[1][0]) != len(tensors[0][0]):
        return None
    (shape, size, _), (weight, _, _) = tensors[0], tensors[1]
    stride_at, padding_at, dilation_at, transposed_at = _CONV_ARGUMENTS[name]
    stride, padding, dilation = (_concrete(call, at) for at in (stride_at, padding_at, dilation_at))
    transposed = _concrete(call, transposed_at) if transposed_at is not None else [0]
    if stride is None or padding is None or dilation is None or transposed is None:
        return None  # padding="same" and the like are left unknown rather than guessed
    kernel = weight[2:]
    if transposed[0]:
        flops = 2 * shape[0] * shape[1] * _numel(shape[2:]) * weight[1] * _numel(kernel)
        return Work(float(flops), math.nan)  # the output's size needs output_padding: bytes unknown
    spatial = _conv_output(shape[2:], kernel, stride, padding, dilation)
    if min(spatial) <= 0:
        return None
    flops = 2 * shape[0] * weight[0] * _numel(spatial) * weight[1] * _numel(kernel)
    output = _output([shape[0], weight[0], *spatial], size)
    return Work(float(flops), _bytes([*tensors, output]))


def _convolution_backward(call: Call) -> Work | None:
    tensors = _tensors(call)
    mask = call.concrete[10] if len(call.concrete) > 10 else ""
    if len(tensors) < 3 or not isinstance(mask, str) or not mask.startswith("["):
        return None
    (grad, _, _), (shape, size, _), (weight, _, _) = tensors[:3]
    if len(grad) < 3 or len(grad) != len(shape) or len(weight) != len(shape):
        return None
    asked = [part.strip() == "True" for part in mask.strip("[]").split(",")]
    one = 2 * shape[0] * weight[0] * _numel(grad[2:]) * weight[1] * _numel(weight[2:])
    flops = one * sum(asked[:2])
    written = [_output(shape, size)] * asked[0] + [_output(weight, size)] * (len(asked) > 1 and asked[1])
    return Work(float(flops), _bytes([*tensors[:3], *written]))


def _matmul(first: list[Any], second: list[Any]) -> tuple[float, list[Any]] | None:
    """(flops, output shape) of ``first @ second`` as ``torch.matmul`` broadcasts them."""
    if not first or not second:
        return None
    a = [1, *first] if len(first) == 1 else list(first)
    b = [*second, 1] if len(second) == 1 else list(second)
    if a[-1] != b[-2]:
        return None
    try:
        batch = _broadcast(a[:-2], b[:-2])
    except ValueError:
        return None
    flops = 2.0 * _numel(batch) * a[-2] * a[-1] * b[-1]
    output = [*batch, *([a[-2]] if len(first) > 1 else []), *([b[-1]] if len(second) > 1 else [])]
    return flops, output


def _broadcast(*shapes: list[Any]) -> list[int]:
    rank = max((len(shape) for shape in shapes), default=0)
    result = []
    for axis in range(rank):
        sizes = {shape[len(shape) - rank + axis] for shape in shapes if len(shape) - rank + axis >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            raise ValueError(f"shapes {shapes} do not broadcast")
        result.append(sizes.pop() if sizes else 1)
    return result


# Where the two matrices are among each matrix product's tensor inputs.
_MATRIX_OPERANDS = {
    "aten::mm": (0, 1),
    "aten::bmm": (0, 1),
    "aten::matmul": (0, 1),
    "aten::addmm": (1, 2),
    "aten::baddbmm": (1, 2),
}


def _matrix_product(name: str, call: Call) -> Work | None:
    tensors = _tensors(call)
    if name == "aten::linear":
        if len(tensors) < 2 or len(tensors[1][0]) != 2:
            return None
        (shape, size, _), (weight, _, _) = tensors[0], tensors[1]
        product = _matmul(shape, [weight[1], weight[0]])
    else:
        first, second = _MATRIX_OPERANDS[name]
        if len(tensors) <= second:
            return None
        size = tensors[first].size
        product = _matmul(tensors[first].shape, tensors[second].shape)
    if product is None:
        return None
    flops, output = product
    return Work(flops, _bytes([*tensors, _output(output, size)]))


# Attention ops whose query, key and value are their first three inputs.
_ATTENTION = frozenset(
    {
        "aten::scaled_dot_product_attention",
        "aten::_scaled_dot_product_flash_attention",
        "aten::_scaled_dot_product_efficient_attention",
        "aten::_scaled_dot_product_cudnn_attention",
    }
)


def _attention(call: Call) -> Work | None:
    """Query ``[..., L, E]``, key ``[..., S, E]``, value ``[..., S, Ev]``: the two products
    ``Q K^T`` and ``P V``, ``2 * batch * L * S * (E + Ev)``, as PyTorch's ``FlopCounterMode``
    counts them (a causal mask's skipped half included, the softmax left out)."""
    tensors = _tensors(call)
    if len(tensors) < 3 or min(len(tensor.shape) for tensor in tensors[:3]) < 2:
        return None
    query, key, value = (tensor.shape for tensor in tensors[:3])
    batch, length, width = _numel(query[:-2]), query[-2], query[-1]
    flops = 2.0 * batch * length * key[-2] * (width + value[-1])
    return Work(flops, _bytes([*tensors[:3], _output([*query[:-1], value[-1]], tensors[0].size)]))


# Elementwise ops (and their in-place forms, ``add_``): one operation per output element.
_ELEMENTWISE = frozenset(
    "abs add sub rsub mul div neg exp log sqrt rsqrt pow reciprocal sigmoid tanh relu gelu silu "
    "hardtanh leaky_relu elu clamp clamp_min clamp_max maximum minimum where threshold "
    "threshold_backward gelu_backward silu_backward sigmoid_backward tanh_backward addcmul addcdiv "
    "lerp sign".split()
)
# Ops that move data and compute nothing: their bytes only.
_COPIES = frozenset({"copy_", "fill_", "zero_"})
_WRITE_ONLY = frozenset({"fill_", "zero_"})


def _elementwise(base: str, call: Call) -> Work | None:
    tensors = _tensors(call)
    if not tensors:
        return None
    if base in _WRITE_ONLY:
        return Work(0.0, _bytes(tensors[:1]))
    if base in _COPIES:
        return Work(0.0, _bytes(tensors[:2]))
    try:
        output = _broadcast(*(tensor.shape for tensor in tensors))
    except ValueError:
        return None
    return Work(float(_numel(output)), _bytes([*tensors, _output(output, tensors[0].size)]))


def _base_name(name: str) -> str:
    """``aten::add_`` -> ``add``; ``aten::copy_`` keeps its underscore (it has no other form)."""
    base = name.removeprefix("aten::")
    return base if base in _COPIES else base.removesuffix("_")


def has_formula(name: str) -> bool:
    """Whether ``work_from_shapes`` knows the op ``name`` (a PyTorch op name, ``aten::mm``)."""
    if name in _CONV_ARGUMENTS or name in _MATRIX_OPERANDS or name in _ATTENTION:
        return True
    if name in ("aten::linear", "aten::convolution_backward"):
        return True
    base = _base_name(name)
    return name.startswith("aten::") and (base in _ELEMENTWISE or base in _COPIES)


def _formula_names() -> frozenset[str]:
    """Every name ``has_formula`` knows: its sets, and each elementwise or copy base under
    ``aten::`` with and without its in-place ``_`` (no other name can pass its rule)."""
    bases = _ELEMENTWISE | _COPIES
    candidates = {*_CONV_ARGUMENTS, *_MATRIX_OPERANDS, *_ATTENTION, "aten::linear", "aten::convolution_backward"}
    candidates |= {f"aten::{base}{suffix}" for base in bases for suffix in ("", "_")}
    return frozenset(name for name in candidates if has_formula(name))


def work_from_shapes(name: str, call: Call) -> Work | None:
    """The work of one call of op ``name`` from its recorded inputs; None where the op has
    no formula here or the call lacks what the formula needs."""
    try:
        if name in _CONV_ARGUMENTS:
            return _convolution(name, call)
        if name == "aten::convolution_backward":
            return _convolution_backward(call)
        if name in _MATRIX_OPERANDS or name == "aten::linear":
            return _matrix_product(name, call)
        if name in _ATTENTION:
            return _attention(call)
        if has_formula(name):
            return _elementwise(_base_name(name), call)
    except (TypeError, ValueError, IndexError, ZeroDivisionError, OverflowError):
        return None  # dims that are not lists of ints, a stride of 0, sizes past a float: no work told
    return None


# ``has_formula`` as a set: a million distinct op names are looked up at C speed
FORMULA_NAMES = _formula_names()
