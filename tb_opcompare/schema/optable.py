"""The per-op table made of what every reader leaves (``OpProfile.from_parsed`` of a
``schema.events.ParsedProfile``), and the run facts that travel with it.

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
p10_us          float64  10th percentile of per-occurrence self time (linear interpolation;
                         NaN where occurrences are not told apart, as for ``min_us``)
median_us       float64  median of per-occurrence self time (as above)
p90_us          float64  90th percentile of per-occurrence self time (as above)
per_step_cv     float64  coefficient of variation of the op's self time per profiled step
                         (std / mean over every step, a step without the op counting 0):
                         how steady the op is from one step to the next. NaN where the
                         reader cannot place occurrences in steps (fewer than two steps;
                         formats without step ranges)
alloc_bytes     float64  host rows: bytes the op itself allocated (not the ops it called), on
                         any device, summed over its occurrences; NaN where the profile
                         records no memory (PyTorch ``profile_memory=True``; TF allocations
                         carry the op; summary.json's ``total_bytes``). Device rows: NaN (an
                         op's memory is on its host row), but for an op with no host row
net_bytes       float64  host rows: allocated minus freed by the op itself, as
                         ``key_averages()``' ``self_*_memory_usage``; NaN where frees are not
                         attributed to ops (TF) or memory is not recorded
==============  =======  ===================================================================

Schema of ``OpProfile.step_ops`` (one row per op x profiled step in which it ran; the
samples behind ``per_step_cv`` and the confidence intervals of a comparison):

==============  =======  ===================================================================
column          dtype    meaning
==============  =======  ===================================================================
row             int64    position of the op in ``OpProfile.ops``
step            int64    0 .. ``OpProfile.step_count`` - 1, in the order the steps started
occurrences     int64    executions of the op that started in the step (device rows: the
                         launching op occurrences where linked, else kernels)
self_us         float64  their summed self time (device rows: kernel time)
==============  =======  ===================================================================

A step where an op did not run has no row: its time there is 0. Readers that cannot place
occurrences in steps (or profiles with fewer than two steps) leave the table empty.

Schema of ``OpProfile.module_ops`` (one row per op x module it ran in; PyTorch traces
recorded with ``with_stack=True``, whose ``nn.Module`` calls place each op; empty where the
profile names no modules, and TF ops carry theirs in their names' scopes):

==============  =======  ===================================================================
column          dtype    meaning
==============  =======  ===================================================================
side            str      as in ``ops``
op_name         str      as in ``ops``
op_type         str      as in ``ops``
module          str      the innermost module call around the op's start, as a path of
                         ``nn.Module`` instances (``Sequential_0/Conv2d_0``); empty outside
                         every module (the backward pass, the optimizer)
occurrences     int64    executions of the op there (device rows: launching occurrences)
self_us         float64  their self time (device rows: kernel time)
alloc_bytes     float64  host rows: bytes the op itself allocated there (as ``ops``); NaN where
                         the profile records no memory, and on device rows
==============  =======  ===================================================================

Schema of ``OpProfile.annotations`` (application ranges a reader found beside its op table
that are not rows of it: the seed wrapper's ``app_stats``, TF's ``tf.profiler.experimental.Trace``
ranges; PyTorch's ``record_function`` ranges are rows of ``ops`` already, typed
``user_annotation``, and TF's tf.data iterator calls too, typed ``Dataset``):

==============  =======  ===================================================================
column          dtype    meaning
==============  =======  ===================================================================
name            str      the range's name (``session_run``, ``load_batch``)
kind            str      what recorded it (``app_stats``, ``tf.profiler Trace``)
occurrences     int64    how many times the range was entered
total_us        float64  summed wall time of the ranges (nested ranges of one name once)
outermost_us    float64  the part of ``total_us`` in ranges inside no other range of the
                         table on their thread: summed over the table, the application's
                         wall time with no moment of a thread counted twice (``app_stats``
                         carry no start times: there it is ``total_us``)
==============  =======  ===================================================================

Schema of ``OpProfile.memory_timeline`` (memory in use over the profiled window, one row per
device x sample; at most ``MEMORY_TIMELINE_POINTS`` samples a device, each the highest value
of the stretch of time it stands for, so peaks survive the thinning; empty where the
profile records no memory):

==============  =======  ===================================================================
column          dtype    meaning
==============  =======  ===================================================================
device          str      as the keys of ``ProfileFacts.peak_memory_bytes`` (``CPU``, ``GPU:0``)
time_us         float64  since the first sample of the run, any device
bytes_in_use    float64  memory the allocator held then
==============  =======  ===================================================================

``OpProfile.facts`` holds what is known about the whole run (``ProfileFacts``).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pandas as pd

from tb_opcompare.schema.events import (
    ANNOTATION_COLUMNS,
    DEVICE,
    HOST,
    MEMORY_TIMELINE_COLUMNS,
    MODULE_COLUMNS,
    OP_COLUMNS,
    QUANTILES,
    STEP_COLUMNS,
    OpEvents,
    ParsedProfile,
    ProfileFacts,
    _encode,
    _fold_host,
)


@dataclasses.dataclass
class OpProfile:
    facts: ProfileFacts
    ops: pd.DataFrame
    step_ops: pd.DataFrame = dataclasses.field(default_factory=lambda: empty_step_table())
    step_count: int = 0  # steps the occurrences of ``step_ops`` were placed in
    module_ops: pd.DataFrame = dataclasses.field(default_factory=lambda: empty_module_table())
    annotations: pd.DataFrame = dataclasses.field(default_factory=lambda: empty_annotation_table())
    memory_timeline: pd.DataFrame = dataclasses.field(default_factory=lambda: empty_memory_timeline())

    @functools.cached_property
    def op_names(self) -> frozenset[str]:
        """Its ops' names: what pairing and model identity compare runs by."""
        return frozenset(self.ops["op_name"])

    @classmethod
    def from_parsed(cls, parsed: ParsedProfile) -> OpProfile:
        """The tables of a session as its reader left it."""
        events = parsed.events
        ops, step_ops = build_tables(events)
        timeline = empty_memory_timeline()
        if events.memory_timeline is not None:  # object names, as the disk cache gives them back
            timeline = pd.DataFrame(events.memory_timeline, columns=MEMORY_TIMELINE_COLUMNS).astype(timeline.dtypes)
        profile = cls(
            facts=parsed.facts,
            ops=ops,
            step_ops=step_ops,
            step_count=events.step_count if len(step_ops) else 0,
            memory_timeline=timeline,
        )
        if parsed.annotations is not None:
            profile.annotations = pd.DataFrame(parsed.annotations, columns=ANNOTATION_COLUMNS).astype(
                empty_annotation_table().dtypes
            )
        if parsed.module_ops is not None:
            profile.module_ops = parsed.module_ops()
        return profile


