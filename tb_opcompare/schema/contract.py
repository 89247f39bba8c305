"""The documents of the HTTP API and ``tb-opcompare … --json``, declared once as msgspec
Structs: the contract between the Python side and the tab.

``docs/http_api.md`` and ``frontend/contract.js`` (JSDoc typedefs for the tab) are
generated from these declarations (``python -m tb_opcompare.schema.contract --write``,
or ``make contract``), and a test fails when either drifts. Every golden document of
``tests/golden`` is decoded strictly against them, and the compare table's columns
(``COMPARE_COLUMNS``) are the fields of ``CompareRow``.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any, ClassVar, Literal

import msgspec
from msgspec import Meta

from tb_opcompare.schema import requests
from tb_opcompare.schema.dimensions import (
    COMPARE_GROUP_BY,
    DETECTION_POWER,
    DEVICE_STEP_CATEGORIES,
    FALSE_DISCOVERY_RATE,
    POWER_MIN_SHARE,
    SERIES_DIMENSIONS,
    STEP_CATEGORIES,
    GroupBy,
    Processor,
    evidence_rule,
)

STATUSES = ("matched", "baseline_only", "target_only")
Status = Literal[STATUSES]  # type: ignore[valid-type]  # a tuple written once, read as a Literal by msgspec
TimeSource = Literal["host", "device", "mixed"]
SIDES = ("baseline", "target")
LAYERS = ("application", "framework", "runtime", "device")  # a profile's layers, top down
ROW_LAYERS = LAYERS[0:3:2]  # application and runtime: listed row by row (the Ops view lists the others' ops)
TREND_DIMENSIONS = ("device", "batch_size", "precision", "compiler")  # run facts a trend can be ordered by (a sweep)
TREND_ORDERS = ("recorded", "label", "run", "repeat", *TREND_DIMENSIONS)  # and `sidecar:FIELD`
READ_FROM_PROFILE = "the profile"  # RunRecord.read_from where this tool read the run's files itself
# Words the tab needs as the server spells them: exported by the generated frontend/contract.js.
SHARED_WORDS = {
    "READ_FROM": {"profile": READ_FROM_PROFILE},  # a run card names where else its numbers came from
    "LAYERS": LAYERS,
    "ROW_LAYERS": ROW_LAYERS,
    "TREND_ORDERS": TREND_ORDERS,
    "SERIES_DIMENSIONS": SERIES_DIMENSIONS,
    "STEP_PARTS": {**STEP_CATEGORIES, **DEVICE_STEP_CATEGORIES},  # key -> label, host first
    "PLOT_TOP": {"default": requests.PLOT_TOP, "max": requests.MAX_PLOT_TOP},  # a sweep's or trend's ops to plot
    "COMPARE_PAGE": {"rows": requests.COMPARE_PAGE_ROWS},  # the most rows the tab holds, the route's page
}


def _d(kind: object, description: str) -> Any:
    return Annotated[kind, Meta(description=description)]


class _Document(msgspec.Struct, kw_only=True):
    # the field holding a document's table (its list of records), for ``to_pandas``
    TABLE: ClassVar[str | None] = None

    def to_pandas(self, table: str | None = None) -> Any:
        """The document's table (``TABLE``, or another list of records it holds, by name)
        as a pandas DataFrame, one column a field: for notebooks (``tb_opcompare.api``)."""
        import pandas as pd

        name = table or self.TABLE
        records = getattr(self, name, None) if name else None
        if not isinstance(records, list):
            from tb_opcompare.errors import UsageError

            raise UsageError(f"{type(self).__name__} holds no table named {name!r}", "table")
        return pd.DataFrame(msgspec.to_builtins(records))


class WorkerRecord(_Document):
    """One rank of a distributed job whose traces were read together as one run."""

    rank: Annotated[int | None, Meta(description="the rank its trace names (`distributedInfo`)")]
    world_size: Annotated[
        int | None, Meta(description="the job's ranks in all, whether or not every rank's trace is in the logdir")
    ]
    file: Annotated[str, Meta(description="its trace file")]
    steps: Annotated[int | None, Meta(description="its profiled steps")]
    step_time_us: Annotated[
        float | None, Meta(description="its median steady step wall time, µs: the run's step is its slowest rank's")
    ]
    host_op_time_us: Annotated[float, Meta(description="its host ops' self time, summed, µs")]
    step_parts: Annotated[
        dict[str, float],
        Meta(
            description="its own median steady step's host parts, µs by category (Compare's breakdown; the job's is its slowest "
            "rank's, step by step); empty where its trace splits no step"
        ),
    ] = msgspec.field(default_factory=dict)


class RunRecord(_Document):
    """One run: its facts from the data, else its sidecar, else its name (the `*_source`
    fields say which). Runs listed with `load=0` and not yet read carry the claims only."""

    run: Annotated[str, Meta(description="path of the run under the logdir, `/`-separated; the run's name everywhere")]
    format: Annotated[
        str, Meta(description="xplane, tf_trace_json, pytorch, chrome_trace, summary_json or empty_session")
    ]
    device: Annotated[str | None, Meta(description="CPU, or the accelerator that did the work (GPU, TPU, ...)")]
    device_name: Annotated[
        str | None, Meta(description="the accelerator's model name where the profile or sidecar gives it")
    ]
    batch_size: Annotated[int | None, Meta(description="samples per step")]
    batch_size_source: Annotated[
        str | None, Meta(description="where the batch size came from: `data: ...`, the sidecar or the run name")
    ]
    batch_size_agreement: Annotated[
        float | None,
        Meta(description="share of the data's evidence that agrees on the batch size (PyTorch; TF memory allocations)"),
    ]
    steps: Annotated[int | None, Meta(description="profiled steps")]
    steps_source: Annotated[str | None, Meta(description="where the step count came from")]
    step_time_us: Annotated[
        float | None,
        Meta(
            description="median wall time of a steady profiled step (warm-up left out), µs, where "
            "step markers give it: the headline's figure"
        ),
    ]
    model: Annotated[
        str,
        Meta(
            description="model key: the sidecar's model, else the run name without device, batch, repeat and time "
            "tokens; runs whose names hide the model are joined by their ops (`model_source`)"
        ),
    ]
    model_source: Annotated[
        str,
        Meta(
            description="how the model was found: `sidecar`, `run name`, or `data: …` naming the run whose ops "
            "joined it (the same ops at another batch size, or the CPU/accelerator counterpart)"
        ),
    ]
    label: Annotated[str | None, Meta(description="the sidecar's label")]
    repeat: Annotated[int | None, Meta(description="which recording of one configuration (`--repeats`)")]
    repeat_runs: Annotated[
        int | None,
        Meta(
            description="the runs of its repeat group (same model, device, batch size and label, each a "
            "repeat), itself included: what pooling its repeats would pool; 1 for a run without "
            "repeats; null outside the runs document"
        ),
    ]
    sessions: Annotated[
        list[str],
        Meta(
            description="the run's captures, oldest first; a distributed job's capture of all its ranks comes "
            "after one session per rank of it (`… (rank 1 of 2 only)`), to compare one rank"
        ),
    ]
    session: Annotated[str, Meta(description="the capture shown (the newest)")]
    framework: Annotated[str | None, Meta(description="TensorFlow or PyTorch, where the data says")]
    precision: Annotated[
        str | None,
        Meta(
            description="the dtypes the model computed in: `fp32`, `bf16`, `fp16`, or `mixed bf16/fp32` "
            "(most first) where no dtype holds 90% of the compute ops"
        ),
    ]
    precision_source: Annotated[
        str | None, Meta(description="where the precision came from: `data: ...` or the sidecar")
    ]
    compiler: Annotated[str | None, Meta(description="`eager`, `torch.compile`, `XLA` ...")]
    compiler_source: Annotated[str | None, Meta(description="where the compiler came from: `data: ...` or the sidecar")]
    peak_memory_bytes: Annotated[
        dict[str, int],
        Meta(
            description="memory in use at its highest per device (`CPU`, `GPU:0`), where the profile records memory; empty otherwise"
        ),
    ]
    warnings: Annotated[list[str], Meta(description="what the user should know about this run's facts")]
    loaded: Annotated[bool, Meta(description="whether the trace has been read (else only names and sidecars were)")]
    read_from: Annotated[
        str | None,
        Meta(
            description=f"where the run's numbers were read: `{READ_FROM_PROFILE}` (this tool read its files, cached "
            "after) or the logdir's shared index and who wrote it (`the shared index (.opcompare/), written by "
            "tb-opcompare VERSION (reader N)`, the versions the index's entry records); null where the trace has "
            "not been read"
        ),
    ] = None
    workers: Annotated[
        list[WorkerRecord],
        Meta(
            description="the ranks of one distributed job read together as this run, each with its "
            "own figures; the run's ops pool every rank's executions and its step is its "
            "slowest rank's. Empty for a profile of one process"
        ),
    ] = []


class Pair(_Document):
    """An automatic baseline/target pair: the CPU and the accelerator run of one model."""

    baseline: str
    target: str
    model: str
    batch_size: int | None
    matched_by: Annotated[
        str,
        Meta(
            description="`run names`, `one model, found from the ops` (`RunRecord.model_source`), `op names (Jaccard …)`, or "
            "`run facts` (variant pairs)"
        ),
    ]
    guess: Annotated[bool, Meta(description="paired by op-name overlap alone: worth a look before trusting")]
    varies: Annotated[
        str,
        Meta(
            description="the one dimension the two runs differ in: `device` (CPU -> accelerator), `precision` "
            "(fp32 -> another) or `compiler` (eager -> a compiler)"
        ),
    ] = "device"


class RunError(_Document):
    """A run that cannot be read, with the file and the reason."""

    run: str
    path: str
    message: str


class SuggestedPair(_Document):
    """The pair the tab opens on, and why."""

    baseline: str
    target: str
    reason: str


class RunsDocument(_Document):
    """`runs`: every run, the automatic pairs, what could not be read."""

    TABLE: ClassVar[str] = "runs"

    runs: list[RunRecord]
    pairs: Annotated[
        list[Pair], Meta(description="CPU -> accelerator pairs of one model, batch size, precision and compiler")
    ]
    variant_pairs: Annotated[
        list[Pair],
        Meta(
            description="pairs that differ in precision or compiler only (same model, device and batch "
            "size), the default (fp32, eager) as the baseline"
        ),
    ]
    errors: list[RunError]
    complete: Annotated[bool, Meta(description="every run's trace has been read")]
    suggested: SuggestedPair | None
    notices: Annotated[
        list[str], Meta(description="what the user should know about the logdir (e.g. no accelerator run)")
    ]
    version: Annotated[str, Meta(description="the plugin's version")]


_PER_SIDE: tuple[tuple[str, Any, str], ...] = (
    ("occurrences", int | None, "times the op ran in that run"),
    ("mean_us", float | None, "self time per occurrence, µs"),
    ("total_us", float | None, "self time summed over the run, µs"),
    ("share", float | None, "total_us / all op time of that run"),
    (
        "time_source",
        TimeSource | None,
        "`device` where the op launched kernels (its time is the kernels'), else "
        "`host`; `mixed` when a type groups both",
    ),
    (
        "p10_us",
        float | None,
        "10th percentile of one occurrence's self time (null where occurrences are not told "
        "apart, as for kernels no host op launched, or for a type grouping ops)",
    ),
    ("median_us", float | None, "median of one occurrence's self time"),
    ("p90_us", float | None, "90th percentile of one occurrence's self time"),
    ("cv", float | None, "coefficient of variation of one occurrence's self time (std / mean)"),
    (
        "noisy",
        bool | None,
        "3 or more occurrences and a CV above 0.5: the mean hides a wide spread, so its speedup is unreliable",
    ),
    (
        "kernels_per_execution",
        float | None,
        "device kernels (memcpys, memsets) per occurrence where the time is device time; null for host time",
    ),
    (
        "per_step_cv",
        float | None,
        "coefficient of variation of the op's time per profiled step (null where steps "
        "are not known, and for a type that groups ops)",
    ),
    (
        "alloc_bytes",
        float | None,
        "bytes the op itself allocated over the run (not the ops it called), host and "
        "device memory together; null where the profile records no memory",
    ),
    ("alloc_bytes_per_execution", float | None, "alloc_bytes per call of the op on the host"),
    (
        "net_bytes",
        float | None,
        "allocated minus freed by the op itself (PyTorch's self memory usage); null where "
        "frees are not attributed to ops (TensorFlow) or memory is not recorded",
    ),
)
CompareRow = msgspec.defstruct(
    "CompareRow",
    [
        (
            "key",
            _d(
                str,
                "op name (group_by=name), normalised op type (group_by=type), or module path "
                "(group_by=module: `Sequential_0/Conv2d_0`, a TF name scope, `(outside modules)`); by "
                "name, one framework op's backend implementations found on one side each are one row, "
                "`baseline names → target names` (`aten::mkldnn_convolution → aten::cudnn_convolution`), "
                "its `op_type` the framework op",
            ),
        ),
        ("op_type", _d(str | None, "normalised op type (oneDNN/cuDNN variants share one)")),
        ("status", _d(Status, "whether the op is in both runs or in one only")),
        ("speedup", _d(float | None, "baseline_mean_us / target_mean_us (> 1: the target is faster)")),
        ("delta_mean_us", _d(float | None, "target_mean_us - baseline_mean_us (< 0: the target is faster)")),
        *[(f"{side}_{name}", _d(kind, description)) for side in SIDES for name, kind, description in _PER_SIDE],
    ],
    bases=(_Document,),
    kw_only=True,
    module=__name__,
)
CompareRow.__doc__ = "One op (or op type) of a comparison; `baseline_*` and `target_*` are the same figures per run."
COMPARE_COLUMNS: list[str] = list(CompareRow.__struct_fields__)
PER_SIDE_FIELDS: tuple[str, ...] = tuple(name for name, _, _ in _PER_SIDE)


class BreakdownPart(_Document):
    """What one category of a step took on each side (issue 53)."""

    side: Annotated[
        Processor,
        Meta(
            description="`host`: the thread that drives the step, each moment once, so a side's host parts add up to its step "
            "wall time; `device`: the accelerator's time in the step, busy by what ran and idle"
        ),
    ]
    category: Annotated[
        str, Meta(description="a key of the vocabulary every format shares (`input`, `forward`, `device_idle`, ...)")
    ]
    label: Annotated[str, Meta(description="the category in words, as shown")]
    baseline_us: Annotated[
        float | None,
        Meta(
            description="its time in the baseline's median steady step, µs (0: none); null for a device part where "
            "the baseline ran on no device (a CPU run: its device parts add up to nothing)"
        ),
    ]
    target_us: Annotated[float | None, Meta(description="as baseline_us, for the target")]
    change_us: Annotated[
        float | None,
        Meta(
            description="target_us - baseline_us: the bar of the waterfall (negative: time saved); null where either "
            "side is null"
        ),
    ]


class RunBreakdown(_Document):
    """One run of a side that pools runs (repeats), or one rank of a side that is a job:
    its own median steady step, split."""

    side: Annotated[Literal[SIDES], Meta(description="the side it is pooled into")]  # type: ignore[valid-type]  # a vocabulary tuple, a Literal to msgspec
    run: Annotated[
        str, Meta(description="the run, or `rank N` of a job (whose split is its slowest rank's, step by step)")
    ]
    wall_us: Annotated[float, Meta(description="its median steady step wall time, µs")]
    steps: Annotated[int, Meta(description="its steady steps")]
    host: Annotated[
        dict[str, float],
        Meta(description="its host parts, µs by category (adding up to wall_us), in the vocabulary's order"),
    ]


class StepBreakdown(_Document):
    """Where the time went: each side's median steady step (the headline's) split by what it
    was spent on, and the change as a waterfall from the baseline's step to the target's."""

    TABLE: ClassVar[str] = "parts"

    baseline_wall_us: Annotated[
        float, Meta(description="the baseline's median steady step wall time, µs: the waterfall's start")
    ]
    target_wall_us: Annotated[
        float, Meta(description="the target's, µs: its end; the host parts' change_us add up to the difference")
    ]
    baseline_steps: Annotated[int, Meta(description="steady steps the baseline's median is of")]
    target_steps: Annotated[int, Meta(description="as baseline_steps, for the target")]
    parts: list[BreakdownPart]
    runs: Annotated[
        list[RunBreakdown],
        Meta(
            description="where a side pools runs (repeats), or is a job of several ranks: each run's or rank's own split, so "
            "one whose step went elsewhere (a hiccup; a rank waiting on the others) shows; empty otherwise"
        ),
    ]


class CompareSummary(_Document):
    """Whole-run figures of a comparison."""

    headline_speedup: Annotated[
        float | None,
        Meta(
            description="the speedup a user reads first, the same in every view for the same runs: "
            "baseline over target median steady step wall time (step markers, each run's "
            "warm-up left out, a group's steps pooled), per sample where the batch sizes "
            "differ; where a side has no step markers, op time per step (see "
            "headline_basis)"
        ),
    ]
    headline_basis: Annotated[
        Literal["step wall time", "op time per step", "op time"],
        Meta(description="what headline_speedup is the ratio of"),
    ]
    headline_per_sample: Annotated[
        bool, Meta(description="headline_speedup compares time per sample (the batch sizes differ)")
    ]
    headline_text: Annotated[
        str, Meta(description="headline_speedup's basis in words, with the two times it is the ratio of")
    ]
    baseline_step_wall_us: Annotated[
        float | None, Meta(description="median steady step wall time, µs; null without step markers")
    ]
    target_step_wall_us: Annotated[float | None, Meta(description="as baseline_step_wall_us, for the target")]
    matched_ops: int
    baseline_only_ops: int
    target_only_ops: int
    faster_ops: Annotated[int, Meta(description="matched ops with speedup > 1")]
    noisy_ops: Annotated[int, Meta(description="matched ops noisy on either side")]
    slower_ops: Annotated[int, Meta(description="matched ops with speedup < 1")]
    baseline_matched_total_us: Annotated[float, Meta(description="op time of the matched ops, µs")]
    target_matched_total_us: float
    baseline_total_us: Annotated[float, Meta(description="all op time, µs")]
    target_total_us: float
    overall_speedup: Annotated[
        float | None,
        Meta(description="ratio of matched op time (not wall time), per step where both runs know their steps"),
    ]
    overall_speedup_basis: Literal["per step", "whole profile"]
    geomean_speedup: Annotated[float | None, Meta(description="geometric mean of the matched ops' speedups")]
    baseline_steps: int | None
    target_steps: int | None
    baseline_time_per_step_us: float | None
    target_time_per_step_us: float | None
    whole_step_speedup: Annotated[float | None, Meta(description="all op time per step, ops on one side included")]
    per_sample_speedup: Annotated[
        float | None, Meta(description="whole_step_speedup per sample, where the batch sizes differ")
    ]
    op_time_speedup: Annotated[
        float | None,
        Meta(
            description="the one op time ratio shown beside the headline: per_sample_speedup where the batch sizes "
            "differ, else whole_step_speedup, else all op time over the whole profiles"
        ),
    ]
    op_time_basis: Annotated[
        Literal["per sample", "per step", "whole profile"], Meta(description="what op_time_speedup is over")
    ]
    check_refusal: Annotated[
        str | None,
        Meta(
            description="why the check route would refuse these runs with their repeats (a side of one run), in its "
            "words; null where it can check them. The tab says it instead of asking"
        ),
    ]
    group_by: Literal[COMPARE_GROUP_BY]  # type: ignore[valid-type]  # a vocabulary tuple, a Literal to msgspec
    normalized_types: bool
    baseline: Annotated[
        RunRecord, Meta(description="the baseline run; for a run group, its first run's record with the group's steps")
    ]
    target: Annotated[RunRecord, Meta(description="as baseline, for the target")]
    baseline_runs: Annotated[
        list[str],
        Meta(
            description="the runs pooled on the baseline side (one, unless a run group was asked for: their executions together)"
        ),
    ]
    target_runs: Annotated[list[str], Meta(description="as baseline_runs, on the target side")]
    notes: Annotated[
        list[str], Meta(description="how to read the headline figures (batch sizes differ, no op in common, ...)")
    ]
    breakdown: Annotated[
        StepBreakdown | None,
        Meta(
            description="where the time went: each side's median steady step by what it was spent on; null where a side's "
            "profile does not split its steps (breakdown_note says why)"
        ),
    ] = None
    breakdown_note: Annotated[
        str | None, Meta(description="why there is no breakdown, or what it cannot tell apart")
    ] = None


class CompareDocument(_Document):
    """`compare`: the summary and the rows the view keeps, in its order."""

    TABLE: ClassVar[str] = "rows"

    summary: CompareSummary
    columns: Annotated[list[str], Meta(description="the fields of a row, in order")]
    rows: list[CompareRow]  # type: ignore[valid-type]  # a row Struct made by defstruct
    total_rows: Annotated[int, Meta(description="rows before the view's filter and top N")]
    view_rows: Annotated[
        int,
        Meta(
            description="rows the view's filter keeps, before its top N (the tab caps a big comparison with `top` "
            "and says how many match)"
        ),
    ]


class SweepsDocument(_Document):
    """`sweeps`: every model's batch sizes per device, and the models that can be swept."""

    models: Annotated[dict[str, dict[str, list[int]]], Meta(description="model key -> device -> batch sizes")]
    sweepable: Annotated[list[str], Meta(description="models with two or more batch sizes on one device, best first")]


