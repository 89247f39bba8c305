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
import pandas as pd

from tb_opcompare.analysis.compare import execution_square_sums, execution_std
from tb_opcompare.schema.events import (
    ANNOTATION_COLUMNS,
    MODULE_COLUMNS,
    OP_COLUMNS,
    QUANTILES,
    STEP_COLUMNS,
    ProfileFacts,
)
from tb_opcompare.schema.optable import OpProfile, empty_memory_timeline, per_step_cv

_KEYS = ["side", "op_name", "op_type"]
_ADDED = ["occurrences", "kernels", "total_us", "self_us"]
_MEMORY = ["alloc_bytes", "net_bytes"]


def pool_profiles(profiles: list[OpProfile]) -> OpProfile:
    """One profile of all ``profiles``' executions (see the module's docstring)."""
    if len(profiles) == 1:
        return profiles[0]
    parts = []
    for position, profile in enumerate(profiles):
        ops = profile.ops
        parts.append(
            ops.assign(
                run=position,
                row=np.arange(len(ops)),
                square_sum=execution_square_sums(ops["occurrences"], ops["self_us"], ops["std_us"]),
            )
        )
    stacked = pd.concat(parts, ignore_index=True)
    grouped = stacked.groupby(_KEYS, sort=False)
    ops = grouped[_ADDED].sum()
    ops[_MEMORY] = grouped[_MEMORY].sum(min_count=1)
    runs = grouped.size()

    def known_in_every_run(column: str) -> pd.Series:  # of the runs that have the op; else unknown pooled
        return grouped[column].count() == runs

    ops["min_us"] = grouped["min_us"].min().where(known_in_every_run("min_us"))
    ops["max_us"] = grouped["max_us"].max().where(known_in_every_run("max_us"))
    ops["mean_us"] = ops["self_us"] / ops["occurrences"].where(ops["occurrences"] > 0)
    std = execution_std(grouped["square_sum"].sum(), ops["occurrences"], ops["self_us"])
    ops["std_us"] = pd.Series(std, index=ops.index).where(known_in_every_run("std_us"))
    for column in QUANTILES:
        ops[column] = np.nan
    ops = ops.reset_index()
    pooled_row = pd.Series(np.arange(len(ops)), index=pd.MultiIndex.from_frame(ops[_KEYS]))
    step_ops, step_count = _pooled_steps(profiles, stacked, pooled_row)
    ops["per_step_cv"] = per_step_cv(step_ops, len(ops), step_count)
    return OpProfile.from_frames(
        facts=_pooled_facts([profile.facts for profile in profiles]),
        ops=ops[OP_COLUMNS],
        step_ops=step_ops,
        step_count=step_count if len(step_ops) else 0,
        module_ops=_added(
            [profile.module_ops for profile in profiles], MODULE_COLUMNS[:4], ["occurrences", "self_us", "alloc_bytes"]
        ),
        annotations=_added(
            [profile.annotations for profile in profiles],
            ANNOTATION_COLUMNS[:2],
            ["occurrences", "total_us", "outermost_us"],
        ),
        memory_timeline=empty_memory_timeline(),
    )  # a timeline is one run's: the group draws none


def _pooled_steps(profiles: list[OpProfile], stacked: pd.DataFrame, pooled_row: pd.Series) -> tuple[pd.DataFrame, int]:
    """The runs' per-step cells one run after another, their rows those of the pooled
    table; empty unless every run placed its executions in steps."""
    if not all(profile.step_count and len(profile.step_ops) for profile in profiles):
        return pd.DataFrame(
            {column: pd.Series(dtype="float64" if column == "self_us" else "int64") for column in STEP_COLUMNS}
        ), 0
    cells, offset = [], 0
    for position, profile in enumerate(profiles):
        mine = stacked[stacked["run"] == position]
        rows = pooled_row.reindex(pd.MultiIndex.from_frame(mine[_KEYS])).to_numpy()
        cells.append(
            profile.step_ops.assign(
                row=rows[profile.step_ops["row"].to_numpy()], step=profile.step_ops["step"] + offset
            )
        )
        offset += profile.step_count
    return pd.concat(cells, ignore_index=True)[STEP_COLUMNS], offset


def _added(tables: list[pd.DataFrame], keys: list[str], added: list[str]) -> pd.DataFrame:
    frame = pd.concat(tables, ignore_index=True)
    if not len(frame):
        return tables[0]
    summed = frame.groupby(keys, sort=False, dropna=False)[added].sum(min_count=1).reset_index()  # NaN: not recorded
    return summed[list(tables[0].columns)].astype(tables[0].dtypes.to_dict())


def _pooled_facts(facts: list[ProfileFacts]) -> ProfileFacts:
    """The first run's facts, with the group's steps; a fact the runs disagree on is unknown."""
    pooled = dataclasses.replace(
        facts[0],
        warnings=list(dict.fromkeys(w for f in facts for w in f.warnings)),
        peak_memory_bytes={},
        step_times_us=[t for f in facts for t in f.step_times_us],
    )
    steps = [f.steps for f in facts]
    pooled.steps = sum(steps) if all(steps) else None
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
    peaks = {}
    for f in facts:
        for device, peak in f.peak_memory_bytes.items():
            peaks[device] = max(peaks.get(device, 0), peak)
    pooled.peak_memory_bytes = peaks
    memory_events = [f.memory_events for f in facts]
    pooled.memory_events = sum(memory_events) if all(m is not None for m in memory_events) else None
    return pooled
