"""Reader for ``<host>.trace.json.gz`` (TF 2.0-2.3 sessions; xprof's trace-viewer JSON).

It is the xplane rendered as a Chrome trace: a ``/host:CPU`` process whose threads
carry ``<op_name>:<op_type>`` events, and ``/device:GPU:N`` processes whose
``Stream #`` threads carry kernels naming their op in ``args.tf_op`` (or
``annotation`` / ``level 0`` in older TF), beside a ``TensorFlow Ops`` thread with one event
per execution of a TF op (TF 2.2-2.3). The same rules as the xplane reader apply, the
pieces of an execution that thread cut apart put back together by the kernels' launches on
the host threads (``correlation_id``), or else their ``group_id`` (``merged_fragments``).
What the rendering drops cannot be read: the device's model (the plane's stats) is not in it.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict

import numpy as np

from tb_opcompare.errors import ProfileError
from tb_opcompare.ingest.readers.chrome_json import ChromeTrace, process_names
from tb_opcompare.ingest.readers.device_executions import (
    PS_PER_US,
    InvocationIds,
    KernelTies,
    LaunchIndex,
    add_executed_kernels,
    enclosing_ops,
    kernel_columns,
)
from tb_opcompare.ingest.readers.tf_ops import (
    EAGER_OP_PREFIX,
    PIPELINE_ROOTS,
    STEP_FUNCTION,
    batch_size_evidence,
    execution_thread,
    is_batch_dataset,
    leading_dim,
    op_from_annotation,
    parse_host_op,
    parse_tf_op,
    ran_eagerly,
    settled_steps,
    shared_leading_dim,
    tf_execution,
)
from tb_opcompare.schema.dimensions import is_batch_size
from tb_opcompare.schema.events import OpEvents, ParsedProfile, ProfileFacts, add_nested_host_ops, crossing_warning

FORMAT = "tf_trace_json"


def is_tf_trace_json(trace: ChromeTrace) -> bool:
    return any(name.startswith(("/host:", "/device:")) for name in process_names(trace).values())


def read_tf_trace_json(path: str, trace: ChromeTrace) -> ParsedProfile:
    """The steps: each complete event read by its process (``_read_host_event``,
    ``_read_device_event``) into a ``_TraceEvidence``; the ops added as the xplane reader
    adds them (``_add_ops``); the facts settled from the evidence."""
    processes = process_names(trace)
    evidence = _TraceEvidence(
        threads={
            (event.pid, event.tid): event.args.name
            for event in trace.traceEvents
            if event.ph == "M" and event.name == "thread_name" and event.args and event.args.name
        }
    )
    for event in trace.traceEvents:
        if event.ph != "X":
            continue
        process = processes.get(event.pid, "")
        if process.startswith("/host:"):
            _read_host_event(event, evidence)
        elif process.startswith("/device:"):
            _read_device_event(event, process, evidence)
    events = _add_ops(evidence)
    if not len(events):
        raise ProfileError(path, "no TensorFlow op events on /host: or /device: processes")
    return ParsedProfile(_settled_facts(evidence, events), events)


@dataclasses.dataclass
class _TraceEvidence:
    """What the trace's events say, gathered event by event: the host's ops by thread, the
    devices' kernels and executions, and the evidence of steps, batch size and execution."""

    threads: dict[tuple, str]  # (pid, tid) -> thread name
    host_threads: dict[tuple, list] = dataclasses.field(default_factory=lambda: defaultdict(list))
    device_kinds: set[str] = dataclasses.field(default_factory=set)
    # (start, duration) of each device's Steps events
    device_steps: dict[int | str, list] = dataclasses.field(default_factory=lambda: defaultdict(list))
    markers: dict[int, float] = dataclasses.field(default_factory=dict)  # step number -> its longest marker (µs)
    calls: list[tuple[float, float]] = dataclasses.field(default_factory=list)  # Keras 2's step function calls
    input_batches: Counter = dataclasses.field(default_factory=Counter)
    declared_batches: Counter = dataclasses.field(default_factory=Counter)
    step_batches: Counter = dataclasses.field(default_factory=Counter)
    # the model's op events on TF's executor threads ("graph") and elsewhere ("eager")
    threads_run: Counter = dataclasses.field(default_factory=Counter)
    # device process -> (op, start, duration in ps) of its kernels; -> op -> its executions' spans (ps)
    kernels: dict[int, list] = dataclasses.field(default_factory=lambda: defaultdict(list))
    # device process -> (name, group_id, correlation_id) of its kernels, None where absent
    kernel_ties: dict[int, list] = dataclasses.field(default_factory=lambda: defaultdict(list))
    # host thread -> (start ps, correlation_id) of its kernel launches
    launches: dict[tuple, list] = dataclasses.field(default_factory=lambda: defaultdict(list))
    executions: dict[int, dict] = dataclasses.field(default_factory=lambda: defaultdict(lambda: defaultdict(list)))
    first_shape: tuple[float, int] | None = None


