"""The host planes of an xplane (``/host:CPU``, and ``/host:CUPTI``'s launches).

A host plane's ops: TF ops (events named ``<op_name>:<op_type>``, their self time less
the TF-op events nested in them on the same line) and XLA's compiled ops (events with an
``hlo_op`` stat), each in its step; and the evidence around them: step markers, Keras 2's
step function calls, tf.data's input batches, memory allocations and the memory in use,
the user's own ranges, and the kernel launches that tie a device's kernels to the op that
launched them.

Separate from the device planes (``xplane_device``): every host event is touched, so a
host plane is read as arrays of a whole batch's integers sorted out with numpy, its stats
read only on the few events that can carry them; a device plane is read kernel by kernel
by rules of its own. The two share only ``xplane_events`` and the session's evidence
(``xplane_evidence``).
"""

from __future__ import annotations

import collections
import dataclasses

import numpy as np

from tb_opcompare.ingest.readers import xplane_steps
from tb_opcompare.ingest.readers.device_executions import PS_PER_US
from tb_opcompare.ingest.readers.tf_ops import (
    EAGER_OP_PREFIX,
    PIPELINE_ROOTS,
    STEP_FUNCTION,
    TF_RANGE_STATS,
    execution_thread,
    is_batch_dataset,
    is_optimizer_scope,
    is_tf_range,
    is_tf_thread,
    leading_dim,
    parse_host_op,
    ran_eagerly,
    shared_leading_dim,
)
from tb_opcompare.ingest.readers.xla_cost import XlaPrograms, work_rows
from tb_opcompare.ingest.readers.xla_hlo import PROGRAM_STAT
from tb_opcompare.ingest.readers.xplane_events import (
    BrokenEvents,
    IdLookup,
    Texts,
    event_ints,
    framework_rows,
    hlo_op,
    int_value,
    number,
    plane_event_names,
    plane_stat_names,
    stat_text,
    stat_text_codes,
    xla_costs,
)
from tb_opcompare.ingest.readers.xplane_evidence import HostLaunches, MemoryInUse, SessionEvidence
from tb_opcompare.ingest.readers.xplane_wire import STAT_ABSENT, STAT_DOUBLE, STAT_INT64, STAT_UINT64, EventStats
from tb_opcompare.schema.dimensions import is_batch_size
from tb_opcompare.schema.events import OpEvents, crossing_events, self_times, start_order, steps_of


@dataclasses.dataclass
class _HostPlaneIndex:
    """What a host plane's metadata says before any event is read: which event metadata
    are ops (and their keys), step functions, input pipeline roots, batch datasets and
    user ranges, and the ids of the stats their events may carry."""

    op_keys: list[tuple[str, str]]  # (name, type) of each op code
    lookup: IdLookup | None  # metadata id -> op code
    model_op: np.ndarray  # per op code: not the input pipeline's
    only_eager: np.ndarray  # per op code: no graph op shares its key (an eager op may: "ReadVariableOp")
    eager_ids: np.ndarray  # metadata ids of eager ops
    root_names: dict[int, str]  # tf.data's outermost iterators
    batch_datasets: list[int]
    user_range_names: dict[int, str]
    user_range_ids: np.ndarray
    step_functions: list[int]  # Keras 2's per-step train_function
    event_names: dict[int, str]
    stat_names: dict[int, str]
    stat_ids: dict[str, int]  # stat name -> its first metadata id
    hlo: _HloOps
    step_events: IdLookup  # metadata id -> step category code of an event that is no op but counts


def _index_host_plane(plane, names_tf_ops: bool) -> _HostPlaneIndex:
    # Every event name is looked at here, a few thousand a plane (the BERT xplane's 5,056 took
    # 11 ms, a fifth of its read): each step is one pass over them, at C speed where it can be.
    names = plane_event_names(plane)
    parsed = dict(zip(names, map(parse_host_op, names.values()))) if names_tf_ops else dict.fromkeys(names)
    key_codes: dict[tuple[str, str], int] = {}  # (name, type) -> op code, in the order first met
    op_ids: list[int] = []
    op_codes: list[int] = []
    eager_ids, graph_codes = [], set()
    for key, op in parsed.items():
        if op is not None:
            code = key_codes.setdefault(op, len(key_codes))
            if names[key].startswith(EAGER_OP_PREFIX):
                eager_ids.append(key)
            else:
                graph_codes.add(code)
            op_ids.append(key)
            op_codes.append(code)
    op_keys = list(key_codes)
    # JAX's runtime names its host ranges freely (``PjitFunction(step)``, ``Handle inputs``,
    # each launch by its kernel, each thunk by its XLA op): no rule tells a user's
    # TraceAnnotation from them, so a JAX profile reads none rather than dozens of false ones
    user_range_names = (
        {key: name for key, name in names.items() if name and parsed[key] is None and not is_tf_range(name)}
        if names_tf_ops
        else {}
    )
    stat_names = plane_stat_names(plane)
    stat_ids: dict[str, int] = {}
    for key, name in stat_names.items():
        stat_ids.setdefault(name, key)
    return _HostPlaneIndex(
        op_keys=op_keys,
        lookup=IdLookup(op_ids, op_codes) if op_ids else None,
        model_op=np.array([op_type != "Dataset" for _, op_type in op_keys], dtype=bool),
        only_eager=~np.isin(np.arange(len(op_keys)), list(graph_codes)),
        eager_ids=np.asarray(eager_ids, dtype=np.int64),
        root_names={key: name for key, name in names.items() if name in PIPELINE_ROOTS},
        batch_datasets=[key for key, name in names.items() if is_batch_dataset(name)],
        user_range_names=user_range_names,
        user_range_ids=np.fromiter(user_range_names, dtype=np.int64, count=len(user_range_names)),
        step_functions=[key for key, name in names.items() if name == STEP_FUNCTION],
        event_names=names,
        stat_names=stat_names,
        stat_ids=stat_ids,
        hlo=_HloOps(stat_ids.get("hlo_op"), stat_ids.get(PROGRAM_STAT), op_keys, key_codes, names),
        step_events=IdLookup(*xplane_steps.host_event_codes({key: names[key] for key in names if parsed[key] is None})),
    )


