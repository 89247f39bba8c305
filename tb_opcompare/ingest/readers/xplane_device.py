"""The device planes of an xplane (``/device:GPU:N`` and other accelerators).

A device plane's kernels and copies (its ``Stream #`` lines), each attributed to an op
(a TF op's stat, else an XLA op's ``hlo_op``, else the kernel itself) and put together
into executions (a ``TensorFlow Ops`` line's, a scope range's, or summed per op), the
work of its XLA ops, its Steps line, and what the plane says of its device (kind, name,
limits).

Separate from the host planes (``xplane_host``): the device planes are read after them,
by rules of their own, with only what the host left for them (its kernel launches,
``xplane_evidence.HostLaunches``) and what both share (``xplane_events``).
"""

from __future__ import annotations

import collections
import re

import numpy as np

from tb_opcompare.ingest.readers import xplane_steps
from tb_opcompare.ingest.readers.device_executions import (
    PS_PER_US,
    KernelTies,
    add_executed_kernels,
    add_kernel_totals,
    add_scoped_kernels,
    first_appearance_keys,
)
from tb_opcompare.ingest.readers.op_work import tf32_kernels
from tb_opcompare.ingest.readers.tf_ops import op_from_annotation, parse_tf_op
from tb_opcompare.ingest.readers.xla_cost import XlaPrograms, work_rows
from tb_opcompare.ingest.readers.xplane_events import (
    BrokenEvents,
    IdLookup,
    Texts,
    event_ints,
    framework_rows,
    hlo_op,
    int_value,
    plane_event_names,
    plane_stat_names,
    plane_stats,
    stat_text,
    stat_text_codes,
    xla_costs,
)
from tb_opcompare.ingest.readers.xplane_evidence import HostLaunches, SessionEvidence
from tb_opcompare.ingest.readers.xplane_wire import STAT_ABSENT, STAT_INT64, STAT_REPEATED, STAT_UINT64
from tb_opcompare.schema.events import OpEvents
from tb_opcompare.schema.groups import first_appearance_ids


def read_device_plane(
    plane,
    events: OpEvents,
    evidence: SessionEvidence,
    launches: HostLaunches,
    spans: xplane_steps.StepSpans | None = None,
) -> tuple[str | None, str, list[int]]:
    """Add kernels of a device plane; return (device kind or None if idle, name, the
    duration of each event of its Steps line in start order, ps).

    A kernel's op is the TF op its ``tf_op`` stat (or TF 2.2-2.4's ``annotation`` /
    ``level 0``) names; where that names none (JAX writes ``XlaModule:``), the XLA op its
    ``hlo_op`` stat names, typed as the host's XLA ops are (``cudnn-conv.2`` is a
    ``cudnn-conv``); else the kernel itself.

    An op's mean is per execution, not per kernel. Where the plane has a ``TensorFlow
    Ops`` line (TF 2.2-2.4: one event per execution of a TF op on this device, spanning
    its kernels), each kernel belongs to the execution of its op that it starts in, and
    a kernel in none (a copy, which no execution spans) is an execution of its own. The
    line cuts an execution in pieces where another op's kernel ran between two of its
    kernels: pieces that the host's launches (``launches``), or else their step group and
    kernels, show to be one execution are one (``device_executions.merged_fragments``).
    Where kernels carry a ``scope_range_id`` (XLA's GPU runtime: one id per execution of
    an XLA op, shared by every kernel it launches, such as cuDNN's several per
    convolution), kernels sharing one are one execution. Elsewhere the kernels are summed
    per op, and executions are counted from the host's op events where the host ran the
    op (``schema.optable._aggregate_device``)."""
    kind = plane.name[len("/device:") :].split(":", 1)[0]
    if not _DEVICE_KIND.fullmatch(kind):  # the kind is shown and plotted: only a plain word
        kind = "accelerator"
    stat_names = plane_stat_names(plane)
    event_names = plane_event_names(plane)
    executions, origin_ns = _executions(plane, event_names)
    invocations, kinds = evidence.invocation_ids, evidence.kinds
    ops, kernels, steps = _read_kernels(plane, stat_names, event_names, kinds, origin_ns if executions else None, spans)
    if not len(kernels):
        return None, "", steps
    keys, codes, starts, durations, scopes, scope_kinds = kernels.columns(list(ops.ops))
    xla_ops = ops.xla_ops()
    xla_codes = [code for code, key in enumerate(keys) if key in xla_ops]
    instructions = (keys, codes)  # the ops' work is counted on their instructions
    rows = None
    if xla_codes:  # each instruction's kernels in its framework op's row, where its program says
        rows, keys, renumbered = ops.framework_rows(keys, xla_codes, evidence.xla_programs())
        codes = renumbered[codes]
    if executions:
        add_executed_kernels(
            events, keys, codes, starts, durations, executions, invocations, kernels.ties(launches, keys, codes)
        )
    elif "scope_range_id" in stat_names.values():
        add_scoped_kernels(events, keys, codes, durations, (scope_kinds, scopes), invocations)
    else:
        add_kernel_totals(events, keys, codes, durations)
    if xla_codes:
        scoped = (scope_kinds, scopes)
        timed = (durations, kernels.on_tf32(event_names))
        events.work.append(_device_work(*instructions, timed, scoped, (xla_codes, rows), evidence.xla_programs()))
    return kind, _device_name(plane, stat_names, kind), steps


