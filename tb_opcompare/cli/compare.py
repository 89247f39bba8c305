"""``tb-opcompare compare``: two runs (or groups) op by op, as the tab's first screen."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from tb_opcompare.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    add_csv_option,
    add_json_option,
    add_request_option,
    add_session_options,
    as_builtins,
    escape_controls,
    open_catalog,
    usage_error,
    write_chunks,
)
from tb_opcompare.schema.requests import CompareRequest, ViewRequest
from tb_opcompare.text import format_bytes, format_speedup, format_time

if TYPE_CHECKING:
    from tb_opcompare.service.compare import ComparedRows
    from tb_opcompare.store.catalog import Catalog


def add(commands: argparse._SubParsersAction, reading: argparse.ArgumentParser) -> None:
    compare = commands.add_parser(
        "compare",
        parents=[reading],
        help="compare two runs op by op (default: the pair the tab opens on; --all-pairs: every automatic pair)",
    )
    compare.add_argument("logdir")
    compare.add_argument(
        "--baseline",
        help="baseline run (default: the baseline of the pair the tab opens on), or a run group: runs "
        "and shell patterns, comma-separated, their executions pooled",
    )
    compare.add_argument(
        "--target", help="target run (default: the target of the pair the tab opens on), or a run group, as --baseline"
    )
    compare.add_argument(
        "--all-pairs",
        action="store_true",
        help="without --baseline/--target: every automatic CPU/accelerator pair, not only the one the tab opens on",
    )
    add_request_option(compare, CompareRequest, "repeats")
    add_session_options(compare)
    add_request_option(compare, CompareRequest, "group_by")
    compare.add_argument("--no-normalize-types", action="store_true", help="keep oneDNN/cuDNN op types apart")
    add_request_option(compare, ViewRequest, "sort", metavar="COLUMN", note="largest first")
    add_request_option(compare, ViewRequest, "top", metavar="N")
    add_csv_option(compare, "the rows", "; for the automatic pairs, each row starts with its baseline and target run")
    add_json_option(compare, "the compare document")
    compare.add_argument(
        "--memory", action="store_true", help="show what each op allocated per execution, and each run's peak memory"
    )
    compare.add_argument("--table", action="store_true", help="print the table too (the default without --csv/--json)")
    compare.set_defaults(handler=_compare)


def _compare(args) -> int:
    catalog = open_catalog(args, every_run=not args.baseline)  # no runs named: the automatic pairs
    if bool(args.baseline) != bool(args.target):
        return usage_error("give both --baseline and --target, or neither to compare the pair the tab opens on")
    if args.repeats and not args.baseline:
        return usage_error("--repeats pools the runs given with --baseline/--target; name them")
    if args.all_pairs and args.baseline:
        return usage_error("--all-pairs compares the automatic pairs: give it without --baseline/--target")
    pairs = _named_pair(catalog, args) if args.baseline else _automatic_pairs(catalog, args.all_pairs)
    if not pairs:
        return EXIT_USAGE  # _automatic_pairs said why
    compared = [_compared(catalog, args, baseline, target) for baseline, target in pairs]
    _emit_comparisons(args, compared)
    return EXIT_OK


def _named_pair(catalog: Catalog, args) -> list[tuple]:
    """The one pair --baseline and --target name: each side a run, or a group of runs
    (with their repeats under --repeats)."""
    from tb_opcompare.store.run_groups import both_sides

    return [both_sides(catalog, args.baseline, args.target, args.repeats)]


def _automatic_pairs(catalog: Catalog, every_pair: bool) -> list[tuple]:
    """The pair the tab opens on, as the tab picks it (issue 51: the CLI printed every
    pair, batch 1 first, where the tab opened on batch 64); with ``every_pair`` the
    logdir's CPU/accelerator pairs. Without either, none, after saying so and listing the
    runs to name instead."""
    from tb_opcompare.service.runs import runs_document

    runs = as_builtins(runs_document(catalog))
    pairs = [(pair["baseline"], pair["target"]) for pair in runs["pairs"]]
    if every_pair and pairs:
        return pairs
    suggested = _suggested_pair(runs)
    if suggested:
        more = f"; --all-pairs compares all {len(pairs)} CPU/accelerator pairs" if len(pairs) > 1 else ""
        print(
            f"note: comparing the pair the tab opens on: {escape_controls(suggested['reason'])}{more}",
            file=sys.stderr,
        )
        return [(suggested["baseline"], suggested["target"])]
    if pairs:
        return pairs[:1]
    print("error: no automatic CPU/GPU pairs in this logdir; name two runs with --baseline/--target", file=sys.stderr)
    print("known: " + ", ".join(escape_controls(run["run"]) for run in runs["runs"]), file=sys.stderr)
    return []


def _suggested_pair(runs: dict) -> dict | None:
    """The pair the tab opens on (the widest batch-size change of one model), where it is
    two runs of one model: the only comparison worth making without a device pair."""
    suggested = runs["suggested"]
    if not suggested or suggested["baseline"] == suggested["target"]:
        return None
    models = {run["run"]: run["model"] for run in runs["runs"]}
    return suggested if models.get(suggested["baseline"]) == models.get(suggested["target"]) else None


def _compared(catalog: Catalog, args, baseline, target) -> tuple[dict, ComparedRows]:
    """One pair's compare document, as the options shape it, in builtin types, and its
    rows as a table. Its ``rows`` are records only where the table is printed: a CSV is
    written from the table, the JSON a page of records at a time (a million rows made
    records took 2 GB)."""
    from tb_opcompare.analysis.row_view import RowView
    from tb_opcompare.service.compare import compared_rows

    compared = compared_rows(
        catalog,
        baseline,
        target,
        group_by=args.group_by,
        baseline_session=args.baseline_session,
        target_session=args.target_session,
        normalize=not args.no_normalize_types,
        view=RowView(sort=args.sort, top=args.top),
        records=_prints_table(args),
    )
    return as_builtins(compared.document), compared


def _prints_table(args) -> bool:
    return bool(args.table or not (args.csv or args.json))


def _json_chunks(compared: list[ComparedRows]) -> Iterator[str]:
    """``json_text`` of the compare document (of a list of them, for several pairs), made a
    page of records at a time."""
    from tb_opcompare.service.records import json_chunks

    several = len(compared) > 1
    yield "[\n  " if several else ""
    for number, rows in enumerate(compared):
        yield ",\n  " if number else ""
        for piece in json_chunks(rows.document, "rows", rows.record_chunks(), indent=2, depth=int(several)):
            yield str(piece, "utf-8")
    yield "\n]\n" if several else "\n"


def _emit_comparisons(args, compared: list[tuple[dict, ComparedRows]]) -> None:
    """The compare documents as the options ask: any of --csv and --json, and the table
    with --table or without either."""
    documents = [document for document, _ in compared]
    if args.csv:
        write_chunks(args.csv, _pairs_csv(compared, with_pairs=not args.baseline))
        if args.csv != "-":
            rows = sum(len(rows.positions) for _, rows in compared)
            print(f"wrote {rows} rows to {args.csv}", file=sys.stderr)
    if args.json:
        write_chunks("-", _json_chunks([rows for _, rows in compared]))
    if _prints_table(args):
        for document in documents:
            _print_comparison(document, memory=args.memory)


PAIR_COLUMNS = ["baseline_run", "target_run"]


def _pairs_csv(compared: list[tuple[dict, ComparedRows]], with_pairs: bool) -> Iterator[str]:
    """Named runs: exactly the bytes of the API's ``compare.csv``. The automatic pairs
    (however many there are, so scripts see one layout): one table, each row led by the
    pair it belongs to. Made a chunk of rows at a time."""
    from tb_opcompare.service.csv_export import split_csv_chunks, table_csv_chunks

    if not with_pairs:
        _, rows = compared[0]
        yield from split_csv_chunks(rows.table, positions=rows.positions)
        return
    columns = PAIR_COLUMNS + list(compared[0][0]["columns"])
    for index, (document, rows) in enumerate(compared):
        runs = {
            "baseline_run": document["summary"]["baseline"]["run"],
            "target_run": document["summary"]["target"]["run"],
        }
        yield from table_csv_chunks(rows.table, columns, positions=rows.positions, leading=runs, header=index == 0)


def _mean(row: dict, side: str) -> str:
    """A side's mean time, marked ``~`` where it is noisy."""
    return format_time(row[f"{side}_mean_us"]) + (" ~" if row[f"{side}_noisy"] else "  ")


