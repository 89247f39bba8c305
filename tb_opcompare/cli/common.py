"""What every command shares: exit codes, the options several take and their argument
types, the catalog a command reads through, and how a document is printed or written."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

from tb_opcompare.errors import UsageError, escape_control_characters
from tb_opcompare.schema.requests import ROWS, Choice, Flag, Repeated, Rule, parameter, qualifiers
from tb_opcompare.store.settings import ReadSettings

if TYPE_CHECKING:
    from tb_opcompare.store.catalog import Catalog

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


def reading_options() -> argparse.ArgumentParser:
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
        "-q",
        "--quiet",
        action="store_true",
        help="no progress on stderr (shown for reads of 2 s or more, and by index and export)",
    )
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


def two_runs_options() -> argparse.ArgumentParser:
    """The parent of the pages of the two runs chosen on Compare: modules, layers, memory."""
    two_runs = argparse.ArgumentParser(add_help=False)
    two_runs.add_argument("logdir")
    two_runs.add_argument("--baseline", required=True)
    two_runs.add_argument("--target", required=True)
    add_session_options(two_runs)
    add_csv_option(two_runs, "the document's rows")
    add_json_option(two_runs, "the document")
    return two_runs


def add_session_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--baseline-session")
    parser.add_argument("--target-session")


def add_csv_option(parser: argparse.ArgumentParser, contents: str, note: str = "") -> None:
    parser.add_argument("--csv", metavar="FILE", help=f"write {contents} as CSV to FILE ('-' for stdout){note}")


def add_json_option(parser: argparse.ArgumentParser, document: str) -> None:
    parser.add_argument("--json", action="store_true", help=f"print {document} as JSON")


def add_request_option(
    parser: argparse.ArgumentParser, request: type, name: str, metavar: str | None = None, note: str = ""
) -> None:
    """``--NAME``, the option of a request's field (``schema/requests.py``): its rule checks
    the value (a bad one is argparse's usage error, exit 2, in the words the route answers
    400 with); its meaning, bounds and default are the option's help, and its default the
    option's. A 0|1 field is a switch, a repeatable one is given once per value. ``note``:
    what the command adds to the field's meaning."""
    field = parameter(request, name)
    flag = "--" + name.replace("_", "-")
    # the help states the rule and the default from the field itself, so the two cannot drift apart
    said = "" if isinstance(field.rule, Flag) else ", ".join(qualifiers(field))  # a switch is off unless given
    text = field.meaning + (f"; {note}" if note else "") + (f" ({said})" if said else "")
    help_text = percent_escaped(text.replace("`", ""))  # the API doc's code marks, not a terminal's
    if isinstance(field.rule, Flag):
        parser.add_argument(flag, action="store_true", help=help_text)
    elif isinstance(field.rule, Repeated):
        parser.add_argument(flag, action="append", metavar=metavar, help=help_text)
    else:
        parser.add_argument(
            flag,
            type=checked(field.rule),
            default=field.default,
            metavar=f"{{{','.join(field.rule.options)}}}" if isinstance(field.rule, Choice) else metavar,
            help=help_text,
        )


def add_top_option(parser: argparse.ArgumentParser, shows: str, default: int = 10) -> None:
    """``--top`` of a page's printed rows (the CLI's own: the tab lists them all), by the rule
    of the compare view's ``top``."""
    parser.add_argument("--top", type=checked(ROWS), default=default, metavar="N", help=f"{shows} (default {default})")


def add_run_list_option(parser: argparse.ArgumentParser, flag: str, help_text: str) -> None:
    """A required option naming runs, comma-separated, shell patterns among them."""
    parser.add_argument(flag, required=True, type=run_list, help=help_text)


# Argument types: each turns a value argparse read into what the command takes, or says
# why it cannot (argparse prints that as a usage error, exit code 2).
def checked(rule: Rule):
    """A request rule as an argument type: its value, or its words as argparse's error."""

    def value(text: str):
        try:
            return rule.parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return value


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be a positive integer")
    return value


