"""``tb-opcompare matrix``: step latency and throughput, configuration against device."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from tb_opcompare.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    add_csv_option,
    add_json_option,
    add_request_option,
    emit,
    escape_controls,
    open_catalog,
)
from tb_opcompare.schema.requests import MatrixRequest
from tb_opcompare.text import format_speedup, format_throughput, format_time

if TYPE_CHECKING:
    pass


def add(commands: argparse._SubParsersAction, reading: argparse.ArgumentParser) -> None:
    matrix = commands.add_parser(
        "matrix",
        parents=[reading],
        help="step latency and throughput: model x precision x compiler x batch size against device",
        description="Every run placed by model, precision, compiler and batch size (rows, from the data, else "
        "the sidecar or the run name) against device (columns); each cell the median wall time of a "
        "steady step (step markers, warm-up steps left out), its spread, the throughput (batch x 10^6 / "
        "step us) and the speedup against the reference column. Repeats of one cell are pooled.",
    )
    matrix.add_argument("logdir")
    add_request_option(matrix, MatrixRequest, "reference", metavar="COLUMN")
    add_request_option(matrix, MatrixRequest, "warmup", metavar="N")
    add_request_option(matrix, MatrixRequest, "model", metavar="MODEL")
    add_request_option(matrix, MatrixRequest, "part", metavar="CATEGORY")
    add_csv_option(matrix, "one line per cell")
    add_json_option(matrix, "the matrix document")
    matrix.set_defaults(handler=_matrix)


def _matrix(args) -> int:
    catalog = open_catalog(args, every_run=True)
    from tb_opcompare.service.csv_export import matrix_csv
    from tb_opcompare.service.matrix import matrix_document

    document = matrix_document(catalog, reference=args.reference, warmup=args.warmup, models=args.model, part=args.part)
    emit(args, document, matrix_csv, f"{len(document.cells)} cells", _print_matrix)
    return EXIT_OK if document.cells else EXIT_USAGE


def _print_matrix(document) -> None:
    cells = {(cell.model, cell.precision, cell.compiler, cell.batch_size, cell.column): cell for cell in document.cells}
    print(
        f"steady step latency, samples/s and speedup against {document.reference or '(no reference)'}; "
        f"warm-up: {'detected per run' if document.warmup is None else f'{document.warmup} steps left out'}"
    )
    for row in document.rows:
        print(f"\n{escape_controls(row.model)} · {row.precision} · {row.compiler} · bs{row.batch_size or '?'}")
        for column in document.columns:
            cell = cells.get((row.model, row.precision, row.compiler, row.batch_size, column.key))
            if cell is None:
                continue
            spread = (
                f" (p10-p90 {format_time(cell.latency_p10_us)}-{format_time(cell.latency_p90_us)})"
                if cell.latency_p10_us is not None
                else ""
            )
            speedup = "reference" if cell.reference else format_speedup(cell.speedup)
            part = (
                f"  {document.part}: {format_time(cell.part_us)}"
                + ("" if cell.reference else f" ({format_speedup(cell.part_speedup)})")
                if document.part
                else ""
            )
            print(
                f"  {escape_controls(column.key)}: {format_time(cell.latency_us)}{spread}  "
                f"{format_throughput(cell.throughput_per_s)}  {speedup}{part}  [{len(cell.runs)} run{'s' * (len(cell.runs) > 1)}, {cell.steps} steps]"
            )
    for warning in document.warnings:
        print(f"warning: {escape_controls(warning)}", file=sys.stderr)