def _device_work(keys: list, codes: np.ndarray, timed: tuple, scopes: tuple, xla: tuple, programs: XlaPrograms) -> dict:
    """``WORK_COLUMNS`` of the XLA ops among a device's kernels (``xla``: their codes, and
    the row each code is counted in; ``timed``: each kernel's duration, ps, and whether it
    ran on TF32 tensor cores): an execution is the kernels that share a scope range id (a
    kernel without one is one), timed by its kernels. An op's work is looked up in every
    program (two that hold its instruction with different work leave it unknown)."""
    xla_codes, rows = xla
    kinds, values = scopes
    durations_us = timed[0].astype(np.float64) / PS_PER_US
    scoped = kinds != 0
    runs = np.unique(np.column_stack([codes[scoped], kinds[scoped], values[scoped]]).astype(np.int64), axis=0)
    executions = np.bincount(runs[:, 0], minlength=len(keys)) + np.bincount(codes[~scoped], minlength=len(keys))
    times_us = np.bincount(codes, weights=durations_us, minlength=len(keys))
    tf32_us = np.bincount(codes, weights=np.where(timed[1], durations_us, 0.0), minlength=len(keys))
    costs = xla_costs(keys, xla_codes, set(), programs)
    return work_rows(keys, executions, times_us, costs, True, rows, tf32_us=tf32_us)


