"""``tb-opcompare runs``: the logdir's runs, their facts and the automatic pairs."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from tb_opcompare.cli.common import (
    EXIT_OK,
    EXIT_UNREADABLE,
    add_json_option,
    as_builtins,
    escape_controls,
    json_text,
    open_catalog,
)
from tb_opcompare.text import format_time

if TYPE_CHECKING:
    pass


def add(commands: argparse._SubParsersAction, reading: argparse.ArgumentParser) -> None:
    runs = commands.add_parser(
        "runs", parents=[reading], help="list the profile runs in a logdir and the automatic pairs"
    )
    runs.add_argument("logdir")
    add_json_option(runs, "the runs document")
    runs.add_argument("--lazy", action="store_true", help="read no trace: facts of cached runs, names for the rest")
    runs.set_defaults(handler=_runs)


def _runs(args) -> int:
    catalog = open_catalog(args, every_run=not args.lazy)
    from tb_opcompare.service.runs import runs_document

    document = as_builtins(runs_document(catalog, load=not args.lazy))
    if args.json:
        sys.stdout.write(json_text(document))
    else:
        _print_runs(document)
    return EXIT_UNREADABLE if document["errors"] else EXIT_OK


def _workers_text(workers: list[dict]) -> str:
    """``\tworkers=2 (ranks 0, 1 of 2; steps 4.10 ms, 4.32 ms)``: a job's ranks read as one run."""
    if not workers:
        return ""
    ranks = ", ".join(str(worker["rank"]) for worker in workers)
    steps = ", ".join(format_time(worker["step_time_us"]) for worker in workers)
    return f"\tworkers={len(workers)} (ranks {ranks} of {workers[0]['world_size']}; median steps {steps})"


def _print_runs(document: dict) -> None:
    from tb_opcompare.schema.contract import READ_FROM_PROFILE  # loaded already: the document was made with it

    document = escape_controls(document)
    if not document["runs"] and not document["errors"]:
        print("no profile runs found")
    for run in document["runs"]:
        batch = f"{run['batch_size']} ({run['batch_size_source']})" if run["batch_size"] else "unknown"
        steps = run["steps"] if run["steps"] is not None else "unknown"
        device = (run["device"] or "unknown") + (f" [{run['device_name']}]" if run["device_name"] else "")
        print(
            f"{run['run']}\tformat={run['format']}\tdevice={device}\tbatch={batch}\tsteps={steps}"
            + "".join(f"\t{fact}={run[fact]}" for fact in ("precision", "compiler") if run[fact])
            + f"\tmodel={run['model']}"
            + (f" ({run['model_source']})" if run["model_source"].startswith("data") else "")
            + f"\tsessions={len(run['sessions'])}"
            + _workers_text(run["workers"])
            + ("" if run["loaded"] else "\t(not read yet)")
            + (f"\tread from {run['read_from']}" if run["read_from"] not in (None, READ_FROM_PROFILE) else "")
        )
    if document["pairs"]:
        print("\npairs (baseline -> target):")
        for pair in document["pairs"]:
            print(f"  {pair['baseline']} -> {pair['target']}\tmodel={pair['model']}\tby {pair['matched_by']}")
    if document["variant_pairs"]:
        print("\nprecision and compiler pairs (baseline -> target; compare one with --baseline/--target):")
        for pair in document["variant_pairs"]:
            print(f"  {pair['baseline']} -> {pair['target']}\t{pair['varies']}\tmodel={pair['model']}")
    if document["errors"]:
        print("\nunreadable:")
        for error in document["errors"]:
            print(f"  {error['path']}: {error['message']}")
    for notice in document["notices"]:
        print(f"note: {notice}", file=sys.stderr)