def int_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, not {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError("batch sizes must be positive integers")
    return values


def device_list(text: str) -> list[str]:
    from tb_opcompare.recording.runner import DEVICES

    devices = [part.strip().lower() for part in text.split(",") if part.strip()]
    unknown = [d for d in devices if d not in DEVICES]
    if unknown or not devices:
        raise argparse.ArgumentTypeError(f"devices must be among {', '.join(DEVICES)}")
    return devices


def run_list(text: str) -> list[str]:
    from tb_opcompare.store.run_groups import split_runs

    runs = split_runs(text)
    if not runs:
        raise argparse.ArgumentTypeError("give one run or more, comma-separated")
    return runs


def percent_escaped(text: str) -> str:
    """``text`` for argparse's help, which formats it with ``%``: each ``%`` doubled."""
    return text.replace("%", "%%")


def open_catalog(args, every_run: bool = False, logdir: str | None = None) -> Catalog:
    """The logdir's catalog (``logdir``: another's, with the same reading options). The runs
    --baseline and --target name (``every_run``: the logdir's runs, as many as there are
    cores) begin to be read at once, in other processes (``Catalog.read_soon``), while the
    command imports what it runs: a command calls this before it imports its service."""
    from tb_opcompare.store.catalog import Catalog

    settings = ReadSettings.from_options(args.cache_dir, args.no_cache, args.max_read_gb, args.cache_max_gb)
    catalog = Catalog(
        logdir or args.logdir,
        cache_dir=settings.cache_dir,
        cache_max_bytes=settings.cache_max_bytes,
        max_trace_bytes=settings.max_trace_bytes,
        parallel_reads=cores(),
        one_shot=True,
    )
    if logdir is None:
        catalog.read_soon([(source.run, None) for source in catalog.sources()] if every_run else named_sessions(args))
    return catalog


def named_sessions(args) -> list[tuple[str, str | None]]:
    """(run, session or None) of each run --baseline and --target name as they are given
    (a group's patterns and repeats are expanded later, and read then); a baseline kept in
    a logdir of its own (``check --baseline-logdir``) is not this logdir's to read."""
    named = []
    for side in ("target",) if getattr(args, "baseline_logdir", None) else ("baseline", "target"):
        runs = getattr(args, side, None) or []
        runs = [runs] if isinstance(runs, str) else runs
        session = getattr(args, f"{side}_session", None) if len(runs) == 1 else None
        named += [(run, session) for run in runs]
    return named


def cores() -> int:
    """The cores this process may run on (a container's or a job's share, not the host's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def usage_error(message: str) -> int:
    """Says ``error: <message>`` on stderr; returns the exit code of a usage error."""
    print(f"error: {message}", file=sys.stderr)
    return EXIT_USAGE


def emit(args, document, to_csv, counted: str, to_text) -> None:
    """A document as the options ask: ``--csv FILE`` (saying ``wrote <counted>`` on stderr
    unless to stdout), ``--json``, and the text otherwise."""
    if args.csv:
        write_text(args.csv, to_csv(document))
        if args.csv != "-":
            print(f"wrote {counted} to {args.csv}", file=sys.stderr)
    if args.json:
        sys.stdout.write(json_text(document))
    elif not args.csv:
        to_text(document)


def write_chunks(target: str, chunks: Iterable[str], newline: str | None = "") -> None:
    """Text made a piece at a time (a CSV of a million rows), to a file or to stdout for '-'.
    A file that cannot be written (no such folder, no permission, a full disk) is a
    UsageError naming it, never a traceback; what the chunks' maker raises passes as it is."""
    if target == "-":
        for chunk in chunks:
            sys.stdout.write(chunk)
        return
    try:
        handle = open(target, "w", encoding="utf-8", newline=newline)
    except OSError as error:
        raise _cannot_write(target, error) from None
    try:
        for chunk in chunks:
            try:
                handle.write(chunk)
            except OSError as error:
                raise _cannot_write(target, error) from None
        try:
            handle.flush()
        except OSError as error:
            raise _cannot_write(target, error) from None
    finally:
        try:
            handle.close()
        except OSError:  # its text already refused, and said so
            pass


def _cannot_write(target: str, error: OSError) -> UsageError:
    return UsageError(f"cannot write {escape_control_characters(target)}: {error.strerror or error}")


def write_text(target: str, text: str, newline: str | None = "") -> None:
    """To a file, or to stdout for '-' (``write_chunks``)."""
    write_chunks(target, [text], newline)
