"""TensorFlow op-name conventions shared by the TF readers."""

from __future__ import annotations

import collections
import re

from tb_opcompare.schema.dimensions import DEFAULT_COMPILER, TF_GRAPH, is_batch_size
from tb_opcompare.schema.events import ARGUMENT_SOURCE

# The rule xprof uses to tell a TF op event ("<name>:<type>") from other host
# activity such as "EagerLocalExecute: Identity" or "ExecutorState::Process".
_OP_TYPE_TEXT = r"[A-Z_][a-zA-Z0-9_]*"
_OP_TYPE = re.compile(_OP_TYPE_TEXT + r"\Z")
# a name, then a type after the last colon (neither holds one): one match a metadata entry
_TF_OP = re.compile(rf"([A-Za-z0-9.][A-Za-z0-9_.\-/>]*):({_OP_TYPE_TEXT})\Z")
_FIRST_TENSOR_DIMS = re.compile(r"\w+\[([0-9,]*)\]")
_TENSOR_DIMS = re.compile(r"\[([0-9,]*)\]")


def parse_tf_op(full_name: str) -> tuple[str, str] | None:
    """``"scope/conv:Conv2D"`` -> ``("scope/conv", "Conv2D")``; None if not a TF op."""
    match = _TF_OP.match(full_name)
    return match.groups() if match else None  # type: ignore[return-value]


EAGER_OP_PREFIX = "EagerLocalExecute: "


def parse_host_op(full_name: str) -> tuple[str, str] | None:
    """A TF op, or a tf.data iterator event (``Iterator::Root::Prefetch``), typed
    ``Dataset`` as xprof's TensorFlow Stats tool types them, or an op run eagerly
    (``EagerLocalExecute: Conv2D``: its dispatch and its kernel, on the calling thread),
    named by its type, since an eager op has no node name. An eager call of a function
    (``EagerLocalExecute: __inference_train_function_1508``) is not an op: the graph's own
    ops, on TF's threads, hold its time."""
    if full_name.startswith("Iterator::"):
        return full_name, "Dataset"
    if full_name.startswith(EAGER_OP_PREFIX):
        op_type = full_name[len(EAGER_OP_PREFIX) :]
        if op_type.startswith("__") or not _OP_TYPE.match(op_type):
            return None
        return op_type, op_type
    return parse_tf_op(full_name)


# TensorFlow's own TraceMe ranges on the threads that run Python, as TF 2.4 to 2.21 write
# them (every TF xplane in tests/fixtures and the public BERT one): the eager runtime
# (``EagerExecute``, ``EagerLocalExecute: Conv2D``, ``TFE_Py_ExecuteCancelable``), C++ scopes
# (``KernelAndDeviceFunc::Run``, ``ThreadpoolListener::Record``), executor callbacks,
# copies, memory events, and the Python API's own (``tf.constant``, ``convert_to_tensor``).
# The xplane keeps nothing else that tells them from the user's
# ``tf.profiler.experimental.Trace`` ranges: a name the rules miss reads as the user's.
# The profiler's Python tracer (JAX's default, TF's python_tracer_level=1) names each
# Python call it saw ``$file.py:line function``: the interpreter's frames, not ranges.
_TF_RANGE_PREFIXES = (
    "Eager",
    "TFE_",
    "Executor",
    "Memcpy",
    "MemCpy",
    "Memory",
    "RemoteCall",
    "tf.",
    "__inference_",
    "_send_",
    "_recv_",
    "$",
)
_TF_RANGES = frozenset(
    {
        "FunctionRun",
        "ValidateInputTypeAndPlacement",
        "convert_to_tensor",
        "BlockUntilReady",
        "ParallelFor",
        "PartitionedCallOp",
        "SessionRun",
        "RemoteCallOp",
        "RemoteCallOpDone",
    }
)
# Stats only TF's own ranges carry: a tf.function call's, a step marker's, and the flow
# (producer/consumer) links TF draws between threads.
TF_RANGE_STATS = frozenset({"tf_function_call", "step_num", "_r", "_p", "_c", "_pt", "_ct"})
# TF's thread pools (``tf_Compute``, ``tf_numa_0_Eigen``, ``tf_data_…``, ``collective_ops``):
# their non-op events are the runtime's, never the user's Python.
_TF_THREADS = ("tf_", "collective_ops")


