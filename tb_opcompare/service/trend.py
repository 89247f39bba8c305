"""The trend document: a model's top ops and whole step across many runs, in a chosen
order (recording time, label, run name, repeat, any sidecar field such as a version, or a
run dimension: device, batch size, precision, compiler). Ordered by a dimension, it is a
sweep over that dimension: the runs chosen hold the others, and a point that pools runs
differing in another dimension is named in a warning."""

from __future__ import annotations

import collections

from tb_opcompare.analysis import confidence
from tb_opcompare.analysis.trend import TREND_COLUMNS, largest_keys, trend_table
from tb_opcompare.errors import ProfileError, UsageError
from tb_opcompare.schema.contract import TREND_DIMENSIONS, TREND_ORDERS, TrendDocument, TrendPoint
from tb_opcompare.schema.text import natural_key
from tb_opcompare.service.records import as_records
from tb_opcompare.service.runs import MISSING_DIMENSION, mixed_dimensions, run_dimensions
from tb_opcompare.store.catalog import Catalog, LoadedRun

ORDERS, DIMENSIONS = TREND_ORDERS, TREND_DIMENSIONS
SIDECAR_ORDER = "sidecar:"
MISSING = MISSING_DIMENSION


def check_order(order_by: str) -> None:
    if order_by not in ORDERS and not (order_by.startswith(SIDECAR_ORDER) and len(order_by) > len(SIDECAR_ORDER)):
        raise UsageError(
            f"order_by: expected one of {', '.join(ORDERS)} or sidecar:<field>, such as "
            f"sidecar:versions.torch, not {order_by!r}"
        )


def _order_value(catalog: Catalog, loaded: LoadedRun, order_by: str) -> str:
    run = loaded.source.run
    source = catalog.source(run)
    if order_by in DIMENSIONS:
        return run_dimensions(loaded)[order_by]
    if order_by == "run":
        return run
    if order_by == "recorded":
        return catalog.recorded_at(source)
    if order_by == "label":
        return catalog.claims(source).label or MISSING
    if order_by == "repeat":
        repeat = catalog.claims(source).repeat
        return MISSING if repeat is None else str(repeat)
    return catalog.sidecar_field(source, order_by[len(SIDECAR_ORDER) :]) or MISSING


def trend_document(
    catalog: Catalog, runs: list[str], order_by: str = "recorded", top: int = 10, group_by: str = "name"
) -> TrendDocument:
    """``runs`` in the order of ``order_by``, runs that share a value pooled into one point;
    a run that cannot be read becomes a warning (it never hides the others)."""
    check_order(order_by)
    warnings: list[str] = []
    by_value: dict[str, list[tuple[str, confidence.RunSamples]]] = collections.defaultdict(list)
    loaded_at: dict[str, list[LoadedRun]] = collections.defaultdict(list)
    catalog.read_ahead_runs(runs)
    for run in runs:
        try:
            loaded = catalog.load(run)
        except ProfileError as error:
            warnings.append(f"{run}: not read: {error.path}: {error.reason}")
            continue
        value = _order_value(catalog, loaded, order_by)
        by_value[value].append((run, confidence.profile_samples(loaded.profile, group_by)))
        loaded_at[value].append(loaded)
    if not by_value:
        raise UsageError("none of the runs could be read" if runs else "no runs given")
    values = sorted(by_value, key=natural_key)
    for value in values:
        what = mixed_dimensions(loaded_at[value], leaving_out=order_by)
        if what:
            warnings.append(
                f"the runs at {value!r} pooled runs that differ in more than the order ({what}); choose "
                "runs that hold those fixed"
            )
    points = [[samples for _, samples in by_value[value]] for value in values]
    keys = largest_keys([samples for runs_at in points for samples in runs_at], top)
    walls = [[loaded.profile.facts.step_times_us for loaded in loaded_at[value]] for value in values]
    table, whole_step_basis = trend_table(points, keys, walls)
    return TrendDocument(
        order_by=order_by,
        group_by=group_by,
        points=[TrendPoint(value=value, runs=[run for run, _ in by_value[value]]) for value in values],
        keys=[*keys, confidence.WHOLE_STEP],
        rows=as_records(table[TREND_COLUMNS]),
        whole_step_basis=whole_step_basis,
        warnings=warnings,
    )
