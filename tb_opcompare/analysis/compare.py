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

import re
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from tb_opcompare.analysis.numerics import above, below, geometric_mean
from tb_opcompare.schema.contract import COMPARE_COLUMNS, PER_SIDE_FIELDS, SIDES, STATUSES
from tb_opcompare.schema.dimensions import COMPARE_GROUP_BY
from tb_opcompare.schema.events import DEVICE, HOST
from tb_opcompare.schema.groups import (
    among,
    first_appearance,
    first_appearance_ids,
    first_seen,
    group_counts,
    group_sums,
    integer_group_sums,
    known_sums,
    positions,
    starting_with,
)
from tb_opcompare.schema.table import Gathered, Table, repeated_text, text_array

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


# Every type ``normalize_op_type`` changes starts with one of these (each rule above is
# anchored at the start): the others are their own type, found at C speed (a million
# distinct op names took 14 s through the rules one by one).
_NORMALIZED_PREFIXES = (
    "_",
    "Mkl",
    "aten::_",
    "aten::slow_conv",
    *(f"aten::{backend}_" for backend in ("mkldnn", "cudnn", "miopen", "xnnpack", "nnpack")),
)


def _may_normalize(op_types: list[str]) -> list[str]:
    """The types ``normalize_op_type`` may change (``_NORMALIZED_PREFIXES``), found at C speed."""
    return [op_types[at] for at in np.flatnonzero(starting_with(op_types, _NORMALIZED_PREFIXES)).tolist()]


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
    if not device.any():  # a host-only run: no name to look up (a million of them took 0.1 s a request)
        return np.flatnonzero(side == HOST)
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
    counted = _rows_at(ops, counted_rows(ops))
    device = counted.take(counted["side"] == DEVICE)
    if len(device) and on_host.any():
        host = ops.take(on_host)
        op, names = first_appearance(host["op_name"].tolist())
        where = positions(device["op_name"].tolist(), names)
        has_host_row = where >= 0  # else the device row holds the op's memory
        memory = {column: known_sums(host[column], op, len(names))[np.maximum(where, 0)] for column in _MEMORY}
        device = device.assign(**{column: np.where(has_host_row, memory[column], device[column]) for column in _MEMORY})
    host = _rows_at(counted, np.flatnonzero(counted["side"] == HOST))
    host = host.assign(time_source=repeated_text(len(host), HOST))
    if len(device):
        device = device.assign(time_source=repeated_text(len(device), DEVICE))
        chosen = Table.concat([device, host], device.names)
    else:  # host time only (a CPU run): its rows as they are, not a copy of each column
        chosen = host
    recorded = chosen["op_type"]
    return chosen.assign(recorded_type=recorded, op_type=_normalized(recorded) if normalize else recorded)


def _rows_at(table: Table, positions: np.ndarray) -> Table:
    """``table.take(positions)``; the table itself where they are all its rows, in order."""
    return table if len(positions) == len(table) else table.take(positions)


def _normalized(op_types: np.ndarray) -> np.ndarray:
    """``normalize_op_type`` of each, worked out once per distinct type that it may change."""
    listed = op_types.tolist()
    changed = {t: normalize_op_type(t) for t in set(_may_normalize(listed))}
    if not any(t != normal for t, normal in changed.items()):
        return op_types
    return text_array(map(changed.get, listed, listed))


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
    recorded = {side: _may_be_implementations(table) for side, table in chosen.items()}
    renames = implementation_keys(recorded["baseline"], recorded["target"])
    if not renames:
        return chosen
    return {
        side: table.assign(op_name=text_array(renames.get(name, name) for name in table["op_name"].tolist()))
        for side, table in chosen.items()
    }


def _may_be_implementations(table: Table) -> dict[str, str]:
    """The op names ``implementation_keys`` may rename (those ``normalize_op_type`` may
    change, ``_may_normalize``) with their recorded types, found at C speed: whether a
    name is one depends on the name alone, so the key it gets is the same as from every
    name (a million distinct op names made two dicts of a million names)."""
    names = table["op_name"]
    starts = starting_with(names.tolist(), _NORMALIZED_PREFIXES)
    return dict(zip(names[starts].tolist(), table["recorded_type"][starts].tolist()))