_SERIES = "the series: the run's value of the dimension the lines are drawn by (`series_by`)"


class SeriesPoint(_Document):
    """One op on one series (a device, precision or compiler) at one batch size; repeats
    pooled (each run weighs the same)."""

    op: str
    series: Annotated[str, Meta(description=_SERIES)]
    batch_size: int
    mean_us: float | None
    per_sample_us: Annotated[float | None, Meta(description="mean_us / batch size")]
    total_us: float | None
    share: float | None
    run: Annotated[str, Meta(description="the runs pooled, comma-separated")]
    repeats: Annotated[int, Meta(description="how many runs had the op")]
    low_us: Annotated[
        float | None,
        Meta(
            description="lower end of the 95% interval of mean_us over the repeats pooled here (Student's t "
            "on the log means; null for one run)"
        ),
    ]
    high_us: Annotated[float | None, Meta(description="upper end of that interval")]


class StepPoint(_Document):
    """The whole step on one series at one batch size."""

    series: Annotated[str, Meta(description=_SERIES)]
    batch_size: int
    step_us: float | None
    samples_per_s: float | None
    basis: Annotated[str, Meta(description="`step markers` (wall time of a step) or `op time per step`")]
    run: str
    repeats: int
    step_low_us: Annotated[
        float | None, Meta(description="lower end of the 95% interval of step_us over the repeats (null for one run)")
    ]
    step_high_us: Annotated[float | None, Meta(description="upper end of that interval")]


