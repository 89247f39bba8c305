"""What the planes of one xplane session gather, for the session and for one another.

The evidence beyond the op times (``SessionEvidence``: steps, batch sizes, memory, user
ranges, XLA programs, kinds of op events), which the host and device planes fill and the
session settles into the profile's facts once every file is read; the memory in use and
the user ranges every host plane adds to (``MemoryInUse``, ``_UserRanges``); and the
host's kernel launches in one file, which place a device's kernels in the executions a
``TensorFlow Ops`` line cut apart (``HostLaunches``).

Separate from the session's reader (``xplane``) so that the plane readers, which fill
it, import it without importing the module that imports them.
"""

from __future__ import annotations

import collections
import dataclasses

import numpy as np

from tb_opcompare.ingest.readers import xplane_steps
from tb_opcompare.ingest.readers.device_executions import PS_PER_US, InvocationIds, LaunchIndex, enclosing_ops
from tb_opcompare.ingest.readers.memory_timeline import highest_per_device, memory_timeline
from tb_opcompare.ingest.readers.xla_cost import XlaPrograms
from tb_opcompare.ingest.readers.xla_hlo import HloEvidence
from tb_opcompare.ingest.readers.xplane_events import number, stat_text


@dataclasses.dataclass
class SessionEvidence:
    """What the planes of one session tell beyond the op times, gathered plane by plane
    and settled into the profile's facts once every file is read."""

    steps: dict[int, int] = dataclasses.field(default_factory=dict)  # step number -> longest marker (ps)
    device_steps: list[int] = dataclasses.field(default_factory=list)  # the busiest device's Steps line (ps)
    device_names: list[str] = dataclasses.field(default_factory=list)
    invocation_ids: InvocationIds = dataclasses.field(default_factory=InvocationIds)
    first_shape: tuple[int, int] | None = None  # (start ps, batch size) of the earliest shaped op
    # (tf.data batch size, root iterator's name) -> elements seen
    input_batches: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    declared_batches: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # batch_size stat
    step_batches: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # Keras 2: fit()'s
    step_calls: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # per (file, plane)
    call_times: dict[tuple, list[int]] = dataclasses.field(default_factory=dict)  # their durations (ps), in order
    allocated_shapes: dict[str, set[str]] = dataclasses.field(default_factory=dict)  # shape -> tf_ops
    # op events by kind: "xla" (compiled ops on the host), "xla_device" (kernels of XLA ops),
    # "tf" (TF ops), of which "tf_graph" ran on TF's executor threads and "tf_eager" elsewhere
    kinds: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    allocated_dtypes: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    hlo: HloEvidence = dataclasses.field(default_factory=HloEvidence)  # XLA programs: their precision
    in_use: MemoryInUse = dataclasses.field(default_factory=lambda: MemoryInUse())  # every host plane's
    user_ranges: _UserRanges = dataclasses.field(default_factory=lambda: _UserRanges())
    # each host plane's steps split by category (issue 53), with its file's device kernels
    step_spans: list[tuple[str, xplane_steps.StepSpans]] = dataclasses.field(default_factory=list)
    # by file: the host plane whose steps are on its devices' Steps lines (TF 2.2-2.4)
    pending_hosts: dict[str, xplane_steps.PendingHost] = dataclasses.field(default_factory=dict)
    counted: XlaPrograms | None = None  # the programs' costs, counted once for every plane

    def xla_programs(self) -> XlaPrograms:
        if self.counted is None:
            self.counted = XlaPrograms(self.hlo.modules)  # a later file's programs join the same dict
        return self.counted


