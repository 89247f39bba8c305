"""Reader for ``<host>.xplane.pb`` (TensorFlow >= 2.2 profiler sessions).

Host ops are events named ``<op_name>:<op_type>`` on the ``/host:CPU`` plane; their
self time subtracts nested TF-op events on the same line, as xprof's TensorFlow
Stats tool does. Device ops are the kernels and memcpys on the ``Stream #`` lines of
``/device:GPU:N`` planes, attributed to a TF op through the ``tf_op`` stat (current
TF) or the ``annotation`` / ``level 0`` stats (TF 2.4 era). Derived lines repeat the
same kernels and are not read as ops; a "TensorFlow Ops" line (TF 2.2-2.4) says which
kernels are one execution of their op, the pieces it cuts an execution in put back
together by the host's kernel launches or the kernels' step groups (``_read_device_plane``).
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import operator
import re
from collections.abc import Sequence

import numpy as np
from google.protobuf.message import DecodeError

from tb_opcompare.errors import OverLimit, ProfileError
from tb_opcompare.ingest.readers import xplane_steps
from tb_opcompare.ingest.readers.device_executions import (
    PS_PER_US,
    InvocationIds,
    KernelTies,
    LaunchIndex,
    add_executed_kernels,
    add_kernel_totals,
    add_scoped_kernels,
    enclosing_ops,
    first_appearance_keys,
)
from tb_opcompare.ingest.readers.memory_timeline import highest_per_device, memory_timeline
from tb_opcompare.ingest.readers.tf_ops import (
    EAGER_OP_PREFIX,
    PIPELINE_ROOTS,
    STEP_EVENT_BATCH,
    STEP_FUNCTION,
    TF_RANGE_STATS,
    allocation_batch_vote,
    batch_size_evidence,
    execution_thread,
    is_batch_dataset,
    is_optimizer_scope,
    is_tf_range,
    is_tf_thread,
    leading_dim,
    op_from_annotation,
    parse_host_op,
    parse_tf_op,
    ran_eagerly,
    settled_steps,
    shared_leading_dim,
    tf_execution,
)
from tb_opcompare.ingest.readers.xla_cost import XlaPrograms, work_rows
from tb_opcompare.ingest.readers.xla_hlo import METADATA_PLANE, PROGRAM_STAT, HloEvidence
from tb_opcompare.ingest.readers.xplane_wire import (
    STAT_ABSENT,
    STAT_DOUBLE,
    STAT_INT64,
    STAT_REF,
    STAT_REPEATED,
    STAT_STR,
    STAT_UINT64,
    EventCount,
    EventStats,
    TooManyElements,
    TooManyPlanes,
    split_space,
)
from tb_opcompare.schema.dimensions import is_batch_size
from tb_opcompare.schema.events import (
    ARGUMENT_SOURCE,
    OpEvents,
    ParsedProfile,
    ProfileFacts,
    crossing_events,
    crossing_warning,
    precision_from_dtypes,
    self_times,
    start_order,
    steps_of,
)
from tb_opcompare.schema.groups import first_appearance_ids

FORMAT = "xplane"


def read_xplane_session(
    paths: Sequence[str], read_bytes, max_parsed_bytes: int | None = None, max_read_bytes: int | None = None
) -> ParsedProfile:
    """Read one profiling session (one xplane per host) into a single ParsedProfile.

    ``read_bytes(path) -> bytes`` is the file-system layer (local or remote).
    ``max_parsed_bytes`` bounds what one plane's metadata may take once parsed (the read's
    memory budget beyond the file itself); ``max_read_bytes`` (the read's whole memory
    limit) how many events the session's files may hold together (``EventCount``).

    The steps: each file's planes are read (``_read_file``: the host's TF ops and the
    evidence around them, the devices' kernels); the host ops are added once the file's
    bytes are let go; then the evidence settles the profile's facts (``_settle_facts``).
    """
    events = OpEvents()
    facts = ProfileFacts(format=FORMAT, framework="TensorFlow")
    evidence = _SessionEvidence()
    budget = _ReadBudget(max_parsed_bytes, EventCount(max_read_bytes))
    for path in paths:
        host_ops = _read_file(path, read_bytes, budget, events, facts, evidence)
        while host_ops:  # the file's bytes are gone: its op times may take their place
            host_ops.pop(0).add()
    if not len(events):
        raise ProfileError(paths[0], "no TensorFlow op events in this profile")
    _settle_facts(facts, events, evidence)
    return ParsedProfile(facts, events, annotations=evidence.user_ranges.table())


@dataclasses.dataclass
class _ReadBudget:
    """What a session's read may take: a plane's metadata (bytes once parsed), and the
    events of all its files (counted as they are read)."""

    max_parsed_bytes: int | None
    events: EventCount


@dataclasses.dataclass
class _SessionEvidence:
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
    in_use: _MemoryInUse = dataclasses.field(default_factory=lambda: _MemoryInUse())  # every host plane's
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


def _read_file(
    path: str, read_bytes, budget: _ReadBudget, events: OpEvents, facts: ProfileFacts, evidence
) -> list[_HostOps]:
    """Read one host's xplane: device kernels (and the host's step count) into ``events``,
    the framework and device into ``facts``, the rest into ``evidence``; return each host
    plane's ops, to be added once the file is let go (so that its bytes and the op times
    are never in memory together)."""
    space = _parse(path, read_bytes(path), budget)
    host_ops = []
    # the host's kernel launches place the device's kernels in the executions a TensorFlow
    # Ops line cut apart: the host planes are read before the device planes
    launches = _HostLaunches(wanted=space.has_line("/device:", "TensorFlow Ops"))
    try:
        for plane in space.planes(rank=_plane_rank):
            if plane.name == METADATA_PLANE:
                evidence.hlo.add(plane)
                jax_version = _plane_stats(plane, _stat_names(plane)).get("jax_version")
                if isinstance(jax_version, str) and jax_version:
                    facts.framework = f"JAX {jax_version}"
            elif plane.name.startswith("/host:"):
                reader = _HostPlaneReader(
                    plane, evidence, names_tf_ops=not (facts.framework or "").startswith("JAX"), launches=launches
                )
                host_ops.append(reader.read((path, plane.name), events))
            elif plane.name.startswith("/device:"):
                launches.resolve()
                spans = _device_spans(evidence, path, plane)
                kind, name, plane_steps = _read_device_plane(plane, events, evidence, launches, spans)
                if kind:
                    evidence.device_names.append(name)
                    facts.device = kind
                    facts.device_properties = facts.device_properties or _device_properties(plane)
                    if len(plane_steps) > len(evidence.device_steps):
                        evidence.device_steps = plane_steps
    except _BrokenEvents as error:
        raise ProfileError(path, f"plane {space.current!r}, {error}") from None
    except TooManyElements as error:
        raise OverLimit(
            path,
            f"{error}, more than this machine's memory limit allows (memory guard). Raise it "
            "with --opcompare_max_read_gb or `tb-opcompare --max-read-gb` if the file is a "
            "real profile",
        ) from None
    except (DecodeError, RuntimeError, ValueError) as error:
        raise ProfileError(
            path, f"plane {space.current!r} is not valid protobuf (the file may be truncated or corrupt): {error}"
        ) from None
    finally:
        evidence.pending_hosts.pop(path, None)  # its devices are read: a later file's are not its
    return host_ops


def _device_spans(evidence: _SessionEvidence, path: str, plane) -> xplane_steps.StepSpans | None:
    """The step split a device plane's kernels join: its file's host plane's, where the host
    marked the steps; else, where the host marked none, one over this device's own Steps
    line (TF 2.2-2.4)."""
    if evidence.step_spans and evidence.step_spans[-1][0] == path and not evidence.step_spans[-1][1].per_device:
        return evidence.step_spans[-1][1]
    pending = evidence.pending_hosts.get(path)
    spans = pending.on_device_steps(plane) if pending is not None else None
    if spans is not None:
        evidence.step_spans.append((path, spans))
    return spans


def _plane_rank(name: str) -> int:
    """The order planes are read in: XLA's metadata first (what it says decides how the
    others read), then the host planes (their launches place the device's kernels), then
    the rest, each in file order."""
    return 0 if name == METADATA_PLANE else 1 if name.startswith("/host:") else 2


class _HostLaunches:
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


def _settle_facts(facts: ProfileFacts, events: OpEvents, evidence: _SessionEvidence) -> None:
    """The profile's facts from the session's evidence: its steps, batch size, precision,
    compiler, devices, memory and warnings."""
    if events.crossings:
        facts.warnings.append(crossing_warning(events.crossings))
    if evidence.device_names:
        facts.device_name = ", ".join(sorted(set(evidence.device_names)))
    _settle_steps(facts, evidence)
    _settle_breakdown(facts, events, evidence)
    _settle_batch_size(facts, evidence)
    _settle_precision_and_compiler(facts, evidence)
    if evidence.in_use.samples:
        facts.peak_memory_bytes.update(evidence.in_use.peaks())
        facts.memory_events = evidence.in_use.samples
        events.memory_timeline = evidence.in_use.timeline()


def _settle_steps(facts: ProfileFacts, evidence: _SessionEvidence) -> None:
    """The steps from the markers, else Keras 2's step function calls on the plane that
    made the most, else the busiest device's Steps line."""
    busiest = max(evidence.step_calls, key=lambda plane_key: evidence.step_calls[plane_key], default=None)
    calls = [duration / PS_PER_US for duration in evidence.call_times[busiest]] if busiest else []
    facts.steps, facts.steps_source, facts.step_times_us = settled_steps(
        {step: duration / PS_PER_US for step, duration in evidence.steps.items()},
        calls,
        [duration / PS_PER_US for duration in evidence.device_steps],
        "device plane",
    )
    if facts.step_times_us:
        facts.step_time_us = sum(facts.step_times_us) / len(facts.step_times_us)


def _settle_breakdown(facts: ProfileFacts, events: OpEvents, evidence: _SessionEvidence) -> None:
    """The step split of the host plane whose steps are the profile's (its step times)."""
    for _, spans in evidence.step_spans:
        if spans.walls_match(facts.step_times_us):
            events.breakdown = spans.rows()
            facts.step_breakdown_note = xplane_steps.NOTE
            return


def _settle_batch_size(facts: ProfileFacts, evidence: _SessionEvidence) -> None:
    """The batch size from the first shaped op, the input pipeline, the step events and
    the batch datasets (``batch_size_evidence``), else a vote of the allocated shapes."""
    first_shape = evidence.first_shape
    facts.batch_size, facts.batch_size_source, warning = batch_size_evidence(
        first_shape[1] if first_shape else None,
        evidence.input_batches,
        evidence.step_batches,
        evidence.declared_batches,
    )
    argument = facts.batch_size if (facts.batch_size_source or "").startswith(ARGUMENT_SOURCE) else None
    if facts.batch_size is None or argument is not None:  # a measurement outranks an argument (issue 51)
        vote = allocation_batch_vote(evidence.allocated_shapes)
        if vote:
            size, agreeing, voting = vote
            facts.batch_size, facts.batch_size_agreement = size, agreeing / voting
            facts.batch_size_source = (
                f"data: leading dimension of {agreeing} of {voting} tensor shapes in memory "
                "allocations (optimizer state left out)"
            )
            if argument == size:
                facts.batch_size_source += f"; {STEP_EVENT_BATCH} agrees"
            elif argument is not None:
                warning = f"{STEP_EVENT_BATCH} is {argument}, but the allocations' leading dimension gives {size}; using {size}"
    if warning:
        facts.warnings.append(warning)


def _settle_precision_and_compiler(facts: ProfileFacts, evidence: _SessionEvidence) -> None:
    """The precision from the dtypes the model's ops allocated (an XLA program's own where
    XLA ran), and the compiler from which kind of op events the session has."""
    kinds = evidence.kinds
    precision = precision_from_dtypes(evidence.allocated_dtypes, "dtypes of {total} tensors the model's ops allocated")
    if kinds["xla"] or kinds["xla_device"]:
        precision = evidence.hlo.precision() or precision
    if precision:
        facts.precision, facts.precision_source = precision
    if kinds["xla"]:
        facts.compiler, facts.compiler_source = "XLA", f"data: {kinds['xla']:,} XLA op events (hlo_op) on the host"
    elif kinds["xla_device"]:
        facts.compiler, facts.compiler_source = (
            "XLA",
            (f"data: {kinds['xla_device']:,} kernels of XLA ops (hlo_op) on the device"),
        )
    elif kinds["tf"]:
        facts.compiler, facts.compiler_source = tf_execution(kinds["tf_graph"], kinds["tf_eager"])


def _parse(path: str, data: bytes, budget: _ReadBudget):
    if not data:
        raise ProfileError(path, "the file is empty (0 bytes); the profiler may have been killed while writing it")
    try:
        space = split_space(data, budget.max_parsed_bytes, budget.events)
    except TooManyPlanes as error:
        raise ProfileError(path, f"{error}; not read") from None
    except (DecodeError, RuntimeError, ValueError) as error:
        raise ProfileError(path, f"not a valid XSpace protobuf (truncated or not an xplane file): {error}") from None
    if not any(name.startswith(("/host:", "/device:")) for name in space.names):
        raise ProfileError(path, "the XSpace has no /host: or /device: plane; this is not a profiler xplane")
    return space


def _stat_names(plane) -> dict[int, str]:
    return {entry.key: entry.value.name for entry in plane.stat_metadata}


@dataclasses.dataclass
class _HostPlaneIndex:
    """What a host plane's metadata says before any event is read: which event metadata
    are ops (and their keys), step functions, input pipeline roots, batch datasets and
    user ranges, and the ids of the stats their events may carry."""

    op_keys: list[tuple[str, str]]  # (name, type) of each op code
    lookup: _IdLookup | None  # metadata id -> op code
    model_op: np.ndarray  # per op code: not the input pipeline's
    only_eager: np.ndarray  # per op code: no graph op shares its key (an eager op may: "ReadVariableOp")
    eager_ids: np.ndarray  # metadata ids of eager ops
    root_names: dict[int, str]  # tf.data's outermost iterators
    batch_datasets: list[int]
    user_range_names: dict[int, str]
    user_range_ids: np.ndarray
    step_functions: list[int]  # Keras 2's per-step train_function
    stat_names: dict[int, str]
    stat_ids: dict[str, int]  # stat name -> its first metadata id
    hlo: _HloOps
    step_events: _IdLookup  # metadata id -> step category code of an event that is no op but counts


def _index_host_plane(plane, names_tf_ops: bool) -> _HostPlaneIndex:
    op_keys: list[tuple[str, str]] = []
    key_codes: dict[tuple[str, str], int] = {}
    op_ids: list[int] = []
    op_codes: list[int] = []
    eager_ids, graph_codes = [], set()
    names: dict[int, str] = {}
    is_op: dict[int, bool] = {}  # as ``names``, the last entry of a key wins
    for entry in plane.event_metadata:
        names[entry.key] = name = entry.value.name
        parsed = parse_host_op(name) if names_tf_ops else None
        is_op[entry.key] = bool(parsed)
        if parsed:
            if parsed not in key_codes:
                key_codes[parsed] = len(op_keys)
                op_keys.append(parsed)
            if name.startswith(EAGER_OP_PREFIX):
                eager_ids.append(entry.key)
            else:
                graph_codes.add(key_codes[parsed])
            op_ids.append(entry.key)
            op_codes.append(key_codes[parsed])
    # JAX's runtime names its host ranges freely (``PjitFunction(step)``, ``Handle inputs``,
    # each launch by its kernel, each thunk by its XLA op): no rule tells a user's
    # TraceAnnotation from them, so a JAX profile reads none rather than dozens of false ones
    user_range_names = {
        key: name for key, name in names.items() if names_tf_ops and name and not is_op[key] and not is_tf_range(name)
    }
    stat_names = _stat_names(plane)
    stat_ids: dict[str, int] = {}
    for key, name in stat_names.items():
        stat_ids.setdefault(name, key)
    return _HostPlaneIndex(
        op_keys=op_keys,
        lookup=_IdLookup(op_ids, op_codes) if op_ids else None,
        model_op=np.array([op_type != "Dataset" for _, op_type in op_keys], dtype=bool),
        only_eager=~np.isin(np.arange(len(op_keys)), list(graph_codes)),
        eager_ids=np.asarray(eager_ids, dtype=np.int64),
        root_names={key: name for key, name in names.items() if name in PIPELINE_ROOTS},
        batch_datasets=[key for key, name in names.items() if is_batch_dataset(name)],
        user_range_names=user_range_names,
        user_range_ids=np.fromiter(user_range_names, dtype=np.int64, count=len(user_range_names)),
        step_functions=[key for key, name in names.items() if name == STEP_FUNCTION],
        stat_names=stat_names,
        stat_ids=stat_ids,
        hlo=_HloOps(stat_ids.get("hlo_op"), stat_ids.get(PROGRAM_STAT), op_keys, key_codes, names),
        step_events=_IdLookup(*xplane_steps.host_event_codes({key: names[key] for key in names if not is_op[key]})),
    )


class _HostPlaneReader:
    """Reads one host plane's TF ops and the evidence around them (step markers, Keras 2's
    step calls, input batches, memory, user ranges) into the session's evidence.

    ``names_tf_ops`` is False in a JAX profile, where a ``name:type`` event is the
    runtime's own (``ThenExecuteCallback:GetEvent...``) and only the XLA ops (``hlo_op``)
    are ops. The ops' times are held until the plane's steps are known: ``read`` returns
    them as ``_HostOps``, added once the caller has let the file's bytes go.

    Every host event is touched here, so the three integers each needs are pulled out of a
    whole batch at once (``_event_ints``) and sorted out with numpy; stats are read only on
    the few events that can carry a step number or a shape, and on the memory events
    (``_MemoryEvents``: from the wire too, where the C helper was built)."""

    def __init__(
        self, plane, evidence: _SessionEvidence, names_tf_ops: bool = True, launches: _HostLaunches | None = None
    ):
        self.plane_name = plane.name
        self.evidence = evidence
        self.index = index = _index_host_plane(plane, names_tf_ops)
        self.memory = _Allocations(evidence.allocated_dtypes)
        self.memory_events = _MemoryEvents(
            plane, index.stat_names, self.memory, evidence.in_use, evidence.allocated_shapes
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
        # kernel launches (``_HostLaunches``), where wanted: events that carry a correlation_id,
        # learnt per metadata id from its first event as step markers are; and every line's
        # ops, whose launches another plane may hold
        self.launches = launches if launches is not None and launches.wanted else None
        self.launch_stat = index.stat_ids.get("correlation_id") if self.launches is not None else None
        self.carries_correlation = _Carriers()
        self.clock_origin_ns = 0
        self.spans = xplane_steps.HostSpans()

    def read(self, plane_key: tuple[str, str], events: OpEvents) -> _HostOps:
        clock_origin_ns = None  # the plane's own origin keeps picosecond times well inside int64
        lines, self.lines = self.lines, None  # the reader keeps nothing of the file once read
        for line_number, line in enumerate(lines):
            if clock_origin_ns is None:
                clock_origin_ns = self.clock_origin_ns = line.timestamp_ns
            self._read_line(line, line_number, (line.timestamp_ns - clock_origin_ns) * 1000)
        del self.memory_events  # its samples are the evidence's: the rest goes
        return self._finish(plane_key, events)

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
            ints = _event_ints(batch)
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
                    value = _int_value(event_stat)
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

    def _finish(self, plane_key: tuple[str, str], events: OpEvents) -> _HostOps:
        """The plane's share of the session's evidence, and its ops with their steps."""
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
            _XlaOps(np.asarray(hlo_codes, dtype=np.int64), index.hlo.programs, evidence.xla_programs())
            if hlo_codes
            else None
        )
        return _HostOps(events, index.op_keys, self.memory, self.op_lines, left_out, plane_is_eager, bounds, xla)


@dataclasses.dataclass
class _XlaOps:
    """A host plane's XLA ops (their codes), the programs that ran and the session's
    programs: what their work is counted on."""

    codes: np.ndarray
    ran: set[int]
    programs: XlaPrograms

    def rows(self, keys: list[tuple[str, str]], codes: list[np.ndarray], durations_ps: list[np.ndarray]) -> dict:
        """``WORK_COLUMNS`` of the ops' executions (``codes`` into ``keys``, with their times)."""
        codes_of, durations = np.concatenate(codes), np.concatenate(durations_ps)
        executions = np.bincount(codes_of, minlength=len(keys))
        times_us = np.bincount(codes_of, weights=durations / PS_PER_US, minlength=len(keys))
        return work_rows(
            keys, executions, times_us, _xla_costs(keys, self.codes.tolist(), self.ran, self.programs), False
        )


def _xla_costs(keys: list[tuple[str, str]], codes: list[int], ran: set[int], programs: XlaPrograms) -> list:
    """Per key, the work of one execution of the XLA op it names where ``codes`` holds its
    code (or why it is unknown), None for the rest."""
    costs: list = [None] * len(keys)
    for code in codes:
        costs[code] = programs.cost(keys[code][0], ran)
    return costs


@dataclasses.dataclass
class _HostOps:
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
        self.memory.attribute(self.events, self.op_keys, self.left_out)
        executed: tuple[list, list] = ([], [])  # every line's op codes and times, for the XLA ops' work
        while self.op_lines:  # each line's arrays are let go once added
            starts, durations, codes, eager, placeable = self.op_lines.pop(0)
            if not self.plane_is_eager and eager.any():
                starts, durations, codes = starts[~eager], durations[~eager], codes[~eager]
            _add_host_line(
                self.events, self.op_keys, starts, durations, codes, self.bounds if placeable else self.bounds[:0]
            )
            if self.xla is not None:
                executed[0].append(codes)
                executed[1].append(durations)
        if self.xla is not None and executed[0]:
            self.events.work.append(self.xla.rows(self.op_keys, *executed))


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
    ``hlo_op`` stat instead of a TF op's ``name:type``, each an op as ``_hlo_op`` names and
    types it. Whether a metadata's events are HLO ops is learnt from its first event."""

    def __init__(
        self, hlo_stat: int | None, program_stat: int | None, op_keys: list, key_codes: dict, names: dict[int, str]
    ):
        self.hlo_stat, self.program_stat = hlo_stat, program_stat
        self.op_keys, self.key_codes, self.names = op_keys, key_codes, names
        self.code_of: dict[int, int] = {}  # metadata id -> op code, -1 for a non-HLO event
        self.programs: set[int] = set()  # the programs the first event of each op names: those that ran
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
        program_id = _int_value(program) if program is not None else None
        if program_id is not None:
            self.programs.add(program_id)
        key = _hlo_op(self.names.get(metadata_id, ""))
        if key not in self.key_codes:
            self.key_codes[key] = len(self.op_keys)
            self.op_keys.append(key)
        return self.key_codes[key]


_HLO_INSTANCE = re.compile(r"\.\d+$")


def _hlo_op(name: str, instance: re.Pattern = _HLO_INSTANCE) -> tuple[str, str]:
    """An XLA op as a row: named as XLA names it (``convolution.2``), typed without the
    instance number (``convolution``), so that the same kind of op meets across runs
    whose modules number them differently. A kernel's name ends in its number after an
    underscore instead (``loop_add_fusion_26``): ``instance`` says which."""
    return name, instance.sub("", name) or name


_TF_DTYPES = {1: "fp32", 2: "fp64", 14: "bf16", 19: "fp16"}  # tensorflow DataType


class _MemoryInUse:
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
        allocator = _stat_text(stats["allocator_name"], stat_names) if "allocator_name" in stats else "memory"
        self.codes.append(self.allocators.setdefault(allocator, len(self.allocators)))
        self.line_ns.append(line_ns)
        self.offset_ps.append(offset_ps)
        self.bytes_in_use.append(_number(stats["bytes_allocated"]))

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


class _MemoryEvents:
    """A host plane's ``MemoryAllocation`` and ``MemoryDeallocation`` events: the bytes each
    op asked for (``_Allocations``), the memory in use (``_MemoryInUse``) and the shapes
    allocated (the batch size's vote). Tens of thousands in a long profile, each with a
    dozen stats: so their stats are read from the wire into arrays where the C helper was
    built (``_read_wire``), else from the parsed events (``_read_parsed``), with the same
    results."""

    # the stats read, in the columns of EventStats
    STATS = ("tf_op", "shape", "allocator_name", "bytes_allocated", "requested_bytes", "allocation_bytes", "data_type")

    def __init__(
        self,
        plane,
        stat_names: dict[int, str],
        memory: _Allocations,
        in_use: _MemoryInUse,
        allocated_shapes: dict[str, set[str]],
    ):
        self.allocations = [entry.key for entry in plane.event_metadata if entry.value.name == "MemoryAllocation"]
        self.deallocations = [entry.key for entry in plane.event_metadata if entry.value.name == "MemoryDeallocation"]
        self.event_ids = self.allocations + self.deallocations
        self.stat_names, self.memory, self.in_use, self.allocated_shapes = stat_names, memory, in_use, allocated_shapes
        # several ids of one name share a column: the dict of ``_read_parsed`` keeps the last stat of a name
        self.stat_columns = {key: self.STATS.index(name) for key, name in stat_names.items() if name in self.STATS}
        self.in_use_stats = {key: name for key, name in stat_names.items() if name in _MemoryInUse.STATS}

    def read(self, batch, ints: np.ndarray, line_ns: int) -> None:
        """The memory events of a batch (``ints``: its ``_event_ints``)."""
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
            tf_op = _stat_text(stats["tf_op"], stat_names) if "tf_op" in stats else ""
            if "shape" in stats and len(self.allocated_shapes) < _MAX_ALLOCATED_SHAPES:
                self.allocated_shapes.setdefault(_stat_text(stats["shape"], stat_names), set()).add(tf_op)
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
        texts = _Texts()
        wire_texts = np.fromiter(map(texts.code, stats.texts), dtype=np.int64, count=len(stats.texts))
        kinds = {name: stats.kinds[:, column] for column, name in enumerate(self.STATS)}
        values = {name: stats.values[:, column] for column, name in enumerate(self.STATS)}

        def text_codes(name: str, rows: np.ndarray) -> np.ndarray:
            return _stat_text_codes(kinds[name][rows], values[name][rows], wire_texts, self.stat_names, texts)

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
        # ``_number(requested_bytes) or _number(allocation_bytes)``
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


class _Texts:
    """The distinct texts of a batch's stats, so that arrays carry them as codes; ``""``
    is code 0."""

    def __init__(self):
        self.names: list[str] = [""]
        self._codes: dict[str, int] = {"": 0}

    def code(self, text: str) -> int:
        code = self._codes.get(text)
        if code is None:
            code = self._codes[text] = len(self.names)
            self.names.append(text)
        return code


def _stat_text_codes(
    kinds: np.ndarray, values: np.ndarray, wire_texts: np.ndarray, stat_names: dict[int, str], texts: _Texts
) -> np.ndarray:
    """``_stat_text`` of stats as ``EventStats`` holds them, as codes of ``texts``
    (``wire_texts``: the code of each of its str values)."""
    codes = np.zeros(len(kinds), dtype=np.int64)
    is_str = kinds == STAT_STR
    codes[is_str] = wire_texts[values[is_str]]
    is_ref = kinds == STAT_REF
    if is_ref.any():
        refs, where = np.unique(values[is_ref].view(np.uint64), return_inverse=True)
        ref_codes = [texts.code(stat_names.get(ref, "")) for ref in refs.tolist()]
        codes[is_ref] = np.asarray(ref_codes, dtype=np.int64)[where]
    return codes


def _stat_numbers(kinds: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``_number`` of stats as ``EventStats`` holds them."""
    numbers = np.zeros(len(kinds))
    # a uint64 of 2**63 or more has a negative int64's bits: left out like any other >= 2**62
    integer = ((kinds == STAT_INT64) | (kinds == STAT_UINT64)) & (values >= 0) & (values < 1 << 62)
    numbers[integer] = values[integer]
    double = np.flatnonzero(kinds == STAT_DOUBLE)
    doubles = values[double].view(np.float64)
    in_range = (doubles >= 0) & (doubles < float(1 << 62))  # NaN is not
    numbers[double[in_range]] = doubles[in_range]
    return numbers


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


class _Allocations:
    """TF's ``MemoryAllocation`` events: bytes each op asked for (``requested_bytes``;
    its ``tf_op`` stat names it). Frees carry no op, so an op's net memory is not known;
    memory in use is ``_MemoryInUse``'s."""

    def __init__(self, dtypes: collections.Counter):
        self.requested: dict[str, float] = collections.defaultdict(float)
        self.dtypes = dtypes  # the precision's evidence: dtypes of what the model's ops allocate
        self._optimizer_scope: dict[str, bool] = {}  # tf_op -> is_optimizer_scope: a few hundred ops repeat

    def add(self, tf_op: str, stats: dict, stat_names: dict[int, str]) -> None:
        size = _number(stats.get("requested_bytes")) or _number(stats.get("allocation_bytes"))
        if size and tf_op:
            self.requested[tf_op] += size
            dtype = _TF_DTYPES.get(int(_number(stats.get("data_type"))))
            if dtype and not is_optimizer_scope(tf_op):  # optimizer state keeps the variables' dtype
                self.dtypes[dtype] += 1

    def add_batch(self, names: list[str], tf_ops: np.ndarray, sizes: np.ndarray, data_types: np.ndarray) -> None:
        """``add`` of many allocations in order: ``tf_ops`` index ``names``, ``sizes`` and
        ``data_types`` are the ``_number``s of the stats."""
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

    def attribute(self, events: OpEvents, op_keys: list[tuple[str, str]], left_out: np.ndarray) -> None:
        """Each op's requested bytes, to the op of that name (ops ``left_out`` get none)."""
        if not self.requested:
            return
        by_name = {name: code for code, (name, _) in enumerate(op_keys) if not left_out[code]}
        known = [(by_name[name], size) for name, size in self.requested.items() if name in by_name]
        if known:
            codes, sizes = zip(*known)
            events.add_memory(op_keys, np.asarray(codes), np.asarray(sizes), net_known=False)


def _int_value(stat) -> int | None:
    """An integer stat's value; None where it holds no integer."""
    which = stat.WhichOneof("value")
    return getattr(stat, which) if which in ("int64_value", "uint64_value") else None


def _number(stat) -> float:
    """A numeric stat's value (0 where absent or not a number)."""
    if stat is None:
        return 0.0
    which = stat.WhichOneof("value")
    value = getattr(stat, which) if which in ("int64_value", "uint64_value", "double_value") else 0
    return float(value) if 0 <= value < 1 << 62 else 0.0


class _Carriers:
    """Which event metadata carry a stat (``step_num``, a correlation id), learnt from the
    first event of each: all events of one metadata carry the same stats."""

    def __init__(self):
        self._known: dict[int, bool] = {}
        self._lookup = _IdLookup([], [])

    def flags(self, ids: np.ndarray, carries) -> np.ndarray:
        """Whether each event (``ids``: its metadata id) carries the stat; ``carries(position)``
        tells it for the event at a position of ``ids`` whose metadata is not learnt yet."""
        codes = self._lookup.codes(ids)  # 1 carries, 0 not, -1 not learnt yet
        if (codes < 0).any():
            unknown = np.flatnonzero(codes < 0)
            unique_ids, first = np.unique(ids[unknown], return_index=True)
            for metadata_id, position in zip(unique_ids.tolist(), unknown[first].tolist()):
                self._known[metadata_id] = carries(position)
            self._lookup = _IdLookup(list(self._known), [int(flag) for flag in self._known.values()])
            codes = self._lookup.codes(ids)
        return codes == 1

    def carriers(self) -> list[int]:
        return [key for key, flag in self._known.items() if flag]


class _IdLookup:
    """Maps event metadata ids (arbitrary int64) to codes (non-negative), vectorised: -1
    for an id it does not hold. Writers number their metadata from 1 up, so the ids
    usually index a table (a plain gather, about five times a binary search's speed on a
    big line); ids spread wider are searched."""

    _TABLE_SLACK = 1 << 16  # a table may be this much longer than the ids it holds

    def __init__(self, ids: list[int], codes: list[int]):
        order = np.argsort(np.asarray(ids, dtype=np.int64))
        self._ids = np.asarray(ids, dtype=np.int64)[order]
        self._codes = np.asarray(codes, dtype=np.int64)[order]
        self._table = None
        if len(self._ids) and self._ids[0] >= 0 and self._ids[-1] < 4 * len(self._ids) + self._TABLE_SLACK:
            self._table = np.full(int(self._ids[-1]) + 2, -1, dtype=np.int64)  # the last slot: ids past it
            self._table[self._ids] = self._codes

    def codes(self, ids: np.ndarray) -> np.ndarray:
        """The code of each id, -1 where it has none."""
        if not len(self._ids):
            return np.full(len(ids), -1, dtype=np.int64)
        if self._table is not None:
            return self._table[np.clip(ids, -1, len(self._table) - 1)]  # -1 and past the end: the last slot
        where = np.searchsorted(self._ids, ids).clip(max=len(self._ids) - 1)
        return np.where(self._ids[where] == ids, self._codes[where], -1)


_EVENT_INTS = operator.attrgetter("metadata_id", "offset_ps", "duration_ps")


def _event_ints(batch) -> np.ndarray:
    """(n, 3) int64 array of each event's metadata id, offset and duration: decoded from
    the batch's wire bytes by the C extension where it is built (touching no parsed
    event), else read from the parsed events (``_event_ints_python``)."""
    wire_ints = getattr(batch, "wire_ints", None)
    ints = wire_ints() if wire_ints is not None else None
    if ints is None:
        return _event_ints_python(batch)
    return np.frombuffer(ints, dtype=np.int64).reshape(-1, 3)


def _event_ints_python(batch) -> np.ndarray:
    """``_event_ints`` from the parsed events: attrgetter and fromiter keep the loop out of
    the interpreter, but every event object is still visited."""
    flat = itertools.chain.from_iterable(map(_EVENT_INTS, batch))
    return np.fromiter(flat, dtype=np.int64, count=3 * len(batch)).reshape(-1, 3)


# No profiled op lasts 11 days (10^18 ps, near the int64 limit of 106 days): a negative or
# longer duration is a broken writer.
_MAX_DURATION_PS = 10**18


class _BrokenEvents(ValueError):
    """Events whose times cannot be trusted; the message names what is wrong."""


def _check_durations(durations: np.ndarray, op_keys, codes: np.ndarray, line_name: str) -> None:
    bad = np.flatnonzero((durations < 0) | (durations > _MAX_DURATION_PS))
    if len(bad):
        first = int(bad[0])
        raise _BrokenEvents(
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
    value = getattr(stat, which) if which in ("int64_value", "uint64_value") else _stat_text(stat, stat_names)
    try:
        value = int(value)
    except (TypeError, ValueError):
        return None
    return value if is_batch_size(value) else None


_MAX_ALLOCATED_SHAPES = 10_000  # distinct shapes kept for the vote: plenty, and bounded on hostile files


def _input_batch(event, shapes_stat: int, stat_names: dict[int, str]) -> int | None:
    stat = _find_stat(event, shapes_stat)
    return shared_leading_dim(_stat_text(stat, stat_names)) if stat is not None else None


def _read_device_plane(
    plane,
    events: OpEvents,
    evidence: _SessionEvidence,
    launches: _HostLaunches,
    spans: xplane_steps.StepSpans | None = None,
) -> tuple[str | None, str, list[int]]:
    """Add kernels of a device plane; return (device kind or None if idle, name, the
    duration of each event of its Steps line in start order, ps).

    A kernel's op is the TF op its ``tf_op`` stat (or TF 2.2-2.4's ``annotation`` /
    ``level 0``) names; where that names none (JAX writes ``XlaModule:``), the XLA op its
    ``hlo_op`` stat names, typed as the host's XLA ops are (``cudnn-conv.2`` is a
    ``cudnn-conv``); else the kernel itself.

    An op's mean is per execution, not per kernel. Where the plane has a ``TensorFlow
    Ops`` line (TF 2.2-2.4: one event per execution of a TF op on this device, spanning
    its kernels), each kernel belongs to the execution of its op that it starts in, and
    a kernel in none (a copy, which no execution spans) is an execution of its own. The
    line cuts an execution in pieces where another op's kernel ran between two of its
    kernels: pieces that the host's launches (``launches``), or else their step group and
    kernels, show to be one execution are one (``merged_fragments``).
    Where kernels carry a ``scope_range_id`` (XLA's GPU runtime: one id per execution of
    an XLA op, shared by every kernel it launches, such as cuDNN's several per
    convolution), kernels sharing one are one execution. Elsewhere the kernels are summed
    per op, and executions are counted from the host's op events where the host ran the
    op (``_aggregate_device``)."""
    kind = plane.name[len("/device:") :].split(":", 1)[0]
    if not _DEVICE_KIND.fullmatch(kind):  # the kind is shown and plotted: only a plain word
        kind = "accelerator"
    stat_names = _stat_names(plane)
    event_names = {entry.key: entry.value.name for entry in plane.event_metadata}
    executions, origin_ns = _executions(plane, event_names)
    invocations, kinds = evidence.invocation_ids, evidence.kinds
    ops, kernels, steps = _read_kernels(plane, stat_names, event_names, kinds, origin_ns if executions else None, spans)
    if not len(kernels):
        return None, "", steps
    keys, codes, starts, durations, scopes, scope_kinds = kernels.columns(list(ops.ops))
    if executions:
        add_executed_kernels(
            events, keys, codes, starts, durations, executions, invocations, kernels.ties(launches, keys, codes)
        )
    elif "scope_range_id" in stat_names.values():
        add_scoped_kernels(events, keys, codes, durations, (scope_kinds, scopes), invocations)
    else:
        add_kernel_totals(events, keys, codes, durations)
    xla_ops = ops.xla_ops()
    xla_codes = [code for code, key in enumerate(keys) if key in xla_ops]
    if xla_codes:
        events.work.append(
            _device_work(keys, codes, durations, (scope_kinds, scopes), xla_codes, evidence.xla_programs())
        )
    return kind, _device_name(plane, stat_names, kind), steps


def _device_work(
    keys: list, codes: np.ndarray, durations_ps: np.ndarray, scopes: tuple, xla_codes: list[int], programs: XlaPrograms
) -> dict:
    """``WORK_COLUMNS`` of the XLA ops among a device's kernels: an execution is the kernels
    that share a scope range id (a kernel without one is one), timed by its kernels. The
    kernels do not say which program ran them: an op is looked up in every program."""
    kinds, values = scopes
    scoped = kinds != 0
    runs = np.unique(np.column_stack([codes[scoped], kinds[scoped], values[scoped]]).astype(np.int64), axis=0)
    executions = np.bincount(runs[:, 0], minlength=len(keys)) + np.bincount(codes[~scoped], minlength=len(keys))
    times_us = np.bincount(codes, weights=durations_ps.astype(np.float64) / PS_PER_US, minlength=len(keys))
    return work_rows(keys, executions, times_us, _xla_costs(keys, xla_codes, set(), programs), True)


class _DeviceKernels:
    """A device plane's kernels as arrays, a batch at a time: each one's op (a code into
    ``_KernelOps.ops``), start and duration (ps), and its ``scope_range_id`` where it
    counts (XLA's id of the execution that launched it; a uint64 past int64's range is
    kept apart from the int64 of the same bits, as the numbers differ); and what ties it
    to its execution (``ties``): its name (event metadata id), ``group_id`` and
    ``correlation_id``, each with whether it has one."""

    def __init__(self):
        self._parts: list[tuple[np.ndarray, ...]] = []

    def add(self, codes, starts, durations, scopes, scope_kinds, names, groups, grouped, correlations, correlated):
        self._parts.append(
            (codes, starts, durations, scopes, scope_kinds, names, groups, grouped, correlations, correlated)
        )

    def __len__(self) -> int:
        return sum(len(part[0]) for part in self._parts)

    def columns(self, ops: list[tuple[str, str]]) -> tuple:
        """(ops in the order their first kernel came, each kernel's code into them, starts
        (None where not read), durations (ps), scopes, scope kinds (``_SCOPE_*``))."""
        codes, starts, durations, scopes, scope_kinds = list(zip(*self._parts))[:5]
        keys, codes = first_appearance_keys(ops, np.concatenate(codes))
        starts = np.concatenate(starts) if starts[0] is not None else None
        return keys, codes, starts, np.concatenate(durations), np.concatenate(scopes), np.concatenate(scope_kinds)

    def ties(self, launches: _HostLaunches, keys: list, codes: np.ndarray) -> KernelTies:
        """The kernels' ``KernelTies`` (their ops: ``codes`` into ``keys``), each launch
        placed by the file's host (``launches``)."""
        names, groups, grouped, correlations, correlated = (
            np.concatenate(column) for column in list(zip(*self._parts))[5:]
        )
        return KernelTies(names, groups, grouped, launches.executions(correlations, correlated, keys, codes))


# What a kernel's scope_range_id is: none (or not an integer), an integer, or a uint64 past
# int64's range (its bits are a negative int64's, which is another number)
_SCOPE_NONE, _SCOPE_INT, _SCOPE_BIG_UINT = 0, 1, 2


class _XlaKernelOps:
    """The XLA op of a kernel from its ``hlo_op`` stat, each text parsed once.

    Inside a command buffer (XLA's CUDA graph of a run of ops, which recent XLA records
    whole steps in), ``hlo_op`` names the buffer (``command_buffer_1``), not the op, so
    one row would hold every kernel of the step. There the op is the kernel, named as XLA
    names it: after the first of the fusions it serves (XLA compiles one kernel for all
    the fusions it finds alike: ``loop_add_fusion_26`` runs ``loop_add_fusion.26`` to
    ``.39`` of the Flax encoder), typed without its number as XLA ops are typed, so runs
    with and without command buffers meet by type. Each such kernel is an execution of
    its own: the buffer's one scope range id spans the step."""

    _COMMAND_BUFFER = re.compile(r"command_buffer(?:[._]\d+)?")
    _KERNEL_INSTANCE = re.compile(r"_\d+$")

    def __init__(self):
        self._by_hlo: dict[str, tuple[str, str]] = {}
        self._by_kernel: dict[str, tuple[str, str]] = {}

    def hlo_ops(self) -> set[tuple[str, str]]:
        """The ops named by an XLA instruction, and a command buffer's kernels (XLA names a
        fusion's kernel after it, ``.`` as ``_``: their work is looked up by that name too)."""
        return set(self._by_hlo.values()) | set(self._by_kernel.values())

    def of(self, hlo: str, kernel_name: str) -> tuple[tuple[str, str], bool]:
        """(op, whether the kernel ran inside a command buffer)."""
        if self._COMMAND_BUFFER.fullmatch(hlo) and kernel_name:
            op = self._by_kernel.get(kernel_name)
            if op is None:
                op = self._by_kernel[kernel_name] = _hlo_op(kernel_name, self._KERNEL_INSTANCE)
            return op, True
        op = self._by_hlo.get(hlo)
        if op is None:
            op = self._by_hlo[hlo] = _hlo_op(hlo)
        return op, False


# a batch of kernels parsed: op codes, from the hlo_op, scopes, scope kinds, and the ties
_ParsedKernels = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, ...]]


