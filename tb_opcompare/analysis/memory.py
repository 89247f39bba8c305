"""Memory of two runs side by side: the maths only, no I/O.

Per op, the memory columns of the comparison itself (``compare.compare_ops`` grouped by op
name: each op's own allocations, on its host row, whichever row's time counts), narrowed to
the ops that allocated or freed anything, largest first, with the ratio between the runs.
Per run, what its op table and its ``memory_timeline`` say of the whole run: bytes allocated,
memory events and both per profiled step, and the memory-over-time series per device.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tb_opcompare.schema.contract import MEMORY_COLUMNS
from tb_opcompare.schema.events import HOST


def memory_rows(compare_rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of a comparison by op name (``compare_ops(..., group_by="name")``) as
    ``MEMORY_COLUMNS``: only the ops that allocated or freed memory on either side, the
    largest allocation (of either run) first. ``ratio`` is the target's bytes allocated
    per execution over the baseline's: a per-call figure, so runs profiled over different
    step counts compare."""
    allocated = compare_rows[["baseline_alloc_bytes", "target_alloc_bytes"]]
    freed_or_kept = compare_rows[["baseline_net_bytes", "target_net_bytes"]].fillna(0.0) != 0
    moved = (allocated.fillna(0.0) > 0).any(axis=1) | freed_or_kept.any(axis=1)
    rows = compare_rows[moved]
    baseline = rows["baseline_alloc_bytes_per_execution"]
    ratio = rows["target_alloc_bytes_per_execution"] / baseline.where(baseline > 0)
    largest = rows[["baseline_alloc_bytes", "target_alloc_bytes"]].max(axis=1).fillna(0.0)
    rows = rows.assign(ratio=ratio, _largest=largest).sort_values("_largest", ascending=False, kind="stable")
    return rows[MEMORY_COLUMNS].reset_index(drop=True)


def allocated_bytes(ops: pd.DataFrame) -> float | None:
    """Bytes every op itself allocated over the profile (host rows hold an op's memory);
    None where the profile records no allocation per op."""
    host = ops.loc[ops["side"] == HOST, "alloc_bytes"]
    total = host.sum(min_count=1)
    return None if pd.isna(total) else float(total)


def per_step(value: float | None, steps: int | None) -> float | None:
    return None if value is None or not steps else value / steps


def timeline_series(timeline: pd.DataFrame) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Each device's (name, times µs, bytes in use), devices in the table's order."""
    series = []
    for device, samples in timeline.groupby("device", sort=False):
        series.append(
            (
                str(device),
                samples["time_us"].to_numpy(dtype=np.float64),
                samples["bytes_in_use"].to_numpy(dtype=np.float64),
            )
        )
    return series
