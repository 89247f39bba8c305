"""Which compare rows a user sees, and in which order: the filter box, the status and
side toggles, the minimum time, a set of op keys, the sort column and the top N. The tab
applies the same rule in the browser (``frontend/view.js``); ``tests/golden/view_cases.json``
runs both copies on the same cases so they cannot drift."""

from __future__ import annotations

import bisect
import dataclasses
import re
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


def _is_regex(query: str) -> bool:
    return len(query) > 2 and query.startswith("/") and query.endswith("/")


def _compiled(pattern: str | bytes, never_nl: bool = False) -> Any:
    """``pattern`` compiled by RE2, case-insensitive (``never_nl``: no match holds a newline)."""
    import re2

    options = re2.Options()
    options.case_sensitive = False
    options.log_errors = False
    options.never_nl = never_nl
    return re2.compile(pattern, options)


def _query_matcher(query: str) -> Callable[[str], bool]:
    """Substring, or ``/regex/`` run by RE2: linear time whatever the pattern, so a
    pathological filter (``/(a+)+$/``) cannot stall the server (Python's ``re`` would
    backtrack for hours while holding the GIL). RE2 has no backreferences or lookaround.
    The rule for one text; ``_rows_matching`` applies it to many at once."""
    if _is_regex(query):
        import re2

        try:
            pattern = _compiled(query[1:-1])
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
        where = np.flatnonzero(keep)
        keys, types = np.asarray(rows["key"])[where].tolist(), np.asarray(rows["op_type"])[where].tolist()
        keep[where[~_rows_matching(view.query, keys, types)]] = False
    positions = np.flatnonzero(keep)
    if view.sort:
        positions = positions[order_missing_last(np.asarray(rows[view.sort])[positions], view.descending)]
    return positions


def _rows_matching(query: str, keys: list[str], types: list[Any]) -> np.ndarray:
    """Which rows ``query`` matches, by key or type (``_query_matcher``'s rule for each).
    Types are few: each is asked once. A regex asked row by row took 7-10 s for a million
    op keys (RE2's call costs far more than ``in``): the keys are searched at once, and
    each row found asked again alone (``_rows_a_regex_may_match``)."""
    matches = _query_matcher(query)
    by_type = {kind: matches(kind if isinstance(kind, str) else "") for kind in set(types)}
    found = np.fromiter(map(by_type.__getitem__, types), dtype=bool, count=len(types))
    if not _is_regex(query):
        found |= np.fromiter(map(matches, keys), dtype=bool, count=len(keys))
        return found
    for row in _rows_a_regex_may_match(query, keys):
        found[row] = found[row] or matches(keys[row])
    return found


def _rows_a_regex_may_match(query: str, keys: list[str]) -> list[int]:
    """Every row whose key the ``/regex/`` ``query`` may match (a few more are allowed):
    the keys joined on newlines, as UTF-8, each a line of the search (``(?m)``: ^ and $ at
    its ends; no match holds a newline, so none spans two), searched again from the next
    row once one is found. No such search can stand for one of a key that holds a newline
    itself or a lone surrogate, nor for a regex anchored to the whole text (``\\A``,
    ``\\z``) or that clears the ``m`` flag: then every row is asked alone."""
    joined = "\n".join(keys)
    if joined.count("\n") != len(keys) - 1 or _WHOLE_TEXT.search(query):
        return list(range(len(keys)))
    try:
        text = joined.encode()
    except UnicodeEncodeError:
        return list(range(len(keys)))
    search = _compiled(b"(?m)" + query[1:-1].encode(), never_nl=True).search
    ends = np.flatnonzero(np.frombuffer(text, dtype=np.uint8) == ord("\n")).tolist() + [len(text)]
    rows, start = [], 0
    while start <= len(text) and (match := search(text, start)) is not None:
        row = bisect.bisect_left(ends, match.start())
        rows.append(row)
        start = ends[row] + 1  # the next row
    return rows


# What a search of the joined keys cannot stand for: anchors to the whole text, and a
# flags group that clears ``m`` (multi-line, which makes ^ and $ each key's ends)
_WHOLE_TEXT = re.compile(r"\\[Az]|\(\?[a-zA-Z]*-[a-zA-Z]*m")


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