class HostLaunches:
    """The host's kernel launches in one file, by ``correlation_id``: each one's host
    execution, the op event it was made in. TF writes an event on the host thread for each
    kernel and copy it launches, carrying the ``correlation_id`` the kernel carries on the
    device, inside the op event whose ``Compute`` launched it. Every host line's op events
    and launch events are gathered by line id (a thread's: a ``/host:CUPTI`` plane numbers
    its lines by thread as ``/host:CPU`` does), then each launch is placed in the innermost
    op event of its thread that encloses its start; a launch in none (a copy made outside
    any op) places nothing. Only gathered where a device plane has a ``TensorFlow Ops``
    line (``wanted``), the only executions they decide. A launch places a kernel only in an
    execution of the kernel's own op (``LaunchIndex``)."""

    def __init__(self, wanted: bool):
        self.wanted = wanted
        # line id -> its op parts and launch parts: (plane clock's origin ns, starts ps on
        # that clock, durations ps, op ids) and (origin ns, starts, correlation ids)
        self._lines: dict[int, tuple[list, list]] | None = collections.defaultdict(lambda: ([], []))
        self.index = LaunchIndex()
        self._keys: tuple[list, np.ndarray] | None = None  # the last op list met and its ops' ids

    def add_line(self, line_id: int, origin_ns: int, ops: tuple | None, launches: tuple | None) -> None:
        """A host line's op events (starts and durations, ps since ``origin_ns``, and their
        ops: codes into a list of ops) and launches (starts and correlation ids)."""
        if self._lines is None:
            return
        if ops is not None and len(ops[0]):
            starts, durations, codes, keys = ops
            if self._keys is None or self._keys[0] is not keys or len(self._keys[1]) != len(keys):
                self._keys = (keys, self.index.op_ids(keys))  # a plane's, the same list line after line
            self._lines[line_id][0].append((origin_ns, starts, durations, self._keys[1][codes]))
        if launches is not None and len(launches[0]):
            self._lines[line_id][1].append((origin_ns, *launches))

    def resolve(self) -> None:
        """Place every gathered launch in its op event (once, when the host planes are read)."""
        lines, self._lines = self._lines, None
        if not lines:
            return
        origins = [origin for ops, launches in lines.values() if launches for origin, *_ in ops + launches]
        if not origins:
            return
        origin_ns = min(origins)
        placed, first_id = [], 0
        for ops, launches in lines.values():
            if not ops or not launches:
                continue
            # ps since the file's origin: lines of one session lie hours apart at most, and a
            # part further off (a broken clock) is left out
            if max((origin - origin_ns) * 1000 for origin, *_ in ops + launches) >= 1 << 61:
                continue
            op_starts = np.concatenate([starts + (origin - origin_ns) * 1000 for origin, starts, _, _ in ops])
            op_durations = np.concatenate([durations for _, _, durations, _ in ops])
            launch_starts = np.concatenate([starts + (origin - origin_ns) * 1000 for origin, starts, _ in launches])
            enclosing = enclosing_ops(op_starts, op_durations, launch_starts)
            found = enclosing >= 0
            placed.append(
                (
                    np.concatenate([ids for *_, ids in launches])[found],
                    first_id + enclosing[found],
                    np.concatenate([op_ids for *_, op_ids in ops])[enclosing[found]],
                )
            )
            first_id += len(op_starts)
        if placed:
            self.index.set(*(np.concatenate(column) for column in zip(*placed)))

    def executions(self, correlations: np.ndarray, correlated: np.ndarray, keys: list, codes: np.ndarray) -> np.ndarray:
        """The host execution of the kernel's op that launched each kernel of
        ``correlations`` (where ``correlated``; its op a code into ``keys``), -1 where not known."""
        return self.index.executions(correlations, correlated, keys, codes)


