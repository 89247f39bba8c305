"""``tb-opcompare``: list runs and compare them from a shell, a script or CI.

Exit codes: 0 success; 1 a profile could not be read (the file and the reason are
printed), or, for ``check``, a significant regression; 2 usage errors and unknown runs
(the runs that exist are listed); 3, for ``check --strict``, not enough evidence.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, NoReturn

from tb_opcompare import __version__
from tb_opcompare.errors import ProfileError, UnknownRunError, UsageError, escape_control_characters
from tb_opcompare.schema.dimensions import (
    COMPARE_GROUP_BY,
    DEFAULT_MIN_SHARE,
    DEFAULT_THRESHOLD,
    DETECTION_POWER,
    FALSE_DISCOVERY_RATE,
    GROUP_BY,
    SERIES_DIMENSIONS,
    evidence_rule,
)
from tb_opcompare.store.settings import ReadSettings
from tb_opcompare.text import (
    format_breakeven,
    format_bytes,
    format_rate,
    format_share,
    format_speedup,
    format_throughput,
    format_time,
    parse_share,
)

if TYPE_CHECKING:
    from tb_opcompare.store.catalog import Catalog

# Each command imports the services it runs when it runs (pandas and the readers are
# most of a second): `--version`, `--help` and a usage error answer in a tenth of one.

EXIT_OK, EXIT_UNREADABLE, EXIT_USAGE = 0, 1, 2
EXIT_REGRESSION = 1  # `check`: something got significantly slower
EXIT_NOT_ENOUGH_EVIDENCE = 3  # `check --strict`: nothing flagged, but the runs could not have shown it


# Run, op and file names come from users' files: printed raw, an escape sequence could
# clear the screen and a newline could forge a line of this tool's output.
def escape_controls(value):
    """``value`` (a string, or a document of them) with control characters escaped."""
    if isinstance(value, str):
        return escape_control_characters(value)
    if isinstance(value, dict):
        return {key: escape_controls(item) for key, item in value.items()}
    if isinstance(value, list):
        return [escape_controls(item) for item in value]
    return value


def json_text(document) -> str:
    """A document as every command's ``--json`` prints it: the HTTP API's JSON, indented."""
    import msgspec  # loaded with the services it prints: --version and --help need neither

    return msgspec.json.format(msgspec.json.encode(document), indent=2).decode() + "\n"


def as_builtins(document):
    """A document as plain dicts and lists, for the text printers."""
    import msgspec

    return msgspec.to_builtins(document)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except UsageError as error:
        print(f"error: {escape_controls(str(error))}", file=sys.stderr)
        return EXIT_USAGE
    except UnknownRunError as error:
        print(f"error: {escape_controls(error.message)}", file=sys.stderr)
        print("known: " + (", ".join(escape_controls(error.known)) if error.known else "(none)"), file=sys.stderr)
        return EXIT_USAGE
    except ProfileError as error:
        print(f"error: cannot read {escape_controls(error.path)}: {escape_controls(error.reason)}", file=sys.stderr)
        return EXIT_UNREADABLE
    except BrokenPipeError:
        return EXIT_OK


def run() -> NoReturn:
    """The ``tb-opcompare`` command: ``main`` with pandas loaded without pyarrow, then out
    without the interpreter's teardown.

    Tearing down pandas', numpy's and pyarrow's modules at exit took 0.12-0.2 s, a fifth
    of a cold compare of two small traces. By the time ``main`` returns, everything a
    command starts (reader pools, the scan thread, a Dask client) has ended inside it and
    every file it wrote is closed; what is left is the standard streams' buffers."""
    sys.meta_path.insert(0, _PandasWithoutPyarrow())
    code = main()
    if "tb_opcompare.store.head_start" in sys.modules:  # a command that ended before taking a read it began
        sys.modules["tb_opcompare.store.head_start"].cancel_all()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # a reader that left (``| head``), a closed stream
            pass
    os._exit(code)


class _PandasWithoutPyarrow:
    """Import hook of the command's process: while pandas' own module runs, ``import
    pyarrow`` fails, so pandas keeps strings in its own Python storage, as it does where
    pyarrow is not installed (pandas >= 3 supports both).

    pandas imports pyarrow at its import only to learn its version: 0.1-0.13 s and 38 MB
    of a cold command (compare of a 31 MB xplane: 0.98 -> 0.85 s, median of 10), and the
    CLI never hands pandas Arrow data. Commands that write or read Parquet (``export``,
    the shared index) import pyarrow themselves afterwards, unhindered; the plugin, a
    long-lived process, loads pandas as usual. Documents are byte for byte the same
    either way (tests/test_cli.py)."""

    def find_spec(self, name, path=None, target=None):
        if name != "pandas":
            return None
        import importlib.util

        sys.meta_path.remove(self)  # once, and the usual finders locate pandas
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None and "pyarrow" not in sys.modules:
            spec.loader = _LoaderWithoutPyarrow(spec.loader)
        return spec


