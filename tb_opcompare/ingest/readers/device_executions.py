"""Device kernels counted per execution of their op, not per kernel, whichever reader
found them: an op that launches seven kernels each time it runs has one execution, and its
mean is per execution. Each kernel becomes a record whose invocation id is its execution;
the readers decide what an execution is from what their format keeps (a ``TensorFlow Ops``
line or thread, an XLA ``scope_range_id``)."""

from __future__ import annotations

import numpy as np

from tb_opcompare.schema.events import OpEvents
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
        totals_us = totals.astype(np.float64) / PS_PER_US
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
) -> None:
    """Each kernel as a record whose invocation is the execution of its op it starts in
    (ids unique across the file's planes), or a fresh one where no execution spans it.
    Kernels: each one's op (a code into ``keys``), start and duration (ps, the clock of
    ``executions``: each op's (n, 2) array of start and end, sorted by start)."""
    durations = durations_ps.astype(np.float64)
    invocation = np.full(len(codes), -1, dtype=np.int64)
    spans = [(code, executions[op]) for code, op in enumerate(keys) if op in executions]
    if spans:
        # every execution of the ops that ran kernels, with its op's code, sorted with the
        # kernels by (op, start): a kernel belongs to the execution last before it in that
        # order if that execution is of its op and has not ended when the kernel starts
        span_codes = np.concatenate([np.full(len(found), code, dtype=np.int64) for code, found in spans])
        span_bounds = np.concatenate([found for _, found in spans])
        first_id = invocations.take(len(span_codes))
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
        invocation[kernel[inside]] = first_id + span[inside]
    alone = np.flatnonzero(invocation < 0)
    invocation[alone] = invocations.take(len(alone)) + np.arange(len(alone))
    events.add_device_kernels(keys, codes, durations / PS_PER_US, invocation)
