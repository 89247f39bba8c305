"""Tables become JSON-ready records here, once, for every document."""

from __future__ import annotations

import numpy as np
import pandas as pd


def json_values(frame) -> list[tuple]:
    """The frame's rows as JSON-ready Python values (NaN, infinities and NA: None),
    converted a column at a time (numbers at numpy speed) rather than a cell at a time."""
    columns = []
    for name in frame.columns:
        column = frame[name]
        if column.dtype.kind == "f":
            data = column.to_numpy(dtype="float64")
            columns.append(np.where(np.isfinite(data), data, None).tolist())
        elif column.dtype.kind in "iub" and not column.hasnans:
            columns.append(column.to_numpy().tolist())
        else:  # text, and integers or flags with gaps
            columns.append([None if value is pd.NA or value != value else value for value in column.tolist()])
    return list(zip(*columns))


def as_records(frame: pd.DataFrame) -> list[dict]:
    """The frame's rows as JSON-ready dicts (see ``json_values``)."""
    columns = list(frame.columns)
    return [dict(zip(columns, values)) for values in json_values(frame)]
