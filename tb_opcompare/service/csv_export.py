"""Records as CSV text: the compare rows and the sweep's fits, for the tab's downloads
and the CLI's ``--csv`` alike (one writer, so both give the same bytes)."""

from __future__ import annotations

import codecs
import csv
import io
import os
import re
import tempfile
from collections.abc import Iterator

import msgspec
import numpy as np

from tb_opcompare.analysis.numerics import is_missing
from tb_opcompare.errors import CONTROL_CHARACTERS, escape_control_characters
from tb_opcompare.native import built, wanted
from tb_opcompare.schema.contract import COMPARE_COLUMNS
from tb_opcompare.schema.table import Table

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _csv_cell(value) -> object:
    """A text cell as the CLI prints it, control, invisible and bidirectional characters
    escaped (``errors.escape_control_characters``: a spreadsheet shows a right-to-left
    override, and a run name could pass for another), and spreadsheet formulas
    neutralised as OWASP advises (op names, run names and labels come from user files): a
    cell whose first visible character starts a formula gets a leading ``'``. Numbers stay
    numbers."""
    if value is None:
        return ""
    if isinstance(value, str):
        value = escape_control_characters(value)
        if value.lstrip().startswith(_FORMULA_START):
            return "'" + value
    return value


def compare_csv(rows: list[dict], columns: list[str] = COMPARE_COLUMNS) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    cells = [
        [_csv_cell(row.get(column)) for row in rows]
        if _holds_text(rows, column)
        else ["" if value is None else value for value in (row.get(column) for row in rows)]
        for column in columns
    ]
    writer.writerows(zip(*cells))
    return buffer.getvalue()


# Rows a chunk of ``table_csv_chunks``: enough that each column is converted at numpy speed,
# few enough that a chunk's Python values stay small (a million rows made whole took 2 GB).
CSV_CHUNK_ROWS = 32_768
_ANY_CONTROL = re.compile("[" + "".join(re.escape(chr(code)) for code in CONTROL_CHARACTERS) + "]")