def _print_comparison(document: dict, memory: bool = False) -> None:
    document = escape_controls(document)
    summary = document["summary"]
    _print_compared_runs(summary)
    _print_speedups(summary)
    _print_breakdown(summary)
    for note in summary["notes"]:
        print(f"note: {note}")
    for side in ("baseline", "target"):  # what the tab lists beside the notes: each run's own warnings
        for warning in summary[side]["warnings"]:
            print(f"warning: {summary[side]['run']}: {warning}")
    if memory:
        _print_peak_memory(summary)
    _print_compared_ops(document["rows"], memory)
    if summary["noisy_ops"]:
        print(
            f"~ noisy: {summary['noisy_ops']} matched ops vary widely from one occurrence to the next (CV > 0.5); "
            "their means and speedups are unreliable (the JSON and CSV have median, p10, p90 and CV)"
        )
    print()


def _print_compared_runs(summary: dict) -> None:
    """``baseline: <run> (<device>)`` and the same for the target; a pooled side lists its runs."""
    for label, side in (("baseline:", "baseline"), ("target:  ", "target")):
        record, runs = summary[side], summary[f"{side}_runs"]
        name = record["run"] if len(runs) == 1 else f"{len(runs)} runs pooled ({', '.join(runs)})"
        print(f"{label} {name} ({record['device']}{', ' + record['device_name'] if record['device_name'] else ''})")


