"""Is a per-op change real or noise? Confidence intervals for speedups between two groups
of runs, and verdicts with the false discovery rate controlled: the maths only, no I/O.

The unit of noise is the run. Two runs of one configuration differ by more than their
steps vary (another process, another moment of a shared machine; 10-30% here), so an
interval built from steps alone is too narrow and flags unchanged ops. Each run gives
one sample per op, the log of its typical time per execution (``log_run_typical``: the
median self time of one execution over the run, or for an op run twice a step (two
layers of one kind) the lower quartile over its profiled steps of its time per execution
in each, so that neither a call preempted by a neighbour's job, nor stalled steps, nor a
median that falls between the two layers' calls moves the run); the speedup as measured is
the ratio of the two
sides' geometric means of the runs' plain means (baseline over target: above 1, the
target is faster); the tests and intervals are on the typical times. Where ten ops or
more ran in every run, each run's speed factor (the median over those ops of how much
faster or slower the run was than the runs' median) is first taken out of its ops: a
machine busier during one run moves all its ops together, and neither one op that
really changed nor one run far off moves a median. The interval is Welch's: each
side's variance of (adjusted) log typical times, pooled with the run-to-run noise learned
from the logdir's repeated runs on that device (``run_noise``) where there are some and
drawn toward the variance the side's gated ops share (``shared_prior``: four runs give
each op three degrees of freedom, the ops together many more), and
Student's t with the Welch–Satterthwaite degrees of freedom. A run whose whole step lies
far from the rest of its side (``outlier_runs``: a hiccup of the machine) is left out of
the whole step's test; its ops stay, on their typical times. A side of one run takes its
variance from the learned noise, else from the other side (equal noise assumed). The
whole step is what a stopwatch reads, each run's median steady step wall time (the
headline's rule, ``step_time``), where every run has step markers, else all op time per
profiled step; it is never adjusted for run speed.

Only where both sides are one run each and no repeats exist is there no run-to-run noise
to go on: the interval then comes from a bootstrap over the profiled steps, and the
caller must say that it is too narrow.

With a threshold ``t`` (``--max-regression``), an op is *slower* when the data reject
"the target is at most t slower" and *faster* when they reject "the target is at most t
faster", each a one-sided test: a gate asks one question, did anything get slower, and
answers it at the whole rate (``decide``). The slower ops' p-values go through
Benjamini–Hochberg at 1.5% and the whole step is tested on its own at 1.5%: where
nothing changed, the chance of a failed check is held at 3% (measured on real identical
repeats: at most 5%); where some ops did, about 1 in 70 of the flagged ones may be a false
discovery. Faster ops are a family of their own at the same rates, for information.

The interval of a tested op is at the level its verdict was decided at: a family that
flags R of m ops rejects exactly the p-values up to R x 1.5% / m, so the two-sided interval
at 1 - 2 x that lies wholly beyond the threshold exactly when the op is flagged (Benjamini
and Yekutieli's false coverage rate intervals); an untested op keeps its 95% interval.
"""

from __future__ import annotations

import dataclasses
import math
import typing
import warnings
from typing import Any

import numpy as np
import pandas as pd

from tb_opcompare.analysis.compare import counted_rows, normalize_op_type
from tb_opcompare.analysis.headline import OP_TIME_PER_STEP, STEP_WALL_TIME, StepBasis
from tb_opcompare.analysis.numerics import at_most
from tb_opcompare.analysis.step_time import StepTimes, steady_steps, step_latency
from tb_opcompare.schema.contract import VERDICTS
from tb_opcompare.schema.dimensions import DETECTION_POWER, FALSE_DISCOVERY_RATE
from tb_opcompare.schema.optable import OpProfile
from tb_opcompare.schema.table import Table, text_array

CONFIDENCE = 0.95
RESAMPLES = 4000
SEED = 20261123  # fixed: the same profiles always give the same intervals and verdicts
MIN_SHARED_OPS = 10  # fewer ops in every run cannot tell a run's speed from an op's change
MIN_STEPS_FOR_MEDIAN = 3  # a median of two steps is their mean
MIN_PLACED_SHARE = 0.9  # a median of the few executions placed in steps would not be the op's
# An op run this many times in every profiled step of every run compared is tested on its
# steps' time per execution, their LOW_STEPS quantile (the second fastest of five), not on
# its median execution (``log_run_typical``).
TWO_SITES = 2
LOW_STEPS = 0.25
# A run is an outlier for the whole step beyond this many robust standard deviations from
# its side's median, and beyond this share (a slower machine for a whole run is noise).
OUTLIER_SPREADS = 3.5
OUTLIER_FLOOR = 0.25
MAX_PRIOR_FREEDOM = 60.0  # the most a prior shared by the ops may weigh, in degrees of freedom
PRIOR_MIN_SHARE = 0.01  # the ops whose variances make the prior: those a check gates by default
WHOLE_STEP = "(whole step)"
SLOWER, FASTER, WITHIN_NOISE, UNTESTED, ONLY_BASELINE, ONLY_TARGET = VERDICTS
RUNS, STEPS = "runs", "steps"  # what the intervals of a comparison rest on
_CHUNK = 256  # ops bootstrapped at a time: resamples x chunk floats, not x every op
# Ops with less of the op time on both sides get no bootstrap interval: on a million-op
# profile they would cost minutes, and a gate never looks at them.
BOOTSTRAP_MIN_SHARE = 0.001


@dataclasses.dataclass(frozen=True)
class RunSamples:
    """One run's ops (by key): time and executions over the whole profile, the number of
    profiled steps (None: unknown), and per profiled step where the reader placed
    occurrences in steps (else no rows)."""

    keys: pd.Index
    total_us: np.ndarray  # (keys,)
    executions: np.ndarray  # (keys,)
    steps: int | None
    step_time_us: np.ndarray  # (placed steps, keys)
    step_executions: np.ndarray  # (placed steps, keys)
    # each profiled step's wall time from the step markers, in order (empty: no markers)
    step_wall_us: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    # (keys,): the median self time of one execution over the whole run, where the key is
    # one row of the profile whose executions were told apart (else NaN; empty: none known)
    call_median_us: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))

    @property
    def steady_step_us(self) -> float | None:
        """The run's step wall time as every view reads it: the median of its steady steps."""
        return step_latency([self.step_wall_us]).median_us if len(self.step_wall_us) else None


@dataclasses.dataclass(frozen=True)
class Confidence:
    """``table``: one row per op key and a last row for the whole step (see
    ``compare_with_confidence``); ``basis``: ``RUNS`` or ``STEPS``; ``adjusted``: whether
    each run's speed factor was taken out of its ops; ``common_change``: the target's
    speed factors over the baseline's, as a time ratio (> 1: every op slower together),
    where they were measured."""

    table: pd.DataFrame
    basis: str
    adjusted: bool
    common_change: float | None = None
    whole_step_basis: StepBasis = OP_TIME_PER_STEP  # STEP_WALL_TIME where every run has step markers
    # positions (baseline runs first) of the runs that are outliers for the whole step,
    # left out of its test (``outlier_runs``)
    outlier_runs: tuple[int, ...] = ()


