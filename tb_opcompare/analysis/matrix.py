"""The latency/throughput matrix: rows are model x batch size, columns precision x compiler x
device (a configuration's devices side by side), each cell the steady-state step latency of the runs recorded there. Where one
kind of accelerator came in several models (an H100 and an H200), the model is part of the
device: one model on two accelerators sits side by side in one row.

A cell pools the step wall times (from step markers) of all its runs, after each run's
warm-up: the leading steps that are much slower than the rest (``detect_warmup``), or a
number of steps the user sets. Latency is the median of the pooled steps
(``analysis.step_time``, the rule of every headline), with their spread (standard
deviation, 10th and 90th percentiles); throughput is
``batch size x 10^6 / latency in µs`` samples per second; the speedup of a cell is the
reference cell's latency over its own, within one row (one model, one batch size).
Plain data in, plain data out: no I/O, so it is tested on small lists.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from tb_opcompare.analysis.step_time import step_latency
from tb_opcompare.schema.dimensions import DEFAULT_COMPILER, DEFAULT_PRECISION, is_default

DEVICE_ORDER = {"CPU": 0}
UNKNOWN = "?"
DEFAULT_COLUMN_DEVICE = "CPU"


@dataclasses.dataclass(frozen=True)
class MatrixRun:
    run: str
    model: str  # the model without precision and compiler
    batch_size: int | None
    device: str | None
    precision: str | None
    compiler: str | None
    step_times_us: Sequence[float]  # wall time of each profiled step, in order; empty without markers
    device_name: str | None = None  # the accelerator's model (``NVIDIA H100 80GB HBM3``), where known


@dataclasses.dataclass(frozen=True)
class Column:
    device: str
    precision: str
    compiler: str

    @property
    def key(self) -> str:
        return f"{self.device} · {self.precision} · {self.compiler}"


@dataclasses.dataclass
class Cell:
    model: str
    batch_size: int | None
    column: Column
    runs: list[str]
    steps: int  # steady steps pooled
    warmup_steps: int  # steps left out as warm-up, over all runs
    latency_us: float | None
    latency_std_us: float | None
    latency_p10_us: float | None
    latency_p90_us: float | None
    throughput_per_s: float | None
    speedup: float | None = None  # reference latency / this latency; None without both
    reference: bool = False  # the cell its row's speedups are against


def column_of(run: MatrixRun, named_kinds: frozenset = frozenset()) -> Column:
    """A run's column. An unknown precision or compiler is the default one (fp32, eager), as
    the model key and the sweep count it: a run whose profile does not say is not a
    configuration of its own (the matrix document names such runs). On a device kind of
    ``named_kinds`` the accelerator's model is part of the device: ``GPU (NVIDIA H200)``."""
    device = run.device or UNKNOWN
    if device in named_kinds and run.device_name:
        device = f"{device} ({run.device_name})"
    return Column(device, run.precision or DEFAULT_PRECISION, run.compiler or DEFAULT_COMPILER)


def named_device_kinds(runs: Sequence[MatrixRun]) -> frozenset:
    """The accelerator kinds whose runs ran on more than one model of it (an H100 and an
    H200, an H100 and an MI300X): there the model is a dimension users compare along. A
    kind with one model keeps its plain name, and the CPU is never split by model."""
    names: dict[str, set] = {}
    for run in runs:
        if run.device and run.device != DEFAULT_COLUMN_DEVICE and run.device_name:
            names.setdefault(run.device, set()).add(run.device_name)
    return frozenset(kind for kind, models in names.items() if len(models) > 1)


DEFAULT_REFERENCE = Column(DEFAULT_COLUMN_DEVICE, DEFAULT_PRECISION, DEFAULT_COMPILER)


def column_order(column: Column) -> tuple:
    """Configurations first, devices within each: the CPU and the GPU cells of one precision
    and compiler sit side by side (issue 51: ordered by device first, the demo's twelve
    columns put its GPU cells, its main story, past 1400 px)."""
    return (
        not is_default("precision", column.precision),
        column.precision,
        not is_default("compiler", column.compiler),
        column.compiler,
        DEVICE_ORDER.get(column.device, 1),
        column.device,
    )


def parse_column(text: str) -> Column:
    """A column's key (``GPU · mixed bf16/fp32 · eager``) or ``GPU/bf16/torch.compile`` ->
    Column (a precision may hold a ``/`` itself); ValueError when it is not three parts."""
    parts = [part.strip() for part in text.split("·")] if "·" in text else [part.strip() for part in text.split("/")]
    if len(parts) > 3 and "·" not in text:
        parts = [parts[0], "/".join(parts[1:-1]), parts[-1]]
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"expected DEVICE/PRECISION/COMPILER such as CPU/fp32/eager, not {text!r}")
    kind, opening, model = parts[0].partition(" (")  # the kind in capitals, the accelerator's model as named
    return Column(kind.upper() + opening + model, parts[1], parts[2])


def build_matrix(
    runs: Sequence[MatrixRun], reference: Column | None = None, warmup: int | None = None
) -> tuple[list[Cell], list[Column], Column | None]:
    """The cells (rows in model, batch size order; columns in ``column_order``), the
    columns, and the reference column used for speedups: ``reference`` where given, else
    CPU · fp32 · eager where present, else the first column. A row with no cell in the
    default reference column takes its own first CPU cell as its reference (a TF model runs
    as a TF graph, a JAX one under XLA: their rows have no eager cell, yet a CPU to
    accelerator speedup); a reference the user picked is kept to. ``warmup``: steps to drop
    from the start of every run (None: detected per run)."""
    asked = reference is not None
    grouped: dict[tuple, list[MatrixRun]] = {}
    named_kinds = named_device_kinds(runs)
    for run in runs:
        grouped.setdefault((run.model, run.batch_size, column_of(run, named_kinds)), []).append(run)
    columns = sorted({column for _, _, column in grouped}, key=column_order)
    if reference is None and columns:
        reference = next((column for column in columns if column == DEFAULT_REFERENCE), columns[0])
    cells = []
    for (model, batch_size, column), members in sorted(
        grouped.items(), key=lambda item: (item[0][0], item[0][1] is None, item[0][1] or 0, column_order(item[0][2]))
    ):
        members = sorted(members, key=lambda member: member.run)
        steps = step_latency([run.step_times_us for run in members], warmup)
        latency = steps.median_us
        throughput = batch_size * 1e6 / latency if batch_size and latency else None
        cells.append(
            Cell(
                model,
                batch_size,
                column,
                [run.run for run in members],
                steps.steps,
                steps.warmup_steps,
                latency,
                steps.std_us,
                steps.p10_us,
                steps.p90_us,
                throughput,
            )
        )
    rows: dict[tuple, list[Cell]] = {}
    for cell in cells:
        rows.setdefault((cell.model, cell.batch_size), []).append(cell)
    for row in rows.values():  # each row's cells are in column order
        base = next((cell for cell in row if cell.column == reference), None)
        if base is None and not asked and reference is not None:
            base = next((cell for cell in row if cell.column.device == reference.device), None)
        if base is None:
            continue
        base.reference = True
        for cell in row:
            if base.latency_us and cell.latency_us:
                cell.speedup = base.latency_us / cell.latency_us
    return cells, columns, reference
