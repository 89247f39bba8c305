"""``tb-opcompare``: list runs and compare them from a shell, a script or CI.

Exit codes: 0 success; 1 a profile could not be read (the file and the reason are
printed); 2 usage errors and unknown runs (the runs that exist are listed).
"""

from __future__ import annotations

import argparse
import json
import sys

from .catalog import Catalog, UnknownRunError
from .compare import GROUP_BY
from .documents import compare_csv, compare_document, runs_document, select_rows
from .errors import ProfileError

EXIT_OK, EXIT_UNREADABLE, EXIT_USAGE = 0, 1, 2


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except UnknownRunError as error:
        print(f"error: {error.message}", file=sys.stderr)
        print("known: " + (", ".join(error.known) if error.known else "(none)"), file=sys.stderr)
        return EXIT_USAGE
    except ProfileError as error:
        print(f"error: cannot read {error.path}: {error.reason}", file=sys.stderr)
        return EXIT_UNREADABLE
    except BrokenPipeError:
        return EXIT_OK


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tb-opcompare", description="Compare per-op times of profile runs.")
    commands = parser.add_subparsers(dest="command", required=True)

    runs = commands.add_parser("runs", help="list the profile runs in a logdir and the automatic pairs")
    runs.add_argument("logdir")
    runs.add_argument("--json", action="store_true", help="print the runs document as JSON")
    runs.set_defaults(handler=_runs)

    compare = commands.add_parser("compare", help="compare two runs op by op (default: every automatic pair)")
    compare.add_argument("logdir")
    compare.add_argument("--baseline", help="baseline run (default: the CPU run of each pair)")
    compare.add_argument("--target", help="target run (default: the GPU run of each pair)")
    compare.add_argument("--baseline-session")
    compare.add_argument("--target-session")
    compare.add_argument("--group-by", choices=GROUP_BY, default="name")
    compare.add_argument("--no-normalize-types", action="store_true", help="keep oneDNN/cuDNN op types apart")
    compare.add_argument("--sort", help="column to sort by, largest first (e.g. speedup, baseline_total_us)")
    compare.add_argument("--top", type=_positive_int, help="show only the first N rows")
    compare.add_argument("--csv", metavar="FILE", help="write the rows as CSV to FILE ('-' for stdout)")
    compare.add_argument("--json", action="store_true", help="print the compare document as JSON")
    compare.set_defaults(handler=_compare)
    return parser


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be a positive integer")
    return value


def _runs(args) -> int:
    document = runs_document(Catalog(args.logdir))
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        _print_runs(document)
    return EXIT_UNREADABLE if document["errors"] else EXIT_OK


def _print_runs(document: dict) -> None:
    if not document["runs"] and not document["errors"]:
        print("no profile runs found")
    for run in document["runs"]:
        batch = f"{run['batch_size']} ({run['batch_size_source']})" if run["batch_size"] else "unknown"
        steps = run["steps"] if run["steps"] is not None else "unknown"
        device = run["device"] + (f" [{run['device_name']}]" if run["device_name"] else "")
        print(
            f"{run['run']}\tformat={run['format']}\tdevice={device}\tbatch={batch}\tsteps={steps}"
            f"\tmodel={run['model']}\tsessions={len(run['sessions'])}"
        )
    if document["pairs"]:
        print("\npairs (baseline -> target):")
        for pair in document["pairs"]:
            print(f"  {pair['baseline']} -> {pair['target']}\tmodel={pair['model']}\tby {pair['matched_by']}")
    if document["errors"]:
        print("\nunreadable:")
        for error in document["errors"]:
            print(f"  {error['path']}: {error['message']}")


def _compare(args) -> int:
    catalog = Catalog(args.logdir)
    if bool(args.baseline) != bool(args.target):
        print("error: give both --baseline and --target, or neither to compare every automatic pair", file=sys.stderr)
        return EXIT_USAGE
    if args.baseline:
        pairs = [(args.baseline, args.target)]
    else:
        runs = runs_document(catalog)
        pairs = [(p["baseline"], p["target"]) for p in runs["pairs"]]
        if not pairs:
            print("error: no automatic CPU/GPU pairs in this logdir; name two runs with --baseline/--target",
                  file=sys.stderr)
            print("known: " + ", ".join(r["run"] for r in runs["runs"]), file=sys.stderr)
            return EXIT_USAGE
    documents = []
    for baseline, target in pairs:
        document = compare_document(
            catalog, baseline, target, group_by=args.group_by,
            baseline_session=args.baseline_session, target_session=args.target_session,
            normalize=not args.no_normalize_types,
        )
        if args.sort and args.sort not in document["columns"]:
            print(f"error: unknown sort column {args.sort!r}; columns: {', '.join(document['columns'])}",
                  file=sys.stderr)
            return EXIT_USAGE
        document["rows"] = select_rows(document["rows"], args.sort, args.top)
        documents.append(document)
    if args.csv:
        text = "".join(compare_csv(d["rows"]) if i == 0 else compare_csv(d["rows"]).split("\n", 1)[1]
                       for i, d in enumerate(documents))
        if args.csv == "-":
            sys.stdout.write(text)
        else:
            with open(args.csv, "w", encoding="utf-8", newline="") as handle:
                handle.write(text)
    if args.json:
        print(json.dumps(documents[0] if len(documents) == 1 else documents, indent=2))
    elif args.csv != "-":
        for document in documents:
            _print_comparison(document)
    return EXIT_OK


def _format_us(value) -> str:
    if value is None:
        return "-"
    if value >= 1e6:
        return f"{value / 1e6:.2f} s"
    if value >= 1e3:
        return f"{value / 1e3:.2f} ms"
    return f"{value:.1f} µs"


def _print_comparison(document: dict) -> None:
    summary = document["summary"]
    base, tgt = summary["baseline"], summary["target"]
    print(f"baseline: {base['run']} ({base['device']}{', ' + base['device_name'] if base['device_name'] else ''})")
    print(f"target:   {tgt['run']} ({tgt['device']}{', ' + tgt['device_name'] if tgt['device_name'] else ''})")
    overall = summary["overall_speedup"]
    geomean = summary["geomean_speedup"]
    print(
        f"overall speedup {overall:.2f}x ({summary['overall_speedup_basis']})" if overall else "overall speedup: n/a",
        f"| geomean {geomean:.2f}x" if geomean else "| geomean n/a",
        f"| faster {summary['faster_ops']}, slower {summary['slower_ops']},"
        f" baseline-only {summary['baseline_only_ops']}, target-only {summary['target_only_ops']}",
    )
    header = f"{'speedup':>9}  {'base mean':>10}  {'target mean':>11}  {'status':<13}  op"
    print(header)
    for row in document["rows"]:
        speedup = f"{row['speedup']:.2f}x" if row["speedup"] is not None else "-"
        print(
            f"{speedup:>9}  {_format_us(row['baseline_mean_us']):>10}  {_format_us(row['target_mean_us']):>11}"
            f"  {row['status']:<13}  {row['key']} ({row['op_type']})"
        )
    print()


if __name__ == "__main__":
    sys.exit(main())
