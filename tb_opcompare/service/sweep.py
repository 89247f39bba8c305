"""The batch sweep documents: which models can be swept, and one model's sweep.

``sweeps_document`` -> ``{"models": {model: {device: [batch sizes]}}, "sweepable": [...]}``
``sweep_document`` -> ``{"model", "group_by", "series_by", "held", "baseline_series",
"target_series", "batch_sizes", "runs", "top_ops", "series", "steps", "fits", "breakeven",
"speedups", "warnings"}``

A sweep draws one line per value of one dimension (``series_by``: the device by default,
or the precision or the compiler) and holds the other two: the model key's precision and
compiler (``mnist_cnn [bf16]``), and, where the lines are not devices, the device the
most runs of the model were recorded on, unless ``held`` names one.
"""

from __future__ import annotations

import collections

import msgspec
import pandas as pd

from tb_opcompare.analysis.row_view import order_missing_last
from tb_opcompare.analysis.step_time import evidenced_batch_size
from tb_opcompare.analysis.sweep import FIT_COLUMNS, SweepRun, build_sweep
from tb_opcompare.errors import UsageError
from tb_opcompare.schema.contract import (
    Breakeven,
    Fit,
    SeriesPoint,
    SpeedupPoint,
    StepPoint,
    SweepDocument,
    SweepsDocument,
)
from tb_opcompare.schema.dimensions import DEFAULTS, GROUP_BY, SERIES_DIMENSIONS, default_among, is_group_by
from tb_opcompare.service.figures import sweep_figures
from tb_opcompare.service.logdir import read_logdir
from tb_opcompare.service.records import as_structs
from tb_opcompare.service.runs import MISSING_DIMENSION, run_dimensions, run_record
from tb_opcompare.store.catalog import Catalog, LoadedRun, UnknownRunError


def sweep_models(catalog: Catalog) -> dict[str, dict[str, list[int]]]:
    """Every model key with its batch sizes per device (readable runs only)."""
    models: dict[str, dict[str, set[int]]] = {}
    for loaded in read_logdir(catalog)[0]:
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

    sweepable = sorted(
        (model for model in models if sweeps(model)),
        key=lambda model: (-len(sweeps(model)), -sum(map(len, sweeps(model))), model),
    )
    return SweepsDocument(models=models, sweepable=sweepable)


# The series speedups and break-evens are measured against, per dimension.
BASELINE_SERIES = {"device": "CPU", **DEFAULTS}


def _sweep_dimensions(run: LoadedRun) -> dict[str, str]:
    """A run's dimensions as a sweep holds and draws them: an unknown precision or compiler
    is the default one, as the model key (``configuration_key``) counts it."""
    dimensions = run_dimensions(run)
    return {**dimensions, **{name: value for name, value in DEFAULTS.items() if dimensions[name] == MISSING_DIMENSION}}


