"""Automatic baseline/target pairs: CPU and accelerator runs of the same model.

First by model: same model key (the sidecar's ``model``, the run name's, or the one
``model_identity`` found from the ops), same batch size and, where both runs are
numbered repeats (``--repeats``), the same repeat. Runs left
unpaired whose names tell nothing (``log_prefetch/128_20210203-201149``) are then
paired by the overlap of their op-name sets: Jaccard >= 0.5, best match first, equal
batch sizes where both are known, and a margin of 0.1 over every other candidate of
either run (batch sizes of one model share their op names). Such a pair is marked a
``guess`` where a batch size is unknown.

``variant_pairs`` pairs along the other dimensions: each run of a precision or compiler
other than the default (fp32, eager) with the run that differs from it in that one
dimension only (same model, device and batch size, same repeat where both are numbered),
the default as the baseline: fp32 -> bf16, eager -> torch.compile.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence

from tb_opcompare.schema.contract import Pair, SuggestedPair
from tb_opcompare.schema.dimensions import DEFAULTS, is_default

JACCARD_THRESHOLD = 0.5
OVERLAP_MARGIN = 0.1  # how far an overlap-only pair must score above its runner-up
# Runs of one device and batch size whose op-name sets overlap this much are one model's
# (``model_identity`` measured 0.97-1.00 within a model, 0.61-0.70 between two models).
SAME_MODEL_JACCARD = 0.85
MAX_COMPARED_BY_OPS = 64  # runs of one configuration whose op sets a suggestion compares pairwise


@dataclasses.dataclass
class RunForPairing:
    run: str
    model: str
    device: str | None
    batch_size: int | None
    op_names: frozenset[str]
    repeat: int | None = None
    base_model: str = ""  # the model without precision and compiler (``model`` holds them)
    precision: str | None = None  # as configured: the claim where the data agrees, else the data
    compiler: str | None = None
    model_source: str = "run name"  # ``sidecar``, ``run name`` or ``data: …`` (``analysis.model_identity``)
    device_name: str | None = None  # the accelerator's model: an H100 and an MI300X are two devices


VARIANT_DIMENSIONS = DEFAULTS  # each dimension other than the device, and its default (the baseline)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    shared = len(a & b)
    union = len(a) + len(b) - shared  # no union set made: a logdir's runs make many pairs
    return shared / union if union else 0.0


def pair_runs(runs: list[RunForPairing]) -> list[Pair]:
    baselines = [r for r in runs if r.device == "CPU"]
    targets = [r for r in runs if r.device not in (None, "CPU")]  # None: not read yet, name says nothing
    pairs = []
    paired: set[str] = set()
    for cpu in baselines:
        for accelerator in targets:
            same_repeat = cpu.repeat is None or accelerator.repeat is None or cpu.repeat == accelerator.repeat
            if cpu.model == accelerator.model and cpu.batch_size == accelerator.batch_size and same_repeat:
                found_by_data = any(run.model_source.startswith("data") for run in (cpu, accelerator))
                pairs.append(
                    _pair(
                        cpu, accelerator, cpu.model, "one model, found from the ops" if found_by_data else "run names"
                    )
                )
                paired.update((cpu.run, accelerator.run))
    return pairs + _pairs_by_overlap(baselines, targets, paired)


def _pairs_by_overlap(baselines: list[RunForPairing], targets: list[RunForPairing], paired: set[str]) -> list[Pair]:
    """The runs the model keys left unpaired, paired by the overlap of their op names (the
    module's docstring), best first; ``paired`` grows with each pair."""
    scores = {}
    for cpu in baselines:
        for accelerator in targets:
            if cpu.run in paired or accelerator.run in paired:
                continue
            if cpu.batch_size and accelerator.batch_size and cpu.batch_size != accelerator.batch_size:
                continue
            scores[cpu.run, accelerator.run] = (jaccard(cpu.op_names, accelerator.op_names), cpu, accelerator)
    # each run's candidates, best first: a candidate's rivals are the other candidates of
    # either run, found without a pass over every pair (800 unpaired runs took 17 s so)
    candidates: dict[str, list[tuple[float, str]]] = {}
    for (cpu_run, accelerator_run), (score, _, _) in scores.items():
        candidates.setdefault(cpu_run, []).append((score, accelerator_run))
        candidates.setdefault(accelerator_run, []).append((score, cpu_run))
    for listed in candidates.values():
        listed.sort(key=lambda candidate: -candidate[0])

    def best_rival(run: str, partner: str) -> float | None:
        """The best score of ``run`` with another unpaired run than ``partner``."""
        return next((score for score, other in candidates[run] if other != partner and other not in paired), None)

    pairs = []
    for (cpu_run, accelerator_run), (score, cpu, accelerator) in sorted(scores.items(), key=lambda item: -item[1][0]):
        if score < JACCARD_THRESHOLD or cpu_run in paired or accelerator_run in paired:
            continue
        # Overlap alone is weak: the best match must stand clear of every other candidate
        # of either run, or runs of other batch sizes of one model would pair at random.
        rivals = [
            rival
            for rival in (best_rival(cpu_run, accelerator_run), best_rival(accelerator_run, cpu_run))
            if rival is not None
        ]
        runner_up = max(rivals, default=0.0)
        if score - runner_up < OVERLAP_MARGIN - 1e-9:  # exactly the margin is enough (float rounding aside)
            continue
        unknown = cpu.batch_size is None or accelerator.batch_size is None
        how = f"op names (Jaccard {score:.2f}" + (f", next best {runner_up:.2f}" if rivals else "") + ")"
        pairs.append(
            _pair(
                cpu, accelerator, cpu.model, how + ("; a guess: batch sizes unknown" if unknown else ""), guess=unknown
            )
        )
        paired.update((cpu_run, accelerator_run))
    return pairs


def variant_pairs(runs: list[RunForPairing]) -> list[Pair]:
    """Pairs that vary one dimension other than the device (see the module's docstring),
    in the order of ``VARIANT_DIMENSIONS``, then the target run's name, then the baseline's.
    A target meets only the defaults that share its other facts, looked up, not searched
    for (1,000 runs, half of them bf16, took 0.65 s pair by pair)."""
    pairs = []
    in_order = sorted(runs, key=lambda run: run.run)
    for dimension in VARIANT_DIMENSIONS:
        held = [other for other in VARIANT_DIMENSIONS if other != dimension]

        def alike(run: RunForPairing, held: list[str] = held) -> tuple[object, ...]:
            return (run.base_model, run.device, run.batch_size, *(_value(run, other) for other in held))

        defaults: dict[tuple[object, ...], list[RunForPairing]] = {}
        for run in in_order:
            if is_default(dimension, _value(run, dimension)):
                defaults.setdefault(alike(run), []).append(run)
        for target in in_order:
            if is_default(dimension, _value(target, dimension)) or target.device is None:
                continue
            for baseline in defaults.get(alike(target), ()):
                if baseline.repeat is None or target.repeat is None or baseline.repeat == target.repeat:
                    pairs.append(_pair(baseline, target, target.base_model, "run facts", varies=dimension))
    return pairs


def _value(run: RunForPairing, dimension: str) -> str:
    """A run's precision or compiler; unknown reads as the default, as in its model key
    (a run listed before its trace is read, with nothing in its name or sidecar, pairs as
    it will once read)."""
    return getattr(run, dimension) or VARIANT_DIMENSIONS[dimension]


def _pair(
    baseline: RunForPairing,
    target: RunForPairing,
    model: str,
    matched_by: str,
    guess: bool = False,
    varies: str = "device",
) -> Pair:
    return Pair(
        baseline=baseline.run,
        target=target.run,
        model=model,
        batch_size=baseline.batch_size if baseline.batch_size is not None else target.batch_size,
        matched_by=matched_by,
        guess=guess,
        varies=varies,
    )


def suggest_pair(runs: list[RunForPairing], pairs: list[Pair], variants: Sequence[Pair] = ()) -> SuggestedPair | None:
    """The pair a user sees first, the most telling comparison of one model the logdir holds:

    1. the automatic CPU->accelerator pair of the largest batch size (a small model at
       batch 1 mostly measures launch overhead; the first such pair in name order);
    2. the widest batch-size change of one model on one device (smallest -> largest);
    3. one model on two devices at one batch size (an H100 and an MI300X);
    4. the first variant pair (fp32 -> bf16, eager -> torch.compile);
    5. two runs of one model, or two runs whose ops are one model's by overlap
       (``SAME_MODEL_JACCARD``) on one device and batch size: two experiments
       (kineto's ``num_workers_0`` and ``num_workers_4``);
    6. else the first two runs, of different models, which the reason says."""
    # in that order, each tried only where the ones before found nothing
    rules: tuple[Callable[[], SuggestedPair | None], ...] = (
        lambda: _largest_device_pair(pairs),
        lambda: _widest_batch_change(runs),
        lambda: _one_model_two_devices(runs),
        lambda: _first_variant(variants),
        lambda: _two_runs_of_one_model(runs),
        lambda: _two_experiments(runs),
        lambda: _any_runs(runs),
    )
    return next((found for found in (rule() for rule in rules) if found is not None), None)


def _largest_device_pair(pairs: list[Pair]) -> SuggestedPair | None:
    """Rule 1: the first CPU->accelerator pair at the largest batch size."""
    if not pairs:
        return None
    largest = max(pair.batch_size or 0 for pair in pairs)
    first = next(pair for pair in pairs if (pair.batch_size or 0) == largest)
    return SuggestedPair(
        baseline=first.baseline,
        target=first.target,
        reason=f"{first.baseline} is the CPU run and {first.target} the accelerator run of "
        f"{first.model}" + (f", at the largest batch size ({largest})" if largest else ""),
    )


def _widest_batch_change(runs: list[RunForPairing]) -> SuggestedPair | None:
    """Rule 2: of each model's runs on one device at two or more batch sizes, the smallest
    and the largest batch size of the widest such sweep (by ratio, then by runs)."""
    groups: dict[tuple[str, str | None], list[tuple[int, RunForPairing]]] = {}  # (batch size, run)
    for run in runs:
        if run.batch_size:
            groups.setdefault((run.model, _hardware(run)), []).append((run.batch_size, run))
    sweeps = [
        sorted(group, key=lambda sized: (sized[0], sized[1].run))
        for group in groups.values()
        if len({size for size, _ in group}) > 1
    ]
    if not sweeps:
        return None
    widest = max(sweeps, key=lambda g: (g[-1][0] / g[0][0], len(g)))
    (_, small), (_, large) = widest[0], widest[-1]
    return SuggestedPair(
        baseline=small.run,
        target=large.run,
        reason=f"batch size {small.batch_size} -> {large.batch_size} of {small.model} on "
        f"{_hardware(small) or 'one device'}: the widest batch-size change in this logdir",
    )


def _one_model_two_devices(runs: list[RunForPairing]) -> SuggestedPair | None:
    """Rule 3: the first two runs (in ``itertools.combinations`` order) of one model, batch
    size, precision and compiler on two known devices (an accelerator's model tells two
    GPUs apart)."""
    found = _first_pair_across_devices(runs)
    if found is None:
        return None
    a, b = found
    at = f" at batch size {a.batch_size}" if a.batch_size else ""
    return SuggestedPair(
        baseline=a.run,
        target=b.run,
        reason=f"{a.model} on {_hardware(a)} and on {_hardware(b)}{at}: one model on two devices",
    )


def _first_pair_across_devices(runs: list[RunForPairing]) -> tuple[RunForPairing, RunForPairing] | None:
    """The first pair (i < j, least i, then least j) of runs with a device, alike in model,
    batch size, precision and compiler, on two hardwares; in one pass a run rather than a
    pass a pair (1,000 runs of one configuration took 1.1 s pairwise). Within a group of
    alike runs, the first later run on other hardware than run p's is the next run whose
    hardware differs from p's neighbour's, found walking the group backwards."""
    groups: dict[tuple[str, int | None, str | None, str | None], list[int]] = {}
    hardware = [_hardware(run) for run in runs]
    for position, run in enumerate(runs):
        if run.device:
            groups.setdefault((run.model, run.batch_size, run.precision, run.compiler), []).append(position)
    best: tuple[int, int] | None = None
    for members in groups.values():
        later_other: int | None = None  # for the member after this one: its first later member on other hardware
        for index in range(len(members) - 2, -1, -1):
            here, after = members[index], members[index + 1]
            later_other = after if hardware[after] != hardware[here] else later_other
            if later_other is not None and (best is None or (here, later_other) < best):
                best = (here, later_other)
    return None if best is None else (runs[best[0]], runs[best[1]])


def _first_variant(variants: Sequence[Pair]) -> SuggestedPair | None:
    """Rule 4: the first pair that varies a precision or compiler (``variant_pairs``)."""
    if not variants:
        return None
    first = variants[0]
    return SuggestedPair(
        baseline=first.baseline,
        target=first.target,
        reason=f"{first.baseline} and {first.target} are {first.model} in two {first.varies}s",
    )


def _two_runs_of_one_model(runs: list[RunForPairing]) -> SuggestedPair | None:
    """Rule 5, by model key: the first two runs (in ``itertools.combinations`` order) whose
    model is one: the first run whose model comes again, and its next run of that model."""
    first_of: dict[str, int] = {}
    second_of: dict[str, int] = {}
    for position, run in enumerate(runs):
        if run.model in first_of:
            second_of.setdefault(run.model, position)
        else:
            first_of[run.model] = position
    if not second_of:
        return None
    model = min(second_of, key=first_of.__getitem__)
    a, b = runs[first_of[model]], runs[second_of[model]]
    return SuggestedPair(baseline=a.run, target=b.run, reason=f"two runs of {a.model}")


def _two_experiments(runs: list[RunForPairing]) -> SuggestedPair | None:
    """Rule 5, by ops: the two runs of one device and batch size whose op names overlap
    most, where they overlap as one model's do (``SAME_MODEL_JACCARD``). Pairwise within
    configurations of at most ``MAX_COMPARED_BY_OPS`` runs, so a large logdir stays cheap."""
    configurations: dict[tuple[str | None, int | None], list[RunForPairing]] = {}
    for run in runs:
        configurations.setdefault((_hardware(run), run.batch_size), []).append(run)
    alike = [
        (jaccard(a.op_names, b.op_names), a, b)
        for group in configurations.values()
        if len(group) <= MAX_COMPARED_BY_OPS
        for a, b in itertools.combinations(group, 2)
    ]
    if not alike:
        return None
    score, a, b = max(alike, key=lambda item: item[0])
    if score < SAME_MODEL_JACCARD - 1e-9:  # exactly the threshold is enough (float rounding aside)
        return None
    at = f" at batch size {a.batch_size}" if a.batch_size else ""
    return SuggestedPair(
        baseline=a.run,
        target=b.run,
        reason=f"the same ops (Jaccard {score:.2f}) on {_hardware(a) or 'one device'}{at}: two "
        "experiments of one model",
    )


def _any_runs(runs: list[RunForPairing]) -> SuggestedPair | None:
    """Rule 6: the first two runs, though of different models (the reason warns), or the
    only run against itself; None for no run."""
    if len(runs) >= 2:
        return SuggestedPair(
            baseline=runs[0].run,
            target=runs[1].run,
            reason=f"no two runs of one model in this logdir: {runs[0].run} ({runs[0].model}) and "
            f"{runs[1].run} ({runs[1].model}) are different models, so their speedups "
            "compare different work",
        )
    if runs:
        return SuggestedPair(baseline=runs[0].run, target=runs[0].run, reason="the only run")
    return None


def _hardware(run: RunForPairing) -> str | None:
    """``CPU``, ``GPU (NVIDIA H100 80GB HBM3)``: the device and, where known, its model."""
    if run.device and run.device_name and run.device != "CPU":
        return f"{run.device} ({run.device_name})"
    return run.device


NO_ACCELERATOR_NOTICE = (
    "No accelerator run in this logdir: every run read so far ran on the CPU, so there is no CPU->GPU speedup to "
    "show yet. Record the same model on a GPU into this logdir, e.g. `tb-opcompare record --logdir LOGDIR "
    "--model NAME --batch-sizes 1,16,64 --devices gpu -- python train.py --batch-size {batch_size}` on a machine "
    "with one (in a checkout of tb-opcompare: `make demo-logs-gpu`)."
)


def notices(runs: list[RunForPairing]) -> list[str]:
    known = [run.device for run in runs if run.device is not None]
    if known and all(device == "CPU" for device in known):
        return [NO_ACCELERATOR_NOTICE]
    return []
