"""Each op's work (``schema.events.WORK_COLUMNS``) from a trace's nested host events: the
rule of which calls count (the outermost call whose work could be told, so an
``aten::conv2d`` is counted and not the ``aten::convolution`` it calls) and the sums per
op, with the device time of the kernels each counted call launched. Readers decode the
calls' inputs; the formulas are ``analysis.work``'s.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

import numpy as np

from tb_opcompare.analysis.work import PROFILE, SHAPES

# cuDNN's and cuBLAS's kernels that compute fp32 tensors on TF32 tensor cores say so in their
# names (``sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_…``, ``cutlass_tensorop_s1688dgrad_
# optimized_tf32_…``). PyTorch lets cuDNN do so by default (``torch.backends.cudnn.allow_tf32``),
# so most fp32 convolutions on an A100 or H100 run there, whose peak is 7 to 8 times the fp32 one.
_TF32_KERNEL = re.compile(r"tf32", re.IGNORECASE)


def tf32_kernels(names: Sequence[str]) -> np.ndarray:
    """For each kernel name, whether the kernel computes on TF32 tensor cores."""
    return np.fromiter((bool(_TF32_KERNEL.search(name)) for name in names), dtype=bool, count=len(names))


@dataclasses.dataclass
class CallWork:
    """The work of some host events (positions), as a reader found it: NaN where unknown,
    and then why."""

    positions: np.ndarray
    flops: np.ndarray
    bytes: np.ndarray
    from_profile: np.ndarray  # bool: the profiler's own figure, not a formula's
    why_unknown: list[str]  # per position: "" where known


@dataclasses.dataclass
class HostTree:
    """The host events a trace nests: each one's op (an index into ``keys``), its enclosing
    event (-1: none) and its inclusive wall time."""

    keys: list[tuple[str, str]]
    codes: np.ndarray
    parents: np.ndarray
    durations: np.ndarray


def outermost(tree: HostTree, marked: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """For each of ``positions``, the outermost marked event among it and the events around
    it (-1: none). One step up the nesting a round, for every position at once: a trace
    nests some tens deep, so that is some tens of numpy passes, not a loop per event."""
    positions = np.asarray(positions, dtype=np.int64)
    best = np.where(marked[positions], positions, -1)
    up = tree.parents[positions]
    active = np.flatnonzero(up >= 0)
    while len(active):
        above = up[active]
        hit = marked[above]
        best[active[hit]] = above[hit]
        up[active] = tree.parents[above]
        active = active[up[active] >= 0]
    return best


def work_rows(tree: HostTree, calls: CallWork, kernels: tuple[np.ndarray, np.ndarray, np.ndarray] | None) -> dict:
    """``WORK_COLUMNS`` per op, over the calls no other call of ``calls`` encloses.
    ``kernels``: each kernel's launching host event (-1: none), duration and whether it ran
    on TF32 tensor cores (``tf32_kernels``), or None where the run has no device."""
    marked = np.zeros(len(tree.codes), dtype=bool)
    marked[calls.positions] = True
    counted = outermost(tree, marked, calls.positions) == calls.positions
    kept = np.flatnonzero(counted).tolist()
    positions = calls.positions[counted]
    known = np.isfinite(calls.flops[counted])
    codes, ops = np.unique(tree.codes[positions], return_inverse=True)
    ops = ops.reshape(-1)
    count = len(codes)

    def summed(values: np.ndarray, where: np.ndarray) -> np.ndarray:
        return np.bincount(ops[where], weights=values[where], minlength=count)

    known_calls = np.bincount(ops[known], minlength=count)
    unknown = known_calls == 0
    rows = {
        "op_name": [tree.keys[code][0] for code in codes.tolist()],
        "op_type": [tree.keys[code][1] for code in codes.tolist()],
        "calls": np.bincount(ops, minlength=count),
        "known_calls": known_calls,
        "flops": np.where(unknown, np.nan, summed(calls.flops[counted], known)),
        "bytes": np.where(unknown, np.nan, summed(calls.bytes[counted], known)),
        "source": _sources(ops, known, calls.from_profile[counted], [calls.why_unknown[i] for i in kept], count),
        "host_us": np.where(unknown, np.nan, summed(tree.durations[positions], known)),
    }
    # On a device, only the calls that launched kernels: a call that launched none ran on
    # the host (a DataLoader's normalisation, a CPU tensor's op on a GPU run).
    launched, on_tf32 = np.zeros(len(positions)), np.zeros(len(positions))
    if kernels is not None:
        launched[known], on_tf32[known] = _launched_time(tree, positions[known], kernels)
    on_device = known & (launched > 0)
    device_calls = np.bincount(ops[on_device], minlength=count)
    none = np.nan if kernels is None else 0.0
    rows["device_calls"] = device_calls
    for column, values in (("device_flops", calls.flops), ("device_bytes", calls.bytes)):
        rows[column] = np.where(device_calls > 0, summed(values[counted], on_device), none)
    rows["device_us"] = np.where(device_calls > 0, summed(launched, on_device), none)
    rows["device_tf32_us"] = np.where(device_calls > 0, summed(on_tf32, on_device), none)
    return rows


def _launched_time(
    tree: HostTree, positions: np.ndarray, kernels: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Each call's kernel time (the kernels launched inside it, nested calls included), and
    the part of it in kernels on TF32 tensor cores."""
    launchers, durations, tf32 = kernels
    marked = np.zeros(len(tree.codes), dtype=bool)
    marked[positions] = True
    linked = np.flatnonzero(launchers >= 0)
    owner = outermost(tree, marked, launchers[linked])
    call_of = np.full(len(tree.codes), -1, dtype=np.int64)
    call_of[positions] = np.arange(len(positions))
    owned = owner >= 0
    calls, times = call_of[owner[owned]], durations[linked][owned]
    on_tf32 = np.where(tf32[linked][owned], times, 0.0)
    return (
        np.bincount(calls, weights=times, minlength=len(positions)),
        np.bincount(calls, weights=on_tf32, minlength=len(positions)),
    )


def _sources(ops: np.ndarray, known: np.ndarray, from_profile: np.ndarray, why: list[str], count: int) -> list[str]:
    """Each op's source: ``profile`` where any known call's figure is the profiler's,
    ``shapes`` where known by formula, else ``unknown: `` and the first call's reason."""
    sources = [""] * count
    for op, is_known, profiled, reason in zip(ops.tolist(), known.tolist(), from_profile.tolist(), why):
        if is_known:
            if sources[op] != PROFILE:
                sources[op] = PROFILE if profiled else SHAPES
        elif not sources[op]:
            sources[op] = f"unknown: {reason}"
    return sources
