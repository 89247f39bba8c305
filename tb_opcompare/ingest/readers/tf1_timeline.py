"""Reader for TF1 ``timeline.Timeline(step_stats).generate_chrome_trace_format()``.

Ops run on processes named ``<device> Compute``, with the node name in
``args.name`` and the op type in ``args.op``. On a GPU, the executor's view of an
op is on ``/job:.../gpu:0 Compute`` (host side: launch), and its kernels appear
once on ``/gpu:0/stream:all Compute`` and again on each ``/gpu:0/stream:N
Compute``; copies are on ``/gpu:0/memcpy Compute``. Device time is read from
``stream:all`` plus ``memcpy`` so no kernel is counted twice; per-stream
processes are used only where a trace has no ``stream:all``.

A timeline written with ``show_memory=True`` also holds memory: a ``Memory`` counter per
allocator (bytes in use after each allocation and free) and a ``Tensor`` snapshot of every
tensor an op produced (``requested_bytes``, dtype, shape). They give the run's memory
over time and peak per allocator, each op's allocated bytes (its output tensors), the
batch size (leading dimension of the tensors' shapes) and the precision (their dtypes).
"""

from __future__ import annotations

import collections
import re
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import numpy as np

from tb_opcompare.errors import ProfileError
from tb_opcompare.ingest.readers.chrome_json import BaseEvent, ChromeTrace, TraceText, process_names
from tb_opcompare.ingest.readers.memory_timeline import highest_per_device, memory_timeline
from tb_opcompare.ingest.readers.step_breakdown import (
    DEVICE_CODES,
    HOST_CODES,
    device_rows,
    joined,
    layered_host_rows,
    union,
)
from tb_opcompare.ingest.readers.tf_ops import allocation_batch_vote, tf_step_category
from tb_opcompare.schema.dimensions import TF_GRAPH
from tb_opcompare.schema.events import (
    DEVICE,
    HOST,
    OpEvents,
    ParsedProfile,
    ProfileFacts,
    add_nested_host_ops,
    crossing_warning,
    precision_from_dtypes,
)

FORMAT = "tf1_timeline"
_STREAM_ALL = re.compile(r"/(?:gpu|GPU|device:GPU):\d+/stream:all Compute$")
_STREAM_N = re.compile(r"/(?:gpu|GPU|device:GPU):\d+/stream:\d+ Compute$")
_MEMCPY = re.compile(r"/(?:gpu|GPU|device:GPU):\d+/memcpy Compute$")
# at most 18 digits: a number past int64 is no real tensor's, and a hostile file's can be long
_REQUESTED_BYTES = re.compile(r"requested_bytes: (\d{1,18})\b")
_DTYPE = re.compile(r"dtype: (DT_\w+)")
_DIM = re.compile(r"size: (-?\d{1,18})\b")
_PRECISIONS = {"DT_FLOAT": "fp32", "DT_DOUBLE": "fp64", "DT_HALF": "fp16", "DT_BFLOAT16": "bf16"}
_OUTPUT_INDEX = re.compile(r":\d+\Z")  # a tensor is named after its op, ``op:N`` for outputs past the first


class _MemoryEvent(BaseEvent, gc=False):
    """A ``Memory`` counter (``args``: {allocator: bytes in use}) or a ``Tensor`` snapshot
    (``args``: {"snapshot": {"tensor_description": protobuf text}})."""

    args: dict[str, Any] | None = None


def is_tf1_timeline(trace: ChromeTrace) -> bool:
    return any(name.endswith(" Compute") for name in process_names(trace).values())


def read_tf1_timeline(path: str, trace: ChromeTrace, text: TraceText) -> ParsedProfile:
    names = process_names(trace)
    has_stream_all = any(_STREAM_ALL.search(n) for n in names.values())
    roles: dict[int | str, str] = {}
    for pid, name in names.items():
        if _STREAM_ALL.search(name) or _MEMCPY.search(name):
            roles[pid] = DEVICE
        elif _STREAM_N.search(name):
            if not has_stream_all:
                roles[pid] = DEVICE
        elif name.endswith(" Compute"):
            roles[pid] = HOST
    host_threads: dict[tuple, list] = defaultdict(list)
    spans = _Spans()
    events = OpEvents()
    memory_indices = []
    first_start, last_end = float("inf"), float("-inf")
    for index, event in enumerate(trace.traceEvents):
        if (event.ph, event.cat) in (("C", "Memory"), ("O", "Tensor")):
            memory_indices.append(index)
        if event.ph != "X" or event.pid not in roles or not event.args or not event.args.name:
            continue
        duration = event.dur or 0.0
        first_start, last_end = min(first_start, event.ts), max(last_end, event.ts + duration)
        op_type = event.args.op or event.name
        if roles[event.pid] == DEVICE:
            events.add(DEVICE, event.args.name, op_type, duration, duration)
            copy = _MEMCPY.search(names[event.pid]) or op_type.startswith("MEMCPY")
            spans.add_device(event.ts, duration, "device_copy" if copy else "device_compute")
        else:
            host_threads[(event.pid, event.tid)].append((event.ts, duration, (event.args.name, op_type)))
            spans.add_host(event.ts, duration, _host_category(event.args.name, op_type, names[event.pid]))
    add_nested_host_ops(events, host_threads.values())
    if not len(events):
        raise ProfileError(path, "a TF1 timeline with no op events on any '<device> Compute' process")
    facts = ProfileFacts(
        format=FORMAT,
        framework="TensorFlow 1.x",
        device="GPU" if DEVICE in events.side else "CPU",
        steps=1,
        steps_source="one session.run per timeline file",
        # The file is one session.run: its wall time is the span from the first op's
        # start to the last op's (or kernel's) end, what a stopwatch around the run reads.
        step_times_us=[last_end - first_start] if last_end > first_start else [],
        # a TF1 session always runs a graph
        compiler=TF_GRAPH,
        compiler_source="data: a TF1 session.run timeline (graph execution)",
    )
    facts.step_time_us = facts.step_times_us[0] if facts.step_times_us else None
    if facts.step_times_us:
        events.breakdown = spans.breakdown(first_start, last_end)
        facts.step_breakdown_note = _BREAKDOWN_NOTE
    if events.crossings:
        facts.warnings.append(crossing_warning(events.crossings))
    if memory_indices:
        host_ops = {key[0]: key for thread in host_threads.values() for _, _, key in thread}
        _read_memory(text.events(memory_indices, _MemoryEvent), host_ops, events, facts)
    return ParsedProfile(facts, events)


