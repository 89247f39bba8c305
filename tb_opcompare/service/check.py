"""The check document: did anything get significantly slower between two groups of runs?

Builds on ``analysis.confidence``; this module only picks the runs, learns run-to-run
noise from the logdir's repeated runs and shapes the answer."""

from __future__ import annotations

import collections
import dataclasses
import math

import msgspec
import numpy as np
import pandas as pd
import re2

from tb_opcompare.analysis import confidence
from tb_opcompare.analysis.breakdown import PartChange, grew_most, part_changes, side_split
from tb_opcompare.analysis.compare import implementation_keys
from tb_opcompare.analysis.headline import STEP_WALL_TIME
from tb_opcompare.analysis.numerics import above, at_most
from tb_opcompare.errors import ProfileError, UsageError
from tb_opcompare.schema.contract import (
    SIGNIFICANT_VERDICTS,
    CheckDocument,
    CheckRow,
    CheckStepPart,
)
from tb_opcompare.schema.dimensions import (
    DEFAULT_MIN_SHARE,
    DEFAULT_THRESHOLD,
    GROUP_BY,
    POWER_MIN_SHARE,
    check_refusal,
    evidence_bar,
)
from tb_opcompare.service.records import as_records
from tb_opcompare.store.catalog import Catalog, LoadedRun
from tb_opcompare.store.run_groups import both_sides
from tb_opcompare.text import format_part_change, format_percent, format_time

_ROW_FIELDS = list(CheckRow.__struct_fields__)


def check_document(
    catalog: Catalog,
    baseline: list[str],
    target: list[str],
    threshold: float = DEFAULT_THRESHOLD,
    ops: str | None = None,
    min_share: float = DEFAULT_MIN_SHARE,
    group_by: str = "name",
    allow_one_run: bool = False,
    resamples: int = confidence.RESAMPLES,
    baseline_catalog: Catalog | None = None,
) -> CheckDocument:
    """``target`` runs checked against ``baseline`` runs (``baseline_catalog``: a stored baseline's
    logdir), two runs a side or more unless ``allow_one_run``: one run cannot tell a regression
    from a hiccup (checks of identical configurations failed 16% of the time here with one run a
    side, 4.2% with two, none with three)."""
    _check_arguments(baseline, target, group_by, allow_one_run, one_logdir=baseline_catalog is None)
    pattern = _pattern(ops)  # a bad pattern fails before any run is read
    catalogs = {"baseline": baseline_catalog or catalog, "target": catalog}
    sides = _read_sides(catalogs, {"baseline": baseline, "target": target})
    samples = _matched_samples(sides, group_by)
    warnings = _run_warnings(sides)
    noise = _noise(catalogs, sides, group_by, warnings)
    result = confidence.compare_with_confidence(
        samples["baseline"], samples["target"], threshold=threshold, resamples=resamples, **_noises(noise)
    )
    ops_rows, whole = _judged(result.table, min_share, pattern, threshold)
    counts = ops_rows.loc[ops_rows["gated"], "verdict"].value_counts()
    regressions = int(counts.get(confidence.SLOWER, 0)) + int(whole["verdict"].iloc[0] == confidence.SLOWER)
    warnings.extend(_common_change_warnings(result.common_change, threshold))
    outliers = _outliers(samples, sides, result, warnings)
    detectable, detectable_key = _detectable(ops_rows)
    unseen = None if _enough(detectable, threshold) else (detectable, detectable_key)
    headline = _headline(regressions, counts, whole.iloc[0], threshold, result.whole_step_basis, unseen)
    parts = _step_parts(sides, outliers)
    return CheckDocument(
        passed=regressions == 0,
        common_change=result.common_change,
        headline=headline + _where_it_went(grew_most(parts), whole["verdict"].iloc[0]),
        baseline=baseline,
        target=target,
        baseline_logdir=baseline_catalog.logdir if baseline_catalog else None,
        threshold=threshold,
        min_share=min_share,
        ops=ops,
        group_by=group_by,
        noise=_noise_text(sides, noise, result, warnings),
        **_tallies(counts, ops_rows),
        whole_step=_rows(whole)[0],
        whole_step_basis=result.whole_step_basis,
        enough_evidence=unseen is None,
        detectable_change=detectable,
        detectable_key=detectable_key,
        outlier_runs=outliers,
        rows=_rows(ops_rows),
        step_parts=[CheckStepPart(**dataclasses.asdict(p), change_us=p.change_us, grew=p.grew) for p in parts],
        grew_most=getattr(grew_most(parts), "category", None),
        warnings=warnings,
        resamples=resamples,
    )