def run_samples(
    ops: Table,
    step_ops: Table,
    step_count: int,
    steps: int | None,
    group_by: str = "name",
    normalize: bool = True,
    step_wall_us: StepTimes = (),
) -> RunSamples:
    rows = counted_rows(ops)
    if group_by == "name":
        key_of_row = ops["op_name"]
    else:
        key_of_row = text_array(map(normalize_op_type, ops["op_type"].tolist())) if normalize else ops["op_type"]
    keys, codes = np.unique(key_of_row[rows], return_inverse=True)
    codes = codes.reshape(-1)
    total = np.bincount(codes, weights=ops["self_us"][rows], minlength=len(keys))
    executions = np.bincount(codes, weights=ops["occurrences"][rows], minlength=len(keys))
    code_of_row = np.full(len(ops), -1, dtype=np.int64)
    code_of_row[rows] = codes
    shape = (step_count if step_count >= 2 else 0, len(keys))
    step_time: np.ndarray = np.zeros(shape)
    step_executions: np.ndarray = np.zeros(shape)
    if shape[0] and len(step_ops):
        cells = step_ops.take(code_of_row[step_ops["row"]] >= 0)
        flat = cells["step"] * len(keys) + code_of_row[cells["row"]]
        step_time = np.bincount(flat, weights=cells["self_us"], minlength=shape[0] * shape[1]).reshape(shape)
        step_executions = np.bincount(flat, weights=cells["occurrences"], minlength=shape[0] * shape[1]).reshape(shape)
    return RunSamples(
        pd.Index(keys),
        total,
        executions,
        steps or (step_count if step_count >= 2 else None),
        step_time,
        step_executions,
        np.asarray(step_wall_us, dtype=np.float64),
        _call_medians(ops, rows, codes, len(keys)),
    )


def _call_medians(ops: Table, rows: np.ndarray, codes: np.ndarray, count: int) -> np.ndarray:
    """Each key's median self time per execution where the key is one counted row with a
    median (a key of several rows, ops of one type or a name on two sides, has none: a
    median of medians is no median of the executions)."""
    medians = np.full(count, np.nan)
    if "median_us" not in ops or not len(rows):
        return medians
    single = np.bincount(codes, minlength=count) == 1
    values = np.asarray(ops["median_us"], dtype=np.float64)[rows]
    medians[codes[single[codes]]] = values[single[codes]]
    return medians


def profile_samples(profile: OpProfile, group_by: str = "name") -> RunSamples:
    """``run_samples`` of a parsed profile (an ``OpProfile``)."""
    return run_samples(
        profile.op_table,
        profile.step_table,
        profile.step_count,
        profile.facts.steps,
        group_by,
        step_wall_us=profile.facts.step_times_us or (),
    )


def with_keys(run: RunSamples, renames: dict[str, str]) -> RunSamples:
    """The run's samples with keys renamed (``compare.implementation_keys``: one framework
    op's backend implementations, one key on both sides); keys renamed to one are added up,
    and have no median of one execution (a median of medians is none)."""
    if not renames or not any(key in renames for key in run.keys):
        return run
    keys, codes = np.unique(np.array([renames.get(key, key) for key in run.keys], dtype=object), return_inverse=True)
    codes = codes.reshape(-1)
    count = len(keys)

    def summed(values: np.ndarray) -> np.ndarray:  # over the last axis, by new key
        out = np.zeros((*values.shape[:-1], count))
        np.add.at(out, (..., codes), values)  # type: ignore[arg-type]  # numpy's stubs take no tuple index for ufunc.at
        return out

    medians = run.call_median_us
    if len(medians):
        member = np.zeros(count, dtype=np.int64)
        member[codes] = np.arange(len(codes))  # a key of one member: that member
        medians = np.where(np.bincount(codes, minlength=count) == 1, medians[member], np.nan)
    return dataclasses.replace(
        run,
        keys=pd.Index(keys),
        total_us=summed(run.total_us),
        executions=summed(run.executions),
        step_time_us=summed(run.step_time_us),
        step_executions=summed(run.step_executions),
        call_median_us=medians,
    )


def _aligned(run: RunSamples, index: pd.Index) -> tuple[np.ndarray, np.ndarray]:
    """The run's whole-profile time and executions over ``index`` (an op it lacks: 0), with
    the whole step last: all op time per step, one execution per step (NaN: steps unknown)."""
    where = run.keys.get_indexer(index)
    present = where >= 0
    time, count = np.zeros(len(index) + 1), np.zeros(len(index) + 1)
    time[:-1][present] = run.total_us[where[present]]
    count[:-1][present] = run.executions[where[present]]
    time[-1], count[-1] = (run.total_us.sum() / run.steps, 1.0) if run.steps else (np.nan, 0.0)
    return time, count