def implementation_keys(baseline: dict[str, str], target: dict[str, str]) -> dict[str, str]:
    """The one rule by which ``compare`` and ``check`` meet a framework op's backend
    implementations: ``baseline``/``target`` map each side's op names to their recorded
    types. Ops found on one side only, named by their type (PyTorch's), whose names are
    implementations of one framework op (``normalize_op_type`` gives both sides' the same
    type, not their own name: ``aten::mkldnn_convolution`` on the CPU,
    ``aten::cudnn_convolution`` on the GPU), get one key on both sides, ``baseline names →
    target names``. Returns name -> key for the names to rename."""
    one_sided = {
        side: {
            name: normalize_op_type(name)
            for name in _may_normalize(list(names))
            if names[name] == name and name not in other
        }
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
        return chosen.assign(module=text_array(scopes), op_type=repeated_text(len(chosen), MODULE_TYPE))
    return _placed_in_modules(chosen, modules)


_MODULE_PARTS = ("module", "occurrences", "self_us", "alloc_bytes")  # what a module's row of an op has
_NOT_SPLIT = ("std_us", "p10_us", "median_us", "p90_us", "per_step_cv", "net_bytes", "memory_calls")


def _placed_in_modules(chosen: Table, modules: Table) -> Table:
    """``in_modules`` where the run recorded its modules: each op's rows, one per module it
    ran in (in the module table's order), then the ops in no module, whole."""
    keys = list(zip(chosen["side"].tolist(), chosen["op_name"].tolist(), chosen["recorded_type"].tolist()))
    rows_of: dict[tuple[str, str, str], list[int]] = {}
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
    unplaced = unplaced.assign(module=repeated_text(len(unplaced), OUTSIDE_MODULES))
    names = [*(name for name in chosen.names if name not in _MODULE_PARTS), *_MODULE_PARTS]
    both = Table.concat([placed, unplaced], names)
    return both.assign(op_type=repeated_text(len(both), MODULE_TYPE))


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


def execution_square_sums(occurrences: ArrayLike, self_us: ArrayLike, std_us: ArrayLike) -> np.ndarray:
    """Each row's sum of squared execution times, n·(std² + mean²), from its count, total
    and (population) std: sums of these add up across ops or runs, so their moments pool
    where percentiles cannot. NaN where the std is unknown."""
    executions = _positive(occurrences)
    squares: np.ndarray = executions * (
        np.asarray(std_us, dtype=np.float64) ** 2 + (np.asarray(self_us, dtype=np.float64) / executions) ** 2
    )
    return squares


def execution_std(square_sums: ArrayLike, occurrences: ArrayLike, self_us: ArrayLike) -> np.ndarray:
    """The population std of the executions whose summed squares, count and total these are."""
    executions = _positive(occurrences)
    mean = np.asarray(self_us, dtype=np.float64) / executions
    std: np.ndarray = np.sqrt(np.clip(np.asarray(square_sums, dtype=np.float64) / executions - mean**2, 0.0, None))
    return std


def _positive(values: ArrayLike) -> np.ndarray:
    """The values as floats, NaN where not above 0 (a count that divides nothing)."""
    array = np.asarray(values, dtype=np.float64)
    return np.where(array > 0, array, np.nan)


def _group(chosen: Table, group_by: str, coded: tuple[np.ndarray, Any] | None = None) -> Table:
    """One row per key; ``coded``: each row's key code and the keys (as ``first_appearance``
    of the key column gives them; a list or an object array), where the caller has them."""
    key = _KEYS[group_by]
    square_sum = execution_square_sums(chosen["occurrences"], chosen["self_us"], chosen["std_us"])
    codes, keys = coded if coded is not None else first_appearance(chosen[key].tolist())
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


def _summed_by_key(
    chosen: Table, codes: np.ndarray, keys: list[Any], square_sum: np.ndarray
) -> tuple[dict[str, Any], np.ndarray]:
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


def _per_side_columns(grouped: dict[str, Any], square_sum: np.ndarray) -> Table:
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
) -> tuple[Table, dict[str, Any]]:
    if group_by not in COMPARE_GROUP_BY:
        raise ValueError(f"group_by must be one of {COMPARE_GROUP_BY}, not {group_by!r}")
    chosen = {
        "baseline": _chosen(baseline_ops, group_by, normalize, baseline_modules),
        "target": _chosen(target_ops, group_by, normalize, target_modules),
    }
    if group_by == "name" and normalize:
        chosen = implementations_matched(chosen)
    key = _KEYS[group_by]
    coded, keys, where = _joined_keys(chosen["baseline"][key], chosen["target"][key])
    sides = {side: _group(table, group_by, coded[side]) for side, table in chosen.items()}
    # the rows in their final order (the most time on either side first), each column
    # gathered once, in that order
    largest = np.fmax(
        _aligned(sides["baseline"]["total_us"], where["baseline"]),
        _aligned(sides["target"]["total_us"], where["target"]),
    )
    order = np.argsort(-largest, kind="stable")
    columns: dict[str, Any] = {"key": _aligned(keys, order, distinct=True)}
    has_key = {}
    for side, table in sides.items():
        at = where[side][order]
        has_key[side] = at >= 0
        for name in ("op_type", *PER_SIDE_FIELDS):
            # made here, those the rows and their summary are made of; the others when first asked for
            made_now = name in ("op_type", "mean_us", "total_us")
            columns[f"{side}_{name}"] = (
                _aligned(table[name], at, distinct=True)
                if made_now
                else Gathered(table[name], at, _distinct_aligned, _aligned)
            )
    # an op is in a run where it has a mean there (a row of no executions has none)
    in_baseline, in_target = ~np.isnan(columns["baseline_mean_us"]), ~np.isnan(columns["target_mean_us"])
    status = np.array(STATUSES, dtype=object)[np.where(in_baseline & in_target, 0, np.where(in_baseline, 1, 2))]
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
    ).select(COMPARE_COLUMNS)
    return rows, summarize(rows, baseline_steps, target_steps)


