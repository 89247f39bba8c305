"""Reader for PyTorch profiler traces (``export_chrome_trace``, ``tensorboard_trace_handler``).

Host ops are ``cpu_op`` (``Operator`` in PyTorch <= 1.9) events; runtime calls
(``cuda_runtime``, ``cuda_driver``, ``Runtime``) and ``record_function`` ranges
(``user_annotation``) are host rows too, as in ``key_averages()``. Self time subtracts
the ops and runtime calls nested inside an event on the same thread. A kernel
(``kernel``/``Kernel``, memcpy, memset) belongs to the innermost op enclosing the
runtime call whose ``correlation`` id it carries. Steps are the distinct
``ProfilerStep#N`` annotations.

Traces run to gigabytes, so big ones are decoded a batch of events at a time
(``TraceText``), and each event is kept only as a few numbers in flat arrays (codes of
its name, category and thread, start, duration, index in the file; correlation ids
only for the runtime calls that have one).
Input shapes are decoded afterwards, for the first top-level ops only (batch size).
"""

from __future__ import annotations

import dataclasses
import json

import msgspec
import numpy as np

from ..errors import ProfileError
from ..optable import OpEvents, OpProfile, ProfileFacts, build_op_table, self_times
from .chrome_json import BaseEvent, TraceText

FORMAT = "pytorch"
_OP_CATEGORIES = {"cpu_op", "Operator"}
_ANNOTATION_CATEGORIES = {"user_annotation"}  # record_function ranges, as key_averages() lists them
_RUNTIME_CATEGORIES = {"cuda_runtime", "cuda_driver", "Runtime", "Driver"}
_DEVICE_CATEGORIES = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"}
_HOST_CATEGORIES = _OP_CATEGORIES | _ANNOTATION_CATEGORIES | _RUNTIME_CATEGORIES
_STEP_PREFIX = "ProfilerStep#"
_NO_CORRELATION = -1


class _Args(msgspec.Struct, gc=False):
    correlation: int | None = None  # links a runtime launch to its kernels


class _Event(BaseEvent, gc=False):
    args: _Args | None = None


class _InputArgs(msgspec.Struct, gc=False):
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input Dims")


class _WithInputs(msgspec.Struct, gc=False):
    args: _InputArgs | None = None


def is_torch_trace(trace: TraceText) -> bool:
    categories = _OP_CATEGORIES | _DEVICE_CATEGORIES
    return any(event.cat in categories for _, batch in trace.batches(BaseEvent) for event in batch)


class _Columns:
    """Flat numeric columns, grown a batch at a time and read back as numpy arrays."""

    def __init__(self, **dtypes: str):
        self._dtypes = dtypes
        self._parts: dict[str, list[np.ndarray]] = {name: [] for name in dtypes}
        self._joined: dict[str, np.ndarray] = {}
        self.rows = 0

    def add(self, **values: list) -> None:
        """One batch: a list of equal length for every column."""
        for name, column in values.items():
            self._parts[name].append(np.fromiter(column, self._dtypes[name], len(column)))
        self.rows += len(column)

    def numpy(self, name: str) -> np.ndarray:
        if name not in self._joined:
            parts = self._parts.pop(name)
            self._joined[name] = np.concatenate(parts) if parts else np.zeros(0, self._dtypes[name])
        return self._joined[name]


class _Codes(dict):
    """Small integer codes for repeated values, assigned in order of first sight."""

    def encode(self, values: list) -> list[int]:
        codes = list(map(self.get, values))  # C speed: every value but the new ones is known
        if None in codes:
            for index in [i for i, code in enumerate(codes) if code is None]:
                codes[index] = self.setdefault(values[index], len(self))
        return codes


def _complete(batch: list, categories: set[str]) -> list[int]:
    return [i for i, event in enumerate(batch) if event.cat in categories and event.ph == "X"]


@dataclasses.dataclass
class _TraceColumns:
    host: _Columns  # cpu ops, runtime calls, annotations
    launches: _Columns  # the host events that carry a correlation id
    device: _Columns  # kernels, memcpys, memsets
    names: list[str]  # decoding the name codes of host and device
    categories: list[str]