class _LoaderWithoutPyarrow:
    """pandas' own loader, run with ``sys.modules["pyarrow"] = None`` (Python's marker for
    "this import fails")."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        module.__loader__ = module.__spec__.loader = self.loader  # pandas' resources as usual
        sys.modules["pyarrow"] = None
        try:
            self.loader.exec_module(module)
        finally:
            if "pyarrow" in sys.modules and sys.modules["pyarrow"] is None:
                del sys.modules["pyarrow"]


# The parser: one function per subcommand, each adding its options in the order its
# --help lists them; the options several commands share come from the helpers below it.
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tb-opcompare", description="Compare per-op times of profile runs.")
    parser.add_argument("--version", action="version", version=f"tb-opcompare {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    reading, two_runs = _reading_options(), _two_runs_options()
    # the order of these calls is the order the top-level --help lists the commands in
    _add_runs(commands, reading)
    _add_compare(commands, reading)
    _add_sweep(commands, reading)
    _add_check(commands, reading)
    _add_trend(commands, reading)
    _add_matrix(commands, reading)
    _add_modules(commands, reading, two_runs)
    _add_layers(commands, reading, two_runs)
    _add_memory(commands, reading, two_runs)
    _add_roofline(commands, reading, two_runs)
    _add_record(commands)
    _add_index(commands, reading)
    _add_export(commands, reading)
    return parser


def _reading_options() -> argparse.ArgumentParser:
    """The parent of every command that reads profiles: where parsed ones are kept and how
    much memory a read may take (``ReadSettings.from_options``)."""
    reading = argparse.ArgumentParser(add_help=False)
    group = reading.add_argument_group("reading")
    group.add_argument(
        "--cache-dir",
        help="where parsed profiles are kept (default: $TB_OPCOMPARE_CACHE_DIR, else ~/.cache/tb-opcompare)",
    )
    group.add_argument("--no-cache", action="store_true", help="keep parsed profiles in memory only")
    group.add_argument(
        "--cache-max-gb",
        type=float,
        default=0,
        help="the most the cache folder may hold; the profiles used longest ago are deleted past it "
        "(default: $TB_OPCOMPARE_CACHE_MAX_GB, else 5)",
    )
    group.add_argument(
        "--max-read-gb",
        type=float,
        default=0,
        help="refuse reads needing more memory than this (default: half of this machine's memory)",
    )
    return reading


def _two_runs_options() -> argparse.ArgumentParser:
    """The parent of the pages of the two runs chosen on Compare: modules, layers, memory."""
    two_runs = argparse.ArgumentParser(add_help=False)
    two_runs.add_argument("logdir")
    two_runs.add_argument("--baseline", required=True)
    two_runs.add_argument("--target", required=True)
    _add_session_options(two_runs)
    _add_csv_option(two_runs, "the document's rows")
    _add_json_option(two_runs, "the document")
    return two_runs


def _add_session_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--baseline-session")
    parser.add_argument("--target-session")


def _add_csv_option(parser: argparse.ArgumentParser, contents: str, note: str = "") -> None:
    parser.add_argument("--csv", metavar="FILE", help=f"write {contents} as CSV to FILE ('-' for stdout){note}")


def _add_json_option(parser: argparse.ArgumentParser, document: str) -> None:
    parser.add_argument("--json", action="store_true", help=f"print {document} as JSON")


def _add_top_option(parser: argparse.ArgumentParser, shows: str, default: int | None = 10) -> None:
    # the help states the default from the value itself, so the two cannot drift apart
    parser.add_argument(
        "--top", type=_positive_int, default=default, help=shows if default is None else f"{shows} (default {default})"
    )


def _add_group_by_option(
    parser: argparse.ArgumentParser, choices: tuple[str, ...] = GROUP_BY, help_text: str | None = None
) -> None:
    parser.add_argument("--group-by", choices=choices, default="name", help=help_text)


def _add_run_list_option(parser: argparse.ArgumentParser, flag: str, help_text: str) -> None:
    """A required option naming runs, comma-separated, shell patterns among them."""
    parser.add_argument(flag, required=True, type=_run_list, help=help_text)


def _add_runs(commands: argparse._SubParsersAction, reading: argparse.ArgumentParser) -> None:
    runs = commands.add_parser(
        "runs", parents=[reading], help="list the profile runs in a logdir and the automatic pairs"
    )
    runs.add_argument("logdir")
    _add_json_option(runs, "the runs document")
    runs.add_argument("--lazy", action="store_true", help="read no trace: facts of cached runs, names for the rest")
    runs.set_defaults(handler=_runs)


def _add_compare(commands: argparse._SubParsersAction, reading: argparse.ArgumentParser) -> None:
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
    compare.add_argument(
        "--repeats",
        action="store_true",
        help="pool each side's repeats (the runs of its model, device, batch size and label)",
    )
    _add_session_options(compare)
    _add_group_by_option(
        compare,
        COMPARE_GROUP_BY,
        "module: PyTorch nn.Module calls (recorded with with_stack=True), else TF name scopes",
    )
    compare.add_argument("--no-normalize-types", action="store_true", help="keep oneDNN/cuDNN op types apart")
    compare.add_argument("--sort", help="column to sort by, largest first (e.g. speedup, baseline_total_us)")
    _add_top_option(compare, "show only the first N rows", default=None)
    _add_csv_option(compare, "the rows", "; for the automatic pairs, each row starts with its baseline and target run")
    _add_json_option(compare, "the compare document")
    compare.add_argument(
        "--memory", action="store_true", help="show what each op allocated per execution, and each run's peak memory"
    )
    compare.add_argument("--table", action="store_true", help="print the table too (the default without --csv/--json)")
    compare.set_defaults(handler=_compare)


def _add_sweep(commands: argparse._SubParsersAction, reading: argparse.ArgumentParser) -> None:
    sweep = commands.add_parser("sweep", parents=[reading], help="how each op and the whole step scale with batch size")
    sweep.add_argument("logdir")
    sweep.add_argument("--model", help="model key (see `runs`); without it, the models that can be swept are listed")
    _add_top_option(sweep, "plot the N ops with the most time")
    sweep.add_argument("--ops", action="append", metavar="OP", help="plot these ops instead (repeatable)")
    _add_group_by_option(sweep)
    sweep.add_argument(
        "--series-by",
        choices=SERIES_DIMENSIONS,
        default="device",
        help="draw one line per device (default), precision or compiler; speedups and break-evens "
        "are against CPU, fp32 or eager",
    )
    for dimension in SERIES_DIMENSIONS:
        sweep.add_argument(
            f"--{dimension}",
            metavar="VALUE",
            help=f"hold the {dimension} at VALUE where the lines are not drawn by it (default: the "
            + ("device most runs were recorded on)" if dimension == "device" else "model key's)"),
        )
    _add_csv_option(sweep, "the fits table")
    sweep.add_argument("--html", metavar="FILE", help="write an offline HTML report with the plots to FILE")
    _add_json_option(sweep, "the sweep document")
    sweep.set_defaults(handler=_sweep)


def _add_check_reports(check: argparse.ArgumentParser) -> None:
    """Where the check's report goes: its format, a file, and the CI job's summary."""
    check.add_argument(
        "--format",
        choices=("text", "markdown", "json", "csv", "junit"),
        default="text",
        help="the report: text, Markdown (a pull-request comment), JSON, CSV, or JUnit XML (a test report for "
        "CI systems: a test case a gated op, failed where significantly slower)",
    )
    check.add_argument("--output", metavar="FILE", help="write the report to FILE as well as deciding the exit code")
    check.add_argument(
        "--no-job-summary",
        action="store_true",
        help="under GitHub Actions, do not append the Markdown report to the job's summary ($GITHUB_STEP_SUMMARY)",
    )


def _add_check(commands: argparse._SubParsersAction, reading: argparse.ArgumentParser) -> None:
    check = commands.add_parser(
        "check",
        parents=[reading],
        help="fail (exit 1) when an op got significantly slower: a gate for CI",
        # not %-formatted by argparse (only help strings are): plain percent signs
        description="Compares two groups of runs (two or more each) op by op with 95% confidence intervals "
        "(Welch's t on the log of each run's typical time, the median of its steps, with each run's "
        f"overall speed taken out of its ops) and holds the chance of a false alarm at {FALSE_DISCOVERY_RATE:.0%} "
        "(the false discovery rate among the ops). Exits 0 when "
        "no op above --min-share (and not the whole step) is significantly slower by more than "
        "--max-regression, 1 when one is, 2 on usage errors, and with --strict 3 when nothing is flagged "
        f"but the runs could not have shown {evidence_rule('--max-regression')}, flagged in "
        f'{DETECTION_POWER:.0%} of checks ("not enough evidence": the report gives the smallest detectable change).',
    )
    check.add_argument("logdir")
    _add_run_list_option(
        check, "--baseline", "baseline runs, comma-separated; shell patterns such as 'base_cpu_bs32_rep*' work"
    )
    _add_run_list_option(check, "--target", "target runs, as --baseline")
    check.add_argument(
        "--repeats",
        action="store_true",
        help="add each run's repeats (same model, device, batch size and label; `record --repeats`)",
    )
    check.add_argument(
        "--max-regression",
        type=_fraction,
        default=DEFAULT_THRESHOLD,
        help="the slowdown tolerated, e.g. 5%% or 0.05 (default 5%%)",
    )
    check.add_argument("--ops", metavar="REGEX", help="gate only the ops whose name matches (RE2 syntax)")
    check.add_argument(
        "--min-share",
        type=_fraction,
        default=DEFAULT_MIN_SHARE,
        help="gate only ops with at least this share of op time on a side (default 1%%)",
    )
    _add_group_by_option(check)
    check.add_argument(
        "--allow-one-run",
        action="store_true",
        help="accept one run on a side (indicative only: one run cannot tell a regression from a "
        "hiccup of the machine)",
    )
    check.add_argument(
        "--strict",
        action="store_true",
        help="exit 3 when nothing is flagged but the runs could not have shown "
        f"{_percent_escaped(evidence_rule('--max-regression'))} (not enough evidence)",
    )
    _add_check_reports(check)
    check.set_defaults(handler=_check)


def _add_trend(commands: argparse._SubParsersAction, reading: argparse.ArgumentParser) -> None:
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
    _add_run_list_option(trend, "--runs", "runs, comma-separated; shell patterns such as 'resnet_cpu_bs32_*' work")
    trend.add_argument(
        "--order-by",
        default="recorded",
        help="recorded (default), label, run, repeat, device, batch_size, precision, compiler, or "
        "sidecar:<field> (e.g. sidecar:versions.torch)",
    )
    _add_top_option(trend, "the N ops with the largest share")
    _add_group_by_option(trend)
    _add_csv_option(trend, "the rows")
    _add_json_option(trend, "the trend document")
    trend.set_defaults(handler=_trend)


def _add_matrix(commands: argparse._SubParsersAction, reading: argparse.ArgumentParser) -> None:
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
    matrix.add_argument(
        "--reference",
        metavar="DEVICE",
        help="the device speedups are against, in each row (default: CPU where present)",
    )
    matrix.add_argument(
        "--warmup",
        type=_non_negative_int,
        metavar="N",
        help="leave out the first N steps of every run (default: detected per run)",
    )
    matrix.add_argument("--model", action="append", metavar="MODEL", help="only this model (repeatable)")
    matrix.add_argument(
        "--part",
        metavar="CATEGORY",
        help="also each cell's time in one part of the step and its speedup (input, forward, backward, "
        "optimizer, copy, device_wait, launch, communication, untracked, device_idle, ...)",
    )
    _add_csv_option(matrix, "one line per cell")
    _add_json_option(matrix, "the matrix document")
    matrix.set_defaults(handler=_matrix)


def _add_modules(
    commands: argparse._SubParsersAction, reading: argparse.ArgumentParser, two_runs: argparse.ArgumentParser
) -> None:
    modules = commands.add_parser(
        "modules",
        parents=[reading, two_runs],
        help="two runs' module trees side by side (model -> module -> op)",
        description="Each op placed in its module (PyTorch: the nn.Module call it ran in, recorded with "
        "with_stack=True; TF: the scope of its name), and every module's time with its sub-modules, on "
        "both runs, per profiled step where both know their steps; speedup = baseline / target.",
    )
    modules.add_argument("--depth", type=_positive_int, default=3, help="print modules down to this depth (default 3)")
    modules.set_defaults(handler=_modules)


def _add_layers(
    commands: argparse._SubParsersAction, reading: argparse.ArgumentParser, two_runs: argparse.ArgumentParser
) -> None:
    layers = commands.add_parser(
        "layers",
        parents=[reading, two_runs],
        help="two runs' application, framework, runtime and device time",
        description="How much of a step each layer takes on both runs: the application (record_function and "
        "TF Trace ranges, app_stats), the framework (ops), the runtime (CUDA/HIP runtime and driver calls) and the "
        "device (kernels); then each application range and runtime call compared by its wall time per "
        "call (speedup = baseline / target).",
    )
    _add_top_option(layers, "print the N largest rows of each layer")
    layers.set_defaults(handler=_layers)


def _add_memory(
    commands: argparse._SubParsersAction, reading: argparse.ArgumentParser, two_runs: argparse.ArgumentParser
) -> None:
    memory = commands.add_parser(
        "memory",
        parents=[reading, two_runs],
        help="two runs' memory: peaks per device and what each op allocated",
        description="Each run's peak memory per device, its memory events and bytes allocated per profiled step, "
        "and the ops that allocated or freed memory, the largest first: bytes allocated in all and per "
        "call on both runs (ratio = target / baseline per call). PyTorch records memory with "
        "profile_memory=True; TensorFlow with its allocation events.",
    )
    _add_top_option(memory, "print the N ops that allocated the most")
    memory.set_defaults(handler=_memory)


def _add_roofline(
    commands: argparse._SubParsersAction, reading: argparse.ArgumentParser, two_runs: argparse.ArgumentParser
) -> None:
    roofline = commands.add_parser(
        "roofline",
        parents=[reading, two_runs],
        help="why an op sped up: its work, achieved rate and device limit on both runs",
        description="Each op's FLOPs and bytes (from the profile, else from its recorded input shapes), its "
        "achieved FLOP/s, arithmetic intensity and fraction of its device's roof on both runs, whether it is "
        "compute- or memory-bound, and what the change did: moved along the roof, or closed or widened the gap "
        "under it. Device limits come from the run's sidecar (device_limits, host_limits), the profile, or a "
        "table of datasheet figures.",
    )
    _add_top_option(roofline, "print the N ops with the most time")
    roofline.set_defaults(handler=_roofline)


def _add_record(commands: argparse._SubParsersAction) -> None:
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
    record.add_argument("--batch-sizes", required=True, type=_int_list, help="comma-separated, e.g. 1,16,64")
    record.add_argument("--devices", default="cpu,gpu", type=_device_list, help="cpu,gpu (absent ones are skipped)")
    record.add_argument(
        "--repeats",
        type=_positive_int,
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
    record.add_argument("command", nargs=argparse.REMAINDER, help="-- the training command")
    record.set_defaults(handler=_record)


def _add_index(commands: argparse._SubParsersAction, reading: argparse.ArgumentParser) -> None:
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
    index.add_argument("--jobs", type=_positive_int, default=os.cpu_count() or 1, help="worker processes")
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


def _add_export(commands: argparse._SubParsersAction, reading: argparse.ArgumentParser) -> None:
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


# Argument types: each turns a value argparse read into what the command takes, or says
# why it cannot (argparse prints that as a usage error, exit code 2).
def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be a positive integer")
    return value


def _non_negative_int(text: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError("must be 0 or a positive integer")
    return int(text)


def _int_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, not {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError("batch sizes must be positive integers")
    return values


def _device_list(text: str) -> list[str]:
    from tb_opcompare.recording.runner import DEVICES

    devices = [part.strip().lower() for part in text.split(",") if part.strip()]
    unknown = [d for d in devices if d not in DEVICES]
    if unknown or not devices:
        raise argparse.ArgumentTypeError(f"devices must be among {', '.join(DEVICES)}")
    return devices


def _run_list(text: str) -> list[str]:
    from tb_opcompare.store.run_groups import split_runs

    runs = split_runs(text)
    if not runs:
        raise argparse.ArgumentTypeError("give one run or more, comma-separated")
    return runs


def _percent_escaped(text: str) -> str:
    """``text`` for argparse's help, which formats it with ``%``: each ``%`` doubled."""
    return text.replace("%", "%%")


