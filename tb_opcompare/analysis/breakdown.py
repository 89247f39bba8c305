"""Where the time went (issue 53): a side's median steady step split by what it was spent
on, and the change from the baseline's to the target's as a waterfall whose bars add up
to the headline's wall difference.

The step is the one the headline stands on: each run's warm-up dropped by the headline's
rule (``step_time.steady_steps``), the steady steps of every run of a side pooled, and the
median taken; where that median falls between two steps (an even count), the mean of the
two steps' splits, as the median is the mean of their wall times. So a side's host
categories add up to its headline wall time, and the bars of the waterfall to the
difference of the two. Plain tables in, plain records out: no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from tb_opcompare.analysis.step_time import detect_warmup
from tb_opcompare.schema.dimensions import DEVICE_STEP_CATEGORIES, STEP_CATEGORIES, Processor
from tb_opcompare.schema.events import DEVICE, HOST
from tb_opcompare.schema.table import Table


@dataclasses.dataclass(frozen=True)
class SideSplit:
    """A side's median steady step, by category (``{category: µs}`` per side, ``host`` and,
    where the runs had an accelerator, ``device``), and its wall time."""

    wall_us: float
    parts: dict[str, dict[str, float]]
    steps: int  # steady steps pooled
    note: str | None = None  # what the split cannot tell apart (``ProfileFacts.step_breakdown_note``)
    # where the side pools runs (repeats): each run's own median steady step, by run name
    runs: tuple[tuple[str, SideSplit], ...] = ()


def side_split(
    runs: Sequence[tuple[Sequence[float], Table]], note: str | None = None, warmup: int | None = None
) -> SideSplit | None:
    """``runs``: each run's step wall times and its ``step_breakdown`` table; ``note``: what
    the format's split cannot tell apart; ``warmup``: leading steps left out of every run
    as a user asked (None: the headline's rule). None where no run has both steps and a split."""
    steady: list[tuple[float, int, int]] = []  # (wall, run, step)
    for index, (times, table) in enumerate(runs):
        if not len(times) or not len(table):
            continue
        first = detect_warmup(times) if warmup is None else min(warmup, len(times))
        steady += [(float(times[step]), index, step) for step in range(first, len(times))]
    if not steady:
        return None
    steady.sort()
    middle = len(steady) // 2
    chosen = [steady[middle]] if len(steady) % 2 else [steady[middle - 1], steady[middle]]
    parts: dict[str, dict[str, float]] = {}
    for _, index, step in chosen:
        table = runs[index][1]
        rows = np.flatnonzero(table["step"] == step)
        for side, category, time in zip(
            table["side"][rows].tolist(), table["category"][rows].tolist(), table["time_us"][rows].tolist()
        ):
            parts.setdefault(side, {})
            parts[side][category] = parts[side].get(category, 0.0) + time / len(chosen)
    wall = sum(wall for wall, _, _ in chosen) / len(chosen)
    return SideSplit(wall, {side: _ordered(side, found) for side, found in parts.items()}, len(steady), note)


def pooled_split(runs: Sequence[tuple[str, Sequence[float], Table]], note: str | None = None) -> SideSplit | None:
    """``side_split`` of runs pooled (each: its name, step wall times, ``step_breakdown``
    table), with each run's own split beside it where there are two runs or more: one run
    whose step went elsewhere shows."""
    pooled = side_split([(times, table) for _, times, table in runs], note)
    if pooled is None or len(runs) < 2:
        return pooled
    own = [(name, side_split([(times, table)])) for name, times, table in runs]
    return dataclasses.replace(pooled, runs=tuple((name, split) for name, split in own if split is not None))


def with_ranks(split: SideSplit | None, workers: Sequence[dict[str, Any]]) -> SideSplit | None:
    """A job's split (its slowest rank's, step by step) with each rank's own median steady
    step beside it (``ProfileFacts.workers``' ``step_parts``), where it has two ranks or more."""
    ranks = [worker for worker in workers if worker.get("step_parts") and worker.get("step_time_us")]
    if split is None or len(ranks) < 2:
        return split
    own = tuple(
        (
            f"rank {worker['rank']}" if worker.get("rank") is not None else worker["file"],
            SideSplit(worker["step_time_us"], {HOST: dict(worker["step_parts"])}, worker.get("steps") or 0),
        )
        for worker in ranks
    )
    return dataclasses.replace(split, runs=own)


def side_of(category: str) -> str:
    """Which side a category of the vocabulary is on (ValueError for none)."""
    if category in STEP_CATEGORIES:
        return HOST
    if category in DEVICE_STEP_CATEGORIES:
        return DEVICE
    raise ValueError(
        f"expected a part of the step ({', '.join([*STEP_CATEGORIES, *DEVICE_STEP_CATEGORIES])}), not {category!r}"
    )


def part_time(split: SideSplit | None, category: str) -> float | None:
    """A part's time in a side's median steady step (0 where the step has none of it);
    None where the side splits no step, or has no device for a device part."""
    if split is None:
        return None
    side = side_of(category)
    if side not in split.parts:
        return None
    return split.parts[side].get(category, 0.0)


def _ordered(side: str, found: dict[str, float]) -> dict[str, float]:
    """The categories in the order the vocabulary lists them (the waterfall's order)."""
    names = STEP_CATEGORIES if side == HOST else DEVICE_STEP_CATEGORIES
    return {name: found[name] for name in names if name in found}


# The keys of a trend's step parts: ``(step) waiting for input`` beside ``(whole step)``.
STEP_PART = "(step) "


def step_part_rows(splits: Sequence[SideSplit | None]) -> list[dict[str, Any]]:
    """A trend's rows of the step's host parts: at each point (``splits``: each point's
    split, None where its runs split no step), the part's time in the point's median steady
    step, keyed ``(step) <label>``, in the vocabulary's order."""
    found = {name for split in splits if split for name in split.parts.get(HOST, {})}
    rows = []
    for name, label in STEP_CATEGORIES.items():
        if name not in found:
            continue
        for point, split in enumerate(splits):
            # a part the point's step has no time in is null, as a point without an op (a log axis has no 0)
            time = split.parts.get(HOST, {}).get(name) if split else None
            rows.append(
                {
                    "key": STEP_PART + label,
                    "point": point,
                    "mean_us": time,
                    "low_us": None,  # one median step: no interval
                    "high_us": None,
                    "runs": split.steps if split else 0,
                }
            )
    return rows


@dataclasses.dataclass(frozen=True)
class BreakdownRow:
    """One part on both sides; a device part of a side that ran on no device (a CPU run)
    is None there, not 0 µs of a device, and so is its change."""

    side: Processor
    category: str
    label: str
    baseline_us: float | None
    target_us: float | None

    @property
    def change_us(self) -> float | None:
        if self.baseline_us is None or self.target_us is None:
            return None
        return self.target_us - self.baseline_us


def breakdown_rows(baseline: SideSplit, target: SideSplit) -> list[BreakdownRow]:
    """Each category either side has, host first, in the vocabulary's order, with both
    sides' time in it (0 where a side has none). The host rows' changes add up to
    ``target.wall_us - baseline.wall_us``. A side's device parts add up to its step, so a
    side with none at all ran on no device: its device times are None."""
    rows = []
    processors: tuple[tuple[Processor, dict[str, str]], ...] = (
        (HOST, STEP_CATEGORIES),
        (DEVICE, DEVICE_STEP_CATEGORIES),
    )
    for side, names in processors:
        base, tgt = baseline.parts.get(side, {}), target.parts.get(side, {})
        ran = [side == HOST or any(times.values()) for times in (base, tgt)]
        for name, label in names.items():
            if name in base or name in tgt:
                times = [times.get(name, 0.0) if on else None for times, on in zip((base, tgt), ran)]
                rows.append(BreakdownRow(side, name, label, *times))
    return rows


@dataclasses.dataclass(frozen=True)
class PartChange:
    """How one part of the step changed between two groups of runs (``check``): the mean
    over each side's runs of the part's time in the run's median steady step, and the 95%
    interval of the change where both sides have two runs or more (Welch's, on µs: a part
    may be 0 in some runs, which no log takes)."""

    side: str
    category: str
    label: str
    baseline_us: float
    target_us: float
    low_us: float | None
    high_us: float | None

    @property
    def change_us(self) -> float:
        return self.target_us - self.baseline_us

    @property
    def grew(self) -> bool:
        """The part took longer: beyond noise where there is an interval, else at all."""
        return self.low_us > 0 if self.low_us is not None else self.change_us > 0


def part_changes(baseline: Sequence[SideSplit], target: Sequence[SideSplit]) -> list[PartChange]:
    """Each part either side's runs have (``baseline``, ``target``: each run's own split),
    in the vocabulary's order, host first."""
    # here, not at the top: confidence brings pandas, which Compare's cold path never imports
    from tb_opcompare.analysis.confidence import student_t_quantile

    changes = []
    for side, names in ((HOST, STEP_CATEGORIES), (DEVICE, DEVICE_STEP_CATEGORIES)):
        for name, label in names.items():
            if not any(name in split.parts.get(side, {}) for split in [*baseline, *target]):
                continue
            base, tgt = ([split.parts.get(side, {}).get(name, 0.0) for split in group] for group in (baseline, target))
            low = high = None
            if len(base) >= 2 and len(tgt) >= 2:
                terms = np.var(base, ddof=1) / len(base), np.var(tgt, ddof=1) / len(tgt)
                spread = float(np.sqrt(sum(terms)))
                if spread > 0:  # Welch–Satterthwaite degrees of freedom
                    freedom = sum(terms) ** 2 / (terms[0] ** 2 / (len(base) - 1) + terms[1] ** 2 / (len(tgt) - 1))
                    margin = float(student_t_quantile(0.975, np.array([freedom]))[0]) * spread
                else:
                    margin = 0.0
                middle = float(np.mean(tgt) - np.mean(base))
                low, high = middle - margin, middle + margin
            changes.append(PartChange(side, name, label, float(np.mean(base)), float(np.mean(tgt)), low, high))
    return changes


def grew_most(changes: Sequence[PartChange]) -> PartChange | None:
    """The host part whose time grew most: where a slower step's time went. Its interval
    (``PartChange.grew``) says whether that growth is beyond the runs' noise; a part that
    grew by a few µs beyond noise is no answer to where 50 ms went."""
    grown = [change for change in changes if change.side == HOST and change.change_us > 0]
    return max(grown, key=lambda change: change.change_us, default=None)