class _DeviceKernels:
    """A device plane's kernels as arrays, a batch at a time: each one's op (a code into
    ``_KernelOps.ops``), start and duration (ps), and its ``scope_range_id`` where it
    counts (XLA's id of the execution that launched it; a uint64 past int64's range is
    kept apart from the int64 of the same bits, as the numbers differ); and what ties it
    to its execution (``ties``): its name (event metadata id), ``group_id`` and
    ``correlation_id``, each with whether it has one."""

    def __init__(self):
        self._parts: list[tuple[np.ndarray, ...]] = []

    def add(self, codes, starts, durations, scopes, scope_kinds, names, groups, grouped, correlations, correlated):
        self._parts.append(
            (codes, starts, durations, scopes, scope_kinds, names, groups, grouped, correlations, correlated)
        )

    def __len__(self) -> int:
        return sum(len(part[0]) for part in self._parts)

    def columns(self, ops: list[tuple[str, str]]) -> tuple:
        """(ops in the order their first kernel came, each kernel's code into them, starts
        (None where not read), durations (ps), scopes, scope kinds (``_SCOPE_*``))."""
        codes, starts, durations, scopes, scope_kinds = list(zip(*self._parts))[:5]
        keys, codes = first_appearance_keys(ops, np.concatenate(codes))
        starts = np.concatenate(starts) if starts[0] is not None else None
        return keys, codes, starts, np.concatenate(durations), np.concatenate(scopes), np.concatenate(scope_kinds)

    def on_tf32(self, event_names: dict[int, str]) -> np.ndarray:
        """For each kernel (in ``columns``' order), whether its name says it ran on TF32
        tensor cores (``op_work.tf32_kernels``), each name looked at once."""
        ids, inverse = np.unique(np.concatenate([part[5] for part in self._parts]), return_inverse=True)
        return tf32_kernels([event_names.get(int(key), "") for key in ids.tolist()])[inverse.reshape(-1)]

    def ties(self, launches: HostLaunches, keys: list, codes: np.ndarray) -> KernelTies:
        """The kernels' ``KernelTies`` (their ops: ``codes`` into ``keys``), each launch
        placed by the file's host (``launches``)."""
        names, groups, grouped, correlations, correlated = (
            np.concatenate(column) for column in list(zip(*self._parts))[5:]
        )
        return KernelTies(names, groups, grouped, launches.executions(correlations, correlated, keys, codes))


# What a kernel's scope_range_id is: none (or not an integer), an integer, or a uint64 past
# int64's range (its bits are a negative int64's, which is another number)
_SCOPE_NONE, _SCOPE_INT, _SCOPE_BIG_UINT = 0, 1, 2


class _XlaKernelOps:
    """The XLA op of a kernel from its ``hlo_op`` stat, each text parsed once.

    Inside a command buffer (XLA's CUDA graph of a run of ops, which recent XLA records
    whole steps in), ``hlo_op`` names the buffer (``command_buffer_1``), not the op, so
    one row would hold every kernel of the step. There the op is the kernel, named as XLA
    names it: after the first of the fusions it serves (XLA compiles one kernel for all
    the fusions it finds alike: ``loop_add_fusion_26`` runs ``loop_add_fusion.26`` to
    ``.39`` of the Flax encoder), typed without its number as XLA ops are typed, so runs
    with and without command buffers meet by type. Each such kernel is an execution of
    its own: the buffer's one scope range id spans the step."""

    _COMMAND_BUFFER = re.compile(r"command_buffer(?:[._]\d+)?")
    _KERNEL_INSTANCE = re.compile(r"_\d+$")

    def __init__(self):
        self._by_hlo: dict[str, tuple[str, str]] = {}
        self._by_kernel: dict[str, tuple[str, str]] = {}
        self._modules: dict[tuple[str, str], set[str]] = {}  # instruction -> the modules its kernels name
        self._unnamed: set[tuple[str, str]] = set()  # instructions with a kernel that names no module

    def hlo_ops(self) -> set[tuple[str, str]]:
        """The ops named by an XLA instruction, and a command buffer's kernels (XLA names a
        fusion's kernel after it, ``.`` as ``_``: their work is looked up by that name too)."""
        return set(self._by_hlo.values()) | set(self._by_kernel.values())

    def of(self, hlo: str, kernel_name: str, module: str = "") -> tuple[tuple[str, str], bool]:
        """(op, whether the kernel ran inside a command buffer); ``module``: the program
        the kernel's ``hlo_module`` stat names."""
        if self._COMMAND_BUFFER.fullmatch(hlo) and kernel_name:
            op = self._by_kernel.get(kernel_name)
            if op is None:
                op = self._by_kernel[kernel_name] = hlo_op(kernel_name, self._KERNEL_INSTANCE)
            return op, True
        op = self._by_hlo.get(hlo)
        if op is None:
            op = self._by_hlo[hlo] = hlo_op(hlo)
        if module:
            self._modules.setdefault(op, set()).add(module)
        else:
            self._unnamed.add(op)
        return op, False

    def framework_rows(self, keys: list, codes: list[int], programs: XlaPrograms) -> tuple[list, list, np.ndarray]:
        """``framework_rows`` of the instructions among ``keys`` at ``codes``, each looked
        up in the programs its kernels' ``hlo_module`` names (every program where a kernel
        names none). A command buffer's kernel serves several fusions, maybe of several
        framework ops: it keeps its own name."""
        instructions = set(self._by_hlo.values())

        def searched(code: int) -> set[int]:
            key = keys[code]
            return set() if key in self._unnamed else programs.named(self._modules.get(key, set()))

        return framework_rows(keys, [code for code in codes if keys[code] in instructions], searched, programs)