_BREAKDOWN_NOTE = (
    "a TF1 timeline holds ops only, on a pool of threads: each moment counts once, under the first of "
    "input, copies, launches (a GPU op's host side), optimizer, backward, forward that any thread ran; "
    "Python and the feed_dict's own copies are untracked"
)


def _host_category(name: str, op_type: str, process: str) -> str:
    """An op's category on the host: a GPU op's host-side event (on ``/gpu:N Compute``) is
    its launch, unless it is a copy or the input's dequeue."""
    category = tf_step_category(name, op_type)
    if category in ("input", "copy") or "/cpu:" in process.lower() or "/device:cpu:" in process.lower():
        return category
    return "launch"


class _Spans:
    """The timeline's op events as intervals with their step categories, for the split of
    its one step (``step_breakdown``)."""

    def __init__(self):
        self.host: list[tuple[float, float, int]] = []
        self.device: list[tuple[float, float, int]] = []

    def add_host(self, start: float, duration: float, category: str) -> None:
        self.host.append((start, start + duration, HOST_CODES[category]))

    def add_device(self, start: float, duration: float, kind: str) -> None:
        self.device.append((start, start + duration, DEVICE_CODES[kind]))

    def breakdown(self, first: float, last: float) -> dict[str, list]:
        bounds = np.array([[first, last]], dtype=float)
        host = np.asarray(self.host, dtype=float).reshape(-1, 3)
        device = np.asarray(self.device, dtype=float).reshape(-1, 3)
        busy = union(device[:, 0], device[:, 1]) if len(device) else None
        rows = layered_host_rows(bounds, host[:, 0], host[:, 1], host[:, 2].astype(np.int64), busy)
        if not len(device):
            return rows
        return joined(rows, device_rows(bounds, device[:, 0], device[:, 1], device[:, 2].astype(np.int64)))


def _read_memory(
    memory_events: Iterable[_MemoryEvent], host_ops: dict[str, tuple[str, str]], events: OpEvents, facts: ProfileFacts
) -> None:
    """``host_ops``: the op key of each node name that ran on the host."""
    allocators: dict[str, int] = {}
    codes, times_us, in_use = [], [], []
    op_bytes: collections.Counter[str] = collections.Counter()
    shapes: dict[str, set[str]] = {}
    dtypes: collections.Counter[str] = collections.Counter()
    for event in memory_events:
        if event.ph == "C":
            value = (event.args or {}).get(event.name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 1 << 62:
                codes.append(allocators.setdefault(event.name, len(allocators)))
                times_us.append(event.ts)
                in_use.append(float(value))
            continue
        snapshot = (event.args or {}).get("snapshot")
        description = snapshot.get("tensor_description") if isinstance(snapshot, dict) else None
        if not isinstance(description, str):
            continue
        op_name = _OUTPUT_INDEX.sub("", event.name)
        requested = _REQUESTED_BYTES.search(description)
        if requested:
            op_bytes[op_name] += int(requested.group(1))
        dims = _DIM.findall(description)
        if len(dims) >= 2:
            shapes.setdefault(f"[{','.join(dims)}]", set()).add(op_name)
        dtype = _DTYPE.search(description)
        if dtype and dtype.group(1) in _PRECISIONS:
            dtypes[_PRECISIONS[dtype.group(1)]] += 1
    if allocators:
        names = list(allocators)
        peaks = highest_per_device(codes, in_use, len(names))
        facts.peak_memory_bytes.update({name: int(peak) for name, peak in zip(names, peaks) if peak > 0})
        facts.memory_events = len(codes)
        events.memory_timeline = memory_timeline(names, np.asarray(codes), np.asarray(times_us), np.asarray(in_use))
    known = [(host_ops[name], size) for name, size in op_bytes.items() if name in host_ops]
    if known:
        keys = [key for key, _ in known]
        events.add_memory(
            keys, np.arange(len(keys)), np.asarray([size for _, size in known], dtype=np.float64), net_known=False
        )
    precision = precision_from_dtypes(dtypes, "dtypes of {total} tensors the ops produced")
    if precision:
        facts.precision, facts.precision_source = precision
    vote = allocation_batch_vote(shapes)
    if vote:
        size, agreeing, voting = vote
        facts.batch_size, facts.batch_size_agreement = size, agreeing / voting
        facts.batch_size_source = f"data: leading dimension of {agreeing} of {voting} tensor shapes in the timeline"
