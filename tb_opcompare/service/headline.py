"""The headline of two runs (or run groups): the speedup a user reads first, made here for
every document that shows one (Compare, Modules, Layers), so a pair reads one number in
every view. The rule itself is ``analysis.step_time``."""

from __future__ import annotations

from tb_opcompare.analysis.compare import op_time_us
from tb_opcompare.analysis.numerics import finite_or_none
from tb_opcompare.analysis.step_time import Headline, StepLatency, evidenced_batch_size, headline, step_latency
from tb_opcompare.schema.contract import HeadlineFigure
from tb_opcompare.store.catalog import LoadedRun


def pair_headline(
    baseline: LoadedRun,
    target: LoadedRun,
    baseline_steps: StepLatency | None = None,
    target_steps: StepLatency | None = None,
) -> tuple[Headline, StepLatency, StepLatency]:
    """The headline of two read runs; ``*_steps``: a side's steady steps where it is a
    group (its runs' steps pooled), else the run's own."""
    latencies = [
        given or step_latency([run.profile.facts.step_times_us])
        for given, run in ((baseline_steps, baseline), (target_steps, target))
    ]
    op_time = (op_time_us(baseline.profile.op_table), op_time_us(target.profile.op_table))
    first = headline(
        latencies[0],
        latencies[1],
        *(
            evidenced_batch_size(run.profile.facts.batch_size, run.profile.facts.batch_size_source)
            for run in (baseline, target)
        ),
        op_time,
        (baseline.profile.facts.steps, target.profile.facts.steps),
    )
    return first, latencies[0], latencies[1]


def headline_figure(baseline: LoadedRun, target: LoadedRun) -> HeadlineFigure:
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
