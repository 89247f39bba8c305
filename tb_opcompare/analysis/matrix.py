"""The latency/throughput matrix: rows are model x precision x compiler x batch size,
columns devices (issue 51: with precision and compiler in the columns too, the demo's twelve
columns put its GPU cells, its main story, past 1400 px; now the CPU and GPU cells of one
configuration sit side by side). Where one kind of accelerator came in several models (an
H100 and an H200), the model is part of the device: one model on two accelerators sits
side by side in one row.

A cell pools the step wall times (from step markers) of all its runs, after each run's
warm-up: the leading steps that are much slower than the rest (``detect_warmup``), or a
number of steps the user sets. Latency is the median of the pooled steps
(``analysis.step_time``, the rule of every headline), with their spread (standard
deviation, 10th and 90th percentiles); throughput is
``batch size x 10^6 / latency in µs`` samples per second; the speedup of a cell is its
row's reference cell's latency over its own: one model, precision, compiler and batch
size on two devices. Plain data in, plain data out: no I/O, so it is tested on small lists.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from tb_opcompare.analysis.breakdown import part_time, side_split
from tb_opcompare.analysis.step_time import step_latency
from tb_opcompare.schema.dimensions import DEFAULT_COMPILER, DEFAULT_PRECISION, is_default
from tb_opcompare.schema.table import Table

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
    breakdown: Table | None = None  # its ``step_breakdown`` table, where it splits its steps


@dataclasses.dataclass(frozen=True)
class Column:
    device: str  # the kind (``GPU``), with the accelerator's model where kinds are split by it

    @property
    def key(self) -> str:
        return self.device


@dataclasses.dataclass(frozen=True)
class Row:
    model: str
    precision: str
    compiler: str
    batch_size: int | None


@dataclasses.dataclass
class Cell:
    row: Row
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
    part_us: float | None = None  # the chosen part's time in the cell's median steady step
    part_speedup: float | None = None  # the reference cell's part time / this cell's


def column_of(run: MatrixRun, named_kinds: frozenset[str] = frozenset()) -> Column:
    """A run's column: its device; on a device kind of ``named_kinds`` the accelerator's
    model is part of it (``GPU (NVIDIA H200)``)."""
    device = run.device or UNKNOWN
    if device in named_kinds and run.device_name:
        device = f"{device} ({run.device_name})"
    return Column(device)


def row_of(run: MatrixRun) -> Row:
    """A run's row. An unknown precision or compiler is the default one (fp32, eager), as
    the model key and the sweep count it: a run whose profile does not say is not a
    configuration of its own (the matrix document names such runs)."""
    return Row(run.model, run.precision or DEFAULT_PRECISION, run.compiler or DEFAULT_COMPILER, run.batch_size)


def named_device_kinds(runs: Sequence[MatrixRun]) -> frozenset[str]:
    """The accelerator kinds whose runs ran on more than one model of it (an H100 and an
    H200, an H100 and an MI300X): there the model is a dimension users compare along. A
    kind with one model keeps its plain name, and the CPU is never split by model."""
    names: dict[str, set[str]] = {}
    for run in runs:
        if run.device and run.device != DEFAULT_COLUMN_DEVICE and run.device_name:
            names.setdefault(run.device, set()).add(run.device_name)
    return frozenset(kind for kind, models in names.items() if len(models) > 1)


DEFAULT_REFERENCE = Column(DEFAULT_COLUMN_DEVICE)


def column_order(column: Column) -> tuple[int, str]:
    """The CPU first, then the accelerators by name."""
    return DEVICE_ORDER.get(column.device, 1), column.device


def row_order(row: Row) -> tuple[str, bool, str, bool, str, bool, int]:
    """By model; within it the default precision and compiler first (fp32, eager), then by
    name; then by batch size, an unknown one last."""
    return (
        row.model,
        not is_default("precision", row.precision),
        row.precision,
        not is_default("compiler", row.compiler),
        row.compiler,
        row.batch_size is None,
        row.batch_size or 0,
    )


def parse_column(text: str) -> Column:
    """A column's key (``CPU``, ``GPU (NVIDIA H200)``, any case) -> Column; ValueError for
    a key of the older matrix, whose columns held a precision and a compiler too."""
    text = text.strip()
    if "·" in text or text.count("/") >= 2 or not text:
        raise ValueError(
            f"expected a device such as CPU or GPU, not {text!r}: precision and compiler are rows of the matrix"
        )
    kind, opening, model = text.partition(" (")  # the kind in capitals, the accelerator's model as named
    return Column(kind.upper() + opening + model)


def build_matrix(
    runs: Sequence[MatrixRun], reference: Column | None = None, warmup: int | None = None, part: str | None = None
) -> tuple[list[Cell], list[Column], Column | None]:
    """The cells (in ``row_order``, each row's in ``column_order``), the columns, and the
    reference column used for speedups: ``reference`` where given, else the CPU where
    present, else the first column. ``warmup``: steps to drop from the start of every run
    (None: detected per run). ``part``: a category of the step split (``input``), whose
    time in each cell's median steady step (Compare's breakdown) and speedup join the cell."""
    grouped: dict[tuple[Row, Column], list[MatrixRun]] = {}
    named_kinds = named_device_kinds(runs)
    for run in runs:
        grouped.setdefault((row_of(run), column_of(run, named_kinds)), []).append(run)
    columns = sorted({column for _, column in grouped}, key=column_order)
    if reference is None and columns:
        reference = next((column for column in columns if column == DEFAULT_REFERENCE), columns[0])
    cells = []
    for (row, column), members in sorted(
        grouped.items(), key=lambda item: (row_order(item[0][0]), column_order(item[0][1]))
    ):
        members = sorted(members, key=lambda member: member.run)
        steps = step_latency([run.step_times_us for run in members], warmup)
        latency = steps.median_us
        throughput = row.batch_size * 1e6 / latency if row.batch_size and latency else None
        cells.append(
            Cell(
                row,
                column,
                [run.run for run in members],
                steps.steps,
                steps.warmup_steps,
                latency,
                steps.std_us,
                steps.p10_us,
                steps.p90_us,
                throughput,
                part_us=_part_us(members, part, warmup),
            )
        )
    rows: dict[Row, list[Cell]] = {}
    for cell in cells:
        rows.setdefault(cell.row, []).append(cell)
    for row_cells in rows.values():
        base = next((cell for cell in row_cells if cell.column == reference), None)
        if base is None:
            continue
        base.reference = True
        for cell in row_cells:
            if base.latency_us and cell.latency_us:
                cell.speedup = base.latency_us / cell.latency_us
            if base.part_us and cell.part_us:
                cell.part_speedup = base.part_us / cell.part_us
    return cells, columns, reference


def _part_us(members: Sequence[MatrixRun], part: str | None, warmup: int | None) -> float | None:
    """The part's time in the median steady step of the cell's runs that split their steps."""
    if part is None:
        return None
    split = side_split(
        [(run.step_times_us, run.breakdown) for run in members if run.breakdown is not None], warmup=warmup
    )
    return part_time(split, part)
