"""Op-by-op comparison of two per-op tables: the maths only, no I/O.

``compare_ops(baseline_ops, target_ops)`` returns ``(rows, summary)``. ``rows`` is a
DataFrame with one row per op key and the columns in ``COMPARE_COLUMNS``: the fields of
``schema.contract.CompareRow``, where each is described (and from which
``docs/http_api.md`` is generated).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from tb_opcompare.analysis.numerics import above, below, geometric_mean
from tb_opcompare.analysis.pairing import SAME_MODEL_JACCARD
from tb_opcompare.analysis.step_time import STEP_WALL_TIME, Headline, batch_sizes_differ
from tb_opcompare.schema.contract import COMPARE_COLUMNS, PER_SIDE_FIELDS, SIDES, STATUSES, RunRecord
from tb_opcompare.schema.dimensions import COMPARE_GROUP_BY, model_of
from tb_opcompare.schema.events import DEVICE, HOST
from tb_opcompare.schema.text import format_speedup

OUTSIDE_MODULES = "(outside modules)"
TOP_LEVEL = "(top level)"
MODULE_TYPE = "module"  # the op_type of a module's row
_KEYS = {"name": "op_name", "type": "op_type", "module": "module"}
NOISY_CV = 0.5
MATCHED, BASELINE_ONLY, TARGET_ONLY = STATUSES

# oneDNN (Mkl) CPU kernels and their GPU counterparts share one type once normalised:
# "_MklNativeFusedConv2D" and "_FusedConv2D" -> "FusedConv2D"; "_MklMatMul" and
# "MatMul" -> "MatMul". PyTorch backend variants meet the same way:
# "aten::mkldnn_convolution", "aten::cudnn_convolution" -> "aten::convolution".
_TF_BACKEND_PREFIX = re.compile(r"\A_?(?:MklNative|Mkl)")
_TORCH_BACKEND = re.compile(r"\Aaten::(?:mkldnn_|cudnn_|miopen_)")


def normalize_op_type(op_type: str) -> str:
    op_type = _TORCH_BACKEND.sub("aten::", op_type)
    return _TF_BACKEND_PREFIX.sub("", op_type).lstrip("_") or op_type


# An op's memory, on its host row, and the host calls it is per (a device row counts the
# calls that launched kernels, which can be fewer).
_MEMORY = ("alloc_bytes", "net_bytes", "memory_calls")


def counted_rows(ops: pd.DataFrame) -> np.ndarray:
    """Positions of the rows whose time counts for their op: device time where the op
    launched kernels, else host time."""
    device = ops["side"].to_numpy() == DEVICE
    host = (ops["side"].to_numpy() == HOST) & ~_among(ops["op_name"], ops["op_name"][device])
    return np.flatnonzero(device | host)


def _among(values: pd.Series, keys) -> np.ndarray:
    """``values.isin(keys)``, as one hash lookup: pandas' ``isin`` on Arrow-backed strings
    loops in Python (15 ms against 1 ms for the 6,000 ops of a BERT xplane)."""
    return pd.Index(keys).unique().get_indexer(values) >= 0


def op_time_us(ops: pd.DataFrame) -> float:
    """A run's whole op time, µs: the time of the rows that count (``counted_rows``), what
    a comparison's ``*_total_us`` adds up to, without grouping anything."""
    return float(ops["self_us"].to_numpy(dtype="float64")[counted_rows(ops)].sum())


def effective_ops(ops: pd.DataFrame, normalize: bool = True) -> pd.DataFrame:
    """One row per op with the time that counts (``counted_rows``), device rows first;
    and the op's memory, which its host row holds, whichever row counts."""
    ops = ops.assign(memory_calls=ops["occurrences"].where(ops["side"] == HOST))
    counted = ops.iloc[counted_rows(ops)]
    device = counted[counted["side"] == DEVICE]
    on_host = ops["side"] == HOST
    if len(device) and on_host.any():
        memory = ops.loc[on_host, ["op_name", *_MEMORY]].groupby("op_name", sort=False).sum(min_count=1)
        has_host_row = _among(device["op_name"], memory.index)  # else the device row holds the op's memory
        device = device.assign(
            **{column: device["op_name"].map(memory[column]).where(has_host_row, device[column]) for column in _MEMORY}
        )
    host = counted[counted["side"] == HOST]
    chosen = pd.concat([device.assign(time_source=DEVICE), host.assign(time_source=HOST)], ignore_index=True)
    types = chosen["op_type"].map(normalize_op_type) if normalize else chosen["op_type"]
    return chosen.assign(recorded_type=chosen["op_type"], op_type=types)