class Fit(_Document):
    """Least squares of mean_us = fixed_us + per_sample_us × batch size, per op and series."""

    op: Annotated[str, Meta(description="op key, or `(whole step)`")]
    series: Annotated[str, Meta(description=_SERIES)]
    fixed_us: float | None
    per_sample_us: float | None
    r2: float | None
    points: int
    poor_fit: Annotated[
        bool, Meta(description="R² < 0.9 over 3+ points and the line misses them by more than 5% (RMS)")
    ]
    share: Annotated[float | None, Meta(description="the op's mean share of its runs' op time")]
    breakeven_batch_size: Annotated[
        float | None, Meta(description="the op's Breakeven batch size (null where it has none)")
    ]
    target_faster: Annotated[
        Literal["above", "below", "always", "never", "mixed"] | None,
        Meta(
            description="the op's Breakeven: where the target series is faster (null without fits on both); `mixed` where "
            "the measured speedups cross 1 more than once"
        ),
    ]


class Breakeven(_Document):
    """Where an op's lines on the baseline and the target series cross."""

    op: str
    batch_size: Annotated[float | None, Meta(description="null when the lines do not cross at a batch size >= 1")]
    target_faster: Literal["above", "below", "always", "never", "mixed"]


class SpeedupPoint(_Document):
    """Baseline series mean / target series mean at a batch size both ran."""

    op: str
    batch_size: int
    speedup: float | None