# tf.data's producer and consumer ranges (``PrefetchConsume``, ``ParallelMapProduce``), which
# land on the calling thread when the model runs eagerly
_TF_DATA_HANDOFF = re.compile(r"[A-Z][A-Za-z]*(Produce|Consume)\Z")


def is_tf_range(name: str) -> bool:
    """Whether a host event that is not an op is one of TensorFlow's own ranges."""
    return (
        "::" in name
        or name.startswith(_TF_RANGE_PREFIXES)
        or name in _TF_RANGES
        or _TF_DATA_HANDOFF.match(name) is not None
    )


def is_tf_thread(line_name: str) -> bool:
    return line_name.startswith(_TF_THREADS)


def execution_thread(line_name: str) -> str | None:
    """Which way a model's ops ran on this thread: ``graph`` on TF's executor threads,
    ``eager`` on any other (the caller's), None on tf.data's (the input pipeline's, either way)."""
    if line_name.startswith("tf_data"):
        return None
    return "graph" if is_tf_thread(line_name) else "eager"


def ran_eagerly(graph_ops: int, eager_ops: int) -> bool:
    """Whether a TF profile ran eagerly, from where its model's op events ran: a graph's
    executor (``tf.function``, Keras's ``fit``, a TF1 session) runs ops on TF's own threads
    (``tf_Compute``...), eager execution on the thread that called it; whichever ran most
    ops says. In a graph run the few ops Python dispatched eagerly (Keras's Identity,
    LogicalAnd, WriteSummary around the step function) are the training loop's, which
    xprof's op statistics leave out, and so do the readers; in an eager run they are the
    model."""
    return eager_ops > graph_ops


def tf_execution(graph_ops: int, eager_ops: int) -> tuple[str, str]:
    """(compiler, its evidence) of a TF profile without XLA ops (``ran_eagerly``)."""
    graph = not ran_eagerly(graph_ops, eager_ops)
    return (
        TF_GRAPH if graph else DEFAULT_COMPILER,
        f"data: {graph_ops:,} of {graph_ops + eager_ops:,} TensorFlow op events on TF's executor threads "
        f"({'a graph: tf.function or a session' if graph else 'eager: the rest ran on the calling thread'}), "
        "no XLA op",
    )


def op_from_annotation(annotation: str) -> tuple[str, str] | None:
    """The op a kernel's annotation names: its innermost ``::``-joined entry with the
    ``#shape=...#`` suffix dropped. An entry that is not ``name:type`` (a TraceMe such
    as ``MakeTensorFromProto``) names the op itself and is its type too."""
    innermost = annotation.split("#", 1)[0].rsplit("::", 1)[-1]
    if not innermost:
        return None
    return parse_tf_op(innermost) or (innermost, innermost)


def leading_dim(shape_text: str) -> int | None:
    """Leading dimension of the first tensor of rank >= 2 in ``(float[32,28,28,1];int64[])``."""
    for match in _FIRST_TENSOR_DIMS.finditer(shape_text):
        dims = [d for d in match.group(1).split(",") if d]
        if len(dims) >= 2 and dims[0].isdigit() and int(dims[0]) > 0:
            return int(dims[0])
    return None


def shared_leading_dim(shapes_text: str) -> int | None:
    """The leading dimension all tensors of a tf.data element share (``[32,28,28,1] [32]``
    -> 32): the element's batch size. None if they do not share one."""
    leading = {dims.split(",", 1)[0] for dims in _TENSOR_DIMS.findall(shapes_text)}
    if len(leading) == 1:
        size = next(iter(leading))
        if size.isdigit() and int(size) > 0:
            return int(size)
    return None


