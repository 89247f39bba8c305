"""Each XLA op's work, from the compiled program a profile carries (issue 54).

JAX (and TensorFlow with XLA) profiles keep each compiled program's ``HloProto`` in the
``/host:metadata`` plane, and each executed op's event names its instruction (``hlo_op``)
and program (``program_id``). An op's FLOPs and bytes are counted on that instruction by
the rules of XLA's own ``HloCostAnalysis``, the figures ``jax.jit(f).lower(...).compile()
.cost_analysis()`` sums over a program and xprof shows per op, so that a program's ops add up
to the compiler's own total:

- elementwise ops: one operation per output element (transcendental ones, ``exponential``,
  ``tanh``, ``log`` ..., are counted apart by XLA and are no FLOPs here either);
- ``dot``: 2 x output elements x the contracted dimensions' product;
- ``convolution``: 2 x batch x output features x input features / feature groups x, per
  spatial dimension, the (output, kernel) position pairs that land inside the input (padding
  is no work);
- ``reduce``: the reducer's work x (input elements - output elements), ``reduce-window``
  the reducer's x (window - 1) x output elements, ``map`` the mapped function's per element;
- ``fusion``, ``call``: the sum over the computation they call; ``while``: one iteration;
  ``conditional``: its costliest branch; ``sort``: n x ceil(log2 n);
- data movement (``copy``, ``transpose``, ``broadcast``, ``slice``, ``gather`` ...): none.

Bytes are the op's operands and result once each (a fusion's: its result and each
parameter it reads, the parts sliced out where only slices read it); a parameter, constant,
tuple element or bitcast moves none; ops that touch part of a buffer (slices, gather,
dynamic-update-slice, scatter) count the part, as XLA does.

A ``custom-call`` is a library's code: cuDNN's convolutions are counted as the convolution
they compute, and for a backward call (input or weight gradient) the shapes are those of
the forward convolution its window describes: the operands and result swapped in. XLA's
GPU cost analysis counts a backward call on its operands as they come, which gives the
same figure for a stride-1 'SAME' convolution and a different one for strided or 'VALID'
ones; the swap is the work the GPU does. cuBLAS calls (``__cublas$gemm``, whose dot
dimensions XLA keeps in the backend config) and every other library call are unknown
here, and say so. Where this module's rules and XLA's differ on bytes: a fusion whose root
updates a buffer in place counts the buffer, and its broadcast parameters once.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

import numpy as np

from tb_opcompare.analysis.work import XLA_PROGRAM
from tb_opcompare.schema.groups import first_appearance, integer_group_sums, known_sums

# Bytes of one element per xla_data.proto PrimitiveType (PRED 1, S8 2 ... F8E8M0FNU 33);
# 4- and 2-bit types take a byte each, as XLA lays them out unpacked by default
_ELEMENT_BYTES = {
    1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 2, 8: 4, 9: 8, 10: 2, 11: 4, 12: 8, 15: 8, 16: 2, 18: 16,
    19: 1, 20: 1, 21: 1, 22: 1, 23: 1, 24: 1, 25: 1, 26: 1, 27: 1, 28: 1, 29: 1, 32: 1, 33: 1,
}  # fmt: skip
_TUPLE, _POINTER_BYTES = 13, 8
_TRANSCENDENTAL = frozenset(
    "atan2 cbrt cosine erf exponential exponential-minus-one log log-plus-one logistic power rsqrt sine sqrt "
    "tan tanh".split()
)
_ELEMENTWISE = _TRANSCENDENTAL | frozenset(
    "abs add and bitcast-convert ceil clamp count-leading-zeros compare complex convert divide floor imag is-finite maximum "
    "minimum multiply negate not or popcnt real reduce-precision remainder round-nearest-afz round-nearest-even "
    "select shift-left shift-right-arithmetic shift-right-logical sign subtract xor".split()
)
_NO_TRAFFIC = frozenset({"parameter", "constant", "get-tuple-element", "bitcast", "after-all", "add-dependency"})
_KERNEL_NAMED = re.compile(r"_(\d+)$")  # a kernel XLA named after its instruction, ``fusion.3`` as ``fusion_3``
_SLICES = frozenset({"slice", "dynamic-slice"})
_INDEXED = frozenset({"gather", "dynamic-update-slice", "scatter"})  # ops that touch part of a buffer
_MAX_COUNTED = 10_000_000  # window positions one op's count may walk: no real convolution comes near
_MAX_OP_NAME = 1000  # a framework op's path: TF's and JAX's run to a few hundred characters
_USER_HOPS = 8  # how far an instruction without metadata is followed to users that name their op
_USERS_VISITED = 256  # and over how many instructions at most
UNKNOWN_CUSTOM_CALL = "a custom call (a library's code): XLA does not know its work"


class _TooLarge(Exception):
    """An op whose count would walk more positions than ``_MAX_COUNTED``."""


@dataclasses.dataclass(frozen=True)
class OpCost:
    """One execution of an XLA op: its FLOPs and the bytes it reads and writes."""

    flops: float
    bytes: float


def _elements(shape) -> int:
    return math.prod(shape.dimensions)


def _shape_bytes(shape) -> int:
    if shape.element_type == _TUPLE:
        return _POINTER_BYTES * len(shape.tuple_shapes)
    return _elements(shape) * _ELEMENT_BYTES.get(shape.element_type, 0)


def _leaves(shape) -> list:
    """A shape's arrays: itself, or every array of a tuple, nested ones included."""
    if shape.element_type == _TUPLE:
        return [leaf for part in shape.tuple_shapes for leaf in _leaves(part)]
    return [shape]


