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
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tb_opcompare.service.check import check_document  # noqa: E402
from tb_opcompare.store.catalog import Catalog  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures"
IDENTICAL = [FIXTURES / "gpu_h100" / "demo", FIXTURES / "gpu_h100" / "resnet18", FIXTURES / "repeats" / "logdir",
             FIXTURES / "repeats20" / "logdir"]
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
    args = parser.parse_args()
    tally = collections.Counter()
    started = time.perf_counter()
    for logdir in IDENTICAL:
        catalog = Catalog(str(logdir), cache_dir=None)
        for name, runs in sorted(configurations(catalog).items()):
            pairs_of_pairs = [[list(a), list(b)] for a, b in itertools.permutations(itertools.combinations(runs, 2), 2)
                              if not set(a) & set(b)]
            for kind, comparisons in (("1 vs 1", [[[a], [b]] for a, b in itertools.permutations(runs, 2)]),
                                      ("2 vs 2", pairs_of_pairs),
                                      (f"{len(runs) // 2} vs {len(runs) - len(runs) // 2}", list(splits(runs)))):
                comparisons = sampled(comparisons, args.max_comparisons)
                if kind == "1 vs 1" or len(runs) >= 4:
                    for baseline, target in comparisons:
                        document = check_document(catalog, baseline, target, allow_one_run=True,
                                                  resamples=args.resamples)
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
        print(f"  {kind}: {tally[kind, 'failed']}/{comparisons} checks failed "
              f"({tally[kind, 'failed'] / comparisons:.1%}); {tally[kind, 'ops flagged']}/{tally[kind, 'ops']} "
              f"gated ops flagged slower; {tally[kind, 'any change']}/{comparisons} reported any significant change")
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
                document = check_document(catalog, base[start:start + size], slow[start:start + size],
                                          allow_one_run=True, resamples=args.resamples)
                row = next(row for row in document.rows if row.key == SLOWED_ROW)
                caught += row.verdict == "slower"
                others += sum(r.verdict == "slower" and r.key != SLOWED_ROW and r.gated for r in document.rows)
                checks += 1
                last = row
            print(f"  {size} vs {size}: '{SLOWED_ROW}' flagged slower in {caught}/{checks} checks (last: speedup "
                  f"{last.speedup:.2f}, adjusted for run speed {last.adjusted_speedup:.2f}, 95% interval "
                  f"{last.speedup_low:.2f}-{last.speedup_high:.2f}, p {last.p_value:.4f}); other ops flagged "
                  f"slower: {others}")


def _repeat(run: str) -> int:
    return int(run.rsplit("_rep", 1)[1])


if __name__ == "__main__":
    main()