def op_totals(
    ops: pd.DataFrame, group_by: str = "name", normalize: bool = True, modules: pd.DataFrame | None = None
) -> pd.DataFrame:
    """One run's ops grouped by name, type or module, indexed by ``key``, with op_type,
    occurrences, total_us, time_source, mean_us and share (the per-side compare columns).
    ``modules``: the run's ``OpProfile.module_ops``, for ``group_by="module"``."""
    chosen = effective_ops(ops, normalize)
    if group_by == "module":
        chosen = in_modules(chosen, modules)
    return _group(chosen, group_by)


def in_modules(chosen: pd.DataFrame, modules: pd.DataFrame | None) -> pd.DataFrame:
    """``effective_ops`` rows placed in modules (a ``module`` column): split over the
    modules each op ran in where ``modules`` has them (executions, time and bytes allocated
    per module; no spread or net memory for a part of an op), else each op whole in the
    scope its name gives
    (``sequential/conv2d/Relu`` -> ``sequential/conv2d``; ``(top level)`` without one)."""
    if modules is None or not len(modules):
        scopes = chosen["op_name"].str.rpartition("/")[0]
        return chosen.assign(module=scopes.where(scopes != "", TOP_LEVEL), op_type=MODULE_TYPE)
    placed = chosen.drop(columns=["occurrences", "self_us", "alloc_bytes"]).merge(
        modules.rename(columns={"op_type": "recorded_type"}), on=["side", "op_name", "recorded_type"], how="inner"
    )
    spread = ["std_us", "p10_us", "median_us", "p90_us", "per_step_cv", "net_bytes", "memory_calls"]
    # an op's memory is on its host rows, also where its kernels' time counts
    host_memory = (
        modules[modules["side"] == HOST].groupby(["op_name", "op_type", "module"])["alloc_bytes"].sum(min_count=1)
    )
    where = pd.MultiIndex.from_arrays([placed["op_name"], placed["recorded_type"], placed["module"]])
    placed = placed.assign(
        module=placed["module"].where(placed["module"] != "", OUTSIDE_MODULES),
        kernels=0,
        alloc_bytes=host_memory.reindex(where).to_numpy(),
        **{column: np.nan for column in spread},
    )
    unplaced = chosen[
        ~chosen.set_index(["side", "op_name", "recorded_type"]).index.isin(
            modules.set_index(["side", "op_name", "op_type"]).index
        )
    ]
    return pd.concat([placed, unplaced.assign(module=OUTSIDE_MODULES)], ignore_index=True).assign(op_type=MODULE_TYPE)


_SPREAD = ("p10_us", "median_us", "p90_us", "per_step_cv")  # of one op: none for a type grouping several


def execution_square_sums(occurrences: pd.Series, self_us: pd.Series, std_us: pd.Series) -> pd.Series:
    """Each row's sum of squared execution times, n·(std² + mean²), from its count, total
    and (population) std: sums of these add up across ops or runs, so their moments pool
    where percentiles cannot. NaN where the std is unknown."""
    executions = occurrences.where(occurrences > 0)
    return executions * (std_us**2 + (self_us / executions) ** 2)


def execution_std(square_sums: pd.Series, occurrences: pd.Series, self_us: pd.Series) -> pd.Series:
    """The population std of the executions whose summed squares, count and total these are."""
    executions = occurrences.where(occurrences > 0)
    return np.sqrt((square_sums / executions - (self_us / executions) ** 2).clip(lower=0.0))


