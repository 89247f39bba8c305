"""Automatic baseline/target pairs: CPU and accelerator runs of the same model.

First by name: same model key (or sidecar ``model``) and same batch size. Runs left
unpaired whose names tell nothing (``log_prefetch/128_20210203-201149``) are then
paired by the overlap of their op-name sets: Jaccard >= 0.5, best match first, and
equal batch sizes where both are known.
"""

from __future__ import annotations

import dataclasses

JACCARD_THRESHOLD = 0.5


@dataclasses.dataclass
class RunForPairing:
    run: str
    model: str
    device: str | None
    batch_size: int | None
    op_names: frozenset[str]


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def pair_runs(runs: list[RunForPairing]) -> list[dict]:
    baselines = [r for r in runs if r.device == "CPU"]
    targets = [r for r in runs if r.device not in (None, "CPU")]  # None: not read yet, name says nothing
    pairs = []
    paired: set[str] = set()
    for cpu in baselines:
        for accelerator in targets:
            if cpu.model == accelerator.model and cpu.batch_size == accelerator.batch_size:
                pairs.append(_pair(cpu, accelerator, cpu.model, "run names"))
                paired.update((cpu.run, accelerator.run))
    candidates = []
    for cpu in baselines:
        for accelerator in targets:
            if cpu.run in paired or accelerator.run in paired:
                continue
            if cpu.batch_size and accelerator.batch_size and cpu.batch_size != accelerator.batch_size:
                continue
            score = jaccard(cpu.op_names, accelerator.op_names)
            if score >= JACCARD_THRESHOLD:
                candidates.append((score, cpu, accelerator))
    for score, cpu, accelerator in sorted(candidates, key=lambda c: -c[0]):
        if cpu.run in paired or accelerator.run in paired:
            continue
        pairs.append(_pair(cpu, accelerator, cpu.model, f"op names (Jaccard {score:.2f})"))
        paired.update((cpu.run, accelerator.run))
    return pairs


def _pair(baseline: RunForPairing, target: RunForPairing, model: str, matched_by: str) -> dict:
    return {
        "baseline": baseline.run,
        "target": target.run,
        "model": model,
        "batch_size": baseline.batch_size if baseline.batch_size is not None else target.batch_size,
        "matched_by": matched_by,
    }
