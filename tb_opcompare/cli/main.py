"""``tb-opcompare``: list runs and compare them from a shell, a script or CI.

Exit codes: 0 success; 1 a profile could not be read (the file and the reason are
printed), or, for ``check``, a significant regression; 2 usage errors and unknown runs
(the runs that exist are listed); 3, for ``check --strict``, not enough evidence. Each
command lives in a module of its own (``cli.runs``, ``cli.compare`` ...); this one parses
the command line, runs the command, and turns the package's errors into exit codes.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, NoReturn

from tb_opcompare import __version__
from tb_opcompare.cli import check, compare, index, matrix, pair_views, record, runs, sweep, trend
from tb_opcompare.cli.common import (
    EXIT_OK,
    EXIT_UNREADABLE,
    EXIT_USAGE,
    escape_controls,
    reading_options,
    two_runs_options,
)
from tb_opcompare.cli.progress import Reporter, showing_reads
from tb_opcompare.errors import ProfileError, UnknownRunError, UsageError

# Each command imports the services it runs when it runs (pandas and the readers are
# most of a second): `--version`, `--help` and a usage error answer in a tenth of one.


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    # one progress reporter a command (stderr): the cold reads' line and the counted work's bar
    args.reporter = Reporter(quiet=getattr(args, "quiet", False))
    try:
        with showing_reads(args.reporter):
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


if TYPE_CHECKING:
    from importlib.abc import Loader as _Loader
else:  # a loader by its methods: importlib.abc costs a cold command 14 ms of imports
    _Loader = object


class _LoaderWithoutPyarrow(_Loader):
    """pandas' own loader, run with ``sys.modules["pyarrow"] = None`` (Python's marker for
    "this import fails")."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        module.__loader__ = module.__spec__.loader = self.loader  # pandas' resources as usual
        sys.modules["pyarrow"] = None  # type: ignore[assignment]  # None there fails an import (Python's rule); typeshed allows modules only
        try:
            self.loader.exec_module(module)
        finally:
            if "pyarrow" in sys.modules and sys.modules["pyarrow"] is None:
                del sys.modules["pyarrow"]


# The command table: each command's module adds its parser (its options in the order its
# --help lists them) and its handler; the options several commands share are
# ``cli.common``'s. The order here is the order the top-level --help lists them in.
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tb-opcompare", description="Compare per-op times of profile runs.")
    parser.add_argument("--version", action="version", version=f"tb-opcompare {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    reading, two_runs = reading_options(), two_runs_options()
    runs.add(commands, reading)
    compare.add(commands, reading)
    sweep.add(commands, reading)
    check.add(commands, reading)
    trend.add(commands, reading)
    matrix.add(commands, reading)
    pair_views.add_pages(commands, reading, two_runs)
    record.add(commands)
    index.add_index(commands, reading)
    index.add_export(commands, reading)
    return parser