def table_csv_chunks(
    table: Table,
    columns: list[str] = COMPARE_COLUMNS,
    *,
    positions: np.ndarray | None = None,
    leading: dict[str, str] | None = None,
    header: bool = True,
) -> Iterator[str]:
    """``compare_csv`` of a table's rows (those at ``positions``, in that order; all
    without), the same bytes, made a chunk of rows at a time from the table's columns with
    no record made per row. ``leading``: columns of one value on every row (the automatic
    pairs' runs); a column the table lacks is empty; ``header``: the columns' line first.

    Each cell is made text a column at a time (a number's text once per distinct value:
    ``_number_texts``) and the lines joined in C; only a chunk with a cell the writer
    would quote goes through ``csv.writer`` (issue 57: a million rows took 22 s in the
    writer, most of it turning floats into text)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    if header:
        writer.writerow(columns)
    count = len(table) if positions is None else len(positions)
    # rows one after another in the table's order (a view without filter or sort, or a run
    # of it): slices, no copies (numpy gathers text a third of a microsecond a row)
    first = 0
    if positions is not None and count and positions[-1] - positions[0] == count - 1:
        if np.array_equal(positions, np.arange(positions[0], positions[0] + count)):
            first, positions = int(positions[0]), None
    for start in range(0, count, CSV_CHUNK_ROWS):
        chunk = slice(first + start, first + min(start + CSV_CHUNK_ROWS, count))
        part = table.take(chunk if positions is None else positions[start : start + CSV_CHUNK_ROWS])
        cells = [_column_cells(part, column, leading or {}) for column in columns]
        lines = _joined_lines(cells, len(part))
        if lines is None:  # a cell to quote: the writer's rules, exactly
            writer.writerows(zip(*cells))
        yield buffer.getvalue() + (lines or "")
        buffer.seek(0)
        buffer.truncate()
    if not count:
        yield buffer.getvalue()


# A CSV of this many rows or more is made in two halves at once, the second in a forked
# process, where forking is safe (``watched_fork.may_fork``) and the machine has two cores:
# a million rows took 5.7 s on one core.
SPLIT_CSV_ROWS = 262_144


def split_csv_chunks(table: Table, positions: np.ndarray | None = None) -> Iterator[str]:
    """``table_csv_chunks`` of the compare columns, the same bytes, the rows' second half
    made meanwhile in a forked process where the table is big. The helper writes its half
    to a file only the two processes hold (unlinked at once), which is read back here: sent
    through the pipe, a million-row CSV's half took 0.55 s to pickle, carry and unpickle
    after the command's own half, read back 0.05 s. A helper that fails, stops or dies
    costs only time: its half is made here after all."""
    from tb_opcompare.store.watched_fork import WORKER_SECONDS, Fork, may_fork

    count = len(table) if positions is None else len(positions)
    if count < SPLIT_CSV_ROWS or (os.cpu_count() or 1) < 2 or not may_fork():
        yield from table_csv_chunks(table, positions=positions)
        return
    every = np.arange(count) if positions is None else positions
    half = count // 2
    try:
        scratch = tempfile.TemporaryFile()
    except OSError:  # no temporary folder to write in: one process makes it all
        yield from table_csv_chunks(table, positions=positions)
        return
    with scratch:
        helper = Fork(WORKER_SECONDS + count / 10_000, _csv_file, table, every[half:], scratch.fileno())
        answered = False
        try:
            yield from table_csv_chunks(table, positions=every[:half])
            written = helper.answer()
            answered = True
        finally:
            if not answered:  # the caller stopped early (an error writing, ^C)
                helper.give_up("not waited for")
        if isinstance(written, int) and os.fstat(scratch.fileno()).st_size >= written:
            yield from _file_text(scratch.fileno(), written)
        else:  # Lost (the helper failed, stopped or died), or its file came up short
            yield from table_csv_chunks(table, positions=every[half:], header=False)


# Bytes a piece of the helper's half is read back in.
_READ_BACK_BYTES = 8 << 20


def _csv_file(table: Table, positions: np.ndarray, descriptor: int) -> int:
    """In the helper: the rows' CSV lines, no header, written as UTF-8 from the file's
    start (``pwrite``: the file's offset is the command's too); the bytes written."""
    written = 0
    for chunk in table_csv_chunks(table, positions=positions, header=False):
        data = chunk.encode("utf-8", "surrogatepass")  # a lone surrogate as the one-process text has it
        while data:
            done = os.pwrite(descriptor, data, written)
            written, data = written + done, data[done:]
    return written


def _file_text(descriptor: int, size: int) -> Iterator[str]:
    """The first ``size`` bytes of the file, as text a piece at a time (a character cut
    between two pieces is joined by the decoder)."""
    decoder = codecs.getincrementaldecoder("utf-8")("surrogatepass")
    at = 0
    while at < size:
        data = os.pread(descriptor, min(_READ_BACK_BYTES, size - at), at)
        if not data:
            raise OSError(f"the CSV helper's file ended at {at:,} of {size:,} bytes")
        at += len(data)
        yield decoder.decode(data, final=at >= size)


# The C join of a chunk's lines (``_csv_lines.c``), where it was built: a row's tuple and
# join took a third of a million-row CSV.
_JOINER = built("service._csv_lines")


def _joined_lines(cells: list[list[str]], rows: int) -> str | None:
    """The chunk's lines as ``csv.writer`` writes them where no cell needs quoting; None
    where one does (a delimiter, quote or line break in it), or with one column (the
    writer quotes a lone empty cell)."""
    joiner = wanted(_JOINER)
    if joiner is not None:
        return joiner.joined_lines(cells) if rows else None
    if len(cells) < 2 or not rows:
        return None
    text = "\n".join(map(",".join, zip(*cells))) + "\n"
    if text.count(",") != rows * (len(cells) - 1) or text.count("\n") != rows or '"' in text or "\r" in text:
        return None
    return text


def _column_cells(part: Table, column: str, leading: dict[str, str]) -> list[str]:
    """One column's cells of a chunk as the text ``compare_csv`` writes for them: numbers
    as Python writes them, missing ones empty; text through ``_object_cells``."""
    if column in leading:
        return [str(_csv_cell(leading[column]))] * len(part)
    if column not in part:
        return [""] * len(part)
    values = part[column]
    if values.dtype.kind == "f":
        data = values.astype(np.float64, copy=False)
        finite = np.isfinite(data)
        if not finite.any():  # a column nothing recorded (memory in a run without it)
            return [""] * len(part)
        return _number_texts(np.where(finite, data, 0.0), finite)
    if values.dtype.kind in "iu":
        wide = np.uint64 if values.dtype == np.uint64 else np.int64
        return _number_texts(values.astype(wide, copy=False), None)
    if values.dtype.kind == "b":
        return np.where(values, "True", "False").astype(object).tolist()
    return _object_cells(values.tolist())


def _number_texts(values: np.ndarray, shown: np.ndarray | None) -> list[str]:
    """``str`` of each number (float64, int64 or uint64), made once per distinct value (distinct
    by its bits: -0.0 is not 0.0); empty where ``shown`` is False."""
    bits = values.view(np.int64)
    distinct, inverse = np.unique(bits, return_inverse=True)
    texts = np.array(list(map(str, distinct.view(values.dtype).tolist())), dtype=object)
    cells = texts[inverse.reshape(-1)]
    if shown is not None and not shown.all():
        cells[~shown] = ""
    return cells.tolist()


_FORMULA_CHARACTERS = "".join(_FORMULA_START)


def _object_cells(values: list) -> list[str]:
    """``_cell_text`` of each (text, or numbers and flags with gaps). Text needs looking
    at only where the chunk holds a character that may need it (a control character, or
    one that can start a formula); otherwise each distinct (type, value) is made text
    once, looked up in C."""
    types = set(map(type, values))
    if types <= {str}:
        joined = "".join(values)
        if not any(character in joined for character in _FORMULA_CHARACTERS) and not _has_control(joined):
            return values
    elif types == {bool}:  # flags without gaps
        return np.where(np.array(values, dtype=bool), "True", "False").astype(object).tolist()
    elif types == {int} and all(-(1 << 63) <= value < 1 << 63 for value in (min(values), max(values))):
        return _number_texts(np.array(values, dtype=np.int64), None)  # counts without gaps
    keys = list(zip(map(type, values), values))  # True and 1 are equal keys: the type tells them apart
    texts = {key: _cell_text(key[1]) for key in set(keys)}
    return list(map(texts.__getitem__, keys))


def _has_control(text: str) -> bool:
    """Whether ``text`` holds a character ``escape_control_characters`` escapes. Printable
    ASCII holds none, and CPython tells that without the regular expression (which took
    0.4 s a text column of a million-row CSV)."""
    return not (text.isascii() and text.isprintable()) and _ANY_CONTROL.search(text) is not None


def _cell_text(value: object) -> str:
    """A cell's text as ``compare_csv`` writes it: empty where missing (None, NaN, pandas'
    NA), text through ``_csv_cell``, numbers and flags as Python writes them."""
    return "" if is_missing(value) else str(_csv_cell(value))


def _holds_text(rows: list[dict], column: str) -> bool:
    """Whether a column has any text cell (only those can carry a formula)."""
    return any(isinstance(row.get(column), str) for row in rows)


def breakdown_csv(breakdown) -> str:
    """Where the time went (a ``StepBreakdown``): the two steps, then each part's time on
    both sides and its change, the columns of BreakdownPart."""
    from tb_opcompare.schema.contract import BreakdownPart

    step = {
        "side": "host",
        "category": "(step)",
        "label": "median steady step",
        "baseline_us": breakdown.baseline_wall_us,
        "target_us": breakdown.target_wall_us,
        "change_us": breakdown.target_wall_us - breakdown.baseline_wall_us,
    }
    rows = [step, *(msgspec.structs.asdict(part) for part in breakdown.parts)]
    return compare_csv(rows, list(BreakdownPart.__struct_fields__))


TREND_CSV_COLUMNS = ["key", "value", "mean_us", "low_us", "high_us", "runs"]


def trend_csv(document) -> str:
    """A trend's rows with each point given by its value (a time, a label, a version)."""
    values = [point.value for point in document.points]
    return compare_csv([{**row, "value": values[row["point"]]} for row in document.rows], TREND_CSV_COLUMNS)


