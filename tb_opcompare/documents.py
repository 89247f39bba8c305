"""The documents the CLI prints and the HTTP API serves: one code path for both.

* ``runs_document`` -> ``{"runs": [...], "pairs": [...], "errors": [...]}``
* ``compare_document`` -> ``{"summary": {...}, "columns": [...], "rows": [...], "total_rows": N}``
  (``rows``: the ``RowView`` of the comparison; only those rows become JSON)
* ``compare_csv`` -> the same rows as CSV text, header row, times in microseconds
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import io
import math
import threading
import weakref
from collections.abc import Mapping

import numpy as np
import pandas as pd

from . import __version__
from .catalog import Catalog, LoadedRun, UnknownRunError, read_claims
from .compare import COMPARE_COLUMNS, compare_ops, finite_or_none, like_for_like
from .discovery import RunSource
from .errors import ProfileError
from .naming import model_key
from .optable import OpProfile
from .pairing import RunForPairing, notices, pair_runs, suggest_pair
from .sweep import SweepRun, build_sweep


def run_record(loaded: LoadedRun) -> dict:
    facts = loaded.profile.facts
    return {
        "run": loaded.source.run,
        "format": facts.format,
        "device": facts.device,
        "device_name": facts.device_name,
        "batch_size": facts.batch_size,
        "batch_size_source": facts.batch_size_source,
        "batch_size_agreement": facts.batch_size_agreement,
        "steps": facts.steps,
        "steps_source": facts.steps_source,
        "model": loaded.model,
        "label": loaded.label,
        "repeat": loaded.repeat,
        "sessions": list(loaded.source.sessions),
        "session": loaded.session,
        "framework": facts.framework,
        "warnings": list(facts.warnings),
        "loaded": True,
    }


def unread_run_record(source: RunSource) -> dict:
    """What is known of a run before its trace is read: its sidecar, then its name."""
    claims = read_claims(source)
    batch_size, batch_size_source = claims.batch_sizes[0] if claims.batch_sizes else (None, None)
    return {
        "run": source.run,
        "format": source.format,
        "device": claims.device,
        "device_name": claims.device_name if claims.device not in (None, "CPU") else None,
        "batch_size": batch_size,
        "batch_size_source": batch_size_source,
        "batch_size_agreement": None,
        "steps": None,
        "steps_source": None,
        "model": claims.model,
        "label": claims.label,
        "repeat": claims.repeat,
        "sessions": list(source.sessions),
        "session": source.newest_session,
        "framework": None,
        "warnings": [claims.warning] if claims.warning else [],
        "loaded": False,
    }


def runs_document(catalog: Catalog, load: bool = True) -> dict:
    """Every run's facts (newest session), the automatic pairs, what could not be read,
    the pair to show first (``suggested``), ``notices`` for the user (no accelerator run)
    and the plugin's ``version``.

    ``load=False`` reads no trace: runs already in the cache have their facts, the others
    what their sidecars, then names, say (``"loaded": false``).
    """
    runs, errors, for_pairing = [], [], []
    for source in catalog.sources(refresh=True):
        try:
            loaded = catalog.load(source.run) if load else catalog.peek(source.run)
        except ProfileError as error:
            errors.append({"run": source.run, "path": error.path, "message": error.reason})
            continue
        record = run_record(loaded) if loaded else unread_run_record(source)
        runs.append(record)
        for_pairing.append(
            RunForPairing(
                run=record["run"],
                model=record["model"],
                device=record["device"],
                batch_size=record["batch_size"],
                repeat=record["repeat"],
                op_names=frozenset(loaded.profile.ops["op_name"]) if loaded else frozenset(),
            )
        )
    pairs = pair_runs(for_pairing)
    return {"runs": runs, "pairs": pairs, "errors": errors, "complete": all(run["loaded"] for run in runs),
            "suggested": suggest_pair(for_pairing, pairs), "notices": notices(for_pairing), "version": __version__}


def compare_document(
    catalog: Catalog,
    baseline: str,
    target: str,
    group_by: str = "name",
    baseline_session: str | None = None,
    target_session: str | None = None,
    normalize: bool = True,
    view: RowView | None = None,
) -> dict:
    """Raises UnknownRunError for unknown runs/sessions, ProfileError for unreadable ones.
    ``view`` picks and orders the rows (all of them, largest total first, by default);
    only the rows it keeps are turned into JSON values, so a top-N request on a million
    ops costs the filter and the sort, not a million records."""
    base = catalog.load(baseline, baseline_session)
    tgt = catalog.load(target, target_session)
    comparison = _COMPARISONS.get(base.profile, tgt.profile, group_by, normalize)
    rows, summary = comparison.rows, comparison.summary
    records = comparison.records(apply_view(rows, view or RowView()))
    base_record, target_record = run_record(base), run_record(tgt)
    figures, notes = like_for_like(summary, base_record, target_record, group_by)
    summary = {key: finite_or_none(value) for key, value in {**summary, **figures}.items()}
    summary.update(group_by=group_by, normalized_types=normalize, baseline=base_record, target=target_record,
                   notes=notes)
    return {"summary": summary, "columns": list(COMPARE_COLUMNS), "rows": records, "total_rows": len(rows)}


class _Comparison:
    """One comparison: its rows (a table, positions as index), its summary, and the rows
    as JSON-ready records, made once for a table small enough to keep them (most are:
    every filter, sort and export of the tab then picks records instead of making them)."""

    KEEP_RECORDS_UP_TO = 100_000  # rows; a record is about 2 KB of Python objects

    def __init__(self, rows: pd.DataFrame, summary: dict):
        self.rows, self.summary = rows, summary
        self._all: list[dict] | None = None
        self._lock = threading.Lock()

    def records(self, positions: np.ndarray) -> list[dict]:
        """The rows at ``positions`` (in that order) as records."""
        if len(self.rows) > self.KEEP_RECORDS_UP_TO:
            return _as_records(self.rows.iloc[positions])
        with self._lock:
            if self._all is None:
                self._all = _as_records(self.rows)
        return [self._all[position] for position in positions.tolist()]


def _as_records(frame: pd.DataFrame) -> list[dict]:
    """The frame's rows as JSON-ready dicts (see ``json_values``)."""
    columns = list(frame.columns)
    return [dict(zip(columns, values)) for values in json_values(frame)]