def _fraction(text: str) -> float:
    try:
        return parse_share(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _catalog(args, every_run: bool = False) -> Catalog:
    """The logdir's catalog. The runs --baseline and --target name (``every_run``: the
    logdir's runs, as many as there are cores) begin to be read at once, in other
    processes (``Catalog.read_soon``), while the command imports what it runs: a command
    calls this before it imports its service."""
    from tb_opcompare.store.catalog import Catalog

    settings = ReadSettings.from_options(args.cache_dir, args.no_cache, args.max_read_gb, args.cache_max_gb)
    catalog = Catalog(
        args.logdir,
        cache_dir=settings.cache_dir,
        cache_max_bytes=settings.cache_max_bytes,
        max_trace_bytes=settings.max_trace_bytes,
        parallel_reads=_cores(),
        one_shot=True,
    )
    catalog.read_soon([(source.run, None) for source in catalog.sources()] if every_run else _named_sessions(args))
    return catalog


def _named_sessions(args) -> list[tuple[str, str | None]]:
    """(run, session or None) of each run --baseline and --target name as they are given
    (a group's patterns and repeats are expanded later, and read then)."""
    named = []
    for side in ("baseline", "target"):
        runs = getattr(args, side, None) or []
        runs = [runs] if isinstance(runs, str) else runs
        session = getattr(args, f"{side}_session", None) if len(runs) == 1 else None
        named += [(run, session) for run in runs]
    return named


def _cores() -> int:
    """The cores this process may run on (a container's or a job's share, not the host's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _index(args) -> int:
    from tb_opcompare.store.prewarm import check_scheduler, index_logdir

    check_scheduler(args.scheduler, shared=not args.local_only)  # refused before the logdir is read
    catalog = _catalog(args)
    try:
        report = index_logdir(catalog, jobs=args.jobs, say=print, shared=not args.local_only, scheduler=args.scheduler)
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
    dataset = logdir_dataset(_catalog(args))
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
    results = record_runs(plan)
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


def _runs(args) -> int:
    catalog = _catalog(args, every_run=not args.lazy)
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


def _compare(args) -> int:
    catalog = _catalog(args, every_run=not args.baseline)  # no runs named: the automatic pairs
    if bool(args.baseline) != bool(args.target):
        return _usage_error("give both --baseline and --target, or neither to compare the pair the tab opens on")
    if args.repeats and not args.baseline:
        return _usage_error("--repeats pools the runs given with --baseline/--target; name them")
    if args.all_pairs and args.baseline:
        return _usage_error("--all-pairs compares the automatic pairs: give it without --baseline/--target")
    pairs = _named_pair(catalog, args) if args.baseline else _automatic_pairs(catalog, args.all_pairs)
    if not pairs:
        return EXIT_USAGE  # _automatic_pairs said why
    # after the runs are resolved, so an unknown run stays the error reported first (and
    # is reported before pandas is imported)
    from tb_opcompare.schema.contract import COMPARE_COLUMNS

    if args.sort and args.sort not in COMPARE_COLUMNS:
        return _usage_error(f"unknown sort column {args.sort!r}; columns: {', '.join(COMPARE_COLUMNS)}")
    documents = [_compare_document(catalog, args, baseline, target) for baseline, target in pairs]
    _emit_comparisons(args, documents)
    return EXIT_OK


def _usage_error(message: str) -> int:
    """Says ``error: <message>`` on stderr; returns the exit code of a usage error."""
    print(f"error: {message}", file=sys.stderr)
    return EXIT_USAGE


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


def _compare_document(catalog: Catalog, args, baseline, target) -> dict:
    """One pair's compare document, as the options shape it, in builtin types."""
    from tb_opcompare.analysis.row_view import RowView
    from tb_opcompare.service.compare import compare_document

    document = compare_document(
        catalog,
        baseline,
        target,
        group_by=args.group_by,
        baseline_session=args.baseline_session,
        target_session=args.target_session,
        normalize=not args.no_normalize_types,
        view=RowView(sort=args.sort, top=args.top),
    )
    return as_builtins(document)


def _emit_comparisons(args, documents: list[dict]) -> None:
    """The compare documents as the options ask: any of --csv and --json, and the table
    with --table or without either."""
    if args.csv:
        _write_text(args.csv, _pairs_csv(documents, with_pairs=not args.baseline))
        if args.csv != "-":
            rows = sum(len(document["rows"]) for document in documents)
            print(f"wrote {rows} rows to {args.csv}", file=sys.stderr)
    if args.json:
        sys.stdout.write(json_text(documents[0] if len(documents) == 1 else documents))
    if args.table or not (args.csv or args.json):
        for document in documents:
            _print_comparison(document, memory=args.memory)


PAIR_COLUMNS = ["baseline_run", "target_run"]


def _pairs_csv(documents: list[dict], with_pairs: bool) -> str:
    """Named runs: exactly the bytes of the API's ``compare.csv``. The automatic pairs
    (however many there are, so scripts see one layout): one table, each row led by the
    pair it belongs to."""
    from tb_opcompare.service.csv_export import compare_csv

    if not with_pairs:
        return compare_csv(documents[0]["rows"])
    rows = [
        {"baseline_run": d["summary"]["baseline"]["run"], "target_run": d["summary"]["target"]["run"], **row}
        for d in documents
        for row in d["rows"]
    ]
    return compare_csv(rows, PAIR_COLUMNS + list(documents[0]["columns"]))


def _check(args) -> int:
    catalog = _catalog(args)
    from tb_opcompare.cli import check_report
    from tb_opcompare.service.check import check_document
    from tb_opcompare.service.csv_export import check_csv
    from tb_opcompare.store.run_groups import expand_runs

    try:
        document = check_document(
            catalog,
            expand_runs(catalog, args.baseline, args.repeats),
            expand_runs(catalog, args.target, args.repeats),
            threshold=args.max_regression,
            ops=args.ops,
            min_share=args.min_share,
            group_by=args.group_by,
            allow_one_run=args.allow_one_run,
        )
    except ProfileError as error:  # exit 1 means a regression here: an unreadable run is a usage error
        print(f"error: cannot read {escape_controls(error.path)}: {escape_controls(error.reason)}", file=sys.stderr)
        return EXIT_USAGE
    report = {
        "json": json_text,
        "csv": check_csv,
        "junit": check_report.junit,
        "markdown": check_report.markdown,
        "text": check_report.text,
    }[args.format](document)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary and not args.no_job_summary:  # GitHub Actions shows this file on the run's page
        with open(summary, "a", encoding="utf-8") as page:
            page.write(check_report.markdown(document) + "\n")
    if args.output:
        _write_text(args.output, report)
        print(escape_controls(document.headline))
    else:
        sys.stdout.write(report)
    if not document.passed:
        return EXIT_REGRESSION
    return EXIT_NOT_ENOUGH_EVIDENCE if args.strict and not document.enough_evidence else EXIT_OK


def _trend(args) -> int:
    from tb_opcompare.service.csv_export import trend_csv
    from tb_opcompare.service.trend import trend_document
    from tb_opcompare.store.run_groups import expand_runs

    catalog = _catalog(args)
    document = trend_document(
        catalog, expand_runs(catalog, args.runs), order_by=args.order_by, top=args.top, group_by=args.group_by
    )
    _emit(args, document, trend_csv, f"{len(document.rows)} rows", _print_trend)
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


def _modules(args) -> int:
    catalog = _catalog(args)
    from tb_opcompare.service.csv_export import modules_csv
    from tb_opcompare.service.modules import modules_document

    document = modules_document(catalog, args.baseline, args.target, args.baseline_session, args.target_session)
    _emit(args, document, modules_csv, f"{len(document.nodes)} nodes", lambda tree: _print_modules(tree, args.depth))
    return EXIT_OK


def _layers(args) -> int:
    catalog = _catalog(args)
    from tb_opcompare.service.csv_export import layers_csv
    from tb_opcompare.service.layers import layers_document

    document = layers_document(catalog, args.baseline, args.target, args.baseline_session, args.target_session)
    _emit(args, document, layers_csv, f"{len(document.rows)} rows", lambda layers: _print_layers(layers, args.top))
    return EXIT_OK


def _print_layers(document, top: int) -> None:
    from tb_opcompare.schema.contract import ROW_LAYERS

    unit = "per step" if document.per_step else "in all"
    print(f"layers, time {unit}: baseline -> target, speedup (share of the step)")
    for layer in document.layers:
        print(
            f"  {layer.layer:<12} {format_time(layer.baseline_us)} -> {format_time(layer.target_us)}  "
            f"{format_speedup(layer.speedup)}  ({format_share(layer.baseline_share)} -> "
            f"{format_share(layer.target_share)}; {layer.basis} time)"
        )
    for name in ROW_LAYERS:
        rows = [row for row in document.rows if row.layer == name]
        if rows:
            print(f"\n{name}: wall time per call, baseline -> target, speedup")
        for row in rows[:top]:
            print(
                f"  {escape_controls(row.name)}  {format_time(row.baseline_mean_us)} -> "
                f"{format_time(row.target_mean_us)}  {format_speedup(row.speedup)}  "
                f"[{_count(row.baseline_calls)} -> {_count(row.target_calls)} calls]"
            )
        if len(rows) > top:
            print(f"  … {len(rows) - top} more (--top, --csv)")
    for note in document.notes:
        print(f"note: {escape_controls(note)}")


def _count(calls: int | None) -> str:
    return "–" if calls is None else str(calls)


def _print_modules(document, depth: int) -> None:
    unit = "per step" if document.per_step else "in all"
    print(f"modules from {document.source}; time {unit}, baseline -> target, speedup")
    for node in document.nodes:
        if node.kind == "module" and node.depth <= depth:
            print(
                f"{'  ' * node.depth}{escape_controls(node.name)}  {format_time(node.baseline_us)} -> "
                f"{format_time(node.target_us)}  {format_speedup(node.speedup)}  "
                f"({format_share(node.baseline_share)} -> {format_share(node.target_share)})"
            )
    for note in document.notes:
        print(f"note: {escape_controls(note)}")


def _memory(args) -> int:
    catalog = _catalog(args)
    from tb_opcompare.service.csv_export import memory_csv
    from tb_opcompare.service.memory import memory_document

    document = memory_document(catalog, args.baseline, args.target, args.baseline_session, args.target_session)
    _emit(args, document, memory_csv, f"{len(document.rows)} ops", lambda memory: _print_memory(memory, args.top))
    return EXIT_OK


def _roofline(args) -> int:
    catalog = _catalog(args)
    from tb_opcompare.service.csv_export import roofline_csv
    from tb_opcompare.service.roofline import roofline_document

    document = roofline_document(catalog, args.baseline, args.target, args.baseline_session, args.target_session)
    _emit(args, document, roofline_csv, f"{len(document.rows)} ops", lambda found: _print_roofline(found, args.top))
    return EXIT_OK


def _print_roofline(document, top: int) -> None:
    for side in ("baseline", "target"):
        run = getattr(document, side)
        roofs = "; ".join(_limits_text(limits) for limits in run.limits)
        achieved = f"{format_rate(run.flops_per_s, 'FLOP/s')} on the ops of known work"
        print(escape_controls(f"{side + ':':<9} {run.run}: {achieved}; roofs: {roofs}"))
    if document.rows:
        shown = min(top, len(document.rows))
        print(
            f"\nops by time (either run), {shown} of {len(document.rows)}; % of roof, bound; speedup per call "
            "(work: the target's FLOPs per call / the baseline's)"
        )
        print(
            f"{'base rate':>14}  {'target rate':>14}  {'base roof':>16}  {'target roof':>16}  {'speedup':>7}  "
            f"{'work':>7}  op: change"
        )
        for row in document.rows[:top]:
            print(
                f"{format_rate(row['baseline_flops_per_s'], 'FLOP/s'):>14}  "
                f"{format_rate(row['target_flops_per_s'], 'FLOP/s'):>14}  "
                f"{_roof_text(row, 'baseline'):>16}  {_roof_text(row, 'target'):>16}  "
                f"{format_speedup(row['speedup']):>7}  {format_speedup(row['work_ratio']):>7}  "
                f"{escape_controls(row['op_name'])}" + (f": {row['change']}" if row["change"] else "")
            )
    for note in document.notes:
        print(f"note: {escape_controls(note)}")


def _limits_text(limits) -> str:
    """``device NVIDIA H100 SXM: 67 TFLOP/s fp32, 3.35 TB/s``, or ``host unknown``."""
    if limits.peak_flops is None and limits.memory_bandwidth is None:
        return f"{limits.processor} unknown"
    peak = f"{format_rate(limits.peak_flops, 'FLOP/s')} {limits.precision or ''}".strip()
    return f"{limits.processor} {limits.device}: {peak}, {format_rate(limits.memory_bandwidth, 'B/s')}"


def _roof_text(row: dict, side: str) -> str:
    fraction, bound = row[f"{side}_fraction_of_roof"], row[f"{side}_bound"]
    if row[f"{side}_suspect"]:
        return "suspect"
    return "-" if fraction is None else f"{format_share(fraction)} {bound or ''}".strip()


def _print_memory(document, top: int) -> None:
    for side in ("baseline", "target"):
        run = getattr(document, side)
        peaks = ", ".join(f"{device} {format_bytes(size)}" for device, size in run.peak_memory_bytes.items())
        rates = [
            f"{format_bytes(run.allocated_bytes_per_step)} allocated per step"
            if run.allocated_bytes_per_step is not None
            else None,
            f"{run.memory_events_per_step:,.0f} memory events per step"
            if run.memory_events_per_step is not None
            else None,
        ]
        print(
            escape_controls(
                f"{side + ':':<9} {run.run}: peak {peaks or 'not recorded'}"
                + "".join(f"; {rate}" for rate in rates if rate)
            )
        )
    if document.rows:
        print(
            f"\nops by bytes allocated (either run), {min(top, len(document.rows))} of {len(document.rows)}; "
            "ratio = target / baseline per call"
        )
        print(f"{'base alloc':>11}  {'target alloc':>12}  {'base/call':>11}  {'target/call':>11}  {'ratio':>7}  op")
        for row in document.rows[:top]:
            print(
                f"{format_bytes(row['baseline_alloc_bytes']):>11}  {format_bytes(row['target_alloc_bytes']):>12}  "
                f"{format_bytes(row['baseline_alloc_bytes_per_execution']):>11}  "
                f"{format_bytes(row['target_alloc_bytes_per_execution']):>11}  {format_speedup(row['ratio']):>7}  "
                f"{escape_controls(row['key'])}"
            )
        if len(document.rows) > top:
            print(f"… {len(document.rows) - top} more (--top, --csv)")
    for note in document.notes:
        print(f"note: {escape_controls(note)}")


def _matrix(args) -> int:
    catalog = _catalog(args, every_run=True)
    from tb_opcompare.service.csv_export import matrix_csv
    from tb_opcompare.service.matrix import matrix_document

    document = matrix_document(catalog, reference=args.reference, warmup=args.warmup, models=args.model, part=args.part)
    _emit(args, document, matrix_csv, f"{len(document.cells)} cells", _print_matrix)
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


def _emit(args, document, to_csv, counted: str, to_text) -> None:
    """A document as the options ask: ``--csv FILE`` (saying ``wrote <counted>`` on stderr
    unless to stdout), ``--json``, and the text otherwise."""
    if args.csv:
        _write_text(args.csv, to_csv(document))
        if args.csv != "-":
            print(f"wrote {counted} to {args.csv}", file=sys.stderr)
    if args.json:
        sys.stdout.write(json_text(document))
    elif not args.csv:
        to_text(document)


def _write_text(target: str, text: str) -> None:
    """To a file, or to stdout for '-'."""
    if target == "-":
        sys.stdout.write(text)
        return
    with open(target, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)


def _sweep(args) -> int:
    catalog = _catalog(args, every_run=True)
    from tb_opcompare.analysis.sweep import FIT_COLUMNS
    from tb_opcompare.service.csv_export import compare_csv
    from tb_opcompare.service.sweep import fits_table, sweep_document

    if not args.model:
        return _list_sweepable(catalog, args.logdir)
    held = {dimension: getattr(args, dimension) for dimension in SERIES_DIMENSIONS if getattr(args, dimension)}
    document = sweep_document(
        catalog, args.model, top=args.top, ops=args.ops, group_by=args.group_by, series_by=args.series_by, held=held
    )
    table = fits_table(document)
    if args.csv:
        _write_text(args.csv, compare_csv(table, FIT_COLUMNS))
    if args.html:
        from tb_opcompare.cli.html_report import sweep_html

        with open(args.html, "w", encoding="utf-8") as handle:
            handle.write(sweep_html(document))
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
        # a side's device parts add up to its step: none at all is a side that ran on no device
        ran = [side == "host" or any(part[f"{which}_us"] > 0 for part in parts) for which in ("baseline", "target")]
        for part in parts:
            change = part["change_us"]
            sign = "+" if change > 0 else "-" if change < 0 else " "
            times = [format_time(part[f"{which}_us"]) if on else "–" for which, on in zip(("baseline", "target"), ran)]
            print(
                f"  {times[0]:>10}  {times[1]:>10}  {sign + format_time(abs(change)) if all(ran) else '–':>10}  {part['label']}"
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


if __name__ == "__main__":
    sys.exit(main())
