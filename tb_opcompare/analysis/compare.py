"""Op-by-op comparison of two per-op tables: the maths only, no I/O, and no pandas (a
whole ``compare`` of two small traces is shorter than pandas' import; grouping by module
alone merges tables with it).

``compare_ops(baseline_ops, target_ops)`` takes two runs' op tables (``OpProfile.op_table``)
and returns ``(rows, summary)``. ``rows`` is a ``schema.table.Table`` with one row per op
key and the columns in ``COMPARE_COLUMNS``: the fields of ``schema.contract.CompareRow``,
where each is described (and from which ``docs/http_api.md`` is generated). A side's
missing values are NaN in float columns and None in the others (its ``occurrences``, ints,
and ``noisy``, flags); ``compare_frame`` gives the rows as a pandas DataFrame.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

import numpy as np

from tb_opcompare.analysis.model_identity import joined_by_layer_scopes
from tb_opcompare.analysis.numerics import above, below, geometric_mean
from tb_opcompare.analysis.pairing import SAME_MODEL_JACCARD
from tb_opcompare.analysis.step_time import (
    STEP_WALL_TIME,
    Headline,
    batch_sizes_differ,
    evidenced_batch_size,
    unverified_batch_note,
)
from tb_opcompare.schema.contract import COMPARE_COLUMNS, PER_SIDE_FIELDS, SIDES, STATUSES, RunRecord
from tb_opcompare.schema.dimensions import COMPARE_GROUP_BY, model_of
from tb_opcompare.schema.events import DEVICE, HOST
from tb_opcompare.schema.groups import (
    among,
    first_appearance,
    first_appearance_ids,
    group_counts,
    group_sums,
    integer_group_sums,
    known_sums,
    positions,
)
from tb_opcompare.schema.table import Table, text_array
from tb_opcompare.schema.text import format_speedup

if TYPE_CHECKING:
    import pandas as pd

OUTSIDE_MODULES = "(outside modules)"
TOP_LEVEL = "(top level)"
MODULE_TYPE = "module"  # the op_type of a module's row
_KEYS = {"name": "op_name", "type": "op_type", "module": "module"}
NOISY_CV = 0.5
MATCHED, BASELINE_ONLY, TARGET_ONLY = STATUSES

# oneDNN (Mkl) CPU kernels and their GPU counterparts share one type once normalised:
# "_MklNativeFusedConv2D" and "_FusedConv2D" -> "FusedConv2D"; "_MklMatMul" and
# "MatMul" -> "MatMul". PyTorch's backend implementations meet at the op that dispatches
# to them: "aten::mkldnn_convolution", "aten::cudnn_convolution", "aten::miopen_convolution"
# and the native fallbacks ("aten::_slow_conv2d_forward", "aten::slow_conv_dilated2d",
# "aten::_nnpack_spatial_convolution") -> "aten::convolution"; "aten::cudnn_batch_norm" ->
# "aten::batch_norm"; xnnpack's and nnpack's ops the same way. Leaves only: a wrapper such
# as "aten::thnn_conv2d", which calls "aten::_slow_conv2d_forward", would count calls twice.
_TF_BACKEND_PREFIX = re.compile(r"\A_?(?:MklNative|Mkl)")
_TORCH_BACKEND = re.compile(r"\Aaten::_?(?:mkldnn|cudnn|miopen|xnnpack|nnpack)_")
_TORCH_NATIVE_CONVOLUTION = re.compile(
    r"\Aaten::(?:_?slow_conv[23]d_(forward|backward)|"
    r"(?:slow_conv_dilated[23]d|_nnpack_spatial_convolution)(_backward)?)\Z"
)
# a transposed convolution's fallback meets cuDNN's and oneDNN's transposed convolution, never a plain one
_TORCH_NATIVE_TRANSPOSED = re.compile(r"\Aaten::slow_conv_transpose[23]d(_backward)?\Z")


def normalize_op_type(op_type: str) -> str:
    native = _TORCH_NATIVE_CONVOLUTION.match(op_type)
    if native:
        backward = native.group(1) == "backward" or native.group(2)
        return "aten::convolution_backward" if backward else "aten::convolution"
    transposed = _TORCH_NATIVE_TRANSPOSED.match(op_type)
    if transposed:
        return "aten::convolution_transpose" + (transposed.group(1) or "")
    op_type = _TORCH_BACKEND.sub("aten::", op_type)
    return _TF_BACKEND_PREFIX.sub("", op_type).lstrip("_") or op_type


# How a row of one framework op's implementations on two backends is named: the
# baseline's implementations, then the target's (``aten::mkldnn_convolution →
# aten::cudnn_convolution``); its type is the framework op.
IMPLEMENTATIONS_JOIN = " → "


# An op's memory, on its host row, and the host calls it is per (a device row counts the
# calls that launched kernels, which can be fewer).
_MEMORY = ("alloc_bytes", "net_bytes", "memory_calls")


def counted_rows(ops: Table) -> np.ndarray:
    """Positions of the rows whose time counts for their op: device time where the op
    launched kernels, else host time."""
    side, names = np.asarray(ops["side"]), np.asarray(ops["op_name"])
    device = side == DEVICE
    host = (side == HOST) & ~among(names, names[device].tolist())
    return np.flatnonzero(device | host)


def op_time_us(ops: Table) -> float:
    """A run's whole op time, µs: the time of the rows that count (``counted_rows``), what
    a comparison's ``*_total_us`` adds up to, without grouping anything."""
    return float(np.asarray(ops["self_us"], dtype="float64")[counted_rows(ops)].sum())


