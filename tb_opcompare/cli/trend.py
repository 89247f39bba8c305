"""``tb-opcompare trend``: a model's top ops across many runs, in order."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from tb_opcompare.cli.common import (
    EXIT_OK,
    add_csv_option,
    add_json_option,
    add_request_option,
    add_run_list_option,
    emit,
    escape_controls,
    open_catalog,
)
from tb_opcompare.schema.requests import TrendRequest
from tb_opcompare.text import format_time

if TYPE_CHECKING:
    pass


def add(commands: argparse._SubParsersAction, reading: argparse.ArgumentParser) -> None:
    trend = commands.add_parser(
        "trend",
        parents=[reading],
        help="a model's top ops across many runs, in order (time, label, version, or a swept dimension)",
        description="Each op's mean per execution at each point of an order; runs that share a value of the "
        "order (the repeats of one version, say) are pooled, with a 95%% interval. Ordered by a run "
        "dimension (device, batch_size, precision, compiler) it sweeps that dimension: choose runs that "
        "hold the others (a point that pools runs differing in another dimension is warned about).",
    )
    trend.add_argument("logdir")
    add_run_list_option(trend, "--runs", "runs, comma-separated; shell patterns such as 'resnet_cpu_bs32_*' work")
    add_request_option(trend, TrendRequest, "order_by", metavar="ORDER")
    add_request_option(trend, TrendRequest, "top", metavar="N")
    add_request_option(trend, TrendRequest, "group_by")
    add_csv_option(trend, "the rows")
    add_json_option(trend, "the trend document")
    trend.set_defaults(handler=_trend)


def _trend(args) -> int:
    from tb_opcompare.service.csv_export import trend_csv
    from tb_opcompare.service.trend import trend_document
    from tb_opcompare.store.run_groups import expand_runs

    catalog = open_catalog(args)
    document = trend_document(
        catalog, expand_runs(catalog, args.runs), order_by=args.order_by, top=args.top, group_by=args.group_by
    )
    emit(args, document, trend_csv, f"{len(document.rows)} rows", _print_trend)
    return EXIT_OK


def _print_trend(document) -> None:
    means = {(row["key"], row["point"]): row["mean_us"] for row in document.rows}
    headers = ["op", *(f"{point.value} ({len(point.runs)})" for point in document.points)]
    table = [headers] + [
        [key, *(format_time(means.get((key, position))) for position in range(len(document.points)))]
        for key in document.keys
    ]
    widths = [max(len(escape_controls(row[i])) for row in table) for i in range(len(headers))]
    print(f"mean time per execution by {document.order_by} (runs pooled at each point in brackets)")
    for row in table:
        print("  ".join(escape_controls(value).ljust(width) for value, width in zip(row, widths)).rstrip())
    print(f"(whole step): {document.whole_step_basis}")
    for warning in document.warnings:
        print(f"warning: {escape_controls(warning)}", file=sys.stderr)
