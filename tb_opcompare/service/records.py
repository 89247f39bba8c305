"""Tables become JSON-ready records here, once, for every document."""

from __future__ import annotations

import numpy as np

from tb_opcompare.analysis.numerics import is_missing
from tb_opcompare.schema.table import Table


def json_values(table) -> list[tuple]:
    """The rows of ``table`` (a ``Table`` or a pandas DataFrame) as JSON-ready Python
    values (NaN, infinities and pandas' NA: None), converted a column at a time (numbers
    at numpy speed) rather than a cell at a time."""
    columns = []
    for name in table.names if isinstance(table, Table) else table.columns:
        data = _values(table[name])
        if data.dtype.kind == "f":
            data = data.astype("float64", copy=False)
            # None as a 0-d object array: numpy's stubs take no bare None for where's values
            columns.append(np.where(np.isfinite(data), data, np.array(None, dtype=object)).tolist())
        elif data.dtype.kind in "iub":
            columns.append(data.tolist())
        else:  # text, and integers or flags with gaps
            columns.append([None if is_missing(value) else value for value in data.tolist()])
    return list(zip(*columns))


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
