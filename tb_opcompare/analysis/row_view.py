"""Which compare rows a user sees, and in which order: the filter box, the status and
side toggles, the minimum time, a set of op keys, the sort column and the top N. The tab
applies the same rule in the browser (``frontend/view.js``); ``tests/golden/view_cases.json``
runs both copies on the same cases so they cannot drift."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from tb_opcompare.analysis.numerics import is_missing
from tb_opcompare.errors import UsageError
from tb_opcompare.schema.contract import STATUSES
from tb_opcompare.schema.groups import among
from tb_opcompare.schema.requests import ViewRequest, parse_request
from tb_opcompare.schema.table import Table


@dataclasses.dataclass(frozen=True)
class RowView:
    """Which compare rows a user sees, in which order. The tab applies the same rules in
    the browser (frontend/view.js), so an exported CSV is exactly the table on screen.

    query        case-insensitive substring of the op key or type; ``/regex/`` for a regex
    statuses     the statuses to keep
    side         ``host``/``device``: keep ops whose time came from that processor, in the baseline or the target
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


def view_from_params(params: Mapping[str, Any]) -> RowView:
    """Read a RowView from URL/query parameters (their rules: ``schema.requests.ViewRequest``);
    UsageError names the bad parameter. ``key`` may be repeated (a werkzeug MultiDict's
    ``getlist``, or a list value)."""
    return view_of(parse_request(ViewRequest, params))


def view_of(request: ViewRequest) -> RowView:
    """The RowView a parsed request asks for; UsageError where its ``q`` is no regex RE2 takes."""
    try:
        _query_matcher(request.q)
    except ValueError as error:
        raise UsageError(str(error), "q") from None
    return RowView(
        query=request.q,
        statuses=request.status or STATUSES,
        side=request.side,
        min_total_us=request.min_us,
        sort=request.sort,
        descending=request.order == "desc",
        top=request.top,
        keys=tuple(dict.fromkeys(request.key)) if request.key else None,  # op keys, each whole: names hold commas
    )


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
    return top_rows(view_positions(rows, view), view)


def top_rows(positions: np.ndarray, view: RowView) -> np.ndarray:
    """The first ``view.top`` of a view's positions (all without a top): the cut a caller
    that also counts the rows before it (a document's ``total_rows``) makes."""
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