class SweepDocument(_Document):
    """`sweep`: how each op and the whole step scale with batch size, one line per series
    (device, precision or compiler), the other dimensions held."""

    TABLE: ClassVar[str] = "series"

    model: str
    group_by: GroupBy
    series_by: Annotated[Literal[SERIES_DIMENSIONS], Meta(description="the dimension the lines are drawn by")]  # type: ignore[valid-type]  # a vocabulary tuple, a Literal to msgspec
    held: Annotated[
        dict[str, str], Meta(description="the other dimensions, each held at one value (device, precision, compiler)")
    ]
    baseline_series: Annotated[
        str,
        Meta(
            description="the series speedups and break-evens are against: CPU, fp32 or eager (a key of "
            "batch_sizes where the sweep has runs there)"
        ),
    ]
    target_series: Annotated[
        str | None, Meta(description="the series compared with it: the first other one (null where there is none)")
    ]
    batch_sizes: Annotated[dict[str, list[int]], Meta(description="series -> batch sizes")]
    runs: Annotated[list[RunRecord], Meta(description="the swept model's runs")]
    top_ops: Annotated[list[str], Meta(description="the ops plotted")]
    series: list[SeriesPoint]
    steps: list[StepPoint]
    fits: list[Fit]
    breakeven: list[Breakeven]
    speedups: list[SpeedupPoint]
    warnings: list[str]
    figures: Annotated[
        dict[str, Any] | msgspec.UnsetType, Meta(description="plotly figures by name (HTTP API only)")
    ] = msgspec.UNSET


class Error(_Document):
    """What went wrong: 400 a bad parameter, 404 an unknown run or session, 422 an
    unreadable profile, 500 a bug (see the TensorBoard log)."""

    status: int
    message: str
    known: Annotated[list[str] | msgspec.UnsetType, Meta(description="404: the names that exist")] = msgspec.UNSET
    path: Annotated[str | msgspec.UnsetType, Meta(description="422: the file that cannot be read")] = msgspec.UNSET
    reason: Annotated[str | msgspec.UnsetType, Meta(description="422: what is wrong with it")] = msgspec.UNSET
    parameter: Annotated[str | msgspec.UnsetType, Meta(description="400: the parameter at fault, where one is")] = (
        msgspec.UNSET
    )


class ErrorDocument(_Document):
    """The body of every error answer."""

    error: Error


# route -> (document, what it takes); the order of docs/http_api.md
VERDICTS = ("slower", "faster", "within noise", "not tested", "only in baseline", "only in target")
Verdict = Literal[VERDICTS]  # type: ignore[valid-type]  # a vocabulary tuple, a Literal to msgspec
SIGNIFICANT_VERDICTS = ("slower", "faster", "only in target", "only in baseline")  # a change, not noise


class CheckRow(_Document):
    """One op (or the whole step) of a check: its speedup with its confidence interval and
    the verdict once the false discovery rate is controlled over the tested ops."""

    key: Annotated[
        str,
        Meta(
            description="op name (group_by=name), op type (group_by=type), or `(whole step)`: the step, as the "
            "document's `whole_step_basis` says"
        ),
    ]
    verdict: Annotated[
        Verdict,
        Meta(
            description=f"`slower` / `faster`: beyond the threshold with the false discovery rate held at {FALSE_DISCOVERY_RATE / 2:.1%} "
            f"(the whole step on its own at {FALSE_DISCOVERY_RATE / 2:.1%}); "
            "`within noise`: no significant change beyond the threshold; `only in baseline` / "
            "`only in target`: the op ran on one side only; `not tested`: outside --ops / "
            "--min-share (its interval is still given), or no interval could be made"
        ),
    ]
    speedup: Annotated[
        float | None, Meta(description="baseline mean / target mean per execution: geometric means of the runs' means")
    ]
    adjusted_speedup: Annotated[
        float | None,
        Meta(
            description="the speedup of the runs' typical times (each run's median over its "
            "executions, or for an op run twice a step the lower quartile of its steps' time per execution) "
            "with each run's speed factor taken out (the median over ops of "
            "how much faster or slower the run was than the average run): what the "
            "interval and verdict are about; the whole step's speed is not taken out"
        ),
    ]
    speedup_low: Annotated[
        float | None,
        Meta(description="lower end of the confidence interval of the adjusted speedup, at `interval_level`"),
    ]
    speedup_high: Annotated[
        float | None, Meta(description="upper end of the confidence interval of the adjusted speedup")
    ]
    interval_level: Annotated[
        float,
        Meta(
            description="the interval's confidence: for a tested row the level its verdict was decided at "
            "(1 - 2 x the largest p-value its family flags, so the interval lies wholly beyond "
            "the threshold exactly when the row is flagged), 0.95 otherwise"
        ),
    ]
    p_value: Annotated[
        float | None,
        Meta(
            description="one-sided p-value, in the direction the estimate points, against a change of at most the threshold"
        ),
    ]
    detectable_change: Annotated[
        float | None,
        Meta(
            description=f"the smallest slowdown (0.3: 30%) that this row's test would flag in {DETECTION_POWER:.0%} of checks, "
            "given its run-to-run noise, runs and confidence; null without an interval from runs"
        ),
    ]
    baseline_mean_us: Annotated[float | None, Meta(description="mean time per execution in the baseline runs, µs")]
    target_mean_us: Annotated[float | None, Meta(description="mean time per execution in the target runs, µs")]
    baseline_share: Annotated[float, Meta(description="share of the baseline's op time")]
    target_share: Annotated[float, Meta(description="share of the target's op time")]
    gated: Annotated[
        bool,
        Meta(
            description="whether a `slower` verdict here fails the check (within --ops and --min-share; the whole step always)"
        ),
    ]
    significant: Annotated[
        bool,
        Meta(
            description="a gated row whose verdict is a change (slower, faster, only in one side): what the "
            'tab\'s "significant changes only" and `significant=1` on the compare routes keep'
        ),
    ]


class CheckStepPart(_Document):
    """One part of the step in a check (issue 53): how its time changed between the sides."""

    side: Annotated[
        Literal["host", "device"],
        Meta(description="as in Compare's breakdown: `host` parts add up to the step wall time"),
    ]
    category: Annotated[
        str, Meta(description="a key of the vocabulary every format shares (`input`, `forward`, `device_idle`, ...)")
    ]
    label: Annotated[str, Meta(description="the category in words, as shown")]
    baseline_us: Annotated[
        float, Meta(description="mean over the baseline runs of the part's time in each run's median steady step, µs")
    ]
    target_us: Annotated[float, Meta(description="as baseline_us, for the target")]
    change_us: Annotated[float, Meta(description="target_us - baseline_us (negative: time saved)")]
    low_us: Annotated[
        float | None,
        Meta(
            description="lower end of the change's 95% interval (Welch's, over runs; outlier runs left out), µs; null "
            "without two runs a side"
        ),
    ]
    high_us: Annotated[float | None, Meta(description="upper end of that interval, µs")]
    grew: Annotated[
        bool,
        Meta(
            description="the part took longer: the interval lies wholly above 0, or with one run a side the change is"
        ),
    ]


