"""An xplane's steps split by what they were spent on (issue 53, ``step_breakdown``): the
host events of a host plane gathered while it is read, reduced to per-step sums once its
steps are known, and the device's kernels added from the planes that follow.

A TF graph runs its ops on a pool of executor threads while the Python thread waits in
the step function, so no one thread drives the step: each moment of a step counts once,
under the first category of ``LAYER_ORDER`` that any host event holding it has
(``layered_host_sums``), as for a TF1 timeline. The events that count are the model's ops
on the executor's threads and the calling thread (tf.data's own threads produce the next
batches beside the step, and are no part of it unless the step waits on them: the
get-next op and its body, ``tf_host_event_category``), and the CUDA/HIP runtime calls.
Moments no host event holds are waiting on the device where one of its streams ran then
(the busiest device's), else untracked: Python, the executor's own scheduling, gaps.

Times are µs since the host plane's first line (floats: exact to well under a ns over
hours); a device line is placed on that clock by its own start, as xprof's trace viewer
does (one epoch for every plane of a file). The reduction keeps per-step sums and the
union of the host's busy moments, never every event.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tb_opcompare.ingest.readers.step_breakdown import (
    DEVICE_CODES,
    HOST_CODES,
    device_rows,
    joined,
    layered_host_sums,
    layered_rows,
    measure_in,
    union,
)
from tb_opcompare.ingest.readers.tf_ops import tf_host_event_category, tf_step_category

PS_PER_US = 1_000_000
NOTE = (
    "TensorFlow runs a step's ops on a pool of threads: each moment counts once, under the first of input, "
    "copies, launches, optimizer, backward, forward that any thread ran; the executor's own scheduling and "
    "Python are untracked"
)
# A step's wall time from its markers and from the bounds the split used may differ by this
# much (µs, or this share) before the split is taken to be of other steps and left out.
_WALL_SLACK_US, _WALL_SLACK_SHARE = 1.0, 1e-3


def host_event_codes(names: dict[int, str]) -> tuple[list[int], list[int]]:
    """(metadata ids, category codes) of a host plane's events that are no op but count in
    a step (``tf_host_event_category``)."""
    ids, codes = [], []
    for key, name in names.items():
        category = tf_host_event_category(name)
        if category is not None:
            ids.append(key)
            codes.append(HOST_CODES[category])
    return ids, codes


def op_codes(op_keys: list[tuple[str, str]]) -> np.ndarray:
    """Each op's category code (``tf_step_category``), by op code."""
    return np.fromiter((HOST_CODES[tf_step_category(*key)] for key in op_keys), dtype=np.int64, count=len(op_keys))


# Arrays this big are their own mappings, which glibc gives back to the system when freed
# (its mmap threshold rises with what is freed, to at most 32 MiB on 64 bits). Freeing
# smaller ones early raised that threshold, and the allocations that followed stayed in the
# heap: a 33 MB xplane's read added 106 MB, not 84.
_GIVEN_BACK_BYTES = 32 << 20


class HostSpans:
    """One host plane's events that count in a step, line by line (ps on the plane's clock):
    its op events (codes into its op keys; arrays shared with the reader's, not copied)
    and the other events that count (category codes)."""

    def __init__(self):
        self.ops: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []  # starts, durations, codes, eager
        self.others: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # starts, durations, category codes

    def add_ops(self, starts: np.ndarray, durations: np.ndarray, codes: np.ndarray, eager: np.ndarray) -> None:
        self.ops.append((starts, durations, codes, eager))

    def add_others(self, starts: np.ndarray, durations: np.ndarray, codes: np.ndarray) -> None:
        if len(codes):
            self.others.append((starts, durations, codes))

    def reduced(
        self, bounds_ps: np.ndarray, categories: np.ndarray, leave_out_eager: bool, min_steps: int = 2
    ) -> StepSpans | None:
        """The plane's ``StepSpans`` over its steps ``bounds_ps`` (None with fewer than
        ``min_steps``: a host's one marker is a partial step): ``categories``, each op code's
        category code; ``leave_out_eager``: the plane ran a graph, whose eagerly dispatched
        ops are the training loop's."""
        if len(bounds_ps) < min_steps or not (self.ops or self.others):
            return None
        # Every event of the plane at once, category codes as bytes and ends made in place
        # (a 1.1 GB xplane's 11 million events took 1 GB more here, the read's peak 2.2
        # times the file; now 0.45 GB, 1.68 times).
        small = categories.astype(np.int8)  # STEP_CATEGORIES: a handful of codes
        parts = []
        for starts, durations, codes, eager in self.ops:
            if leave_out_eager and eager.any():
                starts, durations, codes = starts[~eager], durations[~eager], codes[~eager]
            parts.append((starts, durations, small[codes]))
        parts += [(starts, durations, codes.astype(np.int8)) for starts, durations, codes in self.others]
        starts = np.concatenate([part[0] for part in parts])
        ends = np.concatenate([part[1] for part in parts])
        ends += starts
        codes = np.concatenate([part[2] for part in parts])
        if starts.min() < bounds_ps[0, 0] or ends.max() > bounds_ps[-1, 1]:
            inside = (starts < bounds_ps[-1, 1]) & (ends > bounds_ps[0, 0])
            starts, ends, codes = starts[inside], ends[inside], codes[inside]
        # sorted once (ps, integers: exact), so that each layer's union sorts nothing
        order = np.argsort(starts, kind="stable")
        if starts.nbytes >= _GIVEN_BACK_BYTES:  # each copy's source given back as the next is made
            starts = starts[order]
            ends = ends[order]
            codes = codes[order]
            del order
            in_order = (starts, ends, codes)
        else:  # the sources kept to the end (_GIVEN_BACK_BYTES)
            in_order = (starts[order], ends[order], codes[order])
        sums, busy = layered_host_sums(bounds_ps, *in_order, presorted=True)
        bounds = bounds_ps / PS_PER_US
        sums, busy = sums / PS_PER_US, (busy[0] / PS_PER_US, busy[1] / PS_PER_US)
        return StepSpans(bounds, sums, busy)


