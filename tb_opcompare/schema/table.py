"""``Table``: named numpy columns of one length, in order — the form the tables are made
in (``schema.optable``), kept in (``store.cache``) and compared in, without pandas.

pandas costs 0.2-0.3 s to import, as long as a whole command on a small trace; a view
that wants a DataFrame asks for one (``Table.frame``), and only then is pandas loaded.
Text columns are numpy object arrays of ``str``; numbers are int64, float64 or bool.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd


# Frames and lazy tables are made once under this lock: a table is shared by the requests
# and the profiles (``dataclasses.replace`` copies) that hold it, and each must see one frame.
_MAKING = threading.RLock()


class Table:
    """Never changed once made (a new one is made instead), so its frame is made once."""

    __slots__ = ("_columns", "_rows", "_frame", "__weakref__")  # memos hold tables weakly

    def __init__(self, columns: Mapping[str, np.ndarray]):
        self._frame = None
        self._columns = {name: np.asarray(values) for name, values in columns.items()}
        lengths = {len(values) for values in self._columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns of different lengths: {sorted(lengths)}")
        self._rows = lengths.pop() if lengths else 0

    @classmethod
    def empty(cls, dtypes: Mapping[str, str]) -> Table:
        """No rows; a column per name, of its dtype (``object`` for text)."""
        return cls({name: np.zeros(0, dtype=dtype) for name, dtype in dtypes.items()})

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> Table:
        """A DataFrame's columns (text as object arrays of ``str``)."""
        return cls({name: _column_of(frame[name]) for name in frame.columns})

    def __len__(self) -> int:
        return self._rows

    def __getitem__(self, name: str) -> np.ndarray:
        return self._columns[name]

    def __contains__(self, name: str) -> bool:
        return name in self._columns

    @property
    def names(self) -> list[str]:
        return list(self._columns)

    def items(self):
        return self._columns.items()

    def memory_bytes(self) -> int:
        """Bytes the columns hold, the texts of text columns included (as pandas' deep
        memory usage counts them)."""
        total = 0
        for values in self._columns.values():
            total += values.nbytes
            if values.dtype == object:
                total += sum(map(sys.getsizeof, values.tolist()))
        return total

    def take(self, positions: np.ndarray) -> Table:
        """The rows at ``positions`` (integers, or a boolean mask), in that order."""
        return Table({name: values[positions] for name, values in self._columns.items()})

    def select(self, names: Iterable[str]) -> Table:
        return Table({name: self._columns[name] for name in names})

    def assign(self, **columns: np.ndarray) -> Table:
        """These columns added (or replaced, in place in the order)."""
        return Table({**self._columns, **columns})

    @staticmethod
    def concat(tables: list[Table], names: Iterable[str]) -> Table:
        """The rows of ``tables`` one after another, in the columns ``names``."""
        return Table({name: np.concatenate([table[name] for table in tables]) for name in names})

    def frame(self) -> pd.DataFrame:
        """As a pandas DataFrame (loads pandas), made once: callers must not change it."""
        with _MAKING:
            if self._frame is None:
                import pandas as pd

                self._frame = pd.DataFrame(self._columns, columns=list(self._columns))
            return self._frame


def as_table(table: Table | pd.DataFrame) -> Table:
    """A ``Table`` as it is; a pandas DataFrame's columns as one (for callers that hold frames)."""
    return table if isinstance(table, Table) else Table.from_frame(table)


class LazyTable:
    """A table made on first use, once, by ``make`` (a reader's recipe that takes pandas):
    shared by every profile that holds it."""

    __slots__ = ("_make", "_table")

    def __init__(self, make: Callable[[], Table]):
        self._make, self._table = make, None

    @property
    def made(self) -> Table | None:
        """The table where it has been made, else None (nothing is made here)."""
        return self._table

    def table(self) -> Table:
        with _MAKING:
            if self._table is None:
                self._table, self._make = self._make(), None
            return self._table


def _column_of(series) -> np.ndarray:
    values = series.to_numpy()
    if values.dtype.kind in "iufb":
        return values
    return np.asarray(values, dtype=object)  # pandas' str columns give object arrays of str
