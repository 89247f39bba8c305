"""Reader for ``<host>.xplane.pb`` (TensorFlow >= 2.2 profiler sessions).

Host ops are events named ``<op_name>:<op_type>`` on the ``/host:CPU`` plane; their
self time subtracts nested TF-op events on the same line, as xprof's TensorFlow
Stats tool does. Device ops are the kernels and memcpys on the ``Stream #`` lines of
``/device:GPU:N`` planes, attributed to a TF op through the ``tf_op`` stat (current
TF) or the ``annotation`` / ``level 0`` stats (TF 2.4 era). Derived lines repeat the
same kernels and are not read as ops; a "TensorFlow Ops" line (TF 2.2-2.4) says which
kernels are one execution of their op, the pieces it cuts an execution in put back
together by the host's kernel launches or the kernels' step groups
(``xplane_device.read_device_plane``).

This module reads the session: each file's planes in their order, and the profile's
facts settled from what they gathered. A plane is read by its own module: the host
planes by ``xplane_host``, the device planes by ``xplane_device``; what they gather
for the session and for one another is held by ``xplane_evidence``, and the reading of
events and stats that both do lives in ``xplane_events``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from google.protobuf.message import DecodeError

from tb_opcompare.errors import OverLimit, ProfileError
from tb_opcompare.ingest.readers import xplane_steps
from tb_opcompare.ingest.readers.device_executions import PS_PER_US
from tb_opcompare.ingest.readers.tf_ops import (
    STEP_EVENT_BATCH,
    allocation_batch_vote,
    batch_size_evidence,
    settled_steps,
    tf_execution,
)
from tb_opcompare.ingest.readers.xla_hlo import METADATA_PLANE
from tb_opcompare.ingest.readers.xplane_device import device_properties, read_device_plane
from tb_opcompare.ingest.readers.xplane_events import BrokenEvents, plane_stat_names, plane_stats
from tb_opcompare.ingest.readers.xplane_evidence import HostLaunches, SessionEvidence
from tb_opcompare.ingest.readers.xplane_host import HostOps, HostPlaneReader
from tb_opcompare.ingest.readers.xplane_wire import EventCount, TooManyElements, TooManyPlanes, split_space
from tb_opcompare.schema.events import (
    ARGUMENT_SOURCE,
    OpEvents,
    ParsedProfile,
    ProfileFacts,
    crossing_warning,
    precision_from_dtypes,
)

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
    evidence = SessionEvidence()
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


def _read_file(
    path: str, read_bytes, budget: _ReadBudget, events: OpEvents, facts: ProfileFacts, evidence
) -> list[HostOps]:
    """Read one host's xplane: device kernels (and the host's step count) into ``events``,
    the framework and device into ``facts``, the rest into ``evidence``; return each host
    plane's ops, to be added once the file is let go (so that its bytes and the op times
    are never in memory together)."""
    space = _parse(path, read_bytes(path), budget)
    host_ops = []
    # the host's kernel launches place the device's kernels in the executions a TensorFlow
    # Ops line cut apart: the host planes are read before the device planes
    launches = HostLaunches(wanted=space.has_line("/device:", "TensorFlow Ops"))
    # A file without device planes needs no host plane's steps while it is read: they are
    # settled once its bytes are let go (a 31 MB Keras xplane's read peaked with the file
    # and the steps' sort of every host event at once: 71 MB traced, its worker 109 MB RSS).
    settled_later: list[tuple[HostPlaneReader, tuple[str, str]]] = []
    devices = any(name.startswith("/device:") for name in space.names)
    try:
        for plane in space.planes(rank=_plane_rank):
            if plane.name == METADATA_PLANE:
                evidence.hlo.add(plane)
                jax_version = plane_stats(plane, plane_stat_names(plane)).get("jax_version")
                if isinstance(jax_version, str) and jax_version:
                    facts.framework = f"JAX {jax_version}"
            elif plane.name.startswith("/host:"):
                reader = HostPlaneReader(
                    plane, evidence, names_tf_ops=not (facts.framework or "").startswith("JAX"), launches=launches
                )
                if devices:
                    host_ops.append(reader.read((path, plane.name), events))
                else:
                    reader.read_lines()
                    settled_later.append((reader, (path, plane.name)))
            elif plane.name.startswith("/device:"):
                _read_device(path, plane, events, facts, evidence, launches)
        if settled_later:
            del plane  # with the space's view, the last hold on the file's bytes
            space.let_go()
        for reader, key in settled_later:
            space.current = key[1]  # what an error names
            host_ops.append(reader.finish(key, events))
    except BrokenEvents as error:
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


def _read_device(
    path: str, plane, events: OpEvents, facts: ProfileFacts, evidence: SessionEvidence, launches: HostLaunches
) -> None:
    """One device plane's kernels into ``events``, joined to the host's steps and launches."""
    launches.resolve()
    spans = _device_spans(evidence, path, plane)
    kind, name, plane_steps = read_device_plane(plane, events, evidence, launches, spans)
    if kind:
        evidence.device_names.append(name)
        facts.device = kind
        facts.device_properties = facts.device_properties or device_properties(plane)
        if len(plane_steps) > len(evidence.device_steps):
            evidence.device_steps = plane_steps


def _device_spans(evidence: SessionEvidence, path: str, plane) -> xplane_steps.StepSpans | None:
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


def _settle_facts(facts: ProfileFacts, events: OpEvents, evidence: SessionEvidence) -> None:
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


def _settle_steps(facts: ProfileFacts, evidence: SessionEvidence) -> None:
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


def _settle_breakdown(facts: ProfileFacts, events: OpEvents, evidence: SessionEvidence) -> None:
    """The step split of the host plane whose steps are the profile's (its step times)."""
    for _, spans in evidence.step_spans:
        if spans.walls_match(facts.step_times_us):
            events.breakdown = spans.rows()
            facts.step_breakdown_note = xplane_steps.NOTE
            return


def _settle_batch_size(facts: ProfileFacts, evidence: SessionEvidence) -> None:
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


def _settle_precision_and_compiler(facts: ProfileFacts, evidence: SessionEvidence) -> None:
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
