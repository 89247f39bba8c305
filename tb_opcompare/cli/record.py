"""``tb-opcompare record``: a training command run once per device, batch size and cell."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from tb_opcompare.cli.common import EXIT_OK, EXIT_UNREADABLE, EXIT_USAGE, device_list, int_list, positive_int

if TYPE_CHECKING:
    pass


def add(commands: argparse._SubParsersAction) -> None:
    # no reading options: record runs a training command and reads no profile
    record = commands.add_parser(
        "record",
        help="run a training command once per device and batch size, profiled",
        description="Runs COMMAND once per device, batch size and --matrix cell into "
        "LOGDIR/<model>_<device>_bs<N>[_<value>...] (<...>_rep<K> with --repeats). "
        "{batch_size}, {run_dir}, {device}, {model} and each --matrix dimension ({precision}, "
        "{backend} ...) in COMMAND are filled in; the helpers in tb_opcompare.recording read the same "
        "values from the environment and write them to the run's opcompare.json.",
    )
    record.add_argument("--logdir", required=True)
    record.add_argument("--model", required=True, help="model name: the runs' name prefix and model key")
    record.add_argument("--batch-sizes", required=True, type=int_list, help="comma-separated, e.g. 1,16,64")
    record.add_argument("--devices", default="cpu,gpu", type=device_list, help="cpu,gpu (absent ones are skipped)")
    record.add_argument(
        "--repeats",
        type=positive_int,
        default=1,
        help="record each device and batch size N times, into <run>_rep1 .. <run>_repN",
    )
    record.add_argument(
        "--matrix",
        action="append",
        default=[],
        metavar="DIMENSION=V1,V2",
        help="record every combination of these values too (repeatable), e.g. "
        "--matrix precision=fp32,bf16 --matrix backend=eager,compile (precision, and backend or "
        "compiler: the runs' facts, in their names and sidecars)",
    )
    record.add_argument(
        "--force", action="store_true", help="record into run directories that already hold a profile (adds a capture)"
    )
    record.add_argument(
        "--index",
        action="store_true",
        help="then add the new runs to the logdir's shared index (as `tb-opcompare index` does)",
    )
    record.add_argument("-q", "--quiet", action="store_true", help="no progress bar (the lines of each run stay)")
    record.add_argument("command", nargs=argparse.REMAINDER, help="-- the training command")
    record.set_defaults(handler=_record)


def _record(args) -> int:
    from tb_opcompare.recording.runner import RecordingPlan, parse_matrix, record_runs

    try:
        matrix = parse_matrix(args.matrix)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        print(
            "error: give the training command after --, e.g. -- python train.py --batch-size {batch_size}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    plan = RecordingPlan(
        args.logdir,
        args.model,
        args.batch_sizes,
        args.devices,
        command,
        force=args.force,
        repeats=args.repeats,
        matrix=matrix,
    )
    results = record_runs(plan, say=args.reporter.result, progress=args.reporter)
    failed = [r for r in results if not r.ok]
    print(f"\n{len(results) - len(failed)} of {len(results)} runs recorded into {args.logdir}")
    if args.index and len(failed) < len(results):
        from tb_opcompare.recording.profilers import index_recorded

        index_recorded(args.logdir, index=args.logdir)
    for result in failed:
        print(f"FAILED {result.run_dir}: {result.reason}", file=sys.stderr)
    if results and not failed:
        print(
            f"next: tensorboard --logdir {args.logdir}   (or: tb-opcompare "
            + (f"matrix {args.logdir})" if matrix else f"sweep {args.logdir} --model {args.model})")
        )
    return EXIT_UNREADABLE if failed or not results else EXIT_OK