def _noises(noise: dict) -> dict:
    return {"baseline_noise": noise["baseline"], "target_noise": noise["target"]}


def _read_sides(catalogs: dict[str, Catalog], runs: dict[str, list[str]]) -> dict[str, list[LoadedRun]]:
    """Each side's runs read from its catalog (the same one, or a stored baseline's)."""
    for name, names in runs.items():
        catalogs[name].read_ahead_runs(names)
    return {name: [catalogs[name].load(run) for run in names] for name, names in runs.items()}


def _check_arguments(
    baseline: list[str], target: list[str], group_by: str, allow_one_run: bool, one_logdir: bool = True
) -> None:
    """Raises UsageError for a check that cannot be made or cannot be trusted, before any
    run is read: an unknown grouping, an empty side, a side of one run (unless allowed),
    or a run on both sides."""
    if group_by not in GROUP_BY and (why := check_refusal(baseline, target, group_by)):
        raise UsageError(why, "group_by")
    empty = [name for name, runs in (("baseline", baseline), ("target", target)) if not runs]
    if empty:
        raise UsageError(f"no {' and no '.join(empty)} runs given")
    refusal = check_refusal(baseline, target, group_by, allow_one_run, one_logdir)
    if refusal:
        raise UsageError(refusal)


def _run_warnings(sides: dict[str, list[LoadedRun]]) -> list[str]:
    """What reading each compared run found doubtful, named by run: a verdict is only as
    good as the runs behind it."""
    return [
        f"{run.source.run}: {warning}"
        for runs in sides.values()
        for run in runs
        for warning in run.profile.facts.warnings
    ]