def _joined_keys(
    baseline: np.ndarray, target: np.ndarray
) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], np.ndarray, dict[str, np.ndarray]]:
    """Both sides' key columns (a key per row, repeats allowed) numbered at once: each
    side's (row -> key code, distinct keys) as ``first_appearance`` gives them; every key,
    the baseline's in its order, then the target's own in theirs; and where each key is on
    each side (-1: not there). One pass a row (``first_seen``): a key's stamp is the count
    at which it was first met, so a stamp below the baseline's length is a baseline key (a
    million op names a side: grouping each side and then joining them took 2.1-2.5 s of
    dict passes, one dict pass 1.1-1.4 s, the C numbering a fraction of that)."""
    baseline_stamps, target_stamps = first_seen([baseline.tolist(), target.tolist()])
    coded: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    group_stamps: dict[str, np.ndarray] = {}
    for side, rows, side_stamps in (("baseline", baseline, baseline_stamps), ("target", target, target_stamps)):
        if not len(side_stamps) or np.bincount(side_stamps).max() == 1:  # each row its own key (grouping by name)
            codes = first = np.arange(len(rows))
        else:
            codes, first = first_appearance_ids([side_stamps])
        coded[side] = (codes, rows if len(first) == len(rows) else rows[first])
        group_stamps[side] = side_stamps[first]
    position_of = np.full(len(baseline), -1, dtype=np.int64)  # a baseline stamp -> its key's position
    count = len(group_stamps["baseline"])
    position_of[group_stamps["baseline"]] = np.arange(count)
    own = group_stamps["target"] >= len(baseline)
    found = np.full(len(own), -1, dtype=np.int64)
    found[~own] = position_of[group_stamps["target"][~own]]
    found[own] = count + np.arange(int(own.sum()))
    keys = np.concatenate([coded["baseline"][1], coded["target"][1][own]]).astype(object, copy=False)
    target_where = np.full(len(keys), -1, dtype=np.int64)
    target_where[found] = np.arange(len(found))
    baseline_where = np.full(len(keys), -1, dtype=np.int64)
    baseline_where[:count] = np.arange(count)
    return coded, keys, {"baseline": baseline_where, "target": target_where}


