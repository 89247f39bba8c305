"""Step wall time: what the headline speedup a user reads first is made of (the rule
itself, which figure leads and what it is called: ``analysis.headline``).

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

# A leading step slower than this many times the median of the steps after it is warm-up
# (first-call allocations, autotuning, compilation caches); steady steps of the recordings
# here differ by less than 1.3x from their median.
WARMUP_FACTOR = 1.5

# One run's step wall times in order: a list, or a float array (``RunSamples.step_wall_us``)
StepTimes = Sequence[float] | np.ndarray


def detect_warmup(step_times_us: StepTimes) -> int:
    """How many leading steps are warm-up: each is slower than ``WARMUP_FACTOR`` times the
    median of the steps after it. At most half the steps, so a run that only slows down
    keeps its steps."""
    times = list(step_times_us)
    warmup = 0
    while warmup < len(times) // 2 and times[warmup] > WARMUP_FACTOR * statistics.median(times[warmup + 1 :]):
        warmup += 1
    return warmup


def steady_steps(step_times_us: StepTimes, warmup: int | None = None) -> StepTimes:
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


def step_latency(step_times_per_run: Sequence[StepTimes], warmup: int | None = None) -> StepLatency:
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
    if np.isnan(values).any():  # numpy's rules for NaN (every figure NaN)
        p10, p90 = (float(value) for value in np.percentile(values, [10, 90]))
        median = float(np.median(values))
    else:
        ordered = sorted(values.tolist())
        p10, p90, median = percentile(ordered, 10), percentile(ordered, 90), statistics.median(ordered)
    return StepLatency(median, float(values.std()), p10, p90, len(values), dropped, without)


def percentile(ordered: Sequence[float], percent: float) -> float:
    """``numpy.percentile(values, percent)`` of sorted values without NaN, the same float in
    the same steps (its default, linear, method). numpy's call costs about 0.25 ms,
    whatever the values: a listing of 1,000 runs of a few steps each spent 0.25 s in it."""
    position = (len(ordered) - 1) * (percent / 100)
    below = math.floor(position)
    low, high = ordered[below], ordered[min(below + 1, len(ordered) - 1)]
    weight = position - below
    difference = high - low
    return high - difference * (1 - weight) if weight >= 0.5 else low + difference * weight


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