def _mean_per_execution(time: np.ndarray, executions: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(executions > 0, time / np.where(executions > 0, executions, 1.0), np.nan)


def log_run_means(runs: list[RunSamples], index: pd.Index) -> np.ndarray:
    """(runs, keys + whole step): log of each run's mean per execution (NaN where the op
    did not run)."""
    return np.vstack([_log_mean(*_aligned(run, index)) for run in runs])


def _log_mean(time: np.ndarray, count: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        logs: np.ndarray = np.log(_mean_per_execution(time, count))
    return logs


def log_run_typical(runs: list[RunSamples], index: pd.Index) -> np.ndarray:
    """(runs, keys + whole step): log of each run's typical time per execution, the sample
    the tests are made on, one of two robust statistics (else the run's mean per execution;
    NaN where the op did not run):

    - the median (or lower quartile, below) over the run's profiled steps of the op's time
      per execution in that step (its time in the step over its executions there; the whole
      step: its op time per step). Step times have heavy tails (a first step after a pause,
      a neighbour's burst on a shared machine: one step of ``convolution_backward`` at 24 ms
      among steps of 0.4 ms), and a mean carries such a step into the run's sample where a
      median does not; on this project's repeats the median halves the false alarms of two
      runs a side;
    - the median self time of one execution over the run, where the key is one row whose
      executions were told apart: a call preempted by a neighbour's job on a shared runner
      takes milliseconds among calls of microseconds, and moves a mean but not a median.

    The median execution serves, except for an op run exactly ``TWO_SITES`` times in every
    profiled step of every run compared: two layers of one kind (``convolution_backward`` of
    the demo CNN's two convolutions, ``addmm`` of its two dense layers) pool calls of two
    sizes, and the median of that pool falls between them, set by the slowest call of the
    one and the fastest of the other, while a step holds one call of each and its time per
    execution is steady. On this project's repeats of the demo CNN, its steps move
    ``convolution_backward`` 2-10% from run to run (the standard deviation of its log, speed
    factor taken out) against 7-20% for the median execution. Such an op's steps give their
    lower quartile (``LOW_STEPS``), not their median: a neighbour's job on the runner's core
    through three of five profiled steps (``tests/fixtures/repeats_noisy``) made the two
    convolutions' backward 2.8-3.0x slower in each of the three, so their median was the
    hiccup's, and a neighbour only ever adds time. Not so for an op run
    more often a step: a few big calls carry its time there (the optimizer's ops on the
    largest weight, the largest of a backward's products), such a call runs fast or slow
    for a whole run on a shared machine, and the median of steps of ``aten::div`` or
    ``aten::mm`` moves 20-70% from run to run in most of those sets of repeats against
    3-17% for their median execution, which a few big calls do not move. The choice reads
    how often the op runs, never which side a run is on, and a change that slows every call
    of an op alike moves both medians alike.

    The median per execution serves a column only where every run that has the op has one
    over ``MIN_STEPS_FOR_MEDIAN`` executions or more; the median of steps only where every
    run that has the op ran it in ``MIN_STEPS_FOR_MEDIAN`` steps or more, with
    ``MIN_PLACED_SHARE`` of its executions in steps (for the whole step: all op time in
    steps); where neither can, every run gives its mean. One estimator for all the runs
    compared: a mean beside medians would read the mean's tail as a change."""
    return _run_logs(runs, index)[1]


def _run_logs(runs: list[RunSamples], index: pd.Index) -> tuple[np.ndarray, np.ndarray]:
    """(``log_run_means``, ``log_run_typical``) of the runs, each run aligned to ``index`` once."""
    aligned = [_aligned(run, index) for run in runs]
    means = np.vstack([_log_mean(*whole_run) for whole_run in aligned])
    ran = np.isfinite(means)
    calls, call_usable = _call_median_logs(runs, index, aligned)
    steps, low_steps, step_usable = _step_median_logs(runs, index, aligned)
    # one estimator a column, for every run compared (``log_run_typical``)
    can_calls = (call_usable | ~ran).all(axis=0) & call_usable.any(axis=0)
    can_steps = (step_usable | ~ran).all(axis=0) & step_usable.any(axis=0)
    two = can_steps & _two_sites(runs, index, ran)
    use_steps = can_steps & ~two & ~can_calls
    use_calls = ~two & ~use_steps & can_calls
    typical = np.where(two, low_steps, np.where(use_steps, steps, np.where(use_calls, calls, means)))
    if on_wall_time(runs):
        means[:, -1] = typical[:, -1] = np.log(np.array([run.steady_step_us for run in runs], dtype=np.float64))
    return means, typical


def _two_sites(runs: list[RunSamples], index: pd.Index, ran: np.ndarray) -> np.ndarray:
    """(keys + whole step,): whether every run that ran the op ran it exactly ``TWO_SITES``
    times in each of its profiled steps (the whole step: no)."""
    two = np.zeros(len(index) + 1, dtype=bool)
    two[:-1] = ran[:, :-1].any(axis=0)
    for position, run in enumerate(runs):
        where = run.keys.get_indexer(index)
        present = where >= 0
        counts = np.zeros((len(run.step_executions), len(index)))
        counts[:, present] = run.step_executions[:, where[present]]
        regular = (counts == TWO_SITES).all(axis=0) if len(counts) else np.zeros(len(index), dtype=bool)
        two[:-1] &= regular | ~ran[position, :-1]
    return two


def _call_median_logs(runs: list[RunSamples], index: pd.Index, aligned: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """(runs, keys + whole step): the log of each run's median self time per execution, and
    where it can serve: ``MIN_STEPS_FOR_MEDIAN`` executions or more (the whole step never)."""
    logs = np.full((len(runs), len(index) + 1), np.nan)
    for position, run in enumerate(runs):
        if len(run.call_median_us) != len(run.keys):
            continue
        where = run.keys.get_indexer(index)
        present = where >= 0
        with np.errstate(divide="ignore", invalid="ignore"):
            logs[position, :-1][present] = np.log(run.call_median_us[where[present]])
    executions = np.vstack([count for _, count in aligned])
    return logs, np.isfinite(logs) & (executions >= MIN_STEPS_FOR_MEDIAN)


def _step_median_logs(
    runs: list[RunSamples], index: pd.Index, aligned: list[Any]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(runs, keys + whole step): the log of the median over each run's profiled steps of
    the op's mean per execution in that step, the log of their lower quartile
    (``LOW_STEPS``), and where they can serve (``log_run_typical``)."""
    medians = np.full((len(runs), len(index) + 1), np.nan)
    low = medians.copy()
    usable = np.zeros(medians.shape, dtype=bool)
    for position, run in enumerate(runs):
        if len(run.step_time_us) < MIN_STEPS_FOR_MEDIAN:
            continue
        time, count = _step_matrix(run, index)
        ran = count > 0
        with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a column with no step is NaN, replaced
            per_execution = np.where(ran, _mean_per_execution(time, count), np.nan)
            medians[position] = np.log(np.nanmedian(per_execution, axis=0))
            low[position] = np.log(_nan_quantile(per_execution, LOW_STEPS))
        executions = aligned[position][1]
        usable[position] = (
            (ran.sum(axis=0) >= MIN_STEPS_FOR_MEDIAN)
            & np.isfinite(medians[position])
            & (count.sum(axis=0) >= MIN_PLACED_SHARE * executions)
        )
        usable[position, -1] &= run.step_time_us.sum() >= (1 - 1e-9) * run.total_us.sum()
    return medians, low, usable


def _nan_quantile(values: np.ndarray, quantile: float) -> np.ndarray:
    """Each column's ``quantile`` over its finite entries, interpolated linearly as
    ``np.nanquantile`` does (NaN for a column with none), by one sort: ``np.nanquantile``
    goes column by column where NaNs are, minutes on a profile of a million ops."""
    ordered = np.sort(values, axis=0)  # NaN last
    count = np.isfinite(ordered).sum(axis=0)
    place = quantile * np.maximum(count - 1, 0)
    below = np.floor(place).astype(np.int64)
    above = np.minimum(below + 1, np.maximum(count - 1, 0))
    low = np.take_along_axis(ordered, below[None, :], axis=0)[0]
    high = np.take_along_axis(ordered, above[None, :], axis=0)[0]
    return np.where(count > 0, low + (place - below) * (high - low), np.nan)


def _wall_median(runs: list[RunSamples]) -> float:
    """The median of the runs' steady steps pooled, where every run has step markers
    (``on_wall_time``); else NaN."""
    median = step_latency([run.step_wall_us for run in runs]).median_us
    return np.nan if median is None else median


def on_wall_time(runs: list[RunSamples]) -> bool:
    """Whether the whole step of these runs is their step wall time (every run has step
    markers, so each gives its steady median, the headline's rule), else all op time per
    profiled step stands in."""
    return all(run.steady_step_us for run in runs)


def _nan_median(values: np.ndarray) -> np.ndarray:
    with warnings.catch_warnings():  # a column with no step is NaN, which the caller replaces
        warnings.simplefilter("ignore", RuntimeWarning)
        medians: np.ndarray = np.nanmedian(values, axis=0)
    return medians


def column_mean(logs: np.ndarray) -> np.ndarray:
    """Each column's mean over its finite entries; NaN for a column with none."""
    finite = np.isfinite(logs)
    count = finite.sum(axis=0)
    return np.where(count > 0, np.where(finite, logs, 0.0).sum(axis=0) / np.maximum(count, 1), np.nan)


def sample_variance(logs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each column's sample variance over its finite entries and its degrees of freedom."""
    finite = np.isfinite(logs)
    count = finite.sum(axis=0)
    mean = column_mean(logs)
    squares = (np.where(finite, logs - mean, 0.0) ** 2).sum(axis=0)
    freedom = np.maximum(count - 1, 0).astype(np.float64)
    return np.where(freedom > 0, squares / np.maximum(freedom, 1), 0.0), freedom


def mean_with_interval(logs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per column of log samples: (mean, half-width of its 95% Student's t interval, count);
    the half-width is NaN with fewer than two samples."""
    count = np.isfinite(logs).sum(axis=0)
    mean = column_mean(logs)
    variance, freedom = sample_variance(logs)
    margin = student_t_quantile(1 - (1 - CONFIDENCE) / 2, np.where(freedom > 0, freedom, np.nan)) * np.sqrt(
        variance / np.maximum(count, 1)
    )
    return mean, margin, count


def pooled_means(
    values: np.ndarray, groups: np.ndarray, positions: np.ndarray, count: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Repeats of one configuration pooled, as the trend and the sweep pool them: for each
    of ``count`` groups (``groups`` gives each value's, ``positions`` its place in it), the
    geometric mean of its positive values and the 95% interval of that mean (Student's t
    on the logs; NaN bounds for a group of one)."""
    values = np.asarray(values, dtype=np.float64)
    logs = np.full((int(positions.max()) + 1 if len(positions) else 1, count), np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        logs[positions, groups] = np.where(values > 0, np.log(values), np.nan)
    mean, margin, _ = mean_with_interval(logs)
    return np.exp(mean), np.exp(mean - margin), np.exp(mean + margin)


def pooled_step_time(step_times_per_run: list[StepTimes]) -> tuple[float, float, float] | None:
    """A point of one or more runs as every view shows its whole step: the median of the
    runs' steady steps pooled (the headline's rule, ``step_time``), and around it the
    runs' 95% interval (``pooled_means`` of each run's own steady median, relative to
    their geometric mean; NaN bounds for one run). None where a run has no markers."""
    if not step_times_per_run or not all(len(times) for times in step_times_per_run):
        return None
    center = step_latency(step_times_per_run).median_us
    if center is None:  # not so: every run has markers
        return None
    own = np.array([step_latency([times]).median_us for times in step_times_per_run], dtype=np.float64)
    mean, low, high = pooled_means(own, np.zeros(len(own), dtype=np.int64), np.arange(len(own)), 1)
    return center, center * float(low[0] / mean[0]), center * float(high[0] / mean[0])


def benjamini_hochberg(p_values: np.ndarray, rate: float = FALSE_DISCOVERY_RATE) -> np.ndarray:
    """Which hypotheses are rejected with the false discovery rate held at ``rate``."""
    p_values = np.asarray(p_values, dtype=np.float64)
    count = len(p_values)
    rejected = np.zeros(count, dtype=bool)
    if not count:
        return rejected
    order = np.argsort(p_values, kind="stable")
    passing = np.flatnonzero(at_most(p_values[order], rate * np.arange(1, count + 1) / count))
    if len(passing):
        rejected[order[: passing[-1] + 1]] = True
    return rejected


@dataclasses.dataclass(frozen=True)
class RunNoise:
    """Run-to-run noise learned from repeated runs: per op key (and the whole step), the
    variance of the log of the op's typical time per execution (``log_run_typical``, with
    each run's speed factor taken out) between runs of one configuration,
    pooled over configurations with its degrees of freedom (runs less one, summed);
    ``typical`` (the median over keys) stands for keys no repeat measured."""

    variance: pd.Series
    freedom: pd.Series
    runs: int  # repeated runs it was learned from

    @property
    def typical(self) -> float:
        """Typical standard deviation per op (the median over ops)."""
        ops = self.variance.drop(WHOLE_STEP, errors="ignore")
        return float(np.sqrt((ops if len(ops) else self.variance).median()))

    def of(self, keys: list[Any]) -> tuple[np.ndarray, np.ndarray]:
        """(variance, degrees of freedom) for each key."""
        ops = self.freedom.drop(WHOLE_STEP, errors="ignore")
        typical_freedom = float((ops if len(ops) else self.freedom).median())
        return (
            self.variance.reindex(keys).fillna(self.typical**2).to_numpy(dtype=np.float64),
            self.freedom.reindex(keys).fillna(typical_freedom).to_numpy(dtype=np.float64),
        )


def run_noise(groups: list[list[RunSamples]]) -> RunNoise | None:
    """The noise of ``groups`` (each: the runs of one configuration); None without a
    configuration of two runs or more."""
    parts = []
    for runs in groups:
        if len(runs) < 2:
            continue
        keys = pd.Index(sorted(set().union(*(set(run.keys) for run in runs))), dtype=object)
        logs = _adjusted_for_run_speed(log_run_typical(runs, keys))[0]
        variance, freedom = sample_variance(logs)
        parts.append(
            pd.DataFrame(
                {"key": [*keys, WHOLE_STEP], "weighted": variance * freedom, "freedom": freedom, "runs": len(runs)}
            )
        )
    if not parts:
        return None
    pooled = pd.concat(parts, ignore_index=True)
    pooled = pooled[pooled["freedom"] > 0].groupby("key", sort=False)[["weighted", "freedom"]].sum()
    if not len(pooled):
        return None
    return RunNoise(
        pooled["weighted"] / pooled["freedom"], pooled["freedom"], sum(len(runs) for runs in groups if len(runs) >= 2)
    )


def compare_with_confidence(
    baseline: list[RunSamples],
    target: list[RunSamples],
    keys: list[str] | None = None,
    threshold: float = 0.0,
    baseline_noise: RunNoise | None = None,
    target_noise: RunNoise | None = None,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> Confidence:
    """One row per op key (those of ``keys``, else every key either side has) and a last
    row for the whole step: each side's mean, the speedup (and adjusted speedup), its 95%
    interval and its p-value against a change of at most ``threshold``, each side's share
    of op time; no verdicts yet (``verdicts``). A side's noise (``run_noise``, from
    repeats on its device) joins its own runs' variance."""
    if not baseline or not target:
        raise ValueError("each side needs at least one run")
    if keys is None:
        keys = sorted(set().union(*(set(run.keys) for run in baseline + target)))
    index = pd.Index(list(keys), dtype=object)
    shares = {}
    for name, runs in (("baseline", baseline), ("target", target)):
        time = np.sum([_aligned(run, index)[0] for run in runs], axis=0)
        all_ops = sum(run.total_us.sum() for run in runs)
        shares[f"{name}_share"] = np.append(time[:-1] / max(all_ops, 1e-300), 1.0)
    sides = [(baseline, baseline_noise), (target, target_noise)]
    wall = on_wall_time(baseline + target)
    whole_step_basis: StepBasis = STEP_WALL_TIME if wall else OP_TIME_PER_STEP
    if len(baseline) == len(target) == 1 and baseline_noise is None and target_noise is None:
        worth = np.maximum(shares["baseline_share"], shares["target_share"]) >= BOOTSTRAP_MIN_SHARE
        test = _Bootstrap(threshold, resamples, seed)
        estimates = _step_level(baseline[0], target[0], index, worth, test)
        if wall:
            _bootstrap_wall_step(estimates, baseline[0].step_wall_us, target[0].step_wall_us, test)
        return Confidence(
            pd.DataFrame({"key": [*index, WHOLE_STEP], **estimates, **shares}),
            STEPS,
            False,
            whole_step_basis=whole_step_basis,
        )
    worth = np.maximum(shares["baseline_share"], shares["target_share"])[:-1] >= PRIOR_MIN_SHARE
    estimates, speed, outliers = _run_level(sides, index, threshold, worth)
    if wall:  # as measured, the whole step is the headline's: each side's steady steps pooled, their median
        pooled = [_wall_median(runs) for runs in (baseline, target)]
        estimates["baseline_mean_us"][-1], estimates["target_mean_us"][-1] = pooled
        estimates["speedup"][-1] = pooled[0] / pooled[1]
    common = (
        float(np.exp(np.median(speed[len(baseline) :]) - np.median(speed[: len(baseline)])))
        if speed is not None
        else None
    )
    return Confidence(
        pd.DataFrame({"key": [*index, WHOLE_STEP], **estimates, **shares}),
        RUNS,
        speed is not None,
        common,
        whole_step_basis,
        tuple(int(position) for position in np.flatnonzero(outliers)),
    )


class _Bootstrap(typing.NamedTuple):
    """How a one-run-a-side comparison is tested: against ``threshold``, with ``resamples``
    draws from a generator seeded with ``seed`` (one seed, the same intervals each time)."""

    threshold: float
    resamples: int
    seed: int


def _bootstrap_wall_step(
    estimates: dict[str, np.ndarray], baseline_steps: np.ndarray, target_steps: np.ndarray, test: _Bootstrap
) -> None:
    """The whole step's row of a one-run-a-side comparison on step wall times: the ratio
    of the two runs' steady medians, with a bootstrap over each run's steady steps."""
    steady = [np.asarray(steady_steps(steps), dtype=np.float64) for steps in (baseline_steps, target_steps)]
    medians = [float(np.median(steps)) for steps in steady]
    speedup = medians[0] / medians[1]
    estimates["baseline_mean_us"][-1], estimates["target_mean_us"][-1] = medians
    estimates["speedup"][-1] = estimates["adjusted_speedup"][-1] = speedup
    estimates["slower"][-1] = speedup < 1
    low = high = p_value = np.nan
    threshold, resamples, seed = test
    if all(len(steps) >= 2 for steps in steady):
        rng = np.random.default_rng(seed)
        replicates = np.median(rng.choice(steady[0], (resamples, len(steady[0]))), axis=1) / np.median(
            rng.choice(steady[1], (resamples, len(steady[1]))), axis=1
        )
        tail = (1 - CONFIDENCE) / 2
        low, high = (float(value) for value in np.quantile(replicates, [tail, 1 - tail]))
        slower_p = (int((replicates >= 1 / (1 + threshold)).sum()) + 1) / (resamples + 1)
        faster_p = (int((replicates <= 1 + threshold).sum()) + 1) / (resamples + 1)
        p_value = min(slower_p, faster_p)
    estimates["speedup_low"][-1], estimates["speedup_high"][-1], estimates["p_value"][-1] = low, high, p_value


def _adjusted_for_run_speed(logs: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Log run samples (runs x ops + whole step) with each run's speed factor taken out of
    its ops (see the module's docstring), and the factors (log time, per run); None where
    not taken out: fewer than ``MIN_SHARED_OPS`` ops in every run, or one run. Each op is
    centred on its median over the runs, not its mean, so that one run far off (a
    neighbour's job on the runner for part of it) moves no other run's factor."""
    ops = logs[:, :-1]
    everywhere = np.isfinite(ops).all(axis=0)
    if len(logs) < 2 or everywhere.sum() < MIN_SHARED_OPS:
        return logs, None
    centred = ops[:, everywhere] - np.median(ops[:, everywhere], axis=0)
    speed = np.median(centred, axis=1)
    return np.column_stack([ops - speed[:, None], logs[:, -1]]), speed


def outlier_runs(whole_step: np.ndarray, baseline_runs: int) -> np.ndarray:
    """Which runs are outliers for the whole step (log values, baseline runs first): on a
    side of three runs or more, a run whose step lies further from its side's median than
    ``OUTLIER_SPREADS`` robust standard deviations (1.4826 x the median absolute deviation
    from their side's median, over the runs of both sides) and than ``OUTLIER_FLOOR``. At
    most one run a side: a side whose runs scatter more widely is noisy, not hit once."""
    flags = np.zeros(len(whole_step), dtype=bool)
    sides = [np.arange(baseline_runs), np.arange(baseline_runs, len(whole_step))]
    sides = [side for side in sides if len(side) >= 3 and np.isfinite(whole_step[side]).all()]
    if not sides:
        return flags
    deviations = [whole_step[side] - np.median(whole_step[side]) for side in sides]
    spread = 1.4826 * float(np.median(np.abs(np.concatenate(deviations))))
    limit = max(OUTLIER_SPREADS * spread, math.log1p(OUTLIER_FLOOR))
    for side, deviation in zip(sides, deviations):
        beyond = np.abs(deviation) > limit
        if beyond.sum() == 1:
            flags[side[beyond]] = True
    return flags


class _Prior(typing.NamedTuple):
    """The run-to-run variance that a side's ops share (empirical Bayes, Smyth 2004):
    each op's own variance is drawn toward ``variance`` with the weight of ``freedom``
    degrees of freedom."""

    variance: float
    freedom: float


def shared_prior(variance: np.ndarray, freedom: np.ndarray, worth: np.ndarray) -> _Prior | None:
    """The prior of a side's ops (``_Prior``) from their own sample variances (of ``worth``
    ops with degrees of freedom and a positive variance), by the moments of the log
    variances; None with fewer than ``MIN_SHARED_OPS`` such ops. Where the ops' variances
    differ no more than sampling makes them, the prior weighs ``MAX_PRIOR_FREEDOM``."""
    usable = worth & (freedom > 0) & (variance > 0) & np.isfinite(variance)
    if usable.sum() < MIN_SHARED_OPS:
        return None
    half = freedom[usable] / 2
    logs = np.log(variance[usable]) - _digamma(half) + np.log(half)
    center = float(logs.mean())
    excess = float(logs.var(ddof=1) - _trigamma(half).mean())
    prior_freedom = MAX_PRIOR_FREEDOM if excess <= _trigamma(MAX_PRIOR_FREEDOM / 2) else 2 * _inverse_trigamma(excess)
    half_prior = prior_freedom / 2
    return _Prior(math.exp(center + float(_digamma(half_prior)) - math.log(half_prior)), prior_freedom)


def _side_estimate(
    logs: np.ndarray, noise: RunNoise | None, columns: list[Any], worth: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(mean, variance, degrees of freedom, runs) of one side's adjusted log samples, per
    column: its runs' own variance, pooled with the learned ``noise`` and drawn toward the
    variance its ops share (``shared_prior``; not the whole step's)."""
    own, own_freedom = sample_variance(logs)
    learned, learned_freedom = noise.of(columns) if noise is not None else (0.0, 0.0)
    prior = shared_prior(own, own_freedom, np.append(worth, False))
    prior_variance, shared_freedom = (prior.variance, prior.freedom) if prior is not None else (0.0, 0.0)
    prior_freedom = np.where(np.arange(len(columns)) < len(columns) - 1, shared_freedom, 0.0)
    prior_freedom = np.where(own_freedom > 0, prior_freedom, 0.0)
    freedom = own_freedom + learned_freedom + prior_freedom
    with np.errstate(invalid="ignore", divide="ignore"):
        weighted = own * own_freedom + learned * learned_freedom + prior_variance * prior_freedom
        variance = np.where(freedom > 0, weighted / freedom, np.nan)
    return column_mean(logs), variance, freedom, np.isfinite(logs).sum(axis=0)


def _run_level(
    sides: list[tuple[list[RunSamples], RunNoise | None]], index: pd.Index, threshold: float, worth: np.ndarray
) -> tuple[dict[str, np.ndarray], np.ndarray | None, np.ndarray]:
    """Welch's interval and test on the runs' log typical times (see the module's
    docstring), the runs' speed factors, and which runs are outliers for the whole step
    (left out of its test where their side keeps two runs)."""
    columns = [*index, WHOLE_STEP]
    baseline_runs = len(sides[0][0])
    means, typical = _run_logs(sides[0][0] + sides[1][0], index)
    adjusted, speed = _adjusted_for_run_speed(typical)
    outliers = outlier_runs(adjusted[:, -1], baseline_runs)
    adjusted[outliers, -1] = np.nan
    halves = [adjusted[:baseline_runs], adjusted[baseline_runs:]]
    estimates = [_side_estimate(logs, noise, columns, worth) for (_, noise), logs in zip(sides, halves)]
    (base_mean, base_var, base_df, base_n), (target_mean, target_var, target_df, target_n) = estimates
    # a side with no variance of its own (one run, no repeats) takes the other side's
    base_var, base_df = np.where(base_df > 0, base_var, target_var), np.where(base_df > 0, base_df, target_df)
    target_var, target_df = np.where(target_df > 0, target_var, base_var), np.where(target_df > 0, target_df, base_df)
    difference = base_mean - target_mean  # log speedup, adjusted for run speed
    with np.errstate(invalid="ignore", divide="ignore"):
        base_error, target_error = base_var / base_n, target_var / target_n
        error_variance = base_error + target_error
        freedom = error_variance**2 / (base_error**2 / base_df + target_error**2 / target_df)
        error = np.sqrt(error_variance)
        tested = np.isfinite(difference) & np.isfinite(error) & (error > 0) & np.isfinite(freedom)
        margin = np.full(len(columns), np.nan)
        margin[tested] = student_t_quantile(1 - (1 - CONFIDENCE) / 2, freedom[tested]) * error[tested]
        shift = math.log1p(threshold)
        slower_p, faster_p = np.full(len(columns), np.nan), np.full(len(columns), np.nan)
        # one-sided: slower beyond the threshold (difference < -shift), faster beyond it
        slower_p[tested] = student_t_cdf((difference[tested] + shift) / error[tested], freedom[tested])
        faster_p[tested] = student_t_cdf(-(difference[tested] - shift) / error[tested], freedom[tested])
    raw_difference = [column_mean(means[:baseline_runs]), column_mean(means[baseline_runs:])]  # as measured
    return (
        {
            "baseline_mean_us": np.exp(raw_difference[0]),
            "target_mean_us": np.exp(raw_difference[1]),
            "speedup": np.exp(raw_difference[0] - raw_difference[1]),
            "adjusted_speedup": np.exp(difference),
            "speedup_low": np.exp(difference - margin),
            "speedup_high": np.exp(difference + margin),
            "p_value": np.minimum(slower_p, faster_p),
            "slower": difference < 0,
            "log_error": np.where(tested, error, np.nan),
            "freedom": np.where(tested, freedom, np.nan),
        },
        speed,
        outliers,
    )


def _step_level(
    baseline: RunSamples, target: RunSamples, index: pd.Index, worth: np.ndarray, test: _Bootstrap
) -> dict[str, np.ndarray]:
    """Bootstrap over the profiled steps of one run a side: too narrow where runs of one
    configuration differ, the best there is without repeats. Only the columns of
    ``worth`` are resampled; an op with no time placed in steps, or a side with fewer
    than two steps, is not tested."""
    threshold, resamples, seed = test
    base_time, base_count = _step_matrix(baseline, index)
    target_time, target_count = _step_matrix(target, index)
    resampled = np.flatnonzero(worth)
    base_mean = _mean_per_execution(*(part.sum(axis=0) for part in (base_time, base_count)))
    target_mean = _mean_per_execution(*(part.sum(axis=0) for part in (target_time, target_count)))
    speedup = base_mean / np.where(target_mean > 0, target_mean, np.nan)
    columns = len(index) + 1
    low, high, slower_p, faster_p = (np.full(columns, np.nan) for _ in range(4))
    if len(base_time) >= 2 and len(target_time) >= 2:
        rng = np.random.default_rng(seed)
        base_weights = rng.multinomial(len(base_time), np.full(len(base_time), 1 / len(base_time)), size=resamples)
        target_weights = rng.multinomial(
            len(target_time), np.full(len(target_time), 1 / len(target_time)), size=resamples
        )
        tail = (1 - CONFIDENCE) / 2
        for start in range(0, len(resampled), _CHUNK):
            part = resampled[start : start + _CHUNK]
            replicates = _mean_per_execution(
                base_weights @ base_time[:, part], base_weights @ base_count[:, part]
            ) / _mean_per_execution(target_weights @ target_time[:, part], target_weights @ target_count[:, part])
            finite = np.isfinite(replicates)
            usable = finite.sum(axis=0)
            with warnings.catch_warnings():  # an op absent from one side has no finite replicate: NaN is the answer
                warnings.simplefilter("ignore", RuntimeWarning)
                low[part] = np.nanquantile(np.where(finite, replicates, np.nan), tail, axis=0)
                high[part] = np.nanquantile(np.where(finite, replicates, np.nan), 1 - tail, axis=0)
            # one-sided p-values against the threshold, (k + 1) / (n + 1) so none is 0
            slower_p[part] = (((replicates >= 1 / (1 + threshold)) & finite).sum(axis=0) + 1) / (usable + 1)
            faster_p[part] = (((replicates <= 1 + threshold) & finite).sum(axis=0) + 1) / (usable + 1)
    tested = np.isfinite(speedup) & np.isfinite(low)
    return {
        "baseline_mean_us": base_mean,
        "target_mean_us": target_mean,
        "speedup": speedup,
        "adjusted_speedup": speedup,
        "speedup_low": np.where(tested, low, np.nan),
        "speedup_high": np.where(tested, high, np.nan),
        "p_value": np.where(tested, np.minimum(slower_p, faster_p), np.nan),
        "slower": speedup < 1,
        "log_error": np.full(columns, np.nan),
        "freedom": np.full(columns, np.nan),  # a bootstrap has neither
    }


def _step_matrix(run: RunSamples, index: pd.Index) -> tuple[np.ndarray, np.ndarray]:
    """The run's per-step time and executions over ``index`` and the whole step."""
    where = run.keys.get_indexer(index)
    present = where >= 0
    steps = len(run.step_time_us)
    time, count = np.zeros((steps, len(index) + 1)), np.zeros((steps, len(index) + 1))
    time[:, :-1][:, present] = run.step_time_us[:, where[present]]
    count[:, :-1][:, present] = run.step_executions[:, where[present]]
    time[:, -1], count[:, -1] = run.step_time_us.sum(axis=1), 1.0
    return time, count


def verdicts(table: pd.DataFrame, family: np.ndarray, alone: np.ndarray | None = None) -> np.ndarray:
    """The verdict of each row of a confidence table (``decide``)."""
    return decide(table, family, alone)[0]


def decide(table: pd.DataFrame, family: np.ndarray, alone: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(verdict, confidence level of its interval) of each row of a confidence table. An op
    one side lacks is only in the other; the rows of ``family`` are tested together with
    the false discovery rate held, each row of ``alone`` (the whole step) on its own; any
    other row, or one without a p-value, is not tested. Slower and faster are two
    one-sided families (``p_value`` is the one-sided p of the direction the estimate
    points, ``slower`` that direction). With rows alone, each family gets half of
    ``FALSE_DISCOVERY_RATE`` and the rows alone the other half between them, so where
    nothing changed the chance of flagging a slowdown stays within the rate, and the whole
    step's test does not depend on how many ops are gated beside it. A tested row's level
    is 1 - 2 x the largest p its family rejects (R x rate / m; 1 x rate / m where it rejects
    none); untested rows keep ``CONFIDENCE``."""
    p_value = table["p_value"].to_numpy(dtype=np.float64)
    has_p = np.isfinite(p_value)
    family = np.asarray(family, dtype=bool) & has_p
    alone = (np.zeros(len(table), dtype=bool) if alone is None else np.asarray(alone, dtype=bool)) & has_p & ~family
    alone_rate = FALSE_DISCOVERY_RATE / 2 if alone.any() else 0.0
    family_rate = FALSE_DISCOVERY_RATE - alone_rate
    slower = table["slower"].to_numpy(dtype=bool)
    significant = np.zeros(len(table), dtype=bool)
    cutoff = np.full(len(table), np.nan)
    alone_cutoff = alone_rate / max(int(alone.sum()), 1)
    significant[alone] = at_most(p_value[alone], alone_cutoff)
    cutoff[alone] = alone_cutoff
    members = np.flatnonzero(family)
    for direction in (True, False):  # the slower family, then the faster one
        pointing = slower[members] == direction
        # an op pointing the other way has a p-value of at least one half here: it counts in
        # the family's size but is never rejected
        rejected = benjamini_hochberg(np.where(pointing, p_value[members], 1.0), family_rate)
        significant[members[pointing]] = rejected[pointing]
        cutoff[members[pointing]] = family_rate * max(int(rejected.sum()), 1) / max(len(members), 1)
    verdict = np.where(
        ~(family | alone), UNTESTED, np.where(significant & slower, SLOWER, np.where(significant, FASTER, WITHIN_NOISE))
    )
    in_baseline = np.isfinite(table["baseline_mean_us"].to_numpy(dtype=np.float64))
    in_target = np.isfinite(table["target_mean_us"].to_numpy(dtype=np.float64))
    is_op = (table["key"] != WHOLE_STEP).to_numpy()
    verdict = np.where(is_op & in_baseline & ~in_target, ONLY_BASELINE, verdict)
    verdict = np.where(is_op & in_target & ~in_baseline, ONLY_TARGET, verdict)
    return verdict, np.where(np.isfinite(cutoff), 1 - 2 * cutoff, CONFIDENCE)


def interval_at(table: pd.DataFrame, level: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(low, high, level) of each row's adjusted speedup at its confidence ``level``: Welch's
    interval redrawn from the row's standard error and degrees of freedom; a row without
    them (a bootstrap over steps) keeps its 95% interval and level."""
    error = table["log_error"].to_numpy(dtype=np.float64)
    freedom = table["freedom"].to_numpy(dtype=np.float64)
    redrawn = np.isfinite(error) & np.isfinite(freedom) & np.isfinite(table["speedup_low"].to_numpy(dtype=np.float64))
    low, high = (table[name].to_numpy(dtype=np.float64).copy() for name in ("speedup_low", "speedup_high"))
    level = np.where(redrawn, level, CONFIDENCE)
    center = np.log(table["adjusted_speedup"].to_numpy(dtype=np.float64))
    for wanted in np.unique(level[redrawn]):  # a level per family: a few quantile solves, not one per op
        rows = redrawn & (level == wanted)
        margin = student_t_quantile(1 - (1 - wanted) / 2, freedom[rows]) * error[rows]
        low[rows], high[rows] = np.exp(center[rows] - margin), np.exp(center[rows] + margin)
    return low, high, level


def student_t_cdf(t: np.ndarray, freedom: np.ndarray) -> np.ndarray:
    """P(T <= t) for Student's t with ``freedom`` degrees of freedom (NaN where either is
    NaN), through the regularised incomplete beta function."""
    t = np.asarray(t, dtype=np.float64)
    freedom = np.broadcast_to(np.asarray(freedom, dtype=np.float64), t.shape)
    valid = np.isfinite(freedom) & (freedom > 0) & ~np.isnan(t)
    result = np.full(t.shape, np.nan)
    x = np.where(valid, freedom / (freedom + np.where(np.isfinite(t), t * t, np.inf)), 0.5)
    tail = 0.5 * _incomplete_beta(np.where(valid, freedom / 2, 1.0), 0.5, x)  # P(|T| > |t|) / 2
    result[valid] = np.where(t[valid] > 0, 1 - tail[valid], tail[valid])
    return result


def student_t_quantile(probability: float, freedom: np.ndarray) -> np.ndarray:
    """The t with P(T <= t) = ``probability`` (0.5 < probability < 1), by bisection on the
    CDF. Degrees of freedom are rounded to 0.01 and each distinct value solved once: a
    million ops cost a few hundred solutions, and the quantile changes by far less than
    its own precision between neighbours."""
    if not 0.5 < probability < 1:
        raise ValueError(f"probability must lie between 0.5 and 1, not {probability}")
    freedom = np.asarray(freedom, dtype=np.float64)
    valid = np.isfinite(freedom) & (freedom > 0)
    result = np.full(freedom.shape, np.nan)
    if not valid.any():
        return result
    distinct, back = np.unique(np.round(freedom[valid], 2).clip(min=0.01), return_inverse=True)
    low = np.zeros(distinct.shape)
    high = np.full(distinct.shape, 1e7)  # a cap: only fractions of a degree of freedom reach it
    for _ in range(90):
        middle = (low + high) / 2
        below = student_t_cdf(middle, distinct) < probability
        low = np.where(below, middle, low)
        high = np.where(below, high, middle)
    result[valid] = ((low + high) / 2)[back.reshape(-1)]
    return result


def _incomplete_beta(a: np.ndarray, b_value: float, x: np.ndarray) -> np.ndarray:
    """The regularised incomplete beta function I_x(a, b) (b: ``b_value``), by its continued fraction
    (modified Lentz), using the symmetry I_x(a, b) = 1 - I_{1-x}(b, a) where it converges
    faster."""
    a, x = np.broadcast_arrays(np.asarray(a, dtype=np.float64), np.asarray(x, dtype=np.float64))
    b = np.full(a.shape, float(b_value))
    swap = x > (a + 1) / (a + b + 2)
    a, b, x = np.where(swap, b, a), np.where(swap, a, b), np.where(swap, 1 - x, x)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_front = _log_gamma(a + b) - _log_gamma(a) - _log_gamma(b) + a * np.log(x) + b * np.log1p(-x)
        front = np.where(x > 0, np.exp(log_front) / a, 0.0)
    tiny = 1e-300
    c = np.ones(a.shape)
    d = 1 - (a + b) * x / (a + 1)
    d = 1 / np.where(np.abs(d) < tiny, tiny, d)
    fraction = d.copy()
    for m in range(1, 300):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1 + numerator * d
            d = 1 / np.where(np.abs(d) < tiny, tiny, d)
            c = 1 + numerator / c
            c = np.where(np.abs(c) < tiny, tiny, c)
            fraction *= c * d
        if np.all(np.abs(c * d - 1) < 1e-14):
            break
    value = front * fraction
    return np.where(swap, 1 - value, value)


_log_gamma = np.vectorize(math.lgamma, otypes=[np.float64])


def _digamma(x: float | np.ndarray) -> np.ndarray:
    """The digamma function for x > 0: the recurrence up to x >= 6, then its asymptotic series."""
    x = np.asarray(x, dtype=np.float64).copy()
    result = np.zeros(x.shape)
    while (small := x < 6).any():
        result -= np.where(small, 1 / x, 0.0)
        x = np.where(small, x + 1, x)
    inverse = 1 / (x * x)
    series = inverse * (1 / 12 - inverse * (1 / 120 - inverse * (1 / 252 - inverse / 240)))
    values: np.ndarray = result + np.log(x) - 0.5 / x - series
    return values


def _trigamma(x: float | np.ndarray) -> np.ndarray:
    """The trigamma function for x > 0: the recurrence up to x >= 6, then its asymptotic series."""
    x = np.asarray(x, dtype=np.float64).copy()
    result = np.zeros(x.shape)
    while (small := x < 6).any():
        result += np.where(small, 1 / (x * x), 0.0)
        x = np.where(small, x + 1, x)
    inverse = 1 / (x * x)
    series = inverse / x * (1 / 6 - inverse * (1 / 30 - inverse * (1 / 42 - inverse / 30)))
    values: np.ndarray = result + 1 / x + 0.5 * inverse + series
    return values


def _inverse_trigamma(value: float) -> float:
    """The x > 0 with trigamma(x) = ``value``, by bisection on log x (trigamma falls)."""
    low, high = -20.0, 20.0
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (low, middle) if float(_trigamma(math.exp(middle))) < value else (middle, high)
    return math.exp((low + high) / 2)


def detectable_slowdown(table: pd.DataFrame, level: np.ndarray, threshold: float) -> np.ndarray:
    """Per row of a confidence table: the smallest slowdown (0.3: 30% slower) that its test,
    one-sided at the row's confidence ``level`` (``decide``), flags in ``DETECTION_POWER``
    of checks, given the row's standard error and degrees of freedom: the threshold, then
    the test's quantile and the power's, in standard errors. NaN for a row without them
    (a bootstrap over steps)."""
    error = table["log_error"].to_numpy(dtype=np.float64)
    freedom = table["freedom"].to_numpy(dtype=np.float64)
    level = np.asarray(level, dtype=np.float64)
    result = np.full(len(table), np.nan)
    known = np.isfinite(error) & np.isfinite(freedom) & np.isfinite(level)
    for wanted in np.unique(level[known]):
        rows = known & (level == wanted)
        reach = student_t_quantile(1 - (1 - wanted) / 2, freedom[rows])
        reach = reach + student_t_quantile(DETECTION_POWER, freedom[rows])
        result[rows] = (1 + threshold) * np.exp(reach * error[rows]) - 1
    return result
