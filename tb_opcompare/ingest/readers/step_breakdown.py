"""Each step's wall time split by what it was spent on (issue 53): the readers say what each
event of the thread that drives the step is (its own category, or its enclosing event's),
and this adds it up, step by step, in the same words for every format
(``schema.events.STEP_CATEGORIES``).

Host: each moment of a step on the driving thread counts once, under the innermost event
open then (an event's self time), so the categories add up to the step's wall time.
Moments when the driving thread runs nothing are the backward pass where another thread
of the process runs it then (PyTorch's autograd engine runs a GPU model's backward on a
thread of its own while the Python thread waits), else untracked (Python, gaps).

Where no one thread drives the step (a TF graph runs its ops on a pool of threads, the
Python thread waiting), the moments of the step are split instead by what any host thread
ran then, each moment once, to the first category of a priority order that holds it
(``layered_host_rows``); a moment no host thread ran anything is waiting on the device where
the device ran then, else untracked.

Device: the accelerator's time in the step, by what ran (communication before compute
before copies, where streams overlap) and idle, which add up to the step's wall time too.

Plain arrays in, columns out (``BREAKDOWN_COLUMNS``): no I/O.
"""

from __future__ import annotations

import numpy as np

from tb_opcompare.schema.dimensions import DEVICE_STEP_CATEGORIES, STEP_CATEGORIES
from tb_opcompare.schema.events import DEVICE, HOST

HOST_CODES = {name: code for code, name in enumerate(STEP_CATEGORIES)}
DEVICE_CODES = {name: code for code, name in enumerate(DEVICE_STEP_CATEGORIES)}
NONE = -1  # an event with no category of its own: its enclosing event's


def decided_categories(parents: np.ndarray, own: np.ndarray, sticky: np.ndarray) -> np.ndarray:
    """Each event's category: the nearest enclosing event's (itself included) whose
    category is ``sticky`` (everything inside waiting for input is waiting for input),
    else its own, else the nearest enclosing event's that has one, else ``forward``.
    ``parents``: each event's enclosing event (-1: none); ``own``: its own category code
    or ``NONE``; ``sticky``: per category code. Pointer jumping: log(depth) passes."""
    if not len(own):
        return own.copy()
    is_sticky = np.zeros(len(own), dtype=bool)
    has_own = own >= 0
    is_sticky[has_own] = sticky[own[has_own]]
    sticky_owner = _nearest(parents, is_sticky)
    owner = _nearest(parents, has_own)
    decided = np.where(owner >= 0, own[owner.clip(min=0)], HOST_CODES["forward"])
    return np.where(sticky_owner >= 0, own[sticky_owner.clip(min=0)], decided)


def _nearest(parents: np.ndarray, marked: np.ndarray) -> np.ndarray:
    """Each event's nearest enclosing-or-self event that is ``marked`` (-1: none): each
    pass jumps every pointer to where its target points, doubling the reach."""
    up = np.where(marked, np.arange(len(parents)), parents)
    while True:
        pending = np.flatnonzero((up >= 0) & ~marked[up.clip(min=0)])
        if not len(pending):
            return up
        up[pending] = up[up[pending]]


def union(starts: np.ndarray, ends: np.ndarray, presorted: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The disjoint intervals, sorted, that cover the given ones (``presorted``: already in
    start order)."""
    if not len(starts):
        return np.zeros(0), np.zeros(0)
    if not presorted:
        order = np.argsort(starts, kind="stable")
        starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    opens = np.concatenate([[True], starts[1:] > reach[:-1]])
    firsts = np.flatnonzero(opens)
    return starts[firsts], np.maximum.reduceat(ends, firsts)


def measure_in(bounds: np.ndarray, covered: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """The time of each (start, end) row of ``bounds`` that the disjoint sorted intervals
    ``covered`` cover."""
    starts, ends = covered
    if not len(starts) or not len(bounds):
        return np.zeros(len(bounds))
    before = np.concatenate([[0.0], np.cumsum(ends - starts)])

    def covered_until(times: np.ndarray) -> np.ndarray:
        block = np.searchsorted(starts, times, side="right") - 1
        inside = np.clip(times - starts[block.clip(min=0)], 0.0, (ends - starts)[block.clip(min=0)])
        return np.where(block >= 0, before[block.clip(min=0)] + inside, 0.0)

    return covered_until(bounds[:, 1]) - covered_until(bounds[:, 0])


def host_rows(
    bounds: np.ndarray,
    step: np.ndarray,
    category: np.ndarray,
    self_us: np.ndarray,
    covered: tuple[np.ndarray, np.ndarray],
    backward_elsewhere: tuple[np.ndarray, np.ndarray],
) -> dict[str, list]:
    """The host rows of the steps ``bounds`` ((start, end), sorted): the self time of the
    driving thread's events (``step``: each one's step index; ``category``: its decided
    category code) summed by category; the moments it ran nothing, the backward pass where
    ``backward_elsewhere`` (intervals of other threads) covers them, else untracked.
    ``covered``: the driving thread's busy intervals (its outermost events)."""
    count = len(STEP_CATEGORIES)
    sums = np.bincount(step * count + category, weights=self_us, minlength=len(bounds) * count)
    sums = sums[: len(bounds) * count].reshape(len(bounds), count)
    busy = measure_in(bounds, covered)
    either = measure_in(
        bounds,
        union(np.concatenate([covered[0], backward_elsewhere[0]]), np.concatenate([covered[1], backward_elsewhere[1]])),
    )
    sums[:, HOST_CODES["backward"]] += either - busy
    walls = bounds[:, 1] - bounds[:, 0]
    sums[:, HOST_CODES["untracked"]] += np.maximum(walls - sums.sum(axis=1), 0.0)
    return _rows(sums, HOST, list(STEP_CATEGORIES))


