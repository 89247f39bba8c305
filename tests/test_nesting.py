"""Self time by nesting (``optable.self_times``, vectorised) against a plain stack walk,
the way the profilers' own tools compute it, on generated threads of events."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_opcompare.schema.events import self_times


def stack_walk(starts: list[float], durations: list[float]) -> tuple[list[float], list[int]]:
    """One event at a time: close every open event that ended by this start; the
    innermost still open encloses it."""
    selfs, parents, open_events = list(durations), [-1] * len(starts), []
    for index, (start, duration) in enumerate(zip(starts, durations)):
        while open_events and starts[open_events[-1]] + durations[open_events[-1]] <= start:
            open_events.pop()
        if open_events:
            parent = open_events[-1]
            parents[index] = parent
            selfs[parent] -= min(start + duration, starts[parent] + durations[parent]) - start
        open_events.append(index)
    return [max(value, 0.0) for value in selfs], parents


events = st.lists(st.tuples(st.integers(0, 200), st.integers(0, 60)), max_size=300)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(events)
def test_self_times_match_a_stack_walk(pairs):
    # Sorted as readers sort a thread: by start, longer first on ties. Generated events
    # overlap partially as often as they nest, which real threads rarely do.
    pairs.sort(key=lambda pair: (pair[0], -pair[1]))
    starts = [float(start) for start, _ in pairs]
    durations = [float(duration) for _, duration in pairs]
    expected_selfs, expected_parents = stack_walk(starts, durations)
    selfs, parents = self_times(starts, durations)
    assert parents.tolist() == expected_parents
    assert np.allclose(selfs, expected_selfs)


def test_deep_and_wide_threads():
    count = 50_000
    deep_starts = np.arange(count, dtype=float)
    deep = self_times(deep_starts, 2.0 * count - 2.0 * deep_starts)  # each inside the one before
    assert deep[1].tolist() == list(range(-1, count - 1))
    siblings = self_times(np.arange(count, dtype=float), np.full(count, 0.5))
    assert (siblings[1] == -1).all() and (siblings[0] == 0.5).all()


def test_an_event_that_outlives_its_parent_takes_only_the_shared_time():
    """A 0–100 µs and B 50–150 µs on one thread: B starts inside A but does not end there.
    A keeps the 50 µs it ran alone, not 0, and the crossing is counted for a warning."""
    from tb_opcompare.schema.events import crossing_events

    selfs, parents = self_times([0.0, 50.0], [100.0, 100.0])
    assert parents.tolist() == [-1, 0]
    assert selfs.tolist() == [50.0, 100.0]
    assert crossing_events([0.0, 50.0], [100.0, 100.0], parents) == 1
    nested, nested_parents = self_times([0.0, 50.0], [100.0, 20.0])
    assert nested.tolist() == [80.0, 20.0] and crossing_events([0.0, 50.0], [100.0, 20.0], nested_parents) == 0


def test_start_order_is_nestings_order_by_start_longest_first():
    """``start_order`` replaces ``np.lexsort((-durations, starts))`` on the xplane reader's
    big lines (one stable pass over starts a thread almost keeps sorted): the same order,
    ties of start and of both included, sorted or not."""
    import numpy as np

    from tb_opcompare.schema.events import start_order

    rng = np.random.default_rng(11)
    for trial in range(400):
        count = int(rng.integers(0, 3000))
        starts = rng.integers(0, max(1, count // int(rng.integers(1, 6))), count).astype(np.int64)
        if trial % 2:
            starts.sort()
        durations = rng.integers(0, 4, count).astype(np.int64)
        assert np.array_equal(start_order(starts, durations), np.lexsort((-durations, starts))), trial
