"""Batch-size sweep maths: how each op and the whole step scale with batch size, per
device. No I/O: it takes already-read runs and returns DataFrames.

``build_sweep(runs)`` -> ``Sweep`` with these tables:

=============  ========================================================================
series         op, device, batch_size, mean_us, per_sample_us (= mean_us / batch size),
               total_us, share, run, repeats, low_us, high_us. One row per op, device
               and batch size. Several runs at one device and batch size (repeats) are
               pooled as the check and the trend pool them: mean_us is the geometric
               mean of the runs' means, low_us/high_us its 95% interval (Student's t on
               the logs; null for one run), total_us and share the runs' average,
               ``repeats`` how many runs had the op, ``run`` their names.
steps          device, batch_size, step_us, samples_per_s, basis, run, repeats,
               step_low_us, step_high_us. ``basis`` says where step_us came from:
               ``step markers`` (mean wall time of a profiled step) or ``op time per
               step`` (op time / steps, where no marker gave durations); repeats pooled
               as above.
fits           op, device, fixed_us, per_sample_us, r2, points, poor_fit, share: least
               squares of mean_us = fixed_us + per_sample_us * batch_size, per op and
               device with at least two batch sizes. ``poor_fit`` when R² < 0.9 over
               three or more points and the line misses them by more than 5% of their
               mean (RMS): two points always fit exactly, and an op whose time does not
               change with batch size (a fixed cost) has an R² of noise but a good fit.
               ``share``: the op's mean share of its runs' op time (the whole step:
               1), to tell the ops that matter. breakeven_batch_size, gpu_faster: the
               op's break-even (below), on each of its rows, so a table of fits needs
               no join.
breakeven      op, batch_size, gpu_faster: for ops fitted on CPU and on an accelerator,
               where the lines cross: the accelerator is faster ``above`` (the usual
               case: a higher fixed cost, a lower cost per sample) or ``below`` that
               batch size, or ``always`` / ``never`` when they do not cross at a batch
               size >= 1 (batch_size is then null).
speedups       op, batch_size, speedup (CPU mean / accelerator mean) at batch sizes
               both devices ran.
=============  ========================================================================

The whole step appears in fits, breakeven and speedups as the op ``STEP``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from tb_opcompare.analysis.compare import op_totals
from tb_opcompare.analysis.confidence import pooled_means

STEP = "(whole step)"
POOR_FIT_R2 = 0.9
POOR_FIT_MISS = 0.05  # a poor fit also misses its points by more than 5% of their mean (RMS)
SERIES_COLUMNS = ["op", "device", "batch_size", "mean_us", "per_sample_us", "total_us", "share", "run", "repeats",
                  "low_us", "high_us"]
STEPS_COLUMNS = ["device", "batch_size", "step_us", "samples_per_s", "basis", "run", "repeats", "step_low_us",
                 "step_high_us"]
LINE_COLUMNS = ["op", "device", "fixed_us", "per_sample_us", "r2", "points", "poor_fit", "share"]
FIT_COLUMNS = [*LINE_COLUMNS, "breakeven_batch_size", "gpu_faster"]
BREAKEVEN_COLUMNS = ["op", "batch_size", "gpu_faster"]
SPEEDUP_COLUMNS = ["op", "batch_size", "speedup"]


@dataclasses.dataclass
class SweepRun:
    """One run of the model, as the sweep needs it."""

    run: str
    device: str
    batch_size: int | None
    ops: pd.DataFrame  # optable.OP_COLUMNS
    steps: int | None = None
    step_time_us: float | None = None


@dataclasses.dataclass
class Sweep:
    batch_sizes: dict[str, list[int]]
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
) -> Sweep:
    warnings: list[str] = []
    points = _runs_per_point(runs, warnings)
    chosen = [group[0] for group in points]  # one run per point where one stands for all
    batch_sizes: dict[str, list[int]] = {}
    for run in chosen:
        batch_sizes.setdefault(run.device, []).append(run.batch_size)
    batch_sizes = {device: sorted(sizes) for device, sizes in sorted(batch_sizes.items())}
    if not any(len(sizes) >= 2 for sizes in batch_sizes.values()):
        warnings.append("a sweep needs at least two batch sizes on one device; found "
                        + (", ".join(f"{d}: {s}" for d, s in batch_sizes.items()) or "no runs with a batch size"))

    if group_by == "name":
        _warn_if_names_differ(chosen, warnings)
    frames = []
    for group in points:
        for run in group:
            totals = op_totals(run.ops, group_by, normalize)
            frames.append(pd.DataFrame({
                "op": totals.index,
                "device": run.device,
                "batch_size": run.batch_size,
                "mean_us": totals["mean_us"].to_numpy(),
                "total_us": totals["total_us"].to_numpy(),
                "share": np.asarray(totals["share"], dtype="float64"),
                "run": run.run,
            }))
    every_op = _pooled(pd.concat(frames, ignore_index=True)) if frames else pd.DataFrame(columns=SERIES_COLUMNS)
    every_op = every_op.sort_values(["op", "device", "batch_size"], kind="stable", ignore_index=True)

    if ops:
        present = set(every_op["op"])
        top_ops = [op for op in ops if op in present]
        missing = [op for op in ops if op not in present]
        if missing:
            warnings.append(f"not in any run of this model: {', '.join(missing)}")
    else:
        # Each point (device and batch size) weighs the same, so a long profile does not drown the others.
        ranking = every_op.groupby("op")["share"].sum().sort_values(ascending=False, kind="stable")
        top_ops = list(ranking.index[:top])
    series = every_op[every_op["op"].isin(top_ops)].reset_index(drop=True)[SERIES_COLUMNS]

    steps = _step_table([run for group in points for run in group], warnings)
    step_points = steps.rename(columns={"step_us": "mean_us"}).assign(op=STEP, share=1.0)
    lines = fit_lines(pd.concat([every_op, step_points], ignore_index=True))
    breakeven = breakeven_batch_sizes(lines)
    crossings = breakeven.rename(columns={"batch_size": "breakeven_batch_size"})
    fits = lines.merge(crossings, on="op", how="left")[FIT_COLUMNS]
    speedups = speedup_table(pd.concat([series, step_points], ignore_index=True))
    return Sweep(batch_sizes, series, steps, fits, breakeven, speedups, top_ops, warnings)


def _runs_per_point(runs: list[SweepRun], warnings: list[str]) -> list[list[SweepRun]]:
    """The runs at each device and batch size (repeats of one configuration share a point)."""
    points: dict[tuple[str, int], list[SweepRun]] = {}
    for run in sorted(runs, key=lambda r: r.run):
        if not run.batch_size:
            warnings.append(f"{run.run}: left out, its batch size is unknown (name it …_bs32, or write a sidecar)")
            continue
        points.setdefault((run.device, run.batch_size), []).append(run)
    return list(points.values())


def _pooled(every_run: pd.DataFrame) -> pd.DataFrame:
    """One row per op, device and batch size from one row per op and run: repeats pooled
    as everywhere (``confidence.pooled_means``: geometric mean, 95% interval)."""
    grouped = every_run.groupby(["op", "device", "batch_size"], sort=False, dropna=False)
    pooled = grouped.agg(total_us=("total_us", "mean"), share=("share", "mean"), run=("run", ", ".join),
                         repeats=("run", "size")).reset_index()
    pooled["mean_us"], pooled["low_us"], pooled["high_us"] = pooled_means(
        every_run["mean_us"].to_numpy(), grouped.ngroup().to_numpy(), grouped.cumcount().to_numpy(), len(pooled))
    pooled["per_sample_us"] = pooled["mean_us"] / pooled["batch_size"]
    return pooled[SERIES_COLUMNS]


def _warn_if_names_differ(runs: list[SweepRun], warnings: list[str]) -> None:
    """Keras numbers layers per process (sequential_1/conv2d_3 in the second model built),
    so runs recorded one after another in one script share few op names."""
    names = [(run.run, set(run.ops["op_name"])) for run in runs]
    for i, (first, first_names) in enumerate(names):
        for second, second_names in names[i + 1:]:
            union = first_names | second_names
            if union and len(first_names & second_names) / len(union) < 0.5:
                warnings.append(
                    f"{first} and {second} share few op names, so most ops have one point per device; group by "
                    "op type, or record each batch size in a fresh process (Keras numbers layers per process)")
                return


def _step_table(runs: list[SweepRun], warnings: list[str]) -> pd.DataFrame:
    rows = []
    for run in runs:
        if run.step_time_us:
            step_us, basis = run.step_time_us, "step markers"
        elif run.steps:
            step_us, basis = float(op_totals(run.ops)["total_us"].sum()) / run.steps, "op time per step"
        else:
            warnings.append(f"{run.run}: no step count, so no time per step or throughput")
            continue
        rows.append((run.device, run.batch_size, step_us, basis, run.run))
    # Typed even when empty (no run knows its steps), so the maths after it need not care.
    per_run = pd.DataFrame(rows, columns=["device", "batch_size", "step_us", "basis", "run"]).astype(
        {"step_us": "float64"})
    grouped = per_run.groupby(["device", "batch_size"], sort=True)
    table = grouped.agg(basis=("basis", "first"), run=("run", ", ".join), repeats=("run", "size")).reset_index()
    table["step_us"], table["step_low_us"], table["step_high_us"] = pooled_means(
        per_run["step_us"].to_numpy(), grouped.ngroup().to_numpy(), grouped.cumcount().to_numpy(), len(table))
    table["samples_per_s"] = table["batch_size"] / (table["step_us"] / 1e6)
    return table[STEPS_COLUMNS].astype({"step_us": "float64", "samples_per_s": "float64"})


def fit_lines(points: pd.DataFrame) -> pd.DataFrame:
    """Least-squares mean_us = fixed_us + per_sample_us * batch_size per (op, device)."""
    rows = []
    for (op, device), group in points.groupby(["op", "device"], sort=True):
        group = group[np.isfinite(group["mean_us"])]
        if group["batch_size"].nunique() < 2:
            continue
        x = group["batch_size"].to_numpy(dtype="float64")
        y = group["mean_us"].to_numpy(dtype="float64")
        per_sample, fixed = np.polyfit(x, y, 1)
        predicted = fixed + per_sample * x
        r2 = r_squared(y, predicted)
        # R² measures the line against the spread of the points; an op whose time hardly
        # changes has almost no spread, so its R² is noise. Poor means off by a lot, too.
        misses = float(np.sqrt(np.mean((y - predicted) ** 2))) > POOR_FIT_MISS * float(np.mean(np.abs(y)))
        poor = len(group) >= 3 and r2 < POOR_FIT_R2 and misses
        share = float(group["share"].mean()) if "share" in group else None
        rows.append((op, device, float(fixed), float(per_sample), r2, len(group), bool(poor), share))
    return pd.DataFrame(rows, columns=LINE_COLUMNS)


def r_squared(measured: np.ndarray, predicted: np.ndarray) -> float:
    """1 - residual / total sum of squares; points that are all equal (within rounding)
    are fitted perfectly by a flat line, so R² is 1 there, not 0."""
    residual = float(np.sum((measured - predicted) ** 2))
    total = float(np.sum((measured - measured.mean()) ** 2))
    rounding = len(measured) * (1e-9 * float(np.max(np.abs(measured)))) ** 2
    if total <= rounding:
        return 1.0 if residual <= rounding else 0.0
    return 1.0 - residual / total


def breakeven_batch_sizes(fits: pd.DataFrame, baseline: str = "CPU") -> pd.DataFrame:
    """Where the accelerator's line drops below the CPU's, for ops fitted on both."""
    rows = []
    accelerators = sorted(set(fits["device"]) - {baseline})
    if not accelerators:
        return pd.DataFrame(columns=BREAKEVEN_COLUMNS)
    cpu = fits[fits["device"] == baseline].set_index("op")
    accelerator = fits[fits["device"] == accelerators[0]].set_index("op")
    for op in cpu.index.intersection(accelerator.index):
        a_cpu, b_cpu = cpu.at[op, "fixed_us"], cpu.at[op, "per_sample_us"]
        a_acc, b_acc = accelerator.at[op, "fixed_us"], accelerator.at[op, "per_sample_us"]
        rows.append((op, *_crossing(a_cpu, b_cpu, a_acc, b_acc)))
    return pd.DataFrame(rows, columns=BREAKEVEN_COLUMNS)


def _crossing(a_cpu: float, b_cpu: float, a_acc: float, b_acc: float) -> tuple[float | None, str]:
    """Solve a_acc + b_acc*bs < a_cpu + b_cpu*bs for bs >= 1."""
    faster_at_one = a_acc + b_acc < a_cpu + b_cpu
    if math.isclose(b_cpu, b_acc):
        return None, "always" if faster_at_one else "never"
    crossing = (a_acc - a_cpu) / (b_cpu - b_acc)
    if b_cpu > b_acc:  # the accelerator's line is flatter: it wins above the crossing
        return (None, "always") if crossing <= 1 else (float(crossing), "above")
    return (None, "never") if crossing <= 1 else (float(crossing), "below")


def speedup_table(points: pd.DataFrame, baseline: str = "CPU") -> pd.DataFrame:
    accelerators = sorted(set(points["device"]) - {baseline})
    if not accelerators or baseline not in set(points["device"]):
        return pd.DataFrame(columns=SPEEDUP_COLUMNS)
    cpu = points[points["device"] == baseline].set_index(["op", "batch_size"])["mean_us"]
    accelerator = points[points["device"] == accelerators[0]].set_index(["op", "batch_size"])["mean_us"]
    both = cpu.index.intersection(accelerator.index)
    speedup = (cpu.loc[both] / accelerator.loc[both].where(accelerator.loc[both] > 0)).rename("speedup")
    return speedup.reset_index()[SPEEDUP_COLUMNS].sort_values(["op", "batch_size"], ignore_index=True)