def check_csv(document) -> str:
    """A check's rows, the whole step first, with every field of CheckRow."""
    columns = list(type(document.whole_step).__struct_fields__)
    rows = [msgspec.structs.asdict(row) for row in (document.whole_step, *document.rows)]
    return compare_csv(rows, columns)


def matrix_csv(document) -> str:
    """One line per filled cell of a matrix: its row, its column's parts, its runs
    ``;``-separated, and its latency, throughput and speedup."""
    from tb_opcompare.schema.contract import MATRIX_CSV_COLUMNS

    columns = {column.key: column for column in document.columns}
    rows = []
    for cell in document.cells:
        column = columns[cell.column]
        rows.append(
            {
                **msgspec.structs.asdict(cell),
                "device": column.device,
                "runs": ";".join(cell.runs),
            }
        )
    return compare_csv(rows, MATRIX_CSV_COLUMNS)


def modules_csv(document) -> str:
    """One line per node of a module tree, its path first."""
    from tb_opcompare.schema.contract import MODULE_NODE_COLUMNS

    return compare_csv([msgspec.structs.asdict(node) for node in document.nodes], MODULE_NODE_COLUMNS)


def memory_csv(document) -> str:
    """One line per op of a memory document that allocated or freed memory, largest first."""
    from tb_opcompare.schema.contract import MEMORY_COLUMNS

    return compare_csv(document.rows, MEMORY_COLUMNS)


def roofline_csv(document) -> str:
    """One line per op of a roofline document, the most time first."""
    from tb_opcompare.schema.contract import ROOFLINE_COLUMNS

    return compare_csv(document.rows, ROOFLINE_COLUMNS)


def layers_csv(document) -> str:
    """One line per application range and runtime call of a layers document."""
    from tb_opcompare.schema.contract import LAYER_COLUMNS

    return compare_csv([msgspec.structs.asdict(row) for row in document.rows], LAYER_COLUMNS)
