"""Several runs of one configuration (repeats) as one profile: a run group stands where a
run stands in a comparison.

The group's executions are all its runs' executions: counts, times and memory add up, so
an op's mean per execution is its total self time over its total executions across the
runs (each execution weighs the same, whichever run it ran in), and the group's steps are
all its runs' profiled steps one after the other. The spread of one execution pools
exactly for the lowest, highest and standard deviation; percentiles cannot be pooled from
per-run percentiles and are left empty. Plain tables in, a profile out: no I/O.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tb_opcompare.analysis.compare import execution_square_sums, execution_std
from tb_opcompare.schema.events import ANNOTATION_COLUMNS, MODULE_COLUMNS, OP_COLUMNS, QUANTILES, ProfileFacts
from tb_opcompare.schema.groups import (
    first_appearance,
    group_counts,
    group_extremes,
    group_sums,
    integer_group_sums,
    known_sums,
)
from tb_opcompare.schema.optable import OP_DTYPES, STEP_DTYPES, OpProfile, per_step_cv
from tb_opcompare.schema.table import Table, text_array

_KEYS = ["side", "op_name", "op_type"]
_MEMORY = ["alloc_bytes", "net_bytes"]


def pool_profiles(profiles: list[OpProfile]) -> OpProfile:
    """One profile of all ``profiles``' executions (see the module's docstring)."""
    if len(profiles) == 1:
        return profiles[0]
    tables = [profile.op_table for profile in profiles]
    stacked = Table.concat(tables, OP_COLUMNS)
    codes, keys = first_appearance(list(zip(*(stacked[key].tolist() for key in _KEYS))))
    ops = _pooled_ops(stacked, codes, keys)
    step_table, step_count = _pooled_steps(profiles, codes)
    ops["per_step_cv"] = per_step_cv(step_table, len(keys), step_count)
    return OpProfile(
        facts=_pooled_facts([profile.facts for profile in profiles]),
        op_table=Table({column: ops[column] for column in OP_COLUMNS}),
        step_table=step_table,
        step_count=step_count if len(step_table) else 0,
        module_source=_added(
            [profile.module_table for profile in profiles],
            MODULE_COLUMNS[:4],
            ["occurrences", "self_us", "alloc_bytes"],
        ),
        annotation_table=_added(
            [profile.annotation_table for profile in profiles],
            ANNOTATION_COLUMNS[:2],
            ["occurrences", "total_us", "outermost_us"],
        ),
    )  # a timeline is one run's: the group draws none


def _pooled_ops(stacked: Table, codes: np.ndarray, keys: list[tuple[str, str, str]]) -> dict[str, np.ndarray]:
    """The op table's columns, one row per distinct op (``keys``, numbered by ``codes``):
    counts, times and memory added; the spread pooled where every run that has the op
    knows it; percentiles unknown."""
    count = len(keys)
    ops = {key: text_array(op[position] for op in keys) for position, key in enumerate(_KEYS)}
    for column in ("occurrences", "kernels"):
        ops[column] = integer_group_sums(stacked[column], codes, count)
    for column in ("total_us", "self_us"):
        ops[column] = group_sums(stacked[column], codes, count)
    for column in _MEMORY:
        ops[column] = known_sums(stacked[column], codes, count)
    runs = group_counts(codes, count)

    def known_in_every_run(column: str) -> np.ndarray:  # of the runs that have the op; else unknown pooled
        known: np.ndarray = group_counts(codes[~np.isnan(stacked[column])], count) == runs
        return known

    lowest, _ = group_extremes(stacked["min_us"], codes, count)
    _, highest = group_extremes(stacked["max_us"], codes, count)
    ops["min_us"] = np.where(known_in_every_run("min_us"), lowest, np.nan)
    ops["max_us"] = np.where(known_in_every_run("max_us"), highest, np.nan)
    occurrences = np.where(ops["occurrences"] > 0, ops["occurrences"], np.nan)
    ops["mean_us"] = ops["self_us"] / occurrences
    square_sums = execution_square_sums(stacked["occurrences"], stacked["self_us"], stacked["std_us"])
    std = execution_std(group_sums(square_sums, codes, count), ops["occurrences"], ops["self_us"])
    ops["std_us"] = np.where(known_in_every_run("std_us"), std, np.nan)
    for column in QUANTILES:
        ops[column] = np.full(count, np.nan)
    return {column: np.asarray(values, dtype=OP_DTYPES[column]) for column, values in ops.items()}


def _pooled_steps(profiles: list[OpProfile], codes: np.ndarray) -> tuple[Table, int]:
    """The runs' per-step cells one run after another, their rows those of the pooled
    table (``codes``: each stacked op row's); empty unless every run placed its executions
    in steps."""
    if not all(profile.step_count and len(profile.step_table) for profile in profiles):
        return Table.empty(STEP_DTYPES), 0
    cells, offset, first_row = [], 0, 0
    for profile in profiles:
        steps = profile.step_table
        cells.append(steps.assign(row=codes[first_row + steps["row"]], step=steps["step"] + offset))
        offset += profile.step_count
        first_row += len(profile.op_table)
    return Table.concat(cells, list(STEP_DTYPES)), offset


def _added(tables: list[Table], keys: list[str], added: list[str]) -> Table:
    """The rows of ``tables`` with one row per distinct ``keys``, ``added`` summed (NaN
    where none of a key's rows knows it: not recorded), in the first table's columns and
    dtypes."""
    if not sum(len(table) for table in tables):
        return tables[0]
    names = tables[0].names
    stacked = Table.concat(tables, names)
    codes, distinct = first_appearance(list(zip(*(stacked[key].tolist() for key in keys))))
    count = len(distinct)
    columns = {key: text_array(row[position] for row in distinct) for position, key in enumerate(keys)}
    for column in added:
        columns[column] = known_sums(stacked[column], codes, count)
    return Table({name: columns[name].astype(tables[0][name].dtype) for name in names})


def _pooled_facts(facts: list[ProfileFacts]) -> ProfileFacts:
    """The first run's facts, with the group's steps; a fact the runs disagree on is unknown."""
    pooled = dataclasses.replace(
        facts[0],
        warnings=list(dict.fromkeys(w for f in facts for w in f.warnings)),
        peak_memory_bytes={},
        step_times_us=[t for f in facts for t in f.step_times_us],
    )
    steps = [f.steps for f in facts]
    pooled.steps = sum(step for step in steps if step) if all(steps) else None
    pooled.steps_source = f"{facts[0].steps_source}, {len(facts)} runs" if pooled.steps else facts[0].steps_source
    pooled.step_time_us = (
        float(np.mean(pooled.step_times_us))
        if pooled.step_times_us and len(pooled.step_times_us) == pooled.steps
        else None
    )
    for name in ("device", "device_name", "batch_size", "precision", "compiler", "framework"):
        if len({getattr(f, name) for f in facts}) > 1:
            setattr(pooled, name, None)
            if hasattr(pooled, f"{name}_source"):
                setattr(pooled, f"{name}_source", "the runs of the group differ")
    peaks: dict[str, int] = {}
    for f in facts:
        for device, peak in f.peak_memory_bytes.items():
            peaks[device] = max(peaks.get(device, 0), peak)
    pooled.peak_memory_bytes = peaks
    memory_events = [f.memory_events for f in facts]
    pooled.memory_events = sum(m or 0 for m in memory_events) if all(m is not None for m in memory_events) else None
    return pooled