# Scopes of the optimizers Keras and TF ship: what they allocate has the shape of a
# parameter (slots, updates), never of a batch of activations.
_OPTIMIZER_SCOPES = frozenset(
    {
        "adam",
        "adamw",
        "adamax",
        "nadam",
        "sgd",
        "rmsprop",
        "adagrad",
        "adadelta",
        "ftrl",
        "lamb",
        "lion",
        "adafactor",
        "gradientdescent",
        "momentum",
        "optimizer",
    }
)


def is_optimizer_scope(tf_op: str) -> bool:
    """Whether a scope of ``tf_op`` (a part before a slash), in any case, is an optimizer's."""
    # the name lowered whole, then split: its parts lowered, in two calls, not one a part
    return not _OPTIMIZER_SCOPES.isdisjoint(tf_op.lower().split("/")[:-1])


# the step waiting on its input pipeline
_INPUT_TYPES = ("IteratorGetNext", "MultiDeviceIteratorGetNext", "QueueDequeue", "ReaderRead")
_COPY_TYPES = frozenset({"_Recv", "_Send", "_HostRecv", "_HostSend", "MEMCPYHtoD", "MEMCPYDtoH", "MEMCPYDtoD"})
_GRADIENT_SCOPES = ("gradients", "gradient_tape")


def tf_step_category(name: str, op_type: str) -> str:
    """What a TF op's time is in a step (``schema.events.STEP_CATEGORIES``), by its type and
    its name's scopes: the input pipeline's dequeue, a copy between devices, the optimizer's
    update (its scope or an ``Apply*`` type), the gradients (``gradients/``,
    ``gradient_tape/``, ``…_grad/``, or a gradient kernel's type: ``Conv2DBackpropInput``,
    ``ReluGrad``), else forward."""
    if op_type.startswith(_INPUT_TYPES) or name.startswith("Iterator::"):
        return "input"
    if op_type in _COPY_TYPES:
        return "copy"
    if op_type.startswith(("Apply", "ResourceApply")) or is_optimizer_scope(name):
        return "optimizer"
    if "grad" in name and any(part in _GRADIENT_SCOPES or part.endswith("_grad") for part in name.split("/")[:-1]):
        return "backward"
    # an eager op is named by its type alone: a gradient kernel's type says what it is
    if "Backprop" in op_type or op_type.endswith(("Grad", "GradV2", "GradGrad")):
        return "backward"
    return "forward"


# Host events of an xplane that are no TF op but say what the step waits on: the get-next
# op's own body on tf.data's thread (its op event, where there is one, is on the executor's),
# and the CUDA/HIP runtime and driver calls CUPTI records on the calling thread.
_INPUT_WAITS = ("IteratorGetNextOp::DoCompute", "IteratorGetNextAsOptionalOp::DoCompute")
_RUNTIME_CALL = re.compile(r"(?:cu|cuda|hip)[A-Z]\w*\Z")
_HOST_COPIES = frozenset({"MemcpyH2D", "MemcpyD2H", "MemcpyD2D", "MemCpyAsync"})


def tf_host_event_category(name: str) -> str | None:
    """What a host event that is no op is in a step (``STEP_CATEGORIES``), None where it
    is none of them (a range around ops, tf.data's background work, the executor's own)."""
    if name in _INPUT_WAITS:
        return "input"
    if name in _HOST_COPIES:
        return "copy"
    if _RUNTIME_CALL.match(name):
        if "Memcpy" in name or "memcpy" in name:
            return "copy"
        return "device_wait" if "Synchronize" in name else "launch"
    return None