class HostPlaneReader:
    """Reads one host plane's TF ops and the evidence around them (step markers, Keras 2's
    step calls, input batches, memory, user ranges) into the session's evidence.

    ``names_tf_ops`` is False in a JAX profile, where a ``name:type`` event is the
    runtime's own (``ThenExecuteCallback:GetEvent...``) and only the XLA ops (``hlo_op``)
    are ops. The ops' times are held until the plane's steps are known: ``read`` returns
    them as ``HostOps``, added once the caller has let the file's bytes go.

    Every host event is touched here, so the three integers each needs are pulled out of a
    whole batch at once (``event_ints``) and sorted out with numpy; stats are read only on
    the few events that can carry a step number or a shape, and on the memory events
    (``_MemoryEvents``: from the wire too, where the C helper was built)."""

    def __init__(
        self, plane, evidence: SessionEvidence, names_tf_ops: bool = True, launches: HostLaunches | None = None
    ):
        self.plane_name = plane.name
        self.evidence = evidence
        self.index = index = _index_host_plane(plane, names_tf_ops)
        self.memory = _Allocations(evidence.allocated_dtypes)
        self.memory_events = _MemoryEvents(
            index.event_names, index.stat_names, self.memory, evidence.in_use, evidence.allocated_shapes
        )
        self.lines = plane.lines
        self.first_shape: tuple[int, int] | None = None
        self.carries_step = _Carriers()  # which event metadata carry step_num
        self.marker_ranges: dict[int, tuple[int, int]] = {}  # step number -> (start, duration) of its longest
        self.call_ranges: list[np.ndarray] = []  # (start, duration) of each Keras 2 step function call
        self.step_calls = 0
        self.op_lines: list[tuple] = []  # each line's op events, added once the plane's steps are known
        self.ran: collections.Counter[str] = (
            collections.Counter()
        )  # the model's op events on TF's executor threads ("graph") and elsewhere
        # kernel launches (``HostLaunches``), where wanted: events that carry a correlation_id,
        # learnt per metadata id from its first event as step markers are; and every line's
        # ops, whose launches another plane may hold
        self.launches = launches if launches is not None and launches.wanted else None
        self.launch_stat = index.stat_ids.get("correlation_id") if self.launches is not None else None
        self.carries_correlation = _Carriers()
        self.clock_origin_ns = 0
        self.spans = xplane_steps.HostSpans()

    def read(self, plane_key: tuple[str, str], events: OpEvents) -> HostOps:
        self.read_lines()
        return self.finish(plane_key, events)

    def read_lines(self) -> None:
        """Every line's events, after which the reader holds nothing of the file."""
        clock_origin_ns = None  # the plane's own origin keeps picosecond times well inside int64
        lines, self.lines = self.lines, None
        for line_number, line in enumerate(lines):
            if clock_origin_ns is None:
                clock_origin_ns = self.clock_origin_ns = line.timestamp_ns
            self._read_line(line, line_number, (line.timestamp_ns - clock_origin_ns) * 1000)
        del self.memory_events  # its samples are the evidence's: the rest goes

    def _read_line(self, line, line_number: int, line_start_ps: int) -> None:
        index, stat_ids = self.index, self.index.stat_ids
        # the line's op events: starts, durations, codes, eager flags
        found: tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray], list[np.ndarray]] = ([], [], [], [])
        launches: tuple[list[np.ndarray], list[np.ndarray]] | None = (
            ([], []) if self.launch_stat is not None else None
        )  # starts, correlation ids
        execution = execution_thread(line.name)
        reads_user_ranges = bool(index.user_range_names) and not is_tf_thread(line.name)
        # a line whose clock is wildly off the plane's cannot be placed in its steps
        placeable = abs(line_start_ps) < _MAX_DURATION_PS
        for batch in line.event_batches():
            ints = event_ints(batch)
            is_op = self._take_ops(batch, ints, execution, line.timestamp_ns, found)
            self._take_pipeline_and_calls(batch, ints, line_start_ps)
            if self.memory_events.event_ids:
                self.memory_events.read(batch, ints, line.timestamp_ns)
            if reads_user_ranges:
                self._take_user_ranges(batch, ints, (self.plane_name, line_number), line_start_ps)
            if stat_ids.get("step_num") is not None and not is_op.all():
                self._take_steps(batch, ints, np.flatnonzero(~is_op), line_start_ps)
            if launches is not None and not is_op.all():
                self._take_launches(batch, ints, np.flatnonzero(~is_op), line_start_ps, launches)
            step_codes = index.step_events.codes(ints[:, 0])
            counted = step_codes >= 0
            if placeable and counted.any():
                self.spans.add_others(ints[counted, 1] + line_start_ps, ints[counted, 2], step_codes[counted])
            del batch  # one batch of protobuf events alive at a time
        starts, durations, codes, eager_flags = found
        ops = None
        if codes:
            line_durations, line_codes = np.concatenate(durations), np.concatenate(codes)
            _check_durations(line_durations, index.op_keys, line_codes, line.name)
            line_starts = np.concatenate(starts) + (line_start_ps if placeable else 0)
            self.op_lines.append((line_starts, line_durations, line_codes, np.concatenate(eager_flags), placeable))
            ops = (line_starts, line_durations, line_codes, index.op_keys)
            if placeable and execution is not None:  # tf.data's threads run beside the step
                self.spans.add_ops(*self.op_lines[-1][:4])
        if self.launches is not None and placeable:
            launched = tuple(map(np.concatenate, launches)) if launches and launches[0] else None
            self.launches.add_line(line.id, self.clock_origin_ns, ops, launched)

    def _take_ops(self, batch, ints: np.ndarray, execution: str | None, line_ns: int, found: tuple) -> np.ndarray:
        """Keep the batch's op events in ``found``, count them by kind, and note the first
        shaped op; return which events are ops."""
        index, kinds = self.index, self.evidence.kinds
        code = index.lookup.codes(ints[:, 0]) if index.lookup else np.full(len(ints), -1)
        if index.lookup:
            kinds["tf"] += int((code >= 0).sum())
            if execution is not None:
                self.ran[execution] += int(index.model_op[code[code >= 0]].sum())
        if index.stat_ids.get("hlo_op") is not None:
            code = index.hlo.codes(batch, ints[:, 0], code)
        is_op = code >= 0
        if is_op.any():
            starts, durations, codes, eager_flags = found
            starts.append(ints[is_op, 1])
            durations.append(ints[is_op, 2])
            codes.append(code[is_op])
            eager_flags.append(np.isin(ints[is_op, 0], index.eager_ids))
            shape_stat = index.stat_ids.get("shape")
            if shape_stat is not None:
                shaped = _first_shaped_op(batch, np.flatnonzero(is_op), ints[:, 1], shape_stat)
                if shaped:
                    shaped = (line_ns * 1000 + shaped[0], shaped[1])  # compared across planes
                    if self.first_shape is None or shaped[0] < self.first_shape[0]:
                        self.first_shape = shaped
        return is_op

    def _take_pipeline_and_calls(self, batch, ints: np.ndarray, line_start_ps: int) -> None:
        """Keras 2's step function calls, the batch datasets' declared batch sizes and the
        batches tf.data's outermost iterators delivered."""
        index, evidence = self.index, self.evidence
        batch_size_stat, shapes_stat = index.stat_ids.get("batch_size"), index.stat_ids.get("shapes")
        if index.step_functions:
            calls = np.isin(ints[:, 0], index.step_functions)
            self.step_calls += int(calls.sum())
            self.call_ranges.append(ints[calls, 1:] + [line_start_ps, 0])
        if index.batch_datasets and batch_size_stat is not None:
            for position in np.flatnonzero(np.isin(ints[:, 0], index.batch_datasets))[:_SHAPE_PROBES].tolist():
                size = _int_stat(batch[position], batch_size_stat, index.stat_names)
                if size:
                    evidence.declared_batches[size] += 1
        if index.root_names and shapes_stat is not None:
            for position in np.flatnonzero(np.isin(ints[:, 0], list(index.root_names))).tolist():
                size = _input_batch(batch[position], shapes_stat, index.stat_names)
                if size:
                    evidence.input_batches[size, index.root_names[int(ints[position, 0])]] += 1

    def _take_user_ranges(self, batch, ints: np.ndarray, line_id: tuple, line_start_ps: int) -> None:
        index = self.index
        for position in np.flatnonzero(np.isin(ints[:, 0], index.user_range_ids)).tolist():
            if not any(index.stat_names.get(stat.metadata_id) in TF_RANGE_STATS for stat in batch[position].stats):
                self.evidence.user_ranges.add(
                    index.user_range_names[int(ints[position, 0])],
                    line_id,
                    line_start_ps + int(ints[position, 1]),
                    int(ints[position, 2]),
                )

    def _take_launches(self, batch, ints: np.ndarray, candidates: np.ndarray, line_start_ps: int, found) -> None:
        """Keep the kernel launches among the non-op events ``candidates`` in ``found``:
        their starts (on the plane's clock) and correlation ids, read from the wire where
        the C helper was built."""
        stat = self.launch_stat
        carries = self.carries_correlation.flags(
            ints[candidates, 0], lambda position: _find_stat(batch[int(candidates[position])], stat) is not None
        )
        rows = candidates[carries]
        if not len(rows):
            return
        correlations = np.zeros(len(rows), dtype=np.int64)
        known = np.zeros(len(rows), dtype=bool)
        unread = np.arange(len(rows))
        wire_stats = getattr(batch, "wire_stats", None)
        carriers = self.carries_correlation.carriers()
        stats = wire_stats(carriers, {stat: 0}, 1) if wire_stats is not None else None
        if stats is not None and len(stats.indices):
            at = np.searchsorted(stats.indices, rows).clip(max=len(stats.indices) - 1)
            read = stats.indices[at] == rows
            kinds = stats.kinds[at, 0]
            known[read] = ((kinds == STAT_INT64) | (kinds == STAT_UINT64))[read]
            correlations[read] = np.where(known, stats.values[at, 0], 0)[read]
            unread = np.flatnonzero(~read)
        for row in unread.tolist():  # parsed: the last such stat, as the wire's arrays keep
            value = None
            for event_stat in batch[int(rows[row])].stats:
                if event_stat.metadata_id == stat:
                    value = int_value(event_stat)
            if value is not None:
                correlations[row], known[row] = (value if value < 1 << 63 else value - (1 << 64)), True
        found[0].append(ints[rows[known], 1] + line_start_ps)
        found[1].append(correlations[known])

    def _take_steps(self, batch, ints: np.ndarray, candidates: np.ndarray, line_start_ps: int) -> None:
        """Record ``step_num`` markers among the non-op events ``candidates`` of a batch (the
        longest marker of each step number, on the host clock), and the ``batch_size`` a
        marker carries (Keras 2's step event: ``fit()``'s argument when it batches arrays
        itself, the text ``None`` when it was given a dataset). Whether an event metadata
        carries a step number is learnt from its first event."""
        step_stat, batch_size_stat = self.index.stat_ids["step_num"], self.index.stat_ids.get("batch_size")
        ranges = self.marker_ranges
        carries = self.carries_step.flags(
            ints[candidates, 0], lambda position: _step_of(batch[int(candidates[position])], step_stat) is not None
        )
        for position in candidates[carries].tolist():
            event = batch[position]
            step = _step_of(event, step_stat)
            if step is not None:
                if step not in ranges or event.duration_ps > ranges[step][1]:
                    ranges[step] = (line_start_ps + event.offset_ps, event.duration_ps)
                size = _int_stat(event, batch_size_stat, self.index.stat_names) if batch_size_stat is not None else None
                if size:
                    self.evidence.step_batches[size] += 1

    def finish(self, plane_key: tuple[str, str], events: OpEvents) -> HostOps:
        """The plane's share of the session's evidence, and its ops with their steps, once
        its lines are read (``read_lines``)."""
        evidence, index = self.evidence, self.index
        evidence.kinds["xla"] += index.hlo.events
        for step, (_, duration) in self.marker_ranges.items():
            evidence.steps[step] = max(evidence.steps.get(step, 0), duration)
        bounds = _step_bounds(self.marker_ranges, self.call_ranges)
        events.step_count = max(events.step_count, len(bounds))
        durations = []
        if self.call_ranges:
            ranges = np.concatenate(self.call_ranges)
            durations = ranges[np.argsort(ranges[:, 0], kind="stable"), 1].tolist()
        evidence.step_calls[plane_key] = self.step_calls
        evidence.call_times[plane_key] = durations
        shape = self.first_shape
        if shape and (evidence.first_shape is None or shape[0] < evidence.first_shape[0]):
            evidence.first_shape = shape
        evidence.kinds["tf_graph"] += self.ran["graph"]
        evidence.kinds["tf_eager"] += self.ran["eager"]
        plane_is_eager = ran_eagerly(self.ran["graph"] + index.hlo.events, self.ran["eager"])  # XLA's: a graph's
        # the XLA ops found while reading (``_HloOps``) came after the index: a compiled
        # graph's ops, never left out
        left_out = np.zeros(len(index.op_keys), dtype=bool)
        if not plane_is_eager:
            left_out[: len(index.only_eager)] = index.only_eager
        categories = xplane_steps.op_codes(index.op_keys)
        spans = self.spans.reduced(bounds, categories, not plane_is_eager)
        if spans is not None:
            spans.origin_ns = self.clock_origin_ns
            evidence.step_spans.append((plane_key[0], spans))
        elif not len(bounds):
            evidence.pending_hosts[plane_key[0]] = xplane_steps.PendingHost(
                self.spans, categories, not plane_is_eager, self.clock_origin_ns
            )
        del self.spans
        hlo_codes = sorted({code for code in index.hlo.code_of.values() if code >= 0})
        xla = (
            _XlaOps(
                np.asarray(hlo_codes, dtype=np.int64), index.hlo.programs, evidence.xla_programs(), index.hlo.ran_by
            )
            if hlo_codes
            else None
        )
        return HostOps(events, index.op_keys, self.memory, self.op_lines, left_out, plane_is_eager, bounds, xla)


