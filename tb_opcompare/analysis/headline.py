"""The headline: the speedup a user reads first, and the figures and notes that say what
it and the comparison's other whole-run figures mean. Every view that shows a pair's
headline (Compare, Modules, Layers) takes it from here, so a pair reads one number in
every view.

The first number of a comparison is the one a user would measure with a stopwatch: the
ratio of the two sides' median steady step wall times (``analysis.step_time``: warm-up
dropped, a group's steps pooled), per sample where the batch sizes differ (a bigger batch
does more work in a step). Where a side has no step markers, op time per step stands in,
and where the steps are unknown too, the whole profiles' op time; the text says which.
Plain data in, plain data out: no I/O.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, Final, Literal, TypeGuard

from tb_opcompare.analysis.compare import MATCHED, op_time_us
from tb_opcompare.analysis.model_identity import joined_by_layer_scopes
from tb_opcompare.analysis.numerics import above, below, finite_or_none
from tb_opcompare.analysis.pairing import SAME_MODEL_JACCARD
from tb_opcompare.analysis.step_time import (
    StepLatency,
    batch_sizes_differ,
    evidenced_batch_size,
    step_latency,
    unverified_batch_note,
)
from tb_opcompare.schema.contract import HeadlineFigure, RunRecord
from tb_opcompare.schema.dimensions import model_of
from tb_opcompare.schema.optable import OpProfile
from tb_opcompare.schema.table import Table
from tb_opcompare.text import format_speedup, format_time

STEP_WALL_TIME: Final = "step wall time"
OP_TIME_PER_STEP: Final = "op time per step"
OP_TIME: Final = "op time"
Basis = Literal["step wall time", "op time per step", "op time"]  # what a headline is the ratio of
StepBasis = Literal["step wall time", "op time per step"]  # what a whole step is measured by


def _usable(value: float | None) -> TypeGuard[float]:
    return value is not None and math.isfinite(value) and value > 0


@dataclasses.dataclass(frozen=True)
class Headline:
    speedup: float | None  # > 1: the target is faster
    basis: Basis  # STEP_WALL_TIME, OP_TIME_PER_STEP or OP_TIME
    per_sample: bool  # the batch sizes differ, so the times are per sample
    text: str  # what the number is, in words, with the two times it is the ratio of


def headline(
    baseline: StepLatency,
    target: StepLatency,
    baseline_batch: int | None,
    target_batch: int | None,
    op_time: tuple[float, float],
    steps: tuple[int | None, int | None],
) -> Headline:
    """The speedup a user reads first: the ratio of the two sides' median steady step
    wall times, per sample where the batch sizes differ (a bigger batch does more work in
    a step). Where a side has no step markers, op time per step stands in (``op_time``:
    each side's whole op time, µs; ``steps``: its profiled steps), and where the steps are
    unknown too, the whole profiles' op time; the text says which, and why it is not a
    stopwatch's figure."""
    per_sample = batch_sizes_differ(baseline_batch, target_batch) is not None
    scale = target_batch / baseline_batch if per_sample and target_batch and baseline_batch else 1.0
    unit = " per sample" if per_sample else ""
    if _usable(baseline.median_us) and _usable(target.median_us):
        speedup = baseline.median_us / target.median_us * scale
        counted = (
            "one step each"
            if baseline.steps == target.steps == 1
            else f"median of {baseline.steps} vs {target.steps} steady steps"
        )
        return Headline(
            speedup,
            STEP_WALL_TIME,
            per_sample,
            f"step wall time{unit}: {counted}, {_per(baseline.median_us, baseline_batch, per_sample)} vs "
            f"{_per(target.median_us, target_batch, per_sample)}",
        )
    missing = " and ".join(
        side for side, latency in (("the baseline", baseline), ("the target", target)) if not _usable(latency.median_us)
    )
    why = f"{missing} {'has' if ' and ' not in missing else 'have'} no step wall times, so"
    base_step, target_step = (time / count if count else None for time, count in zip(op_time, steps))
    if _usable(base_step) and _usable(target_step):
        return Headline(
            base_step / target_step * scale,
            OP_TIME_PER_STEP,
            per_sample,
            f"{why} op time per step{unit} instead of wall time "
            f"({_per(base_step, baseline_batch, per_sample)} vs "
            f"{_per(target_step, target_batch, per_sample)}): ops on parallel threads add up beyond "
            "the step, and time outside ops is missed",
        )
    if not all(steps):
        why += " the steps are unknown too:"
    return Headline(
        op_time[0] / op_time[1] if _usable(op_time[1]) else None,
        OP_TIME,
        False,
        f"{why} the whole profiles' op time instead of wall time",
    )


def _per(step_us: float, batch: int | None, per_sample: bool) -> str:
    return format_time(step_us / batch) if per_sample and batch else format_time(step_us)


def pair_headline(
    baseline: OpProfile,
    target: OpProfile,
    baseline_steps: StepLatency | None = None,
    target_steps: StepLatency | None = None,
) -> tuple[Headline, StepLatency, StepLatency]:
    """The headline of two runs' profiles; ``*_steps``: a side's steady steps where it is a
    group (its runs' steps pooled), else the run's own."""
    latencies = [
        given or step_latency([run.facts.step_times_us])
        for given, run in ((baseline_steps, baseline), (target_steps, target))
    ]
    op_time = (op_time_us(baseline.op_table), op_time_us(target.op_table))
    first = headline(
        latencies[0],
        latencies[1],
        evidenced_batch_size(baseline.facts.batch_size, baseline.facts.batch_size_source),
        evidenced_batch_size(target.facts.batch_size, target.facts.batch_size_source),
        op_time,
        (baseline.facts.steps, target.facts.steps),
    )
    return first, latencies[0], latencies[1]


def headline_figure(baseline: OpProfile, target: OpProfile) -> HeadlineFigure:
    """``pair_headline`` as the documents carry it."""
    first, base_steps, target_steps = pair_headline(baseline, target)
    return HeadlineFigure(
        speedup=finite_or_none(first.speedup),
        basis=first.basis,
        per_sample=first.per_sample,
        text=first.text,
        baseline_step_wall_us=finite_or_none(base_steps.median_us),
        target_step_wall_us=finite_or_none(target_steps.median_us),
    )


def headline_figures(first: Headline, base_steps: StepLatency, target_steps: StepLatency) -> dict[str, Any]:
    """The headline and the step wall times it is made of, as summary fields."""
    return {
        "headline_speedup": first.speedup,
        "headline_basis": first.basis,
        "headline_per_sample": first.per_sample,
        "headline_text": first.text,
        "baseline_step_wall_us": base_steps.median_us,
        "target_step_wall_us": target_steps.median_us,
    }


def step_marker_notes(first: Headline, base_steps: StepLatency, target_steps: StepLatency) -> list[str]:
    """Where the headline is step wall time, a note naming the runs of a group it leaves
    out for want of step markers: its figure then stands on fewer runs than the group."""
    left_out = [
        f"{count} {label} run{'s' * (count > 1)}"
        for label, count in (
            ("baseline", base_steps.runs_without_markers),
            ("target", target_steps.runs_without_markers),
        )
        if count and first.basis == STEP_WALL_TIME
    ]
    if not left_out:
        return []
    return [f"The step wall time leaves out {' and '.join(left_out)} without step markers."]


def like_for_like(
    summary: dict[str, Any],
    baseline: RunRecord,
    target: RunRecord,
    group_by: str,
    first: Headline,
    rows: Table | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Figures and notes that say what a comparison does and does not compare.
    ``baseline``/``target``: each run's ``batch_size``, ``framework`` and ``compiler``;
    ``first``: the headline (``headline``), which the notes explain; ``rows``: the compared
    rows, where a note names some of them.

    Returns ``whole_step_speedup`` (all op time per step, ops on one side included),
    ``per_sample_speedup`` (the same per sample, where the batch sizes differ), and
    ``op_time_speedup`` with its ``op_time_basis``: the one op time ratio shown beside the
    headline (per sample where the headline is, else per step, else over the whole
    profile); and the notes a user needs to read the headline figures right. Matched op
    time and the geometric mean stay in the document, out of the first screen, and no
    note repeats them."""
    base_step, target_step = summary["baseline_time_per_step_us"], summary["target_time_per_step_us"]
    whole = base_step / target_step if base_step and target_step else None
    sizes = [(run.batch_size, run.batch_size_source) for run in (baseline, target)]
    per_sample, batch_note = _per_sample(whole, evidenced_batch_size(*sizes[0]), evidenced_batch_size(*sizes[1]), first)
    notes = [
        different_models(summary, baseline, target),
        batch_note or unverified_batch_note(sizes),
        _flat_work_note(summary, baseline, target),
        _op_time_note(per_sample, whole, first),
        _no_shared_ops_note(summary, baseline, target, group_by),
        _compiler_note(baseline.compiler, target.compiler, first),
        _xla_numbering_note(baseline, target, group_by, rows),
    ]
    figures = {"whole_step_speedup": whole, "per_sample_speedup": per_sample, **_op_time(summary, whole, per_sample)}
    return figures, [note for note in notes if note]


def _op_time(summary: dict[str, Any], whole: float | None, per_sample: float | None) -> dict[str, Any]:
    """The op time ratio beside the headline, and what it is over."""
    if per_sample:
        return {"op_time_speedup": per_sample, "op_time_basis": "per sample"}
    if whole:
        return {"op_time_speedup": whole, "op_time_basis": "per step"}
    base, target = summary["baseline_total_us"], summary["target_total_us"]
    return {"op_time_speedup": base / target if base and target else None, "op_time_basis": "whole profile"}


def _per_sample(
    whole: float | None, base_batch: int | None, target_batch: int | None, first: Headline
) -> tuple[float | None, str | None]:
    """Where the batch sizes differ, the whole-step speedup per sample and a note: each
    op's speedup then compares one call at each size, different amounts of work."""
    differ = batch_sizes_differ(base_batch, target_batch)
    if not differ:
        return None, None
    per_sample = whole * target_batch / base_batch if whole and target_batch and base_batch else None
    return per_sample, (
        f"{differ}: {'the headline is per sample, and ' if first.per_sample else ''}each op's speedup "
        "compares one call at each size, that is different amounts of work."
    )


# A CPU's op time grows with the samples a step: measured 1.4-3.8x for 4-64x on the demo's
# CNNs (TF and PyTorch). Growth below ratio ** _FLAT_EXPONENT (1.15x for 4x, 1.23x for 8x)
# across claimed batch sizes says the runs processed about the same batch. An accelerator
# is left out: a small model's kernels there take as long at batch 1 as at 64 (0.93x).
_FLAT_EXPONENT = 0.1
_FLAT_MIN_RATIO = 4


def _flat_work_note(summary: dict[str, Any], baseline: RunRecord, target: RunRecord) -> str | None:
    """Where batch sizes that are not measured (an argument, a sidecar, a name) differ by
    ``_FLAT_MIN_RATIO`` or more on one CPU, but the ops' time a step barely moved: the
    sizes may not be what the runs processed (issue 51: fit()'s batch_size 1024 on a dataset
    batched by 128 read 9.80x per sample)."""
    overall = summary.get("overall_speedup")
    if not (baseline.batch_size and target.batch_size and overall and baseline.device == target.device == "CPU"):
        return None
    sizes = [baseline.batch_size, target.batch_size]
    if all((run.batch_size_source or "").startswith("data:") for run in (baseline, target)):
        return None  # both measured: the data says what each step held
    small, big = sorted(sizes)
    growth = 1 / overall if sizes[1] > sizes[0] else overall  # the larger batch's op time over the smaller's
    if big < _FLAT_MIN_RATIO * small or not below(growth, (big / small) ** _FLAT_EXPONENT):
        return None
    said = [f"{run.batch_size} ({(run.batch_size_source or 'unknown').split(':')[0]})" for run in (baseline, target)]
    return (
        f"The batch sizes say {said[0]} vs {said[1]}, {big / small:.0f}x the samples a step, but the ops' time a "
        f"step changed by {format_speedup(growth).rstrip('×')}x only: the runs may have processed about the same "
        "batch. Check how each run batched its input, and declare the size in its sidecar."
    )


def _op_time_note(per_sample: float | None, whole: float | None, first: Headline) -> str | None:
    """Why op time and a step-wall-time headline disagree, where they are far apart
    (``_OP_TIME_APART``): the user sees both and must know which to believe."""
    op_time = per_sample or whole
    if not (
        first.basis == STEP_WALL_TIME
        and op_time
        and first.speedup
        and above(abs(math.log(op_time / first.speedup)), math.log(_OP_TIME_APART))
    ):
        return None
    return (
        f"Op time per step{' per sample' if per_sample else ''} gives {format_speedup(op_time)}, the "
        f"step wall time {format_speedup(first.speedup)}: op time adds up ops that ran side by side on "
        "parallel threads and misses time outside ops (a data loader, Python, waiting on a device), "
        "so the headline is the wall time."
    )


def _no_shared_ops_note(summary: dict[str, Any], baseline: RunRecord, target: RunRecord, group_by: str) -> str | None:
    """Why no op matched where both runs took time, and what to do about it."""
    if not (summary["matched_ops"] == 0 and summary["baseline_total_us"] and summary["target_total_us"]):
        return None
    frameworks = {framework for framework in (baseline.framework, target.framework) if framework is not None}
    families = {_framework_family(framework) for framework in frameworks}
    why = (
        f"the runs come from different frameworks ({' and '.join(sorted(frameworks))})"
        if len(families) > 1
        else "the runs name their ops differently (another model, or another version)"
    )
    # op types meet within one framework only: TensorFlow's Conv2D is never PyTorch's aten::convolution
    hint = " Group by op type to compare ops by kind." if group_by == "name" and len(families) <= 1 else ""
    return f"No op is in both runs: {why}.{hint}"


def _compiler_note(base_compiler: str | None, target_compiler: str | None, first: Headline) -> str | None:
    """Where both runs name different compilers: ops on one side only are then expected,
    and the whole step is the figure that compares them."""
    if base_compiler is None or target_compiler is None or base_compiler == target_compiler:
        return None
    return (
        f"The runs ran under different compilers ({base_compiler} and {target_compiler}): a compiler fuses and "
        "renames ops by design, so ops found on one side only are expected and op-by-op speedups cover "
        "only what both kept. The whole step is where both meet"
        + (f": {format_speedup(first.speedup)} in step wall time" if first.basis == STEP_WALL_TIME else "")
        + "; the Matrix view compares whole steps across compilers."
    )


def _xla_numbering_note(baseline: RunRecord, target: RunRecord, group_by: str, rows: Table | None) -> str | None:
    """Where both runs are XLA programs compiled for different configurations (batch size,
    device, precision) and a matched row is still an instruction's numbered name: XLA
    numbers a program's instructions as it compiles it, and the readers name an XLA op by
    the framework op it was made from (or, for one XLA made without metadata, the one op
    its users compute), but an instruction where neither names one keeps its number
    (``convolution.1``: the demo's Keras weight gradients, which both of Adam's moments
    read), and that number may be another instruction in each run (by number, the demo's
    runs at batch 16 and 64 paired their max-pools' argmax windows the wrong way round:
    331x). Repeats of one configuration compile alike, and are left without the note."""
    if group_by != "name" or not (baseline.compiler == target.compiler == "XLA"):
        return None
    dimensions = ("batch_size", "device", "device_name", "precision")
    if all(getattr(baseline, name) == getattr(target, name) for name in dimensions):
        return None
    numbered = numbered_instructions(rows) if rows is not None else []
    if not numbered:
        return None
    named = ", ".join(numbered[:3]) + (f" and {len(numbered) - 3} more" if len(numbered) > 3 else "")
    return (
        "Both runs are XLA programs compiled for different configurations. XLA ops are named by the framework "
        f"op they compute, but {len(numbered)} matched op{'s' * (len(numbered) > 1)} ({named}) have no one framework "
        "op and each keeps the number XLA gave it as it compiled its program: the same number may be another "
        "instruction in each run, so their speedups may compare unlike ops. Rows by op type (group by type) "
        "compare like with like."
    )


def numbered_instructions(rows: Table) -> list[str]:
    """The matched rows named as an XLA instruction is numbered: their type, a dot and a
    number (``convolution.2``), as the readers name an XLA op whose metadata and users
    name no one framework op."""
    matched = rows["status"] == MATCHED
    return [
        name
        for name, op_type in zip(rows["key"][matched].tolist(), rows["op_type"][matched].tolist())
        if op_type and re.fullmatch(re.escape(op_type) + r"\.\d+", name)
    ]


def different_models(summary: dict[str, Any], baseline: RunRecord, target: RunRecord) -> str | None:
    """Why the figures compare different work, where the two runs are of different models:
    their models differ and so do their ops (runs of one model whose names differ, kineto's
    ``num_workers_0`` and ``num_workers_4``, share ``SAME_MODEL_JACCARD`` of their ops)."""
    if model_of(baseline.model) == model_of(target.model):  # fp32 -> bf16, eager -> compile: one model
        return _layer_join_note(baseline, target)
    ops = summary["matched_ops"] + summary["baseline_only_ops"] + summary["target_only_ops"]
    if ops and summary["matched_ops"] / ops >= SAME_MODEL_JACCARD - 1e-9:
        return None
    return (
        f"Different models: {baseline.run} is {baseline.model} and {target.run} is {target.model}, and "
        f"{summary['matched_ops']} of their {ops} ops are in both, so every speedup here compares different "
        "work. The Matrix puts each model's runs on one row."
    )


def _layer_join_note(baseline: RunRecord, target: RunRecord) -> str | None:
    """Where the two runs are one model only because their layer scopes agree (their
    folders' names say nothing of it), the note says so, and how to part them: layer names
    carry no widths, so two models of the same layers and other widths read as one."""
    joined = [run for run in (baseline, target) if joined_by_layer_scopes(run.model_source)]
    if not joined:
        return None
    return (
        f"One model by its layers: {baseline.run} and {target.run} have the same layer scopes, and their folders' "
        "names say nothing of the model, so they are read as one model on two devices. Layer names carry no "
        "widths: if these are different models, give each run's model in an opcompare.json sidecar "
        '({"model": "..."}).'
    )


# Op time and wall time further apart than this (either way) get a note saying why.
_OP_TIME_APART = 1.25


def _framework_family(framework: str) -> str:
    """``PyTorch 2.13.0+cpu`` -> ``PyTorch``, ``TensorFlow 2.16.1 (Keras 3)`` and
    ``TensorFlow (summary.json)`` -> ``TensorFlow``: the words before a version or a note."""
    words = re.match(r"[^\d(]*", framework)  # matches always, perhaps nothing
    return (words.group().strip() if words else "") or framework
