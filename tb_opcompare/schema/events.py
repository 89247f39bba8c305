"""What a reader hands over: a session's op occurrences and kernels (``OpEvents``), its
facts (``ProfileFacts``) and the few tables it makes besides, before any of them is a
DataFrame (``ParsedProfile``), with the rules the readers share (self time by nesting,
steps of events) and the column names of the tables ``schema.optable`` builds from them.

Nothing here imports pandas: a session can be read in a process that never imports it
(a Dask worker reading one rank of a job, ``store.prewarm``) and handed back, pickled and
small, to the process that builds the tables (``OpProfile.from_parsed``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter
from typing import Any, Final

import numpy as np
from numpy.typing import ArrayLike

from tb_opcompare.schema.dimensions import canonical_precision
from tb_opcompare.schema.groups import first_appearance

OP_COLUMNS = [
    "side",
    "op_name",
    "op_type",
    "occurrences",
    "kernels",
    "total_us",
    "self_us",
    "mean_us",
    "min_us",
    "max_us",
    "std_us",
    "p10_us",
    "median_us",
    "p90_us",
    "per_step_cv",
    "alloc_bytes",
    "net_bytes",
]

STEP_COLUMNS = ["row", "step", "occurrences", "self_us"]

MODULE_COLUMNS = ["side", "op_name", "op_type", "module", "occurrences", "self_us", "alloc_bytes"]

ANNOTATION_COLUMNS = ["name", "kind", "occurrences", "total_us", "outermost_us"]

MEMORY_TIMELINE_COLUMNS = ["device", "time_us", "bytes_in_use"]

MEMORY_TIMELINE_POINTS = 2000

BREAKDOWN_COLUMNS = ["step", "side", "category", "time_us"]

# The work of each op whose calls' work is known or could be (issue 54): one row per op
# (the host row's name and type), over its calls that no other such call encloses (an
# ``aten::conv2d`` counts, not the ``aten::convolution`` it calls).
WORK_COLUMNS = [
    "op_name",
    "op_type",
    "calls",
    "known_calls",
    "flops",
    "bytes",
    "source",
    "host_us",
    "device_calls",
    "device_flops",
    "device_bytes",
    "device_us",
    "device_tf32_us",
]


# Host rows of ``ops`` that are not framework ops, by their ``op_type``: the words PyTorch's
# trace categories use, which every reader writes (the layers of a profile rest on them).
# CUDA/HIP runtime and driver calls, and MTIA's runtime
RUNTIME_TYPES = frozenset({"cuda_runtime", "cuda_driver", "Runtime", "Driver", "mtia_runtime"})

ANNOTATION_TYPES = frozenset({"user_annotation"})  # record_function ranges, as key_averages() lists them

# The application's own work among the rows: its ranges, and TF's input pipeline (tf.data
# iterator events, typed ``Dataset`` as xprof's TensorFlow Stats types them): data preparation.
APPLICATION_TYPES = ANNOTATION_TYPES | {"Dataset"}

QUANTILES = {"p10_us": 0.1, "median_us": 0.5, "p90_us": 0.9}

HOST: Final = "host"

DEVICE: Final = "device"

# A batch size a program passed rather than one measured (Keras 2's step event holds
# fit()'s batch_size, which Keras ignores for an already batched dataset).
ARGUMENT_SOURCE = "argument: "


@dataclasses.dataclass
class ProfileFacts:
    """Run-level facts read from the profile itself (then sidecar, then run name)."""

    format: str
    device: str | None = "CPU"  # CPU, GPU, TPU or another accelerator's kind; None: unknown (not read yet)
    device_name: str | None = None
    steps: int | None = None
    steps_source: str | None = "unknown: the profile has no step markers"
    # mean wall time of one profiled step, where markers give it; what users read is the
    # median steady step of step_times_us (analysis.step_time), made where the views are
    step_time_us: float | None = None
    # Wall time of each profiled step in the order they started, where markers give it (the
    # samples behind step_time_us: the matrix's latency spread and warm-up detection)
    step_times_us: list[float] = dataclasses.field(default_factory=list)
    batch_size: int | None = None
    # where batch_size came from: "data: ..." (measured), ARGUMENT_SOURCE + "..." (an
    # argument the program passed, which a sidecar or run name outranks), or a claim
    batch_size_source: str | None = None
    # Share of the evidence that agrees on batch_size (1.0: all of it); None where the
    # format gives one source only. Weak agreement does not override a sidecar or name.
    batch_size_agreement: float | None = None
    framework: str | None = None
    precision: str | None = None  # fp32, bf16, fp16, "mixed bf16/fp32": the dtypes the model computed in
    precision_source: str | None = None
    compiler: str | None = None  # eager, torch.compile, XLA ...
    compiler_source: str | None = None
    # What the profile says of its accelerator's limits (an xplane device plane's clock_rate kHz,
    # core_count, memory_bandwidth bytes/s, compute_capability): the roofline's roof, issue 54
    device_properties: dict[str, float | str] = dataclasses.field(default_factory=dict)
    # Memory in use at its highest, per device ("CPU", "GPU:0"), where the profile records it
    peak_memory_bytes: dict[str, int] = dataclasses.field(default_factory=dict)
    memory_events: int | None = None  # allocations and frees recorded (None: memory not profiled)
    # What the step breakdown of this format cannot tell apart, and why (a TF graph runs its ops on
    # a pool of threads, so no one thread drives its step); None where it splits by the driving thread
    step_breakdown_note: str | None = None
    # Where these numbers were read: None, this tool's read of the profile's files (cached after);
    # else the logdir's shared index and who wrote it (store.shared_index): a team's index is input
    read_from: str | None = None

    warnings: list[str] = dataclasses.field(default_factory=list)
    # The workers (ranks) of one job whose profiles were read together, each a dict of its
    # rank, world_size, file, steps, step_time_us (median steady step) and host_op_time_us; empty
    # for a profile of one process
    workers: list[dict[str, Any]] = dataclasses.field(default_factory=list)


# Facts of this process's read, never written into a shared index or an export (where a
# run's numbers came from is said by whoever reads them; the disk cache keeps it)
UNSTORED_FACTS = frozenset({"read_from"})

MIXED_SHARE = 0.9  # below this share for its most common dtype, a run is "mixed"


def precision_from_dtypes(dtypes: dict[str, int], evidence: str) -> tuple[str, str] | None:
    """(precision, where it came from) from counts of dtypes (``fp32``, ``bf16`` ...): the
    dtype that holds 90% of them, else ``mixed bf16/fp32`` (most first). ``evidence``
    names what was counted, with ``{total}`` for the count."""
    total = sum(dtypes.values())
    if not total:
        return None
    ranked = sorted(dtypes, key=lambda name: (-dtypes[name], name))
    # a mix is spelt one way whichever dtype leads (fp32 last), as canonical_precision spells it
    leading = dtypes[ranked[0]] >= MIXED_SHARE * total
    precision = ranked[0] if leading else canonical_precision("mixed " + "/".join(ranked))
    shares = ", ".join(f"{dtypes[name]} {name}" for name in ranked)
    return precision, f"data: {evidence.format(total=total)} ({shares})"


class OpEvents:
    """Collects op occurrences (host) and kernels (device), one at a time (``add``) or
    a reader's batch at a time (the ``add_*`` methods that take arrays).

    A kernel's *invocation* is the host op occurrence that launched it, where the trace
    says so (PyTorch correlation ids, ``add_device_kernels``); it gives per-occurrence
    min/max/std on device rows.
    """

    def __init__(self) -> None:
        self.side: list[str] = []
        self.name: list[str] = []
        self.type: list[str] = []
        self.total: list[float] = []
        self.self_time: list[float] = []
        # Each is columns (name -> values) of a table ``OpProfile.from_parsed`` makes.
        self.host_partials: list[dict[str, Any]] = []  # per-op sums from add_host_batch / add_host_codes
        # Each occurrence's self time (float32), op and, where known, step, for the
        # percentiles and the per-step spread: 12-16 bytes an occurrence, where the partials
        # hold only sums.
        self.host_samples: list[tuple[list[tuple[str, str]], np.ndarray, np.ndarray]] = []
        self.host_sample_steps: list[np.ndarray | None] = []  # each sample's step (-1: none), where known
        self.step_count = 0  # profiled steps whose occurrences a reader placed (``steps=`` arguments)
        self.device_partials: list[dict[str, Any]] = []  # per-op kernel sums from add_device_totals
        # per-kernel records from add_device_kernels: each kernel's op an index into the
        # record's keys, so a million kernels hold a million integers, not their names
        self.device_kernels: list[dict[str, Any]] = []
        self.crossings = 0  # host events that outlive the event they start in (see self_times)
        self.memory_partials: list[dict[str, Any]] = []  # per-op allocated and net bytes (add_memory)
        self.net_memory_known = True  # False where frees are not attributed to ops
        # memory in use over time (MEMORY_TIMELINE_COLUMNS), where the profile records it
        self.memory_timeline: dict[str, Any] | None = None
        # each step's time by what it was spent on (BREAKDOWN_COLUMNS), where the reader splits it
        self.breakdown: dict[str, Any] | None = None
        # each op's work (WORK_COLUMNS), where the reader can tell it; one part a worker (a
        # rank of a job), summed per op when the table is made
        self.work: list[dict[str, Any]] = []

    def add(self, side: str, name: str, op_type: str, total_us: float, self_us: float) -> None:
        self.side.append(side)
        self.name.append(name)
        self.type.append(op_type)
        self.total.append(total_us)
        self.self_time.append(self_us)

    def add_host_batch(self, ops: list[tuple[str, str]], totals_us: np.ndarray, selfs_us: np.ndarray) -> None:
        """Many host occurrences at once, folded straight into per-op sums so a profile
        with millions of events never holds one record per event."""
        if ops:
            keys, codes = _encode(ops)
            self.add_host_codes(keys, codes, totals_us, selfs_us, distinct_keys=True)

    def add_host_codes(
        self,
        keys: list[tuple[str, str]],
        codes: np.ndarray,
        totals_us: np.ndarray,
        selfs_us: np.ndarray,
        steps: np.ndarray | None = None,
        distinct_keys: bool = False,
    ) -> None:
        """As ``add_host_batch``, with each occurrence's op given as an index into ``keys``
        (a reader that already holds integer op ids never builds a tuple per event), and,
        where the reader knows it, each occurrence's step (0 .. ``step_count`` - 1, -1
        outside every step). ``distinct_keys``: the reader vouches that no two of ``keys``
        are equal, so that the tables need not group its rows by key (a million keys: a
        dict of a million pairs)."""
        if len(codes):
            self.host_partials.append(_fold_host(keys, codes, totals_us, selfs_us, distinct_keys))
            self.host_samples.append((keys, np.asarray(codes, dtype=np.int32), np.asarray(selfs_us, dtype=np.float32)))
            self.host_sample_steps.append(None if steps is None else np.asarray(steps, dtype=np.int32))

    def add_device_totals(self, keys: list[tuple[str, str]], kernels: Sequence[int], totals_us: ArrayLike) -> None:
        """Kernel counts and summed kernel time per op, for traces that do not link
        kernels to the op occurrence that launched them (no per-occurrence statistics)."""
        if keys:
            self.device_partials.append(
                {
                    "side": DEVICE,
                    "op_name": [k[0] for k in keys],
                    "op_type": [k[1] for k in keys],
                    "kernels": np.asarray(kernels, dtype=np.int64),
                    "total_us": np.asarray(totals_us, dtype=np.float64),
                }
            )

    def add_device_kernels(
        self,
        keys: list[tuple[str, str]],
        codes: np.ndarray,
        durations_us: np.ndarray,
        invocations: np.ndarray,
        steps: np.ndarray | None = None,
    ) -> None:
        """One record per kernel, its op an index into ``keys``; ``invocations`` names the
        host op occurrence that launched it (-1 where unknown); ``steps`` the step it
        belongs to (that of its launch; -1 where unknown)."""
        if len(codes):
            self.device_kernels.append(
                {
                    "keys": list(keys),
                    "codes": np.asarray(codes, dtype=np.int64),
                    "total_us": np.asarray(durations_us, dtype=np.float64),
                    "invocation": np.where(invocations >= 0, invocations, np.nan),
                    "step": np.full(len(codes), -1, dtype=np.int64) if steps is None else np.asarray(steps, np.int64),
                }
            )

    def add_memory(
        self, keys: list[tuple[str, str]], codes: ArrayLike, sizes: ArrayLike, net_known: bool = True
    ) -> None:
        """Allocations (size > 0) and frees (< 0) made by host ops themselves, each op an
        index into ``keys``; with ``net_known`` False (frees not attributed), only the
        allocations are given."""
        self.net_memory_known = self.net_memory_known and net_known
        code_of = np.asarray(codes, dtype=np.int64)
        size_of = np.asarray(sizes, dtype=np.float64)
        count = len(keys)
        allocated = np.bincount(code_of, weights=np.clip(size_of, 0, None), minlength=count)
        net = np.bincount(code_of, weights=size_of, minlength=count)
        seen = np.flatnonzero(np.bincount(code_of, minlength=count))
        self.memory_partials.append(
            {
                "op_name": [keys[i][0] for i in seen],
                "op_type": [keys[i][1] for i in seen],
                "alloc_bytes": allocated[seen],
                "net_bytes": net[seen],
            }
        )

    def absorb(self, other: "OpEvents") -> None:
        """Another worker's events (a rank of the same job) into these: its occurrences and
        kernels join each op's (a step's index is the job's step on every rank), its kernel
        invocations are kept apart from this one's, and the first worker's memory timeline
        stands for the job's."""
        self.side += other.side
        self.name += other.name
        self.type += other.type
        self.total += other.total
        self.self_time += other.self_time
        self.host_partials += other.host_partials
        self.host_samples += other.host_samples
        self.host_sample_steps += other.host_sample_steps
        self.step_count = max(self.step_count, other.step_count)
        self.device_partials += other.device_partials
        offset = 1 + max(
            (
                float(np.nanmax(part["invocation"]))
                for part in self.device_kernels
                if not np.isnan(part["invocation"]).all()
            ),
            default=-1.0,
        )
        self.device_kernels += [{**part, "invocation": part["invocation"] + offset} for part in other.device_kernels]
        self.crossings += other.crossings
        self.memory_partials += other.memory_partials
        self.net_memory_known = self.net_memory_known and other.net_memory_known
        if self.memory_timeline is None:
            self.memory_timeline = other.memory_timeline
        self.work += other.work

    def __len__(self) -> int:
        return (
            len(self.name)
            + sum(int(p["occurrences"].sum()) for p in self.host_partials)
            + sum(int(p["kernels"].sum()) for p in self.device_partials)
            + sum(len(k["total_us"]) for k in self.device_kernels)
        )