@dataclasses.dataclass
class _XlaOps:
    """A host plane's XLA ops (their codes), the programs that ran and the session's
    programs: what their work is counted on."""

    codes: np.ndarray
    ran: set[int]
    programs: XlaPrograms
    ran_by: dict[int, set[int]]  # op code -> the programs its events name

    def framework_rows(self, keys: list[tuple[str, str]]) -> tuple[list, list, np.ndarray]:
        """``framework_rows`` of the XLA ops among ``keys``, each looked up in the programs
        its events name (in those that ran, where they name none)."""
        return framework_rows(keys, self.codes.tolist(), lambda code: self.ran_by.get(code) or self.ran, self.programs)

    def rows(
        self, keys: list[tuple[str, str]], codes: list[np.ndarray], durations_ps: list[np.ndarray], rows: list | None
    ) -> dict:
        """``WORK_COLUMNS`` of the ops' executions (``codes`` into ``keys``, with their
        times), each counted in its row of ``rows``."""
        codes_of, durations = np.concatenate(codes), np.concatenate(durations_ps)
        executions = np.bincount(codes_of, minlength=len(keys))
        times_us = np.bincount(codes_of, weights=durations / PS_PER_US, minlength=len(keys))
        costs = xla_costs(keys, self.codes.tolist(), self.ran, self.programs)
        return work_rows(keys, executions, times_us, costs, False, rows)


