"""Device kernels counted per execution of their op, not per kernel, whichever reader
found them: an op that launches seven kernels each time it runs has one execution, and its
mean is per execution. Each kernel becomes a record whose invocation id is its execution;
the readers decide what an execution is from what their format keeps (a ``TensorFlow Ops``
line or thread, an XLA ``scope_range_id``).

A ``TensorFlow Ops`` line is derived from the kernels: it merges consecutive kernels of one
op into one event, so it cuts an execution in pieces wherever another op's kernel runs
between two of its kernels (a ``_FusedConv2D`` whose three kernels interleave with a
neighbour's reads as two or three executions). ``KernelTies`` says what puts the pieces
back together (``merged_fragments``)."""

from __future__ import annotations

import dataclasses

import numpy as np
from numpy.typing import ArrayLike

from tb_opcompare.schema.events import OpEvents, self_times, start_order
from tb_opcompare.schema.groups import first_appearance_ids

PS_PER_US = 1e6  # the xplane's clock, which the execution rule counts in


class InvocationIds:
    """Execution ids unique across a file's device planes (an op may run on several)."""

    def __init__(self):
        self._next = 0

    def take(self, count: int) -> int:
        """The first of ``count`` fresh ids."""
        first, self._next = self._next, self._next + count
        return first


def kernel_columns(kernels: list) -> tuple[list, np.ndarray, np.ndarray, np.ndarray]:
    """Kernels given as ``(op, start, duration)`` (ps): their ops in first-seen order, each
    kernel's op code into that list, its start and its duration."""
    keys = list(dict.fromkeys(kernel[0] for kernel in kernels))
    code_of = {op: code for code, op in enumerate(keys)}
    codes = np.fromiter((code_of[kernel[0]] for kernel in kernels), dtype=np.int64, count=len(kernels))
    starts = np.fromiter((kernel[1] for kernel in kernels), dtype=np.int64, count=len(kernels))
    durations = np.fromiter((kernel[2] for kernel in kernels), dtype=np.float64, count=len(kernels))
    return keys, codes, starts, durations


def first_appearance_keys(ops: list, codes: np.ndarray) -> tuple[list, np.ndarray]:
    """Kernels' ops as codes into ``ops``, renumbered into the ops in the order their first
    kernel came (the order every table lists them in), with that list."""
    renumbered, firsts = first_appearance_ids([codes])
    return [ops[code] for code in codes[firsts].tolist()], renumbered


def add_kernel_totals(events: OpEvents, keys: list, codes: np.ndarray, durations_ps: np.ndarray) -> None:
    """Kernels summed per op (count and time), where nothing tells their executions apart.
    The picoseconds are summed as integers, exactly, before the one division."""
    counts = np.bincount(codes, minlength=len(keys))
    if np.abs(durations_ps.astype(np.float64)).sum() < 2.0**62:  # far from int64's ends, rounding and all
        totals = np.zeros(len(keys), dtype=np.int64)
        np.add.at(totals, codes, durations_ps)
        totals_us: ArrayLike = totals.astype(np.float64) / PS_PER_US
    else:  # past int64 (a broken writer's durations): Python's integers do not overflow
        sums = [0] * len(keys)
        for code, duration in zip(codes.tolist(), durations_ps.tolist()):
            sums[code] += duration
        totals_us = [total / PS_PER_US for total in sums]
    events.add_device_totals(keys, counts.tolist(), totals_us)


def add_scoped_kernels(
    events: OpEvents,
    keys: list,
    codes: np.ndarray,
    durations_ps: np.ndarray,
    scopes: tuple[np.ndarray, np.ndarray],
    invocations: InvocationIds,
) -> None:
    """Each kernel as a record whose invocation is its op's execution with the kernel's
    scope range id (ids unique across the file's planes), a fresh one where it has none.
    ``scopes``: each kernel's scope as (kind, value): kind 0 where it has none, else the
    kernel's scope is the pair (two kinds keep apart values of the same bits)."""
    kinds, values = scopes
    scoped = kinds != 0
    index = np.arange(len(codes), dtype=np.int64)
    # a kernel without a scope is an execution of its own: its key is its index
    local, firsts = first_appearance_ids(
        [np.where(scoped, codes, -1), np.where(scoped, kinds, 0), np.where(scoped, values, index)]
    )
    durations_us = durations_ps.astype(np.float64) / PS_PER_US
    events.add_device_kernels(keys, codes, durations_us, invocations.take(len(firsts)) + local)