class _KernelOps:
    """The op of a device kernel from its stats, the rule of ``_read_device_plane``: the
    first ``tf_op`` or ``annotation`` stat of the event that names an op (TF 2.2-2.4 wrote
    the latter), else its last ``level 0`` stat that does; else the XLA op of its
    ``hlo_op`` stat (``_XlaKernelOps``); else the kernel itself. Ops are numbered as they
    are first resolved (``ops``); each distinct set of stats is resolved once.

    A plane's kernels are read a batch at a time: from the wire in C where the helper was
    built (``_wire_batch``: the stats of every kernel as arrays, the rule applied once per
    distinct set of them), else from the parsed events (``_parsed_batch``), which also
    answers for the rare kernels whose stats the arrays cannot order (two ``tf_op`` stats,
    say), with the same results. Each kernel's ``group_id`` (its step) and
    ``correlation_id`` (its launch on the host) are read with them: they tie the pieces of
    an execution that a ``TensorFlow Ops`` line cut apart (``KernelTies``)."""

    COLUMNS = ("tf_op", "annotation", "level 0", "hlo_op", "scope_range_id", "group_id", "correlation_id")
    _NAMING = 3  # the first three columns name the op; their order in the event matters
    _HLO, _SCOPE, _GROUP, _CORRELATION = 3, 4, 5, 6

    def __init__(
        self, stat_names: dict[int, str], event_names: dict[int, str], kinds: collections.Counter, ties: bool = True
    ):
        by_name = {name: key for key, name in stat_names.items()}  # one id per name: the last
        # the ties are read only where a TensorFlow Ops line has executions to tie
        self.ids = [
            by_name.get(name) if ties or column < self._GROUP else None for column, name in enumerate(self.COLUMNS)
        ]
        self.columns = {key: column for column, key in enumerate(self.ids) if key is not None}
        self.stats_query = (None, self.columns, len(self.COLUMNS), True)  # wire_stats of every event, repeats flagged
        self.stat_names, self.event_names, self.kinds = stat_names, event_names, kinds
        self.ops: dict[tuple[str, str], int] = {}
        self._named: dict[tuple[bool, str], tuple[str, str] | None] = {}
        self._xla_ops = _XlaKernelOps()

    def read(self, batch, ints: np.ndarray, line_start_ps: int | None, line_name: str, kernels: _DeviceKernels) -> None:
        """The kernels of ``batch`` (``ints``: its ``_event_ints``) into ``kernels``, with
        their starts where ``line_start_ps`` (the line's, ps) is given."""
        if not len(ints):
            return
        found = self._wire_batch(batch, ints)
        if found is None:
            found = self._parsed_batch(batch, range(len(ints)))
        codes, from_hlo, scopes, scope_kinds, ties = found
        self.kinds["xla_device"] += int(from_hlo.sum())
        starts = None
        if line_start_ps is not None:
            offsets = ints[:, 1]
            _check_clock(line_start_ps + int(offsets.min()), line_start_ps + int(offsets.max()), line_name)
            # the sums fit (checked), the line's start alone need not: added with wrap-around
            starts = (offsets.view(np.uint64) + np.uint64(line_start_ps % (1 << 64))).view(np.int64)
        kernels.add(codes, starts, ints[:, 2], scopes, scope_kinds, ints[:, 0], *ties)

    def xla_ops(self) -> set[tuple[str, str]]:
        """The ops that are XLA instructions, whose programs tell their work."""
        return self._xla_ops.hlo_ops()

    def _resolve(self, named: list[tuple[int | None, str]], hlo: str, kernel_id: int) -> tuple[int, bool, bool]:
        """(op code, whether the op is the hlo_op's, whether the kernel ran in a command
        buffer) of a kernel whose naming stats are ``named`` (id, text) in event order."""
        op = None
        for key, text in named:
            parsed = self._op_named(key, text)
            if parsed is not None:
                op = parsed
                if key != self.ids[2]:  # a tf_op or an annotation settles it; level 0 says less
                    break
        from_hlo = in_buffer = False
        if op is None and hlo:
            op, in_buffer = self._xla_ops.of(hlo, self.event_names.get(kernel_id, ""))
            from_hlo = True
        if op is None:
            kernel_name = self.event_names.get(kernel_id, "")
            op = (kernel_name, kernel_name if kernel_name.startswith("Memcpy") else "(kernel without TF op)")
        return self.ops.setdefault(op, len(self.ops)), from_hlo, in_buffer

    def _op_named(self, key: int | None, text: str) -> tuple[str, str] | None:
        is_tf_op = key == self.ids[0]
        try:
            return self._named[(is_tf_op, text)]
        except KeyError:
            found = self._named[(is_tf_op, text)] = parse_tf_op(text) if is_tf_op else op_from_annotation(text)
            return found

    def _parsed_batch(self, batch, indices) -> tuple:
        """(codes, from_hlo, scopes, scope kinds, (groups, grouped, correlations,
        correlated)) of the events at ``indices``, parsed. A uint64 group or correlation id
        is kept as the int64 of its bits, as the wire reads it."""
        count = len(indices)
        codes, from_hlo = np.empty(count, dtype=np.int64), np.zeros(count, dtype=bool)
        scopes, scope_kinds = np.zeros(count, dtype=np.int64), np.zeros(count, dtype=np.int8)
        ties = np.zeros((2, count), dtype=np.int64), np.zeros((2, count), dtype=bool)  # group, correlation
        for row, index in enumerate(indices):
            event = batch[index]
            named, hlo, scope, tied = [], "", None, [None, None]
            for stat in event.stats:
                column = self.columns.get(stat.metadata_id)
                if column is None:
                    continue
                if column < self._NAMING:
                    named.append((stat.metadata_id, _stat_text(stat, self.stat_names)))
                elif column == self._HLO:
                    hlo = _stat_text(stat, self.stat_names)
                elif column == self._SCOPE:
                    scope = _int_value(stat)
                else:  # the last of them, as the wire's arrays keep (``_int_value``, inlined)
                    which = stat.WhichOneof("value")
                    tied[column - self._GROUP] = (
                        stat.int64_value
                        if which == "int64_value"
                        else stat.uint64_value
                        if which == "uint64_value"
                        else None
                    )
            codes[row], from_hlo[row], in_buffer = self._resolve(named, hlo, event.metadata_id)
            if scope is not None and not in_buffer:
                scope_kinds[row] = _SCOPE_INT if scope < 1 << 63 else _SCOPE_BIG_UINT
                scopes[row] = scope if scope < 1 << 63 else scope - (1 << 64)
            for which, value in enumerate(tied):
                if value is not None:
                    ties[0][which, row] = value if value < 1 << 63 else value - (1 << 64)
                    ties[1][which, row] = True
        (groups, correlations), (grouped, correlated) = ties
        return codes, from_hlo, scopes, scope_kinds, (groups, grouped, correlations, correlated)

    def _wire_batch(self, batch, ints: np.ndarray) -> _ParsedKernels | None:
        """``_parsed_batch`` of every event, from the wire; None where the C helper is not
        there or refuses the wire."""
        wire_stats = getattr(batch, "wire_stats", None)
        stats = wire_stats(*self.stats_query) if wire_stats is not None else None
        if stats is None or len(stats.indices) != len(ints):
            return None
        kinds, values = stats.kinds & ~STAT_REPEATED, stats.values
        texts = _Texts()
        wire_texts = np.fromiter(map(texts.code, stats.texts), dtype=np.int64, count=len(stats.texts))
        text_columns = [
            np.where(
                kinds[:, column] == STAT_ABSENT,
                -1,
                _stat_text_codes(kinds[:, column], values[:, column], wire_texts, self.stat_names, texts),
            )
            for column in range(4)
        ]
        # each distinct (tf_op, annotation, level 0, hlo_op, kernel) is resolved once, in
        # the order first met
        columns = [*text_columns, ints[:, 0]]
        inverse, first = first_appearance_ids(columns)
        count = len(first)
        distinct = np.stack([column[first] for column in columns], axis=1)
        resolved = np.zeros((count, 3), dtype=np.int64)  # code, from hlo, in a buffer
        unordered = np.zeros(count, dtype=bool)
        for index in range(count):
            tf_op, annotation, level_0, hlo, kernel_id = distinct[index].tolist()
            named = [
                (self.ids[column], texts.names[text])
                for column, text in enumerate((tf_op, annotation, level_0))
                if text >= 0
            ]
            if tf_op >= 0 and annotation >= 0:
                # the arrays do not say which came first: it matters where both name an op
                both = [self._op_named(key, text) for key, text in named[:2]]
                unordered[index] = None not in both and both[0] != both[1]
            if not unordered[index]:
                resolved[index] = self._resolve(named, texts.names[hlo] if hlo >= 0 else "", kernel_id)
        codes, from_hlo, in_buffer = resolved[inverse, 0], resolved[inverse, 1] == 1, resolved[inverse, 2] == 1
        scope_kind_wire = kinds[:, self._SCOPE]
        is_int = ((scope_kind_wire == STAT_INT64) | (scope_kind_wire == STAT_UINT64)) & ~in_buffer
        scopes = np.where(is_int, values[:, self._SCOPE], 0)
        scope_kinds = np.where(
            is_int, np.where((scope_kind_wire == STAT_UINT64) & (scopes < 0), _SCOPE_BIG_UINT, _SCOPE_INT), _SCOPE_NONE
        ).astype(np.int8)
        ties = []
        for column in (self._GROUP, self._CORRELATION):
            known = (kinds[:, column] == STAT_INT64) | (kinds[:, column] == STAT_UINT64)
            ties += [np.where(known, values[:, column], 0), known]
        # several stats of a naming column: which one names the op depends on their order
        repeated = ((stats.kinds[:, : self._NAMING] & STAT_REPEATED) != 0).any(axis=1)
        again = np.flatnonzero(repeated | unordered[inverse])
        if len(again):
            *parsed, parsed_ties = self._parsed_batch(batch, again.tolist())
            codes[again], from_hlo[again], scopes[again], scope_kinds[again] = parsed
            for column, parsed_column in zip(ties, parsed_ties):
                column[again] = parsed_column
        return codes, from_hlo, scopes, scope_kinds, tuple(ties)