@dataclasses.dataclass
class HostOps:
    """A host plane's ops, held until the file's bytes are let go: ``add`` puts them into
    ``events``, each op event in its step, eager ops left out where the plane ran a graph
    (they are its input pipeline's and callbacks' ops, not the model's)."""

    events: OpEvents
    op_keys: list[tuple[str, str]]
    memory: _Allocations
    op_lines: list[tuple]
    left_out: np.ndarray
    plane_is_eager: bool
    bounds: np.ndarray
    xla: _XlaOps | None = None  # its XLA ops, whose work their programs tell

    def add(self) -> None:
        executed: tuple[list, list] = ([], [])  # every line's op codes and times, for the XLA ops' work
        # the XLA ops' rows: each instruction its framework op's, where its program says
        rows, keys, renumbered = self.xla.framework_rows(self.op_keys) if self.xla else (None, self.op_keys, None)
        self.memory.attribute(self.events, self.op_keys, self.left_out, rows)
        while self.op_lines:  # each line's arrays are let go once added
            starts, durations, codes, eager, placeable = self.op_lines.pop(0)
            if not self.plane_is_eager and eager.any():
                starts, durations, codes = starts[~eager], durations[~eager], codes[~eager]
            _add_host_line(
                self.events,
                keys,
                starts,
                durations,
                codes if renumbered is None else renumbered[codes],
                self.bounds if placeable else self.bounds[:0],
            )
            if self.xla is not None:
                executed[0].append(codes)
                executed[1].append(durations)
        if self.xla is not None and executed[0]:
            self.events.work.append(self.xla.rows(self.op_keys, *executed, rows))