def sweep_document(
    catalog: Catalog,
    model: str,
    top: int = 10,
    ops: list[str] | None = None,
    group_by: str = "name",
    figures: bool = False,
    series_by: str = "device",
    held: dict[str, str] | None = None,
) -> SweepDocument:
    """The batch sweep of one model key, its lines drawn by ``series_by``. Every run is
    read (the caches keep them): a run's model may be found from its data among the others
    (``service.logdir``), and its precision and compiler may be the data's. A run that cannot be read becomes a warning (it never
    hides the others); an unknown model raises UnknownRunError. ``held``: values for the
    dimensions the lines are not drawn by (the model key's and the commonest device
    otherwise). ``figures``: with the plotly figures the tab draws."""
    _check_dimensions(series_by, held)
    if not is_group_by(group_by):
        raise UsageError(f"group_by: expected one of {', '.join(GROUP_BY)}, not {group_by!r}", "group_by")
    loaded_runs, held, warnings = _swept_runs(catalog, model, series_by, dict(held or {}))
    warnings.extend(_unverified_sizes(loaded_runs))
    warnings.extend(
        f"{loaded.source.run}: {warning}" for loaded in loaded_runs for warning in loaded.profile.facts.warnings
    )
    sweep_runs, baseline = _sweep_runs(loaded_runs, series_by)
    sweep = build_sweep(sweep_runs, top=top, ops=ops, group_by=group_by, baseline=baseline, series_by=series_by)
    # a Struct per row: a sweep's tables hold its ops by series and batch size, not a compare's million rows
    document = SweepDocument(
        model=model,
        group_by=group_by,
        series_by=series_by,
        held=held,
        baseline_series=sweep.baseline,
        target_series=sweep.target,
        batch_sizes=sweep.batch_sizes,
        runs=[run_record(loaded) for loaded in loaded_runs],
        top_ops=sweep.top_ops,
        series=as_structs(sweep.series, SeriesPoint),
        steps=as_structs(sweep.steps, StepPoint),
        fits=as_structs(sweep.fits, Fit),
        breakeven=as_structs(sweep.breakeven, Breakeven),
        speedups=as_structs(sweep.speedups, SpeedupPoint),
        warnings=warnings + sweep.warnings,
    )
    if figures:
        document.figures = sweep_figures(document)
    return document


def _check_dimensions(series_by: str, held: dict[str, str] | None) -> None:
    """Raises UsageError unless the lines are drawn by a sweep dimension and ``held`` names
    only the others: a dimension cannot both draw the lines and be held."""
    if series_by not in SERIES_DIMENSIONS:
        raise UsageError(f"series_by: expected one of {', '.join(SERIES_DIMENSIONS)}, not {series_by!r}", "series_by")
    unknown = sorted(set(held or {}) - set(SERIES_DIMENSIONS) | ({series_by} & set(held or {})))
    if unknown:
        raise UsageError(
            f"cannot hold {', '.join(unknown)}: a sweep holds the dimensions among "
            f"{', '.join(SERIES_DIMENSIONS)} that its lines are not drawn by ({series_by})"
        )


def _swept_runs(
    catalog: Catalog, model: str, series_by: str, held: dict[str, str]
) -> tuple[list[LoadedRun], dict[str, str], list[str]]:
    """The readable runs the sweep of ``model`` draws (``_held_runs``), the values held,
    and warnings on the runs left out. Raises UnknownRunError for a model no readable run
    has, UsageError where no run has the held values."""
    loaded_runs, failed = read_logdir(catalog)
    # a run that cannot be read is named where its name claims this model
    warnings = [
        f"{source.run}: left out, cannot read {error.path}: {error.reason}"
        for source, error in failed
        if catalog.claims(source).model == model
    ]
    keyed = [loaded for loaded in loaded_runs if loaded.model == model]
    if not keyed:
        raise UnknownRunError(f"unknown model {model!r}", sorted({loaded.model for loaded in loaded_runs}))
    # the other precisions and compilers of the model are candidates too: one may draw the lines
    same_model = [loaded for loaded in loaded_runs if loaded.base_model == keyed[0].base_model]
    kept, held = _held_runs(same_model, _sweep_dimensions(keyed[0]), series_by, held, warnings)
    if not kept:
        raise UsageError(f"no run of {model!r} at " + ", ".join(f"{d} {v}" for d, v in held.items()))
    return kept, held, warnings


def _unverified_sizes(loaded_runs: list[LoadedRun]) -> list[str]:
    """A warning naming the runs whose batch size is only a framework's argument: what
    Compare's headline will not read per sample, the sweep must not present as measured."""
    unverified = [
        f"{loaded.source.run} ({loaded.profile.facts.batch_size})"
        for loaded in loaded_runs
        if loaded.profile.facts.batch_size is not None
        and evidenced_batch_size(loaded.profile.facts.batch_size, loaded.profile.facts.batch_size_source) is None
    ]
    if not unverified:
        return []
    return [
        f"batch sizes that are only a framework's argument, unverified (Keras ignores fit()'s batch_size for an "
        f"already batched dataset): {', '.join(unverified)}; samples/s and the per-sample fits rest on them. "
        "Declare the sizes in the runs' sidecars to be sure."
    ]


