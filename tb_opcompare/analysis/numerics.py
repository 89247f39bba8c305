"""Numbers that come out the same on every machine, and decisions on them that rounding
noise cannot flip.

A BLAS kernel, a CPU's vector width or a numpy release changes the last bits of a
least-squares fit or of a vectorised logarithm. Users compare outputs across machines
(a CI gate, a teammate's report), so:

- the few results whose last bits BLAS or SIMD decide are computed here with plain IEEE
  arithmetic and exactly rounded sums (``math.fsum``), which every machine does alike;
- a flag or verdict drawn from a number near its threshold (a poor fit, a noisy op, a
  significant change) decides on the number at ``SIGNIFICANT_DIGITS`` (``settled``), so
  values within rounding noise of the threshold itself (a ratio of 1, an R² of 0.9
  computed a few ulps either side) get one verdict on every machine. A boundary remains,
  half a unit in the ninth digit away from the threshold: a value that lands within an
  ulp of it (odds of about one in 10^7 per flag) could still flip. The golden tier
  compares numbers at the same tolerance.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

SIGNIFICANT_DIGITS = 9


def settled(value: float) -> float:
    """``value`` at ``SIGNIFICANT_DIGITS`` significant digits (CPython's decimal rounding,
    the same on every machine); NaN and infinities stay as they are."""
    return float(f"{value:.{SIGNIFICANT_DIGITS - 1}e}") if math.isfinite(value) else value


def above(values: ArrayLike, limits: ArrayLike) -> Any:
    """``settled(values) > limits`` for floats or arrays (a limit per value, or one for
    all), deciding with the settled value only where it can differ from the raw one:
    within a millionth of the limit (cheap on large arrays, where a string per value
    would not be)."""
    return _decide(values, limits, np.greater)


def below(values: ArrayLike, limits: ArrayLike) -> Any:
    """``settled(values) < limits``, as ``above``."""
    return _decide(values, limits, np.less)


def at_most(values: ArrayLike, limits: ArrayLike) -> Any:
    """``settled(values) <= limits``, as ``above``."""
    return _decide(values, limits, np.less_equal)


def _decide(values: ArrayLike, limits: ArrayLike, compare: Callable[..., Any]) -> Any:
    array, limit = np.broadcast_arrays(np.asarray(values, dtype="float64"), np.asarray(limits, dtype="float64"))
    decided = np.array(compare(array, limit))
    with np.errstate(invalid="ignore"):
        near = np.abs(array - limit) <= 1e-6 * np.maximum(np.abs(limit), 1e-300)
    if near.any():
        decided[near] = [
            compare(settled(value), bound) for value, bound in zip(array[near].tolist(), limit[near].tolist())
        ]
    return bool(decided) if decided.ndim == 0 else decided


def line_fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least squares ``y = intercept + slope * x`` (at least two distinct x): the slope
    and the intercept, from exactly rounded centred sums, so every machine gets the same
    bits (``np.polyfit`` goes through LAPACK, whose last bits depend on the BLAS)."""
    xs, ys = [float(value) for value in x], [float(value) for value in y]
    count = len(xs)
    x_mean, y_mean = math.fsum(xs) / count, math.fsum(ys) / count
    spread = math.fsum((value - x_mean) ** 2 for value in xs)
    slope = math.fsum((a - x_mean) * (b - y_mean) for a, b in zip(xs, ys)) / spread
    return slope, y_mean - slope * x_mean


def geometric_mean(values: np.ndarray) -> float | None:
    """exp(mean(log)) of positive values, the sum exactly rounded; None when empty."""
    if not len(values):
        return None
    return math.exp(math.fsum(map(math.log, np.asarray(values, dtype=np.float64).tolist())) / len(values))


def is_missing(value: object) -> bool:
    """Whether a table's value is missing: None, NaN, or pandas' NA (which compares to
    nothing, not even itself, as NA)."""
    if value is None:
        return True
    try:
        return not bool(value == value)
    except TypeError:  # pandas' NA: its truth is ambiguous
        return True


def finite_or_none(value: object) -> Any:
    """JSON has no NaN: missing numbers (None, NaN, infinities, pandas' NA) become null;
    numpy scalars become Python's. pandas' NA exists only where pandas is loaded, so this
    needs no pandas of its own (``runs --lazy`` imports none). Nor does it wait for pandas:
    in TensorBoard another request's thread may be importing it (the routes of the other
    views import it on first use), and a module half imported has no ``NA`` yet (nor can a
    value be it)."""
    if value is None or value is getattr(sys.modules.get("pandas"), "NA", None):
        return None
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(value) or math.isinf(value) else float(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value