def allocation_batch_vote(shapes_by_op: dict[str, set[str]]) -> tuple[int, int, int] | None:
    """(batch size, shapes that agree, shapes that vote) from the tensor shapes of memory
    allocations (``{shape text: tf_ops that allocated it}``). Each distinct shape of
    rank >= 2 votes once for its leading dimension, so a weight gradient allocated in
    every step does not outvote the activations; shapes an optimizer allocated are
    parameters and do not vote. None without two agreeing shapes (one shape can as well be
    a weight's)."""
    votes: dict[int, int] = {}
    for shape, tf_ops in shapes_by_op.items():
        dims = shape.strip("[]").split(",")
        # a dimension past int64 is no real tensor's (and a hostile file's digits can be many)
        if len(dims) < 2 or not all(d.isdigit() and len(d) <= 18 and int(d) > 0 for d in dims):
            continue
        if not is_batch_size(int(dims[0])):
            continue
        if any(is_optimizer_scope(op) for op in tf_ops):
            continue
        votes[int(dims[0])] = votes.get(int(dims[0]), 0) + 1
    if not votes:
        return None
    size, agreeing = max(votes.items(), key=lambda item: item[1])
    return (size, agreeing, sum(votes.values())) if agreeing >= 2 else None


# Steps and batch sizes, the same rules for an .xplane.pb and its trace.json.gz rendering.
PIPELINE_ROOTS = ("Iterator::Root", "Iterator::Model")  # tf.data's outermost iterator: the step's input
BATCH_DATASETS = ("BatchV2", "Batch", "PaddedBatchV2", "PaddedBatch", "ParallelBatch", "MapAndBatch")
STEP_FUNCTION = "train_function"  # Keras 2 calls it once per training step
STEP_EVENT_BATCH = "the batch_size of the Keras step event (fit()'s argument)"


def is_batch_dataset(name: str) -> bool:
    return name.startswith("Iterator::") and name.rsplit("::", 1)[-1] in BATCH_DATASETS


def settled_steps(
    markers: dict[int, float], calls: list[float], device_steps: list[float], device_word: str
) -> tuple[int | None, str, list[float]]:
    """(profiled steps, where the count came from, each step's wall time in µs) from the
    three records TF keeps: ``step_num`` markers on the host (the longest per step),
    Keras 2's step function calls in start order (Keras 2 marks one profiled step, or
    none, but calls its step function for each: each call's span is a step), and the
    device's ``Steps`` line (TF 2.2-2.4: one event per step, spanning it)."""
    if len(calls) > len(markers):
        return len(calls), f"Keras step function calls ({STEP_FUNCTION}); step markers: {len(markers)}", list(calls)
    if markers:
        return len(markers), "step markers (step_num) on the host", [markers[step] for step in sorted(markers)]
    if device_steps:
        return len(device_steps), f"Steps line of the {device_word}", list(device_steps)
    return None, "unknown: the profile has no step markers (Keras 3 writes none)", []


def batch_size_evidence(
    first_shape: int | None,
    input_batches: collections.Counter,
    step_batches: collections.Counter,
    declared_batches: collections.Counter,
) -> tuple[int | None, str | None, str | None]:
    """(batch size, its source, a warning or None) from what an xplane holds, measurements
    first: an op's input shape (old TF), the tf.data elements delivered to the step (the
    most common, so that a last, partial batch does not count), the batch dataset's
    declared size. Keras 2's step-event ``batch_size`` is ``fit()``'s argument, which Keras
    ignores for an already batched dataset: not a measurement, so it is last, its source
    says ``argument:`` (a sidecar or a run name outranks it, ``ingest.facts``), and where
    a measurement exists it confirms it or is warned about."""
    if first_shape:
        size, source = first_shape, "first op input shape in the profile"
    elif input_batches:
        (size, root), _ = input_batches.most_common(1)[0]
        source = f"tf.data input elements ({root} shapes)"
    elif declared_batches:
        size = declared_batches.most_common(1)[0][0]
        source = "the batch_size of the tf.data batch dataset (Iterator::…::BatchV2)"
    elif step_batches:
        return step_batches.most_common(1)[0][0], ARGUMENT_SOURCE + STEP_EVENT_BATCH, None
    else:
        return None, None, None
    warning = None
    if step_batches:
        declared = step_batches.most_common(1)[0][0]
        if declared == size:
            source += f"; {STEP_EVENT_BATCH} agrees"
        else:
            warning = f"{STEP_EVENT_BATCH} is {declared}, but {source} gives {size}; using {size}"
    return size, f"data: {source}", warning