# a batch of kernels parsed: op codes, from the hlo_op, scopes, scope kinds, and the ties
_ParsedKernels = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, ...]]


class _KernelOps:
    """The op of a device kernel from its stats, the rule of ``read_device_plane``: the
    first ``tf_op`` or ``annotation`` stat of the event that names an op (TF 2.2-2.4 wrote
    the latter), else its last ``level 0`` stat that does; else the XLA op of its
    ``hlo_op`` stat (``_XlaKernelOps``); else the kernel itself. Ops are numbered as they
    are first resolved (``ops``); each distinct set of stats is resolved once.

    A plane's kernels are read a batch at a time: from the wire in C where the helper was
    built (``_wire_batch``: the stats of every kernel as arrays, the rule applied once per
    distinct set of them), else from the parsed events (``_parsed_batch``), which also
    answers for the rare kernels whose stats the arrays cannot order (two ``tf_op`` stats,
    say), with the same results. Each kernel's ``group_id`` (its step) and
    ``correlation_id`` (its launch on the host) are read with them: they tie the pieces of
    an execution that a ``TensorFlow Ops`` line cut apart (``KernelTies``)."""

    COLUMNS = ("tf_op", "annotation", "level 0", "hlo_op", "scope_range_id", "group_id", "correlation_id", "hlo_module")
    _NAMING = 3  # the first three columns name the op; their order in the event matters
    _HLO, _SCOPE, _GROUP, _CORRELATION, _MODULE = 3, 4, 5, 6, 7

    def __init__(
        self, stat_names: dict[int, str], event_names: dict[int, str], kinds: collections.Counter, ties: bool = True
    ):
        by_name = {name: key for key, name in stat_names.items()}  # one id per name: the last
        # the ties are read only where a TensorFlow Ops line has executions to tie
        self.ids = [
            by_name.get(name) if ties or column not in (self._GROUP, self._CORRELATION) else None
            for column, name in enumerate(self.COLUMNS)
        ]
        self.columns = {key: column for column, key in enumerate(self.ids) if key is not None}
        self.stats_query = (None, self.columns, len(self.COLUMNS), True)  # wire_stats of every event, repeats flagged
        self.stat_names, self.event_names, self.kinds = stat_names, event_names, kinds
        self.ops: dict[tuple[str, str], int] = {}
        self._named: dict[tuple[bool, str], tuple[str, str] | None] = {}
        self._xla_ops = _XlaKernelOps()

    def read(self, batch, ints: np.ndarray, line_start_ps: int | None, line_name: str, kernels: _DeviceKernels) -> None:
        """The kernels of ``batch`` (``ints``: its ``event_ints``) into ``kernels``, with
        their starts where ``line_start_ps`` (the line's, ps) is given."""
        if not len(ints):
            return
        found = self._wire_batch(batch, ints)
        if found is None:
            found = self._parsed_batch(batch, range(len(ints)))
        codes, from_hlo, scopes, scope_kinds, ties = found
        self.kinds["xla_device"] += int(from_hlo.sum())
        starts = None
        if line_start_ps is not None:
            offsets = ints[:, 1]
            _check_clock(line_start_ps + int(offsets.min()), line_start_ps + int(offsets.max()), line_name)
            # the sums fit (checked), the line's start alone need not: added with wrap-around
            starts = (offsets.view(np.uint64) + np.uint64(line_start_ps % (1 << 64))).view(np.int64)
        kernels.add(codes, starts, ints[:, 2], scopes, scope_kinds, ints[:, 0], *ties)

    def xla_ops(self) -> set[tuple[str, str]]:
        """The ops that are XLA instructions, whose programs tell their work."""
        return self._xla_ops.hlo_ops()

    def framework_rows(self, keys: list, codes: list[int], programs: XlaPrograms) -> tuple[list, list, np.ndarray]:
        """The XLA ops among ``keys`` (at ``codes``) named by their framework ops
        (``_XlaKernelOps.framework_rows``)."""
        return self._xla_ops.framework_rows(keys, codes, programs)

    def _resolve(
        self, named: list[tuple[int | None, str]], hlo: str, kernel_id: int, module: str = ""
    ) -> tuple[int, bool, bool]:
        """(op code, whether the op is the hlo_op's, whether the kernel ran in a command
        buffer) of a kernel whose naming stats are ``named`` (id, text) in event order
        (``module``: its ``hlo_module``)."""
        op = None
        for key, text in named:
            parsed = self._op_named(key, text)
            if parsed is not None:
                op = parsed
                if key != self.ids[2]:  # a tf_op or an annotation settles it; level 0 says less
                    break
        from_hlo = in_buffer = False
        if op is None and hlo:
            op, in_buffer = self._xla_ops.of(hlo, self.event_names.get(kernel_id, ""), module)
            from_hlo = True
        if op is None:
            kernel_name = self.event_names.get(kernel_id, "")
            op = (kernel_name, kernel_name if kernel_name.startswith("Memcpy") else "(kernel without TF op)")
        return self.ops.setdefault(op, len(self.ops)), from_hlo, in_buffer

    def _op_named(self, key: int | None, text: str) -> tuple[str, str] | None:
        is_tf_op = key == self.ids[0]
        try:
            return self._named[(is_tf_op, text)]
        except KeyError:
            found = self._named[(is_tf_op, text)] = parse_tf_op(text) if is_tf_op else op_from_annotation(text)
            return found

    def _parsed_batch(self, batch, indices) -> tuple:
        """(codes, from_hlo, scopes, scope kinds, (groups, grouped, correlations,
        correlated)) of the events at ``indices``, parsed. A uint64 group or correlation id
        is kept as the int64 of its bits, as the wire reads it."""
        count = len(indices)
        codes, from_hlo = np.empty(count, dtype=np.int64), np.zeros(count, dtype=bool)
        scopes, scope_kinds = np.zeros(count, dtype=np.int64), np.zeros(count, dtype=np.int8)
        ties = np.zeros((2, count), dtype=np.int64), np.zeros((2, count), dtype=bool)  # group, correlation
        for row, index in enumerate(indices):
            event = batch[index]
            named, hlo, scope, tied, module = [], "", None, [None, None], ""
            for stat in event.stats:
                column = self.columns.get(stat.metadata_id)
                if column is None:
                    continue
                if column < self._NAMING:
                    named.append((stat.metadata_id, stat_text(stat, self.stat_names)))
                elif column == self._HLO:
                    hlo = stat_text(stat, self.stat_names)
                elif column == self._SCOPE:
                    scope = int_value(stat)
                elif column == self._MODULE:
                    module = stat_text(stat, self.stat_names)
                else:  # the last of them, as the wire's arrays keep (``int_value``, inlined)
                    which = stat.WhichOneof("value")
                    tied[column - self._GROUP] = (
                        stat.int64_value
                        if which == "int64_value"
                        else stat.uint64_value
                        if which == "uint64_value"
                        else None
                    )
            codes[row], from_hlo[row], in_buffer = self._resolve(named, hlo, event.metadata_id, module)
            if scope is not None and not in_buffer:
                scope_kinds[row] = _SCOPE_INT if scope < 1 << 63 else _SCOPE_BIG_UINT
                scopes[row] = scope if scope < 1 << 63 else scope - (1 << 64)
            for which, value in enumerate(tied):
                if value is not None:
                    ties[0][which, row] = value if value < 1 << 63 else value - (1 << 64)
                    ties[1][which, row] = True
        (groups, correlations), (grouped, correlated) = ties
        return codes, from_hlo, scopes, scope_kinds, (groups, grouped, correlations, correlated)

    def _wire_batch(self, batch, ints: np.ndarray) -> _ParsedKernels | None:
        """``_parsed_batch`` of every event, from the wire; None where the C helper is not
        there or refuses the wire."""
        wire_stats = getattr(batch, "wire_stats", None)
        stats = wire_stats(*self.stats_query) if wire_stats is not None else None
        if stats is None or len(stats.indices) != len(ints):
            return None
        kinds, values = stats.kinds & ~STAT_REPEATED, stats.values
        texts = Texts()
        wire_texts = np.fromiter(map(texts.code, stats.texts), dtype=np.int64, count=len(stats.texts))
        text_columns = [
            np.where(
                kinds[:, column] == STAT_ABSENT,
                -1,
                stat_text_codes(kinds[:, column], values[:, column], wire_texts, self.stat_names, texts),
            )
            for column in (*range(4), self._MODULE)
        ]
        # each distinct (tf_op, annotation, level 0, hlo_op, module, kernel) is resolved
        # once, in the order first met
        columns = [*text_columns, ints[:, 0]]
        inverse, first = first_appearance_ids(columns)
        count = len(first)
        distinct = np.stack([column[first] for column in columns], axis=1)
        resolved = np.zeros((count, 3), dtype=np.int64)  # code, from hlo, in a buffer
        unordered = np.zeros(count, dtype=bool)
        for index in range(count):
            tf_op, annotation, level_0, hlo, module, kernel_id = distinct[index].tolist()
            named = [
                (self.ids[column], texts.names[text])
                for column, text in enumerate((tf_op, annotation, level_0))
                if text >= 0
            ]
            if tf_op >= 0 and annotation >= 0:
                # the arrays do not say which came first: it matters where both name an op
                both = [self._op_named(key, text) for key, text in named[:2]]
                unordered[index] = None not in both and both[0] != both[1]
            if not unordered[index]:
                hlo_text, module_text = (texts.names[text] if text >= 0 else "" for text in (hlo, module))
                resolved[index] = self._resolve(named, hlo_text, kernel_id, module_text)
        codes, from_hlo, in_buffer = resolved[inverse, 0], resolved[inverse, 1] == 1, resolved[inverse, 2] == 1
        scope_kind_wire = kinds[:, self._SCOPE]
        is_int = ((scope_kind_wire == STAT_INT64) | (scope_kind_wire == STAT_UINT64)) & ~in_buffer
        scopes = np.where(is_int, values[:, self._SCOPE], 0)
        scope_kinds = np.where(
            is_int, np.where((scope_kind_wire == STAT_UINT64) & (scopes < 0), _SCOPE_BIG_UINT, _SCOPE_INT), _SCOPE_NONE
        ).astype(np.int8)
        ties = []
        for column in (self._GROUP, self._CORRELATION):
            known = (kinds[:, column] == STAT_INT64) | (kinds[:, column] == STAT_UINT64)
            ties += [np.where(known, values[:, column], 0), known]
        # several stats of a naming column: which one names the op depends on their order
        repeated = ((stats.kinds[:, : self._NAMING] & STAT_REPEATED) != 0).any(axis=1)
        again = np.flatnonzero(repeated | unordered[inverse])
        if len(again):
            *parsed, parsed_ties = self._parsed_batch(batch, again.tolist())
            codes[again], from_hlo[again], scopes[again], scope_kinds[again] = parsed
            for column, parsed_column in zip(ties, parsed_ties):
                column[again] = parsed_column
        return codes, from_hlo, scopes, scope_kinds, tuple(ties)


