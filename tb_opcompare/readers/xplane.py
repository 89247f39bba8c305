"""Reader for ``<host>.xplane.pb`` (TensorFlow >= 2.2 profiler sessions).

Host ops are events named ``<op_name>:<op_type>`` on the ``/host:CPU`` plane; their
self time subtracts nested TF-op events on the same line, as xprof's TensorFlow
Stats tool does. Device ops are the kernels and memcpys on the ``Stream #`` lines of
``/device:GPU:N`` planes, attributed to a TF op through the ``tf_op`` stat (current
TF) or the ``annotation`` / ``level 0`` stats (TF 2.4 era). Derived lines such as
"TensorFlow Ops" repeat the same kernels and are skipped.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from google.protobuf.message import DecodeError

from ..errors import ProfileError
from ..optable import DEVICE, OpEvents, OpProfile, ProfileFacts, build_op_table, self_times
from .tf_ops import leading_dim, op_from_annotation, parse_host_op, parse_tf_op
from .xplane_wire import split_space

FORMAT = "xplane"
_PS_PER_US = 1e6


def read_xplane_session(paths: Sequence[str], read_bytes) -> OpProfile:
    """Read one profiling session (one xplane per host) into a single OpProfile.

    ``read_bytes(path) -> bytes`` is the file-system layer (local or remote).
    """
    events = OpEvents()
    facts = ProfileFacts(format=FORMAT, framework="TensorFlow")
    steps: dict[int, int] = {}  # step number -> longest marker duration (ps)
    device_steps = 0
    device_names: list[str] = []
    first_shape: tuple[float, int] | None = None
    for path in paths:
        planes = _parse(path, read_bytes(path))
        try:
            for plane in planes:
                if plane.name.startswith("/host:"):
                    shape = _read_host_plane(plane, events, steps)
                    if shape and (first_shape is None or shape[0] < first_shape[0]):
                        first_shape = shape
                elif plane.name.startswith("/device:"):
                    kind, name, plane_steps = _read_device_plane(plane, events)
                    if kind:
                        device_names.append(name)
                        facts.device = kind
                        device_steps = max(device_steps, plane_steps)
        except (DecodeError, RuntimeError, ValueError) as error:
            raise ProfileError(path, f"a line of plane {plane.name!r} is not valid protobuf "
                                     f"(the file may be truncated or corrupt): {error}") from None
    if not len(events):
        raise ProfileError(paths[0], "no TensorFlow op events in this profile")
    if device_names:
        facts.device_name = ", ".join(sorted(set(device_names)))
    if steps:
        facts.steps, facts.steps_source = len(steps), "step markers (step_num) on the host"
        facts.step_time_us = sum(steps.values()) / len(steps) / _PS_PER_US
    elif device_steps:
        facts.steps, facts.steps_source = device_steps, "Steps line of the device plane"
    else:
        facts.steps_source = "unknown: the profile has no step markers (Keras 3 writes none)"
    if first_shape:
        facts.batch_size, facts.batch_size_source = first_shape[1], "data: first op input shape in the xplane"
    return OpProfile(facts=facts, ops=build_op_table(events))


def _parse(path: str, data: bytes):
    if not data:
        raise ProfileError(path, "the file is empty (0 bytes); the profiler may have been killed while writing it")
    try:
        planes = split_space(data)
    except (DecodeError, RuntimeError, ValueError) as error:
        raise ProfileError(path, f"not a valid XSpace protobuf (truncated or not an xplane file): {error}") from None
    if not any(p.name.startswith(("/host:", "/device:")) for p in planes):
        raise ProfileError(path, "the XSpace has no /host: or /device: plane; this is not a profiler xplane")
    return planes


def _stat_names(plane) -> dict[int, str]:
    return {entry.key: entry.value.name for entry in plane.stat_metadata}


def _read_host_plane(plane, events: OpEvents, steps: dict[int, int]) -> tuple[float, int] | None:
    """Add the plane's TF ops to ``events``; return (start_ps, batch) of the first shaped op.

    This loop touches every host event, so it reads as few protobuf fields as it can:
    stats are looked at only on op events (for the shape) and on events whose
    metadata was seen carrying a ``step_num`` stat.
    """
    ops_by_metadata: dict[int, tuple[str, str]] = {}
    for entry in plane.event_metadata:
        parsed = parse_host_op(entry.value.name)
        if parsed:
            ops_by_metadata[entry.key] = parsed
    stat_names = _stat_names(plane)
    step_stat = next((k for k, v in stat_names.items() if v == "step_num"), None)
    shape_stat = next((k for k, v in stat_names.items() if v == "shape"), None)
    carries_step: dict[int, bool] = {}
    first_shape: tuple[float, int] | None = None
    for line in plane.lines:
        shaped = _read_host_line(line, ops_by_metadata, step_stat, shape_stat, carries_step, steps, events)
        if shaped and (first_shape is None or shaped[0] < first_shape[0]):
            first_shape = shaped
        del line  # one line's events alive at a time: drop this one before the next is parsed
    return first_shape


def _read_host_line(line, ops_by_metadata, step_stat, shape_stat, carries_step, steps, events):
    starts, durations, ops = [], [], []
    op_events = [] if shape_stat is not None else None
    for event in line.events:
        metadata_id = event.metadata_id
        op = ops_by_metadata.get(metadata_id)
        if op is not None:
            starts.append(event.offset_ps)
            durations.append(event.duration_ps)
            ops.append(op)
            if op_events is not None:
                op_events.append(event)
        elif step_stat is not None:
            known = carries_step.get(metadata_id)
            if known is None or known:
                step = next((s.int64_value or s.uint64_value for s in event.stats if s.metadata_id == step_stat), None)
                carries_step[metadata_id] = step is not None
                if step is not None:
                    steps[step] = max(steps.get(step, 0), event.duration_ps)
    if not ops:
        return None
    order = np.lexsort((-np.asarray(durations, dtype=np.int64), np.asarray(starts, dtype=np.int64))).tolist()
    starts = [starts[i] for i in order]
    durations = [durations[i] for i in order]
    ops = [ops[i] for i in order]
    self_ps, _ = self_times(starts, durations)
    events.add_host_batch(ops, np.asarray(durations, dtype=np.float64) / _PS_PER_US,
                          np.asarray(self_ps, dtype=np.float64) / _PS_PER_US)
    if op_events:
        shaped = _first_batch(op_events, order, shape_stat)
        if shaped:
            return line.timestamp_ns * 1000 + shaped[0], shaped[1]
    return None


def _first_batch(op_events, order, shape_stat) -> tuple[int, int] | None:
    for index in order:
        event = op_events[index]
        for stat in event.stats:
            if stat.metadata_id == shape_stat:
                batch = leading_dim(stat.str_value)
                if batch:
                    return event.offset_ps, batch
    return None


def _read_device_plane(plane, events: OpEvents) -> tuple[str | None, str, int]:
    """Add kernels of a device plane; return (device kind or None if idle, name, steps)."""
    kind = plane.name[len("/device:"):].split(":", 1)[0]
    stat_names = _stat_names(plane)
    by_name = {v: k for k, v in stat_names.items()}
    tf_op_id, annotation_id, level0_id = by_name.get("tf_op"), by_name.get("annotation"), by_name.get("level 0")
    event_names = {entry.key: entry.value.name for entry in plane.event_metadata}
    op_by_text: dict[str, tuple[str, str] | None] = {}
    kernels = 0
    steps = 0
    for line in plane.lines:
        if line.name == "Steps":
            steps = len(line.events)
        if not line.name.startswith("Stream #"):
            continue
        for event in line.events:
            kernels += 1
            op = None
            for stat in event.stats:
                if stat.metadata_id in (tf_op_id, annotation_id, level0_id):
                    text = _stat_text(stat, stat_names)
                    if text not in op_by_text:
                        op_by_text[text] = (
                            parse_tf_op(text) if stat.metadata_id == tf_op_id else op_from_annotation(text)
                        )
                    op = op_by_text[text]
                    if op is not None and stat.metadata_id != level0_id:
                        break
            kernel_name = event_names.get(event.metadata_id, "")
            if op is None:
                op = (kernel_name, kernel_name if kernel_name.startswith("Memcpy") else "(kernel without TF op)")
            duration_us = event.duration_ps / _PS_PER_US
            events.add(DEVICE, op[0], op[1], duration_us, duration_us)
    if not kernels:
        return None, "", steps
    return kind, _device_name(plane, stat_names, kind), steps


def _stat_text(stat, stat_names: dict[int, str]) -> str:
    if stat.WhichOneof("value") == "ref_value":
        return stat_names.get(stat.ref_value, "")
    return stat.str_value


def _device_name(plane, stat_names: dict[int, str], kind: str) -> str:
    values = {}
    for stat in plane.stats:
        which = stat.WhichOneof("value")
        if which:
            values[stat_names.get(stat.metadata_id, "")] = (
                _stat_text(stat, stat_names) if which in ("ref_value", "str_value") else getattr(stat, which)
            )
    for key in ("device_name", "device_type_string", "model"):
        if isinstance(values.get(key), str) and values[key]:
            return values[key]
    if "compute_cap_major" in values:
        major = int(values["compute_cap_major"])
        minor = int(values.get("compute_cap_minor", 0))
        cores = values.get("core_count")
        return f"{kind} (compute capability {major}.{minor}" + (f", {int(cores)} SMs)" if cores else ")")
    return kind