def build_tables(events: OpEvents) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Aggregate occurrences into the per-op table and the per-step table documented above."""
    if not len(events):
        return empty_op_table(), empty_step_table()
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
    device = frame[frame["side"] == DEVICE].assign(invocation=np.nan, step=-1)  # ``add`` knows no launcher
    if events.device_kernels:
        kernels = [pd.DataFrame(part) for part in events.device_kernels]
        device = pd.concat([part for part in (device, *kernels) if len(part)], ignore_index=True)
    tables, cells = [], []
    partials = list(events.host_partials)
    samples = list(events.host_samples)
    sample_steps = list(events.host_sample_steps)
    if len(host):
        keys, codes = _encode(list(zip(host["op_name"], host["op_type"])))
        partials.append(_fold_host(keys, codes, host["total_us"].to_numpy(), host["self_us"].to_numpy()))
        samples.append((keys, codes, host["self_us"].to_numpy(dtype=np.float32)))
        sample_steps.append(None)
    if partials:
        host_table, host_cells = _with_host_quantiles(_combine_host(partials), samples, sample_steps, events.step_count)
        tables.append(host_table)
        cells.append(host_cells)
    if len(device) or events.device_partials:
        device_table, device_cells = _aggregate_device(
            device, events.device_partials, tables[0] if tables else None, events.step_count
        )
        cells.append(device_cells.assign(row=device_cells["row"] + sum(len(t) for t in tables)))
        tables.append(device_table)
    table = _with_memory(pd.concat(tables, ignore_index=True), events)
    step_ops = pd.concat(cells, ignore_index=True) if any(len(c) for c in cells) else empty_step_table()
    return table[OP_COLUMNS], step_ops[STEP_COLUMNS]


def _with_memory(table: pd.DataFrame, events: OpEvents) -> pd.DataFrame:
    """Host rows get their ops' allocated and net bytes: 0 for an op that allocated
    nothing where memory was recorded, NaN where it was not."""
    if not events.memory_partials:
        return table.assign(alloc_bytes=np.nan, net_bytes=np.nan)
    names, types, _, sums = _summed_partials(events.memory_partials, _MEMORY_SUMS)
    code_of = {key: code for code, key in enumerate(zip(names.tolist(), types.tolist()))}
    keys = list(zip(table["op_name"].tolist(), table["op_type"].tolist()))
    codes = np.fromiter((code_of.get(key, -1) for key in keys), dtype=np.int64, count=len(keys))
    host = (table["side"] == HOST).to_numpy()
    # an op's memory is on its host row; an op with none (summary.json's accelerator
    # nodes) keeps it on its device row
    with_host_row = {key for key, on_host in zip(keys, host) if on_host}
    holder = host | np.fromiter((key not in with_host_row for key in keys), dtype=bool, count=len(keys))
    columns = {}
    for column in _MEMORY_SUMS:
        values = np.where(codes >= 0, sums[column].to_numpy()[codes], 0.0)
        columns[column] = np.where(holder, values, np.nan)
    if not events.net_memory_known:
        columns["net_bytes"] = np.full(len(table), np.nan)
    return table.assign(**columns)


_MEMORY_SUMS = ["alloc_bytes", "net_bytes"]


def empty_op_table() -> pd.DataFrame:
    dtypes = {"side": "object", "op_name": "object", "op_type": "object", "occurrences": "int64", "kernels": "int64"}
    return pd.DataFrame({c: pd.Series(dtype=dtypes.get(c, "float64")) for c in OP_COLUMNS})


_OP_KEYS = ["side", "op_name", "op_type"]


def empty_module_table() -> pd.DataFrame:
    dtypes = {"occurrences": "int64", "self_us": "float64", "alloc_bytes": "float64"}
    return pd.DataFrame({column: pd.Series(dtype=dtypes.get(column, "object")) for column in MODULE_COLUMNS})


def empty_annotation_table() -> pd.DataFrame:
    dtypes = {"occurrences": "int64", "total_us": "float64", "outermost_us": "float64"}
    return pd.DataFrame({column: pd.Series(dtype=dtypes.get(column, "object")) for column in ANNOTATION_COLUMNS})


def empty_memory_timeline() -> pd.DataFrame:
    return pd.DataFrame(
        {column: pd.Series(dtype="object" if column == "device" else "float64") for column in MEMORY_TIMELINE_COLUMNS}
    )


def empty_step_table() -> pd.DataFrame:
    return pd.DataFrame(
        {column: pd.Series(dtype="float64" if column == "self_us" else "int64") for column in STEP_COLUMNS}
    )


def _combine_host(partials: list[dict]) -> pd.DataFrame:
    """Per-op sums from several lines, hosts or batches into the host rows. Grouped by
    integer op codes, as ``_aggregate_device``, on the partials' arrays (a DataFrame for
    each partial cost more than the grouping); sums are pandas' as before: the same to the
    bit."""
    names, types, op, sums = _summed_partials(partials, _HOST_SUMS)
    count = len(names)
    minimum, maximum = np.full(count, np.inf), np.full(count, -np.inf)
    np.minimum.at(minimum, op, np.concatenate([part["min_us"] for part in partials]))
    np.maximum.at(maximum, op, np.concatenate([part["max_us"] for part in partials]))
    occurrences = sums["occurrences"].to_numpy().astype("int64")
    self_us = sums["self_us"].to_numpy()
    mean = self_us / occurrences
    variance = sums["self_sq"].to_numpy() / occurrences - mean**2
    return pd.DataFrame(
        {
            "side": np.full(count, HOST, dtype=object),
            "op_name": names,
            "op_type": types,
            "occurrences": occurrences,
            "total_us": sums["total_us"].to_numpy(),
            "self_us": self_us,
            "min_us": minimum,
            "max_us": maximum,
            "mean_us": mean,
            "std_us": np.sqrt(np.clip(variance, 0.0, None)),
            "kernels": np.zeros(count, dtype=np.int64),
        }
    )


_HOST_SUMS = ["occurrences", "total_us", "self_us", "self_sq"]


def _summed_partials(partials: list[dict], columns: list[str]):
    """Partials' rows (``op_name``, ``op_type`` and ``columns``) grouped by op, ops numbered
    in order of first appearance: each op's name and type, each row's op, and each op's
    sums of ``columns`` (pandas' group sums: compensated, rows in order)."""
    names = np.concatenate([np.asarray(part["op_name"], dtype=object) for part in partials])
    types = np.concatenate([np.asarray(part["op_type"], dtype=object) for part in partials])
    op, first = _first_appearance_codes(names, types)
    sums = pd.DataFrame({column: np.concatenate([part[column] for part in partials]) for column in columns})
    return names[first], types[first], op, sums.groupby(op).sum()


def _with_host_quantiles(
    table: pd.DataFrame, samples, sample_steps: list, step_count: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The host table with the percentiles of each op's per-occurrence self time and its
    variation from step to step, and the host rows' per-step cells."""
    row_of = {key: row for row, key in enumerate(zip(table["op_name"].tolist(), table["op_type"].tolist()))}
    # a reader's batches mostly share one list of op keys (an xplane's host plane: all of
    # them), so each list is looked up once, not once a batch
    rows_of_keys: dict[int, np.ndarray] = {}
    for keys, _, _ in samples:
        if id(keys) not in rows_of_keys:
            rows_of_keys[id(keys)] = np.fromiter((row_of.get(key, -1) for key in keys), dtype=np.int64, count=len(keys))
    rows = np.concatenate([rows_of_keys[id(keys)][codes] for keys, codes, _ in samples])
    values = np.concatenate([selfs for _, _, selfs in samples])
    spread = dict(zip(QUANTILES, group_quantiles(rows, values, len(table), list(QUANTILES.values())).T))
    if step_count < 2:  # no reader placed occurrences in steps: nothing per step to say
        return table.assign(**spread, per_step_cv=np.nan), empty_step_table()
    steps = np.concatenate(
        [
            np.full(len(codes), -1, dtype=np.int32) if placed is None else placed
            for (_, codes, _), placed in zip(samples, sample_steps)
        ]
    )
    cells = step_cells(rows, values, steps, step_count)
    return table.assign(**spread, per_step_cv=per_step_cv(cells, len(table), step_count)), cells


# Up to this many (row, step) cells are counted into a dense array (16 bytes a cell: 32 MiB)
# whatever the samples: the 31 MB Keras xplane's 1,472 ops over 1,200 steps (1.8 M cells,
# 0.33 M samples) took 30 ms sorted, 10 ms counted, the same sums to the bit.
DENSE_STEP_CELLS = 1 << 21


def step_cells(groups: np.ndarray, values: np.ndarray, steps: np.ndarray, step_count: int) -> pd.DataFrame:
    """The per-step table of these samples: for each (group, step) that occurs, how many
    samples and their sum. Only cells that occur are made: a million ops over a thousand
    steps never make a dense matrix."""
    groups, steps = np.asarray(groups, dtype=np.int64), np.asarray(steps, dtype=np.int64)
    placed = (steps >= 0) & (groups >= 0)
    if step_count < 2 or not placed.any():
        return empty_step_table()
    keys = groups[placed] * step_count + steps[placed]
    weights = np.asarray(values, dtype=np.float64)[placed]
    bins = (int(groups.max()) + 1) * step_count
    if bins <= 2 * len(keys) or bins <= DENSE_STEP_CELLS:
        # as many possible cells as samples, or fewer (a big profile's ops over its steps),
        # or few enough to count into at a small cost in memory: count into every cell and
        # keep those that occur, instead of sorting the samples
        counts, sums = np.bincount(keys, minlength=bins), np.bincount(keys, weights=weights, minlength=bins)
        cells = np.flatnonzero(counts)
        counts, sums = counts[cells], sums[cells]
    else:
        cells, cell_of, counts = np.unique(keys, return_inverse=True, return_counts=True)
        sums = np.bincount(cell_of.reshape(-1), weights=weights)
    return pd.DataFrame(
        {
            "row": cells // step_count,
            "step": cells % step_count,
            "occurrences": counts.astype(np.int64),
            "self_us": sums,
        }
    )


def per_step_cv(cells: pd.DataFrame, count: int, step_count: int) -> np.ndarray:
    """Each row's coefficient of variation of its time per step, over all ``step_count``
    steps (a step without the row counts 0); NaN with fewer than two steps or no cell."""
    result = np.full(count, np.nan)
    if step_count < 2 or not len(cells):
        return result
    rows, sums = cells["row"].to_numpy(), cells["self_us"].to_numpy()
    total = np.bincount(rows, weights=sums, minlength=count)
    square = np.bincount(rows, weights=sums * sums, minlength=count)
    present = np.bincount(rows, minlength=count) > 0
    mean = total / step_count
    std = np.sqrt(np.clip(square / step_count - mean * mean, 0.0, None))
    result[present & (mean > 0)] = (std / np.where(mean > 0, mean, 1.0))[present & (mean > 0)]
    return result


def group_quantiles(groups: np.ndarray, values: np.ndarray, count: int, quantiles: list[float]) -> np.ndarray:
    """(count, len(quantiles)) array: each group's quantiles of its non-negative values,
    with linear interpolation between order statistics (numpy's default); NaN for an
    empty group. One sort of 64-bit keys for all groups (group in the high half, the
    value's float32 bits, which order like the values themselves, in the low half), so a
    million occurrences cost one plain sort."""
    result = np.full((count, len(quantiles)), np.nan)
    if not len(values):
        return result
    bits = np.asarray(values, dtype=np.float32).clip(min=0).view(np.uint32).astype(np.uint64)
    ordered = np.sort((np.asarray(groups, dtype=np.uint64) << np.uint64(32)) | bits)
    values = (ordered & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.float32).astype(np.float64)
    sizes = np.bincount(groups, minlength=count)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    present = np.flatnonzero(sizes)
    for column, quantile in enumerate(quantiles):
        position = quantile * (sizes[present] - 1)
        low = np.floor(position).astype(np.int64)
        high = np.minimum(low + 1, sizes[present] - 1)
        lower = values[starts[present] + low]
        result[present, column] = lower + (position - low) * (values[starts[present] + high] - lower)
    return result


def _aggregate_device(
    device: pd.DataFrame, partials: list[dict], host_table: pd.DataFrame | None, step_count: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame]:
    keys = _OP_KEYS
    # Each kernel's op as one integer, numbered as ``groupby(sort=False)`` numbers groups
    # (in order of first appearance), and every aggregation grouped by it: a fraction of
    # the cost of grouping by the three text columns (the tables of the ResNet-50 V100
    # trace, 9k kernels: 56 -> 25 ms, median of 15).
    # Sums stay pandas' (compensated summation, kernels in the same order): the same
    # figures to the bit.
    op, first = _first_appearance_codes(device["op_name"].to_numpy(), device["op_type"].to_numpy())
    totals = device["total_us"].to_numpy(dtype=np.float64)
    invocations = device["invocation"].to_numpy(dtype=np.float64)
    table = device[keys].iloc[first].reset_index(drop=True)
    table["kernels"] = np.bincount(op, minlength=len(first)).astype(np.int64)
    table["total_us"] = _group_sums(totals, op, len(first))
    if partials:
        table = (
            pd.concat([table, *(pd.DataFrame(part) for part in partials)], ignore_index=True)
            .groupby(keys, sort=False)[["kernels", "total_us"]]
            .sum()
            .reset_index()
        )
        table["kernels"] = table["kernels"].astype("int64")
    table["self_us"] = table["total_us"]
    spread = ["min_us", "max_us", "std_us", *QUANTILES]
    columns = {column: np.full(len(table), np.nan) for column in ["occurrences", *spread]}
    linked = ~np.isnan(invocations)
    if linked.any():
        # an occurrence is a launching op occurrence: the op's kernels of one invocation
        launch, launch_first = _first_appearance_codes(op[linked], invocations[linked])
        launch_us = _group_sums(totals[linked], launch, len(launch_first))
        launch_op = op[linked][launch_first]
        per_op = pd.Series(launch_us).groupby(launch_op)
        rows = np.unique(launch_op)
        columns["occurrences"][rows] = per_op.size().to_numpy()
        columns["min_us"][rows] = per_op.min().to_numpy()
        columns["max_us"][rows] = per_op.max().to_numpy()
        columns["std_us"][rows] = per_op.std(ddof=0).to_numpy()
        quantiles = group_quantiles(launch_op, launch_us, len(table), list(QUANTILES.values()))
        columns.update(zip(QUANTILES, quantiles.T))
        # An op's kernels that nothing links to an execution (a copy outside every TF op
        # execution, a plane without the line that spans them) are each an execution of
        # their own: left out, the op's time would be split over too few executions.
        unlinked = table["kernels"].to_numpy() - np.bincount(op[linked], minlength=len(table))
        columns["occurrences"] += unlinked
    table = table.assign(**columns)
    cells = empty_step_table()
    if step_count >= 2 and len(device):  # kernels a reader placed in steps (PyTorch's, by their launch)
        cells = _device_step_cells(op, device["step"].to_numpy(dtype=np.int64), totals, invocations, step_count)
    table["per_step_cv"] = per_step_cv(cells, len(table), step_count)
    if host_table is not None and len(host_table):
        host_occurrences = host_table.groupby("op_name")["occurrences"].sum()
        table["occurrences"] = table["occurrences"].fillna(table["op_name"].map(host_occurrences))
    table["occurrences"] = table["occurrences"].fillna(table["kernels"]).astype("int64")
    table["mean_us"] = table["self_us"] / table["occurrences"]
    return table, cells


def _first_appearance_codes(first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each (first, second) pair's number, pairs numbered in order of first appearance (as
    ``groupby(sort=False)`` numbers its groups), and where each number first appears."""
    if not len(first):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    first_codes, _ = pd.factorize(first)
    second_codes, second_values = pd.factorize(second)
    codes, _ = pd.factorize(first_codes.astype(np.int64) * len(second_values) + second_codes)
    return codes.astype(np.int64), np.unique(codes, return_index=True)[1]


def _group_sums(values: np.ndarray, codes: np.ndarray, count: int) -> np.ndarray:
    """Each code's sum of its values, as pandas sums a group (compensated, in order)."""
    if not len(codes):
        return np.zeros(count)
    return pd.Series(values).groupby(codes).sum().to_numpy()


def _device_step_cells(
    rows: np.ndarray, steps: np.ndarray, totals: np.ndarray, invocations: np.ndarray, step_count: int
) -> pd.DataFrame:
    """Per-step cells of kernel time; an execution is a launching op occurrence where the
    trace links one, else a kernel (as ``occurrences`` counts them)."""
    placed = (steps >= 0) & (rows >= 0)
    if not placed.any():
        return empty_step_table()
    cell = rows[placed] * step_count + steps[placed]  # ordered as (row, step)
    sums = pd.Series(totals[placed]).groupby(cell).sum()
    cells = sums.index.to_numpy(dtype=np.int64)
    kernels = np.unique(cell, return_counts=True)[1]
    invocation = invocations[placed]
    known = ~np.isnan(invocation)
    launches = np.zeros(len(cells), dtype=np.int64)
    if known.any():
        launch, _ = pd.factorize(invocation[known])
        distinct = np.unique(cell[known] * (int(launch.max()) + 1) + launch) // (int(launch.max()) + 1)
        launches = np.bincount(np.searchsorted(cells, distinct), minlength=len(cells))
    return pd.DataFrame(
        {
            "row": cells // step_count,
            "step": cells % step_count,
            "occurrences": np.where(launches > 0, launches, kernels).astype(np.int64),
            "self_us": sums.to_numpy(),
        }
    )