# Which category a moment counts under where host threads ran several side by side: what
# the step waits on first, then the work by phase.
LAYER_ORDER = ("input", "communication", "copy", "launch", "optimizer", "backward", "forward")


def layered_host_rows(
    bounds: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    category: np.ndarray,
    device_busy: tuple[np.ndarray, np.ndarray] | None = None,
) -> dict[str, list]:
    """The host rows of the steps ``bounds``, where host events (``category``: each one's
    code) ran on several threads at once: each moment under the first category of
    ``LAYER_ORDER`` any event holding it has; moments no host event holds, waiting on the
    device where ``device_busy`` covers them, else untracked."""
    return layered_rows(bounds, *layered_host_sums(bounds, starts, ends, category), device_busy)


def layered_host_sums(
    bounds: np.ndarray, starts: np.ndarray, ends: np.ndarray, category: np.ndarray, presorted: bool = False
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """(each step's time by category code, the moments any host event holds) of
    ``layered_host_rows``, before the device is known: a reader that meets the device
    later keeps these, not every host event. ``presorted``: the events are in start order."""
    sums = np.zeros((len(bounds), len(STEP_CATEGORIES)))
    mask = np.zeros(len(category), dtype=bool)
    previous, busy = np.zeros(len(bounds)), union(starts[:0], ends[:0])
    for name in LAYER_ORDER:
        layer = category == HOST_CODES[name]
        if not layer.any():  # a category no event has adds nothing: no pass over the events
            continue
        mask |= layer
        every = mask.all()  # the last layer of most steps: no copy of the events
        busy = union(starts if every else starts[mask], ends if every else ends[mask], presorted)
        covered = measure_in(bounds, busy)
        sums[:, HOST_CODES[name]] = covered - previous
        previous = covered
    return sums, busy


def layered_rows(
    bounds: np.ndarray,
    sums: np.ndarray,
    host_busy: tuple[np.ndarray, np.ndarray],
    device_busy: tuple[np.ndarray, np.ndarray] | None,
) -> dict[str, list]:
    """The host rows from ``layered_host_sums``: the moments no host event holds are
    waiting on the device where ``device_busy`` covers them, else untracked."""
    sums = sums.copy()
    previous = sums.sum(axis=1)
    if device_busy is not None and len(device_busy[0]):
        either = measure_in(
            bounds,
            union(np.concatenate([host_busy[0], device_busy[0]]), np.concatenate([host_busy[1], device_busy[1]])),
        )
        sums[:, HOST_CODES["device_wait"]] = either - previous
        previous = either
    sums[:, HOST_CODES["untracked"]] = np.maximum((bounds[:, 1] - bounds[:, 0]) - previous, 0.0)
    return _rows(sums, HOST, list(STEP_CATEGORIES))


def device_rows(bounds: np.ndarray, starts: np.ndarray, ends: np.ndarray, kind: np.ndarray) -> dict[str, list]:
    """The device rows of the steps ``bounds``: the time in each step any stream ran
    communication, else compute, else copies (``kind``: each device event's code of
    ``device_communication``, ``device_compute`` or ``device_copy``), and idle."""
    layers = []
    mask = np.zeros(len(kind), dtype=bool)
    for name in ("device_communication", "device_compute", "device_copy"):
        mask |= kind == DEVICE_CODES[name]
        layers.append(measure_in(bounds, union(starts[mask], ends[mask])))
    sums = np.zeros((len(bounds), len(DEVICE_STEP_CATEGORIES)))
    previous = np.zeros(len(bounds))
    for name, covered in zip(("device_communication", "device_compute", "device_copy"), layers):
        sums[:, DEVICE_CODES[name]] = covered - previous
        previous = covered
    sums[:, DEVICE_CODES["device_idle"]] = (bounds[:, 1] - bounds[:, 0]) - previous
    return _rows(sums, DEVICE, list(DEVICE_STEP_CATEGORIES))


def _rows(sums: np.ndarray, side: str, names: list[str]) -> dict[str, list]:
    """One row per step and category with time in it."""
    steps, codes = np.nonzero(sums > 0)
    return {
        "step": steps.tolist(),
        "side": [side] * len(steps),
        "category": [names[code] for code in codes.tolist()],
        "time_us": sums[steps, codes].tolist(),
    }


def joined(*parts: dict[str, list]) -> dict[str, list]:
    """Columns of several row sets, one after the other."""
    return {column: [value for part in parts for value in part[column]] for column in parts[0]}