def _sweep_runs(loaded_runs: list[LoadedRun], series_by: str) -> tuple[list[SweepRun], str]:
    """The runs as the sweep's maths takes them, each on the line of its ``series_by``
    value, and the line the others are measured against: the CPU for devices, else the
    dimension's default as these runs have it (``default_among``)."""
    series = [_sweep_dimensions(run)[series_by] for run in loaded_runs]
    baseline = BASELINE_SERIES[series_by] if series_by == "device" else default_among(series_by, series)
    sweep_runs = [
        SweepRun(
            run=run.source.run,
            series=value,
            batch_size=run.profile.facts.batch_size,
            ops=run.profile.op_table,
            steps=run.profile.facts.steps,
            step_times_us=run.profile.facts.step_times_us,
        )
        for run, value in zip(loaded_runs, series)
    ]
    return sweep_runs, baseline


def _held_runs(
    runs: list[LoadedRun], key: dict[str, str], series_by: str, held: dict[str, str], warnings: list[str]
) -> tuple[list[LoadedRun], dict[str, str]]:
    """The runs of the model that hold every dimension but ``series_by`` at one value, and
    those values: ``held``'s, else the model key's precision and compiler, else (the
    device) the one the most runs were recorded on. Runs left out for a value not in the
    model key are named in a warning (other precisions and compilers are other keys)."""
    named = {dimension for dimension in SERIES_DIMENSIONS if dimension in held or dimension == "device"}
    dimensions_of = {id(run): _sweep_dimensions(run) for run in runs}
    # precision and compiler first: the device is the commonest among the runs that hold them
    for dimension in ("precision", "compiler", "device"):
        if dimension == series_by or dimension in held:
            continue
        if dimension != "device":
            held[dimension] = key[dimension]
            continue
        counts = collections.Counter(
            dimensions_of[id(run)]["device"]
            for run in runs
            if all(dimensions_of[id(run)][d] == v for d, v in held.items())
        )
        held[dimension] = max(sorted(counts), key=counts.__getitem__) if counts else key[dimension]
    kept: list[LoadedRun] = []
    left_out: collections.Counter[tuple[str, str]] = collections.Counter()
    for run in runs:
        dimensions = dimensions_of[id(run)]
        differing = [(d, dimensions[d]) for d in SERIES_DIMENSIONS if d in held and dimensions[d] != held[d]]
        if not differing:
            kept.append(run)
        elif all(d in named for d, _ in differing):
            left_out.update(differing)
    if left_out:
        warnings.append(
            "runs of this model left out, holding "
            + ", ".join(f"{d} {v}" for d, v in held.items())
            + ": "
            + ", ".join(f"{count} at {d} {v}" for (d, v), count in sorted(left_out.items()))
            + " (choose the held values to sweep those)"
        )
    ordered = {dimension: held[dimension] for dimension in SERIES_DIMENSIONS if dimension in held}
    return kept, ordered


def fits_table(
    document: SweepDocument, op_contains: str = "", sort: str | None = None, descending: bool = True
) -> list[Fit]:
    """The fits as the user sees them: ops whose name holds ``op_contains`` (any case),
    ordered by ``sort`` (a column of FIT_COLUMNS; missing values last, ties in the
    document's order), as the tab's fits table shows them and its export writes them."""
    rows = document.fits
    if op_contains:
        needle = op_contains.lower()
        rows = [row for row in rows if needle in row.op.lower()]
    if sort and rows:
        # the column as pandas reads the rows' values (its dtype decides what is missing)
        values = pd.DataFrame(msgspec.to_builtins(rows), columns=FIT_COLUMNS)[sort].to_numpy()
        rows = [rows[position] for position in order_missing_last(values, descending).tolist()]
    return rows