class CheckDocument(_Document):
    """`tb-opcompare check`: did anything get significantly slower between two groups of runs?"""

    TABLE: ClassVar[str] = "rows"

    passed: Annotated[
        bool, Meta(description="no gated op and not the whole step got significantly slower beyond the threshold")
    ]
    common_change: Annotated[
        float | None,
        Meta(
            description="how much slower (> 1) or faster (< 1) the target ran every op together, "
            "taken out of the ops' adjusted speedups; null where not measured"
        ),
    ]
    headline: Annotated[str, Meta(description="the verdict in one sentence")]
    baseline: Annotated[list[str], Meta(description="the baseline runs, pooled")]
    target: Annotated[list[str], Meta(description="the target runs, pooled")]
    threshold: Annotated[float, Meta(description="the largest slowdown that does not fail the check (0.05: 5%)")]
    min_share: Annotated[float, Meta(description="ops below this share of op time on both sides are not gated")]
    ops: Annotated[str | None, Meta(description="the regular expression that selects the gated ops, if any")]
    group_by: Annotated[str, Meta(description="`name` or `type`")]
    noise: Annotated[
        str, Meta(description="how run-to-run noise entered the intervals, and whether each run's speed was taken out")
    ]
    slower: Annotated[int, Meta(description="tested ops significantly slower")]
    faster: Annotated[int, Meta(description="tested ops significantly faster")]
    within_noise: Annotated[int, Meta(description="tested ops whose change is within noise or the threshold")]
    not_tested: Annotated[int, Meta(description="ops not tested: outside --ops / --min-share, or without an interval")]
    only_baseline: Annotated[
        int, Meta(description="ops that ran in the baseline only (above --min-share and within --ops)")
    ]
    only_target: Annotated[
        int, Meta(description="ops that ran in the target only (above --min-share and within --ops): new work")
    ]
    whole_step: Annotated[
        CheckRow, Meta(description="the step as a stopwatch reads it (`whole_step_basis`), tested on its own")
    ]
    whole_step_basis: Annotated[
        Literal["step wall time", "op time per step"],
        Meta(
            description="what `whole_step` is: each run's median steady step wall time (the headline's rule) "
            "where every run has step markers, else all op time per profiled step"
        ),
    ]
    enough_evidence: Annotated[
        bool,
        Meta(
            description=f"whether the runs could show {evidence_rule()} (`detectable_change` at most that); a check that "
            "passes without it says `not enough evidence` (exit 3 under `--strict`)"
        ),
    ]
    detectable_change: Annotated[
        float | None,
        Meta(
            description=f"the smallest slowdown (0.3: 30%) that this check would flag in {DETECTION_POWER:.0%} of checks in "
            f"every gated op holding {POWER_MIN_SHARE:.0%} of op time or more, else in every gated op (the largest "
            "of their rows' `detectable_change`); null where no gated op was tested on run-to-run noise"
        ),
    ]
    detectable_key: Annotated[str | None, Meta(description="the op whose noise sets `detectable_change`")]
    outlier_runs: Annotated[
        list[str],
        Meta(
            description="runs whose whole step lies far from the rest of their side (a hiccup of the machine): left out "
            "of the whole step's test; their ops stay in, each on its typical time"
        ),
    ]
    rows: Annotated[
        list[CheckRow], Meta(description="the ops, slower first, then faster, then the rest, each by share of time")
    ]
    step_parts: Annotated[
        list[CheckStepPart],
        Meta(
            description="the step split by what it was spent on, each part's change (empty where a side's runs split no step)"
        ),
    ]
    grew_most: Annotated[
        str | None,
        Meta(
            description="the category of the host part whose time grew most: where a slower step's time went (its `grew` says "
            "whether beyond noise); the headline names it, with its interval, when the whole step is slower"
        ),
    ]
    warnings: Annotated[list[str], Meta(description="what may make the verdicts less reliable")]
    resamples: Annotated[int, Meta(description="bootstrap replicates")]
    baseline_logdir: Annotated[
        str | None,
        Meta(
            description="where the baseline runs were read, where that is not the target's logdir (`check "
            "--baseline-logdir`: a stored baseline, such as the main branch's runs in a bucket); null: the same logdir"
        ),
    ] = None


class TrendPoint(_Document):
    """One point of a trend: the runs that share one value of the order."""

    value: Annotated[str, Meta(description="the value of the order (a recording time, label, run name, version ...)")]
    runs: Annotated[list[str], Meta(description="the runs pooled at this point")]


TrendRow = msgspec.defstruct(
    "TrendRow",
    [
        ("key", _d(str, "op name or type, or `(whole step)`: the step's wall time, as `whole_step_basis` says")),
        ("point", _d(int, "position of the point in `points`")),
        ("mean_us", _d(float | None, "geometric mean of the point's runs' means per execution, µs")),
        ("low_us", _d(float | None, "lower end of its 95% interval (Student's t on the log means; null for one run)")),
        ("high_us", _d(float | None, "upper end of its 95% interval")),
        ("runs", _d(int, "runs at this point that ran the op")),
    ],
    bases=(_Document,),
    kw_only=True,
    module=__name__,
)
TrendRow.__doc__ = "One op at one point of a trend."


class TrendDocument(_Document):
    """A model across many runs: the top ops and the whole step at each point of an order."""

    TABLE: ClassVar[str] = "rows"

    order_by: Annotated[str, Meta(description="`recorded`, `label`, `run`, `repeat` or `sidecar:<dotted.path>`")]
    group_by: str
    points: Annotated[list[TrendPoint], Meta(description="in order: natural order of the values (2.9 before 2.10)")]
    keys: Annotated[
        list[str],
        Meta(
            description="the ops shown, largest share first, then `(whole step)`, then the parts of the step "
            "(`(step) waiting for input`, ...: each point's median steady step by what it was spent on, "
            "where its runs split their steps)"
        ),
    ]
    rows: Annotated[list[TrendRow], Meta(description="each key at each point")]  # type: ignore[valid-type]  # a row Struct made by defstruct
    whole_step_basis: Annotated[
        Literal["step wall time", "op time per step", "mixed"],
        Meta(
            description="what `(whole step)` is: the median steady step wall time of a point's runs pooled (the "
            "headline's rule) where every run has step markers, else all op time per step (the mean "
            "per run); `mixed` where points differ"
        ),
    ]
    warnings: list[str]
    order_note: Annotated[
        str,
        Meta(
            description="how ties in the order were broken (runs that share a recording time, or have none, are "
            "each a point, ordered by run name); empty where none were"
        ),
    ]


class MatrixColumn(_Document):
    """One column of the matrix: a device (`?` where unknown), with the accelerator's model
    where one kind of accelerator came in several (`GPU (NVIDIA H200)`)."""

    key: Annotated[str, Meta(description="the device, as shown and as `reference` takes it")]
    device: str


class MatrixCell(_Document):
    """The runs of one row (model, precision, compiler, batch size) on one device, and their
    steady-state step."""

    model: Annotated[str, Meta(description="the model without its precision and compiler")]
    precision: Annotated[str, Meta(description="the row's precision (fp32 where the runs do not say)")]
    compiler: Annotated[str, Meta(description="the row's compiler (eager where the runs do not say)")]
    batch_size: Annotated[int | None, Meta(description="samples per step")]
    column: Annotated[str, Meta(description="the key of its MatrixColumn")]
    runs: Annotated[list[str], Meta(description="the runs pooled here (repeats of one configuration)")]
    steps: Annotated[
        int, Meta(description="steady steps pooled (after warm-up); 0 where the runs have no step markers")
    ]
    warmup_steps: Annotated[int, Meta(description="leading steps left out as warm-up, over all its runs")]
    latency_us: Annotated[
        float | None,
        Meta(
            description="median wall time of a steady step, µs (step markers; the headline's rule); null without markers"
        ),
    ]
    latency_std_us: Annotated[float | None, Meta(description="standard deviation of the steady steps' wall time, µs")]
    latency_p10_us: Annotated[float | None, Meta(description="10th percentile of the steady steps' wall time, µs")]
    latency_p90_us: Annotated[float | None, Meta(description="90th percentile of the steady steps' wall time, µs")]
    throughput_per_s: Annotated[float | None, Meta(description="samples per second: batch size x 10^6 / latency_us")]
    speedup: Annotated[
        float | None, Meta(description="the reference cell's latency / this cell's, in the same row; null without both")
    ]
    reference: Annotated[
        bool, Meta(description="whether this is the reference cell of its row: the one in the reference column")
    ]
    part_us: Annotated[
        float | None,
        Meta(
            description="with `part`: that part's time in the cell's median steady step (Compare's breakdown), µs; 0 where the "
            "step has none of it; null where its runs split no step (or, for a device part, have no device)"
        ),
    ]
    part_speedup: Annotated[
        float | None, Meta(description="the reference cell's part_us / this cell's; null without both")
    ]


class MatrixRow(_Document):
    """One configuration of a model: the precision, compiler and batch size its runs share."""

    model: str
    precision: str
    compiler: str
    batch_size: int | None


class MatrixDocument(_Document):
    """Steady-state step latency and throughput of every model, precision, compiler and batch
    size (rows) on every device (columns), with the speedup against a reference device."""

    TABLE: ClassVar[str] = "cells"

    reference: Annotated[
        str | None, Meta(description="the reference column's key (default: CPU where present, else the first column)")
    ]
    warmup: Annotated[
        int | None,
        Meta(
            description="leading steps dropped from every run as asked; null: detected per run (steps slower "
            "than 1.5x the median of the steps after them)"
        ),
    ]
    part: Annotated[
        str | None,
        Meta(
            description="the part of the step each cell shows beside its step (`input`, `device_idle`, ...), as asked"
        ),
    ]
    columns: Annotated[list[MatrixColumn], Meta(description="CPU first, then the accelerators by name")]
    rows: Annotated[list[MatrixRow], Meta(description="by model, then fp32 and eager first, then batch size")]
    cells: Annotated[list[MatrixCell], Meta(description="the filled cells, row by row")]
    warnings: list[str]