def _step_bounds(marker_ranges: dict[int, tuple[int, int]], call_ranges: list[np.ndarray]) -> np.ndarray:
    """(steps, 2) array of each profiled step's start and end on the host clock, in start
    order: Keras 2's step function calls where they outnumber the step markers (it marks
    one step of several), else the markers; empty with fewer than two steps."""
    calls = np.concatenate(call_ranges) if call_ranges else np.zeros((0, 2), dtype=np.int64)
    if len(calls) > len(marker_ranges):
        ranges = calls
    else:
        ranges = np.asarray(list(marker_ranges.values()), dtype=np.int64).reshape(-1, 2)
    ranges = ranges[np.argsort(ranges[:, 0], kind="stable")]
    bounds = np.column_stack([ranges[:, 0], ranges[:, 0] + ranges[:, 1]])
    return bounds if len(bounds) >= 2 else np.zeros((0, 2), dtype=np.int64)


class _HloOps:
    """XLA's compiled ops on the host (``jit_compile=True`` on a CPU): events that carry an
    ``hlo_op`` stat instead of a TF op's ``name:type``, each an op as ``hlo_op`` names and
    types it. Whether a metadata's events are HLO ops is learnt from its first event."""

    def __init__(
        self, hlo_stat: int | None, program_stat: int | None, op_keys: list, key_codes: dict, names: dict[int, str]
    ):
        self.hlo_stat, self.program_stat = hlo_stat, program_stat
        self.op_keys, self.key_codes, self.names = op_keys, key_codes, names
        self.code_of: dict[int, int] = {}  # metadata id -> op code, -1 for a non-HLO event
        self.programs: set[int] = set()  # the programs the first event of each op names: those that ran
        self.ran_by: dict[int, set[int]] = {}  # op code -> the programs the first events of its metadata name
        self.events = 0

    def codes(self, batch, ids: np.ndarray, codes: np.ndarray) -> np.ndarray:
        unknown = np.flatnonzero(codes < 0)
        if not len(unknown):
            return codes
        unique, first = np.unique(ids[unknown], return_index=True)
        for metadata_id, index in zip(unique.tolist(), first.tolist()):
            if metadata_id not in self.code_of:
                self.code_of[metadata_id] = self._classify(metadata_id, batch[int(unknown[index])])
        found = np.fromiter((self.code_of[i] for i in ids[unknown].tolist()), dtype=np.int64, count=len(unknown))
        codes = codes.copy()
        codes[unknown] = found
        self.events += int((found >= 0).sum())
        return codes

    def _classify(self, metadata_id: int, event) -> int:
        if _find_stat(event, self.hlo_stat) is None:
            return -1
        program = _find_stat(event, self.program_stat)  # None where the plane has no such stat
        program_id = int_value(program) if program is not None else None
        if program_id is not None:
            self.programs.add(program_id)
        key = hlo_op(self.names.get(metadata_id, ""))
        if key not in self.key_codes:
            self.key_codes[key] = len(self.op_keys)
            self.op_keys.append(key)
        if program_id is not None:
            self.ran_by.setdefault(self.key_codes[key], set()).add(program_id)
        return self.key_codes[key]


