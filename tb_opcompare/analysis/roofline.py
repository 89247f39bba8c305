"""Why an op sped up (issue 54): each op of two runs on its device's roofline. The maths
only, no I/O: it takes each run's work table (``OpProfile.work_table``) and the roofs its ops
ran under, and returns one row per op.

On each side, an op's calls whose work is known are timed by the kernels they launched
where the run has a device and they launched any (its calls that launched none, which ran
on the host, are then left out), else by their wall time on the host (and then under the
CPU's roof). Then:

- achieved FLOP/s and bytes/s: its FLOPs and bytes over that time;
- arithmetic intensity: FLOPs per byte;
- the roof at that intensity: ``min(peak FLOP/s, intensity x bandwidth)``; the op is
  compute-bound where the intensity reaches the ridge (``peak / bandwidth``), else
  memory-bound;
- the fraction of the roof it reached, and the time it would take at the roof,
  ``max(FLOPs / peak, bytes / bandwidth)``: the headroom is its time less that;
- an fp32 run's op whose kernels computed on TF32 tensor cores (their names say so: cuDNN's
  convolutions, by PyTorch's default) is under the TF32 peak, the unit it ran on;
- an achieved rate above a peak is no measurement of the device but of a wrong input (a
  FLOP count, a kernel timed short, fp32 on TF32 tensor cores whose kernels do not say so):
  such an op is named, with the suspect, and never given a fraction above 1.

Per pair, what the change did: ``moved along the roof`` where the op reached about the same
fraction of its roof on both sides (within ``SAME_FRACTION``: the speedup is the roofs',
the device's peak or the op's intensity), else ``closed the gap`` (nearer its roof) or
``widened the gap``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from tb_opcompare.analysis.numerics import above, below

SAME_FRACTION = 1.25  # fractions of the roof within this factor of each other are "about the same"
MOVED, CLOSED, WIDENED = "moved along the roof", "closed the gap", "widened the gap"

SIDE_COLUMNS = [
    "calls",
    "known_calls",
    "source",
    "timed_on",
    "time_us",
    "share",
    "flops",
    "bytes",
    "flops_per_s",
    "bytes_per_s",
    "intensity",
    "roof_flops_per_s",
    "roof_precision",
    "fraction_of_roof",
    "bound",
    "time_at_roof_us",
    "headroom_us",
    "suspect",
]


@dataclasses.dataclass(frozen=True)
class Roof:
    """A processor's limits at the precision the run computed in (None: unknown);
    ``tf32_peak_flops``: where that precision is fp32, the peak of its TF32 tensor cores, the
    roof of the ops whose kernels ran there (``WORK_COLUMNS``' ``device_tf32_us``)."""

    peak_flops: float | None
    memory_bandwidth: float | None
    precision: str | None = None
    tf32_peak_flops: float | None = None


def _on_tf32(work: pd.DataFrame, roof: Roof) -> np.ndarray:
    """The ops measured against the TF32 roof: those with most of their kernel time in TF32
    tensor-core kernels, on a device whose fp32 roof has a TF32 peak beside it."""
    if roof.tf32_peak_flops is None:
        return np.zeros(len(work), dtype=bool)
    device_us = work["device_us"].to_numpy(dtype=float)
    tf32_us = work["device_tf32_us"].to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        return np.asarray(tf32_us > 0.5 * device_us)


@dataclasses.dataclass(frozen=True)
class SideRoofs:
    """A run's roofs: its accelerator's (ops timed by their kernels) and its CPU's (ops timed
    on the host); ``has_device``: whether the run has kernels to time ops by."""

    device: Roof
    host: Roof
    has_device: bool


def side_rows(work: pd.DataFrame, roofs: SideRoofs) -> pd.DataFrame:
    """``SIDE_COLUMNS`` of one run, indexed by op name."""
    on_device = roofs.has_device & (work["device_calls"].to_numpy() > 0)
    known = np.where(on_device, work["device_calls"].to_numpy(), work["known_calls"].to_numpy())

    def timed(device: str, host: str) -> np.ndarray:
        values: np.ndarray = np.where(on_device, work[device].to_numpy(dtype=float), work[host].to_numpy(dtype=float))
        return values

    time_us = timed("device_us", "host_us")
    time_us = np.where((known > 0) & (time_us > 0), time_us, np.nan)
    flops, size = timed("device_flops", "flops"), timed("device_bytes", "bytes")
    peak, precision = _peaks(work, roofs, on_device)
    bandwidth = np.where(on_device, _or_nan(roofs.device.memory_bandwidth), _or_nan(roofs.host.memory_bandwidth))
    with np.errstate(divide="ignore", invalid="ignore"):
        flops_per_s, bytes_per_s = flops / (time_us * 1e-6), size / (time_us * 1e-6)
        intensity = np.where(size > 0, flops / size, np.nan)
        # an op that computes nothing (a copy) is measured against the bandwidth alone
        at_roof_s = np.where(flops > 0, np.maximum(flops / peak, size / bandwidth), size / bandwidth)
        roof = np.where(flops > 0, flops / at_roof_s, np.nan)
        fraction = np.where(flops > 0, flops_per_s / roof, bytes_per_s / bandwidth)
        bound = np.where(below(intensity, peak / bandwidth), "memory", "compute")  # below the ridge: memory-bound
    # None as a 0-d object array: numpy's stubs take no bare None for where's values
    bound = np.where(np.isnan(at_roof_s) | np.isnan(time_us), np.array(None, dtype=object), bound)
    suspect = [_suspect(*values) for values in zip(flops_per_s, peak, bytes_per_s, bandwidth, precision)]
    total = np.nansum(time_us)
    rows = pd.DataFrame(
        {
            "calls": work["calls"].to_numpy(),
            "known_calls": known,
            "source": work["source"].to_numpy(),
            "timed_on": np.where(
                np.isnan(time_us), np.array(None, dtype=object), np.where(on_device, "device", "host")
            ),
            "time_us": time_us,
            "share": time_us / total if total > 0 else np.full(len(time_us), np.nan),
            "flops": flops,
            "bytes": size,
            "flops_per_s": flops_per_s,
            "bytes_per_s": bytes_per_s,
            "intensity": intensity,
            "roof_flops_per_s": roof,
            "roof_precision": np.where(np.isnan(roof), np.array(None, dtype=object), precision),
            "fraction_of_roof": np.where([s is None for s in suspect], fraction, np.nan),
            "bound": bound,
            "time_at_roof_us": at_roof_s * 1e6,
            "headroom_us": time_us - at_roof_s * 1e6,
            "suspect": suspect,
        },
        index=pd.Index(work["op_name"].to_numpy(), name="op_name"),
    )
    return rows.replace([np.inf, -np.inf], np.nan)


def _peaks(work: pd.DataFrame, roofs: SideRoofs, on_device: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each op's compute peak and the precision it is of: the device's at the run's
    precision, TF32's for an op on TF32 tensor cores (``_on_tf32``), the host's for an op
    timed there."""
    tf32 = _on_tf32(work, roofs.device)
    device_peak = np.where(tf32, _or_nan(roofs.device.tf32_peak_flops), _or_nan(roofs.device.peak_flops))
    device_precision = np.where(tf32, "tf32", np.array(roofs.device.precision, dtype=object))
    peak = np.where(on_device, device_peak, _or_nan(roofs.host.peak_flops))
    precision = np.where(on_device, device_precision, np.array(roofs.host.precision, dtype=object))
    return peak, precision


def _or_nan(value: float | None) -> float:
    return math.nan if value is None else float(value)


def _suspect(
    flops_per_s: float, peak: float, bytes_per_s: float, bandwidth: float, precision: str | None
) -> str | None:
    """Why an achieved rate above a peak cannot be, or None where none is (decided on the
    settled rate, ``analysis.numerics``: a rate a few ulps off its peak reads the same on
    every machine). ``precision``: the peak's (under TF32's, no faster unit is left)."""
    if _above(flops_per_s, peak):
        unit = "" if precision == "tf32" else ", or a faster unit than the precision's (TF32 kernels not named so)"
        return f"{flops_per_s / peak:.2f}x the peak FLOP/s: a FLOP count too high, kernels timed short{unit}"
    if _above(bytes_per_s, bandwidth):
        return (
            f"{bytes_per_s / bandwidth:.2f}x the memory bandwidth: its tensors were in a cache, or the "
            "bytes counted are more than it moved"
        )
    return None


def _above(value: float, limit: float) -> bool:
    return bool(np.isfinite(value) and np.isfinite(limit) and above(value, limit))


def roofline_rows(baseline: pd.DataFrame, target: pd.DataFrame) -> pd.DataFrame:
    """One row per op of either run's ``side_rows``: ``op_name``, ``baseline_*`` and
    ``target_*`` (``SIDE_COLUMNS``), ``speedup`` (the baseline's time per known call over
    the target's), ``work_ratio`` (the target's FLOPs per call over the baseline's) and
    ``change``; the ops with the most time (either side's share) first."""
    joined = baseline.add_prefix("baseline_").join(target.add_prefix("target_"), how="outer")
    per_call = {
        side: joined[f"{side}_time_us"] / joined[f"{side}_known_calls"].where(joined[f"{side}_known_calls"] > 0)
        for side in ("baseline", "target")
    }
    joined["speedup"] = per_call["baseline"] / per_call["target"]
    # the work of a call on each side: a batch size changed, or a compiler left only some of
    # an op's calls to it (torch.compile's GPU graph keeps the small addmm, runs the large in
    # its own kernels), and a per-call speedup compares different work
    work = {
        side: joined[f"{side}_flops"] / joined[f"{side}_known_calls"].where(joined[f"{side}_known_calls"] > 0)
        for side in ("baseline", "target")
    }
    joined["work_ratio"] = work["target"] / work["baseline"].where(work["baseline"] > 0)
    joined["change"] = [
        _change(b, t) for b, t in zip(joined["baseline_fraction_of_roof"], joined["target_fraction_of_roof"])
    ]
    largest = joined[["baseline_share", "target_share"]].max(axis=1).fillna(-1.0)
    joined = joined.assign(_largest=largest).sort_values(["_largest"], ascending=False, kind="stable")
    counts = {column: "Int64" for column in joined.columns if column.endswith("calls")}
    return joined.drop(columns="_largest").astype(counts).reset_index()


def _change(baseline: float, target: float) -> str | None:
    if not (np.isfinite(baseline) and np.isfinite(target)) or baseline <= 0 or target <= 0:
        return None
    ratio = target / baseline
    if above(ratio, SAME_FRACTION):
        return CLOSED
    if below(ratio, 1 / SAME_FRACTION):
        return WIDENED
    return MOVED


def work_totals(rows: pd.DataFrame) -> tuple[float | None, float | None]:
    """A side's (FLOPs, time µs) over its ops whose work and time are known: the run's
    achieved rate on the ops the roofline knows, whole step against both peaks."""
    known = rows["time_us"].notna() & rows["flops"].notna()
    if not known.any():
        return None, None
    return float(rows.loc[known, "flops"].sum()), float(rows.loc[known, "time_us"].sum())