def effective_ops(ops: Table, normalize: bool = True) -> Table:
    """One row per op with the time that counts (``counted_rows``), device rows first;
    and the op's memory, which its host row holds, whichever row counts."""
    on_host = ops["side"] == HOST
    ops = ops.assign(memory_calls=np.where(on_host, ops["occurrences"], np.nan))
    counted = ops.take(counted_rows(ops))
    device = counted.take(counted["side"] == DEVICE)
    if len(device) and on_host.any():
        host = ops.take(on_host)
        op, names = first_appearance(host["op_name"].tolist())
        where = positions(device["op_name"].tolist(), names)
        has_host_row = where >= 0  # else the device row holds the op's memory
        memory = {column: known_sums(host[column], op, len(names))[np.maximum(where, 0)] for column in _MEMORY}
        device = device.assign(**{column: np.where(has_host_row, memory[column], device[column]) for column in _MEMORY})
    host = counted.take(counted["side"] == HOST)
    chosen = Table.concat(
        [
            device.assign(time_source=np.full(len(device), DEVICE, dtype=object)),
            host.assign(time_source=np.full(len(host), HOST, dtype=object)),
        ],
        [*device.names, "time_source"],
    )
    recorded = chosen["op_type"]
    return chosen.assign(recorded_type=recorded, op_type=_normalized(recorded) if normalize else recorded)


def _normalized(op_types: np.ndarray) -> np.ndarray:
    """``normalize_op_type`` of each, worked out once per distinct type."""
    known: dict[str, str] = {}
    return text_array(known.get(t) or known.setdefault(t, normalize_op_type(t)) for t in op_types.tolist())


def op_totals(
    ops: Table,
    group_by: str = "name",
    normalize: bool = True,
    modules: Table | None = None,
) -> Table:
    """One run's ops grouped by name, type or module: the ``key`` column, then op_type,
    occurrences, total_us, time_source, mean_us, share and the other per-side compare
    columns. ``modules``: the run's ``OpProfile.module_table``, for ``group_by="module"``."""
    return _group(_chosen(ops, group_by, normalize, modules), group_by)


def _chosen(ops: Table, group_by: str, normalize: bool, modules: Table | None) -> Table:
    chosen = effective_ops(ops, normalize)
    return in_modules(chosen, modules) if group_by == "module" else chosen


def implementations_matched(chosen: dict[str, Table]) -> dict[str, Table]:
    """Each side's ``effective_ops`` with one framework op's backend implementations made
    one row (``implementation_keys``) on both sides, so they compare as that op. Ops that
    both runs have (the dispatching ``aten::convolution`` itself) stay as they are, and so
    does an implementation whose op the other run has none of."""
    recorded = {
        side: dict(zip(table["op_name"].tolist(), table["recorded_type"].tolist())) for side, table in chosen.items()
    }
    renames = implementation_keys(recorded["baseline"], recorded["target"])
    if not renames:
        return chosen
    return {
        side: table.assign(op_name=text_array(renames.get(name, name) for name in table["op_name"].tolist()))
        for side, table in chosen.items()
    }