_TF_DTYPES = {1: "fp32", 2: "fp64", 14: "bf16", 19: "fp16"}  # tensorflow DataType


class _MemoryEvents:
    """A host plane's ``MemoryAllocation`` and ``MemoryDeallocation`` events: the bytes each
    op asked for (``_Allocations``), the memory in use (``MemoryInUse``) and the shapes
    allocated (the batch size's vote). Tens of thousands in a long profile, each with a
    dozen stats: so their stats are read from the wire into arrays where the C helper was
    built (``_read_wire``), else from the parsed events (``_read_parsed``), with the same
    results."""

    # the stats read, in the columns of EventStats
    STATS = ("tf_op", "shape", "allocator_name", "bytes_allocated", "requested_bytes", "allocation_bytes", "data_type")

    def __init__(
        self,
        event_names: dict[int, str],
        stat_names: dict[int, str],
        memory: _Allocations,
        in_use: MemoryInUse,
        allocated_shapes: dict[str, set[str]],
    ):
        self.allocations = [key for key, name in event_names.items() if name == "MemoryAllocation"]
        self.deallocations = [key for key, name in event_names.items() if name == "MemoryDeallocation"]
        self.event_ids = self.allocations + self.deallocations
        self.stat_names, self.memory, self.in_use, self.allocated_shapes = stat_names, memory, in_use, allocated_shapes
        # several ids of one name share a column: the dict of ``_read_parsed`` keeps the last stat of a name
        self.stat_columns = {key: self.STATS.index(name) for key, name in stat_names.items() if name in self.STATS}
        self.in_use_stats = {key: name for key, name in stat_names.items() if name in MemoryInUse.STATS}

    def read(self, batch, ints: np.ndarray, line_ns: int) -> None:
        """The memory events of a batch (``ints``: its ``event_ints``)."""
        indices = np.flatnonzero(np.isin(ints[:, 0], self.event_ids))
        if not len(indices):
            return
        wire_stats = getattr(batch, "wire_stats", None)
        stats = wire_stats(self.event_ids, self.stat_columns, len(self.STATS)) if wire_stats is not None else None
        # the same events protobuf parsed, or the parsed events answer (a safeguard: the tests
        # check both paths agree)
        if stats is not None and np.array_equal(stats.indices, indices):
            self._read_wire(stats, ints[indices], line_ns)
        else:
            self._read_parsed(batch, ints, line_ns)

    def _read_parsed(self, batch, ints: np.ndarray, line_ns: int) -> None:
        """An event at a time, from the parsed events' stats."""
        stat_names, in_use_stats = self.stat_names, self.in_use_stats
        for index in np.flatnonzero(np.isin(ints[:, 0], self.allocations)).tolist():
            stats = {stat_names.get(stat.metadata_id): stat for stat in batch[index].stats}
            tf_op = stat_text(stats["tf_op"], stat_names) if "tf_op" in stats else ""
            if "shape" in stats and len(self.allocated_shapes) < _MAX_ALLOCATED_SHAPES:
                self.allocated_shapes.setdefault(stat_text(stats["shape"], stat_names), set()).add(tf_op)
            self.memory.add(tf_op, stats, stat_names)
            self.in_use.add(stats, stat_names, line_ns, int(ints[index, 1]))
        # a free names no op; it only tells what the allocator holds after it
        for index in np.flatnonzero(np.isin(ints[:, 0], self.deallocations)).tolist():
            stats = {
                in_use_stats[stat.metadata_id]: stat for stat in batch[index].stats if stat.metadata_id in in_use_stats
            }
            self.in_use.add(stats, stat_names, line_ns, int(ints[index, 1]))

    def _read_wire(self, stats: EventStats, ints: np.ndarray, line_ns: int) -> None:
        """``_read_parsed`` on arrays: the same rules, in the same order (a batch's
        allocations before its frees)."""
        texts = Texts()
        wire_texts = np.fromiter(map(texts.code, stats.texts), dtype=np.int64, count=len(stats.texts))
        kinds = {name: stats.kinds[:, column] for column, name in enumerate(self.STATS)}
        values = {name: stats.values[:, column] for column, name in enumerate(self.STATS)}

        def text_codes(name: str, rows: np.ndarray) -> np.ndarray:
            return stat_text_codes(kinds[name][rows], values[name][rows], wire_texts, self.stat_names, texts)

        def numbers(name: str, rows: np.ndarray) -> np.ndarray:
            return _stat_numbers(kinds[name][rows], values[name][rows])

        def holding(name: str, rows: np.ndarray) -> np.ndarray:
            return rows[kinds[name][rows] != STAT_ABSENT]

        is_allocation = np.isin(ints[:, 0], self.allocations)
        allocations, frees = np.flatnonzero(is_allocation), np.flatnonzero(~is_allocation)
        tf_ops = text_codes("tf_op", allocations)
        shaped = np.flatnonzero(kinds["shape"][allocations] != STAT_ABSENT)
        if len(shaped) and len(self.allocated_shapes) < _MAX_ALLOCATED_SHAPES:
            self._add_shapes(texts.names, text_codes("shape", allocations[shaped]), tf_ops[shaped])
        requested = numbers("requested_bytes", allocations)
        # ``number(requested_bytes) or number(allocation_bytes)``
        sizes = np.where(requested != 0, requested, numbers("allocation_bytes", allocations))
        self.memory.add_batch(texts.names, tf_ops, sizes, numbers("data_type", allocations))

        sampled = np.concatenate([holding("bytes_allocated", allocations), holding("bytes_allocated", frees)])
        allocators = np.full(len(sampled), texts.code("memory"))
        named = kinds["allocator_name"][sampled] != STAT_ABSENT
        allocators[named] = text_codes("allocator_name", sampled[named])
        self.in_use.add_batch(texts.names, allocators, line_ns, ints[sampled, 1], numbers("bytes_allocated", sampled))

    def _add_shapes(self, names: list[str], shapes: np.ndarray, tf_ops: np.ndarray) -> None:
        """Each (shape, tf_op) pair in order, as ``_read_parsed`` adds them: only a pair's
        first event can change anything (the set holds the op from then on, or the cap was
        reached, and it stays reached)."""
        _, first = np.unique(shapes * len(names) + tf_ops, return_index=True)
        first.sort()
        for shape, tf_op in zip(shapes[first].tolist(), tf_ops[first].tolist()):
            if len(self.allocated_shapes) >= _MAX_ALLOCATED_SHAPES:
                break
            self.allocated_shapes.setdefault(names[shape], set()).add(names[tf_op])