def _read_kernels(
    plane,
    stat_names: dict[int, str],
    event_names: dict[int, str],
    kinds,
    origin_ns: int | None,
    spans: xplane_steps.StepSpans | None = None,
) -> tuple:
    """The kernels on the plane's ``Stream #`` lines (``_KernelOps`` names their ops; their
    starts, ps since ``origin_ns``, only where it is given: a ``TensorFlow Ops`` line's
    executions need them), and the durations (ps) of the plane's Steps line in start order.
    Each kernel also joins the host's step split, where ``spans`` is given."""
    ops = _KernelOps(stat_names, event_names, kinds, ties=origin_ns is not None)
    kernels = _DeviceKernels()
    steps: list[int] = []
    for line in plane.lines:
        if line.name == "Steps":
            marked = [(event.offset_ps, event.duration_ps) for batch in line.event_batches() for event in batch]
            steps = [duration for _, duration in sorted(marked)]
        if not line.name.startswith("Stream #"):
            continue
        line_start_ps = (line.timestamp_ns - origin_ns) * 1000 if origin_ns is not None else None
        for batch in line.event_batches():
            ints = _event_ints(batch)
            ops.read(batch, ints, line_start_ps, line.name, kernels)
            if spans is not None and len(ints):
                spans.add_kernels(plane.name, line.timestamp_ns, ints, event_names)
            del batch
    return ops, kernels, steps


