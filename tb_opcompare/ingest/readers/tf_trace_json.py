"""Reader for ``<host>.trace.json.gz`` (TF 2.0-2.3 sessions; xprof's trace-viewer JSON).

It is the xplane rendered as a Chrome trace: a ``/host:CPU`` process whose threads
carry ``<op_name>:<op_type>`` events, and ``/device:GPU:N`` processes whose
``Stream #`` threads carry kernels naming their op in ``args.tf_op`` (or
``annotation`` / ``level 0`` in older TF), beside a ``TensorFlow Ops`` thread with one event
per execution of a TF op (TF 2.2-2.3). The same rules as the xplane reader apply. What the
rendering drops cannot be read: the device's model (the plane's stats) is not in it.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np

from tb_opcompare.errors import ProfileError
from tb_opcompare.ingest.readers.chrome_json import ChromeTrace, process_names
from tb_opcompare.ingest.readers.device_executions import PS_PER_US, InvocationIds, add_executed_kernels
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
from tb_opcompare.schema.optable import (
    OpEvents,
    OpProfile,
    ProfileFacts,
    add_nested_host_ops,
    crossing_warning,
)

FORMAT = "tf_trace_json"


def is_tf_trace_json(trace: ChromeTrace) -> bool:
    return any(name.startswith(("/host:", "/device:")) for name in process_names(trace).values())


def read_tf_trace_json(path: str, trace: ChromeTrace) -> OpProfile:
    processes = process_names(trace)
    threads = {
        (event.pid, event.tid): event.args.name
        for event in trace.traceEvents
        if event.ph == "M" and event.name == "thread_name" and event.args and event.args.name
    }
    host_threads: dict[tuple, list] = defaultdict(list)
    events = OpEvents()
    device_kinds: set[str] = set()
    device_steps: dict[int | str, list[tuple[float, float]]] = defaultdict(list)  # (start, duration) per device
    markers: dict[int, float] = {}  # step number -> its longest marker (µs)
    calls: list[tuple[float, float]] = []  # Keras 2's step function calls: (start, duration)
    input_batches, declared_batches, step_batches = Counter(), Counter(), Counter()
    threads_run = Counter()  # the model's op events on TF's executor threads ("graph") and elsewhere ("eager")
    kernels: dict[int, list] = defaultdict(list)  # device process -> (op, start, duration in ps) of its kernels
    executions: dict[int, dict] = defaultdict(lambda: defaultdict(list))  # device process -> op -> spans (ps)
    first_shape: tuple[float, int] | None = None
    for event in trace.traceEvents:
        if event.ph != "X":
            continue
        process = processes.get(event.pid, "")
        duration = event.dur or 0.0
        if process.startswith("/host:"):
            long_name = event.args.long_name if event.args else None
            op = parse_host_op(long_name or event.name)
            if op:
                eager = (long_name or event.name).startswith(EAGER_OP_PREFIX)
                host_threads[(event.pid, event.tid)].append((event.ts, duration, op, eager))
                execution = execution_thread(threads.get((event.pid, event.tid), ""))
                if execution is not None and op[1] != "Dataset":
                    threads_run[execution] += 1
                batch = leading_dim(event.args.shape) if event.args and event.args.shape else None
                if batch and (first_shape is None or event.ts < first_shape[0]):
                    first_shape = (event.ts, batch)
            # tf.data's iterators are ops (typed Dataset) that also say the batch
            _step_evidence(event, duration, markers, calls, input_batches, declared_batches, step_batches)
        elif process.startswith("/device:"):
            thread = threads.get((event.pid, event.tid), "")
            if thread == "Steps":
                device_steps[event.pid].append((event.ts, duration))
            elif thread == "TensorFlow Ops":  # one event per execution of a TF op, spanning its kernels
                # the rendering shows the op's type; its ``name:type`` is the long name
                op = op_from_annotation((event.args.long_name if event.args else None) or event.name)
                if op:
                    executions[event.pid][op].append((_ps(event.ts), _ps(event.ts + duration)))
            if not thread.startswith("Stream #"):
                continue
            device_kinds.add(process[len("/device:") :].split(":", 1)[0])
            kernels[event.pid].append((_kernel_op(event), _ps(event.ts), _ps(duration)))
    # as the xplane reader counts them: a kernel belongs to the execution of its op it starts
    # in, on its device; a kernel no execution spans (a copy) is an execution of its own
    invocations = InvocationIds()
    for pid, device_kernels in kernels.items():
        spans = {op: np.array(sorted(pairs), dtype=np.int64) for op, pairs in executions[pid].items()}
        add_executed_kernels(events, device_kernels, spans, invocations)
    keep_eager = ran_eagerly(threads_run["graph"], threads_run["eager"])
    add_nested_host_ops(
        events,
        [
            [(start, duration, op) for start, duration, op, eager in ops if keep_eager or not eager]
            for ops in host_threads.values()
        ],
    )
    if not len(events):
        raise ProfileError(path, "no TensorFlow op events on /host: or /device: processes")
    facts = ProfileFacts(format=FORMAT, framework="TensorFlow")
    if threads_run:
        facts.compiler, facts.compiler_source = tf_execution(threads_run["graph"], threads_run["eager"])
    if device_kinds:
        facts.device = "GPU" if "GPU" in device_kinds else sorted(device_kinds)[0]
    busiest_device = max(device_steps.values(), key=len, default=[])
    facts.steps, facts.steps_source, facts.step_times_us = settled_steps(
        markers,
        [duration for _, duration in sorted(calls)],
        [duration for _, duration in sorted(busiest_device)],
        "device process",
    )
    if facts.step_times_us:
        facts.step_time_us = sum(facts.step_times_us) / len(facts.step_times_us)
    facts.batch_size, facts.batch_size_source, warning = batch_size_evidence(
        first_shape[1] if first_shape else None, input_batches, step_batches, declared_batches
    )
    if warning:
        facts.warnings.append(warning)
    if events.crossings:
        facts.warnings.append(crossing_warning(events.crossings))
    return OpProfile.from_events(facts, events)


def _step_evidence(
    event,
    duration: float,
    markers: dict[int, float],
    calls: list,
    input_batches: Counter,
    declared_batches: Counter,
    step_batches: Counter,
) -> None:
    """What a host event that is not a TF op says of the steps and the batch size, as the
    xplane reader reads the same events (``tf_ops``): step markers (``step_num``) and the
    ``batch_size`` Keras 2's carries, Keras 2's step function calls, the tf.data root
    iterator's element shapes, a batch dataset's declared size."""
    args = event.args
    if event.name == STEP_FUNCTION:
        calls.append((event.ts, duration))
    if args is None:
        return
    step = _whole_number(args.step_num)
    if step is not None:
        markers[step] = max(markers.get(step, 0.0), duration)
        size = _whole_number(args.batch_size)
        if is_batch_size(size):
            step_batches[size] += 1
    elif event.name in PIPELINE_ROOTS and isinstance(args.shapes, str):
        size = shared_leading_dim(args.shapes)
        if size:
            input_batches[size, event.name] += 1
    elif is_batch_dataset(event.name):
        size = _whole_number(args.batch_size)
        if is_batch_size(size):
            declared_batches[size] += 1


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


def _ps(microseconds: float) -> int:
    """A trace time (µs, a float) on the picosecond clock the execution rule counts in."""
    return round(microseconds * PS_PER_US)


def _kernel_op(event) -> tuple[str, str]:
    args = event.args
    if args is not None:
        if args.tf_op and parse_tf_op(args.tf_op):
            return parse_tf_op(args.tf_op)
        for text in (args.annotation, args.level0):
            if text and op_from_annotation(text):
                return op_from_annotation(text)
    kind = event.name if event.name.startswith("Memcpy") else "(kernel without TF op)"
    return event.name, kind
