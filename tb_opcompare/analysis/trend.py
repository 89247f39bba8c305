"""A model across many runs: each op's mean per execution at each point of a chosen order
(recording time, a label, a version), with a 95% interval where a point pools several
runs. The maths only, no I/O."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pandas as pd

from tb_opcompare.analysis.confidence import WHOLE_STEP, RunSamples, log_run_means, mean_with_interval, pooled_step_time
from tb_opcompare.analysis.headline import OP_TIME_PER_STEP, STEP_WALL_TIME, StepBasis

TREND_COLUMNS = ["key", "point", "mean_us", "low_us", "high_us", "runs"]


def trend_table(
    points: list[list[RunSamples]], keys: list[str] | None = None, walls: list[list[Any]] | None = None
) -> tuple[pd.DataFrame, StepBasis | Literal["mixed"]]:
    """One row per key (op keys, then the whole step) and point (its position in
    ``points``): the geometric mean of the point's runs' means per execution, and where
    the point has two runs or more, the 95% interval of that mean (Student's t on the log
    means). ``keys`` None: every op any run has. ``walls``: each point's runs' step wall
    times; where every run of a point has them, its whole step is the headline's figure
    (``confidence.pooled_step_time``), else all op time per step. Returns the table and
    what the whole step is (``step wall time``, ``op time per step`` or ``mixed``)."""
    if keys is None:
        keys = sorted(set().union(*(set(run.keys) for runs in points for run in runs)))
    index = pd.Index(list(keys), dtype=object)
    frames: list[pd.DataFrame] = []
    bases: set[StepBasis] = set()
    for position, runs in enumerate(points):
        mean, margin, counts = mean_with_interval(log_run_means(runs, index))
        frame = pd.DataFrame(
            {
                "key": [*index, WHOLE_STEP],
                "point": position,
                "mean_us": np.exp(mean),
                "low_us": np.exp(mean - margin),
                "high_us": np.exp(mean + margin),
                "runs": counts,
            }
        )
        wall = pooled_step_time(walls[position]) if walls else None
        if wall:
            frame.loc[len(frame) - 1, ["mean_us", "low_us", "high_us"]] = wall
        bases.add(STEP_WALL_TIME if wall else OP_TIME_PER_STEP)
        frames.append(frame)
    basis: StepBasis | Literal["mixed"] = bases.pop() if len(bases) == 1 else "mixed"
    return pd.concat(frames, ignore_index=True)[TREND_COLUMNS], basis


def largest_keys(runs: list[RunSamples], top: int) -> list[str]:
    """The ``top`` op keys by their largest share of a run's op time, in that order."""
    shares = pd.concat([pd.Series(run.total_us / max(run.total_us.sum(), 1e-300), index=run.keys) for run in runs])
    largest = shares.groupby(level=0).max()
    return list(largest.sort_index().sort_values(ascending=False, kind="stable").index[:top])
