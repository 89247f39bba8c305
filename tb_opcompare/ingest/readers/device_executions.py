"""Device kernels counted per execution of their op, not per kernel, whichever reader
found them: an op that launches seven kernels each time it runs has one execution, and its
mean is per execution. Each kernel becomes a record whose invocation id is its execution;
the readers decide what an execution is from what their format keeps (a ``TensorFlow Ops``
line or thread, an XLA ``scope_range_id``)."""

from __future__ import annotations

import numpy as np

from tb_opcompare.schema.events import OpEvents

PS_PER_US = 1e6  # the xplane's clock, which the execution rule counts in


class InvocationIds:
    """Execution ids unique across a file's device planes (an op may run on several)."""

    def __init__(self):
        self._next = 0

    def take(self, count: int) -> int:
        """The first of ``count`` fresh ids."""
        first, self._next = self._next, self._next + count
        return first


def kernel_columns(kernels: list) -> tuple[list, np.ndarray, np.ndarray]:
    """Kernels given as ``(op, ..., duration in ps)``: their ops in first-seen order, each
    kernel's op code into that list, each kernel's duration (ps)."""
    keys = list(dict.fromkeys(kernel[0] for kernel in kernels))
    code_of = {op: code for code, op in enumerate(keys)}
    codes = np.fromiter((code_of[kernel[0]] for kernel in kernels), dtype=np.int64, count=len(kernels))
    durations = np.fromiter((kernel[-1] for kernel in kernels), dtype=np.float64, count=len(kernels))
    return keys, codes, durations


def add_scoped_kernels(events: OpEvents, kernels: list, invocations: InvocationIds) -> None:
    """Each kernel as a record whose invocation is its op's execution with the kernel's
    scope range id (ids unique across the file's planes), a fresh one where it has none."""
    keys, codes, durations = kernel_columns(kernels)
    dense: dict[tuple[int, int], int] = {}
    local = np.empty(len(kernels), dtype=np.int64)
    for index, ((_, scope, _), code) in enumerate(zip(kernels, codes.tolist())):
        # a kernel without a scope is an execution of its own: its key is its index
        key = (code, scope) if scope is not None else (-1, index)
        local[index] = dense.setdefault(key, len(dense))
    events.add_device_kernels(keys, codes, durations / PS_PER_US, invocations.take(len(dense)) + local)


def add_executed_kernels(
    events: OpEvents, kernels: list, executions: dict[tuple[str, str], np.ndarray], invocations: InvocationIds
) -> None:
    """Each kernel as a record whose invocation is the execution of its op it starts in
    (ids unique across the file's planes), or a fresh one where no execution spans it.
    ``kernels``: ``(op, start, duration in ps)``; ``executions``: each op's (n, 2) array of
    start and end (ps, the kernels' clock), sorted by start."""
    keys, codes, durations = kernel_columns(kernels)
    starts = np.fromiter((start for _, start, _ in kernels), dtype=np.int64, count=len(kernels))
    invocation = np.full(len(kernels), -1, dtype=np.int64)
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