def _judged(table: pd.DataFrame, min_share: float, pattern, threshold: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The verdicts, added to ``table`` (``confidence.compare_with_confidence``'s): the ops
    in scope (``min_share`` of either side's time, matching ``pattern``) are tested as one
    family with the false discovery rate held (``confidence.decide``), the whole step on
    its own; and each row's smallest detectable slowdown at its confidence. Returns the op
    rows in the order the answer lists them, and the whole step's row."""
    is_op = (table["key"] != confidence.WHOLE_STEP).to_numpy()
    in_scope = is_op & (np.maximum(table["baseline_share"], table["target_share"]) >= min_share).to_numpy()
    if pattern is not None:
        in_scope &= np.fromiter((bool(pattern.search(key)) for key in table["key"]), dtype=bool, count=len(table))
    table["verdict"], level = confidence.decide(table, family=in_scope, alone=~is_op)
    table["speedup_low"], table["speedup_high"], table["interval_level"] = confidence.interval_at(table, level)
    table["detectable_change"] = confidence.detectable_slowdown(table, level, threshold)
    # The whole step is gated even under --ops: ops are judged net of what moved every op
    # together, so a change that slowed every op shows only there.
    table["gated"] = in_scope | ~is_op
    table["significant"] = table["gated"] & table["verdict"].isin(SIGNIFICANT_VERDICTS)
    return _ordered(table[is_op]), table[~is_op]


def _detectable(ops_rows: pd.DataFrame) -> tuple[float | None, str | None]:
    """The smallest slowdown the check would catch (``DETECTION_POWER``) in every gated op
    holding ``POWER_MIN_SHARE`` of op time or more (else in every gated op): the largest of
    their rows', with its op; (None, None) where none was tested on run-to-run noise."""
    share = np.maximum(ops_rows["baseline_share"], ops_rows["target_share"]).to_numpy()
    known = ops_rows["gated"].to_numpy() & np.isfinite(ops_rows["detectable_change"].to_numpy(dtype=np.float64))
    rows = (
        ops_rows[known & (share >= POWER_MIN_SHARE)] if (known & (share >= POWER_MIN_SHARE)).any() else ops_rows[known]
    )
    if not len(rows):
        return None, None
    worst = rows.iloc[int(np.argmax(rows["detectable_change"].to_numpy(dtype=np.float64)))]
    return float(worst["detectable_change"]), str(worst["key"])


def _enough(detectable: float | None, threshold: float) -> bool:
    """Whether the runs could show a regression of ``ENOUGH_EVIDENCE`` x the threshold, and
    of ``ENOUGH_EVIDENCE`` x ``POWER_MIN_THRESHOLD`` at least (``dimensions.evidence_bar``:
    a 0% gate, any significant slowdown, would else never have enough, as no test sees a
    change of 0%); not where no op was tested on run-to-run noise (one run a side, no
    repeats to learn it from): nothing says the check could see anything."""
    return detectable is not None and bool(at_most(detectable, evidence_bar(threshold)))


def _outliers(
    samples: dict[str, list[confidence.RunSamples]],
    sides: dict[str, list[LoadedRun]],
    result: confidence.Confidence,
    warnings: list[str],
) -> list[str]:
    """The runs that are outliers for the whole step (``confidence.outlier_runs``), named,
    each with a warning that says how far off it was."""
    runs = [run for group in sides.values() for run in group]
    steps = [sample.steady_step_us for group in samples.values() for sample in group]
    baseline = len(sides["baseline"])
    names = []
    for position in result.outlier_runs:
        side = range(baseline) if position < baseline else range(baseline, len(runs))
        others = [step for k in side if k != position and (step := steps[k])]
        name = runs[position].source.run
        names.append(name)
        measured = (
            f"its step took {format_time(steps[position])} against {format_time(min(others))}"
            f"–{format_time(max(others))} for the other runs of its side"
            if steps[position] and others
            else "its op time per step lies far from the other runs of its side"
        )
        warnings.append(
            f"{name}: an outlier for the whole step ({measured}): a hiccup of the machine? It is left out of "
            "the whole step's test; its ops stay in, each on its typical time"
        )
    return names


def _step_parts(sides: dict[str, list[LoadedRun]], outliers: list[str]) -> list[PartChange]:
    """Each part of the step and its change, from each run's own median steady step (the
    outliers for the whole step left out where their side keeps a run); none where a
    side's runs split no step."""
    splits = {}
    for name, runs in sides.items():
        kept = [run for run in runs if run.source.run not in outliers] or runs
        found = [
            side_split([(run.profile.facts.step_times_us, run.profile.breakdown_table)])
            for run in kept
            if run.profile.breakdown_table is not None
        ]
        splits[name] = [split for split in found if split is not None]
        if not splits[name]:
            return []
    return part_changes(splits["baseline"], splits["target"])


def _tallies(counts: pd.Series, ops_rows: pd.DataFrame) -> dict[str, int]:
    """The gated ops by verdict, and the ops not tested."""
    return {
        "slower": int(counts.get(confidence.SLOWER, 0)),
        "faster": int(counts.get(confidence.FASTER, 0)),
        "within_noise": int(counts.get(confidence.WITHIN_NOISE, 0)),
        "not_tested": int((ops_rows["verdict"] == confidence.UNTESTED).sum()),
        "only_baseline": int(counts.get(confidence.ONLY_BASELINE, 0)),
        "only_target": int(counts.get(confidence.ONLY_TARGET, 0)),
    }


def _where_it_went(grown: PartChange | None, step_verdict: str) -> str:
    """``, most of it in waiting for input (+44.2 ms, ...)``: where a slower step's time went."""
    if grown is None or step_verdict != confidence.SLOWER:
        return ""
    return ", most of it in " + format_part_change(grown.label, grown.change_us, grown.low_us, grown.high_us)


def _common_change_warnings(common_change: float | None, threshold: float) -> list[str]:
    """A warning where every op moved together beyond the threshold: the op verdicts take
    that change out, so without this a slower machine would pass op by op unremarked."""
    if common_change is None or not above(abs(math.log(common_change)), math.log1p(threshold)):
        return []
    return [
        f"every op ran {_change(1 / common_change)} together in the target (a change of the "
        "machine, a setting or a library that touches everything): the op verdicts are net of it, "
        "the whole step carries it"
    ]


def significant_keys(catalog: Catalog, baseline: str, target: str, group_by: str = "name") -> tuple[str, ...]:
    """The op keys that changed significantly between two sides as the compare routes
    name them (``both_sides``), each pooled with its repeats, as the tab's Confidence card
    checks them: what "significant changes only" keeps. Raises as ``check_document``."""
    document = check_document(catalog, *both_sides(catalog, baseline, target, repeats=True), group_by=group_by)
    return tuple(row.key for row in document.rows if row.significant)


def _pattern(ops: str | None):
    if not ops:
        return None
    try:
        return re2.compile(ops)
    except re2.error as error:
        raise UsageError(f"--ops {ops!r} is not a valid regular expression: {error}", "ops") from None


def _matched_samples(sides: dict[str, list[LoadedRun]], group_by: str) -> dict[str, list[confidence.RunSamples]]:
    """Each side's runs' samples, keyed as ``compare`` keys the ops: by name, one framework
    op's backend implementations found on one side each have one key
    (``compare.implementation_keys``), so check and compare meet the same ops."""
    samples = {name: [_samples(run, group_by) for run in runs] for name, runs in sides.items()}
    if group_by != "name":
        return samples
    types = {
        name: {
            op: kind
            for run in runs
            for op, kind in zip(run.profile.op_table["op_name"].tolist(), run.profile.op_table["op_type"].tolist())
        }
        for name, runs in sides.items()
    }
    renames = implementation_keys(types["baseline"], types["target"])
    return {name: [confidence.with_keys(run, renames) for run in runs] for name, runs in samples.items()}


def _samples(run: LoadedRun, group_by: str) -> confidence.RunSamples:
    return confidence.profile_samples(run.profile, group_by)


def _noise(
    catalogs: dict[str, Catalog], sides: dict[str, list[LoadedRun]], group_by: str, warnings: list[str]
) -> dict[str, confidence.RunNoise | None]:
    """Run-to-run noise learned from the logdirs' repeated runs (``repeat`` set) of the
    compared models on each side's device, the compared runs left out (their own
    variance counts already). Only those runs are read."""
    models = {run.model for runs in sides.values() for run in runs}
    devices = {runs[0].profile.facts.device for runs in sides.values()}
    groups: dict[tuple, list[confidence.RunSamples]] = collections.defaultdict(list)
    for catalog in {id(catalog): catalog for catalog in catalogs.values()}.values():
        compared = {run.source.run for name, runs in sides.items() if catalogs[name] is catalog for run in runs}
        claimed = ((source, catalog.claims(source)) for source in catalog.sources() if source.run not in compared)
        repeats = [
            source
            for source, claims in claimed
            if claims.repeat is not None and claims.model in models and claims.device in (*devices, None)
        ]
        catalog.read_ahead(repeats)
        for source in repeats:
            try:
                loaded = catalog.load(source.run)
            except ProfileError as error:
                warnings.append(f"repeat {source.run} not used for run-to-run noise: {error.path}: {error.reason}")
                continue
            facts = loaded.profile.facts
            groups[loaded.model, facts.device, facts.batch_size, loaded.label].append(_samples(loaded, group_by))
    return {
        name: confidence.run_noise([group for key, group in groups.items() if key[1] == runs[0].profile.facts.device])
        for name, runs in sides.items()
    }


def _noise_text(
    sides: dict[str, list[LoadedRun]], noise: dict, result: confidence.Confidence, warnings: list[str]
) -> str:
    runs = ", ".join(f"{len(group)} {name} run{'s' if len(group) > 1 else ''}" for name, group in sides.items())
    if result.basis == confidence.STEPS:
        warnings.append(
            "one run a side and no repeated runs of this model on its device in the logdir: the "
            "intervals hold step-to-step noise only, and runs of one configuration often differ by more "
            "(10-30% on a shared machine), so verdicts may be false alarms; record repeats "
            "(`tb-opcompare record --repeats 3`) and compare them"
        )
        return f"bootstrap over the profiled steps ({runs}); run-to-run noise unknown"
    learned = [
        f"{name}: {value.runs} other repeated {sides[name][0].profile.facts.device} runs, typical "
        f"{value.typical:.0%} per op"
        for name, value in noise.items()
        if value is not None
    ]
    speed = (
        "each run's speed factor taken out of its ops"
        if result.adjusted
        else f"no run speed factor taken out (fewer than {confidence.MIN_SHARED_OPS} ops ran in every run)"
    )
    whole = (
        "each run's median steady step wall time"
        if result.whole_step_basis == STEP_WALL_TIME
        else "each run's op time per step (not every run has step markers)"
    )
    return (
        f"run-to-run noise from the runs compared ({runs})"
        + (f" and the logdir's repeats ({'; '.join(learned)})" if learned else "")
        + f"; Welch's t on the log of each run's typical time (its median per execution; for an op run twice a "
        f"step, the lower quartile of its steps' time per execution; for the whole step, {whole}), each op's "
        f"variance drawn toward the variance the gated ops share; {speed}"
    )


_VERDICT_ORDER = {
    confidence.SLOWER: 0,
    confidence.ONLY_TARGET: 1,
    confidence.FASTER: 2,
    confidence.ONLY_BASELINE: 3,
    confidence.WITHIN_NOISE: 4,
    confidence.UNTESTED: 5,
}


def _ordered(rows: pd.DataFrame) -> pd.DataFrame:
    share = np.maximum(rows["baseline_share"], rows["target_share"])
    order = np.lexsort((-share.to_numpy(), ~rows["gated"].to_numpy(), rows["verdict"].map(_VERDICT_ORDER).to_numpy()))
    return rows.iloc[order].reset_index(drop=True)


def _rows(table: pd.DataFrame) -> list[CheckRow]:
    """Column-wise to records, then to typed rows in one call: a million ops in seconds."""
    return msgspec.convert(as_records(table[_ROW_FIELDS]), list[CheckRow])


def _headline(
    regressions: int, counts: pd.Series, whole: pd.Series, threshold: float, basis: str, unseen: tuple | None
) -> str:
    """The verdict in a sentence: FAIL, PASS, or where nothing was flagged but the runs could
    not have shown a regression of ``dimensions.evidence_bar`` (``unseen``: the
    smallest detectable change and its op), NOT ENOUGH EVIDENCE."""
    # on wall time, the headline every view reads (the steady steps pooled); else the value
    # the verdict is about, the runs' typical op time per step (a stalled step moves the plain mean)
    on_wall = basis == STEP_WALL_TIME
    shown = whole["speedup"] if on_wall or not np.isfinite(whole["adjusted_speedup"]) else whole["adjusted_speedup"]
    step = f"whole step ({basis}) {whole['verdict']}" + (f" ({_change(shown)})" if np.isfinite(shown) else "")
    tally = (
        f"{int(counts.get(confidence.SLOWER, 0))} ops significantly slower, "
        f"{int(counts.get(confidence.FASTER, 0))} faster, {int(counts.get(confidence.WITHIN_NOISE, 0))} within "
        f"noise"
    )
    new, gone = int(counts.get(confidence.ONLY_TARGET, 0)), int(counts.get(confidence.ONLY_BASELINE, 0))
    if new or gone:
        tally += f", {new} only in the target, {gone} only in the baseline"
    verdict = "FAIL: a significant regression" if regressions else "PASS: no significant regression"
    if unseen is not None and not regressions:
        verdict = "NOT ENOUGH EVIDENCE: no significant regression"
        why = (
            f"the smallest detectable change here is {unseen[0]:.0%} ({unseen[1]})"
            if unseen[0] is not None
            else "no op was tested on run-to-run noise, so what it could detect is unknown"
        )
        return f"{verdict} beyond {format_percent(threshold)}, but {why}: {tally}; {step}"
    return f"{verdict} beyond {format_percent(threshold)}: {tally}; {step}"


def _change(speedup: float) -> str:
    """``1.25`` -> ``20% faster`` (the target takes 0.8 of the time); ``0.8`` -> ``25% slower``."""
    if speedup >= 1:
        return f"{1 - 1 / speedup:.0%} faster"
    return f"{1 / speedup - 1:.0%} slower"