def implementation_keys(baseline: dict[str, str], target: dict[str, str]) -> dict[str, str]:
    """The one rule by which ``compare`` and ``check`` meet a framework op's backend
    implementations: ``baseline``/``target`` map each side's op names to their recorded
    types. Ops found on one side only, named by their type (PyTorch's), whose names are
    implementations of one framework op (``normalize_op_type`` gives both sides' the same
    type, not their own name: ``aten::mkldnn_convolution`` on the CPU,
    ``aten::cudnn_convolution`` on the GPU), get one key on both sides, ``baseline names →
    target names``. Returns name -> key for the names to rename."""
    one_sided = {
        side: {name: normalize_op_type(name) for name, kind in names.items() if name == kind and name not in other}
        for side, names, other in (("baseline", baseline, target), ("target", target, baseline))
    }
    one_sided = {side: {name: op for name, op in names.items() if op != name} for side, names in one_sided.items()}
    shared = set(one_sided["baseline"].values()) & set(one_sided["target"].values())
    key_of = {
        op: IMPLEMENTATIONS_JOIN.join(
            ", ".join(sorted(name for name, of in one_sided[side].items() if of == op)) for side in one_sided
        )
        for op in shared
    }
    return {name: key_of[op] for names in one_sided.values() for name, op in names.items() if op in shared}


def in_modules(chosen: Table, modules: Table | None) -> Table:
    """``effective_ops`` rows placed in modules (a ``module`` column): split over the
    modules each op ran in where ``modules`` has them (executions, time and bytes allocated
    per module; no spread or net memory for a part of an op), else each op whole in the
    scope its name gives
    (``sequential/conv2d/Relu`` -> ``sequential/conv2d``; ``(top level)`` without one)."""
    if modules is None or not len(modules):
        scopes = [name.rpartition("/")[0] or TOP_LEVEL for name in chosen["op_name"].tolist()]
        return chosen.assign(module=text_array(scopes), op_type=np.full(len(chosen), MODULE_TYPE, dtype=object))
    return _placed_in_modules(chosen, modules)


_MODULE_PARTS = ("module", "occurrences", "self_us", "alloc_bytes")  # what a module's row of an op has
_NOT_SPLIT = ("std_us", "p10_us", "median_us", "p90_us", "per_step_cv", "net_bytes", "memory_calls")


def _placed_in_modules(chosen: Table, modules: Table) -> Table:
    """``in_modules`` where the run recorded its modules: each op's rows, one per module it
    ran in (in the module table's order), then the ops in no module, whole."""
    keys = list(zip(chosen["side"].tolist(), chosen["op_name"].tolist(), chosen["recorded_type"].tolist()))
    rows_of: dict[tuple, list[int]] = {}
    for position, key in enumerate(
        zip(modules["side"].tolist(), modules["op_name"].tolist(), modules["op_type"].tolist())
    ):
        rows_of.setdefault(key, []).append(position)
    left = np.asarray([op for op, key in enumerate(keys) for _ in rows_of.get(key, ())], dtype=np.int64)
    right = np.asarray([row for key in keys for row in rows_of.get(key, ())], dtype=np.int64)
    module, count = modules["module"][right], len(left)
    placed = chosen.take(left)
    placed = placed.assign(
        module=np.where(module != "", module, OUTSIDE_MODULES),
        kernels=np.zeros(count, dtype=np.int64),
        occurrences=modules["occurrences"][right],
        self_us=modules["self_us"][right],
        # an op's memory is on its host rows, also where its kernels' time counts
        alloc_bytes=_host_memory(modules, placed["op_name"], placed["recorded_type"], module),
        **{column: np.full(count, np.nan) for column in _NOT_SPLIT},
    )
    unplaced = chosen.take(np.fromiter((key not in rows_of for key in keys), dtype=bool, count=len(keys)))
    unplaced = unplaced.assign(module=np.full(len(unplaced), OUTSIDE_MODULES, dtype=object))
    names = [*(name for name in chosen.names if name not in _MODULE_PARTS), *_MODULE_PARTS]
    both = Table.concat([placed, unplaced], names)
    return both.assign(op_type=np.full(len(both), MODULE_TYPE, dtype=object))