def _distinct_aligned(values: np.ndarray, positions: np.ndarray) -> np.ndarray:
    return _aligned(values, positions, distinct=True)


def _aligned(values: np.ndarray, positions: np.ndarray, distinct: bool = False) -> np.ndarray:
    """``values`` at ``positions`` (-1: the side lacks the key; ``distinct``: the others are
    distinct): floats NaN there, the others (text, counts, flags) None, so counts stay
    integers and flags stay flags."""
    present = positions >= 0
    if values.dtype.kind == "f" and present.all():
        gathered: np.ndarray = values[positions]
        return gathered
    if values.dtype.kind == "f":
        return (
            np.where(present, values[np.maximum(positions, 0)], np.nan)
            if len(values)
            else np.full(len(positions), np.nan)
        )
    if present.all():  # Python values (ints, flags, text), as an object array holds them
        if distinct and len(positions) == len(values):
            return _permuted(values, positions)
        gathered_objects: np.ndarray = values[positions].astype(object)
        return gathered_objects
    aligned = np.full(len(positions), None, dtype=object)
    aligned[present] = values[positions[present]].astype(object) if present.any() else []
    return aligned


def _permuted(values: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``values[order]`` as an object array, ``order`` a permutation (positions of distinct
    keys). Text is scattered rather than gathered: numpy gathers an object array a
    third of a microsecond a row, scatters it several times faster."""
    if values.dtype != object:
        made: np.ndarray = values[order].astype(object)
        return made
    inverse = np.empty(len(order), dtype=np.intp)
    inverse[order] = np.arange(len(order))
    permuted = np.empty(len(order), dtype=object)
    permuted[inverse] = values
    return permuted


def compare_frame(rows: Table) -> pd.DataFrame:
    """The rows as a pandas DataFrame, counts and flags in pandas' nullable types (``Int64``,
    ``boolean``) so that a side's missing values stay missing."""
    import pandas as pd

    typed = {f"{side}_occurrences": "Int64" for side in SIDES} | {f"{side}_noisy": "boolean" for side in SIDES}
    return pd.DataFrame(dict(rows.items()), columns=rows.names).astype(typed)


_SUMMED = ("baseline_total_us", "target_total_us", "speedup", "baseline_noisy", "target_noisy")


def summarize(rows: Table, baseline_steps: int | None, target_steps: int | None) -> dict[str, Any]:
    """Whole-run figures. Overall speedup is the ratio of matched op time, per step when
    both runs know their step count (so runs profiled over different step counts compare
    fairly), else over the whole profile."""
    status = rows["status"]
    matched = rows.select(_SUMMED).take(status == MATCHED)
    baseline_matched = float(matched["baseline_total_us"].sum())
    target_matched = float(matched["target_total_us"].sum())
    per_step = bool(baseline_steps and target_steps)
    if baseline_steps and target_steps:
        overall = (baseline_matched / baseline_steps) / (target_matched / target_steps) if target_matched else None
    else:
        overall = baseline_matched / target_matched if target_matched else None
    speedups = np.asarray(matched["speedup"], dtype="float64")
    speedups = speedups[np.isfinite(speedups) & (speedups > 0)]
    # flags, or None where a side lacks the op (none does on a matched row); astype(bool) is bool() at C speed
    noisy = matched["baseline_noisy"].astype(bool) | matched["target_noisy"].astype(bool)
    baseline_total, target_total = np.nansum(rows["baseline_total_us"]), np.nansum(rows["target_total_us"])
    return {
        "matched_ops": int(len(matched)),
        "baseline_only_ops": int((status == BASELINE_ONLY).sum()),
        "target_only_ops": int((status == TARGET_ONLY).sum()),
        "faster_ops": int(above(matched["speedup"], 1.0).sum()),
        "noisy_ops": int(noisy.sum()),
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


def _per_step(total: float, steps: int | None) -> float | None:
    return float(total) / steps if steps else None