def _read_kernels(
    plane,
    stat_names: dict[int, str],
    event_names: dict[int, str],
    kinds,
    origin_ns: int | None,
    spans: xplane_steps.StepSpans | None = None,
) -> tuple:
    """The kernels on the plane's ``Stream #`` lines (``_KernelOps`` names their ops; their
    starts, ps since ``origin_ns``, only where it is given: a ``TensorFlow Ops`` line's
    executions need them), and the durations (ps) of the plane's Steps line in start order.
    Each kernel also joins the host's step split, where ``spans`` is given."""
    ops = _KernelOps(stat_names, event_names, kinds, ties=origin_ns is not None)
    kernels = _DeviceKernels()
    steps: list[int] = []
    for line in plane.lines:
        if line.name == "Steps":
            marked = [(event.offset_ps, event.duration_ps) for batch in line.event_batches() for event in batch]
            steps = [duration for _, duration in sorted(marked)]
        if not line.name.startswith("Stream #"):
            continue
        line_start_ps = (line.timestamp_ns - origin_ns) * 1000 if origin_ns is not None else None
        for batch in line.event_batches():
            ints = event_ints(batch)
            ops.read(batch, ints, line_start_ps, line.name, kernels)
            if spans is not None and len(ints):
                spans.add_kernels(plane.name, line.timestamp_ns, ints, event_names)
            del batch
    return ops, kernels, steps