def _host_memory(modules: Table, op_names: np.ndarray, op_types: np.ndarray, module: np.ndarray) -> np.ndarray:
    """The bytes each (op name, type, module) allocated on the host, NaN where none is known."""
    host = modules.take(modules["side"] == HOST)
    codes, distinct = first_appearance(
        list(zip(host["op_name"].tolist(), host["op_type"].tolist(), host["module"].tolist()))
    )
    if not distinct:
        return np.full(len(op_names), np.nan)
    sums = known_sums(host["alloc_bytes"], codes, len(distinct))
    where = positions(list(zip(op_names.tolist(), op_types.tolist(), module.tolist())), distinct)
    return np.where(where >= 0, sums[np.maximum(where, 0)], np.nan)


_SPREAD = ("p10_us", "median_us", "p90_us", "per_step_cv")  # of one op: none for a type grouping several


def execution_square_sums(occurrences, self_us, std_us) -> np.ndarray:
    """Each row's sum of squared execution times, n·(std² + mean²), from its count, total
    and (population) std: sums of these add up across ops or runs, so their moments pool
    where percentiles cannot. NaN where the std is unknown."""
    executions = _positive(occurrences)
    return executions * (
        np.asarray(std_us, dtype=np.float64) ** 2 + (np.asarray(self_us, dtype=np.float64) / executions) ** 2
    )


def execution_std(square_sums, occurrences, self_us) -> np.ndarray:
    """The population std of the executions whose summed squares, count and total these are."""
    executions = _positive(occurrences)
    mean = np.asarray(self_us, dtype=np.float64) / executions
    return np.sqrt(np.clip(np.asarray(square_sums, dtype=np.float64) / executions - mean**2, 0.0, None))


def _positive(values) -> np.ndarray:
    """The values as floats, NaN where not above 0 (a count that divides nothing)."""
    values = np.asarray(values, dtype=np.float64)
    return np.where(values > 0, values, np.nan)


def _group(chosen: Table, group_by: str) -> Table:
    key = _KEYS[group_by]
    square_sum = execution_square_sums(chosen["occurrences"], chosen["self_us"], chosen["std_us"])
    codes, keys = first_appearance(chosen[key].tolist())
    if len(keys) == len(chosen):  # one op per key, as grouping by name nearly always gives
        grouped = {
            "key": chosen[key],
            "op_type": chosen["op_type"],
            "occurrences": chosen["occurrences"],
            "total_us": chosen["self_us"],
            "time_source": chosen["time_source"],
            "kernels": chosen["kernels"],
            **{column: chosen[column] for column in (*_SPREAD, *_MEMORY)},
        }
    else:
        grouped, square_sum = _summed_by_key(chosen, codes, keys, square_sum)
    return _per_side_columns(grouped, square_sum)


def _summed_by_key(chosen: Table, codes: np.ndarray, keys: list, square_sum: np.ndarray) -> tuple[dict, np.ndarray]:
    """Rows of one key added up (a type or a module grouping ops): sums, the first row's
    type and spread where the key has one row only, ``mixed`` where its time comes from
    host and device rows, memory NaN where no row recorded it."""
    count = len(keys)
    _, first = first_appearance_ids([codes])  # each key's first row (codes count in first-appearance order)
    members = group_counts(codes, count)
    single = members == 1
    on_device = group_counts(codes[chosen["time_source"] == DEVICE], count)
    time_source = np.where((on_device > 0) & (on_device < members), "mixed", chosen["time_source"][first]).astype(
        object
    )
    missing = group_counts(codes[np.isnan(square_sum)], count) > 0
    grouped = {
        "key": text_array(keys),
        "op_type": chosen["op_type"][first],
        "occurrences": integer_group_sums(chosen["occurrences"], codes, count),
        "total_us": group_sums(chosen["self_us"], codes, count),
        "time_source": time_source,
        "kernels": integer_group_sums(chosen["kernels"], codes, count),
        **{column: np.where(single, chosen[column][first], np.nan) for column in _SPREAD},
        **{column: known_sums(chosen[column], codes, count) for column in _MEMORY},
    }
    return grouped, np.where(missing, np.nan, group_sums(square_sum, codes, count))