class ModuleNode(_Document):
    """A node of the module tree: the whole model, a module (its sub-modules included), or
    an op inside a module."""

    id: Annotated[
        str,
        Meta(
            description="the node's path: modules `/`-joined, an op's name after its module's path; the root is empty"
        ),
    ]
    parent: Annotated[str | None, Meta(description="the parent's id; null for the root")]
    name: Annotated[
        str, Meta(description="the last part of the path: a module instance (`Conv2d_0`), a TF scope, or an op")
    ]
    kind: Annotated[str, Meta(description="`module` or `op`")]
    depth: Annotated[int, Meta(description="0 for the root")]
    baseline_us: Annotated[
        float | None,
        Meta(
            description="time inside the node on the baseline, per profiled step where both runs know "
            "their steps, else in all; null where only the target has it"
        ),
    ]
    target_us: Annotated[float | None, Meta(description="as baseline_us, on the target")]
    baseline_share: Annotated[float | None, Meta(description="of the baseline's whole model")]
    target_share: Annotated[float | None, Meta(description="of the target's whole model")]
    speedup: Annotated[float | None, Meta(description="baseline_us / target_us")]
    baseline_alloc_bytes: Annotated[
        float | None,
        Meta(
            description="bytes the ops inside the node allocated on the baseline, per step or in "
            "all as baseline_us; null where the run records no memory"
        ),
    ]
    target_alloc_bytes: Annotated[float | None, Meta(description="as baseline_alloc_bytes, on the target")]
    status: Annotated[str, Meta(description="`matched`, `baseline_only` or `target_only`")]


class HeadlineFigure(_Document):
    """The speedup a user reads first, as Compare's summary gives it (`headline_*`): the
    same number in every view of the same two runs."""

    speedup: Annotated[
        float | None,
        Meta(
            description="baseline over target median steady step wall time, per sample where the batch "
            "sizes differ; op time per step where a side has no step markers (see basis)"
        ),
    ]
    basis: Annotated[
        Literal["step wall time", "op time per step", "op time"], Meta(description="what speedup is the ratio of")
    ]
    per_sample: Annotated[bool, Meta(description="speedup compares time per sample (the batch sizes differ)")]
    text: Annotated[str, Meta(description="the basis in words, with the two times it is the ratio of")]
    baseline_step_wall_us: Annotated[
        float | None, Meta(description="median steady step wall time, µs; null without step markers")
    ]
    target_step_wall_us: Annotated[float | None, Meta(description="as baseline_step_wall_us, for the target")]


class ModulesDocument(_Document):
    """Two runs' module trees side by side: model -> module -> op (PyTorch nn.Module calls,
    recorded with with_stack=True; else TF name scopes)."""

    baseline: str
    target: str
    per_step: Annotated[bool, Meta(description="whether times are per profiled step (both runs know their step count)")]
    source: Annotated[
        str, Meta(description="where modules come from: `nn.Module calls`, `name scopes`, or `mixed` (one run each)")
    ]
    headline: Annotated[HeadlineFigure, Meta(description="the two runs' speedup, as Compare's headline")]
    nodes: Annotated[list[ModuleNode], Meta(description="depth first from the root, the larger child first")]
    notes: list[str]


class LayerTotal(_Document):
    """One layer's time in both runs."""

    layer: Annotated[
        Literal[LAYERS],  # type: ignore[valid-type]  # a vocabulary tuple, a Literal to msgspec
        Meta(
            description="application: user ranges (record_function, TF Trace, app_stats) and the tf.data input pipeline; framework: ops; "
            "runtime: CUDA/HIP runtime and "
            "driver calls; device: kernels, memcpys, memsets"
        ),
    ]
    basis: Annotated[
        str,
        Meta(
            description="how the time is measured: `self` (host time in the layer's own work, nested work of other "
            "layers left out), `wall` (ranges with wall time only, the ops inside them included), `kernel` "
            "(summed device time)"
        ),
    ]
    baseline_us: Annotated[
        float | None,
        Meta(
            description="per profiled step where both runs know their steps, else in all; null where the "
            "baseline records nothing of the layer"
        ),
    ]
    target_us: Annotated[float | None, Meta(description="as baseline_us, on the target")]
    baseline_share: Annotated[
        float | None,
        Meta(
            description="of the baseline's step wall time (several host threads can pass 100%); null where the step time is unknown"
        ),
    ]
    target_share: Annotated[float | None, Meta(description="as baseline_share, on the target")]
    speedup: Annotated[float | None, Meta(description="baseline_us / target_us")]


class LayerRow(_Document):
    """An application range or runtime call, compared like an op: wall time, not mixed into op
    self time."""

    layer: Annotated[Literal[ROW_LAYERS], Meta(description="the layer the row belongs to")]  # type: ignore[valid-type]  # a vocabulary tuple, a Literal to msgspec
    name: Annotated[
        str, Meta(description="the range's or call's name (`Optimizer.step#Adam.step`, `cudaLaunchKernel`)")
    ]
    kind: Annotated[
        str,
        Meta(
            description="what recorded it: a trace category (`user_annotation`, `cuda_runtime`, `cuda_driver`), "
            "`Dataset` (a tf.data iterator) or `app_stats`"
        ),
    ]
    baseline_calls: Annotated[
        int | None,
        Meta(description="times it ran in the baseline (all profiled steps); null where only the target has it"),
    ]
    baseline_wall_us: Annotated[
        float | None, Meta(description="its summed wall time, per step or in all as the layers")
    ]
    baseline_self_us: Annotated[
        float | None, Meta(description="its wall time less the ops and calls inside it; null where not known")
    ]
    baseline_mean_us: Annotated[float | None, Meta(description="wall time per call")]
    target_calls: Annotated[int | None, Meta(description="as baseline_calls, on the target")]
    target_wall_us: Annotated[float | None, Meta(description="as baseline_wall_us, on the target")]
    target_self_us: Annotated[float | None, Meta(description="as baseline_self_us, on the target")]
    target_mean_us: Annotated[float | None, Meta(description="as baseline_mean_us, on the target")]
    speedup: Annotated[float | None, Meta(description="baseline_mean_us / target_mean_us")]
    status: Status


class LayersDocument(_Document):
    """Two runs' layers side by side: how much of a step is application, framework, runtime
    and device, and the application's and runtime's rows."""

    baseline: str
    target: str
    per_step: Annotated[bool, Meta(description="whether times are per profiled step (both runs know their step count)")]
    headline: Annotated[HeadlineFigure, Meta(description="the two runs' speedup, as Compare's headline")]
    layers: Annotated[
        list[LayerTotal], Meta(description="application, framework, runtime, device: those either run records")
    ]
    rows: Annotated[list[LayerRow], Meta(description="application rows, then runtime rows, the larger first")]
    notes: list[str]


LAYER_COLUMNS = list(LayerRow.__struct_fields__)  # the rows' table, its CSV included


MODULE_NODE_COLUMNS = list(ModuleNode.__struct_fields__)  # the tree's table, its CSV included


class MemoryRun(_Document):
    """What one run records of memory, over its whole profile."""

    run: str
    framework: Annotated[str | None, Meta(description="TensorFlow or PyTorch, where the data says")]
    format: Annotated[str, Meta(description="the profile's format (as RunRecord's)")]
    recorded: Annotated[
        bool, Meta(description="whether the profile records memory at all: allocations per op, memory in use, or both")
    ]
    peak_memory_bytes: Annotated[
        dict[str, int],
        Meta(
            description="memory in use at its highest per device (PyTorch: `CPU`, `GPU:0`; "
            "TensorFlow: its allocators, `mklcpu`, `GPU_0_bfc`); empty where not "
            "recorded"
        ),
    ]
    steps: Annotated[int | None, Meta(description="profiled steps, where known")]
    memory_events: Annotated[
        int | None,
        Meta(
            description="allocations and frees recorded (PyTorch `[memory]` events; TensorFlow "
            "MemoryAllocation and MemoryDeallocation events); null where none"
        ),
    ]
    memory_events_per_step: Annotated[float | None, Meta(description="memory_events per profiled step")]
    allocated_bytes: Annotated[
        float | None,
        Meta(
            description="bytes the ops allocated over the profile, each op's own allocations summed; "
            "null where the profile records no allocation per op"
        ),
    ]
    allocated_bytes_per_step: Annotated[float | None, Meta(description="allocated_bytes per profiled step")]


