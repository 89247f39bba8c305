"""Memory in use over time, as the readers hand it to ``OpProfile.memory_table``.

A profile records memory in use at every allocation and free (PyTorch's ``Total
Allocated``, TF's ``bytes_allocated``): tens of thousands of samples on a real model, more
than a figure needs. Each device keeps at most ``MEMORY_TIMELINE_POINTS`` samples: its
window cut into half that many stretches of equal time, and from each the sample that held
the least and the one that held the most, each at its own time. So the thinned series
reaches the run's peak exactly and still drops where memory was released between steps,
where an average or a sample picked at random would cut both off.
"""

from __future__ import annotations

import numpy as np

from tb_opcompare.schema.events import MEMORY_TIMELINE_POINTS


def highest_per_device(device_codes, bytes_in_use, count: int) -> np.ndarray:
    """Each of ``count`` devices' highest memory in use among these samples (0 for a
    device without one): the run's peak, from the samples its timeline is made of."""
    highest = np.zeros(count)
    np.maximum.at(highest, np.asarray(device_codes, dtype=np.int64), np.asarray(bytes_in_use, dtype=np.float64))
    return highest


def memory_timeline(
    devices: list[str],
    device_codes: np.ndarray,
    times_us: np.ndarray,
    bytes_in_use: np.ndarray,
    points: int = MEMORY_TIMELINE_POINTS,
) -> dict | None:
    """The ``memory_timeline`` table's columns (None: no sample) of these samples: ``device_codes`` index ``devices``;
    ``times_us`` on any clock (the result counts from the earliest sample of all
    devices); samples of one time keep their order here. Devices by name, each in time
    order."""
    codes = np.asarray(device_codes, dtype=np.int64)
    times = np.asarray(times_us, dtype=np.float64)
    values = np.asarray(bytes_in_use, dtype=np.float64)
    if not len(codes):
        return None
    times = times - times.min()
    order = np.lexsort((times, codes))  # stable: samples of one time stay in the order recorded
    codes, times, values = codes[order], times[order], values[order]
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    ends = np.r_[starts[1:], len(codes)]
    kept_parts = []
    for start, end in sorted(zip(starts.tolist(), ends.tolist()), key=lambda bounds: devices[codes[bounds[0]]]):
        kept_parts.append(start + _extremes_per_stretch(times[start:end], values[start:end], points))
    kept = np.concatenate(kept_parts)
    names = np.asarray(devices, dtype=object)
    return {"device": names[codes[kept]], "time_us": times[kept], "bytes_in_use": values[kept]}


def _extremes_per_stretch(times: np.ndarray, values: np.ndarray, points: int) -> np.ndarray:
    """Positions of the samples kept of one device's series (sorted by time): all of them
    up to ``points``, else the lowest and the highest of each of ``points // 2`` stretches
    of equal time (the first of equal values)."""
    if len(times) <= points:
        return np.arange(len(times))
    stretches = max(points // 2, 1)
    span = times[-1] - times[0]
    stretch = (
        np.floor((times - times[0]) / span * stretches).astype(np.int64).clip(max=stretches - 1)
        if span > 0
        else np.zeros(len(times), dtype=np.int64)
    )
    kept = []
    for sign in (-1, 1):  # each stretch's samples, the highest first, then the lowest first
        by_value = np.lexsort((sign * values, stretch))
        kept.append(by_value[np.r_[True, stretch[by_value][1:] != stretch[by_value][:-1]]])
    return np.unique(np.concatenate(kept))