def _group(chosen: pd.DataFrame, group_by: str) -> pd.DataFrame:
    key = _KEYS[group_by]
    square_sum = execution_square_sums(chosen["occurrences"], chosen["self_us"], chosen["std_us"])
    if not chosen[key].duplicated().any():  # one op per key, as grouping by name nearly always gives
        grouped = pd.DataFrame(
            {
                "op_type": chosen["op_type"].to_numpy(),
                "occurrences": chosen["occurrences"].to_numpy(),
                "total_us": chosen["self_us"].to_numpy(),
                "time_source": chosen["time_source"].to_numpy(),
                "kernels": chosen["kernels"].to_numpy(),
                **{column: chosen[column].to_numpy() for column in (*_SPREAD, *_MEMORY)},
            },
            index=pd.Index(chosen[key].to_numpy(), name=key),
        )
        square_sum = square_sum.to_numpy()
    else:
        groups = chosen.assign(square_sum=square_sum, square_missing=square_sum.isna()).groupby(key, sort=False)
        grouped = groups.agg(
            op_type=("op_type", "first"),
            occurrences=("occurrences", "sum"),
            total_us=("self_us", "sum"),
            kernels=("kernels", "sum"),
            time_source=("time_source", "first"),
            sources=("time_source", "nunique"),
            members=("op_type", "size"),
            square_sum=("square_sum", "sum"),
            square_missing=("square_missing", "max"),
            **{column: (column, "first") for column in _SPREAD},
        )
        # NaN where no member recorded memory (min_count); one vectorised sum per column, where
        # a Python function per group took seconds on a trace of thousands of ops
        memory = groups[list(_MEMORY)].sum(min_count=1)
        for column in _MEMORY:
            grouped[column] = memory[column]
        grouped["time_source"] = grouped["time_source"].where(grouped.pop("sources") == 1, "mixed")
        single = grouped.pop("members") == 1
        for column in _SPREAD:
            grouped[column] = grouped[column].where(single)
        square_sum = grouped.pop("square_sum").where(~grouped.pop("square_missing").astype(bool)).to_numpy()
    occurrences = grouped["occurrences"].where(grouped["occurrences"] > 0)
    grouped["mean_us"] = grouped["total_us"] / occurrences
    # Device kernels (and memcpys) per execution of the op: a mean is per execution, and
    # this says how many kernels make one (none for host time).
    grouped["kernels_per_execution"] = grouped.pop("kernels").where(lambda k: k > 0) / occurrences
    calls = grouped.pop("memory_calls")
    grouped["alloc_bytes_per_execution"] = grouped["alloc_bytes"] / calls.where(calls > 0)
    std = execution_std(pd.Series(square_sum, index=grouped.index), grouped["occurrences"], grouped["total_us"])
    grouped["cv"] = std / grouped["mean_us"].where(grouped["mean_us"] > 0)
    grouped["noisy"] = (grouped["occurrences"] >= 3) & above(grouped["cv"], NOISY_CV)
    all_time = grouped["total_us"].sum()
    grouped["share"] = grouped["total_us"] / all_time if all_time > 0 else 0.0
    return grouped.rename_axis("key")


def compare_ops(
    baseline_ops: pd.DataFrame,
    target_ops: pd.DataFrame,
    group_by: str = "name",
    normalize: bool = True,
    baseline_steps: int | None = None,
    target_steps: int | None = None,
    baseline_modules: pd.DataFrame | None = None,
    target_modules: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, dict]:
    if group_by not in COMPARE_GROUP_BY:
        raise ValueError(f"group_by must be one of {COMPARE_GROUP_BY}, not {group_by!r}")
    sides = {
        "baseline": op_totals(baseline_ops, group_by, normalize, baseline_modules),
        "target": op_totals(target_ops, group_by, normalize, target_modules),
    }
    keys = sides["baseline"].index.union(sides["target"].index, sort=False)
    merged = pd.concat(
        [table[["op_type", *PER_SIDE_FIELDS]].reindex(keys).add_prefix(f"{side}_") for side, table in sides.items()],
        axis=1,
    )
    in_baseline = merged["baseline_mean_us"].notna()
    in_target = merged["target_mean_us"].notna()
    merged["status"] = np.select([in_baseline & in_target, in_baseline], [MATCHED, BASELINE_ONLY], TARGET_ONLY)
    merged["op_type"] = merged["baseline_op_type"].fillna(merged["target_op_type"])
    target_mean = merged["target_mean_us"].where(merged["target_mean_us"] > 0)
    merged["speedup"] = merged["baseline_mean_us"] / target_mean
    merged["delta_mean_us"] = merged["target_mean_us"] - merged["baseline_mean_us"]
    for side in SIDES:
        merged[f"{side}_occurrences"] = merged[f"{side}_occurrences"].astype("Int64")
        merged[f"{side}_noisy"] = merged[f"{side}_noisy"].astype("boolean")
    rows = merged.reset_index(names="key")
    largest = rows[["baseline_total_us", "target_total_us"]].max(axis=1)
    rows = rows.assign(_order=largest).sort_values("_order", ascending=False, kind="stable")
    rows = rows[COMPARE_COLUMNS].reset_index(drop=True)
    return rows, summarize(rows, baseline_steps, target_steps)