def _per_side_columns(grouped: dict, square_sum: np.ndarray) -> Table:
    """The per-side compare columns of grouped rows: means per execution, spread, share."""
    occurrences = _positive(grouped["occurrences"])
    total = np.asarray(grouped["total_us"], dtype=np.float64)
    mean = total / occurrences
    # Device kernels (and memcpys) per execution of the op: a mean is per execution, and
    # this says how many kernels make one (none for host time).
    kernels_per_execution = _positive(grouped.pop("kernels")) / occurrences
    calls = grouped.pop("memory_calls")
    cv = execution_std(square_sum, grouped["occurrences"], total) / _positive(mean)
    all_time = np.nansum(total)
    return Table(
        {
            **grouped,
            "mean_us": mean,
            "kernels_per_execution": kernels_per_execution,
            "alloc_bytes_per_execution": np.asarray(grouped["alloc_bytes"], dtype=np.float64) / _positive(calls),
            "cv": cv,
            "noisy": (np.asarray(grouped["occurrences"]) >= 3) & above(cv, NOISY_CV),
            "share": total / all_time if all_time > 0 else np.zeros(len(total)),
        }
    )


def compare_ops(
    baseline_ops: Table,
    target_ops: Table,
    group_by: str = "name",
    normalize: bool = True,
    baseline_steps: int | None = None,
    target_steps: int | None = None,
    baseline_modules: Table | None = None,
    target_modules: Table | None = None,
) -> tuple[Table, dict]:
    if group_by not in COMPARE_GROUP_BY:
        raise ValueError(f"group_by must be one of {COMPARE_GROUP_BY}, not {group_by!r}")
    chosen = {
        "baseline": _chosen(baseline_ops, group_by, normalize, baseline_modules),
        "target": _chosen(target_ops, group_by, normalize, target_modules),
    }
    if group_by == "name" and normalize:
        chosen = implementations_matched(chosen)
    sides = {side: _group(table, group_by) for side, table in chosen.items()}
    # the baseline's keys in its order, then the target's own in theirs
    keys = list(dict.fromkeys([*sides["baseline"]["key"].tolist(), *sides["target"]["key"].tolist()]))
    columns, has_key = {"key": text_array(keys)}, {}
    for side, table in sides.items():
        where = positions(keys, table["key"].tolist())
        has_key[side] = where >= 0
        for name in ("op_type", *PER_SIDE_FIELDS):
            columns[f"{side}_{name}"] = _aligned(table[name], where)
    # an op is in a run where it has a mean there (a row of no executions has none)
    in_baseline, in_target = ~np.isnan(columns["baseline_mean_us"]), ~np.isnan(columns["target_mean_us"])
    status = np.select([in_baseline & in_target, in_baseline], [MATCHED, BASELINE_ONLY], TARGET_ONLY).astype(object)
    op_type = np.where(has_key["baseline"], columns.pop("baseline_op_type"), columns.pop("target_op_type"))
    target_mean = columns["target_mean_us"]
    rows = Table(
        {
            **columns,
            "status": status,
            "op_type": op_type,
            "speedup": columns["baseline_mean_us"] / np.where(target_mean > 0, target_mean, np.nan),
            "delta_mean_us": target_mean - columns["baseline_mean_us"],
        }
    )
    largest = np.fmax(rows["baseline_total_us"], rows["target_total_us"])
    rows = rows.take(np.argsort(-largest, kind="stable")).select(COMPARE_COLUMNS)
    return rows, summarize(rows, baseline_steps, target_steps)