def _encode(ops: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], np.ndarray]:
    codes, keys = first_appearance(ops)
    return keys, codes


def _names_and_types(keys: list[tuple[str, str]]) -> dict[str, list[str]]:
    """The keys' names and types as two lists, split at C speed (two comprehensions over a
    million keys took 0.2 s of a read)."""
    return {"op_name": list(map(itemgetter(0), keys)), "op_type": list(map(itemgetter(1), keys))}


def _fold_host(
    keys: list[tuple[str, str]], codes: np.ndarray, totals_us: np.ndarray, selfs_us: np.ndarray, distinct: bool
) -> dict[str, Any]:
    """Host occurrences folded into per-op sums (with the sum of squares, for std), and
    ``folded_from``: the keys, the key code of each row and whether the keys are distinct,
    which tell the table maker each row of the samples' codes without looking a key up."""
    size = len(keys)
    minimum = np.full(size, np.inf)
    maximum = np.full(size, -np.inf)
    np.minimum.at(minimum, codes, selfs_us)
    np.maximum.at(maximum, codes, selfs_us)
    occurrences = np.bincount(codes, minlength=size)
    seen = np.flatnonzero(occurrences)
    return {
        "side": HOST,
        **_names_and_types(keys if len(seen) == size else list(map(keys.__getitem__, seen.tolist()))),
        "occurrences": occurrences[seen],
        "total_us": np.bincount(codes, weights=totals_us, minlength=size)[seen],
        "self_us": np.bincount(codes, weights=selfs_us, minlength=size)[seen],
        "self_sq": np.bincount(codes, weights=selfs_us * selfs_us, minlength=size)[seen],
        "min_us": minimum[seen],
        "max_us": maximum[seen],
        "folded_from": (keys, seen, distinct),
    }


