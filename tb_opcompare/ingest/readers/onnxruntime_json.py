"""Reader for ONNX Runtime's own profile (``SessionOptions.enable_profiling``): a JSON array
of Chrome-trace events that ``InferenceSession.end_profiling()`` writes.

Each node execution is a ``Node`` event named ``<node name>_kernel_time`` whose
``args.op_name`` is the node's operator (``Conv``, ``FusedGemm``) and ``args.provider``
the execution provider that ran it; older versions add ``_fence_before`` /
``_fence_after`` events around it, which are waits, not the node. Each
``InferenceSession.run`` is a ``Session`` event ``model_run``: the profile's steps. The
nodes of a control-flow node's subgraph (``Loop``, ``If``, ``Scan``) run inside its event
on its thread, so self time is taken by nesting per thread, as for any trace. The batch
size is read from the nodes' first inputs (``args.input_type_shape``), as the PyTorch reader reads it from ``Input
Dims``; the precision from those inputs' element types.
"""

from __future__ import annotations

import collections

import msgspec
import numpy as np

from tb_opcompare.errors import ProfileError
from tb_opcompare.ingest.readers.chrome_json import BaseEvent, TraceText
from tb_opcompare.ingest.readers.step_breakdown import HOST_CODES, layered_host_rows
from tb_opcompare.schema.dimensions import canonical_precision, is_batch_size
from tb_opcompare.schema.events import (
    OpEvents,
    ParsedProfile,
    ProfileFacts,
    crossing_events,
    crossing_warning,
    precision_from_dtypes,
    self_times,
    steps_of,
)

FORMAT = "onnxruntime"
COMPILER = "ONNX Runtime"
_KERNEL_SUFFIX = "_kernel_time"
_STEP_EVENT = "model_run"
# Providers whose nodes run on an accelerator; any other (CPU, OpenVINO on a CPU, ...) is the CPU.
_ACCELERATOR_PROVIDERS = frozenset(
    {
        "CUDAExecutionProvider",
        "TensorrtExecutionProvider",
        "ROCMExecutionProvider",
        "MIGraphXExecutionProvider",
        "DmlExecutionProvider",
        "NvTensorRTRTXExecutionProvider",
    }
)
_COPY_OPS = frozenset({"MemcpyToHost", "MemcpyFromHost"})  # the copies ORT inserts between providers
BREAKDOWN_NOTE = (
    "ONNX Runtime records its nodes only, on one or more threads: each moment counts once, under copies "
    "(its Memcpy nodes), launches (a node an accelerator's provider ran: its host side), forward (any "
    "other node) that any thread ran; the session's own work between nodes is untracked"
)
_FLOAT_TYPES = {"float", "float16", "bfloat16", "double"}  # what a node computes in; integers are indices and shapes
_MIN_BATCH_VOTES = 2


def device_of_providers(providers) -> str:
    """The device a session's execution providers run nodes on: ``GPU`` where one is an
    accelerator's, else ``CPU`` (the recording helper and the reader ask this one rule)."""
    return "GPU" if any(provider in _ACCELERATOR_PROVIDERS for provider in providers) else "CPU"


class OrtArgs(msgspec.Struct, gc=False):
    op_name: str | None = None
    provider: str | None = None
    input_type_shape: list[dict[str, list[int]]] | None = None


class OrtEvent(BaseEvent, gc=False):
    args: OrtArgs | None = None