def add_executed_kernels(
    events: OpEvents,
    keys: list,
    codes: np.ndarray,
    starts: np.ndarray,
    durations_ps: np.ndarray,
    executions: dict[tuple[str, str], np.ndarray],
    invocations: InvocationIds,
    ties: KernelTies | None = None,
) -> None:
    """Each kernel as a record whose invocation is the execution of its op it starts in
    (ids unique across the file's planes), or a fresh one where no execution spans it.
    Kernels: each one's op (a code into ``keys``), start and duration (ps, the clock of
    ``executions``: each op's (n, 2) array of start and end, sorted by start). With
    ``ties``, the pieces of one execution that the line cut apart are one execution again
    (``merged_fragments``)."""
    invocation = np.full(len(codes), -1, dtype=np.int64)
    spans = [(code, executions[op]) for code, op in enumerate(keys) if op in executions]
    if spans:
        span_codes = np.concatenate([np.full(len(found), code, dtype=np.int64) for code, found in spans])
        span_bounds = np.concatenate([found for _, found in spans])
        first_id = invocations.take(len(span_codes))
        kernel_spans = _kernel_spans(codes, starts, span_codes, span_bounds)
        del span_bounds
        if ties is not None:
            first_spans = merged_fragments(span_codes, kernel_spans, ties)
            kernel_spans = np.where(kernel_spans >= 0, first_spans[kernel_spans], -1)
        spanned = np.flatnonzero(kernel_spans >= 0)
        invocation[spanned] = first_id + kernel_spans[spanned]
    alone = np.flatnonzero(invocation < 0)
    invocation[alone] = invocations.take(len(alone)) + np.arange(len(alone))
    events.add_device_kernels(keys, codes, durations_ps.astype(np.float64) / PS_PER_US, invocation)


def _kernel_spans(codes: np.ndarray, starts: np.ndarray, span_codes: np.ndarray, span_bounds: np.ndarray) -> np.ndarray:
    """Each kernel's span (an index into the spans), -1 where no span of its op holds its
    start. Every execution of the ops that ran kernels, with its op's code, is sorted with
    the kernels by (op, start): a kernel belongs to the execution last before it in that
    order if that execution is of its op and has not ended when the kernel starts."""
    all_codes = np.concatenate([span_codes, codes])
    is_kernel = np.concatenate([np.zeros(len(span_codes), dtype=bool), np.ones(len(codes), dtype=bool)])
    order = np.lexsort((is_kernel, np.concatenate([span_bounds[:, 0], starts]), all_codes))
    ranks = np.arange(len(order))
    last_span = order[np.maximum.accumulate(np.where(is_kernel[order], -1, ranks)).clip(min=0)]
    kernel_rank = np.flatnonzero(is_kernel[order])
    span, kernel = last_span[kernel_rank], order[kernel_rank] - len(span_codes)
    # a kernel sorted before every execution points at a kernel: is_kernel says so
    inside = ~is_kernel[span] & (all_codes[span] == codes[kernel])
    inside[inside] &= starts[kernel[inside]] < span_bounds[span[inside], 1]
    kernel_spans = np.full(len(codes), -1, dtype=np.int64)
    kernel_spans[kernel[inside]] = span[inside]
    return kernel_spans


@dataclasses.dataclass
class KernelTies:
    """What each kernel says of the execution it belongs to beyond the span it starts in,
    arrays in the kernels' order: ``names``, its own name as a code (kernels of one name
    share it); ``groups``, its step group (TF's ``group_id``), where ``grouped`` says it has
    one; ``launches``, the host execution that launched it (an id of the host op event
    enclosing the launch with the kernel's ``correlation_id``), -1 where not known."""

    names: np.ndarray
    groups: np.ndarray
    grouped: np.ndarray
    launches: np.ndarray