def _stat_numbers(kinds: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``number`` of stats as ``EventStats`` holds them."""
    numbers = np.zeros(len(kinds))
    # a uint64 of 2**63 or more has a negative int64's bits: left out like any other >= 2**62
    integer = ((kinds == STAT_INT64) | (kinds == STAT_UINT64)) & (values >= 0) & (values < 1 << 62)
    numbers[integer] = values[integer]
    double = np.flatnonzero(kinds == STAT_DOUBLE)
    doubles = values[double].view(np.float64)
    in_range = (doubles >= 0) & (doubles < float(1 << 62))  # NaN is not
    numbers[double[in_range]] = doubles[in_range]
    return numbers


class _Allocations:
    """TF's ``MemoryAllocation`` events: bytes each op asked for (``requested_bytes``;
    its ``tf_op`` stat names it). Frees carry no op, so an op's net memory is not known;
    memory in use is ``MemoryInUse``'s."""

    def __init__(self, dtypes: collections.Counter):
        self.requested: dict[str, float] = collections.defaultdict(float)
        self.dtypes = dtypes  # the precision's evidence: dtypes of what the model's ops allocate
        self._optimizer_scope: dict[str, bool] = {}  # tf_op -> is_optimizer_scope: a few hundred ops repeat

    def add(self, tf_op: str, stats: dict, stat_names: dict[int, str]) -> None:
        size = number(stats.get("requested_bytes")) or number(stats.get("allocation_bytes"))
        if size and tf_op:
            self.requested[tf_op] += size
            dtype = _TF_DTYPES.get(int(number(stats.get("data_type"))))
            if dtype and not is_optimizer_scope(tf_op):  # optimizer state keeps the variables' dtype
                self.dtypes[dtype] += 1

    def add_batch(self, names: list[str], tf_ops: np.ndarray, sizes: np.ndarray, data_types: np.ndarray) -> None:
        """``add`` of many allocations in order: ``tf_ops`` index ``names``, ``sizes`` and
        ``data_types`` are the ``number``s of the stats."""
        counted = np.flatnonzero((sizes != 0) & (tf_ops != 0))  # names[0] is ""
        if not len(counted):
            return
        tf_ops, sizes, data_types = tf_ops[counted], sizes[counted], data_types[counted]
        # one by one, in order: a float sum depends on its order, and both paths must give the same bits
        for tf_op, size in zip(tf_ops.tolist(), sizes.tolist()):
            self.requested[names[tf_op]] += size
        dtypes = data_types.astype(np.int64)  # truncated as int() truncates: all are in [0, 2**62)
        unique_ops = np.unique(tf_ops)
        optimizer = np.zeros(len(names), dtype=bool)
        optimizer[unique_ops] = [self._is_optimizer_scope(names[tf_op]) for tf_op in unique_ops.tolist()]
        kept = dtypes[np.isin(dtypes, list(_TF_DTYPES)) & ~optimizer[tf_ops]]
        unique, first, counts = np.unique(kept, return_index=True, return_counts=True)
        for index in np.argsort(first).tolist():  # the Counter's keys in the order first seen
            self.dtypes[_TF_DTYPES[int(unique[index])]] += int(counts[index])

    def _is_optimizer_scope(self, tf_op: str) -> bool:
        scope = self._optimizer_scope.get(tf_op)
        if scope is None:
            scope = self._optimizer_scope[tf_op] = is_optimizer_scope(tf_op)
        return scope

    def attribute(
        self, events: OpEvents, op_keys: list[tuple[str, str]], left_out: np.ndarray, rows: list | None = None
    ) -> None:
        """Each op's requested bytes, to the op of that name (ops ``left_out`` get none), in
        its row of ``rows`` where given (an XLA instruction's: its framework op's)."""
        if not self.requested:
            return
        by_name = {name: code for code, (name, _) in enumerate(op_keys) if not left_out[code]}
        known = [(by_name[name], size) for name, size in self.requested.items() if name in by_name]
        if known:
            codes, sizes = zip(*known)
            events.add_memory(rows or op_keys, np.asarray(codes), np.asarray(sizes), net_known=False)