def _print_speedups(summary: dict) -> None:
    """The headline speedup, then the one op time ratio beside it (as the tab's first
    screen), and the ops faster and slower; matched op time and the geometric mean are in
    ``--json``."""
    headline = summary["headline_speedup"]
    print(
        f"speedup {format_speedup(headline)} ({summary['headline_text']})"
        if headline
        else f"speedup: n/a ({summary['headline_text']})"
    )
    op_time = summary["op_time_speedup"]
    print(
        f"op time {format_speedup(op_time)} (all ops, {summary['op_time_basis']}; not wall time)"
        if op_time
        else "op time: n/a",
        f"| faster {summary['faster_ops']}, slower {summary['slower_ops']},"
        f" baseline-only {summary['baseline_only_ops']}, target-only {summary['target_only_ops']}",
    )


def _print_breakdown(summary: dict) -> None:
    """Where the time went: the waterfall as a table, from the baseline's step to the
    target's (the tab's chart under the headline), then the device's time."""
    breakdown = summary["breakdown"]
    if breakdown is None:
        if summary["breakdown_note"]:
            print(f"where the time went: {summary['breakdown_note']}")
        return
    print(
        f"\nwhere the time went (median steady step){': ' + summary['breakdown_note'] if summary['breakdown_note'] else ''}"
    )
    print(f"  {'baseline':>10}  {'target':>10}  {'change':>10}  what")
    print(f"  {format_time(breakdown['baseline_wall_us']):>10}  {'':>10}  {'':>10}  the baseline's step")
    for side in ("host", "device"):
        parts = [part for part in breakdown["parts"] if part["side"] == side]
        if side == "device" and parts:
            print("  on the device, in the same steps:")
        for part in parts:  # a time is null on a side that ran on no device: format_time's "–"
            change = part["change_us"]
            sign = "" if change is None else "+" if change > 0 else "-" if change < 0 else " "
            magnitude = None if change is None else abs(change)
            print(
                f"  {format_time(part['baseline_us']):>10}  {format_time(part['target_us']):>10}"
                f"  {sign + format_time(magnitude):>10}  {part['label']}"
            )
        if side == "host":
            print(f"  {'':>10}  {format_time(breakdown['target_wall_us']):>10}  {'':>10}  the target's step")
    _print_run_splits(breakdown["runs"])
    print()


def _print_run_splits(runs: list[dict]) -> None:
    """Each pooled run's own median steady step and its largest host parts."""
    if not runs:
        return
    print("  each run's (or rank's) own median steady step:")
    for run in runs:
        largest = sorted(run["host"].items(), key=lambda item: -item[1])[:3]
        parts = ", ".join(f"{category} {format_time(time)}" for category, time in largest)
        print(f"    {run['side']:<8}  {format_time(run['wall_us']):>10}  {escape_controls(run['run'])}: {parts}")


def _print_peak_memory(summary: dict) -> None:
    for side in ("baseline", "target"):
        peaks = ", ".join(
            f"{device} {format_bytes(size)}" for device, size in summary[side]["peak_memory_bytes"].items()
        )
        print(f"peak memory, {side}: {peaks or 'not recorded (profile_memory=True records it)'}")


def _print_compared_ops(rows: list[dict], memory: bool) -> None:
    """The table of ops: speedup, both means, with ``memory`` what each allocated per call, status."""
    columns = f"  {'base alloc/call':>15}  {'target alloc/call':>17}" if memory else ""
    print(f"{'speedup':>9}  {'base mean':>11}  {'target mean':>12}{columns}  {'status':<13}  op")
    for row in rows:
        allocated = (
            (
                f"  {format_bytes(row['baseline_alloc_bytes_per_execution']):>15}"
                f"  {format_bytes(row['target_alloc_bytes_per_execution']):>17}"
            )
            if memory
            else ""
        )
        print(
            f"{format_speedup(row['speedup']):>9}  {_mean(row, 'baseline'):>11}  {_mean(row, 'target'):>12}{allocated}"
            f"  {row['status']:<13}  {row['key']}"
            + (f" ({row['op_type']})" if row["op_type"] not in (None, row["key"]) else "")
        )
