"""``Table``: named numpy columns of one length, in order — the form the tables are made
in (``schema.optable``), kept in (``store.cache``) and compared in, without pandas.

pandas costs 0.2-0.3 s to import, as long as a whole command on a small trace; a view
that wants a DataFrame asks for one (``Table.frame``), and only then is pandas loaded.
Text columns are numpy object arrays of ``str``; numbers are int64, float64 or bool.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, ItemsView, Iterable, Mapping
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd


# Rows of a column not made yet that are made to size it.
_SAMPLED_ROWS = 1024


class Gathered:
    """A column made on first use: ``make(values, positions)``, the rows of ``values`` at
    ``positions`` (a comparison's side aligned to its rows, -1 where the side lacks the
    key; ``make`` may count on the positions being distinct). Rows taken from the table are
    made at once, of their positions alone, by ``make_rows``: a page of 20,000 rows of a
    million-row comparison gathers 20,000 rows of each column, not a million (gathering
    every column of both sides in the rows' order took 0.4-0.7 s of a first page)."""

    __slots__ = ("values", "positions", "make", "make_rows")

    def __init__(
        self,
        values: np.ndarray,
        positions: np.ndarray,
        make: Callable[[np.ndarray, np.ndarray], np.ndarray],
        make_rows: Callable[[np.ndarray, np.ndarray], np.ndarray],
    ):
        self.values, self.positions, self.make, self.make_rows = values, positions, make, make_rows

    def __len__(self) -> int:
        return len(self.positions)

    def rows(self, positions: np.ndarray | slice) -> np.ndarray:
        return self.make_rows(self.values, self.positions[positions])

    def held_bytes(self) -> int:
        """What the column will hold, made, from a sample of its rows made (counts and flags
        become Python objects); its positions, which other columns share, are not counted."""
        sample = self.positions[:_SAMPLED_ROWS]
        if not len(sample):
            return 0
        return held_bytes(self.make_rows(self.values, sample)) * len(self.positions) // len(sample)


class Table:
    """Never changed once made (its columns are read-only; a new table is made instead). A
    column may be ``Gathered``: made the first time it is asked for, and kept."""

    __slots__ = ("_columns", "_rows", "__weakref__")  # memos hold tables weakly

    def __init__(self, columns: Mapping[str, np.ndarray | Gathered]):
        self._columns: dict[str, np.ndarray | Gathered] = {
            name: values if isinstance(values, Gathered) else _read_only(values) for name, values in columns.items()
        }
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
        values = self._columns[name]
        if isinstance(values, Gathered):  # made once (two threads at once make it alike)
            values = self._columns[name] = _read_only(values.make(values.values, values.positions))
        return values

    def __contains__(self, name: str) -> bool:
        return name in self._columns

    @property
    def names(self) -> list[str]:
        return list(self._columns)

    def items(self) -> ItemsView[str, np.ndarray]:
        return {name: self[name] for name in self._columns}.items()

    def memory_bytes(self) -> int:
        """Bytes the columns hold, the texts of text columns included (as pandas' deep
        memory usage counts them); a column not made yet, what it will hold."""
        recipes = [values for values in self._columns.values() if isinstance(values, Gathered)]
        made = [values for values in self._columns.values() if not isinstance(values, Gathered)]
        shared = {id(recipe.positions): recipe.positions.nbytes for recipe in recipes}  # a side's, once
        return sum(map(held_bytes, made)) + sum(recipe.held_bytes() for recipe in recipes) + sum(shared.values())

    def take(self, positions: np.ndarray | slice) -> Table:
        """The rows at ``positions`` (integers, or a boolean mask), in that order; a slice's
        rows share the columns' memory (a column not made yet makes those rows alone)."""
        return Table(
            {
                name: values.rows(positions) if isinstance(values, Gathered) else values[positions]
                for name, values in self._columns.items()
            }
        )

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
        """As a pandas DataFrame (loads pandas), made anew on each call. Kept on a table that
        lives as long as the server, one frame collected pandas' bookkeeping of every view
        each request derived from it: 8 KB a request of the memory and layers pages, a
        steady 11-16 MB a minute under tests/test_load.py's polling."""
        import pandas as pd

        return pd.DataFrame(dict(self.items()), columns=list(self._columns))

    def __reduce__(self) -> tuple[type[Table], tuple[dict[str, np.ndarray]]]:
        return Table, (dict(self.items()),)


def text_array(values: Iterable[object]) -> np.ndarray:
    """A 1-D object array of ``values`` (texts, or tuples: ``np.array`` would make a list
    of equal-length tuples a 2-D array)."""
    listed = list(values)
    array = np.empty(len(listed), dtype=object)
    array[:] = listed
    return array


_TEXTS_SAMPLED = 4096


def _texts_bytes(values: np.ndarray) -> int:
    """The bytes of an object array's items; past ``_TEXTS_SAMPLED`` items, estimated from
    that many spread evenly over it (sizing a million op names one by one took 0.15 s a
    column, 1.2 s of a cold million-op compare, for a figure the cache budgets by)."""
    flat = values.reshape(-1)
    if len(flat) <= _TEXTS_SAMPLED:
        return sum(map(sys.getsizeof, flat.tolist()))
    sample = flat[np.linspace(0, len(flat) - 1, _TEXTS_SAMPLED).astype(np.int64)]
    return round(sum(map(sys.getsizeof, sample.tolist())) * len(flat) / _TEXTS_SAMPLED)


def repeated_text(count: int, text: str) -> np.ndarray:
    """An object array of ``count`` rows of one text, every row the same str object.
    ``np.full(count, text, dtype=object)`` makes a new str a row (numpy 2 casts the text
    through its own string type): 53 bytes a row, and the rows scattered in memory, so a
    million-row CSV spent 0.4 s a column reading them."""
    array = np.empty(count, dtype=object)
    array.fill(text)
    return array


def _read_only(values: object) -> np.ndarray:
    array = np.asarray(values)
    if array.flags.writeable:
        array = array.view()  # the caller's array stays writable; the table's view is not
        array.flags.writeable = False
    return array


def held_bytes(value: object) -> int:
    """About how many bytes ``value`` holds: arrays, their texts, and the lists, tuples,
    dicts and recipes (``schema.events.Recipe``) that hold them."""
    if isinstance(value, np.ndarray):
        return value.nbytes + (_texts_bytes(value) if value.dtype == object else 0)
    if isinstance(value, Table):
        return value.memory_bytes()
    if isinstance(value, dict):
        return sum(held_bytes(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return sum(held_bytes(item) for item in value)
    if hasattr(value, "args"):  # a recipe: what it will make a table of
        return held_bytes(value.args)
    return sys.getsizeof(value)


class LazyTable:
    """A table made on first use, once, by ``make`` (a reader's recipe): shared by every
    profile that holds it."""

    __slots__ = ("_make", "_table", "_lock")

    def __init__(self, make: Callable[[], Table]):
        self._make: Callable[[], Table] | None = make
        self._table: Table | None = None
        self._lock = threading.Lock()

    def memory_bytes(self) -> int:
        """What the table holds, or until it is made, what its recipe holds."""
        return self._table.memory_bytes() if self._table is not None else held_bytes(self._make)

    def table(self) -> Table:
        with self._lock:
            if self._table is None:
                assert self._make is not None  # made once: the recipe goes when the table comes
                self._table, self._make = self._make(), None
            return self._table

    def __reduce__(self) -> tuple[Callable[[Table], LazyTable], tuple[Table]]:
        # pickled (a copy for another process, a test's), it travels made: a lock does not
        # pickle, and a recipe would carry the reader's arrays besides
        return (_made_lazy_table, (self.table(),))


def _made_lazy_table(table: Table) -> LazyTable:
    lazy = LazyTable(lambda: table)
    lazy.table()
    return lazy


def _column_of(series: pd.Series) -> np.ndarray:
    values: np.ndarray = series.to_numpy()
    if values.dtype.kind in "iufb":
        return values
    return np.asarray(values, dtype=object)  # pandas' str columns give object arrays of str
