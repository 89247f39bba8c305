"""Tables become JSON-ready records here, once, for every document."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

import msgspec
import numpy as np

from tb_opcompare.analysis.numerics import is_missing
from tb_opcompare.schema.table import Table

Row = TypeVar("Row", bound=msgspec.Struct)


def json_values(table) -> list[tuple]:
    """The rows of ``table`` (a ``Table`` or a pandas DataFrame) as JSON-ready Python
    values (NaN, infinities and pandas' NA: None), converted a column at a time (numbers
    at numpy speed) rather than a cell at a time."""
    columns = [column_values(table[name]) for name in (table.names if isinstance(table, Table) else table.columns)]
    return list(zip(*columns))


def column_values(column) -> list:
    """One column (an array, or a pandas column) as JSON-ready Python values."""
    data = _values(column)
    if data.dtype.kind == "f":
        data = data.astype("float64", copy=False)
        finite = np.isfinite(data)
        # None as a 0-d object array: numpy's stubs take no bare None for where's values
        return data.tolist() if finite.all() else np.where(finite, data, np.array(None, dtype=object)).tolist()
    if data.dtype.kind in "iub":
        return data.tolist()
    listed = data.tolist()
    if set(map(type, listed)) <= {str}:  # text without gaps (op names): nothing to look at one by one
        return listed
    return [None if is_missing(value) else value for value in listed]  # numbers and flags with gaps


def _values(column) -> np.ndarray:
    """A column's values: a Table's array; a pandas column's, its nullable integers and
    flags with gaps as objects (numpy would make those floats)."""
    if isinstance(column, np.ndarray):
        return column
    if column.dtype.kind in "iub" and column.hasnans:
        return column.to_numpy(dtype=object, na_value=None)
    return column.to_numpy()


def as_records(table) -> list[dict]:
    """The rows of ``table`` (a ``Table`` or a pandas DataFrame) as JSON-ready dicts (see
    ``json_values``)."""
    columns = table.names if isinstance(table, Table) else list(table.columns)
    return [dict(zip(columns, values)) for values in json_values(table)]


def as_structs(table, row: type[Row]) -> list[Row]:
    """The rows of ``table`` as ``row`` Structs, its columns the Struct's fields in order,
    each value as ``as_records`` makes it (unconverted: an int in a float field stays an
    int, so the JSON is the records'). For tables of hundreds of rows, not a compare's
    million (a Struct per row costs more than a record)."""
    return [row(**record) for record in as_records(table)]


def json_chunks(
    document: msgspec.Struct, table: str, records: Iterable[list], indent: int = 0, depth: int = 0
) -> Iterator[bytes | memoryview]:
    """``msgspec.json.encode(document)`` (with ``indent``, ``msgspec.json.format`` of it,
    every line ``depth`` levels further in: a document in a list), the same bytes, made a
    piece at a time: the ``table`` field's records (left empty in ``document``) come from
    ``records``, a list of them at a time, so that a million rows are never one list of
    records nor one text. msgspec writes a Struct's fields in their order; a JSON text
    holds no newline but between tokens, so a formatted piece moves in by its lines."""
    newline = b"\n" + b" " * (indent * depth) if indent else b""
    inner, colon = newline + b" " * indent, b": " if indent else b":"

    def formatted(value, levels: int) -> bytes:
        text = msgspec.json.encode(value)
        return (
            msgspec.json.format(text, indent=indent).replace(b"\n", b"\n" + b" " * (indent * levels))
            if indent
            else text
        )

    yield b"{"
    for number, field in enumerate(msgspec.structs.fields(document)):
        yield (b"," if number else b"") + inner + msgspec.json.encode(field.encode_name) + colon
        if field.name != table:
            yield formatted(getattr(document, field.name), depth + 1)
            continue
        separator = b"["
        for chunk in records:
            if chunk:  # a list's items without its brackets (and, formatted, the newline before "]"), not copied
                yield separator
                yield memoryview(formatted(chunk, depth + 1))[1 : -(len(inner) + 1) if indent else -1]
                separator = b","
        yield b"[]" if separator == b"[" else inner + b"]" if indent else b"]"
    yield newline + b"}"
