"""The compare document of two runs: one code path for the tab's JSON, its CSV download
and the CLI.

``compare_document`` -> ``{"summary": {...}, "columns": [...], "rows": [...], "total_rows": N}``
(``rows``: the ``RowView`` of the comparison; only those rows become JSON)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np

from tb_opcompare.analysis.breakdown import SideSplit, breakdown_rows, pooled_split, side_split, with_ranks
from tb_opcompare.analysis.headline import Headline, headline_figures, like_for_like, pair_headline, step_marker_notes
from tb_opcompare.analysis.numerics import finite_or_none
from tb_opcompare.analysis.row_view import RowView, top_rows, view_positions
from tb_opcompare.analysis.step_time import StepLatency, step_latency
from tb_opcompare.errors import ProfileError, UsageError
from tb_opcompare.schema.contract import (
    COMPARE_COLUMNS,
    BreakdownPart,
    CompareDocument,
    CompareSummary,
    RunBreakdown,
    RunRecord,
    StepBreakdown,
)
from tb_opcompare.schema.dimensions import check_refusal
from tb_opcompare.schema.events import HOST
from tb_opcompare.schema.optable import OpProfile
from tb_opcompare.schema.requests import COMPARE_PAGE_ROWS
from tb_opcompare.schema.table import Table
from tb_opcompare.service.logdir import with_identified_models
from tb_opcompare.service.records import as_records
from tb_opcompare.service.runs import mixed_dimensions, run_record
from tb_opcompare.store.catalog import Catalog, LoadedRun
from tb_opcompare.store.comparisons import Comparison, pooled_profile
from tb_opcompare.store.comparisons import comparison as kept_comparison


def compare_document(
    catalog: Catalog,
    baseline: str | list[str],
    target: str | list[str],
    group_by: str = "name",
    baseline_session: str | None = None,
    target_session: str | None = None,
    normalize: bool = True,
    view: RowView | None = None,
) -> CompareDocument:
    """Raises UnknownRunError for unknown runs/sessions, ProfileError for unreadable ones.
    A side given as several runs is their run group: their executions pooled
    (``analysis.pooling``); a session applies to a side of one run.
    ``view`` picks and orders the rows (all of them, largest total first, by default);
    only the rows it keeps are turned into JSON values, so a top-N request on a million
    ops costs the filter and the sort, not a million records."""
    return compared_rows(
        catalog,
        baseline,
        target,
        group_by=group_by,
        baseline_session=baseline_session,
        target_session=target_session,
        normalize=normalize,
        view=view,
    ).document


@dataclasses.dataclass(frozen=True)
class ComparedRows:
    """A compare document and the rows its view keeps as a table: ``table.take(positions)``
    are the document's rows (its ``rows`` hold their records only where asked for), what a
    CSV streams without a record made per row (``csv_export.table_csv_chunks``)."""

    document: CompareDocument
    table: Table  # every row of the comparison (``COMPARE_COLUMNS``)
    positions: np.ndarray  # the rows the view keeps, in its order, its top N
    comparison: Comparison  # where the rows' records are made, and kept for a small table

    def record_chunks(self, rows: int = COMPARE_PAGE_ROWS) -> Iterator[list[dict]]:
        """The records of the rows the view keeps, ``rows`` at a time: what an answer
        streams (a million rows' records made at once held 2.5 GB of TensorBoard's memory).
        An answer of one chunk (the tab's page) is kept as the comparison keeps a page; the
        chunks of a longer one are not, so they do not push the tab's page out."""
        whole = len(self.positions) <= rows
        for start in range(0, len(self.positions), rows):
            yield self.comparison.records(self.positions[start : start + rows], as_records, keep=whole)


def compared_rows(
    catalog: Catalog,
    baseline: str | list[str],
    target: str | list[str],
    *,
    group_by: str = "name",
    baseline_session: str | None = None,
    target_session: str | None = None,
    normalize: bool = True,
    view: RowView | None = None,
    records: bool = True,
) -> ComparedRows:
    """``compare_document``'s document and its rows as a table; without ``records`` the
    document's ``rows`` are left empty (the CLI writing a CSV of a million rows)."""
    (base, base_steps, base_split), (tgt, target_steps, target_split), baseline_runs, target_runs, group_notes = _sides(
        catalog, baseline, target, baseline_session, target_session
    )
    base, tgt = _one_model_where_the_data_says(base, tgt)
    comparison = kept_comparison(base.profile, tgt.profile, group_by, normalize)
    view = view or RowView()
    kept = view_positions(comparison.rows, view)
    shown = top_rows(kept, view)
    rows = comparison.records(shown, as_records) if records else []
    base_record, target_record = _side_record(base, base_steps), _side_record(tgt, target_steps)
    first, _, _ = pair_headline(base.profile, tgt.profile, base_steps, target_steps)
    figures, notes = like_for_like(comparison.summary, base_record, target_record, group_by, first, comparison.rows)
    figures.update(headline_figures(first, base_steps, target_steps))
    notes = [*group_notes, *notes, *step_marker_notes(first, base_steps, target_steps)]
    if group_by == "module":
        from tb_opcompare.service.modules import module_source  # pandas: modules are merged with it

        notes.extend(module_source(base, tgt)[1])
    summary = CompareSummary(
        **{key: finite_or_none(value) for key, value in {**comparison.summary, **figures}.items()},
        group_by=group_by,
        normalized_types=normalize,
        baseline=base_record,
        target=target_record,
        baseline_runs=baseline_runs,
        target_runs=target_runs,
        notes=notes,
        check_refusal=_check_refusal(catalog, baseline, target, group_by),
        **_breakdown(base_split, target_split, first),
    )
    # rows stay records (typed by CompareRow): a Struct per row would cost more than the view's filter and sort
    document = CompareDocument(
        summary=summary,
        columns=list(COMPARE_COLUMNS),
        rows=rows,
        total_rows=len(comparison.rows),
        view_rows=len(kept),
    )
    return ComparedRows(document, comparison.rows, shown, comparison)


def _breakdown(base: SideSplit | None, target: SideSplit | None, first: Headline) -> dict:
    """The summary's ``breakdown`` (each side's headline step split, as a waterfall) and its
    note: why there is none, or that the bars are per step where the headline is per sample."""
    if base is None or target is None:
        missing = [side for side, split in (("baseline", base), ("target", target)) if split is None]
        whose = "neither side's profile splits" if len(missing) == 2 else f"the {missing[0]}'s profile does not split"
        return {
            "breakdown": None,
            "breakdown_note": f"No step breakdown: {whose} its steps (PyTorch traces with ProfilerStep#N marks, TF "
            "xplanes and TF1 timelines with steps, and ONNX Runtime's runs do; op totals such as summary.json, and "
            "profiles without step markers, do not).",
        }
    parts = [
        BreakdownPart(
            side=row.side,
            category=row.category,
            label=row.label,
            baseline_us=row.baseline_us,
            target_us=row.target_us,
            change_us=row.change_us,
        )
        for row in breakdown_rows(base, target)
    ]
    caveats = [f"{side}: {text}." for side, text in (("Baseline", base.note), ("Target", target.note)) if text]
    if base.note and base.note == target.note:
        caveats = [f"Both sides: {base.note}."]
    if first.per_sample:
        caveats.append("The bars are per step; the headline is per sample, as the batch sizes differ.")
    note = " ".join(caveats) or None
    return {
        "breakdown": StepBreakdown(
            baseline_wall_us=base.wall_us,
            target_wall_us=target.wall_us,
            baseline_steps=base.steps,
            target_steps=target.steps,
            parts=parts,
            runs=[
                RunBreakdown(
                    side=side, run=name, wall_us=split.wall_us, steps=split.steps, host=split.parts.get(HOST, {})
                )
                for side, pooled in (("baseline", base), ("target", target))
                for name, split in pooled.runs
            ],
        ),
        "breakdown_note": note,
    }


def _one_model_where_the_data_says(base: LoadedRun, tgt: LoadedRun) -> tuple[LoadedRun, LoadedRun]:
    """Two runs whose names give two models, with the model their data finds for them
    (``analysis.model_identity``): a CPU run and its GPU run in other folders are one model
    by their layer scopes, as the listing shows them. Found from the two runs alone: the
    listing reads every run of the logdir, which a comparison of two must not wait for."""
    if base.model == tgt.model or base.source.run == tgt.source.run:
        return base, tgt
    identified = with_identified_models([base, tgt])
    return identified[0], identified[1]


def _check_refusal(catalog: Catalog, baseline: str | list[str], target: str | list[str], group_by: str) -> str | None:
    """Whether the check of these sides with their repeats (what the tab asks) would be
    refused: the same rule and words as the check's."""
    from tb_opcompare.store.run_groups import both_sides

    sides = both_sides(catalog, baseline, target, repeats=True)
    return check_refusal(*sides, group_by)


def _side_record(side: LoadedRun, steps: StepLatency) -> RunRecord:
    """A side's run record; a group's is its first run's, with the group's steady step
    wall time, so the record shows the figure the headline is made of."""
    return run_record(side, steps)


Side = tuple[LoadedRun, StepLatency, SideSplit | None]


def _sides(
    catalog: Catalog,
    baseline: str | list[str],
    target: str | list[str],
    baseline_session: str | None,
    target_session: str | None,
) -> tuple[Side, Side, list[str], list[str], list[str]]:
    """Both sides, each a run or its run group as one run with its steady step wall time
    (a group's steps pooled), the runs in each, and notes on the groups. Raises
    UsageError where a side is empty, the sides share runs, or a session is given
    for a group."""
    sides, notes = [], []
    names = {}
    for label, runs, session in (("baseline", baseline, baseline_session), ("target", target, target_session)):
        names[label] = [runs] if isinstance(runs, str) else list(dict.fromkeys(runs))
        if not names[label]:
            raise UsageError(f"no {label} runs given")
        if session and len(names[label]) > 1:
            raise UsageError(f"{label}_session: a session picks one run's capture; a run group reads each run's newest")
    shared = [run for run in names["baseline"] if run in names["target"]]
    if shared and (len(names["baseline"]) > 1 or len(names["target"]) > 1):
        raise UsageError(
            f"the baseline and target groups share {', '.join(shared)}: a group compared with "
            "itself shows no change (pool repeats of two different configurations)"
        )
    if not baseline_session and not target_session:  # every run's newest session: read them together
        catalog.read_ahead_runs([run for label in names for run in names[label]])
    latencies, splits = [], []
    for label, session in (("baseline", baseline_session), ("target", target_session)):
        loaded, kept, side_notes, steps, split = _side(catalog, names[label], session, label)
        sides.append(loaded)
        latencies.append(steps)
        splits.append(split)
        names[label] = kept
        notes += side_notes
    pooled = len(names["baseline"]) > 1 or len(names["target"]) > 1
    if pooled and not all(side.profile.facts.steps for side in sides):
        sides = [_runs_as_steps(side, len(names[label])) for side, label in zip(sides, ("baseline", "target"))]
        notes.append(
            "These runs have no step markers, so each run counts as one step: a group's times are per run, "
            "comparable with a single run's."
        )
    return (
        (sides[0], latencies[0], splits[0]),
        (sides[1], latencies[1], splits[1]),
        names["baseline"],
        names["target"],
        notes,
    )


def _side(
    catalog: Catalog, names: list[str], session: str | None, label: str
) -> tuple[LoadedRun, list[str], list[str], StepLatency, SideSplit | None]:
    """One run, or a run group as one run (the first readable run's record with the group's
    executions), and its steady step wall time: runs of a group that cannot be read are
    left out and named, unless none can."""
    if len(names) == 1:
        one = catalog.load(names[0], session)
        profile = one.profile
        split = side_split([(profile.facts.step_times_us, profile.breakdown_table)], profile.facts.step_breakdown_note)
        split = with_ranks(split, profile.facts.workers)
        return one, names, [], step_latency([profile.facts.step_times_us]), split
    loaded: list[LoadedRun[OpProfile]] = []
    notes: list[str] = []
    first_error: ProfileError | None = None
    for name in names:
        try:
            loaded.append(catalog.load(name))
        except ProfileError as error:
            first_error = first_error or error
            notes.append(f"{name} left out of the {label} group: {error.path}: {error.reason}")
    if not loaded and first_error is not None:  # every run unreadable
        raise first_error
    kept = [run.source.run for run in loaded]
    what = mixed_dimensions(loaded)
    if what:
        notes.append(
            f"The {label} group pools runs that differ in more than their repeat ({what}): its means mix "
            "configurations. Group repeats of one configuration."
        )
    steps = step_latency([run.profile.facts.step_times_us for run in loaded])
    split = pooled_split(
        [(run.source.run, run.profile.facts.step_times_us, run.profile.breakdown_table) for run in loaded],
        loaded[0].profile.facts.step_breakdown_note,
    )
    pooled = dataclasses.replace(loaded[0], profile=pooled_profile([run.profile for run in loaded]))
    return pooled, kept, notes, steps, split


def _runs_as_steps(side: LoadedRun, runs: int) -> LoadedRun:
    """The side with a step per run: where markers are missing, the run is the unit."""
    facts = dataclasses.replace(
        side.profile.facts,
        steps=runs,
        step_time_us=None,
        step_times_us=[],
        steps_source=f"no step markers: one step per run ({runs} run{'s' * (runs > 1)})",
    )
    return dataclasses.replace(side, profile=dataclasses.replace(side.profile, facts=facts))