def _read_host_event(event, evidence: _TraceEvidence) -> None:
    duration = event.dur or 0.0
    long_name = event.args.long_name if event.args else None
    op = parse_host_op(long_name or event.name)
    if op:
        eager = (long_name or event.name).startswith(EAGER_OP_PREFIX)
        evidence.host_threads[(event.pid, event.tid)].append((event.ts, duration, op, eager))
        execution = execution_thread(evidence.threads.get((event.pid, event.tid), ""))
        if execution is not None and op[1] != "Dataset":
            evidence.threads_run[execution] += 1
        batch = leading_dim(event.args.shape) if event.args and event.args.shape else None
        if batch and (evidence.first_shape is None or event.ts < evidence.first_shape[0]):
            evidence.first_shape = (event.ts, batch)
    else:
        correlation = _id_number(event.args.correlation_id) if event.args else None
        if correlation is not None:  # a kernel or copy launched from this thread
            evidence.launches[(event.pid, event.tid)].append((_ps(event.ts), correlation))
    # tf.data's iterators are ops (typed Dataset) that also say the batch
    _step_evidence(event, duration, evidence)


def _read_device_event(event, process: str, evidence: _TraceEvidence) -> None:
    duration = event.dur or 0.0
    thread = evidence.threads.get((event.pid, event.tid), "")
    if thread == "Steps":
        evidence.device_steps[event.pid].append((event.ts, duration))
    elif thread == "TensorFlow Ops":  # one event per execution of a TF op, spanning its kernels
        # the rendering shows the op's type; its ``name:type`` is the long name
        op = op_from_annotation((event.args.long_name if event.args else None) or event.name)
        if op:
            evidence.executions[event.pid][op].append((_ps(event.ts), _ps(event.ts + duration)))
    if not thread.startswith("Stream #"):
        return
    evidence.device_kinds.add(process[len("/device:") :].split(":", 1)[0])
    evidence.kernels[event.pid].append((_kernel_op(event), _ps(event.ts), _ps(duration)))
    args = event.args
    evidence.kernel_ties[event.pid].append(
        (
            event.name,
            _id_number(args.group_id) if args else None,
            _id_number(args.correlation_id) if args else None,
        )
    )


def _add_ops(evidence: _TraceEvidence) -> OpEvents:
    """The ops as the xplane reader counts them: a kernel belongs to the execution of its op
    it starts in, on its device, and a kernel no execution spans (a copy) is an execution of
    its own; host ops by nesting on their thread, eager ops left out where a graph ran."""
    events = OpEvents()
    invocations = InvocationIds()
    launches = _launch_index(evidence)
    for pid, device_kernels in evidence.kernels.items():
        spans = {op: np.array(sorted(pairs), dtype=np.int64) for op, pairs in evidence.executions[pid].items()}
        keys, codes, starts, durations = kernel_columns(device_kernels)
        ties = _kernel_ties(evidence.kernel_ties[pid], launches, keys, codes) if spans else None
        add_executed_kernels(events, keys, codes, starts, durations, spans, invocations, ties)
    keep_eager = ran_eagerly(evidence.threads_run["graph"], evidence.threads_run["eager"])
    add_nested_host_ops(
        events,
        [
            [(start, duration, op) for start, duration, op, eager in ops if keep_eager or not eager]
            for ops in evidence.host_threads.values()
        ],
    )
    return events


def _launch_index(evidence: _TraceEvidence) -> LaunchIndex:
    """Each launch's host execution: the innermost op event of its thread enclosing it
    (ids unique across threads), as the xplane reader places them."""
    index = LaunchIndex()
    placed, first_id = [], 0
    for thread, launches in evidence.launches.items():
        ops = evidence.host_threads.get(thread)
        if not ops:
            continue
        enclosing = enclosing_ops(
            np.array([_ps(start) for start, _, _, _ in ops], dtype=np.int64),
            np.array([_ps(duration) for _, duration, _, _ in ops], dtype=np.int64),
            np.array([start for start, _ in launches], dtype=np.int64),
        )
        found = enclosing >= 0
        placed.append(
            (
                np.array([correlation for _, correlation in launches], dtype=np.int64)[found],
                first_id + enclosing[found],
                index.op_ids([op for _, _, op, _ in ops])[enclosing[found]],
            )
        )
        first_id += len(ops)
    if placed:
        index.set(*(np.concatenate(column) for column in zip(*placed)))
    return index


