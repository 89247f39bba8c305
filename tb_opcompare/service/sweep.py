"""The batch sweep documents: which models can be swept, and one model's sweep.

``sweeps_document`` -> ``{"models": {model: {device: [batch sizes]}}, "sweepable": [...]}``
``sweep_document`` -> ``{"model", "group_by", "batch_sizes", "runs", "top_ops", "series",
"steps", "fits", "breakeven", "speedups", "warnings"}``
"""

from __future__ import annotations

import pandas as pd

from tb_opcompare.analysis.row_view import order_missing_last
from tb_opcompare.analysis.sweep import FIT_COLUMNS, SweepRun, build_sweep
from tb_opcompare.errors import ProfileError
from tb_opcompare.ingest.sidecar import read_claims
from tb_opcompare.schema.contract import SweepDocument, SweepsDocument
from tb_opcompare.service.figures import sweep_figures
from tb_opcompare.service.records import as_records
from tb_opcompare.service.runs import run_record
from tb_opcompare.store.catalog import Catalog, UnknownRunError


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


def sweeps_document(catalog: Catalog) -> SweepsDocument:
    """The ``sweeps`` answer: every model's batch sizes per device, and the models that can
    be swept (two or more batch sizes on one device), best first: most devices with a
    sweep (a CPU and a GPU sweep show the speedup), then most runs, then name."""
    models = sweep_models(catalog)

    def sweeps(model: str) -> list[list[int]]:
        return [sizes for sizes in models[model].values() if len(sizes) >= 2]

    sweepable = sorted((model for model in models if sweeps(model)),
                       key=lambda model: (-len(sweeps(model)), -sum(map(len, sweeps(model))), model))
    return SweepsDocument(models=models, sweepable=sweepable)


def sweep_document(catalog: Catalog, model: str, top: int = 10, ops: list[str] | None = None,
                   group_by: str = "name", figures: bool = False) -> SweepDocument:
    """The batch sweep of one model key. Only that model's runs are read (the model is the
    sidecar's or the run name's; its precision and compiler may be the data's). A run that cannot be read
    becomes a warning (it never hides the others); an unknown model raises
    UnknownRunError. ``figures``: with the plotly figures the tab draws."""
    loaded_runs, warnings, known = [], [], set()
    for source in catalog.sources(refresh=True):
        claims = read_claims(source)
        known.add(claims.model)
        # only runs of this model are read; its precision and compiler may come from the data
        if model != claims.base_model and not model.startswith(claims.base_model + " ["):
            continue
        try:
            loaded = catalog.load(source.run)
        except ProfileError as error:
            if claims.model == model:
                warnings.append(f"{source.run}: left out, cannot read {error.path}: {error.reason}")
            continue
        if loaded.model == model:
            loaded_runs.append(loaded)
    if not loaded_runs:
        raise UnknownRunError(f"unknown model {model!r}", sorted(known))
    runs = []
    for loaded in loaded_runs:
        facts = loaded.profile.facts
        warnings.extend(f"{loaded.source.run}: {warning}" for warning in facts.warnings)
        runs.append(run_record(loaded))
    sweep = build_sweep(
        [SweepRun(run=run.source.run, device=run.profile.facts.device, batch_size=run.profile.facts.batch_size,
                  ops=run.profile.ops, steps=run.profile.facts.steps, step_time_us=run.profile.facts.step_time_us)
         for run in loaded_runs],
        top=top, ops=ops, group_by=group_by,
    )
    # the tables stay records, typed by their row Structs (SeriesPoint, Fit, ...)
    document = SweepDocument(
        model=model, group_by=group_by, batch_sizes=sweep.batch_sizes, runs=runs, top_ops=sweep.top_ops,
        series=as_records(sweep.series), steps=as_records(sweep.steps), fits=as_records(sweep.fits),
        breakeven=as_records(sweep.breakeven), speedups=as_records(sweep.speedups),
        warnings=warnings + sweep.warnings,
    )
    if figures:
        document.figures = sweep_figures(document)
    return document


def fits_table(document: SweepDocument, op_contains: str = "", sort: str | None = None,
               descending: bool = True) -> list[dict]:
    """The fits as the user sees them: ops whose name holds ``op_contains`` (any case),
    ordered by ``sort`` (a column of FIT_COLUMNS; missing values last, ties in the
    document's order), as the tab's fits table shows them and its export writes them."""
    rows = document.fits
    if op_contains:
        needle = op_contains.lower()
        rows = [row for row in rows if needle in row["op"].lower()]
    if sort and rows:
        values = pd.DataFrame(rows, columns=FIT_COLUMNS)[sort].to_numpy()
        rows = [rows[position] for position in order_missing_last(values, descending).tolist()]
    return rows
