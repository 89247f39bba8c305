"""Step wall time, and the headline speedup a user reads first.

The first number of a comparison is the one a user would measure with a stopwatch: how
long a training (or inference) step takes, wall clock. Op time is not that: a CPU's
inter-op threads run ops side by side (their summed time exceeds the step), and a step
also waits on things no op records (a data loader, the Python between ops). So every
view that shows a whole step (Compare's headline, the Matrix, the Batch sweep, the CLI)
takes it from here, and one pair of runs reads one number everywhere.

A step's wall time comes from the profile's step markers, which the readers put in
``ProfileFacts.step_times_us`` (``ProfilerStep#N``, TF's ``step_num`` ranges, Keras's
``train_function`` calls, the device plane's ``Steps`` line, an ONNX Runtime session
run, a TF1 ``session.run``'s span). Each run's leading warm-up steps are dropped
(``detect_warmup``); the latency of a run, or of a group of runs pooled, is the median
of the steady steps left. Plain data in, plain data out: no I/O.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence

import numpy as np

from tb_opcompare.schema.events import ARGUMENT_SOURCE
from tb_opcompare.schema.text import format_time

# A leading step slower than this many times the median of the steps after it is warm-up
# (first-call allocations, autotuning, compilation caches); steady steps of the recordings
# here differ by less than 1.3x from their median.
WARMUP_FACTOR = 1.5

STEP_WALL_TIME = "step wall time"
OP_TIME_PER_STEP = "op time per step"
OP_TIME = "op time"


def detect_warmup(step_times_us: Sequence[float]) -> int:
    """How many leading steps are warm-up: each is slower than ``WARMUP_FACTOR`` times the
    median of the steps after it. At most half the steps, so a run that only slows down
    keeps its steps."""
    times = list(step_times_us)
    warmup = 0
    while warmup < len(times) // 2 and times[warmup] > WARMUP_FACTOR * statistics.median(times[warmup + 1 :]):
        warmup += 1
    return warmup


def steady_steps(step_times_us: Sequence[float], warmup: int | None = None) -> Sequence[float]:
    """A run's steps after its warm-up: ``warmup`` leading steps dropped, else those
    ``detect_warmup`` finds."""
    return step_times_us[min(len(step_times_us), detect_warmup(step_times_us) if warmup is None else warmup) :]


@dataclasses.dataclass(frozen=True)
class StepLatency:
    """The steady steps of one run or of a group of runs pooled."""

    median_us: float | None  # None: no run has step markers
    std_us: float | None
    p10_us: float | None
    p90_us: float | None
    steps: int  # steady steps pooled
    warmup_steps: int  # leading steps left out, over all runs
    runs_without_markers: int


def step_latency(step_times_per_run: Sequence[Sequence[float]], warmup: int | None = None) -> StepLatency:
    """``step_times_per_run``: each run's step wall times in order (empty: no markers).
    ``warmup``: steps to drop from the start of every run (None: detected per run). Runs
    without markers are left out of the steps pooled and counted
    (``runs_without_markers``), for every view to say so alike."""
    steady: list[float] = []
    dropped = without = 0
    for times in step_times_per_run:
        if not len(times):
            without += 1
            continue
        kept = steady_steps(times, warmup)
        steady.extend(kept)
        dropped += len(times) - len(kept)
    if not steady:
        return StepLatency(None, None, None, None, 0, dropped, without)
    values = np.asarray(steady, dtype="float64")
    p10, p90 = (float(value) for value in np.percentile(values, [10, 90]))
    return StepLatency(float(np.median(values)), float(values.std()), p10, p90, len(values), dropped, without)


def evidenced_batch_size(batch_size: int | None, source: str | None) -> int | None:
    """A run's batch size where something measured it or a user declared it; None where
    only a framework's argument gives it (Keras's step event carries ``fit()``'s
    ``batch_size``, which Keras ignores for an already batched dataset: a run that
    processed 128 a step read 1024, and 9.80x per sample). Per-sample figures rest on
    evidenced sizes only."""
    return None if (source or "").startswith(ARGUMENT_SOURCE) else batch_size


def unverified_batch_note(sizes: Sequence[tuple[int | None, str | None]]) -> str | None:
    """Where the batch sizes differ and one of them is an argument only: what the views
    then do (compare whole steps, not samples), in words."""
    if not batch_sizes_differ(*(size for size, _ in sizes)) or all(
        evidenced_batch_size(size, source) for size, source in sizes
    ):
        return None
    shown = " vs ".join(
        f"{size}{'' if evidenced_batch_size(size, source) else ' (an argument)'}" for size, source in sizes
    )
    return (
        f"Batch sizes differ ({shown}), but an argument is no measurement (Keras ignores fit()'s batch_size for "
        "an already batched dataset): unverified, so the figures compare whole steps, not samples. Declare the "
        "size in the run's sidecar (tb-opcompare record --batch-sizes) to compare per sample."
    )


def batch_sizes_differ(baseline_batch: int | None, target_batch: int | None) -> str | None:
    """``Batch sizes differ (16 vs 64)`` where both are known and differ (then times are
    compared per sample), for the headline and the notes of every view of two runs (each
    says what it means for its figures); else None."""
    if baseline_batch and target_batch and baseline_batch != target_batch:
        return f"Batch sizes differ ({baseline_batch} vs {target_batch})"
    return None


def _usable(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value > 0


@dataclasses.dataclass(frozen=True)
class Headline:
    speedup: float | None  # > 1: the target is faster
    basis: str  # STEP_WALL_TIME, OP_TIME_PER_STEP or OP_TIME
    per_sample: bool  # the batch sizes differ, so the times are per sample
    text: str  # what the number is, in words, with the two times it is the ratio of


def headline(
    baseline: StepLatency,
    target: StepLatency,
    baseline_batch: int | None,
    target_batch: int | None,
    op_time: tuple[float, float],
    steps: tuple[int | None, int | None],
) -> Headline:
    """The speedup a user reads first: the ratio of the two sides' median steady step
    wall times, per sample where the batch sizes differ (a bigger batch does more work in
    a step). Where a side has no step markers, op time per step stands in (``op_time``:
    each side's whole op time, µs; ``steps``: its profiled steps), and where the steps are
    unknown too, the whole profiles' op time; the text says which, and why it is not a
    stopwatch's figure."""
    per_sample = batch_sizes_differ(baseline_batch, target_batch) is not None
    scale = target_batch / baseline_batch if per_sample else 1.0
    unit = " per sample" if per_sample else ""
    if _usable(baseline.median_us) and _usable(target.median_us):
        speedup = baseline.median_us / target.median_us * scale
        counted = (
            "one step each"
            if baseline.steps == target.steps == 1
            else f"median of {baseline.steps} vs {target.steps} steady steps"
        )
        return Headline(
            speedup,
            STEP_WALL_TIME,
            per_sample,
            f"step wall time{unit}: {counted}, {_per(baseline.median_us, baseline_batch, per_sample)} vs "
            f"{_per(target.median_us, target_batch, per_sample)}",
        )
    missing = " and ".join(
        side for side, latency in (("the baseline", baseline), ("the target", target)) if not _usable(latency.median_us)
    )
    why = f"{missing} {'has' if ' and ' not in missing else 'have'} no step wall times, so"
    base_step, target_step = (time / count if count else None for time, count in zip(op_time, steps))
    if _usable(base_step) and _usable(target_step):
        return Headline(
            base_step / target_step * scale,
            OP_TIME_PER_STEP,
            per_sample,
            f"{why} op time per step{unit} instead of wall time "
            f"({_per(base_step, baseline_batch, per_sample)} vs "
            f"{_per(target_step, target_batch, per_sample)}): ops on parallel threads add up beyond "
            "the step, and time outside ops is missed",
        )
    if not all(steps):
        why += " the steps are unknown too:"
    return Headline(
        op_time[0] / op_time[1] if _usable(op_time[1]) else None,
        OP_TIME,
        False,
        f"{why} the whole profiles' op time instead of wall time",
    )


def _per(step_us: float, batch: int | None, per_sample: bool) -> str:
    return format_time(step_us / batch) if per_sample and batch else format_time(step_us)
