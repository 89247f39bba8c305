"""How often does `tb-opcompare check` raise a false alarm, and does it catch a real slowdown?

Identical configurations (repeats of one model, device, batch size and precision, each
recorded in its own process) are compared with one another: every ordered pair of runs
(one run a side: the noise comes from the logdir's repeats), and splits of a
configuration's repeats into two groups. Each comparison that fails the check is a false
alarm. Then the deliberately slowed variant (`tests/fixtures/repeats`, one row made
slower) is checked against the normal runs: the slowed row should be flagged, nothing else.

    python benchmarks/bench_check.py [--resamples 4000] [--max-comparisons 300]

Prints the rates; reads only committed recordings.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tb_opcompare.service.check import check_document  # noqa: E402
from tb_opcompare.store.catalog import Catalog  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures"
IDENTICAL = [
    FIXTURES / "gpu_h100" / "demo",
    FIXTURES / "gpu_h100" / "resnet18",
    FIXTURES / "repeats" / "logdir",
    FIXTURES / "repeats20" / "logdir",
    FIXTURES / "repeats_wide" / "logdir",
]
WIDE = FIXTURES / "repeats_wide" / "logdir"  # a real change: the head's dense layer 25% wider, one thread
NOISY = FIXTURES / "repeats_noisy" / "logdir"  # as WIDE, some runs slowed by a neighbour's load (issue 52)
POWER_REPEATS = 4  # the gate: 4 repeats a side, nothing else in the logdir
SLOWED_ROW = "head"
SLOWED = [("repeats", "cnnslow_", "about 1.6x"), ("repeats20", "cnn20_", "about 1.2x")]  # (fixture, runs, how much)


def configurations(catalog: Catalog) -> dict[str, list[str]]:
    groups = collections.defaultdict(list)
    for source in catalog.sources():
        if "_rep" in source.run:
            groups[source.run.rsplit("_rep", 1)[0]].append(source.run)
    return {name: sorted(runs) for name, runs in groups.items() if len(runs) >= 2}


def splits(runs: list[str]):
    """Every way to split the runs into two non-empty groups of sizes as equal as they go."""
    size = len(runs) // 2
    seen = set()
    for baseline in itertools.combinations(runs, size):
        target = tuple(run for run in runs if run not in baseline)
        if (target, baseline) not in seen:
            seen.add((baseline, target))
            yield list(baseline), list(target)


def sampled(comparisons: list, limit: int) -> list:
    """At most ``limit`` of the comparisons, drawn with a fixed seed: 16 repeats give 10,920
    two-against-two comparisons, and a rate needs a few hundred."""
    if len(comparisons) <= limit:
        return comparisons
    return random.Random(20261123).sample(comparisons, limit)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--resamples", type=int, default=4000)
    parser.add_argument("--max-comparisons", type=int, default=300, help="per configuration and kind")
    parser.add_argument("--power-draws", type=int, default=100, help="random 4-against-4 logdirs for the gate's power")
    parser.add_argument("--only-noisy", action="store_true", help="only the noisy runner's scenario")
    args = parser.parse_args()
    noisy_runner(args.power_draws)
    if args.only_noisy:
        return
    gate_power(args.power_draws, args.resamples)
    detectable_effect(args.power_draws)
    tally = collections.Counter()
    started = time.perf_counter()
    for logdir in IDENTICAL:
        catalog = Catalog(str(logdir), cache_dir=None)
        for name, runs in sorted(configurations(catalog).items()):
            pairs_of_pairs = [
                [list(a), list(b)]
                for a, b in itertools.permutations(itertools.combinations(runs, 2), 2)
                if not set(a) & set(b)
            ]
            for kind, comparisons in (
                ("1 vs 1", [[[a], [b]] for a, b in itertools.permutations(runs, 2)]),
                ("2 vs 2", pairs_of_pairs),
                (f"{len(runs) // 2} vs {len(runs) - len(runs) // 2}", list(splits(runs))),
            ):
                comparisons = sampled(comparisons, args.max_comparisons)
                if kind == "1 vs 1" or len(runs) >= 4:
                    for baseline, target in comparisons:
                        document = check_document(
                            catalog, baseline, target, allow_one_run=True, resamples=args.resamples
                        )
                        gated = [row for row in document.rows if row.gated]
                        tally[kind, "comparisons"] += 1
                        tally[kind, "failed"] += not document.passed
                        tally[kind, "ops"] += len(gated)
                        tally[kind, "ops flagged"] += sum(row.verdict == "slower" for row in gated)
                        tally[kind, "any change"] += document.slower + document.faster > 0
    elapsed = time.perf_counter() - started
    print("Identical configurations (false alarms: checks that fail; goal at most 5%):")
    for kind in sorted({kind for kind, _ in tally}):
        comparisons = tally[kind, "comparisons"]
        print(
            f"  {kind}: {tally[kind, 'failed']}/{comparisons} checks failed "
            f"({tally[kind, 'failed'] / comparisons:.1%}); {tally[kind, 'ops flagged']}/{tally[kind, 'ops']} "
            f"gated ops flagged slower; {tally[kind, 'any change']}/{comparisons} reported any significant change"
        )
    print(f"  ({sum(tally[k, 'comparisons'] for k, _ in tally if _ == 'comparisons')} checks in {elapsed:.1f} s)")

    for fixture, prefix, amount in SLOWED:
        catalog = Catalog(str(FIXTURES / fixture / "logdir"), cache_dir=None)
        runs = [source.run for source in catalog.sources()]
        base = sorted((run for run in runs if run.startswith("cnn_")), key=_repeat)
        slow = sorted((run for run in runs if run.startswith(prefix)), key=_repeat)
        print(f"Slowed variant ({fixture}: '{SLOWED_ROW}' made {amount} slower on purpose), base -> slow:")
        for size in sorted({size for size in (1, 2, 3, 4, 8) if size <= len(base)} | {len(base)}):
            caught = others = checks = 0
            for start in range(0, len(base) - size + 1, size):
                document = check_document(
                    catalog,
                    base[start : start + size],
                    slow[start : start + size],
                    allow_one_run=True,
                    resamples=args.resamples,
                )
                row = next(row for row in document.rows if row.key == SLOWED_ROW)
                caught += row.verdict == "slower"
                others += sum(r.verdict == "slower" and r.key != SLOWED_ROW and r.gated for r in document.rows)
                checks += 1
                last = row
            print(
                f"  {size} vs {size}: '{SLOWED_ROW}' flagged slower in {caught}/{checks} checks (last: speedup "
                f"{last.speedup:.2f}, adjusted for run speed {last.adjusted_speedup:.2f}, {last.interval_level:.1%} "
                f"interval {last.speedup_low:.2f}-{last.speedup_high:.2f}, p {last.p_value:.4f}); other ops flagged "
                f"slower: {others}"
            )


def gate_power(draws: int, resamples: int) -> None:
    """The gate as a user meets it: a logdir holding only 4 runs a side, drawn from the
    12 repeats of each variant of ``repeats_wide``. Real change: the check fails (any gated
    op or the whole step slower); identical: 4 base runs against 4 other base runs (or wide
    against wide) must pass."""
    runs = {variant: [f"{variant}_cpu_bs16_rep{k}" for k in range(1, 13)] for variant in ("cnn", "cnnwide")}
    rng = random.Random(20261126)
    caught = addmm = false_alarms = 0
    for draw in range(draws):
        sides = [rng.sample(runs["cnn"], POWER_REPEATS), rng.sample(runs["cnnwide"], POWER_REPEATS)]
        same = rng.sample(runs["cnn" if draw % 2 else "cnnwide"], 2 * POWER_REPEATS)
        for (baseline, target), real in (
            ((sides[0], sides[1]), True),
            ((same[:POWER_REPEATS], same[POWER_REPEATS:]), False),
        ):
            with tempfile.TemporaryDirectory() as logdir:
                for run in baseline + target:
                    shutil.copytree(WIDE / run, Path(logdir) / run)
                document = check_document(Catalog(logdir, cache_dir=None), baseline, target, resamples=resamples)
            if real:
                caught += not document.passed
                addmm += any(row.key == "aten::addmm" and row.verdict == "slower" for row in document.rows)
            else:
                false_alarms += not document.passed
    print(
        f"Gate power ({POWER_REPEATS} repeats a side, nothing else in the logdir; repeats_wide: the head's dense "
        f"layer 25% wider, aten::addmm about 19% slower at 4% of op time):"
    )
    print(
        f"  real change: the check failed in {caught}/{draws} draws ({caught / draws:.0%}); aten::addmm flagged "
        f"slower in {addmm}/{draws}"
    )
    print(f"  identical runs: {false_alarms}/{draws} checks failed ({false_alarms / draws:.0%}; goal at most 5%)")


def detectable_effect(draws: int) -> None:
    """How big a regression of one op the gate catches, by repeats a side and by how noisy
    the op is from run to run, on this machine's real noise: identical runs
    (``repeats_wide``'s 12 base runs, one thread) split into two disjoint sides, and in the
    target side one op holding 5% of op time or more made slower by a known factor (its
    time in every step scaled). Prints, per op, its run-to-run noise (the standard
    deviation of its adjusted log typical time over the 12 runs) and the share of checks
    that flag it slower; and how many checks flagged any other op (false alarms)."""
    import numpy as np
    import pandas as pd

    from tb_opcompare.analysis import confidence

    catalog = Catalog(str(WIDE), cache_dir=None)
    samples = [confidence.profile_samples(catalog.load(f"cnn_cpu_bs16_rep{k}").profile) for k in range(1, 13)]
    keys = list(samples[0].keys)  # the same ops in every run here
    total = sum(sample.total_us for sample in samples)
    big = [key for key, value in zip(keys, total / total.sum()) if value >= 0.05]
    logs, _ = confidence._adjusted_for_run_speed(confidence.log_run_typical(samples, pd.Index(keys)))
    noise = dict(zip(keys, np.std(logs[:, :-1], axis=0, ddof=1)))
    rng = random.Random(20261126)
    effects, sizes = (0.15, 0.30, 0.50), (3, 4, 6)
    print(
        f"Detectable effect (identical one-thread CNN runs; each op holding >= 5% of op time slowed on purpose in "
        f"the target side; {draws} draws a cell; flagged slower at {', '.join(f'+{e:.0%}' for e in effects)}):"
    )
    false_alarms = checks = 0
    for key in sorted(big, key=noise.get):
        column = keys.index(key)
        cells = []
        for repeats in sizes:
            rates = []
            for effect in effects:
                scale = np.ones(len(keys))
                scale[column] = 1 + effect
                caught = 0
                for _ in range(draws):
                    picked = rng.sample(samples, 2 * repeats)
                    target = [_slowed(run, scale) for run in picked[repeats:]]
                    table = confidence.compare_with_confidence(
                        picked[:repeats], target, threshold=0.05, resamples=200
                    ).table
                    is_op = (table["key"] != confidence.WHOLE_STEP).to_numpy()
                    gated = is_op & (np.maximum(table["baseline_share"], table["target_share"]) >= 0.01).to_numpy()
                    verdict = confidence.verdicts(table, family=gated, alone=~is_op)
                    flagged = set(table["key"][(verdict == "slower") & gated])
                    caught += key in flagged
                    false_alarms += bool(flagged - {key})
                    checks += 1
                rates.append(f"{caught / draws:.0%}")
            cells.append(f"{repeats} vs {repeats}: {'/'.join(rates)}")
        print(f"  {key} (noise {noise[key]:.0%} a run): " + "; ".join(cells))
    print(f"  checks that flagged an op left alone: {false_alarms}/{checks}")


def _slowed(run, scale):
    """The run with each op's time, in every step and per execution, scaled by ``scale``."""
    import dataclasses

    medians = run.call_median_us * scale if len(run.call_median_us) else run.call_median_us
    return dataclasses.replace(
        run, total_us=run.total_us * scale, step_time_us=run.step_time_us * scale, call_median_us=medians
    )


def _gate(table, threshold_share: float = 0.01):
    """The verdicts a default check gives a confidence table: (keys flagged slower among the
    gated ops and the whole step, the table's rows with verdicts and detectable changes)."""
    import numpy as np

    from tb_opcompare.analysis import confidence

    is_op = (table["key"] != confidence.WHOLE_STEP).to_numpy()
    gated = is_op & (np.maximum(table["baseline_share"], table["target_share"]) >= threshold_share).to_numpy()
    verdict, level = confidence.decide(table, family=gated, alone=~is_op)
    detectable = confidence.detectable_slowdown(table, level, 0.05)
    flagged = set(table["key"][(verdict == "slower") & (gated | ~is_op)])
    return flagged, gated, detectable


# The profiled steps (from 0: steps 3..7 of 10) that the recorded neighbour's load ran through
# in the slowed runs of ``repeats_noisy`` (``record_noisy.py``'s default --load-steps 5-7).
LOADED_STEPS = (2, 3, 4)


def _hiccups(catalog: Catalog, variant: str) -> list:
    """The recorded hiccups of ``variant`` in ``repeats_noisy`` (rep2 and rep5: a busy loop on
    the trainer's core through three of the five profiled steps), each as (op keys, each
    op's time per execution in each profiled step over its median in that session's clean
    runs of the variant, each step's wall time over theirs)."""
    import numpy as np

    from tb_opcompare.analysis import confidence

    def per_execution(run):
        with np.errstate(divide="ignore", invalid="ignore"):
            return run.step_time_us / run.step_executions

    def load(repeats):
        return [confidence.profile_samples(catalog.load(f"{variant}_cpu_bs16_rep{k}").profile) for k in repeats]

    clean = load((1, 3, 4, 6))
    usual = np.nanmedian(np.stack([per_execution(run) for run in clean]), axis=(0, 1))
    usual_step = np.median(np.concatenate([run.step_wall_us for run in clean]))
    return [(run.keys, per_execution(run) / usual, run.step_wall_us / usual_step) for run in load((2, 5))]


def _with_hiccup(run, hiccup):
    """A clean run as if the recorded ``hiccup`` had hit it: its loaded steps' time of each op
    (and their wall time) scaled by the hiccup's ratios; its median execution by the median
    over its five steps of those ratios (1 in a step not loaded), as a median of executions
    spread evenly over the steps would move."""
    import dataclasses

    import numpy as np

    keys, ratios, wall = hiccup
    where = keys.get_indexer(run.keys)
    scale = np.ones((len(run.step_time_us), len(run.keys)))
    for step in LOADED_STEPS:
        ratio = np.where(where >= 0, ratios[step][np.maximum(where, 0)], 1.0)
        scale[step] = np.where(np.isfinite(ratio) & (ratio > 0), ratio, 1.0)
    step_time = run.step_time_us * scale
    step_wall = run.step_wall_us.copy()
    step_wall[list(LOADED_STEPS)] *= wall[list(LOADED_STEPS)]
    medians = run.call_median_us * np.median(scale, axis=0) if len(run.call_median_us) else run.call_median_us
    return dataclasses.replace(
        run,
        total_us=run.total_us + (step_time - run.step_time_us).sum(axis=0),
        step_time_us=step_time,
        step_wall_us=step_wall,
        call_median_us=medians,
    )


def noisy_runner(draws: int) -> None:
    """The gate on a noisy runner (issue 52), 4 runs a side, each side holding one run hit by
    a neighbour's load on its core for three of its five profiled steps. The runs of one
    check come from one recording session, as a CI job's do: three clean runs a side drawn
    from ``repeats_wide``'s 12 of one variant (one thread), and a fourth, another of those
    12, hit by a real recorded hiccup (``_hiccups``: ``repeats_noisy``'s rep2 or rep5 of
    that variant, each op's slowdown in each loaded step measured against that session's
    clean runs, and carried over, ``_with_hiccup``); the two sides' hiccups differ.
    (``repeats_noisy``'s clean runs are not drawn beside ``repeats_wide``'s: recorded two
    days apart on a busier machine, they ran every op 2-3x slower and some 2x slower than
    the rest, a second machine rather than a hiccup.) Identical: both sides of one variant,
    a check that fails is a false alarm. Detection: in the target side, one op holding 5% of
    op time or more made 15% (and 30%) slower on purpose, every run; the share of checks
    that flag it, and the median smallest detectable change the check reported for it. Real
    change: ``repeats_noisy``'s own cnn against cnnwide, unaltered (every choice of 3 clean
    runs a side plus one slowed run), the wider layer's `aten::addmm` or `aten::mm`
    flagged."""
    import numpy as np

    from tb_opcompare.analysis import confidence

    noisy = Catalog(str(NOISY), cache_dir=None)
    wide = Catalog(str(WIDE), cache_dir=None)

    def load(catalog, variant, repeats):
        return [confidence.profile_samples(catalog.load(f"{variant}_cpu_bs16_rep{k}").profile) for k in repeats]

    clean = {v: load(wide, v, range(1, 13)) for v in ("cnn", "cnnwide")}
    hiccups = {v: _hiccups(noisy, v) for v in ("cnn", "cnnwide")}
    rng = random.Random(20261128)

    def sides(variant):
        picked, hit = rng.sample(clean[variant], 8), rng.sample(hiccups[variant], 2)
        return picked[:3] + [_with_hiccup(picked[3], hit[0])], picked[4:7] + [_with_hiccup(picked[7], hit[1])]

    false_alarms = 0
    for draw in range(draws):
        baseline, target = sides("cnn" if draw % 2 else "cnnwide")
        false_alarms += bool(_gate(confidence.compare_with_confidence(baseline, target, threshold=0.05).table)[0])
    keys = list(clean["cnn"][0].keys)
    total = sum(run.total_us for run in clean["cnn"])
    big = [key for key, share in zip(keys, total / total.sum()) if share >= 0.05]
    print(
        f"Noisy runner (4 runs a side of one session, one in each hit by a recorded neighbour's load for 3 of "
        f"its 5 profiled steps; {draws} draws a cell):"
    )
    print(f"  identical configurations: {false_alarms}/{draws} checks failed ({false_alarms / draws:.1%}; goal <= 5%)")
    for effect in (0.15, 0.30):
        cells, caught_all, checks = [], 0, 0
        for key in big:
            scale = np.ones(len(keys))
            scale[keys.index(key)] = 1 + effect
            caught, seen = 0, []
            for _ in range(max(draws // 4, 10)):
                baseline, target = sides("cnn")
                table = confidence.compare_with_confidence(
                    baseline, [_slowed(run, scale) for run in target], threshold=0.05
                ).table
                flagged, _, detectable = _gate(table)
                caught += key in flagged
                seen.append(detectable[keys.index(key)] if key in list(table["key"]) else np.nan)
                checks += 1
            caught_all += caught
            cells.append(f"{key} {caught}/{len(seen)} (detectable {np.nanmedian(seen):.0%})")
        print(
            f"  one op of >= 5% made {effect:.0%} slower: flagged in {caught_all}/{checks} checks "
            f"({caught_all / checks:.0%}; goal >= 90%): " + "; ".join(cells)
        )
    base_clean, wide_clean = load(noisy, "cnn", (1, 3, 4, 6)), load(noisy, "cnnwide", (1, 3, 4, 6))
    slowed = {v: load(noisy, v, (2, 5)) for v in ("cnn", "cnnwide")}
    hit = checks = 0
    for kept in itertools.combinations(range(4), 3):
        for other in itertools.combinations(range(4), 3):
            for first in range(2):
                baseline = [base_clean[k] for k in kept] + [slowed["cnn"][first]]
                target = [wide_clean[k] for k in other] + [slowed["cnnwide"][1 - first]]
                flagged = _gate(confidence.compare_with_confidence(baseline, target, threshold=0.05).table)[0]
                hit += bool(flagged & {"aten::addmm", "aten::mm"})
                checks += 1
    print(f"  real change (the dense layer 25% wider): aten::addmm or aten::mm flagged in {hit}/{checks} checks")


def _repeat(run: str) -> int:
    return int(run.rsplit("_rep", 1)[1])


if __name__ == "__main__":
    main()