class _Carriers:
    """Which event metadata carry a stat (``step_num``, a correlation id), learnt from the
    first event of each: all events of one metadata carry the same stats."""

    def __init__(self):
        self._known: dict[int, bool] = {}
        self._lookup = IdLookup([], [])

    def flags(self, ids: np.ndarray, carries) -> np.ndarray:
        """Whether each event (``ids``: its metadata id) carries the stat; ``carries(position)``
        tells it for the event at a position of ``ids`` whose metadata is not learnt yet."""
        codes = self._lookup.codes(ids)  # 1 carries, 0 not, -1 not learnt yet
        if (codes < 0).any():
            unknown = np.flatnonzero(codes < 0)
            unique_ids, first = np.unique(ids[unknown], return_index=True)
            for metadata_id, position in zip(unique_ids.tolist(), unknown[first].tolist()):
                self._known[metadata_id] = carries(position)
            self._lookup = IdLookup(list(self._known), [int(flag) for flag in self._known.values()])
            codes = self._lookup.codes(ids)
        return codes == 1

    def carriers(self) -> list[int]:
        return [key for key, flag in self._known.items() if flag]


# No profiled op lasts 11 days (10^18 ps, near the int64 limit of 106 days): a negative or
# longer duration is a broken writer.
_MAX_DURATION_PS = 10**18


def _check_durations(durations: np.ndarray, op_keys, codes: np.ndarray, line_name: str) -> None:
    bad = np.flatnonzero((durations < 0) | (durations > _MAX_DURATION_PS))
    if len(bad):
        first = int(bad[0])
        raise BrokenEvents(
            f"line {line_name!r}: {len(bad)} op events have a negative or impossibly long duration, "
            f"the first {op_keys[codes[first]][0]!r} with {int(durations[first]):,} ps; the profiler "
            "wrote broken events"
        )


def _add_host_line(
    events: OpEvents, op_keys, starts: np.ndarray, durations: np.ndarray, codes: np.ndarray, step_bounds: np.ndarray
) -> None:
    order = start_order(starts, durations)
    starts, durations, codes = starts[order], durations[order], codes[order]
    self_ps, parents = self_times(starts, durations)
    events.crossings += crossing_events(starts, durations, parents)
    events.add_host_codes(
        op_keys,
        codes,
        durations / PS_PER_US,
        self_ps / PS_PER_US,
        steps=steps_of(starts, step_bounds) if len(step_bounds) else None,
    )


def _step_of(event, step_stat: int) -> int | None:
    stat = _find_stat(event, step_stat)
    return None if stat is None else stat.int64_value or stat.uint64_value


def _find_stat(event, stat_id: int | None):
    """The event's first stat with metadata ``stat_id``, or None (always, for no id)."""
    return next((stat for stat in event.stats if stat.metadata_id == stat_id), None)


# Old TF writes a ``shape`` stat on op events; current TF writes none there (only on
# allocation events), so only the earliest few op events of a batch are looked at.
_SHAPE_PROBES = 64


def _first_shaped_op(batch, op_indices: np.ndarray, offsets: np.ndarray, shape_stat: int) -> tuple[int, int] | None:
    """(offset_ps, batch size) of the earliest of the first op events that has a shape."""
    earliest = op_indices[np.argsort(offsets[op_indices], kind="stable")[:_SHAPE_PROBES]]
    for index in earliest.tolist():
        event = batch[index]
        stat = _find_stat(event, shape_stat)
        size = leading_dim(stat.str_value) if stat is not None else None
        if size:
            return event.offset_ps, size
    return None


# The outermost tf.data iterator (``Iterator::Model`` in TF 2.4, ``Iterator::Root`` since):
# each of its GetNext events delivers one element to the training step, and its
# ``shapes`` stat lists that element's tensor shapes (``?`` where the last batch may be
# partial; the batch dataset's own ``batch_size`` stat says it then).


def _int_stat(event, stat_id: int, stat_names: dict[int, str]) -> int | None:
    stat = _find_stat(event, stat_id)
    if stat is None:
        return None
    which = stat.WhichOneof("value")
    value = getattr(stat, which) if which in ("int64_value", "uint64_value") else stat_text(stat, stat_names)
    try:
        value = int(value)
    except (TypeError, ValueError):
        return None
    return value if is_batch_size(value) else None


_MAX_ALLOCATED_SHAPES = 10_000  # distinct shapes kept for the vote: plenty, and bounded on hostile files


def _input_batch(event, shapes_stat: int, stat_names: dict[int, str]) -> int | None:
    stat = _find_stat(event, shapes_stat)
    return shared_leading_dim(stat_text(stat, stat_names)) if stat is not None else None