class MemoryInUse:
    """What each allocator held over the session: TF writes ``bytes_allocated``, the bytes
    the allocator holds just after the event, on every ``MemoryAllocation`` and
    ``MemoryDeallocation`` (``peak_bytes_in_use`` is since the process started, not the
    profiled window). The run's peak per allocator is the highest of these samples, and
    its timeline is made of the same samples, so the two agree."""

    def __init__(self):
        self.allocators: dict[str, int] = {}  # name -> code, in the order first seen
        self.codes: list[int] = []
        # a sample's time is its line's start (ns since the epoch) plus its offset (ps): in
        # one integer they would overflow int64, so they are kept apart until subtracted
        self.line_ns: list[int] = []
        self.offset_ps: list[int] = []
        self.bytes_in_use: list[float] = []

    @property
    def samples(self) -> int:
        return len(self.codes)

    STATS = ("bytes_allocated", "allocator_name")  # what a sample needs of an event's stats

    def add(self, stats: dict, stat_names: dict[int, str], line_ns: int, offset_ps: int) -> None:
        if "bytes_allocated" not in stats:
            return
        allocator = stat_text(stats["allocator_name"], stat_names) if "allocator_name" in stats else "memory"
        self.codes.append(self.allocators.setdefault(allocator, len(self.allocators)))
        self.line_ns.append(line_ns)
        self.offset_ps.append(offset_ps)
        self.bytes_in_use.append(number(stats["bytes_allocated"]))

    def add_batch(
        self, names: list[str], allocators: np.ndarray, line_ns: int, offsets_ps: np.ndarray, bytes_in_use: np.ndarray
    ) -> None:
        """``add`` of many samples in order: ``allocators`` index ``names``."""
        if not len(allocators):
            return
        unique, first, where = np.unique(allocators, return_index=True, return_inverse=True)
        codes = np.empty(len(unique), dtype=np.int64)
        for index in np.argsort(first).tolist():  # allocators are numbered in the order first seen
            codes[index] = self.allocators.setdefault(names[unique[index]], len(self.allocators))
        self.codes.extend(codes[where].tolist())
        self.line_ns.extend([line_ns] * len(allocators))
        self.offset_ps.extend(offsets_ps.tolist())
        self.bytes_in_use.extend(bytes_in_use.tolist())

    def _highest(self) -> np.ndarray:
        return highest_per_device(self.codes, self.bytes_in_use, len(self.allocators))

    def peaks(self) -> dict[str, int]:
        """The highest memory in use per allocator; none for an allocator that never held any."""
        highest = self._highest()
        return {name: int(highest[code]) for name, code in self.allocators.items() if highest[code] > 0}

    def timeline(self):
        """``OpProfile.memory_table`` of the allocators that have a peak."""
        codes = np.asarray(self.codes, dtype=np.int64)
        line_ns = np.asarray(self.line_ns, dtype=np.int64)
        times_us = ((line_ns - line_ns.min()) * 1000 + np.asarray(self.offset_ps, dtype=np.int64)) / PS_PER_US
        shown = (self._highest() > 0)[codes]
        return memory_timeline(
            list(self.allocators), codes[shown], times_us[shown], np.asarray(self.bytes_in_use)[shown]
        )


class _UserRanges:
    """The user's own ranges (``tf.profiler.experimental.Trace``, a TraceMe): the events on
    the threads that run Python that are neither ops nor TensorFlow's own (``is_tf_range``),
    with their wall time. A range nested in one of its own name on its thread counts once,
    as the outer one; a range inside any other of the user's is left out of ``outermost_us``."""

    KIND = "tf.profiler Trace"

    def __init__(self):
        self._threads: dict[tuple, list[tuple[int, int, str]]] = collections.defaultdict(list)

    def add(self, name: str, thread: tuple, start_ps: int, duration_ps: int) -> None:
        self._threads[thread].append((start_ps, -duration_ps, name))

    def table(self) -> dict[str, list]:
        """``OpProfile.annotation_table`` rows (ANNOTATION_COLUMNS), one per name, in the order first seen."""
        calls: dict[str, int] = {}
        wall_ps: dict[str, int] = collections.Counter()
        outermost_ps: dict[str, int] = collections.Counter()
        for ranges in self._threads.values():
            open_until: dict[str, int] = {}  # name -> end of its open outer range
            any_open_until = None
            for start, negative_duration, name in sorted(ranges):  # outer ranges before what they hold
                end = start - negative_duration
                if start >= open_until.get(name, start):
                    calls[name] = calls.get(name, 0) + 1
                    wall_ps[name] += end - start
                    open_until[name] = end
                if any_open_until is None or start >= any_open_until:
                    outermost_ps[name] += end - start
                    any_open_until = end
        return {
            "name": list(calls),
            "kind": [self.KIND] * len(calls),
            "occurrences": list(calls.values()),
            "total_us": [wall_ps[name] / PS_PER_US for name in calls],
            "outermost_us": [outermost_ps[name] / PS_PER_US for name in calls],
        }
