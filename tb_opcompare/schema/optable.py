"""The per-op table made of what every reader leaves (``OpProfile.from_parsed`` of a
``schema.events.ParsedProfile``), and the run facts that travel with it.

Every table is made and kept as a ``schema.table.Table`` (numpy columns: ``OpProfile.op_table``
and its siblings, one name each), without pandas; a view that works on pandas asks a table
for its DataFrame (``Table.frame()``, made once).

Schema of ``OpProfile.op_table`` (one row per side x op):

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

Schema of ``OpProfile.step_table`` (one row per op x profiled step in which it ran; the
samples behind ``per_step_cv`` and the confidence intervals of a comparison):

==============  =======  ===================================================================
column          dtype    meaning
==============  =======  ===================================================================
row             int64    position of the op in ``OpProfile.op_table``
step            int64    0 .. ``OpProfile.step_count`` - 1, in the order the steps started
occurrences     int64    executions of the op that started in the step (device rows: the
                         launching op occurrences where linked, else kernels)
self_us         float64  their summed self time (device rows: kernel time)
==============  =======  ===================================================================

A step where an op did not run has no row: its time there is 0. Readers that cannot place
occurrences in steps (or profiles with fewer than two steps) leave the table empty.

Schema of ``OpProfile.module_table`` (one row per op x module it ran in; PyTorch traces
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

Schema of ``OpProfile.annotation_table`` (application ranges a reader found beside its op table
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

Schema of ``OpProfile.memory_table`` (memory in use over the profiled window, one row per
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

Schema of ``OpProfile.breakdown_table`` (each profiled step's wall time by what it was spent
on, ``schema.events.STEP_CATEGORIES``; empty where the reader does not split steps):

==============  =======  ===================================================================
column          dtype    meaning
==============  =======  ===================================================================
step            int64    the step, an index into ``ProfileFacts.step_times_us``
side            str      ``host``: the thread that drives the step, whose categories add up
                         to the step's wall time; ``device``: the accelerator's time in the
                         step, busy by what ran and idle, which add up to it too
category        str      a key of ``STEP_CATEGORIES`` (host) or ``DEVICE_STEP_CATEGORIES``
time_us         float64  the step's time in it
==============  =======  ===================================================================

Schema of ``OpProfile.work_table`` (the work of each op whose work is known or could be,
issue 54: one row per op, over its calls that no other such call encloses, so an
``aten::conv2d`` counts and not the ``aten::convolution`` it calls; empty where the reader
tells no op's work):

==============  =======  ===================================================================
column          dtype    meaning
==============  =======  ===================================================================
op_name         str      as the op's host row in ``ops``
op_type         str      as in ``ops``
calls           int64    the op's calls counted (those inside another counted call left out)
known_calls     int64    those whose work is known: the figures below are theirs
flops           float64  floating-point operations of the known calls (NaN: none known)
bytes           float64  bytes they must at least move (inputs read, output written once)
source          str      ``profile`` (the profiler's own figure), ``shapes`` (formulas of
                         ``analysis.work`` on the recorded input shapes), or ``unknown: why``
host_us         float64  the known calls' inclusive wall time on their threads
device_calls    int64    the known calls that launched kernels (the rest ran on the host)
device_flops    float64  their floating-point operations; 0 where no call launched kernels, NaN
                         where the run has no device (as the next two)
device_bytes    float64  their bytes
device_us       float64  the device time of the kernels they launched, nested calls included
device_tf32_us  float64  the part of it in kernels that computed on TF32 tensor cores (their
                         names say so); 0 where no call launched kernels, NaN where the run
                         has no device
==============  =======  ===================================================================

``OpProfile.facts`` holds what is known about the whole run (``ProfileFacts``).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from tb_opcompare.schema.events import (
    ANNOTATION_COLUMNS,
    BREAKDOWN_COLUMNS,
    DEVICE,
    HOST,
    MEMORY_TIMELINE_COLUMNS,
    MODULE_COLUMNS,
    OP_COLUMNS,
    QUANTILES,
    STEP_COLUMNS,
    WORK_COLUMNS,
    OpEvents,
    ParsedProfile,
    ProfileFacts,
    _encode,
    _fold_host,
)
from tb_opcompare.schema.groups import (
    first_appearance,
    first_appearance_ids,
    group_counts,
    group_extremes,
    group_std,
    group_sums,
    integer_group_sums,
    known_sums,
    positions,
)
from tb_opcompare.schema.table import LazyTable, Table, repeated_text, text_array

if TYPE_CHECKING:
    pass

# Each table's columns and their dtypes (object: text), as a reader makes them.
OP_DTYPES = {
    column: {
        "side": "object",
        "op_name": "object",
        "op_type": "object",
        "occurrences": "int64",
        "kernels": "int64",
    }.get(column, "float64")
    for column in OP_COLUMNS
}
STEP_DTYPES = {column: "float64" if column == "self_us" else "int64" for column in STEP_COLUMNS}
MODULE_DTYPES = {
    column: {"occurrences": "int64", "self_us": "float64", "alloc_bytes": "float64"}.get(column, "object")
    for column in MODULE_COLUMNS
}
ANNOTATION_DTYPES = {
    column: {"occurrences": "int64", "total_us": "float64", "outermost_us": "float64"}.get(column, "object")
    for column in ANNOTATION_COLUMNS
}
MEMORY_TIMELINE_DTYPES = {column: "object" if column == "device" else "float64" for column in MEMORY_TIMELINE_COLUMNS}
BREAKDOWN_DTYPES = {
    column: {"step": "int64", "time_us": "float64"}.get(column, "object") for column in BREAKDOWN_COLUMNS
}
WORK_DTYPES = {
    column: "object" if column in ("op_name", "op_type", "source") else "int64" if "calls" in column else "float64"
    for column in WORK_COLUMNS
}


@dataclasses.dataclass(eq=False)
class OpProfile:
    """A session's tables (``Table``s, documented above) and facts. ``module_source``: the
    module table, or what makes it on first use (a reader's recipe)."""

    facts: ProfileFacts
    op_table: Table
    step_table: Table = dataclasses.field(default_factory=lambda: Table.empty(STEP_DTYPES))
    step_count: int = 0  # steps the occurrences of ``step_table`` were placed in
    module_source: Table | LazyTable = dataclasses.field(default_factory=lambda: Table.empty(MODULE_DTYPES))
    annotation_table: Table = dataclasses.field(default_factory=lambda: Table.empty(ANNOTATION_DTYPES))
    memory_table: Table = dataclasses.field(default_factory=lambda: Table.empty(MEMORY_TIMELINE_DTYPES))
    breakdown_table: Table = dataclasses.field(default_factory=lambda: Table.empty(BREAKDOWN_DTYPES))
    work_table: Table = dataclasses.field(default_factory=lambda: Table.empty(WORK_DTYPES))

    @property
    def module_table(self) -> Table:
        source = self.module_source
        return source.table() if isinstance(source, LazyTable) else source

    def memory_bytes(self) -> int:
        """Bytes its tables hold (a module table not made yet: what its recipe holds)."""
        tables = (
            self.op_table,
            self.step_table,
            self.module_source,
            self.annotation_table,
            self.memory_table,
            self.breakdown_table,
            self.work_table,
        )
        return sum(table.memory_bytes() for table in tables)

    @functools.cached_property
    def op_names(self) -> frozenset[str]:
        """Its ops' names: what pairing and model identity compare runs by."""
        return frozenset(self.op_table["op_name"].tolist())

    @classmethod
    def from_parsed(cls, parsed: ParsedProfile) -> OpProfile:
        """The tables of a session as its reader left it."""
        events = parsed.events
        ops, step_ops = build_tables(events)
        profile = cls(
            facts=parsed.facts, op_table=ops, step_table=step_ops, step_count=events.step_count if len(step_ops) else 0
        )
        if events.memory_timeline is not None:  # object names, as the disk cache gives them back
            profile.memory_table = typed_table(events.memory_timeline, MEMORY_TIMELINE_DTYPES)
        if parsed.annotations is not None:
            profile.annotation_table = typed_table(parsed.annotations, ANNOTATION_DTYPES)
        if events.breakdown is not None:
            profile.breakdown_table = typed_table(events.breakdown, BREAKDOWN_DTYPES)
        if parsed.module_recipe is not None:
            profile.module_source = LazyTable(parsed.module_recipe)
        if events.work:
            profile.work_table = summed_work(events.work)
        return profile

    @classmethod
    def of_tables(cls, facts: ProfileFacts, step_count: int, tables: dict[str, Table]) -> OpProfile:
        """A profile of its tables, by their names in ``TABLES`` (those not given empty)."""
        given = {attribute: tables[name] for name, attribute, _ in TABLES if name in tables}
        given["module_source"] = given.pop("module_table", Table.empty(MODULE_DTYPES))
        return cls(facts=facts, step_count=step_count, **given)


# Each table: the name of its stored form (the disk cache's, the shared
# index's), the profile's attribute holding it, and its columns' dtypes.
TABLES = (
    ("ops", "op_table", OP_DTYPES),
    ("step_ops", "step_table", STEP_DTYPES),
    ("module_ops", "module_table", MODULE_DTYPES),
    ("annotations", "annotation_table", ANNOTATION_DTYPES),
    ("memory_timeline", "memory_table", MEMORY_TIMELINE_DTYPES),
    ("step_breakdown", "breakdown_table", BREAKDOWN_DTYPES),
    ("op_work", "work_table", WORK_DTYPES),
)


def summed_work(parts: list[dict[str, Any]]) -> Table:
    """The work table of one or more workers' parts (``WORK_COLUMNS``), summed per op; an
    op's source is its first part's that knows its work, else its first part's."""
    if len(parts) == 1:
        return typed_table(parts[0], WORK_DTYPES)
    numbers = [column for column in WORK_COLUMNS if WORK_DTYPES[column] != "object"]
    names, types, op, sums = _summed_partials(parts, numbers)
    sources = np.concatenate([np.asarray(part["source"], dtype=object) for part in parts])
    known = np.concatenate([np.asarray(part["known_calls"]) for part in parts]) > 0
    source = np.empty(len(names), dtype=object)
    for row in np.lexsort((~known, op))[::-1].tolist():  # the first known part's row is written last
        source[op[row]] = sources[row]
    unknown = sums["known_calls"] == 0
    for column in ("flops", "bytes", "host_us"):
        sums[column] = np.where(unknown, np.nan, sums[column])
    if all(np.isnan(np.asarray(part["device_us"], dtype=float)).all() for part in parts):
        for column in ("device_flops", "device_bytes", "device_us"):
            sums[column] = np.full(len(names), np.nan)  # no worker ran a device
    # unknown where no worker's part could tell it (no device, or XLA's ops timed on the
    # host), not a sum of nothing
    tf32 = np.concatenate([np.asarray(part["device_tf32_us"], dtype=float) for part in parts])
    sums["device_tf32_us"] = known_sums(tf32, op, len(names))
    return typed_table({"op_name": names, "op_type": types, **sums, "source": source}, WORK_DTYPES)


def typed_table(columns: Mapping[str, Any], dtypes: dict[str, Any]) -> Table:
    """Columns given as lists or arrays (a reader's, the disk cache's) in a table's dtypes."""
    return Table({name: np.asarray(columns[name], dtype=dtypes[name]) for name in dtypes})


def build_tables(events: OpEvents) -> tuple[Table, Table]:
    """Aggregate occurrences into the per-op table and the per-step table documented above."""
    if not len(events):
        return Table.empty(OP_DTYPES), Table.empty(STEP_DTYPES)
    side = np.asarray(events.side, dtype=object)
    names, types = np.asarray(events.name, dtype=object), np.asarray(events.type, dtype=object)
    totals, selfs = np.asarray(events.total, dtype=np.float64), np.asarray(events.self_time, dtype=np.float64)
    tables, cells = [], []
    partials = list(events.host_partials)
    samples = list(events.host_samples)
    sample_steps = list(events.host_sample_steps)
    host = side == HOST
    if host.any():
        keys, codes = _encode(list(zip(names[host].tolist(), types[host].tolist())))
        partials.append(_fold_host(keys, codes, totals[host], selfs[host], True))
        samples.append((keys, codes, selfs[host].astype(np.float32)))
        sample_steps.append(None)
    if partials:
        host_table, rows_of_keys = _combine_host(partials)
        host_table, host_cells = _with_host_quantiles(
            host_table, samples, sample_steps, events.step_count, rows_of_keys
        )
        tables.append(host_table)
        cells.append(host_cells)
    device = side == DEVICE
    kernels = list(events.device_kernels)
    if device.any():  # ``add`` knows no launcher
        keys, codes = _encode(list(zip(names[device].tolist(), types[device].tolist())))
        kernels.insert(0, {"keys": keys, "codes": codes, "total_us": totals[device], "invocation": None, "step": None})
    if kernels or events.device_partials:
        device_table, device_cells = _aggregate_device(
            kernels, events.device_partials, tables[0] if tables else None, events.step_count
        )
        cells.append(device_cells.assign(row=device_cells["row"] + sum(len(t) for t in tables)))
        tables.append(device_table)
    table = _with_memory(Table.concat(tables, [c for c in OP_COLUMNS if c not in _MEMORY_SUMS]), events)
    step_ops = Table.concat(cells, STEP_COLUMNS) if any(len(c) for c in cells) else Table.empty(STEP_DTYPES)
    return table.select(OP_COLUMNS), step_ops


def _with_memory(table: Table, events: OpEvents) -> Table:
    """Host rows get their ops' allocated and net bytes: 0 for an op that allocated
    nothing where memory was recorded, NaN where it was not."""
    if not events.memory_partials:
        return table.assign(alloc_bytes=np.full(len(table), np.nan), net_bytes=np.full(len(table), np.nan))
    names, types, _, sums = _summed_partials(events.memory_partials, _MEMORY_SUMS)
    keys = list(zip(table["op_name"].tolist(), table["op_type"].tolist()))
    codes = positions(keys, list(zip(names.tolist(), types.tolist())))
    host = table["side"] == HOST
    # an op's memory is on its host row; an op with none (summary.json's accelerator
    # nodes) keeps it on its device row
    with_host_row = {key for key, on_host in zip(keys, host) if on_host}
    holder = host | np.fromiter((key not in with_host_row for key in keys), dtype=bool, count=len(keys))
    columns = {}
    for column in _MEMORY_SUMS:
        values = np.where(codes >= 0, sums[column][codes], 0.0)
        columns[column] = np.where(holder, values, np.nan)
    if not events.net_memory_known:
        columns["net_bytes"] = np.full(len(table), np.nan)
    return table.assign(**columns)


_MEMORY_SUMS = ["alloc_bytes", "net_bytes"]


def _combine_host(partials: list[dict[str, Any]]) -> tuple[Table, dict[int, np.ndarray]]:
    """Per-op sums from several lines, hosts or batches into the host rows; and, where one
    partial made every row (each its own op, in its order), the row of each of its keys'
    codes (by the keys' ``id``, as ``_with_host_quantiles`` looks them up)."""
    names, types, op, sums = _summed_partials(partials, _HOST_SUMS)
    count = len(names)
    rows_of_keys = {}
    if len(partials) == 1 and "folded_from" in partials[0] and len(op) == count:
        keys, seen, _ = partials[0]["folded_from"]
        rows_of_keys[id(keys)] = np.full(len(keys), -1, dtype=np.int64)
        rows_of_keys[id(keys)][seen] = np.arange(count)
    minimum, maximum = np.full(count, np.inf), np.full(count, -np.inf)
    np.minimum.at(minimum, op, np.concatenate([part["min_us"] for part in partials]))
    np.maximum.at(maximum, op, np.concatenate([part["max_us"] for part in partials]))
    occurrences = sums["occurrences"]
    self_us = sums["self_us"]
    mean = self_us / occurrences
    variance = sums["self_sq"] / occurrences - mean**2
    table = Table(
        {
            "side": repeated_text(count, HOST),
            "op_name": names,
            "op_type": types,
            "occurrences": occurrences,
            "total_us": sums["total_us"],
            "self_us": self_us,
            "min_us": minimum,
            "max_us": maximum,
            "mean_us": mean,
            "std_us": np.sqrt(np.clip(variance, 0.0, None)),
            "kernels": np.zeros(count, dtype=np.int64),
        }
    )
    return table, rows_of_keys


_HOST_SUMS = ["occurrences", "total_us", "self_us", "self_sq"]


def _summed_partials(
    partials: list[dict[str, Any]], columns: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Partials' rows (``op_name``, ``op_type`` and ``columns``) grouped by op, ops numbered
    in order of first appearance: each op's name and type, each row's op, and each op's
    sums of ``columns`` (integer columns summed exactly)."""
    names = np.concatenate([text_array(part["op_name"]) for part in partials])
    types = np.concatenate([text_array(part["op_type"]) for part in partials])
    if len(partials) == 1 and partials[0].get("folded_from", (None, None, False))[2]:
        op, keys = np.arange(len(names)), None  # one partial of distinct keys: each row its own op
    else:
        op, keys = first_appearance(list(zip(names.tolist(), types.tolist())))
    count = len(names) if keys is None else len(keys)
    sums = {}
    for column in columns:
        values = np.concatenate([np.asarray(part[column]) for part in partials])
        adder = integer_group_sums if values.dtype.kind in "iu" else group_sums
        sums[column] = adder(values, op, count)
    if keys is None or len(keys) == len(names):  # every row its own op, in order: the columns are the ops'
        return names, types, op, sums
    return *_names_and_types(keys), op, sums


def _names_and_types(keys: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """(name, type) keys as a column of names and a column of types."""
    return text_array([name for name, _ in keys]), text_array([op_type for _, op_type in keys])


def _with_host_quantiles(
    table: Table, samples: list[Any], sample_steps: list[Any], step_count: int, rows_of_keys: dict[int, np.ndarray]
) -> tuple[Table, Table]:
    """The host table with the percentiles of each op's per-occurrence self time and its
    variation from step to step, and the host rows' per-step cells. ``rows_of_keys``: the
    table's row of each code of the samples' key lists known already (``_combine_host``);
    the other lists' keys are looked up."""
    row_of: dict[tuple[str, str], int] = {}
    # a reader's batches mostly share one list of op keys (an xplane's host plane: all of
    # them), so each list is looked up once, not once a batch
    for keys, _, _ in samples:
        if id(keys) not in rows_of_keys:
            if not row_of:
                row_of = dict(zip(zip(table["op_name"].tolist(), table["op_type"].tolist()), range(len(table))))
            rows_of_keys[id(keys)] = np.fromiter(
                map(row_of.get, keys, itertools.repeat(-1)), dtype=np.int64, count=len(keys)
            )
    rows = np.concatenate([rows_of_keys[id(keys)][codes] for keys, codes, _ in samples])
    values = np.concatenate([selfs for _, _, selfs in samples])
    spread = dict(zip(QUANTILES, group_quantiles(rows, values, len(table), list(QUANTILES.values())).T))
    if step_count < 2:  # no reader placed occurrences in steps: nothing per step to say
        return table.assign(**spread, per_step_cv=np.full(len(table), np.nan)), Table.empty(STEP_DTYPES)
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


def step_cells(groups: np.ndarray, values: np.ndarray, steps: np.ndarray, step_count: int) -> Table:
    """The per-step table of these samples: for each (group, step) that occurs, how many
    samples and their sum. Only cells that occur are made: a million ops over a thousand
    steps never make a dense matrix."""
    groups, steps = np.asarray(groups, dtype=np.int64), np.asarray(steps, dtype=np.int64)
    placed = (steps >= 0) & (groups >= 0)
    if step_count < 2 or not placed.any():
        return Table.empty(STEP_DTYPES)
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
    return Table(
        {
            "row": cells // step_count,
            "step": cells % step_count,
            "occurrences": counts.astype(np.int64),
            "self_us": sums,
        }
    )


def per_step_cv(cells: Table, count: int, step_count: int) -> np.ndarray:
    """Each row's coefficient of variation of its time per step, over all ``step_count``
    steps (a step without the row counts 0); NaN with fewer than two steps or no cell."""
    result = np.full(count, np.nan)
    if step_count < 2 or not len(cells):
        return result
    rows, sums = cells["row"], cells["self_us"]
    present = np.bincount(rows, minlength=count)
    mean = np.bincount(rows, weights=sums, minlength=count) / step_count
    # squared deviations from the mean, the steps without the row (0 each) included: two
    # passes, where sum(x^2)/n - mean^2 lost up to half the digits of a steady op's spread
    deviations = sums - mean[rows]
    square = np.bincount(rows, weights=deviations * deviations, minlength=count) + (step_count - present) * mean * mean
    std = np.sqrt(square / step_count)
    counted = (present > 0) & (mean > 0)
    result[counted] = std[counted] / mean[counted]
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
    kernels: list[dict[str, Any]], partials: list[dict[str, Any]], host_table: Table | None, step_count: int = 0
) -> tuple[Table, Table]:
    """The device rows: each op's kernels (``OpEvents.device_kernels`` records; their ops
    numbered across records in order of first appearance, as ``groupby(sort=False)``
    numbers groups) and the kernel sums of readers that do not tell kernels apart."""
    op, keys = _kernel_ops(kernels)
    totals, invocations, steps = _kernel_columns(kernels)
    kernel_counts, total_us = group_counts(op, len(keys)), group_sums(totals, op, len(keys))
    if partials:
        merged = {"op_name": [k[0] for k in keys], "op_type": [k[1] for k in keys]}
        names, types, _, sums = _summed_partials(
            [{**merged, "kernels": kernel_counts, "total_us": total_us}, *partials], ["kernels", "total_us"]
        )
        kernel_counts, total_us = sums["kernels"], sums["total_us"]
    else:
        names, types = _names_and_types(keys)
    columns = _execution_spread(op, totals, invocations, kernel_counts)
    cells = Table.empty(STEP_DTYPES)
    if step_count >= 2 and len(op):  # kernels a reader placed in steps (PyTorch's, by their launch)
        cells = _device_step_cells(op, steps, totals, invocations, step_count)
    occurrences = columns.pop("occurrences")
    if host_table is not None and len(host_table):
        host_occurrences: dict[str, int] = {}
        for name, times in zip(host_table["op_name"].tolist(), host_table["occurrences"].tolist()):
            host_occurrences[name] = host_occurrences.get(name, 0) + times
        unknown = np.isnan(occurrences)
        occurrences[unknown] = [host_occurrences.get(name, np.nan) for name in names[unknown].tolist()]
    occurrences = np.where(np.isnan(occurrences), kernel_counts, occurrences).astype(np.int64)
    table = Table(
        {
            "side": repeated_text(len(names), DEVICE),
            "op_name": names,
            "op_type": types,
            "kernels": kernel_counts,
            "total_us": total_us,
            "self_us": total_us,
            "occurrences": occurrences,
            **columns,
            "per_step_cv": per_step_cv(cells, len(names), step_count),
            "mean_us": total_us / occurrences,
        }
    )
    return table, cells


def _kernel_columns(kernels: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every kernel's time, invocation (NaN: unknown) and step (-1: none), records joined."""
    if not kernels:
        return np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64)
    invocations = [np.full(len(p["codes"]), np.nan) if p["invocation"] is None else p["invocation"] for p in kernels]
    steps = [np.full(len(p["codes"]), -1, dtype=np.int64) if p["step"] is None else p["step"] for p in kernels]
    return (
        np.concatenate([part["total_us"] for part in kernels]),
        np.concatenate(invocations),
        np.concatenate(steps),
    )


def _execution_spread(
    op: np.ndarray, totals: np.ndarray, invocations: np.ndarray, kernel_counts: np.ndarray
) -> dict[str, np.ndarray]:
    """Each op's executions (``occurrences``) and the spread of their times, where the
    trace links kernels to the op occurrence that launched them (NaN where it does not)."""
    rows = len(kernel_counts)
    columns = {column: np.full(rows, np.nan) for column in ["occurrences", "min_us", "max_us", "std_us", *QUANTILES]}
    linked = ~np.isnan(invocations)
    if not linked.any():
        return columns
    # an occurrence is a launching op occurrence: the op's kernels of one invocation
    launch, launch_first = first_appearance_ids([op[linked], _float_keys(invocations[linked])])
    launch_us = group_sums(totals[linked], launch, len(launch_first))
    launch_op = op[linked][launch_first]
    launched = np.unique(launch_op)
    columns["occurrences"][launched] = group_counts(launch_op, rows)[launched]
    minimum, maximum = group_extremes(launch_us, launch_op, rows)
    columns["min_us"][launched], columns["max_us"][launched] = minimum[launched], maximum[launched]
    columns["std_us"][launched] = group_std(launch_us, launch_op, rows)[launched]
    columns.update(zip(QUANTILES, group_quantiles(launch_op, launch_us, rows, list(QUANTILES.values())).T))
    # An op's kernels that nothing links to an execution (a copy outside every TF op
    # execution, a plane without the line that spans them) are each an execution of
    # their own: left out, the op's time would be split over too few executions.
    columns["occurrences"] += kernel_counts - group_counts(op[linked], rows)
    return columns


def _kernel_ops(kernels: list[dict[str, Any]]) -> tuple[np.ndarray, list[Any]]:
    """Each kernel's op, numbered across the records in order of first appearance, and
    the ops' (name, type) keys in that order: numbered per record in numpy, and only the
    record's distinct ops looked up by key."""
    index: dict[tuple[str, ...], int] = {}
    ops = []
    for part in kernels:
        local, firsts = first_appearance_ids([part["codes"]])
        met = part["codes"][firsts].tolist()
        number = np.fromiter(
            (index.setdefault(tuple(part["keys"][code]), len(index)) for code in met), dtype=np.int64, count=len(met)
        )
        ops.append(number[local])
    op = np.concatenate(ops) if ops else np.zeros(0, dtype=np.int64)
    return op, list(index)


def _float_keys(values: np.ndarray) -> np.ndarray:
    """Float values as int64 keys that are equal where the values are (0.0 and -0.0 alike)."""
    return (np.asarray(values, dtype=np.float64) + 0.0).view(np.int64)


def _device_step_cells(
    rows: np.ndarray, steps: np.ndarray, totals: np.ndarray, invocations: np.ndarray, step_count: int
) -> Table:
    """Per-step cells of kernel time; an execution is a launching op occurrence where the
    trace links one, else a kernel (as ``occurrences`` counts them)."""
    placed = (steps >= 0) & (rows >= 0)
    if not placed.any():
        return Table.empty(STEP_DTYPES)
    cell = rows[placed] * step_count + steps[placed]  # ordered as (row, step)
    cells, cell_of = np.unique(cell, return_inverse=True)
    cell_of = cell_of.reshape(-1)
    sums = group_sums(totals[placed], cell_of, len(cells))
    kernels = group_counts(cell_of, len(cells))
    invocation = invocations[placed]
    known = ~np.isnan(invocation)
    launches = np.zeros(len(cells), dtype=np.int64)
    if known.any():
        launch = np.unique(_float_keys(invocation[known]), return_inverse=True)[1].reshape(-1)
        distinct = np.unique(cell_of[known] * (int(launch.max()) + 1) + launch) // (int(launch.max()) + 1)
        launches = np.bincount(distinct, minlength=len(cells))
    return Table(
        {
            "row": cells // step_count,
            "step": cells % step_count,
            "occurrences": np.where(launches > 0, launches, kernels).astype(np.int64),
            "self_us": sums,
        }
    )
