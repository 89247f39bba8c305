"""What a device can do at most: peak FLOP/s per precision and peak memory bandwidth, the
roof of a roofline (issue 54). The maths and the table only, no I/O.

Where they come from, first found first:

1. the run's sidecar (``device_limits`` in ``opcompare.json``), which a user writes for a
   device this table lacks (a CPU, most often) or to correct it;
2. the profile itself: an xplane's device plane says its clock rate, SM count, compute
   capability and memory bandwidth (``ProfileFacts.device_properties``); peak FLOP/s are
   then clock x SMs x the FLOPs an SM does per clock at each precision, from NVIDIA's
   architecture whitepapers (the same product the datasheets' figures are);
3. ``DEVICES``: datasheet figures by accelerator model, matched on the device name the
   profile gives (PyTorch's ``deviceProperties``, an xplane's ``gpu_device_name``), each
   naming its source. Dense figures: the datasheets' "with sparsity" figures are twice
   these.

A CPU's limits are unknown unless the sidecar gives them: neither PyTorch's trace nor an
xplane names the CPU model, and a CPU's peak depends on its vector units, cores and
clock, which no table here can tell from the data.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

from tb_opcompare.schema.dimensions import canonical_precision

# The precisions a roof is given for, as ``schema.dimensions`` spells them.
PRECISIONS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8")


@dataclasses.dataclass(frozen=True)
class Limits:
    device: str  # what the limits are of: a model, or the profile's own description
    peak_flops: dict[str, float]  # precision -> FLOP/s
    memory_bandwidth: float | None  # bytes/s
    source: str  # where the figures come from: a URL, the profile, the sidecar


_T, _G = 1e12, 1e9
_NVIDIA_V100 = "https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf"
_NVIDIA_A100 = (
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
    "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
)
_NVIDIA_H100 = "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
_NVIDIA_H200 = "https://nvdam.widen.net/s/nb5zzzsjdf/hpc-datasheet-sc23-h200-datasheet-3002446"
_NVIDIA_RTX5000 = (
    "https://www.nvidia.com/content/dam/en-zz/Solutions/design-visualization/quadro-product-literature/"
    "quadro-rtx-5000-data-sheet-us-nvidia-704120-r4-web.pdf"
)
_AMD_MI250 = "https://www.amd.com/en/products/accelerators/instinct/mi200/mi250.html"
_AMD_MI250X = "https://www.amd.com/en/products/accelerators/instinct/mi200/mi250x.html"
_AMD_MI300X = "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html"


def _entry(device: str, source: str, bandwidth_gb_s: float, **tflops: float) -> Limits:
    return Limits(device, {name: value * _T for name, value in tflops.items()}, bandwidth_gb_s * _G, source)


_HOPPER = {"fp64": 67, "fp32": 67, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5, "fp8": 1979}
# (pattern on the device name, limits), the first match wins: the more specific names first.
# fp64 is the tensor-core figure where a device has one (the higher roof).
DEVICES: tuple[tuple[str, Limits], ...] = (
    (r"H200", _entry("NVIDIA H200 SXM", _NVIDIA_H200, 4800, **_HOPPER)),
    (
        r"H100.*PCIe",
        _entry("NVIDIA H100 PCIe", _NVIDIA_H100, 2000, fp64=51, fp32=51, tf32=378, bf16=756, fp16=756, fp8=1513),
    ),
    (r"H100", _entry("NVIDIA H100 SXM", _NVIDIA_H100, 3350, **_HOPPER)),
    (
        r"A100.*(80GB.*PCIe|PCIe.*80GB)",
        _entry("NVIDIA A100 80GB PCIe", _NVIDIA_A100, 1935, fp64=19.5, fp32=19.5, tf32=156, bf16=312, fp16=312),
    ),
    (
        r"A100.*80GB",
        _entry("NVIDIA A100 80GB SXM", _NVIDIA_A100, 2039, fp64=19.5, fp32=19.5, tf32=156, bf16=312, fp16=312),
    ),
    (r"A100", _entry("NVIDIA A100 40GB", _NVIDIA_A100, 1555, fp64=19.5, fp32=19.5, tf32=156, bf16=312, fp16=312)),
    (r"V100.*PCIE", _entry("NVIDIA V100 PCIe", _NVIDIA_V100, 900, fp64=7, fp32=14, fp16=112)),
    (r"V100", _entry("NVIDIA V100 SXM2", _NVIDIA_V100, 900, fp64=7.8, fp32=15.7, fp16=125)),
    (r"Quadro RTX 5000", _entry("NVIDIA Quadro RTX 5000", _NVIDIA_RTX5000, 448, fp32=11.2, fp16=89.2)),
    (
        r"MI300X",
        _entry(
            "AMD Instinct MI300X",
            _AMD_MI300X,
            5300,
            fp64=163.4,
            fp32=163.4,
            tf32=653.7,
            bf16=1307.4,
            fp16=1307.4,
            fp8=2614.9,
        ),
    ),
    (r"MI250X", _entry("AMD Instinct MI250X", _AMD_MI250X, 3276.8, fp64=95.7, fp32=95.7, bf16=383, fp16=383)),
    (r"MI250", _entry("AMD Instinct MI250", _AMD_MI250, 3276.8, fp64=90.5, fp32=90.5, bf16=362.1, fp16=362.1)),
)

# FLOPs one SM does per clock at each precision (dense; fp64 on tensor cores where they take
# it), by compute capability: Volta 7.0, Ampere GA100 8.0, Hopper 9.0, from NVIDIA's
# architecture whitepapers (V100: 80 SMs x 1.53 GHz x 128 = 15.7 TFLOP/s fp32, as its datasheet).
_PER_SM_CLOCK = {
    (7, 0): {"fp64": 64, "fp32": 128, "fp16": 1024},
    (8, 0): {"fp64": 128, "fp32": 128, "tf32": 1024, "bf16": 2048, "fp16": 2048},
    (9, 0): {"fp64": 256, "fp32": 256, "tf32": 2048, "bf16": 4096, "fp16": 4096, "fp8": 8192},
}
_WHITEPAPERS = "NVIDIA's Volta, Ampere and Hopper architecture whitepapers (FLOPs per SM per clock)"


def from_table(device_name: str | None) -> Limits | None:
    """The datasheet limits of the first ``DEVICES`` entry the device's name matches."""
    if not device_name:
        return None
    for pattern, limits in DEVICES:
        if re.search(pattern, device_name, re.IGNORECASE):
            return limits
    return None


