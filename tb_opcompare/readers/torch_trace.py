"""Reader for PyTorch profiler traces (``export_chrome_trace``, ``tensorboard_trace_handler``).

Host ops are ``cpu_op`` (``Operator`` in PyTorch <= 1.9) events; runtime calls
(``cuda_runtime``, ``cuda_driver``, ``Runtime``) and ``record_function`` ranges
(``user_annotation``) are host rows too, as in ``key_averages()``. Self time subtracts the ops and runtime calls nested inside an
event on the same thread. A kernel (``kernel``/``Kernel``, memcpy, memset) belongs to
the innermost op enclosing the runtime call whose ``correlation`` id it carries.
Steps are the distinct ``ProfilerStep#N`` annotations.
"""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np

from ..errors import ProfileError
from ..optable import DEVICE, OpEvents, OpProfile, ProfileFacts, build_op_table, self_times
from .chrome_json import ChromeTrace

FORMAT = "pytorch"
_OP_CATEGORIES = {"cpu_op", "Operator"}
_ANNOTATION_CATEGORIES = {"user_annotation"}  # record_function ranges, as key_averages() lists them
_RUNTIME_CATEGORIES = {"cuda_runtime", "cuda_driver", "Runtime", "Driver"}
_DEVICE_CATEGORIES = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"}
_STEP_PREFIX = "ProfilerStep#"


def is_torch_trace(trace: ChromeTrace) -> bool:
    categories = _OP_CATEGORIES | _DEVICE_CATEGORIES
    return any(event.cat in categories for event in trace.traceEvents)


def read_torch_trace(path: str, trace: ChromeTrace) -> OpProfile:
    threads: dict[tuple, list] = defaultdict(list)
    device_events = []
    steps: dict[str, float] = {}  # ProfilerStep#N -> duration (us)
    for event in trace.traceEvents:
        if event.ph != "X":
            continue
        if event.name.startswith(_STEP_PREFIX):
            steps[event.name] = max(steps.get(event.name, 0.0), event.dur or 0.0)
            continue
        if event.cat in _OP_CATEGORIES or event.cat in _RUNTIME_CATEGORIES or event.cat in _ANNOTATION_CATEGORIES:
            threads[(event.pid, event.tid)].append(event)
        elif event.cat in _DEVICE_CATEGORIES:
            device_events.append(event)
    events = OpEvents()
    launcher_of_correlation: dict[int, tuple[int, str]] = {}
    top_level_ops = []
    serial = 0
    for thread_events in threads.values():
        thread_events.sort(key=lambda e: (e.ts, -(e.dur or 0.0)))
        durations = [e.dur or 0.0 for e in thread_events]
        self_values, parents = self_times([e.ts for e in thread_events], durations)
        keys = []
        for index, event in enumerate(thread_events):
            is_op = event.cat in _OP_CATEGORIES
            keys.append((event.name, event.name if is_op else event.cat))
            if is_op and parents[index] == -1 and event.args and len(event.args.input_dims):
                top_level_ops.append(event)
            if not is_op and event.args and event.args.correlation is not None:
                parent = parents[index]
                while parent != -1 and thread_events[parent].cat not in _OP_CATEGORIES:
                    parent = parents[parent]
                if parent != -1:
                    launcher_of_correlation[event.args.correlation] = (serial + parent, thread_events[parent].name)
        events.add_host_batch(keys, np.asarray(durations, dtype=np.float64), np.asarray(self_values, dtype=np.float64))
        serial += len(thread_events)
    orphans, orphan_us = 0, 0.0
    for event in device_events:
        duration = event.dur or 0.0
        correlation = event.args.correlation if event.args else None
        launcher = launcher_of_correlation.get(correlation) if correlation is not None else None
        if launcher is None:
            orphans, orphan_us = orphans + 1, orphan_us + duration
            events.add(DEVICE, event.name, f"({event.cat} without a launching op)", duration, duration)
        else:
            events.add(DEVICE, launcher[1], launcher[1], duration, duration, invocation=launcher[0])
    if not len(events):
        raise ProfileError(path, "a PyTorch trace with no cpu_op, runtime or kernel events")
    facts = ProfileFacts(format=FORMAT, framework="PyTorch")
    if orphans:
        # Usual for kernels launched just before the profiling window opened.
        facts.warnings.append(f"{orphans} device events ({orphan_us:,.0f} µs) have no launching op in the trace "
                              "(their correlation id matches no launch); they are listed under their own names, "
                              "typed '(… without a launching op)'")
    if device_events:
        facts.device = "GPU"
        names = sorted({p.name for p in trace.deviceProperties or [] if p.name})
        facts.device_name = ", ".join(names) or None
    if steps:
        facts.steps, facts.steps_source = len(steps), "ProfilerStep#N annotations"
        facts.step_time_us = sum(steps.values()) / len(steps)
    for op in sorted(top_level_ops, key=lambda e: e.ts):
        batch = _batch_from_input_dims(op.args.input_dims)
        if batch:
            facts.batch_size = batch
            facts.batch_size_source = f"data: leading dim of the first input of {op.name} (Input Dims)"
            break
    return OpProfile(facts=facts, ops=build_op_table(events))


def _batch_from_input_dims(raw) -> int | None:
    """Leading dim of the first input when that input has rank >= 2 (a batch of samples)."""
    try:
        first = json.loads(bytes(raw))[0]
    except (ValueError, IndexError, TypeError):
        return None
    if isinstance(first, list) and len(first) >= 2 and isinstance(first[0], int) and first[0] > 0:
        return first[0]
    return None