def _shared_values(values: np.ndarray, known: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each run's value (runs of the kernels starting at ``bounds``), and whether all its
    kernels know it and agree."""
    low = np.minimum.reduceat(values, bounds)
    return low, np.logical_and.reduceat(known, bounds) & (low == np.maximum.reduceat(values, bounds))


def merged_fragments(span_codes: np.ndarray, kernel_spans: np.ndarray, ties: KernelTies) -> np.ndarray:
    """Each span's execution, as the index of the execution's first span. Two consecutive
    spans of one op (no other execution of that op between them) are pieces of one
    execution where

    - the host says so: its launches decide wherever they are known for every kernel of
      both, and each piece's kernels were launched from one host execution: the same one
      for both (merged) or two (kept apart);
    - else, every kernel of both lies in one step group (``group_id``), and the later piece
      continues the execution so far: it repeats none of that execution's kernels (a
      second execution of the op starts its kernels over, and stays an execution).

    Elsewhere (kernels without a group, pieces of two steps) each span stays an execution,
    as the line drew it. ``span_codes``: each span's op, the spans of an op consecutive and
    in start order; ``kernel_spans``: each kernel's span, -1 for none. Vectorised but for
    the few pieces whose repeat lies further back than the previous span, where whether it
    falls in the execution so far depends on the pieces before (a loop over those alone)."""
    first_span = np.arange(len(span_codes), dtype=np.int64)
    kernels = np.flatnonzero(kernel_spans >= 0)
    spans = kernel_spans[kernels]
    order = np.argsort(spans, kind="stable")
    kernels, spans = kernels[order], spans[order]
    bounds = np.flatnonzero(np.r_[True, spans[1:] != spans[:-1]]) if len(spans) else spans
    active = spans[bounds]  # the spans holding kernels, in order
    if len(active) < 2:
        return first_span

    group, grouped = _shared_values(ties.groups[kernels], ties.grouped[kernels], bounds)
    launch, launched = _shared_values(ties.launches[kernels], ties.launches[kernels] >= 0, bounds)
    names = ties.names[kernels]
    del kernels, spans
    ops = span_codes[active]
    same_op = ops[1:] == ops[:-1]
    by_launch = same_op & launched[1:] & launched[:-1]
    launch_merged = by_launch & (launch[1:] == launch[:-1])
    by_group = same_op & ~by_launch & grouped[1:] & grouped[:-1] & (group[1:] == group[:-1])
    if not (launch_merged.any() or by_group.any()):
        return first_span
    starts = np.r_[True, ~(launch_merged | by_group)]  # so far the certain starts: each a chain's
    position = np.repeat(np.arange(len(active)), np.diff(np.r_[bounds, len(names)]))  # each kernel's span
    repeats = _latest_repeats(starts, position, names, len(active))
    index = np.arange(len(active))
    decided_by_group = np.r_[False, by_group]
    # repeating a kernel of the span just before starts over whatever came earlier; repeating
    # none continues it; a repeat further back starts over if it lies after the last start
    starts |= decided_by_group & (repeats == index - 1)
    _settle_far_repeats(starts, np.flatnonzero(decided_by_group & (repeats >= 0) & (repeats < index - 1)), repeats)
    executions = np.cumsum(starts) - 1
    first_span[active] = active[starts][executions]
    return first_span


def _latest_repeats(starts: np.ndarray, position: np.ndarray, names: np.ndarray, count: int) -> np.ndarray:
    """For each span (``position``: each kernel's; ``starts``: the spans known to start a
    chain), the latest earlier span of its chain holding a kernel of one of its names, -1
    for none."""
    chain = np.cumsum(starts)[position]
    order = np.lexsort((position, names, chain))
    chain, names, position = chain[order], names[order], position[order]
    del order
    new_run = np.r_[True, (chain[1:] != chain[:-1]) | (names[1:] != names[:-1]) | (position[1:] != position[:-1])]
    before = np.maximum.accumulate(np.where(new_run, np.arange(len(names)), 0)) - 1
    seen = np.flatnonzero(before >= 0)
    seen = seen[(chain[before[seen]] == chain[seen]) & (names[before[seen]] == names[seen])]
    repeats = np.full(count, -1, dtype=np.int64)
    np.maximum.at(repeats, position[seen], position[before[seen]])
    return repeats


def _settle_far_repeats(starts: np.ndarray, open_question: np.ndarray, repeats: np.ndarray) -> None:
    """Mark in ``starts`` the spans of ``open_question`` whose repeat lies further back than
    the span before: each starts over where its repeat falls in the execution so far (after
    its last start), which depends on the spans before it, in order."""
    if not len(open_question):
        return
    last_certain = np.maximum.accumulate(np.where(starts, np.arange(len(starts)), 0))
    latest = -1
    for at, repeat, certain in zip(
        open_question.tolist(), repeats[open_question].tolist(), last_certain[open_question].tolist()
    ):
        if repeat >= max(certain, latest):
            starts[at] = True
            latest = at


def enclosing_ops(op_starts: np.ndarray, op_durations: np.ndarray, launch_starts: np.ndarray) -> np.ndarray:
    """For each launch on a host thread, the index of the innermost of the thread's op
    events that encloses its start, -1 for none (times in one clock). A launch is placed
    as an event that lasts no time: it encloses nothing, and an op event it starts with
    encloses it."""
    count = len(op_starts)
    starts = np.concatenate([np.asarray(op_starts), np.asarray(launch_starts)])
    durations = np.concatenate(
        [np.asarray(op_durations), np.zeros(len(launch_starts), dtype=np.asarray(op_durations).dtype)]
    )
    order = start_order(starts, durations)
    _, parents = self_times(starts[order], durations[order])
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    parent = parents[rank[count:]]
    return np.where(parent >= 0, order[np.maximum(parent, 0)], -1)


class LaunchIndex:
    """The host execution that launched each kernel, by the ``correlation_id`` the launch
    and the kernel share. Built from each launch's correlation id, the host execution it
    was made in and that execution's op (an id from ``op_id``; the first launch where an id
    repeats). A launch places a kernel only where the execution is of the kernel's own op:
    an op event of another (a function call whose inner ops went untraced) says nothing of
    which execution of the kernel's op it was."""

    def __init__(self):
        self._op_ids: dict[tuple[str, str], int] = {}
        self._correlations = np.zeros(0, dtype=np.int64)
        self._executions = np.zeros(0, dtype=np.int64)
        self._ops = np.zeros(0, dtype=np.int64)

    def op_ids(self, ops: list) -> np.ndarray:
        """Each op's id, numbered as first met."""
        return np.fromiter(
            (self._op_ids.setdefault(op, len(self._op_ids)) for op in ops), dtype=np.int64, count=len(ops)
        )

    def set(self, correlations: np.ndarray, executions: np.ndarray, ops: np.ndarray) -> None:
        self._correlations, first = np.unique(np.asarray(correlations, dtype=np.int64), return_index=True)
        self._executions, self._ops = np.asarray(executions, dtype=np.int64)[first], np.asarray(ops)[first]

    def executions(self, correlations: np.ndarray, correlated: np.ndarray, keys: list, codes: np.ndarray) -> np.ndarray:
        """Each kernel's host execution (where ``correlated``), -1 where not known or of
        another op than the kernel's (its op a code into ``keys``)."""
        found = np.full(len(correlations), -1, dtype=np.int64)
        if len(self._correlations):
            kernel_ops = np.fromiter((self._op_ids.get(key, -1) for key in keys), dtype=np.int64, count=len(keys))[
                codes
            ]
            where = np.searchsorted(self._correlations, correlations).clip(max=len(self._correlations) - 1)
            hit = correlated & (self._correlations[where] == correlations) & (self._ops[where] == kernel_ops)
            found[hit] = self._executions[where[hit]]
        return found
