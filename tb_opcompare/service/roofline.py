"""The roofline document (issue 54): why an op sped up. Each op's work, its achieved rate
and its device's roof on both sides of a pair, for ``tb-opcompare roofline``, its route
and CSV."""

from __future__ import annotations

import pandas as pd

from tb_opcompare.analysis.device_limits import Limits, device_limits, from_sidecar, roof_precision
from tb_opcompare.analysis.roofline import Roof, SideRoofs, roofline_rows, side_rows, work_totals
from tb_opcompare.schema.contract import ROOFLINE_COLUMNS, RooflineDocument, RooflineLimits, RooflineRun
from tb_opcompare.service.records import as_records
from tb_opcompare.store.catalog import Catalog, LoadedRun

# The sidecar's fields that give a run's limits: its accelerator's (or, on a CPU run, the
# CPU's) and, on an accelerator run, its host CPU's.
DEVICE_LIMITS, HOST_LIMITS = "device_limits", "host_limits"
_SIDECAR_EXAMPLE = (
    '"device_limits": {"peak_flops": {"fp32": 2.0e12}, "memory_bandwidth": 1.0e11, '
    '"device": "Xeon 8480+, 56 cores", "source": "a vendor page"}'
)


def roofline_document(
    catalog: Catalog, baseline: str, target: str, baseline_session: str | None = None, target_session: str | None = None
) -> RooflineDocument:
    """Raises UnknownRunError for unknown runs or sessions, ProfileError for unreadable ones."""
    loaded = catalog.load(baseline, baseline_session), catalog.load(target, target_session)
    same = (loaded[0].source.run, loaded[0].session) == (loaded[1].source.run, loaded[1].session)
    sides, runs, notes = [], [], []
    for run in loaded[:1] if same else loaded:  # one capture on both sides: read and noted once
        roofs, limits = run_roofs(catalog, run)
        rows = side_rows(run.profile.work_table.frame(), roofs)
        sides.append(rows)
        runs.append(_run_record(run, limits, rows))
        notes += _run_notes(run, roofs, rows)
    if same:
        sides.append(sides[0])
        runs.append(runs[0])
    table = roofline_rows(*sides)[ROOFLINE_COLUMNS]
    return RooflineDocument(
        baseline=runs[0], target=runs[1], columns=list(ROOFLINE_COLUMNS), rows=as_records(table), notes=notes
    )


def run_roofs(catalog: Catalog, run: LoadedRun) -> tuple[SideRoofs, list[tuple[str, Limits | None, str | None]]]:
    """A run's roofs (its accelerator's and its CPU's) and, for the document, each with its
    limits and the precision of its compute roof."""
    facts = run.profile.facts
    on_cpu = facts.device in (None, "CPU")
    device = (
        None
        if on_cpu
        else device_limits(facts.device_name, facts.device_properties, _claim(catalog, run, DEVICE_LIMITS))
    )
    host = from_sidecar(_claim(catalog, run, DEVICE_LIMITS if on_cpu else HOST_LIMITS))
    work = run.profile.work_table.frame()
    has_device = not on_cpu and bool(work["device_us"].notna().any())
    limits = ([] if on_cpu else [("device", device)]) + [("host", host)]
    described = [(processor, found, _precision(found, facts.precision)) for processor, found in limits]
    roof = {processor: _roof(found, precision) for processor, found, precision in described}
    return SideRoofs(roof.get("device", Roof(None, None)), roof["host"], has_device), described


def _claim(catalog: Catalog, run: LoadedRun, field: str) -> dict | None:
    return catalog.sidecar_object(run.source, field)


def _precision(limits: Limits | None, precision: str | None) -> str | None:
    return roof_precision(limits, precision) if limits is not None else None


def _roof(limits: Limits | None, precision: str | None) -> Roof:
    if limits is None:
        return Roof(None, None)
    peak = limits.peak_flops.get(precision) if precision else None
    tf32 = limits.peak_flops.get("tf32") if precision == "fp32" else None
    return Roof(peak, limits.memory_bandwidth, precision, tf32)


def _run_record(run: LoadedRun, limits: list, rows: pd.DataFrame) -> RooflineRun:
    flops, time_us = work_totals(rows)
    return RooflineRun(
        run=run.source.run,
        device_name=run.profile.facts.device_name,
        precision=run.profile.facts.precision,
        limits=[
            RooflineLimits(
                processor=processor,
                device=found.device if found else None,
                precision=precision,
                peak_flops=found.peak_flops.get(precision) if found and precision else None,
                peak_flops_by_precision=dict(found.peak_flops) if found else {},
                memory_bandwidth=found.memory_bandwidth if found else None,
                source=found.source if found else None,
            )
            for processor, found, precision in limits
        ],
        flops=flops,
        time_us=time_us,
        flops_per_s=flops / (time_us * 1e-6) if flops is not None and time_us else None,
    )


def _run_notes(run: LoadedRun, roofs: SideRoofs, rows: pd.DataFrame) -> list[str]:
    """What the user should know of one run: no work known (and how to record it), ops of
    unknown work, unknown limits (and the sidecar that gives them), suspect ops."""
    name, facts, notes = run.source.run, run.profile.facts, []
    if not len(rows):
        how = (
            "record it with torch.profiler's record_shapes=True (tb_opcompare.recording.torch_profile does)"
            if facts.framework == "PyTorch"
            else f"its format ({facts.format}) carries neither FLOPs nor input shapes this version reads"
        )
        return [f"{name}: no op's work is known: {how}."]
    unknown = rows[rows["known_calls"] == 0]
    if len(unknown):
        reasons = sorted(set(unknown["source"].str.removeprefix("unknown: ")))
        notes.append(
            f"{name}: the work of {len(unknown)} ops is unknown ({', '.join(unknown.index[:5])}): {'; '.join(reasons)}."
        )
    timed = rows["timed_on"]
    for processor, roof in (("device", roofs.device), ("host", roofs.host)):
        if (timed == processor).any() and (roof.peak_flops is None or roof.memory_bandwidth is None):
            field = HOST_LIMITS if processor == "host" and roofs.has_device else DEVICE_LIMITS
            what = "its CPU" if processor == "host" else (facts.device_name or "its device")
            notes.append(
                f"{name}: the limits of {what} are unknown, so its ops timed there have no roof: give them in the "
                f"run's opcompare.json as {_SIDECAR_EXAMPLE.replace(DEVICE_LIMITS, field)}."
            )
    tf32 = (rows["roof_precision"] == "tf32").to_numpy()
    if tf32.any() and roofs.device.tf32_peak_flops is not None:
        notes.append(
            f"{name}: the kernels of {int(tf32.sum())} ops ({', '.join(rows.index[tf32][:5])}) computed their fp32 "
            "tensors on TF32 tensor cores, as their names say (PyTorch's default for cuDNN's convolutions, and for "
            "matrix products where allowed): their compute roof is the TF32 peak, "
            f"{roofs.device.tf32_peak_flops / 1e12:g} TFLOP/s."
        )
    for op, why in rows["suspect"].dropna().items():
        notes.append(f"{name}: {op} is not placed on the roof: its achieved rate is {why}.")
    return notes