def _executions(plane, event_names: dict[int, str]) -> tuple[dict[tuple[str, str], np.ndarray], int]:
    """Each op's executions on the plane's ``TensorFlow Ops`` line: an (n, 2) array of
    start and end, sorted by start; empty without the line. Times are ps since the
    origin returned, the earliest such line's start: lines may start at ns since the
    epoch, whose picoseconds are past int64, and the kernels are placed on the same clock.
    Each event's op comes from its metadata's name, parsed once per metadata id; the
    events themselves are read as arrays (``event_ints``)."""
    op_codes: dict[int, int] = {}  # metadata id -> op code, -1 for a name that is no op
    ops: list[tuple[str, str]] = []
    code_of: dict[tuple[str, str], int] = {}
    parts: list[tuple[int, np.ndarray, np.ndarray]] = []  # (line ns, op codes, ints) of each batch's op events
    line_name = ""
    for line in plane.lines:
        if line.name != "TensorFlow Ops":
            continue
        line_name = line.name
        for batch in line.event_batches():
            ints = event_ints(batch)
            del batch
            ids = ints[:, 0]
            for metadata_id in np.unique(ids).tolist():
                if metadata_id not in op_codes:
                    op = op_from_annotation(event_names.get(metadata_id, ""))
                    if op is not None and op not in code_of:
                        code_of[op] = len(ops)
                        ops.append(op)
                    op_codes[metadata_id] = code_of[op] if op is not None else -1
            codes = IdLookup(list(op_codes), list(op_codes.values())).codes(ids)
            named = codes >= 0
            if named.any():
                parts.append((line.timestamp_ns, codes[named], ints[named]))
    if not parts:
        return {}, 0
    origin_ns = min(line_ns for line_ns, _, _ in parts)
    starts, ends = _spans_on_one_clock(parts, origin_ns, line_name)
    codes = np.concatenate([codes for _, codes, _ in parts])
    order = np.lexsort((ends, starts, codes))
    codes, bounds = codes[order], np.column_stack([starts[order], ends[order]])
    cuts = np.flatnonzero(np.diff(codes)) + 1
    return {
        ops[int(group_codes[0])]: group for group_codes, group in zip(np.split(codes, cuts), np.split(bounds, cuts))
    }, origin_ns


