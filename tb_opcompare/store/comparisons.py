"""The comparisons and pooled run groups this process made, kept for the next request: the
tab asks for the same pair again and again (each filter, sort, regex and CSV export).

Both are keyed by the parsed op tables themselves, held weakly: a profile read again after
a change is a new table, so a stale entry can never be served. A comparison is kept as one
thing, its rows (a ``Table``, ``COMPARE_COLUMNS``) and its summary, with the rows' JSON
records kept once made (``Comparison.records``); a frame is made of the rows where one is
wanted (``analysis.compare.compare_frame``).
"""

from __future__ import annotations

import collections
import threading
import weakref
from collections.abc import Callable

import numpy as np

from tb_opcompare.analysis.compare import compare_ops
from tb_opcompare.schema.optable import OpProfile
from tb_opcompare.schema.table import Table


class Comparison:
    """One comparison of two profiles: its rows (``compare_ops``: a ``Table``, the one
    form the views filter and sort) and its summary. The rows' JSON records are made once,
    on first asking, for a table small enough to keep them (most are): the tab asks for
    every row on each filter, sort and export, and picking 5,000 kept records takes 0.5 ms
    where making them takes 90."""

    KEEP_RECORDS_UP_TO = 100_000  # rows; a record is about 2 KB of Python objects

    def __init__(self, rows: Table, summary: dict):
        self.rows, self.summary = rows, summary
        self._records: list[dict] | None = None
        self._page: tuple[np.ndarray, list[dict]] | None = None  # a bigger table's last page asked for
        self._lock = threading.Lock()

    def records(
        self, positions: np.ndarray, as_records: Callable[[Table], list[dict]], keep: bool = True
    ) -> list[dict]:
        """The rows at ``positions`` (in that order) as JSON-ready records, which
        ``as_records`` (``service.records``'s) makes of a table. Of a table too big to keep
        them all, the last page asked for is kept (unless not to ``keep``: a chunk of a
        streamed answer): the tab asks for its first page again (20,000 records of a
        million-op comparison took 0.25 s to make)."""
        if len(self.rows) > self.KEEP_RECORDS_UP_TO:
            with self._lock:
                page = self._page
            if page is not None and np.array_equal(page[0], positions):
                return page[1]
            records = as_records(self.rows.take(positions))
            if keep:
                with self._lock:
                    self._page = (positions.copy(), records)
            return records
        with self._lock:
            if self._records is None:
                self._records = as_records(self.rows)
        return [self._records[position] for position in positions.tolist()]


class PoolMemo:
    """The last few run groups' pooled profiles, so that the comparison memo (keyed by the
    tables themselves) finds the same pooled table on the tab's next request. Held while
    every run's table is the one read now (weakly, as the comparison memo)."""

    def __init__(self, size: int = 4):
        self._size = size
        self._entries: collections.OrderedDict = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, profiles: list[OpProfile]) -> OpProfile:
        from tb_opcompare.analysis.pooling import pool_profiles

        key = tuple(id(profile.op_table) for profile in profiles)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and all(ref() is profile.op_table for ref, profile in zip(entry[0], profiles)):
                self._entries.move_to_end(key)
                return entry[1]
        pooled = pool_profiles(profiles)
        with self._lock:
            self._entries[key] = ([weakref.ref(profile.op_table) for profile in profiles], pooled)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return pooled


class ComparisonMemo:
    """The last few comparisons, bounded by entries and by rows in all (a million-op
    comparison is a few hundred MB). Callers must not change the tables."""

    def __init__(self, size: int = 8, max_rows: int = 2_000_000):
        self._size, self._max_rows = size, max_rows
        self._entries: collections.OrderedDict = collections.OrderedDict()
        self._lock = threading.Lock()
        self.computed = 0  # comparisons made (not served from the memo); a test counts them

    def get(self, baseline: OpProfile, target: OpProfile, group_by: str, normalize: bool) -> Comparison:
        key = (
            id(baseline.op_table),
            id(target.op_table),
            baseline.facts.steps,
            target.facts.steps,
            group_by,
            normalize,
        )
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0]() is baseline.op_table and entry[1]() is target.op_table:
                self._entries.move_to_end(key)
                return entry[2]
        by_module = group_by == "module"  # only then are the module tables wanted (a reader's recipe makes them)
        rows, summary = compare_ops(
            baseline.op_table,
            target.op_table,
            group_by=group_by,
            normalize=normalize,
            baseline_steps=baseline.facts.steps,
            target_steps=target.facts.steps,
            baseline_modules=baseline.module_table if by_module else None,
            target_modules=target.module_table if by_module else None,
        )
        comparison = Comparison(rows, summary)
        with self._lock:
            self.computed += 1
            self._entries[key] = (weakref.ref(baseline.op_table), weakref.ref(target.op_table), comparison)
            self._entries.move_to_end(key)  # a key made again by a concurrent request is the newest
            while len(self._entries) > 1 and (
                len(self._entries) > self._size
                or sum(len(entry[2].rows) for entry in self._entries.values()) > self._max_rows
            ):
                self._entries.popitem(last=False)
        return comparison


POOLS = PoolMemo()
COMPARISONS = ComparisonMemo()


def pooled_profile(profiles: list[OpProfile]) -> OpProfile:
    """The run group of ``profiles`` as one profile (``analysis.pooling``), kept."""
    return POOLS.get(profiles)


def comparison(baseline: OpProfile, target: OpProfile, group_by: str = "name", normalize: bool = True) -> Comparison:
    """The comparison of two profiles (``analysis.compare.compare_ops``), kept."""
    return COMPARISONS.get(baseline, target, group_by, normalize)