def from_properties(device_name: str | None, properties: dict[str, Any]) -> Limits | None:
    """Limits from what the profile says of its device (``clock_rate`` in kHz, ``core_count``
    SMs, ``compute_capability`` ``major.minor``, ``memory_bandwidth`` bytes/s); the peak
    FLOP/s only for a compute capability ``_PER_SM_CLOCK`` knows, else None for them."""
    bandwidth = _positive(properties.get("memory_bandwidth"))
    clock_khz, cores = _positive(properties.get("clock_rate")), _positive(properties.get("core_count"))
    capability = str(properties.get("compute_capability") or "")
    per_clock = None
    if re.fullmatch(r"\d+\.\d+", capability):
        major, minor = capability.split(".")
        per_clock = _PER_SM_CLOCK.get((int(major), int(minor)))
    peaks: dict[str, float] = {}
    hardware = ""
    if per_clock and clock_khz and cores:
        peaks = {name: clock_khz * 1e3 * cores * flops for name, flops in per_clock.items()}
        hardware = f"clock {clock_khz / 1e6:g} GHz x {cores:g} SMs x {_WHITEPAPERS}"
    if not peaks and not bandwidth:
        return None
    parts = ["the profile's device plane (memory bandwidth" if bandwidth else "the profile's device plane ("]
    if peaks:
        parts.append(f"{', ' if bandwidth else ''}{hardware}")
    return Limits(device_name or "the profile's device", peaks, bandwidth, "".join(parts) + ")")


def from_sidecar(claim: dict[str, Any] | None) -> Limits | None:
    """The sidecar's ``device_limits``: ``{"peak_flops": {"fp32": 1.2e12, ...},
    "memory_bandwidth": 5e10, "device": ..., "source": ...}``; None where it gives neither a
    usable peak nor a bandwidth (a value must be a positive number)."""
    if not isinstance(claim, dict):
        return None
    flops = claim.get("peak_flops")
    if not isinstance(flops, dict):
        flops = {}
    peaks: dict[str, float] = {}
    for name, value in flops.items():
        precision = canonical_precision(str(name))
        if precision in PRECISIONS and _positive(value):
            peaks[precision] = float(value)
    bandwidth = _positive(claim.get("memory_bandwidth"))
    if not peaks and not bandwidth:
        return None
    device, source = claim.get("device"), claim.get("source")
    if not isinstance(device, str):
        device = "as the sidecar says"
    if not isinstance(source, str):
        source = "not given"
    return Limits(
        device[:80], peaks, bandwidth, f"the run's sidecar (opcompare.json device_limits; its source: {source[:200]})"
    )


def _positive(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


def device_limits(device_name: str | None, properties: dict[str, Any], claim: dict[str, Any] | None) -> Limits | None:
    """A run's device limits: each figure from the first that gives it of the sidecar, the
    profile and the table (a sidecar that gives only a bandwidth keeps the peaks found
    elsewhere)."""
    found = [
        limits
        for limits in (from_sidecar(claim), from_properties(device_name, properties), from_table(device_name))
        if limits
    ]
    if not found:
        return None
    peaks_from = next((limits for limits in found if limits.peak_flops), found[0])
    bandwidth_from = next((limits for limits in found if limits.memory_bandwidth), found[0])
    sources = [peaks_from.source] + ([bandwidth_from.source] if bandwidth_from is not peaks_from else [])
    return Limits(
        peaks_from.device,
        dict(peaks_from.peak_flops),
        bandwidth_from.memory_bandwidth,
        "; memory bandwidth: ".join(sources),
    )


def roof_precision(limits: Limits, precision: str | None) -> str | None:
    """The precision whose peak is a run's compute roof: the run's own; of a mix
    (``mixed bf16/fp32``), the one of the highest peak; unknown, the highest peak (an upper
    bound). None where the limits give no peak for it."""
    names = re.findall(r"fp64|fp32|tf32|bf16|fp16|fp8", precision or "") or list(limits.peak_flops)
    known = [name for name in names if name in limits.peak_flops]
    return max(known, key=lambda name: limits.peak_flops[name]) if known else None
