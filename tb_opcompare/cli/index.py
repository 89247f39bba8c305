"""``tb-opcompare index`` and ``export``: every session of a logdir read once, into its
shared index or into Parquet tables."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from tb_opcompare.cli.common import EXIT_OK, EXIT_UNREADABLE, EXIT_USAGE, escape_controls, open_catalog, positive_int
from tb_opcompare.errors import ProfileError

if TYPE_CHECKING:
    pass


def add_index(commands: argparse._SubParsersAction, reading: argparse.ArgumentParser) -> None:
    index = commands.add_parser(
        "index",
        parents=[reading],
        help="read every run ahead of time, in parallel, into the logdir's shared index (LOGDIR/.opcompare/)",
        description="Read every session of LOGDIR once and keep the parsed tables in LOGDIR/.opcompare/ (Parquet, "
        "docs/index_schema.md) and in this machine's cache: TensorBoard and the CLI, on any machine that "
        "reads the logdir, then list and compare without reading a profile. Sessions already indexed "
        "from the same files are skipped.",
    )
    index.add_argument("logdir")
    index.add_argument("--jobs", type=positive_int, default=os.cpu_count() or 1, help="worker processes")
    index.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run one task a session on a Dask cluster: its scheduler's address (tcp://HOST:PORT), "
        "or local:N for N worker processes here (pip install 'tb-opcompare[dask]')",
    )
    index.add_argument(
        "--local-only", action="store_true", help="fill this machine's cache only; write nothing into the logdir"
    )
    index.set_defaults(handler=_index)


def add_export(commands: argparse._SubParsersAction, reading: argparse.ArgumentParser) -> None:
    export = commands.add_parser(
        "export",
        parents=[reading],
        help="write every session's tables as Parquet, for DuckDB or pandas",
        description="Write every session of LOGDIR as the tables of docs/index_schema.md (runs, ops, steps, modules, "
        "annotations, memory) into DIR/<table>/<table>.parquet: each run's facts settled and its model.",
    )
    export.add_argument("logdir")
    export.add_argument(
        "--parquet", required=True, metavar="DIR", help="the folder to write (a local path or a bucket's URL)"
    )
    export.add_argument(
        "--overwrite",
        action="store_true",
        help="replace DIR even where it is not an earlier export (an earlier export is always replaced whole)",
    )
    export.set_defaults(handler=_export)


def _index(args) -> int:
    from tb_opcompare.store.prewarm import check_scheduler, index_logdir

    check_scheduler(args.scheduler, shared=not args.local_only)  # refused before the logdir is read
    catalog = open_catalog(args)
    try:
        report = index_logdir(
            catalog,
            jobs=args.jobs,
            say=args.reporter.result,
            shared=not args.local_only,
            scheduler=args.scheduler,
            progress=args.reporter,
        )
    except ProfileError as error:  # no Dask, no scheduler at that address
        print(f"error: {escape_controls(error.path)}: {escape_controls(error.reason)}", file=sys.stderr)
        return EXIT_USAGE
    where = "this machine's cache" if args.local_only else f"the shared index {catalog.index.root}"
    print(
        f"{report.read} read, {report.cached} already {'cached' if args.local_only else 'indexed'}, "
        f"{len(report.errors)} unreadable in {report.seconds:.1f} s; kept in {where}"
        + ("" if args.local_only or args.scheduler else f" and {catalog.cache.cache_dir or '(memory only)'}")
    )
    if report.write_error:
        print(
            f"warning: {escape_controls(report.write_error)}; the parsed tables are in this machine's cache only",
            file=sys.stderr,
        )
    for path, reason in report.errors:
        print(f"  {escape_controls(path)}: {escape_controls(reason)}", file=sys.stderr)
    return EXIT_UNREADABLE if report.errors else EXIT_OK


def _export(args) -> int:
    from tb_opcompare.service.dataset import logdir_dataset
    from tb_opcompare.store.export_folder import check_export_target, write_export

    check_export_target(args.parquet, args.logdir, args.overwrite)  # refused before the logdir is read
    dataset = logdir_dataset(open_catalog(args), progress=args.reporter)
    try:
        write_export(args.parquet, dataset.tables, args.logdir, args.overwrite)
    except OSError as error:
        print(
            f"error: cannot write {escape_controls(args.parquet)}: {escape_controls(str(error.strerror or error))}",
            file=sys.stderr,
        )
        return EXIT_UNREADABLE
    print(
        f"{dataset.sessions} sessions written to {escape_controls(args.parquet)} "
        f"({', '.join(dataset.tables)}); {len(dataset.errors)} unreadable"
    )
    for path, reason in dataset.errors:
        print(f"  {escape_controls(path)}: {escape_controls(reason)}", file=sys.stderr)
    return EXIT_UNREADABLE if dataset.errors else EXIT_OK