class MemorySeries(_Document):
    """One run's memory in use over time on one device, as plotted (at most 2,000 points, each
    the highest of the stretch of time it stands for, so its highest point is the peak)."""

    side: Annotated[Literal[SIDES], Meta(description="the run it is of")]  # type: ignore[valid-type]  # a vocabulary tuple, a Literal to msgspec
    device: Annotated[str, Meta(description="a key of that run's peak_memory_bytes")]
    peak_bytes: Annotated[int, Meta(description="the highest bytes_in_use: that run's peak_memory_bytes on the device")]
    time_us: Annotated[list[float], Meta(description="since the run's first memory sample (any device), µs")]
    bytes_in_use: Annotated[list[float], Meta(description="bytes the allocator held then")]


_MEMORY_PER_SIDE = ("occurrences", "alloc_bytes", "alloc_bytes_per_execution", "net_bytes")
MemoryRow = msgspec.defstruct(
    "MemoryRow",
    [
        ("key", _d(str, "op name")),
        ("op_type", _d(str | None, "normalised op type")),
        ("status", _d(Status, "whether the op is in both runs or in one only")),
        *[
            (f"{side}_{name}", _d(kind, description))
            for side in SIDES
            for name, kind, description in _PER_SIDE
            if name in _MEMORY_PER_SIDE
        ],
        (
            "ratio",
            _d(
                float | None,
                "target_alloc_bytes_per_execution / baseline_alloc_bytes_per_execution (> 1: the "
                "target allocates more per call); null where the baseline allocates nothing",
            ),
        ),
    ],
    bases=(_Document,),
    kw_only=True,
    module=__name__,
)
MemoryRow.__doc__ = (
    "One op that allocated or freed memory in either run: the memory columns of the comparison by op name."
)
MEMORY_COLUMNS: list[str] = list(MemoryRow.__struct_fields__)  # the rows' table, its CSV included


class MemoryDocument(_Document):
    """Two runs' memory side by side: peaks per device, memory over time, and what each op
    allocated."""

    baseline: MemoryRun
    target: MemoryRun
    series: Annotated[
        list[MemorySeries],
        Meta(description="memory over time: the baseline's devices, then the target's, each by name"),
    ]
    columns: Annotated[list[str], Meta(description="the fields of a row, in order")]
    rows: Annotated[
        list[MemoryRow],  # type: ignore[valid-type]  # a row Struct made by defstruct
        Meta(description="the ops that allocated or freed memory, the largest allocation (either run's) first"),
    ]
    notes: Annotated[
        list[str],
        Meta(
            description="what the user should know: a run that records no memory and how to record it, what TensorFlow leaves out"
        ),
    ]


class RooflineLimits(_Document):
    """One processor's roof as a run's ops were measured against it (issue 54)."""

    processor: Annotated[
        Literal["device", "host"],
        Meta(description="the accelerator (ops timed by their kernels) or the CPU (ops timed on the host)"),
    ]
    device: Annotated[
        str | None, Meta(description="what the limits are of: a model, the profile's description; null where unknown")
    ]
    precision: Annotated[
        str | None,
        Meta(description="the precision whose peak is the compute roof (the run's; of a mix, the highest peak)"),
    ]
    peak_flops: Annotated[float | None, Meta(description="peak FLOP/s at that precision; null where unknown")]
    peak_flops_by_precision: Annotated[dict[str, float], Meta(description="every peak known, FLOP/s, by precision")]
    memory_bandwidth: Annotated[float | None, Meta(description="peak memory bandwidth, bytes/s; null where unknown")]
    source: Annotated[
        str | None,
        Meta(description="where the figures come from: the sidecar, the profile, or a vendor datasheet's URL"),
    ]


class RooflineRun(_Document):
    """One run of a roofline: its roofs, and its achieved rate over the ops whose work is known."""

    run: str
    device_name: Annotated[str | None, Meta(description="the accelerator the profile names")]
    precision: Annotated[str | None, Meta(description="the precision the run computed in (as RunRecord's)")]
    limits: Annotated[
        list[RooflineLimits], Meta(description="its roofs: the device's (where it has one), then the host's")
    ]
    flops: Annotated[float | None, Meta(description="FLOPs of the ops whose work and time are known, summed")]
    time_us: Annotated[float | None, Meta(description="their time, µs (kernel time where timed on the device)")]
    flops_per_s: Annotated[float | None, Meta(description="flops / time: the run's achieved rate on those ops")]


_ROOFLINE_PER_SIDE: tuple[tuple[str, Any, str], ...] = (
    ("calls", int | None, "the op's calls counted (a call inside another counted call left out)"),
    (
        "known_calls",
        int | None,
        "those whose work is known and that ran where the op is timed (the figures below are theirs)",
    ),
    (
        "source",
        str | None,
        "where the work comes from: `profile`, `shapes` (formulas on the recorded input shapes), `xla` (XLA's cost rules on the compiled program the profile carries) or `unknown: why`",
    ),
    ("timed_on", str | None, "`device`: by the kernels its calls launched; `host`: by their wall time"),
    ("time_us", float | None, "the known calls' time there, µs"),
    ("share", float | None, "time_us / the time of all ops of the run with known work"),
    ("flops", float | None, "floating-point operations of the known calls"),
    ("bytes", float | None, "bytes they must at least move (inputs read and output written once)"),
    ("flops_per_s", float | None, "achieved FLOP/s"),
    ("bytes_per_s", float | None, "achieved bytes/s"),
    ("intensity", float | None, "arithmetic intensity, FLOPs per byte"),
    ("roof_flops_per_s", float | None, "the roof at that intensity: min(peak FLOP/s, intensity x bandwidth)"),
    (
        "roof_precision",
        str | None,
        "the precision whose peak is that roof: the run's (its limits' `precision`), or `tf32` for an fp32 op "
        "whose kernels ran on TF32 tensor cores (their names say so); null where the roof is unknown",
    ),
    ("fraction_of_roof", float | None, "flops_per_s / roof (a copy's: bytes_per_s / bandwidth); null where suspect"),
    ("bound", str | None, "`compute` where the intensity reaches the ridge (peak / bandwidth), else `memory`"),
    ("time_at_roof_us", float | None, "the time at the roof: max(flops / peak, bytes / bandwidth), µs"),
    ("headroom_us", float | None, "time_us - time_at_roof_us: what the roof leaves to gain"),
    ("suspect", str | None, "why an achieved rate above a peak cannot be (the op is then not placed on the roof)"),
)
RooflineRow = msgspec.defstruct(
    "RooflineRow",
    [
        ("op_name", _d(str, "op name (the outermost op with a formula: `aten::conv2d`, not the convolution it calls)")),
        *[
            (f"{side}_{name}", _d(kind, description))
            for side in SIDES
            for name, kind, description in _ROOFLINE_PER_SIDE
        ],
        ("speedup", _d(float | None, "the baseline's time per known call / the target's")),
        (
            "work_ratio",
            _d(
                float | None,
                "the target's FLOPs per known call / the baseline's: 1 where both calls did the same work; "
                "else the speedup compares different work (another batch size, or a compiler that took some "
                "of the op's calls into its own kernels)",
            ),
        ),
        (
            "change",
            _d(
                str | None,
                "what the change did: `moved along the roof` (about the same fraction of its roof on both sides, "
                "within 1.25x), `closed the gap` (nearer its roof) or `widened the gap`",
            ),
        ),
    ],
    bases=(_Document,),
    kw_only=True,
    module=__name__,
)
RooflineRow.__doc__ = "One op whose work either run knows or could know, on both runs' rooflines."
ROOFLINE_COLUMNS: list[str] = list(RooflineRow.__struct_fields__)  # the rows' table, its CSV included


class RooflineDocument(_Document):
    """Why an op sped up: each op's work, achieved rate and its device's roof on both sides."""

    TABLE: ClassVar[str] = "rows"

    baseline: RooflineRun
    target: RooflineRun
    columns: Annotated[list[str], Meta(description="the fields of a row, in order")]
    rows: Annotated[list[RooflineRow], Meta(description="the ops, the most time (either side's share) first")]  # type: ignore[valid-type]  # a row Struct made by defstruct
    notes: Annotated[
        list[str],
        Meta(description="what the user should know: unknown work or limits and how to give them, suspect ops"),
    ]


MATRIX_CSV_COLUMNS = [
    "model",
    "batch_size",
    "device",
    "precision",
    "compiler",
    "runs",
    "steps",
    "warmup_steps",
    "latency_us",
    "latency_std_us",
    "latency_p10_us",
    "latency_p90_us",
    "throughput_per_s",
    "speedup",
    "reference",
]


