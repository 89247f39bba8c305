"""The trend document: a model's top ops and whole step across many runs, in a chosen
order (recording time, label, run name, repeat, any sidecar field such as a version, or a
run dimension: device, batch size, precision, compiler). Ordered by a dimension, it is a
sweep over that dimension: the runs chosen hold the others, and a point that pools runs
differing in another dimension is named in a warning."""

from __future__ import annotations

import collections

from tb_opcompare.analysis import confidence
from tb_opcompare.analysis.breakdown import side_split, step_part_rows
from tb_opcompare.analysis.trend import TREND_COLUMNS, largest_keys, trend_table
from tb_opcompare.errors import ProfileError, UsageError
from tb_opcompare.schema.contract import TREND_DIMENSIONS, TREND_ORDERS, TrendDocument, TrendPoint
from tb_opcompare.service.records import as_records
from tb_opcompare.service.runs import MISSING_DIMENSION, mixed_dimensions, run_dimensions
from tb_opcompare.store.catalog import Catalog, LoadedRun
from tb_opcompare.store.run_groups import repeat_groups
from tb_opcompare.text import natural_key

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
    read: list[tuple[LoadedRun, str]] = []
    for run in runs:
        try:
            loaded = catalog.load(run)
        except ProfileError as error:
            warnings.append(f"{run}: not read: {error.path}: {error.reason}")
            continue
        read.append((loaded, _order_value(catalog, loaded, order_by)))
    point_values, order_note = _point_values(catalog, read, order_by)
    for (loaded, _), value in zip(read, point_values):
        by_value[value].append((loaded.source.run, confidence.profile_samples(loaded.profile, group_by)))
        loaded_at[value].append(loaded)
    if not by_value:
        raise UsageError("none of the runs could be read" if runs else "no runs given")
    values = sorted(by_value, key=lambda value: [natural_key(part) for part in value.split(_TIE_MARK)])
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
    parts = step_part_rows(
        [
            side_split([(run.profile.facts.step_times_us, run.profile.breakdown_table) for run in loaded_at[value]])
            for value in values
        ]
    )
    return TrendDocument(
        order_by=order_by,
        group_by=group_by,
        points=[TrendPoint(value=value, runs=[run for run, _ in by_value[value]]) for value in values],
        keys=[*keys, confidence.WHOLE_STEP, *dict.fromkeys(row["key"] for row in parts)],
        rows=as_records(table[TREND_COLUMNS]) + parts,
        whole_step_basis=whole_step_basis,
        warnings=warnings,
        order_note=order_note,
    )


# A point that splits a shared recording time is labelled "TIME · RUN": the mark sorts the
# run names within that time, after the time itself.
_TIE_MARK = " · "


def _point_values(catalog: Catalog, read: list[tuple[LoadedRun, str]], order_by: str) -> tuple[list[str], str]:
    """Each run's point, and a note on how ties were broken. By recording time, runs share
    a point only when they are repeats of one configuration: two runs whose files carry one
    time (a checkout or a copy sets every file's time alike; TF1 timelines all share one
    file name and no time) are different recordings, each a point of its own, ordered by
    run name within that time. Other orders pool by design (a label, a version)."""
    values = [value for _, value in read]
    if order_by != "recorded":
        return values, ""
    groups = repeat_groups({loaded.source.run: catalog.claims(loaded.source) for loaded, _ in read})
    runs_at: dict[str, list[str]] = collections.defaultdict(list)
    for loaded, value in read:
        runs_at[value].append(loaded.source.run)
    tied = {value for value, runs in runs_at.items() if len(runs) > 1 and not _one_repeat_group(runs, groups)}
    if not tied:
        return values, ""
    # within a tie, repeats of one configuration still share a point, named by its first run there
    named = {
        run: min((other for other in runs_at[value] if other in groups.get(run, [run])), key=natural_key)
        for value in tied
        for run in runs_at[value]
    }
    split = [f"{value}{_TIE_MARK}{named[loaded.source.run]}" if value in tied else value for loaded, value in read]
    shared = sorted(run for value in tied for run in runs_at[value])
    return split, (
        f"{', '.join(shared)} share a recording time (or have none): each is a point of its own, "
        "ordered by run name within that time"
    )


def _one_repeat_group(runs: list[str], groups: dict[str, list[str]]) -> bool:
    return all(run in groups.get(runs[0], []) for run in runs)
