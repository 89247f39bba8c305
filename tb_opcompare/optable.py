"""The per-op table every reader produces, and the run facts that travel with it.

Schema of ``OpProfile.ops`` (a pandas DataFrame, one row per side x op):

==============  =======  ===================================================================
column          dtype    meaning
==============  =======  ===================================================================
side            str      ``host`` (work on CPU threads) or ``device`` (GPU kernels, memcpys)
op_name         str      TF graph node name / PyTorch op name (``aten::conv2d``)
op_type         str      TF op type as recorded (``_MklNativeFusedConv2D``); for PyTorch the
                         op name
occurrences     int64    how many times the op ran. Device rows count op invocations
                         (launching host op instances) where the trace links kernels to
                         them, else the host occurrences of the same op, else kernels
kernels         int64    device rows: kernel and memcpy events summed; host rows: 0
total_us        float64  host: inclusive wall time; device: sum of the op's kernels
self_us         float64  host: total minus nested op events on the same thread;
                         device: equal to ``total_us`` (kernels do not nest)
mean_us         float64  ``self_us / occurrences``, the number comparisons use
min_us          float64  smallest self time of one occurrence (NaN where the trace does
                         not say which kernels belong to one occurrence)
max_us          float64  largest self time of one occurrence (as above)
std_us          float64  population standard deviation of per-occurrence self time
==============  =======  ===================================================================

``OpProfile.facts`` holds what is known about the whole run (``ProfileFacts``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pandas as pd

OP_COLUMNS = [
    "side",
    "op_name",
    "op_type",
    "occurrences",
    "kernels",
    "total_us",
    "self_us",
    "mean_us",
    "min_us",
    "max_us",
    "std_us",
]

HOST = "host"
DEVICE = "device"


@dataclasses.dataclass
class ProfileFacts:
    """Run-level facts read from the profile itself (then sidecar, then run name)."""

    format: str
    device: str = "CPU"  # CPU, GPU, TPU or another accelerator's kind
    device_name: str | None = None
    steps: int | None = None
    steps_source: str = "unknown: the profile has no step markers"
    step_time_us: float | None = None  # mean wall time of one profiled step, where markers give it
    batch_size: int | None = None
    batch_size_source: str | None = None
    framework: str | None = None
    warnings: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class OpProfile:
    facts: ProfileFacts
    ops: pd.DataFrame


class OpEvents:
    """Collects one record per op occurrence (host) or kernel (device).

    ``invocation`` groups device kernels into the host op occurrence that launched
    them, where the trace says so (PyTorch correlation ids); None where it does not.
    """

    def __init__(self) -> None:
        self.side: list[str] = []
        self.name: list[str] = []
        self.type: list[str] = []
        self.total: list[float] = []
        self.self_time: list[float] = []
        self.invocation: list[object] = []
        self.host_partials: list[pd.DataFrame] = []  # per-op sums from add_host_batch

    def add(self, side: str, name: str, op_type: str, total_us: float, self_us: float, invocation: object = None) -> None:
        self.side.append(side)
        self.name.append(name)
        self.type.append(op_type)
        self.total.append(total_us)
        self.self_time.append(self_us)
        self.invocation.append(invocation)

    def add_host_batch(self, ops: list[tuple[str, str]], totals_us: np.ndarray, selfs_us: np.ndarray) -> None:
        """Many host occurrences at once, folded straight into per-op sums so a profile
        with millions of events never holds one record per event."""
        if ops:
            self.host_partials.append(_fold_host(ops, totals_us, selfs_us))

    def __len__(self) -> int:
        return len(self.name) + sum(int(p["occurrences"].sum()) for p in self.host_partials)


def build_op_table(events: OpEvents) -> pd.DataFrame:
    """Aggregate occurrences into the per-op table documented above."""
    if not len(events):
        return empty_op_table()
    frame = pd.DataFrame(
        {
            "side": events.side,
            "op_name": events.name,
            "op_type": events.type,
            "total_us": np.asarray(events.total, dtype="float64"),
            "self_us": np.asarray(events.self_time, dtype="float64"),
        }
    )
    host = frame[frame["side"] == HOST]
    device = frame[frame["side"] == DEVICE]
    tables = []
    partials = list(events.host_partials)
    if len(host):
        partials.append(_fold_host(list(zip(host["op_name"], host["op_type"])), host["total_us"].to_numpy(),
                                   host["self_us"].to_numpy()))
    if partials:
        tables.append(_combine_host(partials))
    if len(device):
        invocation = pd.Series(events.invocation, dtype="object")[device.index]
        tables.append(_aggregate_device(device, invocation, tables[0] if tables else None))
    table = pd.concat(tables, ignore_index=True)
    return table[OP_COLUMNS]


def empty_op_table() -> pd.DataFrame:
    dtypes = {"side": "object", "op_name": "object", "op_type": "object", "occurrences": "int64", "kernels": "int64"}
    return pd.DataFrame({c: pd.Series(dtype=dtypes.get(c, "float64")) for c in OP_COLUMNS})


_HOST_KEYS = ["side", "op_name", "op_type"]


def _fold_host(ops: list[tuple[str, str]], totals_us: np.ndarray, selfs_us: np.ndarray) -> pd.DataFrame:
    """Host occurrences folded into per-op sums (with the sum of squares, for std)."""
    index: dict[tuple[str, str], int] = {}
    codes = np.fromiter((index.setdefault(op, len(index)) for op in ops), dtype=np.int64, count=len(ops))
    size = len(index)
    minimum = np.full(size, np.inf)
    maximum = np.full(size, -np.inf)
    np.minimum.at(minimum, codes, selfs_us)
    np.maximum.at(maximum, codes, selfs_us)
    keys = list(index)
    return pd.DataFrame({
        "side": HOST,
        "op_name": [k[0] for k in keys],
        "op_type": [k[1] for k in keys],
        "occurrences": np.bincount(codes, minlength=size),
        "total_us": np.bincount(codes, weights=totals_us, minlength=size),
        "self_us": np.bincount(codes, weights=selfs_us, minlength=size),
        "self_sq": np.bincount(codes, weights=selfs_us * selfs_us, minlength=size),
        "min_us": minimum,
        "max_us": maximum,
    })


def _combine_host(partials: list[pd.DataFrame]) -> pd.DataFrame:
    """Per-op sums from several lines, hosts or batches into the host rows."""
    combined = pd.concat(partials, ignore_index=True) if len(partials) > 1 else partials[0]
    table = combined.groupby(_HOST_KEYS, sort=False).agg(
        occurrences=("occurrences", "sum"),
        total_us=("total_us", "sum"),
        self_us=("self_us", "sum"),
        self_sq=("self_sq", "sum"),
        min_us=("min_us", "min"),
        max_us=("max_us", "max"),
    ).reset_index()
    table["occurrences"] = table["occurrences"].astype("int64")
    table["mean_us"] = table["self_us"] / table["occurrences"]
    variance = table.pop("self_sq") / table["occurrences"] - table["mean_us"] ** 2
    table["std_us"] = np.sqrt(variance.clip(lower=0.0))
    table["kernels"] = 0
    return table


def _aggregate_device(device: pd.DataFrame, invocation: pd.Series, host_table: pd.DataFrame | None) -> pd.DataFrame:
    keys = ["side", "op_name", "op_type"]
    table = device.groupby(keys, sort=False).agg(
        kernels=("total_us", "size"), total_us=("total_us", "sum")
    ).reset_index()
    table["self_us"] = table["total_us"]
    linked = device.assign(invocation=invocation.to_numpy())
    linked = linked[linked["invocation"].notna()]
    per_invocation = pd.DataFrame(columns=[*keys, "occurrences", "min_us", "max_us", "std_us"])
    if len(linked):
        sums = linked.groupby([*keys, "invocation"], sort=False)["total_us"].sum().reset_index()
        per_op = sums.groupby(keys, sort=False)["total_us"]
        per_invocation = per_op.agg(occurrences="size", min_us="min", max_us="max").reset_index()
        per_invocation["std_us"] = per_op.std(ddof=0).to_numpy()
    table = table.merge(per_invocation, on=keys, how="left")
    if host_table is not None and len(host_table):
        host_occurrences = host_table.groupby("op_name")["occurrences"].sum()
        table["occurrences"] = table["occurrences"].fillna(table["op_name"].map(host_occurrences))
    table["occurrences"] = table["occurrences"].fillna(table["kernels"]).astype("int64")
    table["mean_us"] = table["self_us"] / table["occurrences"]
    return table


def add_nested_host_ops(events: OpEvents, threads) -> None:
    """Add host op occurrences, one list per thread of ``(start, duration, (name, type))``,
    with self time taken by nesting within each thread."""
    for thread_events in threads:
        thread_events.sort(key=lambda item: (item[0], -item[1]))
        durations = [item[1] for item in thread_events]
        self_values, _ = self_times([item[0] for item in thread_events], durations)
        events.add_host_batch([item[2] for item in thread_events], np.asarray(durations, dtype=np.float64),
                              np.asarray(self_values, dtype=np.float64))


def self_times(starts: Sequence[float], durations: Sequence[float]) -> tuple[list[float], list[int]]:
    """Self time and enclosing event of each event on one thread.

    Events must be sorted by start, longer first on ties. An event is nested in the
    innermost earlier event that is still open when it starts; its duration is taken
    off that parent's self time (never below zero). Returns ``(self, parent_index)``
    with -1 for top-level events.
    """
    self_list = list(durations)
    parents = [-1] * len(self_list)
    stack: list[int] = []
    ends: list[float] = []
    for index, (start, duration) in enumerate(zip(starts, durations)):
        while ends and ends[-1] <= start:
            stack.pop()
            ends.pop()
        if stack:
            parent = stack[-1]
            parents[index] = parent
            self_list[parent] -= duration
        stack.append(index)
        ends.append(start + duration)
    return [value if value > 0.0 else 0.0 for value in self_list], parents