def _spans_on_one_clock(
    parts: list[tuple[int, np.ndarray, np.ndarray]], origin_ns: int, line_name: str
) -> tuple[np.ndarray, np.ndarray]:
    """Each event's start and end, ps since ``origin_ns``, of ``parts`` ((line ns, op codes,
    ints) of each batch); raises where they pass a 64-bit picosecond clock."""
    starts, ends = [], []
    first, last = None, None
    for line_ns, _, ints in parts:
        shift = (line_ns - origin_ns) * 1000
        offsets, durations = ints[:, 1], ints[:, 2]
        if (
            max(abs(int(offsets.min())), abs(int(offsets.max())), abs(int(durations.min())), abs(int(durations.max())))
            < 1 << 61
        ):
            part_ends = offsets + durations  # far from int64's ends
            low, high = (
                shift + int(min(offsets.min(), part_ends.min())),
                shift + int(max(offsets.max(), part_ends.max())),
            )
        else:  # a broken writer's times: Python's integers do not overflow
            pairs = [(offset, offset + duration) for offset, duration in zip(offsets.tolist(), durations.tolist())]
            low, high = shift + min(min(pair) for pair in pairs), shift + max(max(pair) for pair in pairs)
            part_ends = None
        first = low if first is None else min(first, low)
        last = high if last is None else max(last, high)
        # the sums fit (checked below), the line's shift alone need not: added with wrap-around
        wrap = np.uint64(shift % (1 << 64))
        starts.append((offsets.view(np.uint64) + wrap).view(np.int64))
        if part_ends is None:
            part_ends = (offsets.view(np.uint64) + durations.view(np.uint64)).view(np.int64)
        ends.append((part_ends.view(np.uint64) + wrap).view(np.int64))
    if first is not None and last is not None:  # some events
        _check_clock(first, last, line_name)
    return np.concatenate(starts), np.concatenate(ends)