def summarize(rows: pd.DataFrame, baseline_steps: int | None, target_steps: int | None) -> dict:
    """Whole-run figures. Overall speedup is the ratio of matched op time, per step when
    both runs know their step count (so runs profiled over different step counts compare
    fairly), else over the whole profile."""
    matched = rows[rows["status"] == MATCHED]
    baseline_matched = float(matched["baseline_total_us"].sum())
    target_matched = float(matched["target_total_us"].sum())
    per_step = bool(baseline_steps and target_steps)
    if per_step:
        overall = (baseline_matched / baseline_steps) / (target_matched / target_steps) if target_matched else None
    else:
        overall = baseline_matched / target_matched if target_matched else None
    speedups = matched["speedup"].to_numpy(dtype="float64")
    speedups = speedups[np.isfinite(speedups) & (speedups > 0)]
    geomean = geometric_mean(speedups)
    summary = {
        "matched_ops": int(len(matched)),
        "baseline_only_ops": int((rows["status"] == BASELINE_ONLY).sum()),
        "target_only_ops": int((rows["status"] == TARGET_ONLY).sum()),
        "faster_ops": int(above(matched["speedup"], 1.0).sum()),
        "noisy_ops": int((matched["baseline_noisy"].fillna(False) | matched["target_noisy"].fillna(False)).sum()),
        "slower_ops": int(below(matched["speedup"], 1.0).sum()),
        "baseline_matched_total_us": baseline_matched,
        "target_matched_total_us": target_matched,
        "baseline_total_us": float(rows["baseline_total_us"].sum()),
        "target_total_us": float(rows["target_total_us"].sum()),
        "overall_speedup": overall,
        "overall_speedup_basis": "per step" if per_step else "whole profile",
        "geomean_speedup": geomean,
        "baseline_steps": baseline_steps,
        "target_steps": target_steps,
        "baseline_time_per_step_us": _per_step(rows["baseline_total_us"].sum(), baseline_steps),
        "target_time_per_step_us": _per_step(rows["target_total_us"].sum(), target_steps),
    }
    return summary


def like_for_like(
    summary: dict, baseline: RunRecord, target: RunRecord, group_by: str, first: Headline
) -> tuple[dict, list[str]]:
    """Figures and notes that say what a comparison does and does not compare.
    ``baseline``/``target``: each run's ``batch_size``, ``framework`` and ``compiler``;
    ``first``: the headline (``analysis.step_time.headline``), which the notes explain.

    Returns ``whole_step_speedup`` (all op time per step, ops on one side included) and
    ``per_sample_speedup`` (the same per sample, where the batch sizes differ), and the
    notes a user needs to read the headline figures right."""
    base_step, target_step = summary["baseline_time_per_step_us"], summary["target_time_per_step_us"]
    whole = base_step / target_step if base_step and target_step else None
    per_sample, batch_note = _per_sample(whole, baseline.batch_size, target.batch_size, first)
    notes = [
        different_models(summary, baseline, target),
        batch_note,
        _op_time_note(per_sample, whole, first),
        _matched_time_note(summary["overall_speedup"], whole),
        _no_shared_ops_note(summary, baseline, target, group_by),
        _compiler_note(baseline.compiler, target.compiler, first),
    ]
    return {"whole_step_speedup": whole, "per_sample_speedup": per_sample}, [note for note in notes if note]


def _per_sample(
    whole: float | None, base_batch: int | None, target_batch: int | None, first: Headline
) -> tuple[float | None, str | None]:
    """Where the batch sizes differ, the whole-step speedup per sample and a note: each
    op's speedup then compares one call at each size, different amounts of work."""
    differ = batch_sizes_differ(base_batch, target_batch)
    if not differ:
        return None, None
    per_sample = whole * target_batch / base_batch if whole else None
    return per_sample, (
        f"{differ}: {'the headline is per sample, and ' if first.per_sample else ''}each op's speedup "
        "compares one call at each size, that is different amounts of work."
    )