class _ComparisonMemo:
    """The last few comparisons (their row tables): the tab asks for the same pair again
    and again (each filter, sort, regex and CSV export). Keyed by the parsed op tables
    themselves, held weakly: a profile read again after a change is a new table, so a
    stale entry can never be served. Bounded by entries and by rows in all (a million-op
    comparison is a few hundred MB). Callers must not change the tables."""

    def __init__(self, size: int = 8, max_rows: int = 2_000_000):
        self._size, self._max_rows = size, max_rows
        self._entries: collections.OrderedDict = collections.OrderedDict()
        self._lock = threading.Lock()
        self.computed = 0  # comparisons made (not served from the memo); a test counts them

    def get(self, baseline: OpProfile, target: OpProfile, group_by: str, normalize: bool) -> _Comparison:
        key = (id(baseline.ops), id(target.ops), baseline.facts.steps, target.facts.steps, group_by, normalize)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0]() is baseline.ops and entry[1]() is target.ops:
                self._entries.move_to_end(key)
                return entry[2]
        rows, summary = compare_ops(baseline.ops, target.ops, group_by=group_by, normalize=normalize,
                                    baseline_steps=baseline.facts.steps, target_steps=target.facts.steps)
        comparison = _Comparison(rows[COMPARE_COLUMNS].reset_index(drop=True), summary)
        with self._lock:
            self.computed += 1
            self._entries[key] = (weakref.ref(baseline.ops), weakref.ref(target.ops), comparison)
            self._entries.move_to_end(key)  # a key made again by a concurrent request is the newest
            while len(self._entries) > 1 and (
                    len(self._entries) > self._size
                    or sum(len(entry[2].rows) for entry in self._entries.values()) > self._max_rows):
                self._entries.popitem(last=False)
        return comparison


_COMPARISONS = _ComparisonMemo()


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


