"""The matrix document: every run of the logdir (or of the chosen models) placed by model,
precision, compiler and batch size against device, with its steady-state latency. A run's
precision and compiler are what its sidecar or name claims where its data agrees (Keras's
``mixed_bfloat16`` is the ``bf16`` row), else what its data shows."""

from __future__ import annotations

from tb_opcompare.analysis.breakdown import side_of
from tb_opcompare.analysis.matrix import Cell, Column, MatrixRun, build_matrix, parse_column
from tb_opcompare.analysis.numerics import finite_or_none
from tb_opcompare.errors import UsageError
from tb_opcompare.schema.contract import MatrixCell, MatrixColumn, MatrixDocument, MatrixRow
from tb_opcompare.schema.dimensions import DEFAULT_COMPILER, DEFAULT_PRECISION
from tb_opcompare.service.logdir import read_logdir
from tb_opcompare.store.catalog import Catalog


def matrix_document(
    catalog: Catalog,
    reference: str | None = None,
    warmup: int | None = None,
    models: list[str] | None = None,
    part: str | None = None,
) -> MatrixDocument:
    """Reads every run (each once; the cache keeps them); a run that cannot be read
    becomes a warning and never hides the others. ``models`` keeps only these models
    (without precision and compiler, as the matrix's rows name them); ``part``: a part of
    the step split to show beside each cell's step (``input``). Raises UsageError for a
    bad argument."""
    reference_column = _reference_column(reference)
    if warmup is not None and warmup < 0:
        raise UsageError(f"warmup: expected 0 or more steps, not {warmup}", "warmup")
    if part is not None:
        try:
            side_of(part)
        except ValueError as error:
            raise UsageError(f"part: {error}", "part") from None
    runs, warnings = _matrix_runs(catalog, models)
    warnings.extend(_missing_fact_warnings(runs))
    cells, columns, reference_column = build_matrix(runs, reference_column, warmup, part)
    if reference and reference_column is not None and reference_column not in columns:
        warnings.append(f"no run in the reference column {reference_column.key}; no speedups")
    return MatrixDocument(
        reference=reference_column.key if reference_column else None,
        warmup=warmup,
        part=part,
        columns=[MatrixColumn(key=column.key, device=column.device) for column in columns],
        rows=[
            MatrixRow(model=row.model, precision=row.precision, compiler=row.compiler, batch_size=row.batch_size)
            for row in dict.fromkeys(cell.row for cell in cells)
        ],
        cells=_matrix_cells(cells),
        warnings=warnings,
    )


def _reference_column(reference: str | None) -> Column | None:
    """The column speedups are against, in the words the columns use (``gpu`` is ``GPU``).
    Raises UsageError for one that cannot be parsed."""
    try:
        return parse_column(reference) if reference else None
    except ValueError as error:
        raise UsageError(f"reference: {error}", "reference") from None


def _matrix_runs(catalog: Catalog, models: list[str] | None) -> tuple[list[MatrixRun], list[str]]:
    """Every readable run (of ``models`` where given) as the matrix places it, and a
    warning per run that cannot be read. Raises UsageError where ``models`` match none."""
    loaded_runs, failed = read_logdir(catalog)
    warnings = [f"{source.run}: not read: {error.path}: {error.reason}" for source, error in failed]
    runs = [
        MatrixRun(
            run=loaded.source.run,
            model=loaded.base_model,
            batch_size=loaded.profile.facts.batch_size,
            device=loaded.profile.facts.device,
            precision=loaded.precision,
            compiler=loaded.compiler,
            step_times_us=loaded.profile.facts.step_times_us,
            device_name=loaded.profile.facts.device_name,
            breakdown=loaded.profile.breakdown_table,
        )
        for loaded in loaded_runs
        if not models or loaded.base_model in models
    ]
    if models and not runs:
        raise UsageError(f"no readable run of model {', '.join(models)}")
    return runs, warnings


def _missing_fact_warnings(runs: list[MatrixRun]) -> list[str]:
    """What the matrix had to leave out or assume, so a user can tell: a run without step
    markers has no latency, and one that says no precision or compiler is placed in the
    default's column. Names the first five runs of each."""
    warnings = []
    without_markers = sorted(run.run for run in runs if not run.step_times_us)
    if without_markers:
        warnings.append(
            f"{len(without_markers)} run(s) have no step markers, so no latency: "
            f"{', '.join(without_markers[:5])}{' ...' if len(without_markers) > 5 else ''}"
        )
    for dimension, default in (("precision", DEFAULT_PRECISION), ("compiler", DEFAULT_COMPILER)):
        assumed = sorted(run.run for run in runs if getattr(run, dimension) is None)
        if assumed:
            warnings.append(
                f"{len(assumed)} run(s) say no {dimension}, so they sit in the {default} rows: "
                f"{', '.join(assumed[:5])}{' ...' if len(assumed) > 5 else ''}"
            )
    return warnings


def _matrix_cells(cells: list[Cell]) -> list[MatrixCell]:
    """The cells as the document holds them: JSON has no NaN, so a missing figure is null."""
    return [
        MatrixCell(
            model=cell.row.model,
            precision=cell.row.precision,
            compiler=cell.row.compiler,
            batch_size=cell.row.batch_size,
            column=cell.column.key,
            runs=cell.runs,
            steps=cell.steps,
            warmup_steps=cell.warmup_steps,
            latency_us=finite_or_none(cell.latency_us),
            latency_std_us=finite_or_none(cell.latency_std_us),
            latency_p10_us=finite_or_none(cell.latency_p10_us),
            latency_p90_us=finite_or_none(cell.latency_p90_us),
            throughput_per_s=finite_or_none(cell.throughput_per_s),
            speedup=finite_or_none(cell.speedup),
            reference=cell.reference,
            part_us=finite_or_none(cell.part_us),
            part_speedup=finite_or_none(cell.part_speedup),
        )
        for cell in cells
    ]
