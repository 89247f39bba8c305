"""Rows numbered by group, aggregated per group: the counts, sums and spreads the tables
are made of, with numpy alone (the tables are made where pandas is never imported: a
command's whole run on a small trace is shorter than pandas' import).

A group's float sum adds its rows in row order (``np.bincount``'s weighted count is
exactly that), the same on every machine and numpy version; pandas, which made the tables
before, summed with compensation or pairwise depending on its version and on whether the
groups' rows were sorted, so the figures moved in the 13th digit between installs.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np

from tb_opcompare.native import built, wanted

# The C numbering and prefix tests of text keys (``_groups.c``), where it was built: a dict
# entry and a method call a key took half of a million-op comparison.
_NUMBERING = built("schema._groups")


def group_counts(codes: np.ndarray, count: int) -> np.ndarray:
    """How many rows each of ``count`` groups has (``codes[i]``: the group of row i)."""
    return np.bincount(np.asarray(codes, dtype=np.int64), minlength=count).astype(np.int64)


def group_sums(values: np.ndarray, codes: np.ndarray, count: int) -> np.ndarray:
    """Each group's sum of its values, NaN skipped, 0 for a group without values."""
    values = np.asarray(values, dtype=np.float64)
    if np.isnan(values).any():
        values = np.where(np.isnan(values), 0.0, values)
    return np.bincount(np.asarray(codes, dtype=np.int64), weights=values, minlength=count)


def integer_group_sums(values: np.ndarray, codes: np.ndarray, count: int) -> np.ndarray:
    """Each group's sum of its integer values, exactly (int64)."""
    sums = np.zeros(count, dtype=np.int64)
    np.add.at(sums, np.asarray(codes, dtype=np.int64), np.asarray(values, dtype=np.int64))
    return sums


def group_std(values: np.ndarray, codes: np.ndarray, count: int) -> np.ndarray:
    """Each group's population standard deviation (two passes: the mean, then the squared
    deviations from it); NaN for a group without rows."""
    values, codes = np.asarray(values, dtype=np.float64), np.asarray(codes, dtype=np.int64)
    sizes = np.bincount(codes, minlength=count)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.bincount(codes, weights=values, minlength=count) / sizes
        deviations = values - mean[codes]
        return np.sqrt(np.bincount(codes, weights=deviations * deviations, minlength=count) / sizes)


def group_extremes(values: np.ndarray, codes: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Each group's smallest and largest value (inf and -inf for a group without rows)."""
    minimum, maximum = np.full(count, np.inf), np.full(count, -np.inf)
    np.minimum.at(minimum, codes, values)
    np.maximum.at(maximum, codes, values)
    return minimum, maximum


def known_sums(values: np.ndarray, codes: np.ndarray, count: int) -> np.ndarray:
    """Each group's sum of its values, NaN where none of them is known (NaN)."""
    values = np.asarray(values, dtype=np.float64)
    known = group_counts(codes[~np.isnan(values)], count)
    return np.where(known > 0, group_sums(values, codes, count), np.nan)


def among(values: np.ndarray | list[object], wanted: Iterable[object]) -> np.ndarray:
    """Whether each of ``values`` is one of ``wanted``: one set lookup a value (at C speed:
    a million op names take a tenth of the time a generator's lookups do)."""
    wanted_set = set(wanted)
    return np.fromiter(map(wanted_set.__contains__, np.asarray(values).tolist()), dtype=bool, count=len(values))


def starting_with(texts: list[str], prefixes: tuple[str, ...]) -> np.ndarray:
    """Whether each text starts with one of ``prefixes``, as ``str.startswith`` says: in C
    where ``_groups`` was built (and the prefixes are ASCII)."""
    helper = wanted(_NUMBERING)
    flags = helper.starting_with(texts, prefixes) if helper is not None else None
    if flags is not None:
        return np.frombuffer(flags, dtype=bool)
    return np.fromiter(map(str.startswith, texts, itertools.repeat(prefixes)), dtype=bool, count=len(texts))


def positions(values: Sequence[object], keys: Sequence[object]) -> np.ndarray:
    """Each value's position among ``keys`` (distinct), -1 where it is none of them."""
    where = dict(zip(keys, range(len(keys))))
    return np.fromiter(map(where.get, values, itertools.repeat(-1)), dtype=np.int64, count=len(values))


def first_appearance(keys: Sequence[Hashable]) -> tuple[np.ndarray, list[Any]]:
    """Each key's number among the distinct keys, numbered in the order first met (as
    ``groupby(sort=False)`` numbers its groups), and the distinct keys in that order.
    ``keys``: hashable values (op names, (name, type) pairs), one per row."""
    distinct = list(dict.fromkeys(keys))  # C-speed passes: no Python step per key
    if len(distinct) == len(keys):  # every key once (grouping a million distinct op names)
        return np.arange(len(keys), dtype=np.int64), distinct
    index = dict(zip(distinct, range(len(distinct))))
    return np.fromiter(map(index.__getitem__, keys), dtype=np.int64, count=len(keys)), distinct


def first_seen(columns: list[list[Any]]) -> list[np.ndarray]:
    """Each key's stamp, the keys of ``columns`` counted one after another: the count at
    which its value was first met. Equal keys share a stamp, and a stamp below the first
    column's length is a key of the first column (a comparison's baseline). Text keys are
    numbered in C where ``_groups`` was built, others with a dict (``setdefault`` keeps the
    first count)."""
    helper = wanted(_NUMBERING)
    stamped = helper.first_seen(columns) if helper is not None else None
    if stamped is not None:
        return [np.frombuffer(stamps, dtype=np.int64) for stamps in stamped]
    stamps: dict[object, int] = {}
    counted, start = [], 0
    for keys in columns:
        counted.append(np.fromiter(map(stamps.setdefault, keys, itertools.count(start)), np.int64, len(keys)))
        start += len(keys)
    return counted


def first_appearance_ids(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Each row's id among the distinct rows of ``columns`` (int64 arrays of one length),
    numbered in the order first met, and the first row of each id. Sorted once by all
    columns (``np.unique(axis=0)`` compares rows as bytes, several times slower)."""
    count = len(columns[0])
    if not count:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.lexsort(columns[::-1])
    starts_group = np.ones(count, dtype=bool)
    starts_group[1:] = np.any([column[order][1:] != column[order][:-1] for column in columns], axis=0)
    group_of_sorted = np.cumsum(starts_group) - 1
    first = np.minimum.reduceat(order, np.flatnonzero(starts_group))  # each group's first row
    by_first = np.argsort(first, kind="stable")
    rank = np.empty(len(first), dtype=np.int64)
    rank[by_first] = np.arange(len(first))
    ids = np.empty(count, dtype=np.int64)
    ids[order] = rank[group_of_sorted]
    return ids, first[by_first]