def _executions(plane, event_names: dict[int, str]) -> tuple[dict[tuple[str, str], np.ndarray], int]:
    """Each op's executions on the plane's ``TensorFlow Ops`` line: an (n, 2) array of
    start and end, sorted by start; empty without the line. Times are ps since the
    origin returned, the earliest such line's start: lines may start at ns since the
    epoch, whose picoseconds are past int64, and the kernels are placed on the same clock.
    Each event's op comes from its metadata's name, parsed once per metadata id; the
    events themselves are read as arrays (``_event_ints``)."""
    op_codes: dict[int, int] = {}  # metadata id -> op code, -1 for a name that is no op
    ops: list[tuple[str, str]] = []
    code_of: dict[tuple[str, str], int] = {}
    parts: list[tuple[int, np.ndarray, np.ndarray]] = []  # (line ns, op codes, ints) of each batch's op events
    line_name = ""
    for line in plane.lines:
        if line.name != "TensorFlow Ops":
            continue
        line_name = line.name
        for batch in line.event_batches():
            ints = _event_ints(batch)
            del batch
            ids = ints[:, 0]
            for metadata_id in np.unique(ids).tolist():
                if metadata_id not in op_codes:
                    op = op_from_annotation(event_names.get(metadata_id, ""))
                    if op is not None and op not in code_of:
                        code_of[op] = len(ops)
                        ops.append(op)
                    op_codes[metadata_id] = code_of[op] if op is not None else -1
            codes = _IdLookup(list(op_codes), list(op_codes.values())).codes(ids)
            named = codes >= 0
            if named.any():
                parts.append((line.timestamp_ns, codes[named], ints[named]))
    if not parts:
        return {}, 0
    origin_ns = min(line_ns for line_ns, _, _ in parts)
    starts, ends = _spans_on_one_clock(parts, origin_ns, line_name)
    codes = np.concatenate([codes for _, codes, _ in parts])
    order = np.lexsort((ends, starts, codes))
    codes, bounds = codes[order], np.column_stack([starts[order], ends[order]])
    cuts = np.flatnonzero(np.diff(codes)) + 1
    return {
        ops[int(group_codes[0])]: group for group_codes, group in zip(np.split(codes, cuts), np.split(bounds, cuts))
    }, origin_ns