@dataclasses.dataclass
class PendingHost:
    """A host plane with no steps of its own (TF 2.2-2.4 outside Keras: its steps are on
    each device's ``Steps`` line): its events, kept until a device plane of its file says
    where the steps are."""

    spans: HostSpans
    categories: np.ndarray
    leave_out_eager: bool
    origin_ns: int

    def on_device_steps(self, plane) -> StepSpans | None:
        """The host's split over the steps of ``plane``'s ``Steps`` line (one StepSpans a
        device: each device's steps are its own), with that device's kernels to come."""
        bounds = []
        for line in plane.lines:
            if line.name == "Steps":
                start_ps = (line.timestamp_ns - self.origin_ns) * 1000
                bounds += [
                    (start_ps + event.offset_ps, start_ps + event.offset_ps + event.duration_ps)
                    for batch in line.event_batches()
                    for event in batch
                ]
        if not bounds or abs(bounds[0][0]) >= 1 << 62:  # a line far off the host's clock cannot be placed
            return None
        bounds_ps = np.asarray(sorted(bounds), dtype=np.int64)
        spans = self.spans.reduced(bounds_ps, self.categories, self.leave_out_eager, min_steps=1)
        if spans is not None:
            spans.origin_ns, spans.per_device = self.origin_ns, True
        return spans


@dataclasses.dataclass
class StepSpans:
    """A host plane's steps (µs, (steps, 2)), each step's time by category code before the
    device is known, the host's busy moments, and the kernels of the devices that follow
    it in its file, by device plane: (starts, ends, device category codes) per line."""

    bounds: np.ndarray
    sums: np.ndarray
    host_busy: tuple[np.ndarray, np.ndarray]
    devices: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = dataclasses.field(default_factory=dict)
    origin_ns: int = 0  # the host plane's clock: its first line's start
    per_device: bool = False  # the steps are one device's (its Steps line), and so are its kernels

    def add_kernels(self, plane: str, line_ns: int, ints: np.ndarray, names: dict[int, str]) -> None:
        """A device line's events (``ints``: metadata id, offset ps, duration ps; ``names``:
        the plane's event names by metadata id) within the steps, placed on the host
        plane's clock."""
        # floats: a hostile line's start far off the host's must not overflow, and lands outside the steps
        starts = (float(line_ns - self.origin_ns) * 1000.0 + ints[:, 1]) / PS_PER_US
        ends = starts + ints[:, 2] / PS_PER_US
        inside = (starts < self.bounds[-1, 1]) & (ends > self.bounds[0, 0])
        if not inside.any():
            return
        ids, inverse = np.unique(ints[inside, 0], return_inverse=True)
        codes = np.array([_device_code(names.get(key, "")) for key in ids.tolist()], dtype=np.int64)[inverse]
        self.devices.setdefault(plane, []).append((starts[inside], ends[inside], codes))

    def walls_match(self, step_times_us: list[float]) -> bool:
        """Whether these are the steps the profile's step times are of."""
        walls = self.bounds[:, 1] - self.bounds[:, 0]
        if len(walls) != len(step_times_us):
            return False
        times = np.asarray(step_times_us, dtype=float)
        return bool((np.abs(walls - times) <= np.maximum(_WALL_SLACK_US, _WALL_SLACK_SHARE * times)).all())

    def rows(self) -> dict[str, list]:
        """The breakdown's rows: the host's, and the busiest device's where one ran."""
        device = self._busiest_device()
        if device is None:
            return layered_rows(self.bounds, self.sums, self.host_busy, None)
        starts, ends, codes = device
        busy = union(starts, ends)
        host = layered_rows(self.bounds, self.sums, self.host_busy, busy)
        return joined(host, device_rows(self.bounds, starts, ends, codes))

    def _busiest_device(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        best, best_busy = None, 0.0
        for lines in self.devices.values():
            starts, ends, codes = (np.concatenate(column) for column in zip(*lines))
            busy = float(measure_in(self.bounds, union(starts, ends)).sum())
            if busy > best_busy:
                best, best_busy = (starts, ends, codes), busy
        return best


def _device_code(name: str) -> int:
    """A device event's category code: NCCL's kernels are communication, copies and memsets
    copies, the rest compute."""
    lowered = name.lower()
    if lowered.startswith("nccl") or "nccl" in lowered.split("<", 1)[0]:
        return DEVICE_CODES["device_communication"]
    if lowered.startswith(("memcpy", "memset")):
        return DEVICE_CODES["device_copy"]
    return DEVICE_CODES["device_compute"]
