"""The documents the CLI prints and the HTTP API serves: one code path for both.

* ``runs_document`` -> ``{"runs": [...], "pairs": [...], "errors": [...]}``
* ``compare_document`` -> ``{"summary": {...}, "columns": [...], "rows": [...]}``
* ``compare_csv`` -> the same rows as CSV text, header row, times in microseconds
"""

from __future__ import annotations

import csv
import io

from .catalog import Catalog, LoadedRun
from .compare import COMPARE_COLUMNS, compare_ops, finite_or_none
from .errors import ProfileError
from .pairing import RunForPairing, pair_runs

RUN_FIELDS = ["run", "format", "device", "device_name", "batch_size", "batch_size_source", "steps", "model", "sessions"]


def run_record(loaded: LoadedRun) -> dict:
    facts = loaded.profile.facts
    return {
        "run": loaded.source.run,
        "format": facts.format,
        "device": facts.device,
        "device_name": facts.device_name,
        "batch_size": facts.batch_size,
        "batch_size_source": facts.batch_size_source,
        "steps": facts.steps,
        "steps_source": facts.steps_source,
        "model": loaded.model,
        "label": loaded.label,
        "sessions": list(loaded.source.sessions),
        "session": loaded.session,
        "framework": facts.framework,
        "warnings": list(facts.warnings),
    }


def runs_document(catalog: Catalog) -> dict:
    """Every run's facts (newest session), the automatic pairs, and what could not be read."""
    runs, errors, for_pairing = [], [], []
    for source in catalog.sources(refresh=True):
        try:
            loaded = catalog.load(source.run)
        except ProfileError as error:
            errors.append({"run": source.run, "path": error.path, "message": error.reason})
            continue
        record = run_record(loaded)
        runs.append(record)
        for_pairing.append(
            RunForPairing(
                run=record["run"],
                model=record["model"],
                device=record["device"],
                batch_size=record["batch_size"],
                op_names=frozenset(loaded.profile.ops["op_name"]),
            )
        )
    return {"runs": runs, "pairs": pair_runs(for_pairing), "errors": errors}


def compare_document(
    catalog: Catalog,
    baseline: str,
    target: str,
    group_by: str = "name",
    baseline_session: str | None = None,
    target_session: str | None = None,
    normalize: bool = True,
) -> dict:
    """Raises UnknownRunError for unknown runs/sessions, ProfileError for unreadable ones."""
    base = catalog.load(baseline, baseline_session)
    tgt = catalog.load(target, target_session)
    rows, summary = compare_ops(
        base.profile.ops,
        tgt.profile.ops,
        group_by=group_by,
        normalize=normalize,
        baseline_steps=base.profile.facts.steps,
        target_steps=tgt.profile.facts.steps,
    )
    summary = {key: finite_or_none(value) for key, value in summary.items()}
    summary.update(group_by=group_by, normalized_types=normalize, baseline=run_record(base), target=run_record(tgt))
    records = [
        {column: finite_or_none(value) for column, value in zip(COMPARE_COLUMNS, row)}
        for row in rows.itertuples(index=False, name=None)
    ]
    return {"summary": summary, "columns": list(COMPARE_COLUMNS), "rows": records}


def select_rows(rows: list[dict], sort: str | None = None, top: int | None = None, descending: bool = True) -> list[dict]:
    """Sort (missing values last) and cut to the top N, as the CLI's --sort/--top do."""
    if sort:
        present = [r for r in rows if r.get(sort) is not None]
        missing = [r for r in rows if r.get(sort) is None]
        rows = sorted(present, key=lambda r: r[sort], reverse=descending) + missing
    return rows[:top] if top else rows


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
    for row in rows:
        writer.writerow([_csv_cell(row.get(column)) for column in columns])
    return buffer.getvalue()