def _spans_on_one_clock(
    parts: list[tuple[int, np.ndarray, np.ndarray]], origin_ns: int, line_name: str
) -> tuple[np.ndarray, np.ndarray]:
    """Each event's start and end, ps since ``origin_ns``, of ``parts`` ((line ns, op codes,
    ints) of each batch); raises where they pass a 64-bit picosecond clock."""
    starts, ends = [], []
    first, last = None, None
    for line_ns, _, ints in parts:
        shift = (line_ns - origin_ns) * 1000
        offsets, durations = ints[:, 1], ints[:, 2]
        if (
            max(abs(int(offsets.min())), abs(int(offsets.max())), abs(int(durations.min())), abs(int(durations.max())))
            < 1 << 61
        ):
            part_ends = offsets + durations  # far from int64's ends
            low, high = (
                shift + int(min(offsets.min(), part_ends.min())),
                shift + int(max(offsets.max(), part_ends.max())),
            )
        else:  # a broken writer's times: Python's integers do not overflow
            pairs = [(offset, offset + duration) for offset, duration in zip(offsets.tolist(), durations.tolist())]
            low, high = shift + min(min(pair) for pair in pairs), shift + max(max(pair) for pair in pairs)
            part_ends = None
        first = low if first is None else min(first, low)
        last = high if last is None else max(last, high)
        # the sums fit (checked below), the line's shift alone need not: added with wrap-around
        wrap = np.uint64(shift % (1 << 64))
        starts.append((offsets.view(np.uint64) + wrap).view(np.int64))
        if part_ends is None:
            part_ends = (offsets.view(np.uint64) + durations.view(np.uint64)).view(np.int64)
        ends.append((part_ends.view(np.uint64) + wrap).view(np.int64))
    if first is not None and last is not None:  # some events
        _check_clock(first, last, line_name)
    return np.concatenate(starts), np.concatenate(ends)