def steps_of(starts: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Each event's step: the index of the (start, end) row of ``bounds`` (sorted by start)
    it starts in; -1 outside every step."""
    step = np.searchsorted(bounds[:, 0], starts, side="right") - 1
    inside = (step >= 0) & (starts < bounds[step.clip(min=0), 1])
    return np.where(inside, step, -1)


def crossing_warning(crossings: int) -> str:
    return (
        f"{crossings:,} op events overlap the event they start in without ending inside it (the recorder's "
        "clocks, or asynchronous events on one thread); each takes from the enclosing op's self time only "
        "the time they share"
    )


def add_nested_host_ops(events: OpEvents, threads: Iterable[list[tuple[float, float, tuple[str, str]]]]) -> None:
    """Add host op occurrences, one list per thread of ``(start, duration, (name, type))``,
    with self time taken by nesting within each thread."""
    for thread_events in threads:
        thread_events.sort(key=lambda item: (item[0], -item[1]))
        durations = np.asarray([item[1] for item in thread_events], dtype=np.float64)
        starts = [item[0] for item in thread_events]
        self_values, parents = self_times(starts, durations)
        events.crossings += crossing_events(starts, durations, parents)
        events.add_host_batch([item[2] for item in thread_events], durations, self_values)


def start_order(starts: np.ndarray, durations: np.ndarray) -> np.ndarray:
    """The order ``self_times`` needs: by start, the longest first among equal starts, and
    the order given among full ties, which is ``np.lexsort((-durations, starts))``. One
    stable sort of the starts, which a thread's events almost keep already (timsort runs
    through them: 0.3 s for a million events by lexsort, 1 ms so), then the few equal
    starts longest first among themselves."""
    order = np.argsort(starts, kind="stable")
    ordered = starts[order]
    tied = np.flatnonzero(ordered[1:] == ordered[:-1])
    if len(tied):
        runs = np.union1d(tied, tied + 1)  # positions of every event that shares its start
        order[runs] = order[runs][np.lexsort((-durations[order[runs]], ordered[runs]))]
    return order


def self_times(
    starts: Sequence[float] | np.ndarray, durations: Sequence[float] | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Self time and enclosing event of each event on one thread.

    Events must be sorted by start, longer first on ties. An event is nested in the
    innermost earlier event still open when it starts, which is the latest earlier event
    ending after that start; its duration, up to the parent's end where it outlives the
    parent, is taken off that parent's self time (never below zero). Returns
    ``(self, parent_index)`` with -1 for top-level events.

    Vectorised by pointer jumping: each event keeps a candidate parent such that every
    event between the two ended before it started; a candidate that has ended too is
    replaced by its own candidate. Chains halve each round, so a profile needs as many
    rounds as its nesting is deep (about ten), not one Python step per event.
    """
    starts = np.asarray(starts, dtype=np.float64)
    durations = np.asarray(durations, dtype=np.float64)
    count = len(starts)
    ends = starts + durations
    parents = np.full(count, -1, dtype=np.int64)
    if count > 1:
        latest_end = np.maximum.accumulate(ends)
        active = np.flatnonzero(latest_end[:-1] > starts[1:]) + 1  # the rest are top level
        candidate = np.arange(-1, count - 1, dtype=np.int64)
        while len(active):
            tried = candidate[active]
            exists = tried >= 0
            encloses = np.zeros(len(active), dtype=bool)
            encloses[exists] = ends[tried[exists]] > starts[active[exists]]
            parents[active[encloses]] = tried[encloses]
            moving = exists & ~encloses
            candidate[active[moving]] = candidate[tried[moving]]
            active = active[moving]
    nested = np.flatnonzero(parents >= 0)
    # A child that outlives its parent (events that overlap without nesting, which a
    # thread cannot really run) takes from the parent only the time they share.
    shared = np.minimum(ends[nested], ends[parents[nested]]) - starts[nested]
    children = np.bincount(parents[nested], weights=shared, minlength=count)
    return np.maximum(durations - children, 0.0), parents


def crossing_events(starts: ArrayLike, durations: ArrayLike, parents: np.ndarray) -> int:
    """How many events outlive the event they start in: overlap without nesting."""
    starts = np.asarray(starts, dtype=np.float64)
    ends = starts + np.asarray(durations, dtype=np.float64)
    nested = np.flatnonzero(parents >= 0)
    return int((ends[nested] > ends[parents[nested]]).sum())


@dataclasses.dataclass
class Recipe:
    """A table a reader leaves to be made on first use (``OpProfile.module_table``):
    ``make(*args)`` returns it. ``make`` is a module-level function and ``args`` plain
    values and arrays, so a recipe pickles to the process that builds the tables."""

    make: Callable[..., Any]
    args: tuple[Any, ...] = ()

    def __call__(self) -> Any:
        return self.make(*self.args)


@dataclasses.dataclass
class ParsedProfile:
    """One session as its reader leaves it (``OpProfile.from_parsed`` makes the tables):
    its facts, its events, and its other tables as columns (``ANNOTATION_COLUMNS`` to
    values) or as a ``Recipe`` (the module table, made on first use)."""

    facts: ProfileFacts
    events: OpEvents
    annotations: dict[str, list[Any]] | None = None
    module_recipe: Recipe | None = None