def _array_bytes(shape) -> int:
    """A result's bytes: every array of a tuple, nested ones included."""
    if shape.element_type == _TUPLE:
        return sum(_array_bytes(part) for part in shape.tuple_shapes)
    return _shape_bytes(shape)


class _Computation:
    """A computation's instructions by id, and who uses each."""

    def __init__(self, proto) -> None:
        self.instructions = {instruction.id: instruction for instruction in proto.instructions}
        self.users: dict[int, list[Any]] = {}
        for instruction in proto.instructions:
            for operand in instruction.operand_ids:
                self.users.setdefault(operand, []).append(instruction)

    def operand(self, instruction, position: int):
        return (
            self.instructions.get(instruction.operand_ids[position])
            if position < len(instruction.operand_ids)
            else None
        )


class ProgramCosts:
    """The costs of one program's instructions, each counted once and kept."""

    def __init__(self, module) -> None:
        self.computations = {proto.id: _Computation(proto) for proto in module.computations}
        self.by_name: dict[str, tuple[Any, _Computation]] = {}
        for computation in self.computations.values():
            for instruction in computation.instructions.values():
                self.by_name.setdefault(instruction.name, (instruction, computation))
        self._flops: dict[int, float | None] = {}  # computation id -> its instructions' FLOPs summed
        self._counting: set[int] = set()  # the computations being summed now, to tell a cycle

    def framework_op(self, name: str) -> str | None:
        """The framework op the named instruction was made from: its ``metadata.op_name``,
        or, for an instruction XLA made without one (a max-pool gradient's argmax window, a
        weight's transposing copy), the op its nearest named users were made from
        (``_users_op``); ``""`` where neither names one (or it is a name no row should
        carry), None where the program has no such instruction."""
        found = self.by_name.get(name)
        if found is None:
            return None
        instruction, computation = found
        op_name = instruction.metadata.op_name.strip()
        if not op_name:
            return _users_op(instruction, computation)
        return op_name if _readable(op_name) else ""

    def of(self, name: str) -> OpCost | str | None:
        """The named instruction's cost, a reason it is unknown, or None where the program
        has no such instruction."""
        found = self.by_name.get(name)
        if found is None:
            return None
        instruction, computation = found
        try:
            flops = self.flops(instruction, computation)
            if flops is None:
                return UNKNOWN_CUSTOM_CALL
            return OpCost(flops, float(self.bytes(instruction, computation)))
        except _TooLarge as error:
            return f"too large to count here: {error}"
        except (IndexError, OverflowError, RecursionError, ValueError) as error:  # a hostile or broken program
            return f"its instruction in the profile's XLA program is malformed ({error or type(error).__name__})"

    def computation_flops(self, computation_id: int) -> float | None:
        if computation_id in self._counting:  # a computation that calls itself: no program XLA compiled
            raise ValueError("a computation calls itself")
        if computation_id not in self._flops:
            self._counting.add(computation_id)
            try:
                computation = self.computations.get(computation_id)
                self._flops[computation_id] = self._summed(computation) if computation is not None else 0.0
            finally:
                self._counting.discard(computation_id)
        return self._flops[computation_id]

    def _summed(self, computation: _Computation) -> float | None:
        total: float | None = 0.0
        for instruction in computation.instructions.values():
            flops = self.flops(instruction, computation)
            total = None if flops is None or total is None else total + flops
        return total

    def _called(self, instruction, position: int = 0) -> float | None:
        ids = instruction.called_computation_ids
        return self.computation_flops(ids[position]) if position < len(ids) else 0.0

    def flops(self, instruction, computation: _Computation) -> float | None:
        """XLA's FLOPs of one execution of ``instruction``; None for a custom call's."""
        opcode, shape = instruction.opcode, instruction.shape
        if opcode in _ELEMENTWISE:
            return 0.0 if opcode in _TRANSCENDENTAL else float(_elements(shape))
        if opcode == "dot":
            return self._dot(instruction, computation)
        if opcode == "convolution":
            return self._convolution(instruction, computation)
        if opcode in ("fusion", "call", "async-start"):
            return self._called(instruction)
        if opcode == "custom-call":
            # cuDNN's convolutions keep the convolution's window and dimensions: counted as
            # one, on the result's first part (the rest is cuDNN's scratch), as XLA's GPU
            # cost analysis counts them; any other library call's work is unknown
            return self._convolution(instruction, computation) if _is_dnn_convolution(instruction) else None
        return self._applied(instruction, computation)

    def _applied(self, instruction, computation: _Computation) -> float | None:
        """The ops that apply a computation many times, and the rest's few rules."""
        opcode, shape = instruction.opcode, instruction.shape
        first = computation.operand(instruction, 0)
        if opcode == "reduce":
            output = shape.tuple_shapes[0] if shape.element_type == _TUPLE and shape.tuple_shapes else shape
            return _times(self._called(instruction), _elements(first.shape) - _elements(output) if first else 0)
        if opcode == "reduce-window":
            return _times(self._called(instruction), _reduce_window_count(instruction, first))
        if opcode == "map":
            return _times(self._called(instruction), _elements(shape))
        if opcode == "select-and-scatter" and (source := computation.operand(instruction, 1)) is not None:
            window = math.prod(dimension.size for dimension in instruction.window.dimensions)
            select, scatter = self._called(instruction, 0), self._called(instruction, 1)
            count = _elements(source.shape)
            return None if select is None or scatter is None else select * count * (window - 1) + scatter * count
        if opcode == "scatter" and len(instruction.operand_ids) >= 3:
            updates = computation.operand(instruction, len(instruction.operand_ids) // 2 + 1)
            return _times(self._called(instruction), _elements(updates.shape) if updates else 0)
        if opcode == "while":
            body, condition = self._called(instruction, 1), self._called(instruction, 0)
            return None if body is None or condition is None else body + condition
        if opcode == "conditional":
            branches = [self.computation_flops(i) for i in instruction.called_computation_ids]
            return None if None in branches else max([b for b in branches if b is not None], default=0.0)
        if opcode == "sort" and first is not None:
            count = _elements(first.shape)
            return float(count * math.ceil(math.log2(count))) if count > 1 else 0.0
        if opcode in ("all-reduce", "all-reduce-start"):  # each output element the sum of two (two replicas)
            return float(sum(_elements(leaf) for leaf in _leaves(shape)))
        return self._linear_algebra(instruction, first)

    def _linear_algebra(self, instruction, first) -> float:
        """FFT, triangular solve and Cholesky, as XLA estimates them; every other op none."""
        opcode = instruction.opcode
        if first is None:
            return 0.0
        if opcode == "fft":  # 4 multiply-adds a complex multiply, log2 of each length
            factors = math.prod(max(int(length).bit_length() - 1, 0) for length in instruction.fft_length)
            return 2.0 * 4 * factors * _elements(_first_array(first.shape))
        if opcode == "triangular-solve" and first.shape.dimensions:
            return 2.0 * first.shape.dimensions[-1] * _elements(instruction.shape)
        if opcode == "cholesky" and first.shape.dimensions:
            return float(first.shape.dimensions[-1] * _elements(first.shape) // 3)
        return 0.0

    def _dot(self, instruction, computation: _Computation) -> float:
        lhs = computation.operand(instruction, 0)
        if lhs is None:
            return 0.0
        width = math.prod(lhs.shape.dimensions[d] for d in instruction.dot_dimension_numbers.lhs_contracting_dimensions)
        return 2.0 * _elements(instruction.shape) * width

    def _convolution(self, instruction, computation: _Computation) -> float:
        first, second = computation.operand(instruction, 0), computation.operand(instruction, 1)
        if first is None or second is None:
            return 0.0
        # (input, kernel, output) of the forward convolution: a cuDNN backward call keeps the
        # forward's window and dimension numbers, with its operands and result swapped in
        result = _first_array(instruction.shape)
        lhs, rhs, out = first.shape, second.shape, result
        if instruction.custom_call_target.endswith("$convBackwardInput"):
            lhs, out = result, first.shape
        elif instruction.custom_call_target.endswith("$convBackwardFilter"):
            rhs, out = result, second.shape
        numbers = instruction.convolution_dimension_numbers
        positions = 1
        for spatial, window in enumerate(instruction.window.dimensions):
            positions *= _valid_positions(
                window,
                lhs.dimensions[numbers.input_spatial_dimensions[spatial]],
                rhs.dimensions[numbers.kernel_spatial_dimensions[spatial]],
                out.dimensions[numbers.output_spatial_dimensions[spatial]],
            )
        features_in = lhs.dimensions[numbers.input_feature_dimension] // max(instruction.feature_group_count, 1)
        batch = lhs.dimensions[numbers.input_batch_dimension] // max(instruction.batch_group_count, 1)
        return 2.0 * features_in * out.dimensions[numbers.output_feature_dimension] * batch * positions

    def bytes(self, instruction, computation: _Computation) -> int:
        """The bytes one execution reads and writes."""
        opcode = instruction.opcode
        if opcode in _NO_TRAFFIC:
            return 0
        if opcode == "fusion" and instruction.called_computation_ids:
            fused = self.computations.get(instruction.called_computation_ids[0])
            return _array_bytes(instruction.shape) + (_fused_reads(fused) if fused else 0)
        if opcode in _SLICES or opcode in _INDEXED:
            return self._indexed_bytes(instruction, computation)
        if opcode in ("all-reduce", "all-reduce-start"):
            written = _array_bytes(instruction.shape)
            operands = (computation.instructions.get(i) for i in instruction.operand_ids)
            return written + sum(_array_bytes(o.shape) for o in operands if o is not None)
        written = _shape_bytes(
            _first_array(instruction.shape) if _is_dnn_convolution(instruction) else instruction.shape
        )
        operands = (computation.instructions.get(i) for i in instruction.operand_ids)
        return written + sum(_shape_bytes(o.shape) for o in operands if o is not None)

    def _indexed_bytes(self, instruction, computation: _Computation) -> int:
        """The ops that touch part of a buffer, as XLA counts them: a slice reads what it writes
        (its indices besides, for a dynamic one), a gather its output and indices, a
        dynamic-update-slice its update twice (the rest of the buffer is its output's, in
        place), a scatter its updates three times (read, read-modify, write) and its indices."""
        opcode, shape = instruction.opcode, instruction.shape
        operand = lambda position: computation.operand(instruction, position)  # noqa: E731
        size = lambda found: _shape_bytes(found.shape) if found is not None else 0  # noqa: E731
        if opcode == "slice":
            return 2 * _shape_bytes(shape)
        if opcode in ("dynamic-slice", "gather"):
            indices = sum(size(operand(i)) for i in range(1, len(instruction.operand_ids)))
            return 2 * _shape_bytes(shape) + indices
        if opcode == "dynamic-update-slice":
            indices = sum(size(operand(i)) for i in range(2, len(instruction.operand_ids)))
            return 2 * size(operand(1)) + indices
        # scatter: operands..., indices, updates... (as many updates as operands)
        operands = (len(instruction.operand_ids) - 1) // 2
        updates = sum(size(operand(operands + 1 + i)) for i in range(operands))
        return 3 * updates + size(operand(operands))


def _is_dnn_convolution(instruction) -> bool:
    return instruction.custom_call_target.startswith(("__cudnn$conv", "__miopen$conv"))


def _first_array(shape):
    """A result's first array: a tuple's first part (a cuDNN call's result, beside its scratch)."""
    while shape.element_type == _TUPLE and shape.tuple_shapes:
        shape = shape.tuple_shapes[0]
    return shape


def _times(flops: float | None, count: int) -> float | None:
    return None if flops is None else flops * max(count, 0)


def _valid_positions(window, input_size: int, kernel_size: int, output_size: int) -> int:
    """The (output, kernel) index pairs of one spatial dimension whose input index is inside
    the input (not padding, not a hole of a dilated input)."""
    stride, base = max(window.stride, 1), max(window.base_dilation, 1)
    dilation = max(window.window_dilation, 1)
    if kernel_size > _MAX_COUNTED or (stride != 1 or base != 1) and kernel_size * output_size > _MAX_COUNTED:
        raise _TooLarge(f"a window of {kernel_size} x {output_size} positions is past what is counted")
    if stride == 1 and base == 1:  # a closed form per kernel position
        return sum(
            max(
                min(input_size + window.padding_low - k * dilation, output_size)
                - max(window.padding_low - k * dilation, 0),
                0,
            )
            for k in range(kernel_size)
        )
    count = 0
    for k in range(kernel_size):
        for o in range(output_size):
            index = o * stride - window.padding_low + k * dilation
            if index % base == 0 and 0 <= index // base < input_size:
                count += 1
    return count


def _reduce_window_count(instruction, operand) -> int:
    """How many times a reduce-window applies its reducer: (window - 1) per output element,
    or, for a window that reduces one whole dimension and broadcasts the result back along
    it, once per row plus the row's length, as XLA counts it."""
    dimensions = instruction.window.dimensions
    shape = instruction.shape
    output = _elements(shape.tuple_shapes[0] if shape.element_type == _TUPLE and shape.tuple_shapes else shape)
    window = math.prod(dimension.size for dimension in dimensions)
    reduced = [d for d in dimensions if d.size != 1]
    padded = [d for d in dimensions if d.padding_low or d.padding_high]
    if len(reduced) == 1 and len(padded) == 1 and shape.element_type != _TUPLE:
        for position, dimension in enumerate(dimensions):
            whole = dimension.size == 2 * dimension.padding_low + 1 and dimension.padding_low == dimension.padding_high
            if dimension.size != 1 and dimension.padding_low and whole:
                if dimension.padding_low == shape.dimensions[position] - 1:
                    span = shape.dimensions[position]
                    return output // span + span - 1
    return (window - 1) * output


def _fused_reads(fused: _Computation) -> int:
    """The bytes a fusion reads: each parameter once, or only the parts its slices take
    where slices alone read it."""
    total = 0
    for instruction in fused.instructions.values():
        if instruction.opcode != "parameter":
            continue
        users = fused.users.get(instruction.id, [])
        if users and all(user.opcode in _SLICES and user.operand_ids[0] == instruction.id for user in users):
            total += sum(_shape_bytes(user.shape) for user in users)
        else:
            total += _shape_bytes(instruction.shape)
    return total


def _readable(op_name: str) -> bool:
    return 0 < len(op_name) <= _MAX_OP_NAME and op_name.isprintable()


def _users_op(instruction, computation: _Computation) -> str:
    """The framework op an instruction without metadata serves: the one op named by its
    nearest users that name one, found by following its users, and theirs, through the
    unnamed instructions between (get-tuple-element, bitcast, tuple, copy, fusions XLA
    made ...) in its computation, at most ``_USER_HOPS`` users away. ``""`` where they name
    none, name different ops (a weight gradient that both of Adam's moments read), or
    would take visiting more than ``_USERS_VISITED`` instructions to find (a hostile
    program's fan-out)."""
    named: set[str] = set()
    seen, frontier = {instruction.id}, [instruction]
    for _ in range(_USER_HOPS):
        following = []
        for user in (user for current in frontier for user in computation.users.get(current.id, [])):
            if user.id in seen:
                continue
            if len(seen) >= _USERS_VISITED:
                return ""
            seen.add(user.id)
            op_name = user.metadata.op_name.strip()
            if op_name:
                named.add(op_name if _readable(op_name) else "")
            else:
                following.append(user)
        if len(named) > 1 or not following:
            break
        frontier = following
    return named.pop() if len(named) == 1 else ""


class XlaPrograms:
    """A session's programs by id (``HloEvidence.modules``), each one's costs counted on
    first use."""

    def __init__(self, modules: dict[int, Any]) -> None:
        self.modules = modules
        self._costs: dict[int, ProgramCosts] = {}

    def _program(self, program_id: int) -> ProgramCosts:
        if program_id not in self._costs:
            self._costs[program_id] = ProgramCosts(self.modules[program_id])
        return self._costs[program_id]

    def framework_row(self, name: str, kind: str, searched: set[int]) -> tuple[str, str] | None:
        """The row an XLA op's instruction ``name`` (of ``kind``, its instruction name
        without the number) is counted in: ``<framework op>/<kind>``, typed ``kind``, where
        the programs ``searched`` (every program where none is given) that hold the
        instruction all say it was made from one framework op (its metadata's, or where XLA
        made it without one, its users', ``ProgramCosts.framework_op``). None, for the
        instruction's own name to stand, where none of them holds it, neither its metadata
        nor its users name one framework op, or the programs name different ones (two
        programs that ran each numbered an instruction ``fusion.3``)."""
        made_from = set()
        for program_id in sorted(searched & self.modules.keys() or self.modules.keys()):
            op_name = self._program(program_id).framework_op(name)
            if op_name is not None:
                made_from.add(op_name)
        if len(made_from) != 1 or "" in made_from:
            return None
        return f"{made_from.pop()}/{kind}", kind

    def named(self, module_names: set[str]) -> set[int]:
        """The programs whose module is one of ``module_names`` (a kernel's ``hlo_module``)."""
        return {program_id for program_id, module in self.modules.items() if module.name in module_names}

    def cost(self, name: str, ran: set[int]) -> OpCost | str:
        """One execution's cost of the op XLA names ``name``, looked up in the programs that
        ran (those the op events name; every program where they name none), or why not."""
        if not self.modules:
            return "the profile carries no XLA program to count it on"
        searched = ran & self.modules.keys()
        found = {}
        for candidate in (name, _KERNEL_NAMED.sub(r".\1", name)):  # a command buffer's kernel: fusion_3
            for program_id in sorted(searched or self.modules.keys()):
                cost = self._program(program_id).of(candidate)
                if cost is not None:
                    found[program_id] = cost
            if found:
                break
        if not found:
            return "no XLA program in the profile has this instruction"
        if len(set(found.values())) > 1:
            which = "that ran" if searched else "in the profile (which of them ran this one, its events do not say)"
            return f"{len(found)} XLA programs {which} have an instruction of this name, with different work"
        return next(iter(found.values()))


def work_rows(
    keys: list[tuple[str, str]],
    executions: np.ndarray,
    times_us: np.ndarray,
    costs: list,
    on_device: bool,
    rows: list[tuple[str, str]] | None = None,
    tf32_us: np.ndarray | None = None,
) -> dict:
    """``WORK_COLUMNS`` of XLA ops: per op (a code into ``keys``) its executions and their
    time, its work per execution from ``costs`` (per key: an ``OpCost`` or why it is
    unknown; None for an op that is no XLA op, left out), timed on the host or, with
    ``on_device``, by its kernels (``tf32_us``: the part of that time on TF32 tensor cores,
    where the kernels' names tell it). ``rows``: the row each code is counted in, where it
    is not its key (an instruction in its framework op's row): codes that share a row are
    summed into it (``_merged``)."""
    seen = np.flatnonzero((executions > 0) & np.array([cost is not None for cost in costs], dtype=bool))
    calls, times = executions[seen], times_us[seen]
    each = [costs[code] for code in seen.tolist()]
    known = np.array([isinstance(cost, OpCost) for cost in each], dtype=bool)
    flops = np.array([cost.flops if isinstance(cost, OpCost) else np.nan for cost in each]) * calls
    moved = np.array([cost.bytes if isinstance(cost, OpCost) else np.nan for cost in each]) * calls
    nothing = np.full(len(seen), np.nan)
    timed = np.where(known, times, np.nan)
    named = [(rows or keys)[code] for code in seen.tolist()]
    columns = {
        "op_name": [name for name, _ in named],
        "op_type": [op_type for _, op_type in named],
        "calls": calls,
        "known_calls": np.where(known, calls, 0),
        "flops": flops,
        "bytes": moved,
        "source": [XLA_PROGRAM if isinstance(cost, OpCost) else f"unknown: {cost}" for cost in each],
        "host_us": nothing if on_device else timed,
        "device_calls": np.where(known, calls, 0) if on_device else np.zeros(len(seen), dtype=np.int64),
        "device_flops": flops if on_device else nothing,
        "device_bytes": moved if on_device else nothing,
        "device_us": timed if on_device else nothing,
        "device_tf32_us": nothing if tf32_us is None or not on_device else np.where(known, tf32_us[seen], np.nan),
    }
    return _merged(columns, named) if len(set(named)) < len(named) else columns


def _merged(columns: dict, named: list[tuple[str, str]]) -> dict:
    """``work_rows``' columns with the rows of one op summed: counts exactly, the rest over
    the rows that know them (NaN where none does); the source that of its first row that
    knows its work, else of its first row."""
    op, distinct = first_appearance(named)
    count = len(distinct)
    merged: dict = {"op_name": [name for name, _ in distinct], "op_type": [op_type for _, op_type in distinct]}
    for column in ("calls", "known_calls", "device_calls"):
        merged[column] = integer_group_sums(columns[column], op, count)
    for column in ("flops", "bytes", "host_us", "device_flops", "device_bytes", "device_us", "device_tf32_us"):
        merged[column] = known_sums(columns[column], op, count)
    source: list = [None] * count
    for row in np.lexsort((~(np.asarray(columns["known_calls"]) > 0), op))[::-1].tolist():
        source[op[row]] = columns["source"][row]  # the first row that knows its work is written last
    merged["source"] = source
    return merged