def _check_clock(first_ps: int, last_ps: int, line_name: str) -> None:
    """A device plane's times, ps since its earliest TensorFlow Ops line, must fit int64
    (106 days)."""
    if not -(1 << 63) <= first_ps <= last_ps < 1 << 63:
        raise _BrokenEvents(
            f"line {line_name!r}: events lie {max(abs(first_ps), abs(last_ps)) // 10**12:,} s from the "
            "plane's TensorFlow Ops line, past the reach of a 64-bit picosecond clock; the profiler wrote "
            "broken events"
        )


_DEVICE_KIND = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}")


def _plane_stats(plane, stat_names: dict[int, str]) -> dict[str, str | int | float | bytes]:
    """The plane's own stats by name: text or number (``gpu_device_name``, ``core_count``,
    ``jax_version`` on JAX's metadata plane), or the bytes of a ``bytes_value``."""
    values: dict[str, str | int | float | bytes] = {}
    for stat in plane.stats:
        which = stat.WhichOneof("value")
        if which:
            values[stat_names.get(stat.metadata_id, "")] = (
                _stat_text(stat, stat_names) if which in ("ref_value", "str_value") else getattr(stat, which)
            )
    return values


def _stat_text(stat, stat_names: dict[int, str]) -> str:
    if stat.WhichOneof("value") == "ref_value":
        return stat_names.get(stat.ref_value, "")
    return stat.str_value


_DEVICE_PROPERTIES = ("clock_rate", "core_count", "memory_bandwidth", "memory_size")


def _device_properties(plane) -> dict:
    """What a device plane says of its device's limits (the roofline's roof, issue 54):
    clock rate (kHz), SMs, memory bandwidth (bytes/s) and size, compute capability."""
    values = _plane_stats(plane, _stat_names(plane))
    found: dict = {key: float(values[key]) for key in _DEVICE_PROPERTIES if isinstance(values.get(key), (int, float))}
    if isinstance(major := values.get("compute_cap_major"), int):
        found["compute_capability"] = f"{major}.{int(values.get('compute_cap_minor') or 0)}"
    return found


def _device_name(plane, stat_names: dict[int, str], kind: str) -> str:
    values = _plane_stats(plane, stat_names)
    for key in ("device_name", "gpu_device_name", "device_type_string", "model"):
        if isinstance(name := values.get(key), str) and name:
            return name
    if "compute_cap_major" in values:
        major = int(values["compute_cap_major"])
        minor = int(values.get("compute_cap_minor", 0))
        cores = values.get("core_count")
        return f"{kind} (compute capability {major}.{minor}" + (f", {int(cores)} SMs)" if cores else ")")
    return kind