def read_onnxruntime(path: str, text: TraceText) -> ParsedProfile:
    steps: list[tuple[float, float]] = []
    # (start, duration, (node, op type), category code) of each node event, per thread
    threads: dict[tuple[str, str], list[tuple[float, float, tuple[str, str], int]]] = collections.defaultdict(list)
    providers: collections.Counter = collections.Counter()
    leading: collections.Counter = collections.Counter()
    dtypes: collections.Counter = collections.Counter()
    for _, batch in text.batches(OrtEvent):
        for event in batch:
            if event.ph != "X":
                continue
            if event.cat == "Session" and event.name == _STEP_EVENT:
                steps.append((event.ts, event.dur or 0.0))
            elif event.cat == "Node" and event.name.endswith(_KERNEL_SUFFIX):
                args = event.args or OrtArgs()
                node = event.name[: -len(_KERNEL_SUFFIX)]
                threads[str(event.pid), str(event.tid)].append(
                    (event.ts, event.dur or 0.0, (node, args.op_name or node), _node_category(args))
                )
                providers[args.provider or "unknown provider"] += 1
                _count_first_input(args, leading, dtypes)
    if not threads:
        raise ProfileError(
            path,
            "an ONNX Runtime profile with no node events ('<node>_kernel_time'): the session "
            "was profiled but never run, or the profile was cut before its runs",
        )
    events = OpEvents()
    step_bounds = np.array(sorted((start, start + length) for start, length in steps), dtype=np.float64).reshape(-1, 2)
    keys: dict[tuple[str, str], int] = {}
    spans = []  # each thread's nodes: starts, ends, step category codes
    for nodes in threads.values():
        nodes.sort(key=lambda node: (node[0], -node[1]))
        starts = np.fromiter((node[0] for node in nodes), dtype=np.float64, count=len(nodes))
        durations = np.fromiter((node[1] for node in nodes), dtype=np.float64, count=len(nodes))
        codes = np.fromiter((keys.setdefault(node[2], len(keys)) for node in nodes), dtype=np.int64, count=len(nodes))
        spans.append((starts, starts + durations, np.fromiter((node[3] for node in nodes), np.int64, len(nodes))))
        own, parents = self_times(starts, durations)
        events.crossings += crossing_events(starts, durations, parents)
        events.add_host_codes(
            list(keys), codes, durations, own, steps=steps_of(starts, step_bounds) if len(step_bounds) else None
        )
    events.step_count = len(step_bounds)
    facts = _facts(steps, providers, leading, dtypes)
    if len(step_bounds):
        all_starts, all_ends, all_categories = (np.concatenate(column) for column in zip(*spans))
        events.breakdown = layered_host_rows(step_bounds, all_starts, all_ends, all_categories)
        facts.step_breakdown_note = BREAKDOWN_NOTE
    if events.crossings:
        facts.warnings.append(crossing_warning(events.crossings))
    return ParsedProfile(facts, events)


def _node_category(args: OrtArgs) -> int:
    """A node's step category code: a copy between providers, its launch where an
    accelerator's provider ran it, else forward (an inference session runs no backward)."""
    if args.op_name in _COPY_OPS:
        return HOST_CODES["copy"]
    return HOST_CODES["launch" if args.provider in _ACCELERATOR_PROVIDERS else "forward"]


def _count_first_input(args: OrtArgs, leading: collections.Counter, dtypes: collections.Counter) -> None:
    """A node's first input: its leading dimension where it has two or more (a batch of
    rows, images or tokens; weights come later), and its element type."""
    if not args.input_type_shape:
        return
    for element_type, dims in args.input_type_shape[0].items():
        if element_type in _FLOAT_TYPES:
            dtypes[canonical_precision(element_type)] += 1
        if len(dims) >= 2 and is_batch_size(dims[0]):
            leading[dims[0]] += 1


def _facts(
    steps: list[tuple[float, float]],
    providers: collections.Counter,
    leading: collections.Counter,
    dtypes: collections.Counter,
) -> ProfileFacts:
    device = device_of_providers(providers)
    named = ", ".join(f"{provider} ({count:,} nodes)" for provider, count in providers.most_common())
    facts = ProfileFacts(
        format=FORMAT,
        framework=COMPILER,
        device=device,
        compiler=COMPILER,
        compiler_source=f"data: an ONNX Runtime profile; providers {named}",
    )
    if steps:
        facts.steps = len(steps)
        facts.steps_source = f"data: {len(steps)} '{_STEP_EVENT}' events (each InferenceSession.run)"
        facts.step_times_us = [length for _, length in sorted(steps)]
        facts.step_time_us = float(np.mean(facts.step_times_us))
    votes = sum(leading.values())
    if votes >= _MIN_BATCH_VOTES:
        size, agreeing = leading.most_common(1)[0]
        facts.batch_size = int(size)
        facts.batch_size_agreement = agreeing / votes
        facts.batch_size_source = (
            f"data: leading dimension of the first input of {agreeing:,} of {votes:,} node "
            "executions with a 2-D or larger first input"
        )
    found = precision_from_dtypes(dict(dtypes), "element types of the first input of {total} node executions")
    if found:
        facts.precision, facts.precision_source = found
    if device != "CPU":
        facts.warnings.append(
            f"nodes ran on {named}: ONNX Runtime times each node on the host, so an "
            "accelerator's node time is its launch, or its kernel where the provider waits for it"
        )
    return facts
