"""Which compare rows a user sees, and in which order: the filter box, the status and
side toggles, the minimum time, a set of op keys, the sort column and the top N. The tab
applies the same rule in the browser (``frontend/view.js``); ``tests/golden/view_cases.json``
runs both copies on the same cases so they cannot drift."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from tb_opcompare.analysis.numerics import is_missing
from tb_opcompare.schema.contract import COMPARE_COLUMNS, STATUSES
from tb_opcompare.schema.groups import among
from tb_opcompare.schema.table import Table

SIDE_FILTERS = ("all", "host", "device")
MAX_PATTERN = 500


@dataclasses.dataclass(frozen=True)
class RowView:
    """Which compare rows a user sees, in which order. The tab applies the same rules in
    the browser (frontend/view.js), so an exported CSV is exactly the table on screen.

    query        case-insensitive substring of the op key or type; ``/regex/`` for a regex
    statuses     the statuses to keep
    side         ``host``/``device``: keep ops whose time on either side came from there
    min_total_us keep ops whose larger total time (either side) is at least this
    sort         column to order by (missing values always last); None keeps the
                 comparison's own order, largest total time first
    descending   sort direction
    top          keep the first N after filtering and sorting
    keys         keep only the rows of these op keys (the tab's "significant changes
                 only": the keys the confidence check found changed); None keeps every
                 key, an empty tuple none
    """

    query: str = ""
    statuses: tuple[str, ...] = STATUSES
    side: str = "all"
    min_total_us: float = 0.0
    sort: str | None = None
    descending: bool = True
    top: int | None = None
    keys: tuple[str, ...] | None = None


def view_from_params(params: Mapping[str, str]) -> RowView:
    """Read a RowView from URL/query parameters; ValueError names the bad parameter.
    ``key`` may be repeated (a werkzeug MultiDict's ``getlist``, or a list value)."""
    query = text_from_params(params, "q")
    _query_matcher(query)
    statuses = tuple(s for s in (params.get("status") or ",".join(STATUSES)).split(",") if s)
    unknown = [s for s in statuses if s not in STATUSES]
    if unknown or not statuses:
        raise ValueError(f"status: expected a comma-separated subset of {', '.join(STATUSES)}")
    side = params.get("side") or "all"
    if side not in SIDE_FILTERS:
        raise ValueError(f"side: expected one of {', '.join(SIDE_FILTERS)}, not {side!r}")
    min_total_us = _number(params, "min_us", 0.0, float)
    sort = sort_from_params(params, COMPARE_COLUMNS)
    descending = descending_from_params(params)
    top = _number(params, "top", None, int)
    if top is not None and top <= 0:
        raise ValueError("top: must be a positive integer")
    return RowView(query, statuses, side, min_total_us, sort, descending, top, keys_from_params(params))


def keys_from_params(params: Mapping[str, str]) -> tuple[str, ...] | None:
    """The repeated ``key`` parameter: op keys, each whole (op names may hold commas, so
    never a comma list); empty values are left out, and none means every key."""
    values = params.getlist("key") if hasattr(params, "getlist") else params.get("key")
    if values is None:
        values = []
    elif isinstance(values, str):
        values = [values]
    keys = tuple(dict.fromkeys(value for value in values if value))
    return keys or None


def sort_from_params(params: Mapping[str, str], columns: list[str]) -> str | None:
    """The ``sort`` parameter: one of ``columns``, or None for the table's own order."""
    sort = params.get("sort") or None
    if sort is not None and sort not in columns:
        raise ValueError(f"sort: unknown column {sort!r}; columns: {', '.join(columns)}")
    return sort


def descending_from_params(params: Mapping[str, str]) -> bool:
    """The ``order`` parameter (``desc``, the default, or ``asc``); ValueError names it."""
    order = params.get("order") or "desc"
    if order not in ("asc", "desc"):
        raise ValueError(f"order: expected asc or desc, not {order!r}")
    return order == "desc"


def text_from_params(params: Mapping[str, str], name: str) -> str:
    """A free-text parameter (a filter), bounded so no request makes the server match a
    novel against every op."""
    text = params.get(name, "") or ""
    if len(text) > MAX_PATTERN:
        raise ValueError(f"{name}: longer than {MAX_PATTERN} characters")
    return text


def _number(params: Mapping[str, str], name: str, default: float | None, kind: type[int] | type[float]) -> Any:
    text = params.get(name)
    if text in (None, ""):
        return default
    try:
        value = kind(text)
    except ValueError:
        raise ValueError(f"{name}: expected a number, not {text!r}") from None
    if kind is float and not math.isfinite(value) or value < 0:
        raise ValueError(f"{name}: expected a non-negative number, not {text!r}")
    return value


def _query_matcher(query: str) -> Callable[[str], bool]:
    """Substring, or ``/regex/`` run by RE2: linear time whatever the pattern, so a
    pathological filter (``/(a+)+$/``) cannot stall the server (Python's ``re`` would
    backtrack for hours while holding the GIL). RE2 has no backreferences or lookaround."""
    if len(query) > 2 and query.startswith("/") and query.endswith("/"):
        import re2

        options = re2.Options()
        options.case_sensitive = False
        options.log_errors = False
        try:
            pattern = re2.compile(query[1:-1], options)
        except re2.error as error:
            reason = (
                error.args[0].decode("utf-8", "replace")
                if error.args and isinstance(error.args[0], bytes)
                else str(error)
            )
            raise ValueError(
                f"q: not a valid regular expression ({reason}; backreferences and lookaround are not supported)"
            ) from None
        return lambda text: pattern.search(text) is not None
    needle = query.lower()
    return lambda text: needle in text.lower()


def apply_view(rows: Table, view: RowView) -> np.ndarray:
    """The positions of the rows ``view`` keeps, in its order: column-wise, so it scales
    with the op count, and in numpy where it can, as it runs on every request."""
    positions = view_positions(rows, view)
    return positions[: view.top] if view.top else positions


def view_positions(rows: Table, view: RowView) -> np.ndarray:
    """``apply_view`` before its top N: every row the view's filters keep, in its order.
    ``rows``: a comparison's rows (``analysis.compare``)."""
    keep = np.ones(len(rows), dtype=bool)
    if view.keys is not None:
        keep &= among(rows["key"], view.keys)
    if set(view.statuses) != set(STATUSES):
        keep &= among(rows["status"], view.statuses)
    if view.side != "all":
        sides = {view.side, "mixed"}
        keep &= among(rows["baseline_time_source"], sides) | among(rows["target_time_source"], sides)
    if view.min_total_us:
        larger = np.fmax(
            np.asarray(rows["baseline_total_us"], dtype="float64"), np.asarray(rows["target_total_us"], dtype="float64")
        )
        keep &= np.nan_to_num(larger, nan=0.0) >= view.min_total_us
    if view.query:
        matches = _query_matcher(view.query)
        where = np.flatnonzero(keep)
        keys, types = np.asarray(rows["key"])[where], np.asarray(rows["op_type"])[where]
        found = np.fromiter(
            (matches(key) or matches(kind if isinstance(kind, str) else "") for key, kind in zip(keys, types)),
            dtype=bool,
            count=len(where),
        )
        keep[where[~found]] = False
    positions = np.flatnonzero(keep)
    if view.sort:
        positions = positions[order_missing_last(np.asarray(rows[view.sort])[positions], view.descending)]
    return positions


def order_missing_last(values: np.ndarray, descending: bool) -> np.ndarray:
    """The order of ``values``, missing ones (and infinities, which JSON cannot hold) last
    in either direction, ties kept in the comparison's own order."""
    if values.dtype.kind == "f":
        present = np.flatnonzero(np.isfinite(values))
        ranked = present[np.argsort(-values[present] if descending else values[present], kind="stable")]
        return np.concatenate([ranked, np.flatnonzero(~np.isfinite(values))])
    # text, and counts or flags with gaps (None, NaN or pandas' NA where missing)
    listed = values.tolist()
    known = [position for position, value in enumerate(listed) if not is_missing(value)]
    known.sort(key=listed.__getitem__, reverse=descending)  # stable either way: ties keep their order
    return np.array(known + [position for position, value in enumerate(listed) if is_missing(value)], dtype=np.int64)