STATUSES = ("matched", "baseline_only", "target_only")
SIDE_FILTERS = ("all", "host", "device")
_MAX_PATTERN = 500


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
    """

    query: str = ""
    statuses: tuple[str, ...] = STATUSES
    side: str = "all"
    min_total_us: float = 0.0
    sort: str | None = None
    descending: bool = True
    top: int | None = None


def view_from_params(params: Mapping[str, str]) -> RowView:
    """Read a RowView from URL/query parameters; ValueError names the bad parameter."""
    query = params.get("q", "") or ""
    if len(query) > _MAX_PATTERN:
        raise ValueError(f"q: longer than {_MAX_PATTERN} characters")
    _query_matcher(query)
    statuses = tuple(s for s in (params.get("status") or ",".join(STATUSES)).split(",") if s)
    unknown = [s for s in statuses if s not in STATUSES]
    if unknown or not statuses:
        raise ValueError(f"status: expected a comma-separated subset of {', '.join(STATUSES)}")
    side = params.get("side") or "all"
    if side not in SIDE_FILTERS:
        raise ValueError(f"side: expected one of {', '.join(SIDE_FILTERS)}, not {side!r}")
    min_total_us = _number(params, "min_us", 0.0, float)
    sort = params.get("sort") or None
    if sort is not None and sort not in COMPARE_COLUMNS:
        raise ValueError(f"sort: unknown column {sort!r}; columns: {', '.join(COMPARE_COLUMNS)}")
    order = params.get("order") or "desc"
    if order not in ("asc", "desc"):
        raise ValueError(f"order: expected asc or desc, not {order!r}")
    top = _number(params, "top", None, int)
    if top is not None and top <= 0:
        raise ValueError("top: must be a positive integer")
    return RowView(query, statuses, side, min_total_us, sort, order == "desc", top)


def _number(params: Mapping[str, str], name: str, default, kind):
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


def _query_matcher(query: str):
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
            reason = error.args[0].decode("utf-8", "replace") if error.args and isinstance(error.args[0], bytes) \
                else str(error)
            raise ValueError(f"q: not a valid regular expression ({reason}; backreferences and lookaround are "
                             "not supported)") from None
        return lambda text: pattern.search(text) is not None
    needle = query.lower()
    return lambda text: needle in text.lower()


def apply_view(rows: pd.DataFrame, view: RowView) -> np.ndarray:
    """The positions of the rows ``view`` keeps, in its order: column-wise, so it scales
    with the op count, and in numpy where it can, as it runs on every request."""
    keep = np.ones(len(rows), dtype=bool)
    if set(view.statuses) != set(STATUSES):
        keep &= rows["status"].isin(view.statuses).to_numpy()
    if view.side != "all":
        sides = {view.side, "mixed"}
        keep &= (rows["baseline_time_source"].isin(sides) | rows["target_time_source"].isin(sides)).to_numpy()
    if view.min_total_us:
        larger = np.fmax(rows["baseline_total_us"].to_numpy(dtype="float64"),
                         rows["target_total_us"].to_numpy(dtype="float64"))
        keep &= np.nan_to_num(larger, nan=0.0) >= view.min_total_us
    if view.query:
        matches = _query_matcher(view.query)
        where = np.flatnonzero(keep)
        keys, types = rows["key"].to_numpy()[where], rows["op_type"].to_numpy()[where]
        found = np.fromiter((matches(key) or matches(kind if isinstance(kind, str) else "")
                             for key, kind in zip(keys, types)), dtype=bool, count=len(where))
        keep[where[~found]] = False
    positions = np.flatnonzero(keep)
    if view.sort:
        positions = positions[_order_missing_last(rows[view.sort].to_numpy()[positions], view.descending)]
    return positions[: view.top] if view.top else positions


def _order_missing_last(values: np.ndarray, descending: bool) -> np.ndarray:
    """The order of ``values``, missing ones (and infinities, which JSON cannot hold) last
    in either direction, ties kept in the comparison's own order."""
    if values.dtype.kind == "f":
        present = np.flatnonzero(np.isfinite(values))
        ranked = present[np.argsort(-values[present] if descending else values[present], kind="stable")]
        return np.concatenate([ranked, np.flatnonzero(~np.isfinite(values))])
    order = pd.DataFrame({"value": values, "position": np.arange(len(values))})  # text, flags with gaps
    order = order.sort_values(["value", "position"], ascending=[not descending, True], na_position="last")
    return order["position"].to_numpy()


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _csv_cell(value) -> object:
    """Neutralise spreadsheet formulas in text cells (op names come from user files)."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def compare_csv(rows: list[dict], columns: list[str] = COMPARE_COLUMNS) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    cells = [[_csv_cell(row.get(column)) for row in rows] if _holds_text(rows, column) else
             ["" if value is None else value for value in (row.get(column) for row in rows)] for column in columns]
    writer.writerows(zip(*cells))
    return buffer.getvalue()


def _holds_text(rows: list[dict], column: str) -> bool:
    """Whether a column has any text cell (only those can carry a formula)."""
    return any(isinstance(row.get(column), str) for row in rows)


def sweep_models(catalog: Catalog) -> dict[str, dict[str, list[int]]]:
    """Every model key with its batch sizes per device (readable runs only)."""
    models: dict[str, dict[str, set]] = {}
    for source in catalog.sources(refresh=True):
        try:
            loaded = catalog.load(source.run)
        except ProfileError:
            continue
        sizes = models.setdefault(loaded.model, {}).setdefault(loaded.profile.facts.device, set())
        if loaded.profile.facts.batch_size:
            sizes.add(loaded.profile.facts.batch_size)
    return {model: {device: sorted(sizes) for device, sizes in devices.items()} for model, devices in models.items()}


def sweeps_document(catalog: Catalog) -> dict:
    """The ``sweeps`` answer: every model's batch sizes per device, and the models that can
    be swept (two or more batch sizes on one device), best first: most devices with a
    sweep (a CPU and a GPU sweep show the speedup), then most runs, then name."""
    models = sweep_models(catalog)

    def sweeps(model: str) -> list[list[int]]:
        return [sizes for sizes in models[model].values() if len(sizes) >= 2]

    sweepable = sorted((model for model in models if sweeps(model)),
                       key=lambda model: (-len(sweeps(model)), -sum(map(len, sweeps(model))), model))
    return {"models": models, "sweepable": sweepable}


def sweep_document(catalog: Catalog, model: str, top: int = 10, ops: list[str] | None = None,
                   group_by: str = "name") -> dict:
    """The batch sweep of one model key. A run that cannot be read becomes a warning
    (it never hides the others); an unknown model raises UnknownRunError."""
    loaded_runs, warnings, known = [], [], set()
    for source in catalog.sources(refresh=True):
        try:
            loaded = catalog.load(source.run)
        except ProfileError as error:
            if model_key(source.run) == model:
                warnings.append(f"{source.run}: left out, cannot read {error.path}: {error.reason}")
            continue
        known.add(loaded.model)
        if loaded.model == model:
            loaded_runs.append(loaded)
    if not loaded_runs:
        raise UnknownRunError(f"unknown model {model!r}", sorted(known))
    runs = []
    for loaded in loaded_runs:
        facts = loaded.profile.facts
        warnings.extend(f"{loaded.source.run}: {warning}" for warning in facts.warnings)
        runs.append({
            "run": loaded.source.run, "device": facts.device, "device_name": facts.device_name,
            "batch_size": facts.batch_size, "batch_size_source": facts.batch_size_source,
            "steps": facts.steps, "step_time_us": finite_or_none(facts.step_time_us), "framework": facts.framework,
        })
    sweep = build_sweep(
        [SweepRun(run=run.source.run, device=run.profile.facts.device, batch_size=run.profile.facts.batch_size,
                  ops=run.profile.ops, steps=run.profile.facts.steps, step_time_us=run.profile.facts.step_time_us)
         for run in loaded_runs],
        top=top, ops=ops, group_by=group_by,
    )
    return {
        "model": model,
        "group_by": group_by,
        "batch_sizes": sweep.batch_sizes,
        "runs": runs,
        "top_ops": sweep.top_ops,
        "series": _as_records(sweep.series),
        "steps": _as_records(sweep.steps),
        "fits": _as_records(sweep.fits),
        "breakeven": _as_records(sweep.breakeven),
        "speedups": _as_records(sweep.speedups),
        "warnings": warnings + sweep.warnings,
    }


SWEEP_CSV_COLUMNS = ["op", "device", "fixed_us", "per_sample_us", "r2", "points", "poor_fit", "share",
                     "breakeven_batch_size", "gpu_faster"]


def sweep_table(document: dict) -> list[dict]:
    """The fits table of a sweep document, each row with its op's break-even."""
    crossings = {row["op"]: row for row in document["breakeven"]}
    return [
        {**fit, "breakeven_batch_size": crossings.get(fit["op"], {}).get("batch_size"),
         "gpu_faster": crossings.get(fit["op"], {}).get("gpu_faster")}
        for fit in document["fits"]
    ]
