"""``tb-opcompare sweep``: how each op and the whole step scale with batch size."""

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
    as_builtins,
    escape_controls,
    json_text,
    open_catalog,
    write_text,
)
from tb_opcompare.schema.dimensions import SERIES_DIMENSIONS
from tb_opcompare.schema.requests import SweepRequest
from tb_opcompare.text import format_breakeven, format_time

if TYPE_CHECKING:
    from tb_opcompare.store.catalog import Catalog


def add(commands: argparse._SubParsersAction, reading: argparse.ArgumentParser) -> None:
    sweep = commands.add_parser("sweep", parents=[reading], help="how each op and the whole step scale with batch size")
    sweep.add_argument("logdir")
    sweep.add_argument("--model", help="model key (see `runs`); without it, the models that can be swept are listed")
    add_request_option(sweep, SweepRequest, "top", metavar="N")
    add_request_option(sweep, SweepRequest, "ops", metavar="OP")
    add_request_option(sweep, SweepRequest, "group_by")
    add_request_option(sweep, SweepRequest, "series_by")
    for dimension in SERIES_DIMENSIONS:
        add_request_option(sweep, SweepRequest, dimension, metavar="VALUE")
    add_csv_option(sweep, "the fits table")
    sweep.add_argument("--html", metavar="FILE", help="write an offline HTML report with the plots to FILE")
    add_json_option(sweep, "the sweep document")
    sweep.set_defaults(handler=_sweep)


def _sweep(args) -> int:
    catalog = open_catalog(args, every_run=True)
    from tb_opcompare.analysis.sweep import FIT_COLUMNS
    from tb_opcompare.service.csv_export import compare_csv
    from tb_opcompare.service.sweep import fits_table, sweep_document

    if not args.model:
        return _list_sweepable(catalog, args.logdir)
    held = {dimension: getattr(args, dimension) for dimension in SERIES_DIMENSIONS if getattr(args, dimension)}
    document = sweep_document(
        catalog, args.model, top=args.top, ops=args.ops, group_by=args.group_by, series_by=args.series_by, held=held
    )
    table = as_builtins(fits_table(document))  # the rows as the CSV and the text print them
    if args.csv:
        write_text(args.csv, compare_csv(table, FIT_COLUMNS))
    if args.html:
        from tb_opcompare.cli.html_report import sweep_html

        write_text(args.html, sweep_html(document), newline=None)
    if args.json:
        sys.stdout.write(json_text(document))
    elif args.csv != "-":
        _print_sweep(as_builtins(document), table)
    enough = any(len(sizes) >= 2 for sizes in document.batch_sizes.values())
    return EXIT_OK if enough else EXIT_USAGE


def _list_sweepable(catalog: Catalog, logdir: str) -> int:
    from tb_opcompare.service.sweep import sweeps_document

    document = as_builtins(sweeps_document(catalog))
    if not document["sweepable"]:
        print("no model has two or more batch sizes on one device; record more with `tb-opcompare record`")
        return EXIT_OK
    print("models with two or more batch sizes on one device (sweep one with --model KEY):")
    for model in sorted(document["sweepable"]):
        sizes = document["models"][model]
        print(f"  {escape_controls(model)}\t" + "  ".join(f"{d}: {s}" for d, s in sizes.items()))
    example = document["sweepable"][0]
    print(f"\ne.g. tb-opcompare sweep {escape_controls(logdir)} --model {escape_controls(example)}")
    return EXIT_OK


def _print_sweep(document: dict, table: list[dict]) -> None:
    from tb_opcompare.analysis.sweep import STEP

    document, table = escape_controls(document), escape_controls(table)
    held = ", ".join(f"{dimension} {value}" for dimension, value in document["held"].items())
    print(
        f"model {document['model']} ({held}), lines by {document['series_by']}: "
        + ", ".join(f"{d} at batch sizes {s}" for d, s in document["batch_sizes"].items())
    )
    for warning in document["warnings"]:
        print(f"warning: {warning}")
    if document["steps"]:
        width = max(8, len(document["series_by"]) + 1, *(len(row["series"]) + 1 for row in document["steps"]))
        print(f"\n{document['series_by']:<{width}}{'batch':>7}{'step':>12}{'samples/s':>12}  basis")
        for row in document["steps"]:
            pooled = (
                (
                    f"  {row['repeats']} runs pooled, 95% interval {format_time(row['step_low_us'])} to "
                    f"{format_time(row['step_high_us'])}"
                )
                if (row.get("repeats") or 1) > 1
                else ""
            )
            print(
                f"{row['series']:<{width}}{row['batch_size']:>7}{format_time(row['step_us']):>12}"
                f"{row['samples_per_s']:>12,.0f}  {row['basis']}{pooled}"
            )
    wanted = set(document["top_ops"]) | {STEP}
    print(f"\n{'fixed':>10}  {'per sample':>10}  {'R²':>6}  {'break-even batch':>20}  op ({document['series_by']})")
    for row in table:
        if row["op"] not in wanted:
            continue
        breakeven = format_breakeven(row["breakeven_batch_size"], row["target_faster"], document["target_series"])
        flag = "  poor fit" if row["poor_fit"] else ""
        print(
            f"{format_time(row['fixed_us']):>10}  {format_time(row['per_sample_us']):>10}  {row['r2']:>6.3f}"
            f"  {breakeven:>20}  {row['op']} ({row['series']}){flag}"
        )