class ReadUnderWay(_Document):
    """One cold read of this server's that has taken a while (2 s, or
    ``$TB_OPCOMPARE_PROGRESS_AFTER_S``), as the tab's spinner tells it."""

    run: Annotated[str, Meta(description="the run read (or `N runs at once (...)` where several are read in parallel)")]
    bytes: Annotated[int, Meta(description="its files' size, bytes")]
    seconds: Annotated[float, Meta(description="how long it has taken so far, s")]
    seconds_left: Annotated[
        float | None,
        Meta(
            description="about how long it has left, at the rate of this server's reads that ended; null before any "
            "ended, or once it has taken longer than that rate says"
        ),
    ]


class ReadsDocument(_Document):
    """The server's cold reads under way: what a page that waits on its document waits for."""

    reads: Annotated[list[ReadUnderWay], Meta(description="oldest first; empty when no read has taken a while")]
    text: Annotated[
        str,
        Meta(description="the oldest read as one line, as the tab and the CLI show it; empty when there is none"),
    ]


# Each route's parameters are its requests' fields (schema/requests.py): listed from them, so
# the doc cannot drift from the rules the routes apply.
ROUTES: tuple[tuple[str, type, str], ...] = (
    ("runs", RunsDocument, requests.parameters_text(requests.RunsRequest)),
    ("reads", ReadsDocument, "none; answers at once, whatever else the server is doing"),
    (
        "compare",
        CompareDocument,
        requests.parameters_text(requests.CompareRequest)
        + "; and the view: "
        + requests.parameters_text(requests.ViewRequest),
    ),
    ("compare.csv", CompareDocument, "as `compare`; answers the rows as CSV (the columns of CompareRow)"),
    (
        "breakdown.csv",
        CompareDocument,
        "as `compare`; answers where the time went (`summary.breakdown`) as CSV: the two steps first (category "
        "`(step)`), then one line per part (the columns of BreakdownPart); 400 saying why where the runs split no "
        "step",
    ),
    ("sweeps", SweepsDocument, "none"),
    ("sweep", SweepDocument, requests.parameters_text(requests.SweepRequest)),
    (
        "sweep.csv",
        SweepDocument,
        "as `sweep`, and the fits table's filter and sort: "
        + requests.parameters_text(requests.FitsTableRequest)
        + "; answers the fits with each op's break-even as CSV",
    ),
    ("trend", TrendDocument, requests.parameters_text(requests.TrendRequest)),
    ("trend.csv", TrendDocument, "as `trend`; answers the rows as CSV, the point as its value"),
    ("check", CheckDocument, requests.parameters_text(requests.CheckRequest)),
    ("matrix", MatrixDocument, requests.parameters_text(requests.MatrixRequest)),
    ("matrix.csv", MatrixDocument, "as `matrix`; answers one line per cell (its runs `;`-separated)"),
    ("modules", ModulesDocument, requests.parameters_text(requests.PairRequest)),
    ("modules.csv", ModulesDocument, "as `modules`; answers one line per node, with its path (`id`)"),
    ("layers", LayersDocument, requests.parameters_text(requests.PairRequest)),
    ("layers.csv", LayersDocument, "as `layers`; answers its rows (application ranges, runtime calls)"),
    ("memory", MemoryDocument, requests.parameters_text(requests.PairRequest)),
    ("memory.csv", MemoryDocument, "as `memory`; answers its rows (the ops that allocated or freed memory)"),
    ("roofline", RooflineDocument, requests.parameters_text(requests.PairRequest)),
    ("roofline.csv", RooflineDocument, "as `roofline`; answers its rows (one per op)"),
)
DOCUMENTS = (
    RunsDocument,
    CompareDocument,
    SweepsDocument,
    SweepDocument,
    CheckDocument,
    TrendDocument,
    MatrixDocument,
    ModulesDocument,
    LayersDocument,
    MemoryDocument,
    RooflineDocument,
    ErrorDocument,
)


# ---------------------------------------------------------------------------------------------
# Generated files


def _components() -> dict[str, dict[str, Any]]:
    _, components = msgspec.json.schema_components(DOCUMENTS, ref_template="{name}")
    return components


def _type_text(schema: dict[str, Any], js: bool) -> str:
    if "$ref" in schema:
        return str(schema["$ref"])
    if "anyOf" in schema:
        return ("|" if js else " or ").join(dict.fromkeys(_type_text(option, js) for option in schema["anyOf"]))
    if "enum" in schema:
        return (
            "|".join(f"'{value}'" for value in schema["enum"])
            if js
            else " or ".join(f"`{value}`" for value in schema["enum"])
        )
    kind = schema.get("type")
    if kind == "array":
        inner = _type_text(schema.get("items", {}), js)
        return f"Array<{inner}>" if js else f"list of {inner}"
    if kind == "object":
        values = schema.get("additionalProperties")
        if isinstance(values, dict):
            return f"Object<string, {_type_text(values, js)}>" if js else f"map of {_type_text(values, js)}"
        return "Object" if js else "object"
    if kind is None:
        return "*" if js else "any"
    return (
        {"integer": "number", "number": "number", "string": "string", "boolean": "boolean", "null": "null"}[kind]
        if js
        else {"integer": "int", "number": "number"}.get(kind, kind)
    )


def http_api_markdown() -> str:
    components = _components()
    lines = [
        "# HTTP API of the Op Compare plugin",
        "",
        "<!-- Generated from tb_opcompare/schema/contract.py by `make contract`; do not edit. -->",
        "",
        "Routes live under `/data/plugin/op_compare/`. `tb-opcompare runs|compare|sweep … --json` prints the same "
        "documents. Fields marked optional are left out when they do not apply; `null` means unknown.",
        "",
        "| route | answers | parameters |",
        "|---|---|---|",
        *[
            f"| `{route}` | {document.__name__} | {params.replace('|', chr(92) + '|')} |"
            for route, document, params in ROUTES
        ],
        "",
        "Any error answers ErrorDocument with its status code.",
    ]
    for name, schema in components.items():
        lines += [
            "",
            f"## {name}",
            "",
            " ".join((schema.get("description") or "").split()),
            "",
            "| field | type | meaning |",
            "|---|---|---|",
        ]
        required = set(schema.get("required", ()))
        for field, spec in schema.get("properties", {}).items():
            optional = "" if field in required else " (optional)"
            meaning = spec.get("description", "").replace("|", "\\|")
            lines.append(f"| `{field}` | {_type_text(spec, js=False)}{optional} | {meaning} |")
    return "\n".join(lines) + "\n"


def jsdoc_typedefs() -> str:
    components = _components()
    lines = [
        "// Generated from tb_opcompare/schema/contract.py by `make contract`; do not edit.",
        "// The documents the tab receives from the plugin's routes, as JSDoc types.",
        "",
    ]
    for name, schema in components.items():
        lines.append("/**")
        description = " ".join((schema.get("description") or "").split())
        if description:
            lines.append(f" * {description}")
        lines.append(f" * @typedef {{Object}} {name}")
        required = set(schema.get("required", ()))
        for field, spec in schema.get("properties", {}).items():
            kind = _type_text(spec, js=True)
            field_name = field if field in required else f"[{field}]"
            meaning = " ".join(spec.get("description", "").split())
            lines.append(f" * @property {{{kind}}} {field_name}" + (f" - {meaning}" if meaning else ""))
        lines += [" */", ""]
    lines.append("// Words the server spells, for the tab to use as they are.")
    lines += [
        f"export const {name} = Object.freeze({json.dumps(words if isinstance(words, dict) else list(words))});"
        for name, words in SHARED_WORDS.items()
    ]
    return "\n".join(lines) + "\n"


def index_schema() -> str:
    from tb_opcompare.schema.index_tables import index_schema_markdown

    facts = _components()["RunRecord"]["properties"]
    return index_schema_markdown({name: spec.get("description", "") for name, spec in facts.items()})


GENERATED = {
    "docs/http_api.md": http_api_markdown,
    "frontend/contract.js": jsdoc_typedefs,
    "docs/index_schema.md": index_schema,
}


if __name__ == "__main__":
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[2]
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m tb_opcompare.schema.contract --write  (rewrites " + ", ".join(GENERATED) + ")")
    for relative, make in GENERATED.items():
        (root / relative).write_text(make(), encoding="utf-8")
        print(f"wrote {relative}")