def _op_time_note(per_sample: float | None, whole: float | None, first: Headline) -> str | None:
    """Why op time and a step-wall-time headline disagree, where they are far apart
    (``_OP_TIME_APART``): the user sees both and must know which to believe."""
    op_time = per_sample or whole
    if not (
        first.basis == STEP_WALL_TIME
        and op_time
        and first.speedup
        and above(abs(math.log(op_time / first.speedup)), math.log(_OP_TIME_APART))
    ):
        return None
    return (
        f"Op time per step{' per sample' if per_sample else ''} gives {format_speedup(op_time)}, the "
        f"step wall time {format_speedup(first.speedup)}: op time adds up ops that ran side by side on "
        "parallel threads and misses time outside ops (a data loader, Python, waiting on a device), "
        "so the headline is the wall time."
    )


def _matched_time_note(overall: float | None, whole: float | None) -> str | None:
    """Where matched op time and all op time differ by more than 5%: ops found on one side
    only carry real time, and the two figures count them differently."""
    if not (whole and overall and abs(overall / whole - 1) > 0.05):
        return None
    return (
        f"Matched op time ({format_speedup(overall)}) counts the ops both runs have; all op time per "
        f"step, ops found on one side only included, gives {format_speedup(whole)}."
    )


def _no_shared_ops_note(summary: dict, baseline: RunRecord, target: RunRecord, group_by: str) -> str | None:
    """Why no op matched where both runs took time, and what to do about it."""
    if not (summary["matched_ops"] == 0 and summary["baseline_total_us"] and summary["target_total_us"]):
        return None
    frameworks = {baseline.framework, target.framework} - {None}
    families = {_framework_family(framework) for framework in frameworks}
    why = (
        f"the runs come from different frameworks ({' and '.join(sorted(frameworks))})"
        if len(families) > 1
        else "the runs name their ops differently (another model, or another version)"
    )
    # op types meet within one framework only: TensorFlow's Conv2D is never PyTorch's aten::convolution
    hint = " Group by op type to compare ops by kind." if group_by == "name" and len(families) <= 1 else ""
    return f"No op is in both runs: {why}.{hint}"


def _compiler_note(base_compiler: str | None, target_compiler: str | None, first: Headline) -> str | None:
    """Where both runs name different compilers: ops on one side only are then expected,
    and the whole step is the figure that compares them."""
    if base_compiler is None or target_compiler is None or base_compiler == target_compiler:
        return None
    return (
        f"The runs ran under different compilers ({base_compiler} and {target_compiler}): a compiler fuses and "
        "renames ops by design, so ops found on one side only are expected and op-by-op speedups cover "
        "only what both kept. The whole step is where both meet"
        + (f": {format_speedup(first.speedup)} in step wall time" if first.basis == STEP_WALL_TIME else "")
        + "; the Matrix view compares whole steps across compilers."
    )


def different_models(summary: dict, baseline: RunRecord, target: RunRecord) -> str | None:
    """Why the figures compare different work, where the two runs are of different models:
    their models differ and so do their ops (runs of one model whose names differ, kineto's
    ``num_workers_0`` and ``num_workers_4``, share ``SAME_MODEL_JACCARD`` of their ops)."""
    if model_of(baseline.model) == model_of(target.model):  # fp32 -> bf16, eager -> compile: one model
        return None
    ops = summary["matched_ops"] + summary["baseline_only_ops"] + summary["target_only_ops"]
    if ops and summary["matched_ops"] / ops >= SAME_MODEL_JACCARD - 1e-9:
        return None
    return (
        f"Different models: {baseline.run} is {baseline.model} and {target.run} is {target.model}, and "
        f"{summary['matched_ops']} of their {ops} ops are in both, so every speedup here compares different "
        "work. The Matrix puts each model's runs on one row."
    )


# Op time and wall time further apart than this (either way) get a note saying why.
_OP_TIME_APART = 1.25


def _framework_family(framework: str) -> str:
    """``PyTorch 2.13.0+cpu`` -> ``PyTorch``, ``TensorFlow 2.16.1 (Keras 3)`` and
    ``TensorFlow (summary.json)`` -> ``TensorFlow``: the words before a version or a note."""
    return re.match(r"[^\d(]*", framework).group().strip() or framework


def _per_step(total: float, steps: int | None) -> float | None:
    return float(total) / steps if steps else None
