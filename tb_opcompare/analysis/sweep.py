"""Batch-size sweep maths: how each op and the whole step scale with batch size, one line
per value of a run dimension (a *series*: the device by default, or the precision or
the compiler, the other dimensions held). No I/O: it takes already-read runs and returns
DataFrames.

``build_sweep(runs)`` -> ``Sweep`` with these tables:

=============  ========================================================================
series         op, series, batch_size, mean_us, per_sample_us (= mean_us / batch size),
               total_us, share, run, repeats, low_us, high_us. One row per op, series
               and batch size. Several runs at one series and batch size (repeats) are
               pooled as the check and the trend pool them: mean_us is the geometric
               mean of the runs' means, low_us/high_us its 95% interval (Student's t on
               the logs; null for one run), total_us and share the runs' average,
               ``repeats`` how many runs had the op, ``run`` their names.
steps          series, batch_size, step_us, samples_per_s, basis, run, repeats,
               step_low_us, step_high_us. ``basis`` says where step_us came from:
               ``step markers`` (the median steady step's wall time over the point's
               runs pooled: the headline's rule, ``analysis.step_time``; the interval
               is the repeats' as above, around it) or ``op time per step`` (op time /
               steps, where no marker gave durations; repeats pooled as above).
fits           op, series, fixed_us, per_sample_us, r2, points, poor_fit, share: least
               squares of mean_us = fixed_us + per_sample_us * batch_size, per op and
               series with at least three batch sizes where it took time (``MIN_FIT_
               POINTS``: a line through two points fits them exactly, so its R² of 1
               says nothing; such an op's points are shown unfitted). ``poor_fit`` when
               R² < 0.9 and the line misses its points by more than 5% of their mean
               (RMS): an op whose time does not change with batch size (a fixed cost)
               has an R² of noise but a good fit.
               ``share``: the op's mean share of its runs' op time (the whole step:
               1), to tell the ops that matter. breakeven_batch_size, target_faster: the
               op's break-even (below), on each of its rows, so a table of fits needs
               no join.
breakeven      op, batch_size, target_faster: for ops fitted on the baseline series
               (CPU, fp32, eager) and on the target (the first other), where the lines
               cross: the target is faster ``above`` (the usual case for an accelerator:
               a higher fixed cost, a lower cost per sample) or ``below`` that batch
               size, or ``always`` / ``never`` when they do not cross at a batch size
               >= 1 (batch_size is then null).
speedups       op, batch_size, speedup (baseline mean / target mean) at batch sizes
               both series ran.
=============  ========================================================================

The whole step appears in fits, breakeven and speedups as the op ``STEP``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pandas as pd

from tb_opcompare.analysis.compare import op_time_us, op_totals
from tb_opcompare.analysis.confidence import pooled_means, pooled_step_time
from tb_opcompare.analysis.numerics import above, below, line_fit
from tb_opcompare.analysis.step_time import step_latency
from tb_opcompare.schema.table import Table
from tb_opcompare.text import format_breakeven

STEP = "(whole step)"
MIN_FIT_POINTS = 3  # batch sizes at which an op took time, for a line that can be judged
POOR_FIT_R2 = 0.9
POOR_FIT_MISS = 0.05  # a poor fit also misses its points by more than 5% of their mean (RMS)
SERIES_COLUMNS = [
    "op",
    "series",
    "batch_size",
    "mean_us",
    "per_sample_us",
    "total_us",
    "share",
    "run",
    "repeats",
    "low_us",
    "high_us",
]
STEPS_COLUMNS = [
    "series",
    "batch_size",
    "step_us",
    "samples_per_s",
    "basis",
    "run",
    "repeats",
    "step_low_us",
    "step_high_us",
]
LINE_COLUMNS = ["op", "series", "fixed_us", "per_sample_us", "r2", "points", "poor_fit", "share"]
FIT_COLUMNS = [*LINE_COLUMNS, "breakeven_batch_size", "target_faster"]
BREAKEVEN_COLUMNS = ["op", "batch_size", "target_faster"]
SPEEDUP_COLUMNS = ["op", "batch_size", "speedup"]


@dataclasses.dataclass
class SweepRun:
    """One run of the model, as the sweep needs it."""

    run: str
    series: str  # its value of the dimension the lines are drawn by (its device, precision or compiler)
    batch_size: int | None
    ops: Table  # optable.OP_COLUMNS
    steps: int | None = None
    step_times_us: list[float] = dataclasses.field(default_factory=list)  # each step's wall time, in order


@dataclasses.dataclass
class Sweep:
    batch_sizes: dict[str, list[int]]  # series -> batch sizes
    baseline: str  # the series speedups and break-evens are against (whether or not runs are there)
    target: str | None  # the first other series, where there is one
    series: pd.DataFrame
    steps: pd.DataFrame
    fits: pd.DataFrame
    breakeven: pd.DataFrame
    speedups: pd.DataFrame
    top_ops: list[str]
    warnings: list[str]


def build_sweep(
    runs: list[SweepRun],
    top: int = 10,
    ops: list[str] | None = None,
    group_by: str = "name",
    normalize: bool = True,
    baseline: str = "CPU",
    series_by: str = "device",
) -> Sweep:
    """``baseline``: the series the others are compared with (speedups, break-evens);
    ``series_by`` names the dimension the series are values of, for the warnings."""
    warnings: list[str] = []
    points = _runs_per_point(runs, warnings)
    chosen = [group[0] for group in points]  # one run per point where one stands for all
    batch_sizes = _batch_sizes(chosen, series_by, warnings)
    target = next((series for series in batch_sizes if series != baseline), None)
    if group_by == "name":
        _warn_if_names_differ(chosen, warnings)
    every_op = _every_op(points, group_by, normalize)
    top_ops = _top_ops(every_op, top, ops, warnings)
    series = every_op[every_op["op"].isin(top_ops)].reset_index(drop=True)[SERIES_COLUMNS]

    steps = _step_table([run for group in points for run in group], warnings)
    # the whole step is fitted and compared as one more op, of share 1
    step_points = steps.rename(columns={"step_us": "mean_us"}).assign(op=STEP, share=1.0)
    lines = fit_lines(pd.concat([every_op, step_points], ignore_index=True))
    # without runs of the baseline series there is nothing to break even with or speed up from
    has_baseline = baseline in batch_sizes
    breakeven = breakeven_batch_sizes(lines, baseline, target) if has_baseline else empty_breakeven()
    speedups = (
        speedup_table(pd.concat([series, step_points], ignore_index=True), baseline, target)
        if has_baseline
        else pd.DataFrame(columns=SPEEDUP_COLUMNS)
    )
    breakeven = measured_breakeven(breakeven, speedups, target, warnings)
    crossings = breakeven.rename(columns={"batch_size": "breakeven_batch_size"})
    fits = lines.merge(crossings, on="op", how="left")[FIT_COLUMNS]
    return Sweep(batch_sizes, baseline, target, series, steps, fits, breakeven, speedups, top_ops, warnings)


def _batch_sizes(chosen: list[SweepRun], series_by: str, warnings: list[str]) -> dict[str, list[int]]:
    """Each series' batch sizes, series in name order; warns where a series has too few
    for a fit, or no series has two (no sweep to draw)."""
    batch_sizes: dict[str, list[int]] = {}
    for run in chosen:
        if run.batch_size is not None:  # a run without one is never chosen for a sweep
            batch_sizes.setdefault(run.series, []).append(run.batch_size)
    batch_sizes = {series: sorted(sizes) for series, sizes in sorted(batch_sizes.items())}
    short = [series for series, sizes in batch_sizes.items() if 2 <= len(sizes) < MIN_FIT_POINTS]
    if short:
        warnings.append(
            f"no line is fitted for {', '.join(short)}: a fit needs {MIN_FIT_POINTS} batch sizes (a line "
            "through two points always fits them), so its points are shown unfitted and break-evens "
            "with it are not computed; record a third batch size"
        )
    if not any(len(sizes) >= 2 for sizes in batch_sizes.values()):
        warnings.append(
            f"a sweep needs at least two batch sizes at one {series_by.replace('_', ' ')}; found "
            + (", ".join(f"{d}: {s}" for d, s in batch_sizes.items()) or "no runs with a batch size")
        )
    return batch_sizes


def _every_op(points: list[list[SweepRun]], group_by: str, normalize: bool) -> pd.DataFrame:
    """Every op at every point (``SERIES_COLUMNS``), its repeats pooled, sorted by op,
    series and batch size: one table per run, made column-wise, then pooled at once."""
    frames = []
    for group in points:
        for run in group:
            totals = op_totals(run.ops, group_by, normalize)
            frames.append(
                pd.DataFrame(
                    {
                        "op": totals["key"],
                        "series": run.series,
                        "batch_size": run.batch_size,
                        "mean_us": totals["mean_us"],
                        "total_us": totals["total_us"],
                        "share": np.asarray(totals["share"], dtype="float64"),
                        "run": run.run,
                    }
                )
            )
    every_op = _pooled(pd.concat(frames, ignore_index=True)) if frames else pd.DataFrame(columns=SERIES_COLUMNS)
    return every_op.sort_values(["op", "series", "batch_size"], kind="stable", ignore_index=True)


def _top_ops(every_op: pd.DataFrame, top: int, ops: list[str] | None, warnings: list[str]) -> list[str]:
    """The ops the lines are drawn for: ``ops`` where given (warning of those no run has),
    else the ``top`` by their summed share of the points."""
    if ops:
        present = set(every_op["op"])
        missing = [op for op in ops if op not in present]
        if missing:
            warnings.append(f"not in any run of this model: {', '.join(missing)}")
        return [op for op in ops if op in present]
    # Each point (series and batch size) weighs the same, so a long profile does not drown the others.
    ranking = every_op.groupby("op")["share"].sum().sort_values(ascending=False, kind="stable")
    return list(ranking.index[:top])


def _runs_per_point(runs: list[SweepRun], warnings: list[str]) -> list[list[SweepRun]]:
    """The runs at each series and batch size (repeats of one configuration share a point)."""
    points: dict[tuple[str, int], list[SweepRun]] = {}
    for run in sorted(runs, key=lambda r: r.run):
        if not run.batch_size:
            warnings.append(f"{run.run}: left out, its batch size is unknown (name it …_bs32, or write a sidecar)")
            continue
        points.setdefault((run.series, run.batch_size), []).append(run)
    return list(points.values())


def _pooled(every_run: pd.DataFrame) -> pd.DataFrame:
    """One row per op, series and batch size from one row per op and run: repeats pooled
    as everywhere (``confidence.pooled_means``: geometric mean, 95% interval)."""
    grouped = every_run.groupby(["op", "series", "batch_size"], sort=False, dropna=False)
    pooled = grouped.agg(
        total_us=("total_us", "mean"), share=("share", "mean"), run=("run", ", ".join), repeats=("run", "size")
    ).reset_index()
    pooled["mean_us"], pooled["low_us"], pooled["high_us"] = pooled_means(
        every_run["mean_us"].to_numpy(), grouped.ngroup().to_numpy(), grouped.cumcount().to_numpy(), len(pooled)
    )
    pooled["per_sample_us"] = pooled["mean_us"] / pooled["batch_size"]
    return pooled[SERIES_COLUMNS]


def _warn_if_names_differ(runs: list[SweepRun], warnings: list[str]) -> None:
    """Keras numbers layers per process (sequential_1/conv2d_3 in the second model built),
    so runs recorded one after another in one script share few op names. Runs of one
    series only: a compiler's ops differ from eager's by design."""
    names = [(run.run, run.series, set(run.ops["op_name"])) for run in runs]
    for i, (first, series, first_names) in enumerate(names):
        for second, _, second_names in (entry for entry in names[i + 1 :] if entry[1] == series):
            union = first_names | second_names
            if union and len(first_names & second_names) / len(union) < 0.5:
                warnings.append(
                    f"{first} and {second} share few op names, so most ops have one point per line; group by "
                    "op type, or record each batch size in a fresh process (Keras numbers layers per process)"
                )
                return


def _step_table(runs: list[SweepRun], warnings: list[str]) -> pd.DataFrame:
    """One row per series and batch size. With step markers, a point's step time is the
    headline's (``analysis.step_time``: the median of its runs' steady steps pooled),
    and its interval the runs' spread around it (the repeats' pooled 95% interval,
    relative); without, op time per step."""
    rows = []
    for run in runs:
        if run.step_times_us:
            step_us, basis = step_latency([run.step_times_us]).median_us, "step markers"
        elif run.steps:
            step_us, basis = op_time_us(run.ops) / run.steps, "op time per step"
        else:
            warnings.append(f"{run.run}: no step count, so no time per step or throughput")
            continue
        rows.append((run.series, run.batch_size, step_us, basis, run.run))
    # Typed even when empty (no run knows its steps), so the maths after it need not care.
    per_run = pd.DataFrame(rows, columns=["series", "batch_size", "step_us", "basis", "run"]).astype(
        {"step_us": "float64"}
    )
    grouped = per_run.groupby(["series", "batch_size"], sort=True)
    table = grouped.agg(basis=("basis", "first"), run=("run", ", ".join), repeats=("run", "size")).reset_index()
    table["step_us"], table["step_low_us"], table["step_high_us"] = pooled_means(
        per_run["step_us"].to_numpy(), grouped.ngroup().to_numpy(), grouped.cumcount().to_numpy(), len(table)
    )
    walls: dict[tuple[Any, ...], list[Any]] = {}
    for run in runs:
        walls.setdefault((run.series, run.batch_size), []).append(run.step_times_us)
    for row, key in enumerate(zip(table["series"], table["batch_size"])):
        wall = pooled_step_time(walls.get(key, []))
        if wall:  # every run of the point has markers: the headline's figure
            table.loc[row, ["step_us", "step_low_us", "step_high_us"]] = wall
    table["samples_per_s"] = table["batch_size"] / (table["step_us"] / 1e6)
    return table[STEPS_COLUMNS].astype({"step_us": "float64", "samples_per_s": "float64"})


def fit_lines(points: pd.DataFrame) -> pd.DataFrame:
    """Least-squares mean_us = fixed_us + per_sample_us * batch_size per (op, series).

    The groups are slices of arrays sorted once: a sweep has thousands of (op, series)
    lines, and a pandas group each cost about ten times the fit (0.55 s of the demo
    sweep document's 1.2 s)."""
    measured = points["mean_us"].to_numpy(dtype="float64")
    usable = points[np.isfinite(measured) & (measured > 0) & points["op"].notna() & points["series"].notna()]
    usable = usable.sort_values(["op", "series"], kind="stable")  # the order groupby(sort=True) gave
    ops, series = usable["op"].to_numpy(dtype=object), usable["series"].to_numpy(dtype=object)
    sizes, means = usable["batch_size"].to_numpy(dtype="float64"), usable["mean_us"].to_numpy(dtype="float64")
    shares = usable["share"].to_numpy(dtype="float64") if "share" in usable else None
    new_group = np.ones(len(usable), dtype=bool)
    new_group[1:] = (ops[1:] != ops[:-1]) | (series[1:] != series[:-1])
    starts = np.flatnonzero(new_group).tolist()
    rows = []
    for start, end in zip(starts, [*starts[1:], len(usable)]):
        x, y = sizes[start:end], means[start:end]
        if len(np.unique(x[~np.isnan(x)])) < MIN_FIT_POINTS:
            continue
        rows.append((ops[start], series[start], *_judged_line(x, y), _mean_or_nan(shares, start, end)))
    return pd.DataFrame(rows, columns=LINE_COLUMNS)


def _judged_line(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float, int, bool]:
    """(fixed_us, per_sample_us, r2, points, poor_fit) of one op's points."""
    per_sample, fixed = line_fit(x, y)
    predicted = fixed + per_sample * x
    r2 = r_squared(y, predicted)
    # R² measures the line against the spread of the points; an op whose time hardly
    # changes has almost no spread, so its R² is noise. Poor means off by a lot, too.
    misses = above(float(np.sqrt(np.mean((y - predicted) ** 2))), POOR_FIT_MISS * float(np.mean(np.abs(y))))
    return float(fixed), float(per_sample), r2, len(x), bool(below(r2, POOR_FIT_R2) and misses)


def _mean_or_nan(values: np.ndarray | None, start: int, end: int) -> float | None:
    """The mean of ``values[start:end]`` that are known (pandas' mean), None without the column."""
    if values is None:
        return None
    known = values[start:end][~np.isnan(values[start:end])]
    return float(known.mean()) if len(known) else float("nan")


def r_squared(measured: np.ndarray, predicted: np.ndarray) -> float:
    """1 - residual / total sum of squares; points that are all equal (within rounding)
    are fitted perfectly by a flat line, so R² is 1 there, not 0."""
    residual = float(np.sum((measured - predicted) ** 2))
    total = float(np.sum((measured - measured.mean()) ** 2))
    rounding = len(measured) * (1e-9 * float(np.max(np.abs(measured)))) ** 2
    if total <= rounding:
        return 1.0 if residual <= rounding else 0.0
    return 1.0 - residual / total


def empty_breakeven() -> pd.DataFrame:
    return pd.DataFrame(columns=BREAKEVEN_COLUMNS)


def breakeven_batch_sizes(fits: pd.DataFrame, baseline: str = "CPU", target: str | None = None) -> pd.DataFrame:
    """Where the target series' line drops below the baseline's, for ops fitted on both;
    ``target`` None: the first other series."""
    rows = []
    target = target or next(iter(sorted(set(fits["series"]) - {baseline})), None)
    if target is None:
        return empty_breakeven()
    base = fits[fits["series"] == baseline].set_index("op")
    other = fits[fits["series"] == target].set_index("op")
    for op in base.index.intersection(other.index):
        a_base, b_base = base.at[op, "fixed_us"], base.at[op, "per_sample_us"]
        a_target, b_target = other.at[op, "fixed_us"], other.at[op, "per_sample_us"]
        rows.append((op, *_crossing(a_base, b_base, a_target, b_target)))
    return pd.DataFrame(rows, columns=BREAKEVEN_COLUMNS)


def _crossing(a_base: float, b_base: float, a_target: float, b_target: float) -> tuple[float | None, str]:
    """Solve a_target + b_target*bs < a_base + b_base*bs for bs >= 1."""
    faster_at_one = below(a_target + b_target, a_base + b_base)
    if math.isclose(b_base, b_target):
        return None, "always" if faster_at_one else "never"
    crossing = (a_target - a_base) / (b_base - b_target)
    beyond_one = above(crossing, 1.0)
    if b_base > b_target:  # the target's line is flatter: it wins above the crossing
        return (float(crossing), "above") if beyond_one else (None, "always")
    return (float(crossing), "below") if beyond_one else (None, "never")


def measured_breakeven(
    breakeven: pd.DataFrame, speedups: pd.DataFrame, target: str | None, warnings: list[str]
) -> pd.DataFrame:
    """The break-evens, each agreeing with the speedups measured at the batch sizes both
    series ran. A fitted line is a model of the points, and where it says the target is
    faster at a batch size whose points say slower (the demo's whole step: lines crossing
    below batch 1, where the GPU is measured slower, 3.33 ms against 2.97), the verdict is
    the points': the target faster above (or below) the first batch size where the
    measured speedup crosses 1, found between the two points on each side of it (log
    speedup linear in batch size), and a warning says so."""
    rows = []
    for op, batch_size, faster in breakeven[BREAKEVEN_COLUMNS].itertuples(index=False, name=None):
        measured = speedups[speedups["op"] == op].sort_values("batch_size")
        sizes, ratios = measured["batch_size"].to_numpy(float), measured["speedup"].to_numpy(float)
        known = np.isfinite(ratios) & (ratios > 0)
        sizes, ratios = sizes[known], ratios[known]
        if len(sizes) and _contradicts(batch_size, faster, sizes, ratios):
            batch_size, faster = _measured_crossing(sizes, ratios)
            warnings.append(
                f"{op}: the fitted lines disagree with the speedups measured at batch sizes "
                f"{', '.join(format(int(size)) for size in sizes)}; the break-even follows the measured points "
                f"({format_breakeven(batch_size, faster, target)})"
            )
        rows.append((op, batch_size, faster))
    return pd.DataFrame(rows, columns=BREAKEVEN_COLUMNS) if rows else empty_breakeven()


def _fitted_faster(batch_size: float | None, faster: str, sizes: np.ndarray) -> np.ndarray:
    """Where the fitted verdict says the target is faster, at each of ``sizes``."""
    if faster in ("always", "never"):
        return np.full(len(sizes), faster == "always")
    return sizes > batch_size if faster == "above" else sizes < batch_size


def _contradicts(batch_size: float | None, faster: str | None, sizes: np.ndarray, ratios: np.ndarray) -> bool:
    if faster not in ("always", "never", "above", "below"):
        return False
    measured_faster = above(ratios, 1.0)
    decided = measured_faster | below(ratios, 1.0)  # a speedup of exactly 1 decides nothing
    return bool((decided & (measured_faster != _fitted_faster(batch_size, faster, sizes))).any())


def _measured_crossing(sizes: np.ndarray, ratios: np.ndarray) -> tuple[float | None, str]:
    """The verdict of the measured speedups: always or never where they keep one side of 1,
    the batch size where they cross it once (between the points either side), or mixed
    where they cross it more than once."""
    faster = above(ratios, 1.0)
    change = np.flatnonzero(faster[1:] != faster[:-1])
    if not len(change):
        return None, "always" if faster[0] else "never"
    if len(change) > 1:  # slower, faster, slower again: no one batch size says it
        return None, "mixed"
    i = int(change[0])
    low, high = math.log(ratios[i]), math.log(ratios[i + 1])
    crossing = (
        float(sizes[i] + (sizes[i + 1] - sizes[i]) * (0.0 - low) / (high - low)) if high != low else float(sizes[i])
    )
    return crossing, "above" if faster[i + 1] else "below"


def speedup_table(points: pd.DataFrame, baseline: str = "CPU", target: str | None = None) -> pd.DataFrame:
    """Baseline mean / target mean per op and batch size both ran; ``target`` None: the
    first other series."""
    target = target or next(iter(sorted(set(points["series"]) - {baseline})), None)
    if target is None or baseline not in set(points["series"]):
        return pd.DataFrame(columns=SPEEDUP_COLUMNS)
    base = points[points["series"] == baseline].set_index(["op", "batch_size"])["mean_us"]
    other = points[points["series"] == target].set_index(["op", "batch_size"])["mean_us"]
    both = base.index.intersection(other.index)
    speedup = (base.loc[both] / other.loc[both].where(other.loc[both] > 0)).rename("speedup")
    return speedup.reset_index()[SPEEDUP_COLUMNS].sort_values(["op", "batch_size"], ignore_index=True)