def _read_columns(trace: TraceText) -> _TraceColumns:
    """The events the reader needs, as flat columns.

    Events are sorted into columns a batch at a time with comprehensions (C-speed
    loops): a per-event Python loop costs twice as much on million-event traces.
    Strings are coded one field at a time (pairs are formed later, in numpy): hashing
    a fresh tuple of fresh strings per event costs more than the rest of the loop.
    """
    host = _Columns(name="q", cat="q", pid="q", tid="q", ts="d", dur="d", index="q")
    launches = _Columns(position="q", correlation="q")
    device = _Columns(name="q", cat="q", dur="d", correlation="q")
    names, categories, pids, tids = _Codes(), _Codes(), _Codes(), _Codes()
    for start, batch in trace.batches(_Event):
        indices = _complete(batch, _HOST_CATEGORIES)
        events = [batch[i] for i in indices]
        linked = [i for i, e in enumerate(events)
                  if e.args is not None and e.args.correlation is not None and e.cat not in _OP_CATEGORIES]
        launches.add(position=[host.rows + i for i in linked],
                     correlation=[events[i].args.correlation for i in linked])
        host.add(index=[start + i for i in indices],
                 ts=[e.ts for e in events],
                 dur=[e.dur for e in events],
                 name=names.encode([e.name for e in events]),
                 cat=categories.encode([e.cat for e in events]),
                 pid=pids.encode([e.pid for e in events]),
                 tid=tids.encode([e.tid for e in events]))
        events = [batch[i] for i in _complete(batch, _DEVICE_CATEGORIES)]
        device.add(dur=[e.dur for e in events],
                   name=names.encode([e.name for e in events]),
                   cat=categories.encode([e.cat for e in events]),
                   correlation=_correlations(events))
        del batch, events
    return _TraceColumns(host, launches, device, list(names), list(categories))


def read_torch_trace(path: str, trace: TraceText) -> OpProfile:
    columns = _read_columns(trace)
    host, launches, device, names, categories = (columns.host, columns.launches, columns.device, columns.names,
                                                 columns.categories)
    if not host.rows and not device.rows:
        raise ProfileError(path, "a PyTorch trace with no cpu_op, runtime or kernel events")
    kind_codes, kind_pairs = _pair_codes(host.numpy("name"), host.numpy("cat"))
    kinds = [(names[n], categories[c]) for n, c in kind_pairs]
    thread_codes, _ = _pair_codes(host.numpy("pid"), host.numpy("tid"))
    device_codes, device_pairs = _pair_codes(device.numpy("name"), device.numpy("cat"))
    device_kinds = [(names[n], categories[c]) for n, c in device_pairs]

    # ProfilerStep#N ranges give the steps and are not rows.
    is_step_kind = np.array([name.startswith(_STEP_PREFIX) for name, _ in kinds], dtype=bool)
    is_step = is_step_kind[kind_codes] if len(kinds) else np.zeros(0, dtype=bool)
    steps: dict[str, float] = {}
    for code, duration in zip(kind_codes[is_step].tolist(), host.numpy("dur")[is_step].tolist()):
        steps[kinds[code][0]] = max(steps.get(kinds[code][0], 0.0), duration)
    row_keys = _Codes()  # (op name, row type): an op's type is its name, a runtime call's its category
    row_of_kind = np.asarray(row_keys.encode([(name, name if cat in _OP_CATEGORIES else cat) for name, cat in kinds]),
                             dtype=np.int64)
    keys = list(row_keys)
    is_op = np.array([row_type == name for name, row_type in keys], dtype=bool)

    kept = np.flatnonzero(~is_step)
    ts, durations, threads_of = host.numpy("ts")[kept], host.numpy("dur")[kept], thread_codes[kept]
    order = kept[np.lexsort((-durations, ts, threads_of))]
    codes = row_of_kind[kind_codes[order]] if len(order) else np.zeros(0, dtype=np.int64)
    durations = host.numpy("dur")[order]
    events = OpEvents()
    parents = _parents_within_threads(thread_codes[order], host.numpy("ts")[order], durations, events,
                                      keys, codes)
    facts = ProfileFacts(format=FORMAT, framework="PyTorch")
    if device.rows:
        _add_kernels(events, facts, device, device_codes, device_kinds, keys, codes, is_op[codes], parents,
                     _scatter(host.rows, launches)[order])
        facts.device = "GPU"
        facts.device_name = ", ".join(sorted(set(trace.device_names))) or None
    if steps:
        facts.steps, facts.steps_source = len(steps), "ProfilerStep#N annotations"
        facts.step_time_us = sum(steps.values()) / len(steps)
    top_level_ops = np.flatnonzero(is_op[codes] & (parents == -1))
    first_ops = top_level_ops[np.argsort(host.numpy("ts")[order][top_level_ops], kind="stable")]
    for position in first_ops.tolist():
        batch_size = _batch_from_input_dims(trace.event(int(host.numpy("index")[order[position]]), _WithInputs))
        if batch_size:
            facts.batch_size = batch_size
            facts.batch_size_source = f"data: leading dim of the first input of {keys[codes[position]][0]} (Input Dims)"
            break
    return OpProfile(facts=facts, ops=build_op_table(events))