def _check_clock(first_ps: int, last_ps: int, line_name: str) -> None:
    """A device plane's times, ps since its earliest TensorFlow Ops line, must fit int64
    (106 days)."""
    if not -(1 << 63) <= first_ps <= last_ps < 1 << 63:
        raise BrokenEvents(
            f"line {line_name!r}: events lie {max(abs(first_ps), abs(last_ps)) // 10**12:,} s from the "
            "plane's TensorFlow Ops line, past the reach of a 64-bit picosecond clock; the profiler wrote "
            "broken events"
        )


_DEVICE_KIND = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}")


_DEVICE_PROPERTIES = ("clock_rate", "core_count", "memory_bandwidth", "memory_size")


def device_properties(plane) -> dict:
    """What a device plane says of its device's limits (the roofline's roof, issue 54):
    clock rate (kHz), SMs, memory bandwidth (bytes/s) and size, compute capability."""
    values = plane_stats(plane, plane_stat_names(plane))
    found: dict = {key: float(values[key]) for key in _DEVICE_PROPERTIES if isinstance(values.get(key), (int, float))}
    if isinstance(major := values.get("compute_cap_major"), int):
        found["compute_capability"] = f"{major}.{int(values.get('compute_cap_minor') or 0)}"
    return found


def _device_name(plane, stat_names: dict[int, str], kind: str) -> str:
    values = plane_stats(plane, stat_names)
    for key in ("device_name", "gpu_device_name", "device_type_string", "model"):
        if isinstance(name := values.get(key), str) and name:
            return name
    if "compute_cap_major" in values:
        major = int(values["compute_cap_major"])
        minor = int(values.get("compute_cap_minor", 0))
        cores = values.get("core_count")
        return f"{kind} (compute capability {major}.{minor}" + (f", {int(cores)} SMs)" if cores else ")")
    return kind