def _kernel_ties(ties: list, launches: LaunchIndex, keys: list, codes: np.ndarray) -> KernelTies:
    """A device's kernels' ``KernelTies`` from their (name, group_id, correlation_id), their
    ops ``codes`` into ``keys``."""
    name_codes: dict[str, int] = {}
    names = np.fromiter(
        (name_codes.setdefault(name, len(name_codes)) for name, _, _ in ties), dtype=np.int64, count=len(ties)
    )
    groups = np.fromiter((group if group is not None else 0 for _, group, _ in ties), dtype=np.int64, count=len(ties))
    grouped = np.fromiter((group is not None for _, group, _ in ties), dtype=bool, count=len(ties))
    correlations = np.fromiter(
        (correlation if correlation is not None else 0 for _, _, correlation in ties), dtype=np.int64, count=len(ties)
    )
    correlated = np.fromiter((correlation is not None for _, _, correlation in ties), dtype=bool, count=len(ties))
    return KernelTies(names, groups, grouped, launches.executions(correlations, correlated, keys, codes))


def _settled_facts(evidence: _TraceEvidence, events: OpEvents) -> ProfileFacts:
    facts = ProfileFacts(format=FORMAT, framework="TensorFlow")
    if evidence.threads_run:
        facts.compiler, facts.compiler_source = tf_execution(
            evidence.threads_run["graph"], evidence.threads_run["eager"]
        )
    if evidence.device_kinds:
        facts.device = "GPU" if "GPU" in evidence.device_kinds else sorted(evidence.device_kinds)[0]
    busiest_device = max(evidence.device_steps.values(), key=len, default=[])
    facts.steps, facts.steps_source, facts.step_times_us = settled_steps(
        evidence.markers,
        [duration for _, duration in sorted(evidence.calls)],
        [duration for _, duration in sorted(busiest_device)],
        "device process",
    )
    if facts.step_times_us:
        facts.step_time_us = sum(facts.step_times_us) / len(facts.step_times_us)
    first_shape = evidence.first_shape
    facts.batch_size, facts.batch_size_source, warning = batch_size_evidence(
        first_shape[1] if first_shape else None,
        evidence.input_batches,
        evidence.step_batches,
        evidence.declared_batches,
    )
    if warning:
        facts.warnings.append(warning)
    if events.crossings:
        facts.warnings.append(crossing_warning(events.crossings))
    return facts


def _step_evidence(event, duration: float, evidence: _TraceEvidence) -> None:
    """What a host event that is not a TF op says of the steps and the batch size, as the
    xplane reader reads the same events (``tf_ops``): step markers (``step_num``) and the
    ``batch_size`` Keras 2's carries, Keras 2's step function calls, the tf.data root
    iterator's element shapes, a batch dataset's declared size."""
    args = event.args
    markers = evidence.markers
    if event.name == STEP_FUNCTION:
        evidence.calls.append((event.ts, duration))
    if args is None:
        return
    step = _whole_number(args.step_num)
    if step is not None:
        markers[step] = max(markers.get(step, 0.0), duration)
        size = _whole_number(args.batch_size)
        if is_batch_size(size):
            evidence.step_batches[size] += 1
    elif event.name in PIPELINE_ROOTS and isinstance(args.shapes, str):
        size = shared_leading_dim(args.shapes)
        if size:
            evidence.input_batches[size, event.name] += 1
    elif is_batch_dataset(event.name):
        size = _whole_number(args.batch_size)
        if is_batch_size(size):
            evidence.declared_batches[size] += 1


def _whole_number(value) -> int | None:
    """An argument the trace viewer wrote as text (``"16"``) or a number; None for ``None``
    and anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit() and len(value) <= 18:
        return int(value)
    return None


def _id_number(value) -> int | None:
    """A group or correlation id (text or a number) within int64, else None."""
    number = _whole_number(value)
    return number if number is not None and -(1 << 63) <= number < 1 << 63 else None


def _ps(microseconds: float) -> int:
    """A trace time (µs, a float) on the picosecond clock the execution rule counts in."""
    return round(microseconds * PS_PER_US)


def _kernel_op(event) -> tuple[str, str]:
    args = event.args
    if args is not None:
        if args.tf_op and (op := parse_tf_op(args.tf_op)):
            return op
        for text in (args.annotation, args.level0):
            if text and (annotated := op_from_annotation(text)):
                return annotated
    kind = event.name if event.name.startswith("Memcpy") else "(kernel without TF op)"
    return event.name, kind