def _aligned(values: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """``values`` at ``positions`` (-1: the side lacks the key): floats NaN there, the
    others (text, counts, flags) None, so counts stay integers and flags stay flags."""
    present = positions >= 0
    if values.dtype.kind == "f":
        return (
            np.where(present, values[np.maximum(positions, 0)], np.nan)
            if len(values)
            else np.full(len(positions), np.nan)
        )
    aligned = np.full(len(positions), None, dtype=object)
    aligned[present] = values[positions[present]].tolist() if present.any() else []
    return aligned


def compare_frame(rows: Table) -> pd.DataFrame:
    """The rows as a pandas DataFrame, counts and flags in pandas' nullable types (``Int64``,
    ``boolean``) so that a side's missing values stay missing."""
    import pandas as pd

    typed = {f"{side}_occurrences": "Int64" for side in SIDES} | {f"{side}_noisy": "boolean" for side in SIDES}
    return pd.DataFrame(dict(rows.items()), columns=rows.names).astype(typed)


def summarize(rows: Table, baseline_steps: int | None, target_steps: int | None) -> dict:
    """Whole-run figures. Overall speedup is the ratio of matched op time, per step when
    both runs know their step count (so runs profiled over different step counts compare
    fairly), else over the whole profile."""
    status = rows["status"]
    matched = rows.take(status == MATCHED)
    baseline_matched = float(matched["baseline_total_us"].sum())
    target_matched = float(matched["target_total_us"].sum())
    per_step = bool(baseline_steps and target_steps)
    if per_step:
        overall = (baseline_matched / baseline_steps) / (target_matched / target_steps) if target_matched else None
    else:
        overall = baseline_matched / target_matched if target_matched else None
    speedups = np.asarray(matched["speedup"], dtype="float64")
    speedups = speedups[np.isfinite(speedups) & (speedups > 0)]
    noisy = [bool(base) or bool(target) for base, target in zip(matched["baseline_noisy"], matched["target_noisy"])]
    baseline_total, target_total = np.nansum(rows["baseline_total_us"]), np.nansum(rows["target_total_us"])
    return {
        "matched_ops": int(len(matched)),
        "baseline_only_ops": int((status == BASELINE_ONLY).sum()),
        "target_only_ops": int((status == TARGET_ONLY).sum()),
        "faster_ops": int(above(matched["speedup"], 1.0).sum()),
        "noisy_ops": int(sum(noisy)),
        "slower_ops": int(below(matched["speedup"], 1.0).sum()),
        "baseline_matched_total_us": baseline_matched,
        "target_matched_total_us": target_matched,
        "baseline_total_us": float(baseline_total),
        "target_total_us": float(target_total),
        "overall_speedup": overall,
        "overall_speedup_basis": "per step" if per_step else "whole profile",
        "geomean_speedup": geometric_mean(speedups),
        "baseline_steps": baseline_steps,
        "target_steps": target_steps,
        "baseline_time_per_step_us": _per_step(baseline_total, baseline_steps),
        "target_time_per_step_us": _per_step(target_total, target_steps),
    }


def like_for_like(
    summary: dict, baseline: RunRecord, target: RunRecord, group_by: str, first: Headline
) -> tuple[dict, list[str]]:
    """Figures and notes that say what a comparison does and does not compare.
    ``baseline``/``target``: each run's ``batch_size``, ``framework`` and ``compiler``;
    ``first``: the headline (``analysis.step_time.headline``), which the notes explain.

    Returns ``whole_step_speedup`` (all op time per step, ops on one side included),
    ``per_sample_speedup`` (the same per sample, where the batch sizes differ), and
    ``op_time_speedup`` with its ``op_time_basis``: the one op time ratio shown beside the
    headline (per sample where the headline is, else per step, else over the whole
    profile); and the notes a user needs to read the headline figures right. Matched op
    time and the geometric mean stay in the document, out of the first screen, and no
    note repeats them."""
    base_step, target_step = summary["baseline_time_per_step_us"], summary["target_time_per_step_us"]
    whole = base_step / target_step if base_step and target_step else None
    sizes = [(run.batch_size, run.batch_size_source) for run in (baseline, target)]
    per_sample, batch_note = _per_sample(whole, *(evidenced_batch_size(*size) for size in sizes), first)
    notes = [
        different_models(summary, baseline, target),
        batch_note or unverified_batch_note(sizes),
        _flat_work_note(summary, baseline, target),
        _op_time_note(per_sample, whole, first),
        _no_shared_ops_note(summary, baseline, target, group_by),
        _compiler_note(baseline.compiler, target.compiler, first),
    ]
    figures = {"whole_step_speedup": whole, "per_sample_speedup": per_sample, **_op_time(summary, whole, per_sample)}
    return figures, [note for note in notes if note]


def _op_time(summary: dict, whole: float | None, per_sample: float | None) -> dict:
    """The op time ratio beside the headline, and what it is over."""
    if per_sample:
        return {"op_time_speedup": per_sample, "op_time_basis": "per sample"}
    if whole:
        return {"op_time_speedup": whole, "op_time_basis": "per step"}
    base, target = summary["baseline_total_us"], summary["target_total_us"]
    return {"op_time_speedup": base / target if base and target else None, "op_time_basis": "whole profile"}


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


# A CPU's op time grows with the samples a step: measured 1.4-3.8x for 4-64x on the demo's
# CNNs (TF and PyTorch). Growth below ratio ** _FLAT_EXPONENT (1.15x for 4x, 1.23x for 8x)
# across claimed batch sizes says the runs processed about the same batch. An accelerator
# is left out: a small model's kernels there take as long at batch 1 as at 64 (0.93x).
_FLAT_EXPONENT = 0.1
_FLAT_MIN_RATIO = 4


def _flat_work_note(summary: dict, baseline: RunRecord, target: RunRecord) -> str | None:
    """Where batch sizes that are not measured (an argument, a sidecar, a name) differ by
    ``_FLAT_MIN_RATIO`` or more on one CPU, but the ops' time a step barely moved: the
    sizes may not be what the runs processed (issue 51: fit()'s batch_size 1024 on a dataset
    batched by 128 read 9.80x per sample)."""
    sizes = [run.batch_size for run in (baseline, target)]
    overall = summary.get("overall_speedup")
    if not (all(sizes) and overall and baseline.device == target.device == "CPU"):
        return None
    if all((run.batch_size_source or "").startswith("data:") for run in (baseline, target)):
        return None  # both measured: the data says what each step held
    small, big = sorted(sizes)
    growth = 1 / overall if sizes[1] > sizes[0] else overall  # the larger batch's op time over the smaller's
    if big < _FLAT_MIN_RATIO * small or not below(growth, (big / small) ** _FLAT_EXPONENT):
        return None
    said = [f"{run.batch_size} ({(run.batch_size_source or 'unknown').split(':')[0]})" for run in (baseline, target)]
    return (
        f"The batch sizes say {said[0]} vs {said[1]}, {big / small:.0f}x the samples a step, but the ops' time a "
        f"step changed by {format_speedup(growth).rstrip('×')}x only: the runs may have processed about the same "
        "batch. Check how each run batched its input, and declare the size in its sidecar."
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
        return _layer_join_note(baseline, target)
    ops = summary["matched_ops"] + summary["baseline_only_ops"] + summary["target_only_ops"]
    if ops and summary["matched_ops"] / ops >= SAME_MODEL_JACCARD - 1e-9:
        return None
    return (
        f"Different models: {baseline.run} is {baseline.model} and {target.run} is {target.model}, and "
        f"{summary['matched_ops']} of their {ops} ops are in both, so every speedup here compares different "
        "work. The Matrix puts each model's runs on one row."
    )


def _layer_join_note(baseline: RunRecord, target: RunRecord) -> str | None:
    """Where the two runs are one model only because their layer scopes agree (their
    folders' names say nothing of it), the note says so, and how to part them: layer names
    carry no widths, so two models of the same layers and other widths read as one."""
    joined = [run for run in (baseline, target) if joined_by_layer_scopes(run.model_source)]
    if not joined:
        return None
    return (
        f"One model by its layers: {baseline.run} and {target.run} have the same layer scopes, and their folders' "
        "names say nothing of the model, so they are read as one model on two devices. Layer names carry no "
        "widths: if these are different models, give each run's model in an opcompare.json sidecar "
        '({"model": "..."}).'
    )


# Op time and wall time further apart than this (either way) get a note saying why.
_OP_TIME_APART = 1.25


def _framework_family(framework: str) -> str:
    """``PyTorch 2.13.0+cpu`` -> ``PyTorch``, ``TensorFlow 2.16.1 (Keras 3)`` and
    ``TensorFlow (summary.json)`` -> ``TensorFlow``: the words before a version or a note."""
    return re.match(r"[^\d(]*", framework).group().strip() or framework


def _per_step(total: float, steps: int | None) -> float | None:
    return float(total) / steps if steps else None