def _pair_codes(first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """A code per (first, second) pair of small codes, and the pairs in code order."""
    combined = (first << 32) | second
    unique, inverse = np.unique(combined, return_inverse=True)
    return inverse.reshape(-1), list(zip((unique >> 32).tolist(), (unique & 0xFFFFFFFF).tolist()))


def _scatter(count: int, launches: _Columns) -> np.ndarray:
    """Each host event's correlation id (``_NO_CORRELATION`` where it has none)."""
    correlations = np.full(count, _NO_CORRELATION, dtype=np.int64)
    correlations[launches.numpy("position")] = launches.numpy("correlation")
    return correlations


def _correlations(events: list) -> list[int]:
    values = [e.args.correlation if e.args is not None else None for e in events]
    if None in values:
        values = [_NO_CORRELATION if value is None else value for value in values]
    return values


def _parents_within_threads(threads: np.ndarray, starts: np.ndarray, durations: np.ndarray, events: OpEvents,
                            keys: list, codes: np.ndarray) -> np.ndarray:
    """Add the host rows (self time by nesting on each thread); return each event's
    enclosing event as a position in these sorted arrays (-1: top level)."""
    parents = np.full(len(codes), -1, dtype=np.int64)
    selfs = np.empty(len(codes), dtype=np.float64)
    bounds = [0, *(np.flatnonzero(np.diff(threads)) + 1).tolist(), len(codes)]
    for begin, end in zip(bounds, bounds[1:]):
        selfs[begin:end], local = self_times(starts[begin:end], durations[begin:end])
        parents[begin:end] = np.where(local >= 0, local + begin, -1)
    events.add_host_codes(keys, codes, durations, selfs)
    return parents


def _add_kernels(events: OpEvents, facts: ProfileFacts, device: _Columns, kernel_codes: np.ndarray,
                 kernel_keys: list, host_keys: list,
                 host_codes: np.ndarray, host_is_op: np.ndarray, parents: np.ndarray,
                 host_correlations: np.ndarray) -> None:
    """Kernels under the op that launched them; kernels whose launch is not in the
    trace under their own name."""
    launch_correlation, launcher = [], []
    for position in np.flatnonzero((host_correlations != _NO_CORRELATION) & ~host_is_op).tolist():
        parent = parents[position]
        while parent != -1 and not host_is_op[parent]:
            parent = parents[parent]
        if parent != -1:
            launch_correlation.append(int(host_correlations[position]))
            launcher.append(int(parent))
    correlations = device.numpy("correlation")
    durations = device.numpy("dur")
    invocation = np.full(len(correlations), -1, dtype=np.int64)
    if launch_correlation:
        known = np.asarray(launch_correlation, dtype=np.int64)
        sort = np.argsort(known, kind="stable")
        known, launchers = known[sort], np.asarray(launcher, dtype=np.int64)[sort]
        where = np.searchsorted(known, correlations).clip(max=len(known) - 1)
        found = (known[where] == correlations) & (correlations != _NO_CORRELATION)
        invocation[found] = launchers[where[found]]
    linked = invocation >= 0
    # A linked kernel's row is its launching op's host row key; an orphan gets its own.
    orphan_keys = [(name, f"({cat} without a launching op)") for name, cat in kernel_keys]
    codes = np.where(linked, host_codes[invocation.clip(min=0)], len(host_keys) + kernel_codes)
    events.add_device_kernels(host_keys + orphan_keys, codes, durations, invocation)
    orphans = int((~linked).sum())
    if orphans:
        # Usual for kernels launched just before the profiling window opened.
        facts.warnings.append(f"{orphans} device events ({durations[~linked].sum():,.0f} µs) have no launching op "
                              "in the trace (their correlation id matches no launch); they are listed under their "
                              "own names, typed '(… without a launching op)'")


def _batch_from_input_dims(event: _WithInputs) -> int | None:
    """Leading dim of the first input when that input has rank >= 2 (a batch of samples)."""
    if event.args is None or not len(event.args.input_dims):
        return None
    try:
        first = json.loads(bytes(event.args.input_dims))[0]
    except (ValueError, IndexError, TypeError):
        return None
    if isinstance(first, list) and len(first) >= 2 and isinstance(first[0], int) and first[0] > 0:
        return first[0]
    return None
